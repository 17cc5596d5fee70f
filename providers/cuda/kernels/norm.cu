// LayerNormalization forward and gradient on the device: one block per row for the row statistics (two
// passes, as the CPU kernel computes them), one thread per column for dScale and dBias (summing the rows in
// order, so no atomics).
#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y, float* mean_out,
                                float* inv_out, int64_t cols, float epsilon) {
  __shared__ float shared[32];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) sum += row[i];
  float mean = BlockSum(sum, shared) / static_cast<float>(cols);
  float var = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float d = row[i] - mean;
    var += d * d;
  }
  var = BlockSum(var, shared) / static_cast<float>(cols);
  float inv = 1.0f / sqrtf(var + epsilon);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float v = (row[i] - mean) * inv * scale[i];
    out[i] = bias ? v + bias[i] : v;
  }
  if (threadIdx.x == 0) {
    if (mean_out) mean_out[blockIdx.x] = mean;
    if (inv_out) inv_out[blockIdx.x] = inv;
  }
}

// dX per row: with xhat = (x - mean) inv and g = dY scale,
// dX = inv (g - mean(g) - xhat mean(g xhat)).
__global__ void LayerNormGradXKernel(const float* dy, const float* x, const float* scale, const float* mean,
                                     const float* inv_std, float* dx, int64_t cols) {
  __shared__ float shared[32];
  int64_t base = blockIdx.x * cols;
  float mu = mean[blockIdx.x], inv = inv_std[blockIdx.x];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float g = dy[base + i] * scale[i];
    sg += g;
    sgx += g * (x[base + i] - mu) * inv;
  }
  sg = BlockSum(sg, shared) / static_cast<float>(cols);
  sgx = BlockSum(sgx, shared) / static_cast<float>(cols);
  for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
    float xhat = (x[base + i] - mu) * inv;
    dx[base + i] = inv * (dy[base + i] * scale[i] - sg - xhat * sgx);
  }
}

__global__ void LayerNormGradParamsKernel(const float* dy, const float* x, const float* mean, const float* inv_std,
                                          float* dscale, float* dbias, int64_t rows, int64_t cols) {
  ONT_GRID_STRIDE_LOOP(c, cols) {
    float ds = 0.0f, db = 0.0f;
    for (int64_t r = 0; r < rows; ++r) {
      float g = dy[r * cols + c];
      ds += g * (x[r * cols + c] - mean[r]) * inv_std[r];
      db += g;
    }
    if (dscale) dscale[c] = ds;
    if (dbias) dbias[c] = db;
  }
}

}  // namespace

cudaError_t LayerNorm(const float* x, const float* scale, const float* bias, float* y, float* mean, float* inv_std,
                      int64_t rows, int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  LayerNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, scale, bias, y, mean, inv_std, cols,
                                                                          epsilon);
  return cudaGetLastError();
}

cudaError_t LayerNormGrad(const float* dy, const float* x, const float* scale, const float* mean,
                          const float* inv_std, float* dx, float* dscale, float* dbias, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (dx) {
    LayerNormGradXKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(dy, x, scale, mean, inv_std, dx, cols);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (dscale || dbias) {
    LayerNormGradParamsKernel<<<Blocks(cols), kThreads, 0, stream>>>(dy, x, mean, inv_std, dscale, dbias, rows, cols);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
