// The optimizer step on the device: AdamW and SGD update every tensor of a step in one launch (a thread
// finds its tensor by binary search over the running offsets), with the CPU kernels' exact formulas
// (providers/cpu/kernels/training_optimizers.cc); the gradient-norm clip sums squares in double in a
// fixed order: each tensor in up to kMaxClipPieces contiguous pieces, a block each, so that one large tensor
// (an embedding) is not summed and scaled by a single block.
#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

__device__ __forceinline__ int FindSlot(const int64_t* starts, int count, int64_t i) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (starts[mid] <= i) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

__global__ void AdamWKernel(const TensorSlot* slots, const int64_t* starts, int count, int64_t total, AdamWArgs a) {
  __shared__ float lr, ac, bc, lr_c;
  if (threadIdx.x == 0) {  // once per block, from this step's values in device memory
    lr = *a.lr;
    ac = 1.0f;
    bc = 1.0f;
    if (a.correct_bias) {
      const double step = static_cast<double>(*a.step);
      ac = 1.0f - static_cast<float>(pow(static_cast<double>(a.alpha), step));
      bc = 1.0f - static_cast<float>(pow(static_cast<double>(a.beta), step));
    }
    lr_c = lr * sqrtf(bc) / ac;
  }
  __syncthreads();
  ONT_GRID_STRIDE_LOOP(t, total) {
    int k = FindSlot(starts, count, t);
    int64_t i = t - starts[k];
    TensorSlot s = slots[k];
    float w = s.w[i], m = s.m[i], v = s.v[i], g = s.g[i];
    if (a.mode == 0) {
      w -= w * lr * a.weight_decay;
      m = a.alpha * m + (1.0f - a.alpha) * g;
      v = a.beta * v + (1.0f - a.beta) * g * g;
      w -= lr * m / (ac * (sqrtf(v / bc) + a.epsilon));
    } else {
      m = a.alpha * m + (1.0f - a.alpha) * g;
      v = a.beta * v + (1.0f - a.beta) * g * g;
      w -= lr_c * m / (sqrtf(v) + a.epsilon);
      w -= lr * a.weight_decay * w;
    }
    s.w[i] = w;
    s.m[i] = m;
    s.v[i] = v;
  }
}

__global__ void SgdKernel(const TensorSlot* slots, const int64_t* starts, int count, int64_t total, const float* rate) {
  const float lr = *rate;
  ONT_GRID_STRIDE_LOOP(t, total) {
    int k = FindSlot(starts, count, t);
    int64_t i = t - starts[k];
    slots[k].w[i] -= lr * slots[k].g[i];
  }
}

// The range of tensor s that piece `piece` of `pieces` covers: equal contiguous parts (the last ones empty
// where the tensor has fewer elements than pieces).
__device__ __forceinline__ void PieceOf(int64_t n, int piece, int pieces, int64_t* begin, int64_t* end) {
  const int64_t size = (n + pieces - 1) / pieces;
  *begin = size * piece < n ? size * piece : n;
  *end = *begin + size < n ? *begin + size : n;
}

// Block (piece, tensor): the sum of squares of its piece, in double.
__global__ void SumSquaresKernel(const TensorSlot* slots, double* partials) {
  __shared__ double shared[32];
  const TensorSlot s = slots[blockIdx.y];
  int64_t begin, end;
  PieceOf(s.n, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), &begin, &end);
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) acc += static_cast<double>(s.w[i]) * s.w[i];
  acc = BlockSum(acc, shared);
  if (threadIdx.x == 0) partials[blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

// Block (piece, tensor): sums every partial in order (tensor by tensor, piece by piece; each block gets the
// same total), then scales its piece.
__global__ void ClipKernel(const TensorSlot* slots, int partial_count, float max_norm, const double* partials) {
  double sum = 0.0;
  for (int k = 0; k < partial_count; ++k) sum += partials[k];
  float norm = static_cast<float>(sqrt(sum));
  float coef = fminf(max_norm / (norm + 1e-6f), 1.0f);
  const TensorSlot s = slots[blockIdx.y];
  int64_t begin, end;
  PieceOf(s.n, static_cast<int>(blockIdx.x), static_cast<int>(gridDim.x), &begin, &end);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) s.w[i] *= coef;
}

__global__ void SetFlagsKernel(uint8_t* flags, int64_t n, uint8_t value) {
  ONT_GRID_STRIDE_LOOP(i, n) flags[i] = value;
}

}  // namespace

cudaError_t AdamW(const TensorSlot* slots, const int64_t* starts, int count, int64_t total, const AdamWArgs& args,
                  cudaStream_t stream) {
  if (total == 0) return cudaSuccess;
  AdamWKernel<<<Blocks(total), kThreads, 0, stream>>>(slots, starts, count, total, args);
  return cudaGetLastError();
}

cudaError_t Sgd(const TensorSlot* slots, const int64_t* starts, int count, int64_t total, const float* lr,
                cudaStream_t stream) {
  if (total == 0) return cudaSuccess;
  SgdKernel<<<Blocks(total), kThreads, 0, stream>>>(slots, starts, count, total, lr);
  return cudaGetLastError();
}

int ClipPieces(int64_t largest) {
  const int64_t pieces = (largest + kClipPieceElements - 1) / kClipPieceElements;
  return static_cast<int>(pieces < 1 ? 1 : pieces > kMaxClipPieces ? kMaxClipPieces : pieces);
}

cudaError_t ClipGradNorm(const TensorSlot* slots, int count, int pieces, float max_norm, double* partials,
                         cudaStream_t stream) {
  if (count == 0) return cudaSuccess;
  if (count > 65535 || pieces < 1 || pieces > kMaxClipPieces) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(pieces), static_cast<unsigned>(count));
  SumSquaresKernel<<<grid, kThreads, 0, stream>>>(slots, partials);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return e;
  ClipKernel<<<grid, kThreads, 0, stream>>>(slots, count * pieces, max_norm, partials);
  return cudaGetLastError();
}

cudaError_t SetFlags(uint8_t* flags, int64_t n, bool value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  SetFlagsKernel<<<Blocks(n), kThreads, 0, stream>>>(flags, n, value ? 1 : 0);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
