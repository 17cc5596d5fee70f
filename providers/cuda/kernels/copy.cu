// Data movement on the device: the strided copy behind Transpose, Expand, Slice, Concat, Split and Tile,
// fills, Gather and GatherGrad.
#include <cstring>

#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

template <typename E>
__global__ void StridedCopyKernel(const E* src, E* dst, StridedSpace s, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) dst[OffsetIn(s, 0, i, n)] = src[OffsetIn(s, 1, i, n)];
}

template <typename E>
__global__ void PadKernel(const E* x, E* y, PadArgs a, int64_t n, E fill) {
  ONT_GRID_STRIDE_LOOP(o, n) {
    int64_t rem = o, off = 0, stride = 1;
    bool outside = false;
    for (int d = a.rank - 1; d >= 0; --d) {
      int64_t c = rem % a.out[d] - a.begin[d], dim = a.in[d];
      rem /= a.out[d];
      if (c < 0 || c >= dim) {
        if (a.mode == 0) {
          outside = true;
          break;
        }
        if (a.mode == 1) {
          c = c < 0 ? 0 : dim - 1;
        } else if (a.mode == 3) {
          c = ((c % dim) + dim) % dim;
        } else if (dim == 1) {
          c = 0;
        } else {
          int64_t period = 2 * (dim - 1);
          c = ((c % period) + period) % period;
          if (c >= dim) c = period - c;
        }
      }
      off += c * stride;
      stride *= dim;
    }
    y[o] = outside ? fill : x[off];
  }
}

template <typename E>
cudaError_t LaunchPad(const void* x, void* y, const PadArgs& a, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < a.rank; ++d) n *= a.out[d];
  if (n == 0) return cudaSuccess;
  E fill;
  std::memcpy(&fill, &a.fill, sizeof(E));
  PadKernel<E><<<Blocks(n), kThreads, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(y), a, n, fill);
  return cudaGetLastError();
}

template <typename E>
__global__ void FillKernel(E* dst, int64_t n, E value) {
  ONT_GRID_STRIDE_LOOP(i, n) dst[i] = value;
}

template <typename E>
__global__ void GatherKernel(const E* data, const void* indices, bool indices64, E* out, int64_t axis_len,
                             int64_t inner, int64_t n, int64_t total, int* bad) {
  ONT_GRID_STRIDE_LOOP(i, total) {
    int64_t k = i % inner, j = (i / inner) % n, o = i / (inner * n);
    int64_t idx = indices64 ? static_cast<const int64_t*>(indices)[j] : static_cast<const int32_t*>(indices)[j];
    if (idx < 0) idx += axis_len;
    if (idx < 0 || idx >= axis_len) {
      *bad = 1;
      out[i] = E(0);
    } else {
      out[i] = data[(o * axis_len + idx) * inner + k];
    }
  }
}

// GatherGrad, deterministic and without atomics: a warp per output row (o, r) and range of positions. The
// warp reads the range's indices 128 at a time (four coalesced loads), a ballot marks the positions j whose
// index is r, and the lanes add dy's rows at those positions to their columns (lane, lane + 32, ... of a
// 128-column pass; wider rows take more passes) in ascending j, taking the rows kGradHits at a time so that
// their loads are in flight together (a row used thousands of times, a padding token's, is otherwise one
// memory latency per use). With one range (n up to kGradRange positions) every output element sums its
// terms from 0 in the CPU kernel's order, the same bits; longer index lists are split into ranges whose
// partial sums (a workspace) a second kernel adds in range order, so a row's many uses are summed by many
// warps at once. (A GPT's token embedding, 4096 uses of one row: 0.45 ms a call as one serial chain.)
__device__ __forceinline__ int64_t IndexAt(const void* indices, bool indices64, int64_t j, int64_t rows) {
  int64_t idx = indices64 ? static_cast<const int64_t*>(indices)[j] : static_cast<const int32_t*>(indices)[j];
  if (idx < 0) idx += rows;
  return idx >= 0 && idx < rows ? idx : -1;  // out of range: no row (the CPU kernel's Prepare refuses it)
}

constexpr int kGradCols = 4;                 // columns a lane sums in one pass, and index loads per step
constexpr int kGradHits = 8;                 // dy rows whose loads are issued together
constexpr int64_t kGradRange = 512;          // positions a warp scans, where n is split into ranges
constexpr int64_t kGradMaxRanges = 64;
constexpr int64_t kGradMaxWorkspace = int64_t{16} << 20;  // floats of partial sums at most (64 MiB)

// Block (x: 8 output rows, y: range): range y covers positions [y * range, (y + 1) * range) of n; with more
// than one range, the unfinished sums go to partial[y, w, :] instead of out.
__global__ void GatherGradKernel(const float* dy, const void* indices, bool indices64, float* out, int64_t rows,
                                 int64_t inner, int64_t n, int64_t outer, int64_t range, float* partial) {
  const int64_t w = blockIdx.x * int64_t{kRowsPerBlock} + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (w >= outer * rows) return;  // whole warps leave together
  const int64_t r = w % rows;
  const int64_t first = blockIdx.y * range, end = first + range < n ? first + range : n;
  const float* src = dy + w / rows * n * inner;
  float* dst = (gridDim.y > 1 ? partial + blockIdx.y * outer * rows * inner : out) + w * inner;
  for (int64_t c0 = 0; c0 < inner; c0 += 32 * kGradCols) {
    float acc[kGradCols] = {};
    bool col[kGradCols];
    for (int k = 0; k < kGradCols; ++k) col[k] = c0 + k * 32 + lane < inner;
    for (int64_t base = first; base < end; base += 32 * kGradCols) {
      unsigned hit[kGradCols];
      for (int q = 0; q < kGradCols; ++q) {
        const int64_t j = base + q * 32 + lane;
        hit[q] = __ballot_sync(0xffffffffu, j < end && IndexAt(indices, indices64, j, rows) == r);
      }
      for (int q = 0; q < kGradCols; ++q) {
        for (unsigned m = hit[q]; m != 0;) {
          // The next kGradHits positions of this group of 32, in order: loads first, then the additions.
          float v[kGradHits][kGradCols];
          bool live[kGradHits];
          for (int h = 0; h < kGradHits; ++h) {
            live[h] = m != 0;
            const int64_t j = live[h] ? base + q * 32 + __ffs(m) - 1 : first;
            m &= m - 1;
            const float* row = src + j * inner + c0;
            for (int k = 0; k < kGradCols; ++k) v[h][k] = live[h] && col[k] ? row[k * 32 + lane] : 0.0f;
          }
          for (int h = 0; h < kGradHits; ++h) {
            if (!live[h]) break;
            for (int k = 0; k < kGradCols; ++k) acc[k] += v[h][k];
          }
        }
      }
    }
    for (int k = 0; k < kGradCols; ++k) {
      if (col[k]) dst[c0 + k * 32 + lane] = acc[k];
    }
  }
}

// The ranges' partial sums [ranges, total] added in range order into out [total].
__global__ void GatherGradCombineKernel(const float* partial, float* out, int64_t total, int64_t ranges) {
  ONT_GRID_STRIDE_LOOP(t, total) {
    float v = partial[t];
    for (int64_t z = 1; z < ranges; ++z) v += partial[z * total + t];
    out[t] = v;
  }
}

__global__ void GatherElementsGradKernel(const float* dy, const void* indices, bool indices64, float* dx,
                                         ElementsGradArgs a, int64_t n) {
  ONT_GRID_STRIDE_LOOP(p, n) {
    // dX coordinates of p; the dY line through them along the axis (when they lie inside dY).
    int64_t rem = p, base = 0, stride = 1, axis_stride = 1, target = 0;
    bool inside = true;
    for (int d = a.rank - 1; d >= 0; --d) {
      int64_t c = rem % a.x[d];
      rem /= a.x[d];
      if (d == a.axis) {
        target = c;
        axis_stride = stride;
      } else {
        if (c >= a.y[d]) inside = false;
        base += c * stride;
      }
      stride *= a.y[d];
    }
    float acc = 0.0f;
    if (inside) {
      for (int64_t j = 0; j < a.y[a.axis]; ++j) {
        int64_t q = base + j * axis_stride;
        int64_t idx = indices64 ? static_cast<const int64_t*>(indices)[q] : static_cast<const int32_t*>(indices)[q];
        if (idx < 0) idx += a.x[a.axis];
        if (idx == target) acc += dy[q];
      }
    }
    dx[p] = acc;
  }
}

template <typename E>
cudaError_t LaunchGather(const void* data, const void* indices, bool i64, void* out, int64_t outer, int64_t axis_len,
                         int64_t inner, int64_t n, int* bad, cudaStream_t stream) {
  int64_t total = outer * n * inner;
  GatherKernel<E><<<Blocks(total), kThreads, 0, stream>>>(static_cast<const E*>(data), indices, i64,
                                                           static_cast<E*>(out), axis_len, inner, n, total, bad);
  return cudaGetLastError();
}

}  // namespace

cudaError_t StridedCopy(const void* src, void* dst, const StridedSpace& s, int elem_size, cudaStream_t stream) {
  int64_t n = s.count();
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: StridedCopyKernel<uint8_t><<<Blocks(n), kThreads, 0, stream>>>((const uint8_t*)src, (uint8_t*)dst, s, n); break;
    case 2: StridedCopyKernel<uint16_t><<<Blocks(n), kThreads, 0, stream>>>((const uint16_t*)src, (uint16_t*)dst, s, n); break;
    case 4: StridedCopyKernel<uint32_t><<<Blocks(n), kThreads, 0, stream>>>((const uint32_t*)src, (uint32_t*)dst, s, n); break;
    case 8: StridedCopyKernel<uint64_t><<<Blocks(n), kThreads, 0, stream>>>((const uint64_t*)src, (uint64_t*)dst, s, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t Pad(const void* x, void* y, const PadArgs& a, int elem_size, cudaStream_t stream) {
  switch (elem_size) {
    case 1: return LaunchPad<uint8_t>(x, y, a, stream);
    case 2: return LaunchPad<uint16_t>(x, y, a, stream);
    case 4: return LaunchPad<uint32_t>(x, y, a, stream);
    case 8: return LaunchPad<uint64_t>(x, y, a, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t Fill(void* dst, int64_t n, const void* pattern, int elem_size, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: { uint8_t v; std::memcpy(&v, pattern, 1); FillKernel<uint8_t><<<Blocks(n), kThreads, 0, stream>>>((uint8_t*)dst, n, v); break; }
    case 2: { uint16_t v; std::memcpy(&v, pattern, 2); FillKernel<uint16_t><<<Blocks(n), kThreads, 0, stream>>>((uint16_t*)dst, n, v); break; }
    case 4: { uint32_t v; std::memcpy(&v, pattern, 4); FillKernel<uint32_t><<<Blocks(n), kThreads, 0, stream>>>((uint32_t*)dst, n, v); break; }
    case 8: { uint64_t v; std::memcpy(&v, pattern, 8); FillKernel<uint64_t><<<Blocks(n), kThreads, 0, stream>>>((uint64_t*)dst, n, v); break; }
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t Gather(const void* data, const void* indices, bool indices64, void* out, int64_t outer, int64_t axis_len,
                   int64_t inner, int64_t n, int elem_size, int* bad, cudaStream_t stream) {
  if (outer * n * inner == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: return LaunchGather<uint8_t>(data, indices, indices64, out, outer, axis_len, inner, n, bad, stream);
    case 2: return LaunchGather<uint16_t>(data, indices, indices64, out, outer, axis_len, inner, n, bad, stream);
    case 4: return LaunchGather<uint32_t>(data, indices, indices64, out, outer, axis_len, inner, n, bad, stream);
    case 8: return LaunchGather<uint64_t>(data, indices, indices64, out, outer, axis_len, inner, n, bad, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t GatherElementsGrad(const float* dy, const void* indices, bool indices64, float* dx,
                               const ElementsGradArgs& a, cudaStream_t stream) {
  int64_t n = 1;
  for (int d = 0; d < a.rank; ++d) n *= a.x[d];
  if (n == 0) return cudaSuccess;
  GatherElementsGradKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, indices, indices64, dx, a, n);
  return cudaGetLastError();
}

int64_t GatherGradRanges(int64_t rows, int64_t inner, int64_t n, int64_t outer) {
  if (n <= kGradRange) return 1;
  int64_t ranges = (n + kGradRange - 1) / kGradRange;
  if (ranges > kGradMaxRanges) ranges = kGradMaxRanges;
  const int64_t total = outer * rows * inner;
  if (total > 0 && ranges * total > kGradMaxWorkspace) ranges = kGradMaxWorkspace / total;
  return ranges >= 2 ? ranges : 1;
}

cudaError_t GatherGrad(const float* dy, const void* indices, bool indices64, float* out, int64_t rows, int64_t inner,
                       int64_t n, int64_t outer, float* workspace, cudaStream_t stream) {
  const int64_t warps = outer * rows, total = warps * inner;
  if (total == 0) return cudaSuccess;
  if (warps / kRowsPerBlock >= 0x7fffffff) return cudaErrorInvalidValue;
  const int64_t ranges = workspace != nullptr ? GatherGradRanges(rows, inner, n, outer) : 1;
  const int64_t range = ranges > 1 ? (n + ranges - 1) / ranges : (n > 0 ? n : 1);
  const dim3 grid(RowBlocks(true, warps), static_cast<unsigned>(ranges));
  GatherGradKernel<<<grid, kThreads, 0, stream>>>(dy, indices, indices64, out, rows, inner, n, outer, range, workspace);
  if (ranges == 1) return cudaGetLastError();
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  GatherGradCombineKernel<<<Blocks(total), kThreads, 0, stream>>>(workspace, out, total, ranges);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
