// Einsum's direct sum and Resize / ResizeGrad on the device: one thread per output element running the
// per-element bodies of device_math.h (checked on the host by tests/parity/device_math_test.cc).
#include "providers/cuda/kernels/common.cuh"
#include "providers/cuda/kernels/device_math.h"

namespace ontrain {
namespace cuda {
namespace {

template <typename T>
__global__ void EinsumKernel(EinsumArgs a, EinsumOperands<T> x, T* y, int64_t n) {
  ONT_GRID_STRIDE_LOOP(o, n) y[o] = EinsumElement<T>(a, x, o);
}

__global__ void ResizeKernel(ResizeArgs a, ResizeTables t, const float* x, float* y, int64_t n) {
  ONT_GRID_STRIDE_LOOP(o, n) y[o] = ResizeElement<float>(a, t, x, o);
}

__global__ void ResizeGradKernel(ResizeArgs a, ResizeTables t, const float* dy, float* dx, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) dx[i] = ResizeGradElement<float>(a, t, dy, i);
}

template <typename T>
cudaError_t LaunchEinsum(const EinsumArgs& a, const T* const* ops, T* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  EinsumOperands<T> x = {};
  for (int k = 0; k < a.operands; ++k) x.op[k] = ops[k];
  EinsumKernel<T><<<Blocks(n), kThreads, 0, stream>>>(a, x, y, n);
  return cudaGetLastError();
}

}  // namespace

cudaError_t Einsum(const EinsumArgs& a, const float* const* ops, float* y, int64_t n, cudaStream_t stream) {
  return LaunchEinsum<float>(a, ops, y, n, stream);
}
cudaError_t Einsum(const EinsumArgs& a, const double* const* ops, double* y, int64_t n, cudaStream_t stream) {
  return LaunchEinsum<double>(a, ops, y, n, stream);
}

cudaError_t Resize(const ResizeArgs& a, const ResizeTables& t, const float* x, float* y, int64_t n,
                   cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ResizeKernel<<<Blocks(n), kThreads, 0, stream>>>(a, t, x, y, n);
  return cudaGetLastError();
}

cudaError_t ResizeGrad(const ResizeArgs& a, const ResizeTables& t, const float* dy, float* dx, int64_t n,
                       cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ResizeGradKernel<<<Blocks(n), kThreads, 0, stream>>>(a, t, dy, dx, n);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
