// Device-side helpers shared by the .cu files: launch geometry and strided index arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "providers/cuda/kernels/launch.h"

namespace ontrain {
namespace cuda {

constexpr int kThreads = 256;

// Blocks for n elements with grid-stride loops: enough to fill the GPU, capped so a grid is never huge.
inline unsigned Blocks(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b < 1) b = 1;
  return static_cast<unsigned>(b > 65535 * 8 ? 65535 * 8 : b);
}

// The element offset of operand k for linear index i of a row-major iteration over space.dims.
__device__ __forceinline__ int64_t OffsetOf(const StridedSpace& s, int k, int64_t i) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    int64_t q = i / s.dims[d];
    off += (i - q * s.dims[d]) * s.strides[k][d];
    i = q;
  }
  return off;
}

#define ONT_GRID_STRIDE_LOOP(i, n) \
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < (n); i += int64_t{blockDim.x} * gridDim.x)

// Block-wide sum of one value per thread (blockDim.x a multiple of 32, at most 1024); every thread gets
// the result. The order of additions is fixed, so the result is the same on every run.
template <typename T>
__device__ T BlockSum(T v, T* shared32) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  T total = 0;
  for (int w = 0; w < warps; ++w) total += shared32[w];
  return total;
}

template <typename T>
__device__ T BlockMax(T v, T* shared32) {
  for (int o = 16; o > 0; o >>= 1) {
    T other = __shfl_down_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) shared32[warp] = v;
  __syncthreads();
  int warps = blockDim.x >> 5;
  T m = shared32[0];
  for (int w = 1; w < warps; ++w) m = shared32[w] > m ? shared32[w] : m;
  return m;
}

}  // namespace cuda
}  // namespace ontrain
