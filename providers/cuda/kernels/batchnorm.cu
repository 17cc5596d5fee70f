// BatchNormalization on the device, training and inference, and its gradient, with the CPU kernels'
// arithmetic (providers/cpu/kernels/norm.cc, grad_norm.cc): batch statistics in double, reduced per channel
// over ranges of images in an order the shape fixes.
#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

// Training statistics and gradient sums per channel, over blocks (channel, range): the channel's N x inner
// elements are split into `splits` ranges of whole images (splits depends on the shape only), each block
// reducing its range in double into a workspace; the next kernel adds a channel's ranges in order. One
// block per channel (the previous kernels) left a CIFAR ResNet's 16-channel layers 16 blocks of a 132-SM
// GPU, each reading 128 x 1024 values alone: 80 us a BatchNorm.
struct ChannelRange {
  int64_t b0, b1;  // images [b0, b1) of the channel's range
};
__device__ __forceinline__ ChannelRange RangeOf(int64_t n, int64_t splits) {
  const int64_t per = (n + splits - 1) / splits;
  const int64_t b0 = blockIdx.y * per;
  return {b0 < n ? b0 : n, b0 + per < n ? b0 + per : n};
}

// Calls f(at) for every element of channel `ch` in images [r.b0, r.b1): the block's threads stride the
// range's (image, position) pairs, in 32-bit index arithmetic where the range allows.
template <typename F>
__device__ __forceinline__ void ForChannelRange(int64_t ch, int64_t c, int64_t inner, ChannelRange r, F f) {
  const int64_t count = (r.b1 - r.b0) * inner;
  if (count <= int64_t{0xffffffff} && inner <= int64_t{0xffffffff}) {
    const uint32_t in32 = static_cast<uint32_t>(inner);
    for (uint32_t k = threadIdx.x; k < static_cast<uint32_t>(count); k += blockDim.x) {
      const uint32_t b = k / in32;
      f(((r.b0 + b) * c + ch) * inner + (k - b * in32));
    }
  } else {
    for (int64_t k = threadIdx.x; k < count; k += blockDim.x) f(((r.b0 + k / inner) * c + ch) * inner + k % inner);
  }
}

// The channel's total of the ranges' partial values partial[ch * splits + z], added in order.
__device__ __forceinline__ double RangesTotal(const double* partial, int64_t ch, int64_t splits) {
  double t = 0.0;
  for (int64_t z = 0; z < splits; ++z) t += partial[ch * splits + z];
  return t;
}

// Pass 1: each range's sum of x.
__global__ void __launch_bounds__(1024) BatchNormSumKernel(BatchNormArgs a, int64_t splits, double* sums) {
  __shared__ double shared[32];
  const int64_t ch = blockIdx.x;
  double s = 0.0;
  ForChannelRange(ch, a.c, a.inner, RangeOf(a.n, splits), [&](int64_t at) { s += static_cast<double>(a.x[at]); });
  s = BlockSum(s, shared);
  if (threadIdx.x == 0) sums[ch * splits + blockIdx.y] = s;
}

// Pass 2: the batch mean from the sums, then each range's sum of squared deviations.
__global__ void __launch_bounds__(1024) BatchNormVarKernel(BatchNormArgs a, int64_t splits, const double* sums,
                                                           double* squares) {
  __shared__ double shared[32];
  const int64_t ch = blockIdx.x;
  const double bm = RangesTotal(sums, ch, splits) / static_cast<double>(a.n * a.inner);
  double s2 = 0.0;
  ForChannelRange(ch, a.c, a.inner, RangeOf(a.n, splits), [&](int64_t at) {
    const double d = static_cast<double>(a.x[at]) - bm;
    s2 += d * d;
  });
  s2 = BlockSum(s2, shared);
  if (threadIdx.x == 0) squares[ch * splits + blockIdx.y] = s2;
}

// Pass 3: the statistics (range 0's block writes the running and saved ones), then the range's y.
__global__ void BatchNormApplyKernel(BatchNormArgs a, int64_t splits, const double* sums, const double* squares) {
  const int64_t ch = blockIdx.x;
  const double count = static_cast<double>(a.n * a.inner);
  const double bm = RangesTotal(sums, ch, splits) / count, bv = RangesTotal(squares, ch, splits) / count;
  if (blockIdx.y == 0 && threadIdx.x == 0) {
    float m = a.mean[ch], v = a.var[ch];
    if (a.running_mean) a.running_mean[ch] = static_cast<float>(m * a.momentum + bm * (1 - a.momentum));
    if (a.running_var) a.running_var[ch] = static_cast<float>(v * a.momentum + bv * (1 - a.momentum));
    if (a.saved_mean) a.saved_mean[ch] = static_cast<float>(bm);
    if (a.saved_var) a.saved_var[ch] = static_cast<float>(a.saved_inv_std ? 1.0 / sqrt(bv + a.epsilon) : bv);
  }
  const float mean = static_cast<float>(bm), var = static_cast<float>(bv);
  const float inv = 1.0f / sqrtf(var + a.epsilon);
  const float sc = a.scale[ch] * inv, sh = a.bias[ch] - mean * a.scale[ch] * inv;
  ForChannelRange(ch, a.c, a.inner, RangeOf(a.n, splits), [&](int64_t at) { a.y[at] = a.x[at] * sc + sh; });
}

__global__ void BatchNormInferKernel(BatchNormArgs a) {
  ONT_GRID_STRIDE_LOOP(at, a.n * a.c * a.inner) {
    int64_t ch = (at / a.inner) % a.c;
    float inv = 1.0f / sqrtf(a.var[ch] + a.epsilon);
    float sc = a.scale[ch] * inv, sh = a.bias[ch] - a.mean[ch] * a.scale[ch] * inv;
    a.y[at] = a.x[at] * sc + sh;
  }
}

struct BatchNormGradArgs {
  const float *dy, *x, *scale, *mean, *inv_std;
  float *dx, *dscale, *dbias;
  int64_t n, c, inner;
};

// Gradient pass 1: each range's sums of dy and of dy * x_hat.
__global__ void __launch_bounds__(1024) BatchNormGradSumKernel(BatchNormGradArgs a, int64_t splits, double* sums) {
  __shared__ double shared[32];
  const int64_t ch = blockIdx.x;
  const double mu = static_cast<double>(a.mean[ch]), inv = static_cast<double>(a.inv_std[ch]);
  double db = 0.0, ds = 0.0;
  ForChannelRange(ch, a.c, a.inner, RangeOf(a.n, splits), [&](int64_t at) {
    const double g = a.dy[at];
    db += g;
    ds += g * (static_cast<double>(a.x[at]) - mu) * inv;
  });
  db = BlockSum(db, shared);
  ds = BlockSum(ds, shared);
  if (threadIdx.x == 0) {
    sums[(ch * splits + blockIdx.y) * 2] = db;
    sums[(ch * splits + blockIdx.y) * 2 + 1] = ds;
  }
}

// Gradient pass 2: the channel's totals (range 0's block writes dScale and dBias), then the range's dx.
__global__ void BatchNormGradApplyKernel(BatchNormGradArgs a, int64_t splits, const double* sums) {
  const int64_t ch = blockIdx.x;
  double db = 0.0, ds = 0.0;
  for (int64_t z = 0; z < splits; ++z) {
    db += sums[(ch * splits + z) * 2];
    ds += sums[(ch * splits + z) * 2 + 1];
  }
  if (blockIdx.y == 0 && threadIdx.x == 0) {
    if (a.dscale) a.dscale[ch] = static_cast<float>(ds);
    if (a.dbias) a.dbias[ch] = static_cast<float>(db);
  }
  if (a.dx == nullptr) return;
  const double mu = static_cast<double>(a.mean[ch]), inv = static_cast<double>(a.inv_std[ch]);
  const double m = static_cast<double>(a.n * a.inner);
  const double coef = static_cast<double>(a.scale[ch]) * inv / m;
  ForChannelRange(ch, a.c, a.inner, RangeOf(a.n, splits), [&](int64_t at) {
    const double xh = (static_cast<double>(a.x[at]) - mu) * inv;
    a.dx[at] = static_cast<float>(coef * (m * a.dy[at] - db - xh * ds));
  });
}

// Threads per block: 1024 where a range has many elements (a convolution's activations), so that a block
// keeps enough reads in flight.
int RangeThreads(int64_t count) { return count >= 8192 ? 1024 : kThreads; }

constexpr int64_t kFillBlocks = 264;         // two blocks per SM of a 132-SM GPU
constexpr int64_t kMinRangeElements = 4096;  // a range has at least this many elements

}  // namespace

int64_t BatchNormSplits(int64_t n, int64_t c, int64_t inner) {
  if (c == 0 || n == 0) return 1;
  int64_t s = (kFillBlocks + c - 1) / c;
  if (s > n) s = n;
  if (s > n * inner / kMinRangeElements) s = n * inner / kMinRangeElements;
  if (s > 65535) s = 65535;
  return s >= 1 ? s : 1;
}

cudaError_t BatchNorm(const BatchNormArgs& a, double* workspace, cudaStream_t stream) {
  if (a.c == 0) return cudaSuccess;
  if (!a.training) {
    int64_t total = a.n * a.c * a.inner;
    if (total == 0) return cudaSuccess;
    BatchNormInferKernel<<<Blocks(total), kThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const int64_t splits = BatchNormSplits(a.n, a.c, a.inner);
  double *sums = workspace, *squares = workspace + a.c * splits;
  const dim3 grid(static_cast<unsigned>(a.c), static_cast<unsigned>(splits));
  const int threads = RangeThreads(((a.n + splits - 1) / splits) * a.inner);
  BatchNormSumKernel<<<grid, threads, 0, stream>>>(a, splits, sums);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  BatchNormVarKernel<<<grid, threads, 0, stream>>>(a, splits, sums, squares);
  if ((e = cudaGetLastError()) != cudaSuccess) return e;
  BatchNormApplyKernel<<<grid, kThreads, 0, stream>>>(a, splits, sums, squares);
  return cudaGetLastError();
}

cudaError_t BatchNormGrad(const float* dy, const float* x, const float* scale, const float* mean, const float* inv_std,
                          float* dx, float* dscale, float* dbias, int64_t n, int64_t c, int64_t inner, double* workspace,
                          cudaStream_t stream) {
  if (c == 0) return cudaSuccess;
  const BatchNormGradArgs a{dy, x, scale, mean, inv_std, dx, dscale, dbias, n, c, inner};
  const int64_t splits = BatchNormSplits(n, c, inner);
  const dim3 grid(static_cast<unsigned>(c), static_cast<unsigned>(splits));
  BatchNormGradSumKernel<<<grid, RangeThreads(((n + splits - 1) / splits) * inner), 0, stream>>>(a, splits, workspace);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  BatchNormGradApplyKernel<<<grid, kThreads, 0, stream>>>(a, splits, workspace);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
