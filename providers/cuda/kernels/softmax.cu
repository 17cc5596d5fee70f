// Softmax and LogSoftmax along one axis of x viewed as [outer, len, inner], and their gradients. Rows
// along the last axis (inner == 1) get a warp each up to kWarpRowMax long (an attention row of 64 would
// leave 7/8 of a block idle), a block each beyond; other layouts one thread per (outer, inner) line. All
// reduce in an order the shape fixes.
#include <cfloat>

#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

template <bool kWarp>
__global__ void SoftmaxRowsKernel(const float* x, float* y, int64_t rows, int64_t len, bool log) {
  __shared__ float shared[32];
  const RowGroup<kWarp> rg;
  if (!rg.valid(rows)) return;
  const float* in = x + rg.row * len;
  float* out = y + rg.row * len;
  float max = -FLT_MAX;
  for (int64_t i = rg.lane; i < len; i += rg.step) max = fmaxf(max, in[i]);
  max = rg.Max(max, shared);
  float sum = 0.0f;
  for (int64_t i = rg.lane; i < len; i += rg.step) sum += expf(in[i] - max);
  sum = rg.Sum(sum, shared);
  if (log) {
    float lse = logf(sum);
    for (int64_t i = rg.lane; i < len; i += rg.step) out[i] = in[i] - max - lse;
  } else {
    for (int64_t i = rg.lane; i < len; i += rg.step) out[i] = expf(in[i] - max) / sum;
  }
}

__global__ void SoftmaxLinesKernel(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool log) {
  ONT_GRID_STRIDE_LOOP(t, outer * inner) {
    int64_t base = (t / inner) * len * inner + t % inner;
    float max = -FLT_MAX, sum = 0.0f;
    for (int64_t i = 0; i < len; ++i) max = fmaxf(max, x[base + i * inner]);
    for (int64_t i = 0; i < len; ++i) sum += expf(x[base + i * inner] - max);
    float lse = logf(sum);
    for (int64_t i = 0; i < len; ++i) {
      float v = x[base + i * inner] - max;
      y[base + i * inner] = log ? v - lse : expf(v) / sum;
    }
  }
}

template <bool kWarp>
__global__ void SoftmaxGradRowsKernel(const float* dy, const float* y, float* dx, int64_t rows, int64_t len,
                                      bool log) {
  __shared__ float shared[32];
  const RowGroup<kWarp> rg;
  if (!rg.valid(rows)) return;
  const int64_t base = rg.row * len;
  float sum = 0.0f;
  for (int64_t i = rg.lane; i < len; i += rg.step) sum += log ? dy[base + i] : dy[base + i] * y[base + i];
  sum = rg.Sum(sum, shared);
  for (int64_t i = rg.lane; i < len; i += rg.step) {
    int64_t k = base + i;
    dx[k] = log ? dy[k] - expf(y[k]) * sum : y[k] * (dy[k] - sum);
  }
}

__global__ void SoftmaxGradLinesKernel(const float* dy, const float* y, float* dx, int64_t outer, int64_t len,
                                       int64_t inner, bool log) {
  ONT_GRID_STRIDE_LOOP(t, outer * inner) {
    int64_t base = (t / inner) * len * inner + t % inner;
    float sum = 0.0f;
    for (int64_t i = 0; i < len; ++i) {
      int64_t k = base + i * inner;
      sum += log ? dy[k] : dy[k] * y[k];
    }
    for (int64_t i = 0; i < len; ++i) {
      int64_t k = base + i * inner;
      dx[k] = log ? dy[k] - expf(y[k]) * sum : y[k] * (dy[k] - sum);
    }
  }
}

}  // namespace

cudaError_t Softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool log,
                    cudaStream_t stream) {
  if (outer * len * inner == 0) return cudaSuccess;
  if (inner == 1 && WarpRows(len) && outer < (int64_t{1} << 33)) {
    SoftmaxRowsKernel<true><<<RowBlocks(true, outer), kThreads, 0, stream>>>(x, y, outer, len, log);
  } else if (inner == 1 && outer < (int64_t{1} << 31)) {
    SoftmaxRowsKernel<false><<<RowBlocks(false, outer), kThreads, 0, stream>>>(x, y, outer, len, log);
  } else {
    SoftmaxLinesKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(x, y, outer, len, inner, log);
  }
  return cudaGetLastError();
}

cudaError_t SoftmaxGrad(const float* dy, const float* y, float* dx, int64_t outer, int64_t len, int64_t inner,
                        bool log, cudaStream_t stream) {
  if (outer * len * inner == 0) return cudaSuccess;
  if (inner == 1 && WarpRows(len) && outer < (int64_t{1} << 33)) {
    SoftmaxGradRowsKernel<true><<<RowBlocks(true, outer), kThreads, 0, stream>>>(dy, y, dx, outer, len, log);
  } else if (inner == 1 && outer < (int64_t{1} << 31)) {
    SoftmaxGradRowsKernel<false><<<RowBlocks(false, outer), kThreads, 0, stream>>>(dy, y, dx, outer, len, log);
  } else {
    SoftmaxGradLinesKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(dy, y, dx, outer, len, inner, log);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
