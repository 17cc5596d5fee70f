// LayerNormalization forward and gradient on the device: a warp per row (a block per row over kWarpRowMax
// columns) for the row statistics (two passes, as the CPU kernel computes them), and 32-column tiles for
// dScale and dBias (each column summed by up to 32 threads, the partial sums added in order: no atomics).
#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

template <bool kWarp>
__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y, float* mean_out,
                                float* inv_out, int64_t rows, int64_t cols, float epsilon) {
  __shared__ float shared[32];
  const RowGroup<kWarp> rg;
  if (!rg.valid(rows)) return;
  const float* row = x + rg.row * cols;
  float* out = y + rg.row * cols;
  float sum = 0.0f;
  for (int64_t i = rg.lane; i < cols; i += rg.step) sum += row[i];
  float mean = rg.Sum(sum, shared) / static_cast<float>(cols);
  float var = 0.0f;
  for (int64_t i = rg.lane; i < cols; i += rg.step) {
    float d = row[i] - mean;
    var += d * d;
  }
  var = rg.Sum(var, shared) / static_cast<float>(cols);
  float inv = 1.0f / sqrtf(var + epsilon);
  for (int64_t i = rg.lane; i < cols; i += rg.step) {
    float v = (row[i] - mean) * inv * scale[i];
    out[i] = bias ? v + bias[i] : v;
  }
  if (rg.lane == 0) {
    if (mean_out) mean_out[rg.row] = mean;
    if (inv_out) inv_out[rg.row] = inv;
  }
}

// dX per row: with xhat = (x - mean) inv and g = dY scale,
// dX = inv (g - mean(g) - xhat mean(g xhat)).
template <bool kWarp>
__global__ void LayerNormGradXKernel(const float* dy, const float* x, const float* scale, const float* mean,
                                     const float* inv_std, float* dx, int64_t rows, int64_t cols) {
  __shared__ float shared[32];
  const RowGroup<kWarp> rg;
  if (!rg.valid(rows)) return;
  const int64_t base = rg.row * cols;
  const float mu = mean[rg.row], inv = inv_std[rg.row];
  float sg = 0.0f, sgx = 0.0f;
  for (int64_t i = rg.lane; i < cols; i += rg.step) {
    float g = dy[base + i] * scale[i];
    sg += g;
    sgx += g * (x[base + i] - mu) * inv;
  }
  sg = rg.Sum(sg, shared) / static_cast<float>(cols);
  sgx = rg.Sum(sgx, shared) / static_cast<float>(cols);
  for (int64_t i = rg.lane; i < cols; i += rg.step) {
    float xhat = (x[base + i] - mu) * inv;
    dx[base + i] = inv * (dy[base + i] * scale[i] - sg - xhat * sgx);
  }
}

// dScale and dBias: a block of 32 x blockDim.y threads per 32 columns; thread (c, r) sums its column over
// rows r, r + blockDim.y, ..., then row 0 adds the partial sums in order (reduce.cu's column tiles).
__global__ void __launch_bounds__(1024) LayerNormGradParamsKernel(const float* dy, const float* x, const float* mean, const float* inv_std,
                                          float* dscale, float* dbias, int64_t rows, int64_t cols) {
  __shared__ float part_s[32][33], part_b[32][33];
  const int tx = threadIdx.x, ty = threadIdx.y, lanes = blockDim.y;
  const int64_t c = blockIdx.x * int64_t{32} + tx;
  float ds = 0.0f, db = 0.0f;
  if (c < cols) {
    for (int64_t r = ty; r < rows; r += lanes) {
      float g = dy[r * cols + c];
      ds += g * (x[r * cols + c] - mean[r]) * inv_std[r];
      db += g;
    }
  }
  part_s[ty][tx] = ds;
  part_b[ty][tx] = db;
  __syncthreads();
  if (ty != 0 || c >= cols) return;
  for (int k = 1; k < lanes; ++k) {
    ds += part_s[k][tx];
    db += part_b[k][tx];
  }
  if (dscale) dscale[c] = ds;
  if (dbias) dbias[c] = db;
}

}  // namespace

cudaError_t LayerNorm(const float* x, const float* scale, const float* bias, float* y, float* mean, float* inv_std,
                      int64_t rows, int64_t cols, float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (WarpRows(cols)) {
    LayerNormKernel<true><<<RowBlocks(true, rows), kThreads, 0, stream>>>(x, scale, bias, y, mean, inv_std, rows, cols,
                                                                          epsilon);
  } else {
    LayerNormKernel<false><<<RowBlocks(false, rows), kThreads, 0, stream>>>(x, scale, bias, y, mean, inv_std, rows,
                                                                            cols, epsilon);
  }
  return cudaGetLastError();
}

cudaError_t LayerNormGrad(const float* dy, const float* x, const float* scale, const float* mean,
                          const float* inv_std, float* dx, float* dscale, float* dbias, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (dx) {
    if (WarpRows(cols)) {
      LayerNormGradXKernel<true><<<RowBlocks(true, rows), kThreads, 0, stream>>>(dy, x, scale, mean, inv_std, dx, rows, cols);
    } else {
      LayerNormGradXKernel<false><<<RowBlocks(false, rows), kThreads, 0, stream>>>(dy, x, scale, mean, inv_std, dx, rows, cols);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (dscale || dbias) {
    int lanes = 1;  // about 8 rows per thread, at most 32 threads per column
    while (lanes < 32 && lanes * 8 < rows) lanes *= 2;
    LayerNormGradParamsKernel<<<static_cast<unsigned>((cols + 31) / 32), dim3(32, lanes), 0, stream>>>(
        dy, x, mean, inv_std, dscale, dbias, rows, cols);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
