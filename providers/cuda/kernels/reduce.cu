// Reductions over one axis of x viewed as [outer, len, inner]. The kernel classes fold any set of reduced
// axes into that form (contiguous axes) or transpose first. Each output is reduced in an order that the
// shape alone fixes (no atomics), so the result is the same on every run and on every GPU:
// - inner == 1 (rows): a warp per row up to kWarpRowMax long (8 rows to a block), a block per longer row;
//   lanes stride the row, then a shuffle tree (and, for a block, the warps' totals in order);
// - inner > 1 (columns): a block of 32 x Y threads per 32 neighbouring outputs of one outer index, thread
//   (x, y) summing column x over the rows y, y + Y, ... (each row's 32 reads are one coalesced access);
//   row 0 of the block then adds the Y partial sums in order. Y grows with len (up to 32), so long columns
//   are read by up to 1024 threads at once instead of one thread each. Where those tiles are too few
//   blocks to fill a GPU (a bias gradient [4096, 512] -> [512] is 16 tiles), the rows are also split into
//   ranges (grid.z), each tile writing its range's partial result to a workspace, and a second kernel
//   combines the ranges in order (ColumnSplits: how many, from the shape alone);
// - except where there are many outputs (kManyOutputs) in narrow columns (inner < 32): there one thread per
//   output already fills the GPU and a 32-wide tile would leave most of its threads idle.
#include <cfloat>

#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

constexpr int64_t kManyOutputs = int64_t{1} << 16;
constexpr int64_t kMaxOuterBlocks = 1024;  // tiles' grid.y; blocks loop over the rest of outer
constexpr int64_t kFillBlocks = 256;       // tile grids with fewer blocks split their rows (2 a SM on an H200)
constexpr int64_t kSplitRows = 256;        // a range has at least this many rows: 8 reads a thread of 32 rows
constexpr int64_t kMaxSplits = 64;

// Max, Min and LogSumExp need the extreme value of the line first (LogSumExp subtracts the max).
__device__ __forceinline__ bool NeedsExtreme(ReduceOp op) {
  return op == ReduceOp::kMax || op == ReduceOp::kMin || op == ReduceOp::kLogSumExp;
}
__device__ __forceinline__ bool OnlyExtreme(ReduceOp op) { return op == ReduceOp::kMax || op == ReduceOp::kMin; }
__device__ __forceinline__ float ExtremeStart(ReduceOp op) { return op == ReduceOp::kMin ? FLT_MAX : -FLT_MAX; }
__device__ __forceinline__ float Extreme(ReduceOp op, float a, float b) {
  return op == ReduceOp::kMin ? fminf(a, b) : fmaxf(a, b);
}

// The summed term of one element (m: the line's max, for LogSumExp).
__device__ __forceinline__ float Term(ReduceOp op, float v, float m) {
  switch (op) {
    case ReduceOp::kSumSquare:
    case ReduceOp::kL2: return v * v;
    case ReduceOp::kL1: return fabsf(v);
    case ReduceOp::kLogSumExp: return expf(v - m);
    default: return v;
  }
}

__device__ __forceinline__ float Finish(ReduceOp op, float acc, int64_t len, float m) {
  switch (op) {
    case ReduceOp::kMean: return acc / static_cast<float>(len);
    case ReduceOp::kL2: return sqrtf(acc);
    case ReduceOp::kLogSumExp: return m + logf(acc);
    case ReduceOp::kLogSum: return logf(acc);
    default: return acc;
  }
}

// inner == 1: a warp or a block per row.
template <bool kWarp>
__global__ void __launch_bounds__(1024) ReduceRowsKernel(ReduceOp op, const float* x, float* y, int64_t rows, int64_t len) {
  __shared__ float shared[32];
  const RowGroup<kWarp> rg;
  if (!rg.valid(rows)) return;
  const float* row = x + rg.row * len;
  float m = ExtremeStart(op);
  if (NeedsExtreme(op)) {
    for (int64_t i = rg.lane; i < len; i += rg.step) m = Extreme(op, m, row[i]);
    // Min as the max of negations: the row groups' Max is the only extreme they combine.
    m = op == ReduceOp::kMin ? -rg.Max(-m, shared) : rg.Max(m, shared);
  }
  float result = m;
  if (!OnlyExtreme(op)) {
    float acc = 0.0f;
    for (int64_t i = rg.lane; i < len; i += rg.step) acc += Term(op, row[i], m);
    result = Finish(op, rg.Sum(acc, shared), len, m);
  }
  if (rg.lane == 0) y[rg.row] = result;
}

// inner > 1: a block of 32 x blockDim.y threads per 32 outputs (blockIdx.x) of one outer index
// (blockIdx.y, striding over outer).
// With ranges (gridDim.z > 1), block z reads rows [z * range, (z + 1) * range) and writes its unfinished
// result (the sum of terms, or the extreme) to partial[z, o, c] instead of y.
__global__ void __launch_bounds__(1024) ReduceColumnTilesKernel(ReduceOp op, const float* x, float* y, int64_t outer,
                                                                int64_t len, int64_t inner, int64_t range, float* partial) {
  __shared__ float part[32][33];  // [y][x], padded against bank conflicts in the column sums
  const int tx = threadIdx.x, ty = threadIdx.y, rows = blockDim.y;
  const int64_t c = blockIdx.x * int64_t{32} + tx;
  const bool live = c < inner;
  const bool split = gridDim.z > 1;
  const int64_t first = blockIdx.z * range, count = split ? (len - first < range ? len - first : range) : len;
  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    const float* p = x + (o * len + first) * inner + c;
    float m = ExtremeStart(op);
    if (NeedsExtreme(op)) {
      if (live) {
        for (int64_t i = ty; i < count; i += rows) m = Extreme(op, m, p[i * inner]);
      }
      part[ty][tx] = m;
      __syncthreads();
      if (ty == 0) {
        for (int k = 1; k < rows; ++k) m = Extreme(op, m, part[k][tx]);
        part[0][tx] = m;
      }
      __syncthreads();
      m = part[0][tx];
      __syncthreads();  // every thread has read part[0] before it is written again
    }
    float result = m;
    if (!OnlyExtreme(op)) {
      float acc = 0.0f;
      if (live) {
        for (int64_t i = ty; i < count; i += rows) acc += Term(op, p[i * inner], m);
      }
      part[ty][tx] = acc;
      __syncthreads();
      if (ty == 0) {
        float total = part[0][tx];
        for (int k = 1; k < rows; ++k) total += part[k][tx];
        result = split ? total : Finish(op, total, len, m);
      }
      __syncthreads();  // row 0 has read the partial sums before the next outer index writes them
    }
    if (ty == 0 && live) (split ? partial + blockIdx.z * outer * inner : y)[o * inner + c] = result;
  }
}

// The ranges' partial results [splits, n] combined in order into y [n].
__global__ void CombineRangesKernel(ReduceOp op, const float* partial, float* y, int64_t n, int64_t splits, int64_t len) {
  ONT_GRID_STRIDE_LOOP(t, n) {
    float v = partial[t];
    for (int64_t z = 1; z < splits; ++z) v = OnlyExtreme(op) ? Extreme(op, v, partial[z * n + t]) : v + partial[z * n + t];
    y[t] = OnlyExtreme(op) ? v : Finish(op, v, len, 0.0f);
  }
}

// Many narrow columns: one thread per output, summing its column in order.
__global__ void ReduceColumnsKernel(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner) {
  ONT_GRID_STRIDE_LOOP(t, outer * inner) {
    const float* p = x + (t / inner) * len * inner + t % inner;
    float m = ExtremeStart(op);
    if (NeedsExtreme(op)) {
      for (int64_t i = 0; i < len; ++i) m = Extreme(op, m, p[i * inner]);
    }
    if (OnlyExtreme(op)) {
      y[t] = m;
      continue;
    }
    float acc = 0.0f;
    for (int64_t i = 0; i < len; ++i) acc += Term(op, p[i * inner], m);
    y[t] = Finish(op, acc, len, m);
  }
}

int64_t ColumnTiles(int64_t inner) { return (inner + 31) / 32; }

// ArgMax / ArgMin: one thread per output, walking its line in order with the CPU kernel's comparisons (a
// NaN is never better than anything, so it wins only as the first element).
template <typename T>
__global__ void ArgExtremeKernel(const T* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max,
                                 bool last) {
  ONT_GRID_STRIDE_LOOP(t, outer * inner) {
    const T* p = x + (t / inner) * len * inner + t % inner;
    T best = p[0];
    int64_t arg = 0;
    for (int64_t k = 1; k < len; ++k) {
      const T v = p[k * inner];
      const bool better = max ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
      if (better) {
        best = v;
        arg = k;
      }
    }
    y[t] = arg;
  }
}

template <typename T>
cudaError_t LaunchArgExtreme(const T* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max, bool last,
                             cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  if (len == 0) return cudaErrorInvalidValue;  // the CPU kernel's Prepare refuses an empty axis first
  ArgExtremeKernel<T><<<Blocks(outer * inner), kThreads, 0, stream>>>(x, y, outer, len, inner, max, last);
  return cudaGetLastError();
}

}  // namespace

int64_t ReduceSplits(ReduceOp op, int64_t outer, int64_t len, int64_t inner) {
  // Only the tile kernel splits, and not LogSumExp, whose terms need the whole column's max first.
  if (op == ReduceOp::kLogSumExp || inner == 1 || (inner < 32 && outer * inner >= kManyOutputs)) return 1;
  const int64_t blocks = ColumnTiles(inner) * (outer < kMaxOuterBlocks ? outer : kMaxOuterBlocks);
  if (blocks >= kFillBlocks) return 1;
  int64_t s = (kFillBlocks + blocks - 1) / blocks;
  if (s > len / kSplitRows) s = len / kSplitRows;
  if (s > kMaxSplits) s = kMaxSplits;
  return s >= 2 ? s : 1;
}

cudaError_t Reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner, float* workspace,
                   cudaStream_t stream) {
  if (outer * inner == 0) return cudaSuccess;
  if (len == 0) {
    // The empty reduction: 0 for sums, the identity otherwise (ONNX: -inf for max, +inf for min).
    float v = op == ReduceOp::kMax ? -INFINITY : op == ReduceOp::kMin ? INFINITY
              : op == ReduceOp::kLogSumExp || op == ReduceOp::kLogSum ? -INFINITY : op == ReduceOp::kMean ? NAN : 0.0f;
    return Fill(y, outer * inner, &v, 4, stream);
  }
  if (inner == 1 && WarpRows(len) && outer < (int64_t{1} << 33)) {
    ReduceRowsKernel<true><<<RowBlocks(true, outer), kThreads, 0, stream>>>(op, x, y, outer, len);
  } else if (inner == 1 && outer < (int64_t{1} << 31)) {
    const int threads = len >= 16 * kWarpRowMax ? 1024 : kThreads;  // more reads in flight on long rows
    ReduceRowsKernel<false><<<RowBlocks(false, outer), threads, 0, stream>>>(op, x, y, outer, len);
  } else if (inner < 32 && outer * inner >= kManyOutputs) {
    ReduceColumnsKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(op, x, y, outer, len, inner);
  } else {
    const int64_t splits = workspace != nullptr ? ReduceSplits(op, outer, len, inner) : 1;
    const int64_t range = (len + splits - 1) / splits;
    int rows = 1;  // thread rows per tile: about 8 reads each, at most 32 rows
    while (rows < 32 && rows * 8 < range) rows *= 2;
    const int64_t tiles = ColumnTiles(inner);
    if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(outer < kMaxOuterBlocks ? outer : kMaxOuterBlocks),
                    static_cast<unsigned>(splits));
    ReduceColumnTilesKernel<<<grid, dim3(32, rows), 0, stream>>>(op, x, y, outer, len, inner, range, workspace);
    if (splits > 1) {
      const cudaError_t e = cudaGetLastError();
      if (e != cudaSuccess) return e;
      CombineRangesKernel<<<Blocks(outer * inner), kThreads, 0, stream>>>(op, workspace, y, outer * inner, splits, len);
    }
  }
  return cudaGetLastError();
}

#define ONT_ARG_EXTREME(T)                                                                                      \
  cudaError_t ArgExtreme(const T* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max, bool last, \
                         cudaStream_t stream) {                                                                   \
    return LaunchArgExtreme(x, y, outer, len, inner, max, last, stream);                                        \
  }
ONT_ARG_EXTREME(float)
ONT_ARG_EXTREME(double)
ONT_ARG_EXTREME(int32_t)
ONT_ARG_EXTREME(int64_t)
#undef ONT_ARG_EXTREME

}  // namespace cuda
}  // namespace ontrain
