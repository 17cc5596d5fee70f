// The device-code launchers of the CUDA provider: plain functions over raw device pointers and sizes, one
// .cu file per op family (elementwise, copy, reduce, softmax, loss, norm, optimizer). The kernel classes in
// the .cc files validate inputs, compute shapes and call these; nothing here allocates. Every launcher
// queues work on `stream` and returns the launch's error (cudaSuccess when nothing needed launching).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "providers/cuda/kernels/device_math.h"
#include "providers/cuda/kernels/recurrent_math.h"

namespace ontrain {
namespace cuda {

constexpr int kMaxDims = 8;

// An iteration space of `rank` dims (row-major over `dims`) and, for each of up to three operands, the
// element stride of each dim (0 along broadcast dims).
struct StridedSpace {
  int rank = 0;
  int64_t dims[kMaxDims] = {};
  int64_t strides[3][kMaxDims] = {};
  int64_t count() const {
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    return n;
  }
};

// elementwise.cu ------------------------------------------------------------------------------------------

enum class UnaryOp {
  kNeg, kAbs, kSqrt, kExp, kLog, kTanh, kSigmoid, kRelu, kErf, kReciprocal, kGelu, kGeluTanh, kLeakyRelu,
  kSoftplus, kFloor, kCeil, kSin, kCos, kElu, kCelu, kSelu, kHardSigmoid, kHardSwish, kThresholdedRelu,
  kSoftsign, kSign, kRound, kTan, kAsin, kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh,
  kDivBy,  // x / alpha (Mean's division by its input count)
};
// y = op(x) elementwise over n elements; `alpha` and `beta` are the op's attributes (LeakyRelu's, Elu's,
// Celu's and ThresholdedRelu's alpha; HardSigmoid's alpha and beta; Selu's alpha and gamma).
cudaError_t Unary(UnaryOp op, const float* x, float* y, int64_t n, float alpha, float beta, cudaStream_t stream);
cudaError_t Unary(UnaryOp op, const double* x, double* y, int64_t n, float alpha, float beta, cudaStream_t stream);
inline cudaError_t Unary(UnaryOp op, const float* x, float* y, int64_t n, float alpha, cudaStream_t stream) {
  return Unary(op, x, y, n, alpha, 0.0f, stream);
}
inline cudaError_t Unary(UnaryOp op, const double* x, double* y, int64_t n, float alpha, cudaStream_t stream) {
  return Unary(op, x, y, n, alpha, 0.0f, stream);
}
// IsNaN (is_nan) or IsInf (the signs neg and pos detects) of each element, as bytes 0 or 1.
cudaError_t Classify(const float* x, uint8_t* y, int64_t n, bool is_nan, bool neg, bool pos, cudaStream_t stream);
cudaError_t Classify(const double* x, uint8_t* y, int64_t n, bool is_nan, bool neg, bool pos, cudaStream_t stream);
// Not over bools (bytes 0 or 1).
cudaError_t Not(const uint8_t* x, uint8_t* y, int64_t n, cudaStream_t stream);
// Clip: y = x < lo ? lo : (x > hi ? hi : x), the CPU kernel's tests in its order (NaN passes through).
cudaError_t Clip(const float* x, float* y, int64_t n, double lo, double hi, cudaStream_t stream);
cudaError_t Clip(const double* x, double* y, int64_t n, double lo, double hi, cudaStream_t stream);
// ai.ontrain ClipGrad: out = (lo <= x && x <= hi) ? dy : fill, dy and x broadcast into out (strides 1, 2).
cudaError_t ClipGrad(const float* dy, const float* x, float* out, const StridedSpace& s, double lo, double hi,
                     double fill, cudaStream_t stream);

enum class BinaryOp {
  kAdd, kSub, kMul, kDiv, kPow, kMax, kMin,
  kDivBySquare,  // a / (b * b)
  kNegMul,       // -(a * b)
  kAddRelu,      // (a + b) > 0 ? a + b : 0: a bias and ReLU in one pass (FusedConv)
  kPRelu,        // a < 0 ? a * b : a (b: the slope, broadcast)
  // gradients (a = dY, b = the forward input or output the gradient reads)
  kReluGrad, kSigmoidGrad, kTanhGrad, kGeluGrad, kFastGeluGrad, kLeakyReluGrad,
};
// out = op(a, b) over `space` (operand 0: out, contiguous; 1: a; 2: b).
cudaError_t Binary(BinaryOp op, const float* a, const float* b, float* out, const StridedSpace& space, float alpha,
                   cudaStream_t stream);
cudaError_t Binary(BinaryOp op, const double* a, const double* b, double* out, const StridedSpace& space,
                   float alpha, cudaStream_t stream);
cudaError_t Binary(BinaryOp op, const int32_t* a, const int32_t* b, int32_t* out, const StridedSpace& space,
                   float alpha, cudaStream_t stream);
cudaError_t Binary(BinaryOp op, const int64_t* a, const int64_t* b, int64_t* out, const StridedSpace& space,
                   float alpha, cudaStream_t stream);

enum class CompareOp { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor };
// out (bool as uint8) = a op b over `space`, for float32 and int64 inputs (the comparisons) and bool ones
// (the logical ops, any nonzero byte true).
cudaError_t Compare(CompareOp op, const float* a, const float* b, uint8_t* out, const StridedSpace& space,
                    cudaStream_t stream);
cudaError_t Compare(CompareOp op, const uint8_t* a, const uint8_t* b, uint8_t* out, const StridedSpace& space,
                    cudaStream_t stream);
cudaError_t Compare(CompareOp op, const int64_t* a, const int64_t* b, uint8_t* out, const StridedSpace& space,
                    cudaStream_t stream);

// out = cond ? x : y over `space` (operand 0: cond, 1: x, 2: y; out contiguous), moving elem_size bytes.
cudaError_t Where(const uint8_t* cond, const void* x, const void* y, void* out, const StridedSpace& space,
                  int elem_size, cudaStream_t stream);

// Cast between float32, float64, int32, int64 and bool (dtype codes: core/dtype.h's DType values).
cudaError_t Cast(int from_dtype, int to_dtype, const void* x, void* y, int64_t n, cudaStream_t stream);

// Dropout: keep element i when u(seed, *offset + i) >= ratio, with u uniform in [0, 1) from a counter-based
// hash (so a step's mask depends only on the seed and the element's counter, never on the launch); kept
// elements are scaled by 1 / (1 - ratio). `mask` (bool as uint8) is nullable. Then *offset += n, on the
// device: the counter lives in device memory so that a recorded launch draws fresh masks at each replay.
cudaError_t Dropout(const float* x, float* y, uint8_t* mask, int64_t n, float ratio, uint64_t seed, uint64_t* offset,
                    cudaStream_t stream);
// dX = mask ? dY * scale : 0.
cudaError_t DropoutGrad(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale, cudaStream_t stream);

// y = x * scale for n elements (Scale, and the mean of a sum).
cudaError_t ScaleBy(const float* x, float* y, int64_t n, float scale, cudaStream_t stream);

// copy.cu -------------------------------------------------------------------------------------------------

// dst[off0(i)] = src[off1(i)] for every index i of `space`, moving elem_size (1, 2, 4 or 8) bytes; operand
// 0 addresses dst, operand 1 src. Transpose, Expand, Slice, Concat, Split, Tile and Pad's copy are this.
cudaError_t StridedCopy(const void* src, void* dst, const StridedSpace& space, int elem_size, cudaStream_t stream);

// Pad: y (dims `out`) from x (dims `in`, contiguous) shifted by pads_begin (negative crops); outside x:
// mode 0 the `fill` bytes, 1 the edge element, 2 the reflection, 3 the wrapped-around element.
struct PadArgs {
  int rank;
  int64_t out[kMaxDims], in[kMaxDims], begin[kMaxDims];
  int mode;
  uint64_t fill;  // the constant, as elem_size bytes
};
cudaError_t Pad(const void* x, void* y, const PadArgs& a, int elem_size, cudaStream_t stream);

// Fills n elements of elem_size bytes with the value at `pattern` (host memory).
cudaError_t Fill(void* dst, int64_t n, const void* pattern, int elem_size, cudaStream_t stream);

// Gather along an axis: data viewed as [outer, axis_len, inner], indices (int32 or int64, n of them,
// negative counting from the end; out-of-range ones produce zeros and set *bad on the device) -> out
// [outer, n, inner].
cudaError_t Gather(const void* data, const void* indices, bool indices64, void* out, int64_t outer, int64_t axis_len,
                   int64_t inner, int64_t n, int elem_size, int* bad, cudaStream_t stream);
// GatherGrad: out [outer, rows, inner] = 0, then out[o, idx[j], k] += dy[o, j, k] (deterministic: a warp per
// output row finds its positions in order and sums them). Long index lists are split into
// GatherGradRanges(...) ranges (1: none) whose partial sums need a workspace of ranges * outer * rows * inner
// floats (without one, workspace null, they run unsplit).
int64_t GatherGradRanges(int64_t rows, int64_t inner, int64_t n, int64_t outer);
cudaError_t GatherGrad(const float* dy, const void* indices, bool indices64, float* out, int64_t rows, int64_t inner,
                       int64_t n, int64_t outer, float* workspace, cudaStream_t stream);
// OneHot: indices (int32 or int64, [outer, inner] around the new axis; negative ones count from depth, out
// of range ones select nothing) -> y [outer, depth, inner] of values[1] where the index is k, values[0]
// elsewhere (`values` on the device, two elements of elem_size bytes).
cudaError_t OneHot(const void* indices, bool indices64, const void* values, void* y, int64_t outer, int64_t depth,
                   int64_t inner, int elem_size, cudaStream_t stream);

// GatherElementsGrad: dX (dims `x`, rank <= kMaxDims) = 0, then dX[q with axis coord idx[q]] += dY[q] for
// every q of dY (dims `y`); as a gather, each dX element walks its line of dY in order. Indices int32 or
// int64 (negative from the end); out-of-range ones are skipped.
struct ElementsGradArgs {
  int rank, axis;
  int64_t x[kMaxDims], y[kMaxDims];
};
cudaError_t GatherElementsGrad(const float* dy, const void* indices, bool indices64, float* dx,
                               const ElementsGradArgs& a, cudaStream_t stream);

// resize_einsum.cu ----------------------------------------------------------------------------------------

// y[o] = EinsumElement(a, ops, o) for n outputs; ops holds a.operands device pointers.
cudaError_t Einsum(const EinsumArgs& a, const float* const* ops, float* y, int64_t n, cudaStream_t stream);
cudaError_t Einsum(const EinsumArgs& a, const double* const* ops, double* y, int64_t n, cudaStream_t stream);
// y[o] = ResizeElement(a, t, x, o) for n outputs; t points at device tables.
cudaError_t Resize(const ResizeArgs& a, const ResizeTables& t, const float* x, float* y, int64_t n,
                   cudaStream_t stream);
// dx[i] = ResizeGradElement(a, t, dy, i) for the n elements of dX.
cudaError_t ResizeGrad(const ResizeArgs& a, const ResizeTables& t, const float* dy, float* dx, int64_t n,
                       cudaStream_t stream);

// index_ops.cu -------------------------------------------------------------------------------------------
// The bodies are device_math.h's; an out-of-range index reads 0 and writes nothing (the device cannot report
// it without a synchronization). Scatters and TopK: float32; the gathers and Trilu move elem_size bytes.

cudaError_t Trilu(const void* x, void* y, const TriluArgs& a, int64_t n, int elem_size, cudaStream_t stream);
// CumSum of `lines` = outer * inner lines of length len.
cudaError_t CumSum(const float* x, float* y, int64_t lines, int64_t len, int64_t inner, bool exclusive, bool reverse,
                   cudaStream_t stream);
cudaError_t CumSum(const double* x, double* y, int64_t lines, int64_t len, int64_t inner, bool exclusive, bool reverse,
                   cudaStream_t stream);
// n = the indices' element count.
cudaError_t GatherElements(const void* data, const void* idx, bool idx64, void* out, const ElementsArgs& a, int64_t n,
                           int elem_size, cudaStream_t stream);
// `out` holds the data already; `lines` = the indices' elements / their axis length.
cudaError_t ScatterElements(const float* updates, const void* idx, bool idx64, float* out, const ElementsArgs& a, int red,
                            int64_t lines, cudaStream_t stream);
// n = the output's element count.
cudaError_t GatherND(const void* data, const void* idx, bool idx64, void* out, const NdArgs& a, int64_t n, int elem_size,
                     cudaStream_t stream);
// ScatterND (out holds the data) and GatherNDGrad (out zeroed, red add).
cudaError_t NdScatter(const float* updates, const void* idx, bool idx64, float* out, const NdArgs& a, int red,
                      cudaStream_t stream);
cudaError_t TopK(const float* x, float* values, int64_t* indices, int64_t lines, int64_t len, int64_t inner, int64_t k,
                 bool largest, bool sorted, cudaStream_t stream);

// recurrent.cu -------------------------------------------------------------------------------------------

// Queues one recurrent pass (recurrent_passes.h) on `stream`, its GEMMs on `cublas` (bound to that stream).
// Returns null, or the name of the call that failed.
const char* Recurrent(RecurrentPass p, const RecurrentCall<float>& c, cublasHandle_t cublas, cudaStream_t stream);
const char* Recurrent(RecurrentPass p, const RecurrentCall<double>& c, cublasHandle_t cublas, cudaStream_t stream);

// reduce.cu -----------------------------------------------------------------------------------------------

enum class ReduceOp { kSum, kMean, kMax, kMin, kSumSquare, kL1, kL2, kLogSumExp, kLogSum };
// x viewed as [outer, len, inner] -> y [outer, inner]. Every output is reduced in an order the shape fixes
// (a warp or block per row, 32 x Y tiles for columns), so results do not depend on timing or the GPU.
// Column reductions whose tiles would be too few blocks also split the rows into ReduceSplits(...) ranges
// (1: none), combined in order; they need a workspace of splits * outer * inner floats on the device
// (without one, workspace null, they run unsplit).
int64_t ReduceSplits(ReduceOp op, int64_t outer, int64_t len, int64_t inner);
// ArgMax (max) or ArgMin of x viewed as [outer, len, inner] along len -> y [outer, inner]; `last`: the last
// index among equal extremes (select_last_index), else the first.
cudaError_t ArgExtreme(const float* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max, bool last,
                       cudaStream_t stream);
cudaError_t ArgExtreme(const double* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max, bool last,
                       cudaStream_t stream);
cudaError_t ArgExtreme(const int32_t* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max, bool last,
                       cudaStream_t stream);
cudaError_t ArgExtreme(const int64_t* x, int64_t* y, int64_t outer, int64_t len, int64_t inner, bool max, bool last,
                       cudaStream_t stream);
cudaError_t Reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner, float* workspace,
                   cudaStream_t stream);

// softmax.cu ----------------------------------------------------------------------------------------------

// Softmax or LogSoftmax of x viewed as [outer, len, inner] along len.
cudaError_t Softmax(const float* x, float* y, int64_t outer, int64_t len, int64_t inner, bool log,
                    cudaStream_t stream);
// Their gradients from dY and the forward output Y: softmax dX = Y (dY - sum(dY Y)); log-softmax
// dX = dY - exp(Y) sum(dY).
cudaError_t SoftmaxGrad(const float* dy, const float* y, float* dx, int64_t outer, int64_t len, int64_t inner,
                        bool log, cudaStream_t stream);

// loss.cu -------------------------------------------------------------------------------------------------

// Softmax cross-entropy over scores [N, C, D] (D: the product of the extra dims) with labels [N, D]
// (int32 or int64) and optional class weights [C]:
// log_prob = log_softmax(scores, axis 1); per-element loss = -w[label] log_prob[label] (0 where label ==
// ignore_index). `reduction`: 0 none (loss [N, D]), 1 sum, 2 mean (divided by the sum of the weights of
// the counted elements). The reduction runs in one block in a fixed order. A label outside [0, C) that is
// not ignored makes the loss NaN (the device cannot return an error without a synchronization).
// `scratch` holds 2 N D floats.
struct CrossEntropyArgs {
  const float* scores;
  const void* labels;
  bool labels64;
  const float* weights;  // nullable
  int64_t n, c, d;
  bool has_ignore;
  int64_t ignore_index;
  int reduction;
  const float* bias;  // nullable: added to dScores (the Internal gradient's bias input)
};
cudaError_t CrossEntropy(const CrossEntropyArgs& a, float* loss, float* log_prob, float* scratch, cudaStream_t stream);
// NegativeLogLikelihoodLoss: a.scores are the log-probabilities already; scratch: 2 * n * d floats.
cudaError_t NllLoss(const CrossEntropyArgs& a, float* loss, float* scratch, cudaStream_t stream);
// dScores from dLoss (a scalar for sum/mean, [N, D] for none) and the saved log_prob.
cudaError_t CrossEntropyGrad(const CrossEntropyArgs& a, const float* dloss, const float* log_prob, float* dscores,
                             float* scratch, cudaStream_t stream);

// norm.cu -------------------------------------------------------------------------------------------------

// LayerNormalization over rows of length `cols`: y = (x - mean) * inv_std * scale + bias (bias nullable);
// mean and inv_std ([rows]) are saved for the gradient when not null.
cudaError_t LayerNorm(const float* x, const float* scale, const float* bias, float* y, float* mean, float* inv_std,
                      int64_t rows, int64_t cols, float epsilon, cudaStream_t stream);
// dX, dScale, dBias (each nullable) from dY, X, scale, mean, inv_std. dScale and dBias sum over rows in a
// fixed order (one thread per column).
cudaError_t LayerNormGrad(const float* dy, const float* x, const float* scale, const float* mean,
                          const float* inv_std, float* dx, float* dscale, float* dbias, int64_t rows, int64_t cols,
                          cudaStream_t stream);

// pool.cu -----------------------------------------------------------------------------------------------

// 2-D pooling geometry over `planes` = N * C planes of H x W (1-D pooling is H = 1). Pads: top, left,
// bottom, right.
struct Pool2D {
  int64_t planes, h, w, oh, ow;
  int64_t kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
  bool count_include_pad;
  int storage_order;  // MaxPool's Indices: 0 row-major, 1 column-major within the plane
};
// MaxPool with ONNX's Indices (flat over the whole input; nullable); the first maximum of a window wins.
cudaError_t MaxPool2D(const float* x, float* y, int64_t* indices, const Pool2D& g, cudaStream_t stream);
// dX[i] = sum of dY over the outputs whose index is i, in output order (a gather, so no atomics).
// y (nullable): ai.ontrain MaxPoolReluGrad's pooled values; only windows whose y is positive contribute.
cudaError_t MaxPool2DGrad(const float* dy, const int64_t* indices, const float* y, float* dx, const Pool2D& g,
                          cudaStream_t stream);
cudaError_t AvgPool2D(const float* x, float* y, const Pool2D& g, cudaStream_t stream);
cudaError_t AvgPool2DGrad(const float* dy, float* dx, const Pool2D& g, cudaStream_t stream);

// batchnorm.cu ------------------------------------------------------------------------------------------

// BatchNormalization over X [N, C, inner]. Training: batch statistics (in double, per channel),
// running_mean/var = old * momentum + batch * (1 - momentum) (population variance), saved_mean and
// saved_var (or 1/sqrt(var + eps) when `saved_inv_std`) when not null. Inference: the given mean and var.
struct BatchNormArgs {
  const float *x, *scale, *bias, *mean, *var;
  float* y;
  float *running_mean, *running_var, *saved_mean, *saved_var;
  int64_t n, c, inner;
  float epsilon, momentum;
  bool training, saved_inv_std;
};
// Training and the gradient reduce each channel over BatchNormSplits(n, c, inner) ranges of images, with a
// workspace of BatchNormWorkspace(...) doubles on the device.
int64_t BatchNormSplits(int64_t n, int64_t c, int64_t inner);
inline int64_t BatchNormWorkspace(int64_t n, int64_t c, int64_t inner) { return 2 * c * BatchNormSplits(n, c, inner); }
cudaError_t BatchNorm(const BatchNormArgs& a, double* workspace, cudaStream_t stream);
// dX, dScale, dBias (nullable) from dY, X, scale, the saved mean and 1/sqrt(var + eps).
cudaError_t BatchNormGrad(const float* dy, const float* x, const float* scale, const float* mean, const float* inv_std,
                          float* dx, float* dscale, float* dbias, int64_t n, int64_t c, int64_t inner, double* workspace,
                          cudaStream_t stream);

// optimizer.cu --------------------------------------------------------------------------------------------

// One tensor of a multi-tensor update: its element count and its buffers (unused ones null; the clip
// reads and scales `w`).
struct TensorSlot {
  float* w;
  const float* g;
  float* m;
  float* v;
  int64_t n;
};
// The learning rate and the step count are read from device memory by the kernel, so that a recorded step
// (graph capture) uses each step's values; the bias corrections 1 - alpha^step and 1 - beta^step are
// computed there in double and rounded once, as the CPU kernel does.
struct AdamWArgs {
  float alpha, beta, epsilon, weight_decay;
  const float* lr;       // device, one float
  const int64_t* step;   // device, one int64
  int mode;              // 0: PyTorch, 1: Hugging Face (see providers/cpu/kernels/training_optimizers.cc)
  int correct_bias;      // 0: no bias correction
};
// Every tensor of the step in one launch: `slots` is a device array of `count` TensorSlots and `starts`
// (device, count + 1) the running element offsets; a thread finds its tensor by binary search.
cudaError_t AdamW(const TensorSlot* slots, const int64_t* starts, int count, int64_t total, const AdamWArgs& args,
                  cudaStream_t stream);
// w -= *lr g, the rate read from device memory.
cudaError_t Sgd(const TensorSlot* slots, const int64_t* starts, int count, int64_t total, const float* lr,
                cudaStream_t stream);
// The sum of squares of every g (in double, fixed order: per-tensor block partials, then one block), then
// g *= min(max_norm / (sqrt(sum) + 1e-6), 1). `partials` holds `count` doubles.
// Each tensor is cut into `pieces` equal parts, one block each (ClipPieces: from the largest tensor's size, so
// the order of the sums depends on the shapes only); partials holds count * pieces doubles.
constexpr int64_t kClipPieceElements = 32768;
constexpr int kMaxClipPieces = 1024;
int ClipPieces(int64_t largest);
cudaError_t ClipGradNorm(const TensorSlot* slots, int count, int pieces, float max_norm, double* partials,
                         cudaStream_t stream);
// flag[0..n) = value.
cudaError_t SetFlags(uint8_t* flags, int64_t n, bool value, cudaStream_t stream);

}  // namespace cuda
}  // namespace ontrain
