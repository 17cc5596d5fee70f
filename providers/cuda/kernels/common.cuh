// Device-side helpers shared by the .cu files: launch geometry and strided index arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "providers/cuda/kernels/launch.h"

namespace ontrain {
namespace cuda {

constexpr int kThreads = 256;
// A kernel launched with more threads than kThreads (up to 1024) says so with __launch_bounds__(1024): nvcc
// then keeps it within 64 registers a thread (an SM has 64K), where otherwise the launch could fail with
// cudaErrorLaunchOutOfResources on a GPU, which no emulated run would show.

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

// The same in 32-bit index arithmetic, for spaces of fewer than 2^32 elements (so every dim fits): a
// 64-bit division is a long instruction sequence on a GPU, a 32-bit one a few instructions. Exact either way.
__device__ __forceinline__ int64_t OffsetOf32(const StridedSpace& s, int k, uint32_t i) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const uint32_t dim = static_cast<uint32_t>(s.dims[d]);
    const uint32_t q = i / dim;
    off += static_cast<int64_t>(i - q * dim) * s.strides[k][d];
    i = q;
  }
  return off;
}

// OffsetOf for linear index i of a space of n elements, in 32-bit arithmetic where n allows (the choice is
// the same for every thread of a launch, so it does not diverge).
__device__ __forceinline__ int64_t OffsetIn(const StridedSpace& s, int k, int64_t i, int64_t n) {
  return n <= int64_t{0xffffffff} ? OffsetOf32(s, k, static_cast<uint32_t>(i)) : OffsetOf(s, k, i);
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

// Warp-wide sum and max of one value per lane (all 32 lanes live); every lane gets the same result: each
// butterfly step combines the same two partial values in every lane (a + b == b + a), so the order of
// additions is fixed by the lane numbering.
template <typename T>
__device__ __forceinline__ T WarpSum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <typename T>
__device__ __forceinline__ T WarpMax(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
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

// Rows of a [rows, len] layout, each reduced by one warp (kWarp: kRowsPerBlock rows to a block of kThreads)
// or by one block (long rows). A thread visits its row at lane, lane + step, ...; Sum and Max give every
// thread of the row the row's total. In warp mode a warp past the last row leaves at once (no block
// barrier is used), so `if (!rg.valid(rows)) return;` is safe in both modes.
constexpr int kRowsPerBlock = kThreads / 32;
constexpr int64_t kWarpRowMax = 1024;  // rows up to this long go to a warp each

inline bool WarpRows(int64_t len) { return len <= kWarpRowMax; }
inline unsigned RowBlocks(bool warp, int64_t rows) {
  return static_cast<unsigned>(warp ? (rows + kRowsPerBlock - 1) / kRowsPerBlock : rows);
}

template <bool kWarp>
struct RowGroup {
  int64_t row;
  int lane, step;
  __device__ RowGroup()
      : row(kWarp ? blockIdx.x * int64_t{kRowsPerBlock} + (threadIdx.x >> 5) : int64_t{blockIdx.x}),
        lane(kWarp ? static_cast<int>(threadIdx.x & 31) : static_cast<int>(threadIdx.x)),
        step(kWarp ? 32 : static_cast<int>(blockDim.x)) {}
  __device__ bool valid(int64_t rows) const { return row < rows; }
  template <typename T>
  __device__ T Sum(T v, T* shared32) const {
    if constexpr (kWarp) {
      return WarpSum(v);
    } else {
      return BlockSum(v, shared32);
    }
  }
  template <typename T>
  __device__ T Max(T v, T* shared32) const {
    if constexpr (kWarp) {
      return WarpMax(v);
    } else {
      return BlockMax(v, shared32);
    }
  }
};

}  // namespace cuda
}  // namespace ontrain
