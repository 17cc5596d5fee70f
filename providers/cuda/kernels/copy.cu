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

// GatherGrad in two passes, deterministic and without atomics:
// 1. one thread per row r of the output: the positions j (ascending) whose index is r, written to
//    pos[start[r] .. start[r] + count[r]), where start[r] counts the valid indices below r. Every thread reads
//    the same index at the same time (one broadcast load for a warp), so the n x rows comparisons are cheap
//    next to the old one thread per column, which read and wrote the output n times in sequence.
// 2. one thread per output element (o, r, k): dy's rows at its positions summed in order from 0, the CPU
//    kernel's order (so the same bits), reading consecutive k across a warp.
__device__ __forceinline__ int64_t IndexAt(const void* indices, bool indices64, int64_t j, int64_t rows) {
  int64_t idx = indices64 ? static_cast<const int64_t*>(indices)[j] : static_cast<const int32_t*>(indices)[j];
  if (idx < 0) idx += rows;
  return idx >= 0 && idx < rows ? idx : -1;  // out of range: no row (the CPU kernel's Prepare refuses it)
}

__global__ void GatherGradPositionsKernel(const void* indices, bool indices64, int64_t rows, int64_t n, int64_t* pos,
                                          int64_t* start, int64_t* count) {
  ONT_GRID_STRIDE_LOOP(r, rows) {
    int64_t below = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t idx = IndexAt(indices, indices64, j, rows);
      below += idx >= 0 && idx < r;
    }
    int64_t c = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (IndexAt(indices, indices64, j, rows) == r) pos[below + c++] = j;
    }
    start[r] = below;
    count[r] = c;
  }
}

__global__ void GatherGradSumKernel(const float* dy, const int64_t* pos, const int64_t* start, const int64_t* count,
                                    float* out, int64_t rows, int64_t inner, int64_t n, int64_t outer) {
  ONT_GRID_STRIDE_LOOP(t, outer * rows * inner) {
    const int64_t k = t % inner, r = (t / inner) % rows, o = t / (inner * rows);
    const int64_t* p = pos + start[r];
    float acc = 0.0f;
    for (int64_t c = 0; c < count[r]; ++c) acc += dy[(o * n + p[c]) * inner + k];
    out[t] = acc;
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

cudaError_t GatherGrad(const float* dy, const void* indices, bool indices64, float* out, int64_t rows, int64_t inner,
                       int64_t n, int64_t outer, int64_t* workspace, cudaStream_t stream) {
  if (outer * rows * inner == 0) return cudaSuccess;
  int64_t *pos = workspace, *start = workspace + n, *count = start + rows;
  GatherGradPositionsKernel<<<Blocks(rows), kThreads, 0, stream>>>(indices, indices64, rows, n, pos, start, count);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  GatherGradSumKernel<<<Blocks(outer * rows * inner), kThreads, 0, stream>>>(dy, pos, start, count, out, rows, inner, n,
                                                                              outer);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
