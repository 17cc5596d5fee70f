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

}  // namespace cuda
}  // namespace ontrain
