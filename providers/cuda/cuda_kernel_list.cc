// The CUDA provider's kernel list: every (domain, op, opset range, dtypes) the CUDA provider runs, one row
// each, sorted by domain and op. Ranges and input roles follow the CPU rows of the same ops
// (providers/cpu/cpu_kernel_list.cc); dtypes are those the device code implements. A node whose op or
// dtype is not here runs on the CPU, with copies at the boundary.
#include "providers/cuda/cuda_provider.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {

namespace {
using D = DType;
const std::vector<D> kF32 = {D::kFloat32};
const std::vector<D> kF32F64 = {D::kFloat32, D::kFloat64};
const std::vector<D> kArith = {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64};
const std::vector<D> kCompared = {D::kFloat32, D::kInt64};
const std::vector<D> kCastable = {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64, D::kBool};
const std::vector<D> kAll = {D::kFloat32, D::kFloat64, D::kFloat16, D::kBFloat16, D::kInt8,   D::kInt16,  D::kInt32,
                             D::kInt64,   D::kUInt8,   D::kUInt16,  D::kUInt32,    D::kUInt64, D::kBool};
constexpr int kLatest = 21;  // as in the CPU list
const char* kOnnx = "";
const char* kMs = "com.microsoft";
const char* kOntrain = "ai.ontrain";  // the executor's fused ops (engine/kernel_fusion.h)
}  // namespace

std::vector<KernelDef> CudaKernelList() {
  return {
      // domain, op, since, until, dtypes of input 0 (unless noted), factory[, type input, input roles, rejects]
      {kOnnx, "Abs", 6, kLatest, kF32F64, kAbs},
      {kOnnx, "Add", 7, kLatest, kArith, kAdd},
      {kOnnx, "And", 7, kLatest, {D::kBool}, kAnd},
      {kOnnx, "AveragePool", 7, 18, kF32, kAveragePool, 0, {}, PoolRejects},
      {kOnnx, "AveragePoolGrad", 9, kLatest, kF32, kAveragePoolGrad, 0, ShapeOnly({1}), PoolRejects},  // ONNX Runtime's, in the ONNX domain
      {kOnnx, "BatchNormalization", 9, kLatest, kF32, kBatchNormalization},
      {kOnnx, "Cast", 6, kLatest, kCastable, kCast, 0, {}, CastRejects},
      {kOnnx, "Ceil", 6, kLatest, kF32F64, kCeil},
      {kOnnx, "Clip", 6, kLatest, kF32F64, kClip, 0, Host({1, 2})},
      {kOnnx, "Concat", 4, kLatest, kAll, kConcat},
      {kOnnx, "ConstantOfShape", 9, kLatest, {D::kInt64}, kConstantOfShape, 0, Host({0})},
      {kOnnx, "Conv", 1, kLatest, kF32, kConv, 0, {}, ConvRejects},
      {kOnnx, "ConvTranspose", 1, kLatest, kF32, kConvTranspose, 0, {}, ConvTransposeRejects},
      {kOnnx, "Cos", 7, kLatest, kF32F64, kCos},
      {kOnnx, "CumSum", 11, kLatest, kF32F64, kCumSum, 0, Host({1})},
      {kOnnx, "DepthToSpace", 1, kLatest, kAll, kDepthToSpace},
      {kOnnx, "Div", 7, kLatest, kArith, kDiv},
      {kOnnx, "Dropout", 12, kLatest, kF32, kDropout, 0, Host({1, 2})},
      {kOnnx, "Einsum", 12, kLatest, kF32F64, kEinsum, 0, {}, EinsumRejects},
      {kOnnx, "Elu", 6, kLatest, kF32F64, kElu},
      {kOnnx, "Equal", 11, kLatest, kCompared, kEqual},
      {kOnnx, "Erf", 9, kLatest, kF32F64, kErf},
      {kOnnx, "Exp", 6, kLatest, kF32F64, kExp},
      {kOnnx, "Expand", 8, kLatest, kAll, kExpand, 0, Host({1})},
      {kOnnx, "Flatten", 1, kLatest, kAll, kFlatten},
      {kOnnx, "Floor", 6, kLatest, kF32F64, kFloor},
      {kOnnx, "GRU", 7, kLatest, kF32F64, kGru, 0, Host({4}), RecurrentRejects},
      {kOnnx, "Gather", 1, kLatest, kAll, kGather},
      {kOnnx, "GatherElements", 11, kLatest, kAll, kGatherElements},
      {kOnnx, "GatherND", 11, kLatest, kAll, kGatherND},
      {kOnnx, "Gelu", 20, kLatest, kF32F64, kGelu},
      {kOnnx, "Gemm", 7, kLatest, kF32F64, kGemm},
      {kOnnx, "GlobalAveragePool", 1, kLatest, kF32, kGlobalAveragePool},
      {kOnnx, "Greater", 9, kLatest, kCompared, kGreater},
      {kOnnx, "GreaterOrEqual", 12, kLatest, kCompared, kGreaterOrEqual},
      {kOnnx, "Identity", 1, kLatest, kAll, kIdentity},
      {kOnnx, "LSTM", 7, kLatest, kF32F64, kLstm, 0, Host({4}), RecurrentRejects},
      {kOnnx, "LayerNormalization", 1, kLatest, kF32, kLayerNormalization},
      {kOnnx, "LeakyRelu", 6, kLatest, kF32F64, kLeakyRelu},
      {kOnnx, "Less", 9, kLatest, kCompared, kLess},
      {kOnnx, "LessOrEqual", 12, kLatest, kCompared, kLessOrEqual},
      {kOnnx, "Log", 6, kLatest, kF32F64, kLog},
      {kOnnx, "LogSoftmax", 1, kLatest, kF32, kLogSoftmax},
      {kOnnx, "MatMul", 1, kLatest, kF32F64, kMatMul},
      {kOnnx, "Max", 8, kLatest, kArith, kMax},
      {kOnnx, "MaxPool", 8, kLatest, kF32, kMaxPool, 0, {}, PoolRejects},
      {kOnnx, "MaxPoolGrad", 9, kLatest, kF32, kMaxPoolGrad, 0, {}, PoolRejects},  // ONNX Runtime's, in the ONNX domain
      {kOnnx, "Min", 8, kLatest, kArith, kMin},
      {kOnnx, "Mul", 7, kLatest, kArith, kMul},
      {kOnnx, "Neg", 6, kLatest, kF32F64, kNeg},
      {kOnnx, "Or", 7, kLatest, {D::kBool}, kOr},
      {kOnnx, "Pad", 11, kLatest, kAll, kPad, 0, Host({1, 2, 3})},
      {kOnnx, "Pow", 7, kLatest, kF32, kPow},
      {kOnnx, "RNN", 7, kLatest, kF32F64, kRnn, 0, Host({4}), RecurrentRejects},
      {kOnnx, "Reciprocal", 6, kLatest, kF32F64, kReciprocal},
      {kOnnx, "ReduceL1", 1, kLatest, kF32, kReduceL1, 0, Host({1})},
      {kOnnx, "ReduceL2", 1, kLatest, kF32, kReduceL2, 0, Host({1})},
      {kOnnx, "ReduceLogSumExp", 1, kLatest, kF32, kReduceLogSumExp, 0, Host({1})},
      {kOnnx, "ReduceMax", 1, kLatest, kF32, kReduceMax, 0, Host({1})},
      {kOnnx, "ReduceMean", 1, kLatest, kF32, kReduceMean, 0, Host({1})},
      {kOnnx, "ReduceMin", 1, kLatest, kF32, kReduceMin, 0, Host({1})},
      {kOnnx, "ReduceSum", 1, kLatest, kF32, kReduceSum, 0, Host({1})},
      {kOnnx, "ReduceSumSquare", 1, kLatest, kF32, kReduceSumSquare, 0, Host({1})},
      {kOnnx, "Relu", 6, kLatest, kF32F64, kRelu},
      {kOnnx, "Reshape", 5, kLatest, kAll, kReshape, 0, Host({1})},
      {kOnnx, "Resize", 10, kLatest, kF32, kResize, 0, Host({1, 2, 3})},
      {kOnnx, "Scatter", 9, 10, kF32, kScatterElements},
      {kOnnx, "ScatterElements", 11, kLatest, kF32, kScatterElements},
      {kOnnx, "ScatterND", 11, kLatest, kF32, kScatterND},
      {kOnnx, "Sigmoid", 6, kLatest, kF32F64, kSigmoid},
      {kOnnx, "Sin", 7, kLatest, kF32F64, kSin},
      {kOnnx, "Slice", 1, kLatest, kAll, kSlice, 0, Host({1, 2, 3, 4})},
      {kOnnx, "Softmax", 1, kLatest, kF32, kSoftmax},
      {kOnnx, "SoftmaxCrossEntropyLoss", 12, kLatest, kF32, kSoftmaxCrossEntropyLoss},
      {kOnnx, "Softplus", 1, kLatest, kF32F64, kSoftplus},
      {kOnnx, "SpaceToDepth", 1, kLatest, kAll, kSpaceToDepth},
      {kOnnx, "Split", 2, 17, kAll, kSplit, 0, Host({1})},
      {kOnnx, "Sqrt", 6, kLatest, kF32F64, kSqrt},
      {kOnnx, "Squeeze", 1, kLatest, kAll, kSqueeze, 0, Host({1})},
      {kOnnx, "Sub", 7, kLatest, kArith, kSub},
      {kOnnx, "Sum", 8, kLatest, kArith, kSum},
      {kOnnx, "Tanh", 6, kLatest, kF32F64, kTanh},
      {kOnnx, "Tile", 6, kLatest, kAll, kTile, 0, Host({1})},
      {kOnnx, "TopK", 1, kLatest, kF32, kTopK, 0, Host({1})},
      {kOnnx, "Transpose", 1, kLatest, kAll, kTranspose},
      {kOnnx, "Trilu", 14, kLatest, kAll, kTrilu, 0, Host({1})},
      {kOnnx, "Unsqueeze", 1, kLatest, kAll, kUnsqueeze, 0, Host({1})},
      {kOnnx, "Upsample", 9, 9, kF32, kResize, 0, Host({1})},
      {kOnnx, "Where", 9, kLatest, kAll, kWhere, 1},
      {kOnnx, "Xor", 7, kLatest, {D::kBool}, kXor},
      // com.microsoft: contrib and training ops, as ONNX Runtime's gradient builder emits them
      {kMs, "AdamWOptimizer", 1, 1, kF32, kAdamWOptimizer, 2, Host({6}) | InPlace({2, 4, 5})},  // lr, step on the device
      {kMs, "BatchNormInternal", 1, 1, kF32, kBatchNormInternal, 0, Host({5})},
      {kMs, "BatchNormalizationGrad", 1, 1, kF32, kBatchNormalizationGrad},
      {kMs, "ConcatTraining", 1, 1, kAll, kConcatTraining},
      {kMs, "ConvGrad", 1, 1, kF32, kConvGrad, 0, {}, ConvRejects},
      {kMs, "DivGrad", 1, 1, kF32, kDivGrad},
      {kMs, "DropoutGrad", 1, 1, kF32, kDropoutGrad, 0, Host({2, 3})},
      {kMs, "FastGelu", 1, 1, kF32, kMsFastGelu},
      {kMs, "FastGeluGrad", 1, 1, kF32, kFastGeluGrad},
      {kMs, "FusedConv", 1, 1, kF32, kFusedConv, 0, {}, ConvRejects},
      {kMs, "FusedGemm", 1, 1, kF32F64, kFusedGemm},
      {kMs, "FusedMatMul", 1, 1, kF32F64, kFusedMatMul},
      {kMs, "GatherGrad", 1, 1, kF32, kGatherGrad, 2, Host({0})},
      {kMs, "GatherElementsGrad", 1, 1, kF32, kGatherElementsGrad, 0, Host({1})},
      {kMs, "GRUGrad", 1, 1, kF32F64, kGruGrad, 0, Host({4}), RecurrentRejects},
      {kMs, "GRUTraining", 1, 1, kF32F64, kGruTraining, 0, Host({4}), RecurrentRejects},
      {kMs, "GatherNDGrad", 1, 1, kF32, kGatherNDGrad, 2, Host({0})},
      {kMs, "Gelu", 1, 1, kF32, kMsGelu},
      {kMs, "GeluGrad", 1, 1, kF32, kGeluGrad},
      {kMs, "InPlaceAccumulatorV2", 1, 1, kF32, kInPlaceAccumulatorV2, 0, InPlace({0}) | Host({2})},
      {kMs, "InplaceClipGradNorm", 1, 1, kF32, kInplaceClipGradNorm, 0, InPlace({0})},
      {kMs, "LSTMGrad", 1, 1, kF32F64, kLstmGrad, 0, Host({3}), RecurrentRejects},
      {kMs, "LSTMTraining", 1, 1, kF32F64, kLstmTraining, 0, Host({4}), RecurrentRejects},
      {kMs, "LayerNormalization", 1, 1, kF32, kLayerNormalization},
      {kMs, "LayerNormalizationGrad", 1, 1, kF32, kLayerNormalizationGrad},
      {kMs, "LeakyReluGrad", 1, 1, kF32, kLeakyReluGrad},
      {kMs, "LogSoftmaxGrad", 1, 1, kF32, kLogSoftmaxGrad},
      {kMs, "LogSoftmaxGrad_13", 1, 1, kF32, kLogSoftmaxGrad13},
      {kMs, "RNNGrad", 1, 1, kF32F64, kRnnGrad, 0, Host({4}), RecurrentRejects},
      {kMs, "ReduceSumTraining", 1, 1, kF32, kReduceSumTraining, 0, Host({1})},
      {kMs, "ReluGrad", 1, 1, kF32, kReluGrad},
      {kMs, "ResizeGrad", 1, 1, kF32, kResizeGrad, 0, Host({2, 3})},
      {kMs, "SGDOptimizerV2", 1, 1, kF32, kSGDOptimizerV2, 1, Host({3}) | InPlace({1})},  // lr on the device
      {kMs, "Scale", 1, 1, kF32, kScale, 0, Host({1})},
      {kMs, "SigmoidGrad", 1, 1, kF32, kSigmoidGrad},
      {kMs, "SliceGrad", 1, 1, kAll, kSliceGrad, 0, Host({1, 2, 3, 4, 5})},
      {kMs, "SoftmaxCrossEntropyLossGrad", 1, 1, kF32, kSoftmaxCrossEntropyLossGrad},
      {kMs, "SoftmaxCrossEntropyLossInternal", 1, 1, kF32, kSoftmaxCrossEntropyLossInternal, 0, Host({3})},
      {kMs, "SoftmaxCrossEntropyLossInternalGrad", 1, 1, kF32, kSoftmaxCrossEntropyLossInternalGrad, 0, Host({4})},
      {kMs, "SoftmaxGrad", 1, 1, kF32, kSoftmaxGrad},
      {kMs, "SoftmaxGrad_13", 1, 1, kF32, kSoftmaxGrad13},
      {kMs, "SplitTraining", 1, 1, kAll, kSplitTraining, 0, Host({1})},
      {kMs, "TanhGrad", 1, 1, kF32, kTanhGrad},
      // ai.ontrain: fused ops the executor substitutes where this provider has them
      {kOntrain, "ClipGrad", 1, 1, kF32, kClipGrad, 0, Host({2, 3, 4})},
      {kOntrain, "MatMulBias", 1, 1, kF32, kMatMulBias},
      {kOntrain, "MaxPoolReluGrad", 1, 1, kF32, kMaxPoolReluGrad, 0, {}, MaxPoolReluGradRejects},
  };
}

}  // namespace cuda
}  // namespace ontrain
