// BatchNormalization on the device, training and inference, and its gradient, with the CPU kernels'
// arithmetic (providers/cpu/kernels/norm.cc, grad_norm.cc): batch statistics in double, one block per
// channel reducing in a fixed order.
#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

// One block per channel: batch mean and population variance, running and saved statistics; then the
// channel's normalization.
__global__ void __launch_bounds__(1024) BatchNormTrainKernel(BatchNormArgs a) {
  __shared__ double shared[32];
  int64_t ch = blockIdx.x, count = a.n * a.inner;
  double s = 0.0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    int64_t b = k / a.inner, i = k % a.inner;
    s += static_cast<double>(a.x[(b * a.c + ch) * a.inner + i]);
  }
  double bm = BlockSum(s, shared) / static_cast<double>(count);
  double s2 = 0.0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    int64_t b = k / a.inner, i = k % a.inner;
    double d = static_cast<double>(a.x[(b * a.c + ch) * a.inner + i]) - bm;
    s2 += d * d;
  }
  double bv = BlockSum(s2, shared) / static_cast<double>(count);
  if (threadIdx.x == 0) {
    float m = a.mean[ch], v = a.var[ch];
    if (a.running_mean) a.running_mean[ch] = static_cast<float>(m * a.momentum + bm * (1 - a.momentum));
    if (a.running_var) a.running_var[ch] = static_cast<float>(v * a.momentum + bv * (1 - a.momentum));
    if (a.saved_mean) a.saved_mean[ch] = static_cast<float>(bm);
    if (a.saved_var) a.saved_var[ch] = static_cast<float>(a.saved_inv_std ? 1.0 / sqrt(bv + a.epsilon) : bv);
  }
  float mean = static_cast<float>(bm), var = static_cast<float>(bv);
  float inv = 1.0f / sqrtf(var + a.epsilon);
  float sc = a.scale[ch] * inv, sh = a.bias[ch] - mean * a.scale[ch] * inv;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    int64_t b = k / a.inner, i = k % a.inner, at = (b * a.c + ch) * a.inner + i;
    a.y[at] = a.x[at] * sc + sh;
  }
}

__global__ void BatchNormInferKernel(BatchNormArgs a) {
  ONT_GRID_STRIDE_LOOP(at, a.n * a.c * a.inner) {
    int64_t ch = (at / a.inner) % a.c;
    float inv = 1.0f / sqrtf(a.var[ch] + a.epsilon);
    float sc = a.scale[ch] * inv, sh = a.bias[ch] - a.mean[ch] * a.scale[ch] * inv;
    a.y[at] = a.x[at] * sc + sh;
  }
}

__global__ void __launch_bounds__(1024) BatchNormGradKernel(const float* dy, const float* x, const float* scale, const float* mean,
                                    const float* inv_std, float* dx, float* dscale, float* dbias, int64_t n,
                                    int64_t c, int64_t inner) {
  __shared__ double shared[32];
  int64_t ch = blockIdx.x, count = n * inner;
  double mu = static_cast<double>(mean[ch]), inv = static_cast<double>(inv_std[ch]);
  double db = 0.0, ds = 0.0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    int64_t at = ((k / inner) * c + ch) * inner + k % inner;
    double g = dy[at];
    db += g;
    ds += g * (static_cast<double>(x[at]) - mu) * inv;
  }
  db = BlockSum(db, shared);
  ds = BlockSum(ds, shared);
  double m = static_cast<double>(count);
  double coef = static_cast<double>(scale[ch]) * inv / m;
  if (dx) {
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
      int64_t at = ((k / inner) * c + ch) * inner + k % inner;
      double xh = (static_cast<double>(x[at]) - mu) * inv;
      dx[at] = static_cast<float>(coef * (m * dy[at] - db - xh * ds));
    }
  }
  if (threadIdx.x == 0) {
    if (dscale) dscale[ch] = static_cast<float>(ds);
    if (dbias) dbias[ch] = static_cast<float>(db);
  }
}

// Threads per channel's block: a whole block of 1024 where a channel has many elements (a convolution's
// activations), so that one block keeps enough reads in flight.
int ChannelThreads(int64_t count) { return count >= 8192 ? 1024 : kThreads; }

}  // namespace

cudaError_t BatchNorm(const BatchNormArgs& a, cudaStream_t stream) {
  if (a.c == 0) return cudaSuccess;
  if (a.training) {
    BatchNormTrainKernel<<<static_cast<unsigned>(a.c), ChannelThreads(a.n * a.inner), 0, stream>>>(a);
  } else {
    int64_t total = a.n * a.c * a.inner;
    if (total == 0) return cudaSuccess;
    BatchNormInferKernel<<<Blocks(total), kThreads, 0, stream>>>(a);
  }
  return cudaGetLastError();
}

cudaError_t BatchNormGrad(const float* dy, const float* x, const float* scale, const float* mean, const float* inv_std,
                          float* dx, float* dscale, float* dbias, int64_t n, int64_t c, int64_t inner,
                          cudaStream_t stream) {
  if (c == 0) return cudaSuccess;
  BatchNormGradKernel<<<static_cast<unsigned>(c), ChannelThreads(n * inner), 0, stream>>>(dy, x, scale, mean, inv_std, dx, dscale, dbias,
                                                                            n, c, inner);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
