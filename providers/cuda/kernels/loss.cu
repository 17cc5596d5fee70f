// Softmax cross-entropy on the device, forward and gradient, and NegativeLogLikelihoodLoss, with ONNX's
// weights, ignore_index and reductions (the semantics of providers/cpu/kernels/loss.cc). Sums run in one block in a fixed order.
#include <cfloat>

#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

__device__ __forceinline__ int64_t LabelAt(const CrossEntropyArgs& a, int64_t j) {
  return a.labels64 ? static_cast<const int64_t*>(a.labels)[j] : static_cast<const int32_t*>(a.labels)[j];
}

// The weight of element j: 0 when ignored, NaN when its label is out of range.
__device__ __forceinline__ float WeightAt(const CrossEntropyArgs& a, int64_t label) {
  if (a.has_ignore && label == a.ignore_index) return 0.0f;
  if (label < 0 || label >= a.c) return NAN;
  return a.weights ? a.weights[label] : 1.0f;
}

// One thread per (n, d) line: log-softmax over C, then this element's loss and weight.
__global__ void LogProbKernel(CrossEntropyArgs a, float* log_prob, float* li, float* wi) {
  ONT_GRID_STRIDE_LOOP(j, a.n * a.d) {
    int64_t b = j / a.d, i = j % a.d, base = b * a.c * a.d + i;
    float max = -FLT_MAX, sum = 0.0f;
    for (int64_t k = 0; k < a.c; ++k) max = fmaxf(max, a.scores[base + k * a.d]);
    for (int64_t k = 0; k < a.c; ++k) sum += expf(a.scores[base + k * a.d] - max);
    float lse = max + logf(sum);
    for (int64_t k = 0; k < a.c; ++k) log_prob[base + k * a.d] = a.scores[base + k * a.d] - lse;
    int64_t label = LabelAt(a, j);
    float w = WeightAt(a, label);
    wi[j] = w;
    li[j] = (w == 0.0f) ? 0.0f : (w != w ? NAN : -w * log_prob[base + label * a.d]);
  }
}

// Scores [N, C] (d == 1): a warp per row, so that a warp's reads of a row are one coalesced access (the
// line kernel above gives each thread its own row). The same values as LogProbKernel: lse = max +
// log(sum), log_prob = score - lse.
__global__ void LogProbRowsKernel(CrossEntropyArgs a, float* log_prob, float* li, float* wi) {
  const RowGroup<true> rg;
  if (!rg.valid(a.n)) return;
  const int64_t j = rg.row;
  const float* s = a.scores + j * a.c;
  float* lp = log_prob + j * a.c;
  float max = -FLT_MAX, sum = 0.0f;
  for (int64_t k = rg.lane; k < a.c; k += rg.step) max = fmaxf(max, s[k]);
  max = WarpMax(max);
  for (int64_t k = rg.lane; k < a.c; k += rg.step) sum += expf(s[k] - max);
  float lse = max + logf(WarpSum(sum));
  for (int64_t k = rg.lane; k < a.c; k += rg.step) lp[k] = s[k] - lse;
  if (rg.lane == 0) {
    int64_t label = LabelAt(a, j);
    float w = WeightAt(a, label);
    wi[j] = w;
    // From the score, not from lp (another lane may have written that entry).
    li[j] = (w == 0.0f) ? 0.0f : (w != w ? NAN : -w * (s[label] - lse));
  }
}

// NegativeLogLikelihoodLoss: one thread per (n, d) element, the log-probability given.
__global__ void NllElementsKernel(CrossEntropyArgs a, float* li, float* wi) {
  ONT_GRID_STRIDE_LOOP(j, a.n * a.d) {
    const int64_t b = j / a.d, i = j % a.d;
    const int64_t label = LabelAt(a, j);
    const float w = WeightAt(a, label);
    wi[j] = w;
    li[j] = (w == 0.0f) ? 0.0f : (w != w ? NAN : -w * a.scores[(b * a.c + label) * a.d + i]);
  }
}

// One block: the sum (and the weight sum for mean) in a fixed order.
__global__ void __launch_bounds__(1024) SumLossKernel(const float* li, const float* wi, int64_t count, int reduction, float* loss) {
  __shared__ float shared[32];
  float s = 0.0f, w = 0.0f;
  for (int64_t j = threadIdx.x; j < count; j += blockDim.x) {
    s += li[j];
    w += wi[j];
  }
  s = BlockSum(s, shared);
  w = BlockSum(w, shared);
  if (threadIdx.x == 0) loss[0] = reduction == 2 ? s / w : s;
}

__global__ void __launch_bounds__(1024) WeightSumKernel(CrossEntropyArgs a, float* out) {
  __shared__ float shared[32];
  float w = 0.0f;
  for (int64_t j = threadIdx.x; j < a.n * a.d; j += blockDim.x) w += WeightAt(a, LabelAt(a, j));
  w = BlockSum(w, shared);
  if (threadIdx.x == 0) out[0] = w;
}

__global__ void GradKernel(CrossEntropyArgs a, const float* dloss, const float* log_prob, const float* wsum,
                           float* dscores) {
  ONT_GRID_STRIDE_LOOP(at, a.n * a.c * a.d) {
    int64_t i = at % a.d, k = (at / a.d) % a.c, b = at / (a.c * a.d), j = b * a.d + i;
    int64_t label = LabelAt(a, j);
    float g = a.reduction == 0 ? dloss[j] : dloss[0];
    float d = g * WeightAt(a, label);
    if (a.reduction == 2) d /= wsum[0];
    float v = d * (expf(log_prob[at]) - (k == label ? 1.0f : 0.0f));
    if (a.bias) v += a.bias[at];
    dscores[at] = v;
  }
}

}  // namespace

cudaError_t CrossEntropy(const CrossEntropyArgs& a, float* loss, float* log_prob, float* scratch, cudaStream_t stream) {
  int64_t count = a.n * a.d;
  float* li = a.reduction == 0 ? loss : scratch;
  float* wi = scratch + count;
  if (count > 0) {
    if (a.d == 1) {
      LogProbRowsKernel<<<RowBlocks(true, a.n), kThreads, 0, stream>>>(a, log_prob, li, wi);
    } else {
      LogProbKernel<<<Blocks(count), kThreads, 0, stream>>>(a, log_prob, li, wi);
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (a.reduction == 0) return cudaSuccess;
  SumLossKernel<<<1, 1024, 0, stream>>>(li, wi, count, a.reduction, loss);
  return cudaGetLastError();
}

cudaError_t NllLoss(const CrossEntropyArgs& a, float* loss, float* scratch, cudaStream_t stream) {
  const int64_t count = a.n * a.d;
  float* li = a.reduction == 0 ? loss : scratch;
  float* wi = scratch + count;
  if (count > 0) {
    NllElementsKernel<<<Blocks(count), kThreads, 0, stream>>>(a, li, wi);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  if (a.reduction == 0) return cudaSuccess;
  SumLossKernel<<<1, 1024, 0, stream>>>(li, wi, count, a.reduction, loss);
  return cudaGetLastError();
}

cudaError_t CrossEntropyGrad(const CrossEntropyArgs& a, const float* dloss, const float* log_prob, float* dscores,
                             float* scratch, cudaStream_t stream) {
  if (a.reduction == 2) {
    WeightSumKernel<<<1, 1024, 0, stream>>>(a, scratch);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  int64_t total = a.n * a.c * a.d;
  if (total == 0) return cudaSuccess;
  GradKernel<<<Blocks(total), kThreads, 0, stream>>>(a, dloss, log_prob, scratch, dscores);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
