// Per-element bodies of the CUDA kernels whose index arithmetic is worth checking on a machine without a GPU:
// Einsum's direct sum and Resize / ResizeGrad over their tap tables. Each is a plain function of its
// arguments and one output index, compiled as __host__ __device__ by nvcc (the .cu files launch one thread
// per output) and as ordinary C++ elsewhere, where tests/parity/device_math_test.cc runs it over every
// output and compares with the CPU kernels. Nothing here includes a CUDA header.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define ONT_HD __host__ __device__
#else
#define ONT_HD
#endif

namespace ontrain {
namespace cuda {

// Einsum's direct loop (providers/cpu/kernels/plans.h, EinsumDirectPlan) in fixed-size arrays.
constexpr int kEinsumMaxOperands = 4;
constexpr int kEinsumMaxLetters = 24;
struct EinsumArgs {
  int operands = 0, out_rank = 0, sum_rank = 0;
  int out_letter[kEinsumMaxLetters] = {}, sum_letter[kEinsumMaxLetters] = {};
  int64_t out_size[kEinsumMaxLetters] = {}, sum_size[kEinsumMaxLetters] = {};
  int64_t sum_count = 1;
  int terms[kEinsumMaxOperands] = {};  // per operand, its (letter, stride) pairs
  int term_letter[kEinsumMaxOperands][kEinsumMaxLetters] = {};
  int64_t term_stride[kEinsumMaxOperands][kEinsumMaxLetters] = {};
};
template <typename T>
struct EinsumOperands {
  const T* op[kEinsumMaxOperands];
};

// Y[o]: the product of the operands summed over the summed letters, in double, in the CPU's order.
template <typename T>
ONT_HD inline T EinsumElement(const EinsumArgs& a, const EinsumOperands<T>& x, int64_t o) {
  int64_t at[kEinsumMaxLetters];
  int64_t rem = o;
  for (int d = a.out_rank - 1; d >= 0; --d) {
    at[a.out_letter[d]] = rem % a.out_size[d];
    rem /= a.out_size[d];
  }
  double acc = 0;
  for (int64_t s = 0; s < a.sum_count; ++s) {
    int64_t r2 = s;
    for (int d = a.sum_rank - 1; d >= 0; --d) {
      at[a.sum_letter[d]] = r2 % a.sum_size[d];
      r2 /= a.sum_size[d];
    }
    double term = 1;
    for (int k = 0; k < a.operands; ++k) {
      int64_t off = 0;
      for (int t = 0; t < a.terms[k]; ++t) off += at[a.term_letter[k][t]] * a.term_stride[k][t];
      term *= static_cast<double>(x.op[k][off]);
    }
    acc += term;
  }
  return static_cast<T>(acc);
}

// Resize's taps (providers/cpu/kernels/plans.h, AxisTaps) as offsets into three flat device tables, with
// their transposes for ResizeGrad: for input coordinate i of axis d, entries [inv_begin[i], inv_begin[i +
// 1]) of (output coordinate, weight), by output coordinate and then tap.
constexpr int kResizeMaxRank = 8;
struct ResizeArgs {
  int rank = 0;
  int64_t in[kResizeMaxRank] = {}, out[kResizeMaxRank] = {};
  // offsets into ResizeTables::ints
  int64_t begin[kResizeMaxRank] = {}, index[kResizeMaxRank] = {}, inv_begin[kResizeMaxRank] = {},
          inv_out[kResizeMaxRank] = {};
  // offsets into ResizeTables::weights
  int64_t weight[kResizeMaxRank] = {}, inv_weight[kResizeMaxRank] = {};
  int64_t outside[kResizeMaxRank] = {};  // offsets into ResizeTables::flags
  double extrapolation = 0;
};
struct ResizeTables {
  const int64_t* ints;
  const double* weights;
  const uint8_t* flags;
};

// Y[o] of Resize, as the CPU kernel computes it.
template <typename T>
ONT_HD inline T ResizeElement(const ResizeArgs& a, const ResizeTables& t, const T* x, int64_t o) {
  int64_t coord[kResizeMaxRank], pos[kResizeMaxRank], end[kResizeMaxRank], in_stride[kResizeMaxRank];
  int64_t rem = o;
  bool outside = false;
  for (int d = a.rank - 1; d >= 0; --d) {
    coord[d] = rem % a.out[d];
    rem /= a.out[d];
    outside = outside || t.flags[a.outside[d] + coord[d]] != 0;
  }
  if (outside) return static_cast<T>(a.extrapolation);
  int64_t s = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    in_stride[d] = s;
    s *= a.in[d];
    pos[d] = t.ints[a.begin[d] + coord[d]];
    end[d] = t.ints[a.begin[d] + coord[d] + 1];
    if (pos[d] == end[d]) return T(0);  // every weight was 0
  }
  double acc = 0;
  for (;;) {
    int64_t at = 0;
    double w = 1;
    for (int d = 0; d < a.rank; ++d) {
      at += t.ints[a.index[d] + pos[d]] * in_stride[d];
      w *= t.weights[a.weight[d] + pos[d]];
    }
    acc += w * static_cast<double>(x[at]);
    int d = a.rank - 1;
    for (; d >= 0; --d) {
      if (++pos[d] < end[d]) break;
      pos[d] = t.ints[a.begin[d] + coord[d]];
    }
    if (d < 0) break;
  }
  return static_cast<T>(acc);
}

// dX[i] of ResizeGrad: dY times the weights of every tap that read X[i], as a gather (no atomics), in
// double. Contributions come by output coordinate per axis, axis 0 outermost.
template <typename T>
ONT_HD inline T ResizeGradElement(const ResizeArgs& a, const ResizeTables& t, const T* dy, int64_t i) {
  int64_t coord[kResizeMaxRank], pos[kResizeMaxRank], end[kResizeMaxRank], out_stride[kResizeMaxRank];
  int64_t rem = i, s = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    coord[d] = rem % a.in[d];
    rem /= a.in[d];
    out_stride[d] = s;
    s *= a.out[d];
    pos[d] = t.ints[a.inv_begin[d] + coord[d]];
    end[d] = t.ints[a.inv_begin[d] + coord[d] + 1];
  }
  for (int d = 0; d < a.rank; ++d) {
    if (pos[d] == end[d]) return T(0);  // no output reads this coordinate
  }
  double acc = 0;
  for (;;) {
    int64_t at = 0;
    double w = 1;
    for (int d = 0; d < a.rank; ++d) {
      at += t.ints[a.inv_out[d] + pos[d]] * out_stride[d];
      w *= t.weights[a.inv_weight[d] + pos[d]];
    }
    acc += w * static_cast<double>(dy[at]);
    int d = a.rank - 1;
    for (; d >= 0; --d) {
      if (++pos[d] < end[d]) break;
      pos[d] = t.ints[a.inv_begin[d] + coord[d]];
    }
    if (d < 0) break;
  }
  return static_cast<T>(acc);
}


// ---- Index ops: Trilu, CumSum, GatherElements, ScatterElements, GatherND, ScatterND, TopK -----------------

// An index (int32 or int64) at position i, negative ones counted from the end; -1 when outside [0, dim).
ONT_HD inline int64_t WrapIndex(const void* idx, bool idx64, int64_t i, int64_t dim) {
  int64_t v = idx64 ? static_cast<const int64_t*>(idx)[i] : static_cast<const int32_t*>(idx)[i];
  if (v < 0) v += dim;
  return v >= 0 && v < dim ? v : -1;
}

// Trilu over matrices [.., rows, cols]: whether element o is kept (else 0).
struct TriluArgs {
  int64_t rows = 1, cols = 1, k = 0;
  bool upper = true;
};
ONT_HD inline bool TriluKeeps(const TriluArgs& a, int64_t o) {
  const int64_t j = o % a.cols, i = (o / a.cols) % a.rows;
  return a.upper ? j - i >= a.k : j - i <= a.k;
}

// CumSum of one line (outer o, inner i) of x viewed as [outer, len, inner], accumulated in T.
template <typename T>
ONT_HD inline void CumSumLine(const T* x, T* y, int64_t line, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  const int64_t o = line / inner, i = line % inner;
  T acc = T(0);
  for (int64_t s = 0; s < len; ++s) {
    const int64_t k = reverse ? len - 1 - s : s;
    const int64_t at = (o * len + k) * inner + i;
    const T v = x[at];
    if (!exclusive) acc += v;
    y[at] = acc;
    if (exclusive) acc += v;
  }
}

// Reductions of ScatterElements and ScatterND, as the CPU applies them (max and min as std::max / std::min).
enum ScatterReduction { kScatterNone, kScatterAdd, kScatterMul, kScatterMax, kScatterMin };
template <typename T>
ONT_HD inline void ScatterApply(int red, T* dst, T v) {
  const T a = *dst;
  switch (red) {
    case kScatterNone: *dst = v; break;
    case kScatterAdd: *dst = a + v; break;
    case kScatterMul: *dst = a * v; break;
    case kScatterMax: *dst = a < v ? v : a; break;
    case kScatterMin: *dst = v < a ? v : a; break;
  }
}

// GatherElements / ScatterElements geometry: data dims and indices dims (same rank), and the axis.
struct ElementsArgs {
  int rank = 0, axis = 0;
  int64_t data[kResizeMaxRank] = {}, idx[kResizeMaxRank] = {};
};
// The data offset that indices element o reads (GatherElements) or writes (ScatterElements); -1 when its
// index is out of range.
ONT_HD inline int64_t ElementsOffset(const ElementsArgs& a, const void* idx, bool idx64, int64_t o) {
  int64_t rem = o, off = 0, stride = 1;
  for (int d = a.rank - 1; d >= 0; --d) {
    int64_t c = rem % a.idx[d];
    rem /= a.idx[d];
    if (d == a.axis) {
      c = WrapIndex(idx, idx64, o, a.data[d]);
      if (c < 0) return -1;
    }
    off += c * stride;
    stride *= a.data[d];
  }
  return off;
}
// ScatterElements of one line of the indices along the axis (every other coordinate fixed), in order: two
// updates of one target always share a line, so each line is one thread's and the CPU's order is kept.
template <typename T>
ONT_HD inline void ScatterElementsLine(const ElementsArgs& a, const void* idx, bool idx64, const T* updates, T* out,
                                       int red, int64_t line) {
  int64_t inner = 1;
  for (int d = a.axis + 1; d < a.rank; ++d) inner *= a.idx[d];
  const int64_t len = a.idx[a.axis], o = line / inner, i = line % inner;
  for (int64_t s = 0; s < len; ++s) {
    const int64_t e = (o * len + s) * inner + i;
    const int64_t off = ElementsOffset(a, idx, idx64, e);
    if (off >= 0) ScatterApply(red, out + off, updates[e]);
  }
}

// GatherND / GatherNDGrad / ScatterND geometry (the CPU's NdGeometry): `batch` entries of `per_batch` index
// tuples of `k` values, each addressing a slice of `slice` elements in a batch entry of `data_batch`.
struct NdArgs {
  int64_t batch = 1, per_batch = 1, k = 0, slice = 1, data_batch = 1;
  int64_t dims[kResizeMaxRank] = {};  // the k indexed data dims
};
// Data offset of tuple t of batch entry b; -1 when an index is out of range.
ONT_HD inline int64_t NdOffset(const NdArgs& a, const void* idx, bool idx64, int64_t b, int64_t t) {
  int64_t off = 0;
  const int64_t base = (b * a.per_batch + t) * a.k;
  for (int64_t j = 0; j < a.k; ++j) {
    const int64_t i = WrapIndex(idx, idx64, base + j, a.dims[j]);
    if (i < 0) return -1;
    off = off * a.dims[j] + i;
  }
  return b * a.data_batch + off * a.slice;
}
// GatherNDGrad (red add) and ScatterND: element e of every slice of batch entry b, tuples in order.
template <typename T>
ONT_HD inline void NdScatterColumn(const NdArgs& a, const void* idx, bool idx64, const T* updates, T* out, int red,
                                   int64_t column) {
  const int64_t b = column / a.slice, e = column % a.slice;
  for (int64_t t = 0; t < a.per_batch; ++t) {
    const int64_t off = NdOffset(a, idx, idx64, b, t);
    if (off >= 0) ScatterApply(red, out + off + e, updates[(b * a.per_batch + t) * a.slice + e]);
  }
}

// TopK of one line (outer o, inner i) of x [outer, len, inner] into values and indices [outer, k, inner]:
// larger (or smaller) first, NaN as the largest, ties to the lower index; unsorted output in index order.
// Selection by repeated minimum over the total order (O(len k) per line: fine for the k of training graphs).
template <typename T>
ONT_HD inline bool TopKBefore(const T* row, int64_t inner, bool largest, int64_t a, int64_t b) {
  const T va = row[a * inner], vb = row[b * inner];
  const bool na = va != va, nb = vb != vb;
  if (na || nb) {
    if (na && nb) return a < b;
    return largest ? na : nb;
  }
  if (va != vb) return largest ? va > vb : va < vb;
  return a < b;
}
template <typename T>
ONT_HD inline void TopKLine(const T* x, T* values, int64_t* indices, int64_t len, int64_t inner, int64_t k, bool largest,
                            bool sorted, int64_t line) {
  const int64_t o = line / inner, i = line % inner;
  const T* row = x + o * len * inner + i;
  int64_t prev = -1;
  for (int64_t j = 0; j < k; ++j) {
    int64_t best = -1;
    for (int64_t e = 0; e < len; ++e) {
      if (prev >= 0 && !TopKBefore(row, inner, largest, prev, e)) continue;  // taken already
      if (best < 0 || TopKBefore(row, inner, largest, e, best)) best = e;
    }
    indices[(o * k + j) * inner + i] = best;
    prev = best;
  }
  if (!sorted) {  // index order: an insertion sort of the k indices
    for (int64_t j = 1; j < k; ++j) {
      const int64_t v = indices[(o * k + j) * inner + i];
      int64_t m = j - 1;
      for (; m >= 0 && indices[(o * k + m) * inner + i] > v; --m) indices[(o * k + m + 1) * inner + i] = indices[(o * k + m) * inner + i];
      indices[(o * k + m + 1) * inner + i] = v;
    }
  }
  for (int64_t j = 0; j < k; ++j) values[(o * k + j) * inner + i] = row[indices[(o * k + j) * inner + i] * inner];
}

}  // namespace cuda
}  // namespace ontrain
