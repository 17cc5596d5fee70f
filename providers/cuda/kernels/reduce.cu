// Reductions over one axis of x viewed as [outer, len, inner]. The kernel classes fold any set of reduced
// axes into that form (contiguous axes) or transpose first. Each output is reduced by one block (inner ==
// 1) or one thread (inner > 1, reading coalesced across inner) in a fixed order: deterministic.
#include <cfloat>

#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

__device__ __forceinline__ float Prep(ReduceOp op, float v) {
  switch (op) {
    case ReduceOp::kSumSquare:
    case ReduceOp::kL2: return v * v;
    case ReduceOp::kL1: return fabsf(v);
    default: return v;
  }
}

__device__ __forceinline__ float Finish(ReduceOp op, float acc, int64_t len, float max) {
  switch (op) {
    case ReduceOp::kMean: return acc / static_cast<float>(len);
    case ReduceOp::kL2: return sqrtf(acc);
    case ReduceOp::kLogSumExp: return max + logf(acc);
    default: return acc;
  }
}


// inner == 1: one block per row.
__global__ void ReduceRowsKernel(ReduceOp op, const float* x, float* y, int64_t len) {
  __shared__ float shared[32];
  const float* row = x + blockIdx.x * len;
  float max = -FLT_MAX;
  if (op == ReduceOp::kLogSumExp || op == ReduceOp::kMax) {
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) max = fmaxf(max, row[i]);
    max = BlockMax(max, shared);
  }
  if (op == ReduceOp::kMax) {
    if (threadIdx.x == 0) y[blockIdx.x] = max;
    return;
  }
  if (op == ReduceOp::kMin) {
    float min = FLT_MAX;
    for (int64_t i = threadIdx.x; i < len; i += blockDim.x) min = fminf(min, row[i]);
    min = -BlockMax(-min, shared);
    if (threadIdx.x == 0) y[blockIdx.x] = min;
    return;
  }
  float acc = 0.0f;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    acc += op == ReduceOp::kLogSumExp ? expf(row[i] - max) : Prep(op, row[i]);
  }
  acc = BlockSum(acc, shared);
  if (threadIdx.x == 0) y[blockIdx.x] = Finish(op, acc, len, max);
}

// inner > 1: one thread per output.
__global__ void ReduceColumnsKernel(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner) {
  ONT_GRID_STRIDE_LOOP(t, outer * inner) {
    const float* p = x + (t / inner) * len * inner + t % inner;
    float max = -FLT_MAX, min = FLT_MAX, acc = 0.0f;
    for (int64_t i = 0; i < len; ++i) {
      max = fmaxf(max, p[i * inner]);
      min = fminf(min, p[i * inner]);
    }
    if (op == ReduceOp::kMax) { y[t] = max; continue; }
    if (op == ReduceOp::kMin) { y[t] = min; continue; }
    for (int64_t i = 0; i < len; ++i) {
      acc += op == ReduceOp::kLogSumExp ? expf(p[i * inner] - max) : Prep(op, p[i * inner]);
    }
    y[t] = Finish(op, acc, len, max);
  }
}

}  // namespace

cudaError_t Reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner,
                   cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  if (len == 0) {
    // The empty reduction: 0 for sums, the identity otherwise (ONNX: -inf for max, +inf for min).
    float v = op == ReduceOp::kMax ? -INFINITY : op == ReduceOp::kMin ? INFINITY
              : op == ReduceOp::kLogSumExp ? -INFINITY : op == ReduceOp::kMean ? NAN : 0.0f;
    return Fill(y, outer * inner, &v, 4, stream);
  }
  if (inner == 1 && outer < (int64_t{1} << 31)) {
    ReduceRowsKernel<<<static_cast<unsigned>(outer), kThreads, 0, stream>>>(op, x, y, len);
  } else {
    ReduceColumnsKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(op, x, y, outer, len, inner);
  }
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
