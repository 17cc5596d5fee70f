// The CPU provider's kernel list: every (domain, op, opset range, dtypes) the CPU provider runs, one row
// each, sorted by domain and op. KernelRegistry::Create rejects overlapping rows at start-up.
//
// Opset ranges: `since` is the first version whose semantics the kernel implements (older versions with
// different inputs are left out); `until` is the newest version checked against the ONNX changelog.
#include "providers/cpu/cpu_provider.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {

namespace {
using D = DType;
const std::vector<D> kFloat = {D::kFloat32, D::kFloat64, D::kFloat16, D::kBFloat16};
const std::vector<D> kFloat32 = {D::kFloat32};
const std::vector<D> kConvTypes = {D::kFloat32, D::kFloat64};
const std::vector<D> kSigned = {D::kFloat32, D::kFloat64, D::kFloat16, D::kBFloat16,
                                D::kInt8,    D::kInt16,   D::kInt32,   D::kInt64};
const std::vector<D> kNumeric = {D::kFloat32, D::kFloat64, D::kFloat16, D::kBFloat16, D::kInt8,   D::kInt16,
                                 D::kInt32,   D::kInt64,   D::kUInt8,   D::kUInt16,    D::kUInt32, D::kUInt64};
const std::vector<D> kAll = {D::kFloat32, D::kFloat64, D::kFloat16, D::kBFloat16, D::kInt8,   D::kInt16,  D::kInt32,
                             D::kInt64,   D::kUInt8,   D::kUInt16,  D::kUInt32,    D::kUInt64, D::kBool};
const std::vector<D> kGemmTypes = {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64, D::kUInt32, D::kUInt64};
const std::vector<D> kIndex = {D::kInt32, D::kInt64};
const std::vector<D> kBool = {D::kBool};
constexpr int kLatest = 21;  // newest ai.onnx version whose changelog was checked for these ops
const char* kOnnx = "";
const char* kMs = "com.microsoft";
const char* kPreview = "ai.onnx.preview.training";
}  // namespace

std::vector<KernelDef> CpuKernelList() {
  using namespace cpu;  // NOLINT: the factories
  return {
      // domain, op, since, until, dtypes of input 0 (unless noted), factory
      {kOnnx, "Abs", 6, kLatest, kNumeric, kAbs},
      {kOnnx, "Acos", 7, kLatest, kFloat, kAcos},
      {kOnnx, "Acosh", 9, kLatest, kFloat, kAcosh},
      {kOnnx, "Add", 1, kLatest, kNumeric, kAdd},
      {kOnnx, "And", 1, kLatest, kBool, kAnd},
      {kOnnx, "ArgMax", 1, kLatest, kNumeric, kArgMax},
      {kOnnx, "ArgMin", 1, kLatest, kNumeric, kArgMin},
      {kOnnx, "Asin", 7, kLatest, kFloat, kAsin},
      {kOnnx, "Asinh", 9, kLatest, kFloat, kAsinh},
      {kOnnx, "Atan", 7, kLatest, kFloat, kAtan},
      {kOnnx, "Atanh", 9, kLatest, kFloat, kAtanh},
      {kOnnx, "AveragePool", 1, 18, kFloat, kAveragePool},
      {kOnnx, "AveragePoolGrad", 9, kLatest, kFloat, kAveragePoolGrad},  // ONNX Runtime's, in the ONNX domain
      {kOnnx, "BatchNormalization", 1, kLatest, kFloat, kBatchNormalization},
      {kOnnx, "Cast", 1, kLatest, kAll, kCast},
      {kOnnx, "CastLike", 15, kLatest, kAll, kCastLike},
      {kOnnx, "Ceil", 1, kLatest, kFloat, kCeil},
      {kOnnx, "Celu", 12, kLatest, kFloat, kCelu},
      {kOnnx, "Clip", 1, kLatest, kNumeric, kClip},
      {kOnnx, "Concat", 1, kLatest, kAll, kConcat},
      {kOnnx, "Constant", 1, kLatest, {}, kConstant, -1},
      {kOnnx, "ConstantOfShape", 9, kLatest, kIndex, kConstantOfShape},
      {kOnnx, "Conv", 1, kLatest, kConvTypes, kConv},
      {kOnnx, "ConvTranspose", 1, kLatest, kConvTypes, kConvTranspose},
      {kOnnx, "Cos", 7, kLatest, kFloat, kCos},
      {kOnnx, "Cosh", 9, kLatest, kFloat, kCosh},
      {kOnnx, "CumSum", 11, kLatest, kNumeric, kCumSum},
      {kOnnx, "Div", 1, kLatest, kNumeric, kDiv},
      {kOnnx, "Dropout", 1, kLatest, kFloat, kDropout},
      {kOnnx, "Elu", 1, kLatest, kFloat, kElu},
      {kOnnx, "Equal", 1, kLatest, kAll, kEqual},
      {kOnnx, "Erf", 9, kLatest, kFloat, kErf},
      {kOnnx, "Exp", 1, kLatest, kFloat, kExp},
      {kOnnx, "Expand", 8, kLatest, kAll, kExpand},
      {kOnnx, "EyeLike", 9, kLatest, kAll, kEyeLike},
      {kOnnx, "Flatten", 1, kLatest, kAll, kFlatten},
      {kOnnx, "Floor", 1, kLatest, kFloat, kFloor},
      {kOnnx, "Gather", 1, kLatest, kAll, kGather},
      {kOnnx, "GatherElements", 11, kLatest, kAll, kGatherElements},
      {kOnnx, "Gelu", 20, kLatest, kFloat, kGelu},
      {kOnnx, "Gemm", 1, kLatest, kGemmTypes, kGemm},
      {kOnnx, "GlobalAveragePool", 1, kLatest, kFloat, kGlobalAveragePool},
      {kOnnx, "GlobalMaxPool", 1, kLatest, kFloat, kGlobalMaxPool},
      {kOnnx, "Greater", 1, kLatest, kNumeric, kGreater},
      {kOnnx, "GreaterOrEqual", 12, kLatest, kNumeric, kGreaterOrEqual},
      {kOnnx, "HardSigmoid", 1, kLatest, kFloat, kHardSigmoid},
      {kOnnx, "HardSwish", 14, kLatest, kFloat, kHardSwish},
      {kOnnx, "Hardmax", 1, kLatest, kFloat, kHardmax},
      {kOnnx, "Identity", 1, kLatest, kAll, kIdentity},
      {kOnnx, "InstanceNormalization", 1, kLatest, kFloat, kInstanceNormalization},
      {kOnnx, "IsInf", 10, kLatest, kFloat, kIsInf},
      {kOnnx, "IsNaN", 9, kLatest, kFloat, kIsNaN},
      {kOnnx, "LayerNormalization", 1, kLatest, kFloat, kLayerNormalization},
      {kOnnx, "LeakyRelu", 1, kLatest, kFloat, kLeakyRelu},
      {kOnnx, "Less", 1, kLatest, kNumeric, kLess},
      {kOnnx, "LessOrEqual", 12, kLatest, kNumeric, kLessOrEqual},
      {kOnnx, "Log", 1, kLatest, kFloat, kLog},
      {kOnnx, "LogSoftmax", 1, kLatest, kFloat, kLogSoftmax},
      {kOnnx, "MatMul", 1, kLatest, kGemmTypes, kMatMul},
      {kOnnx, "Max", 1, kLatest, kNumeric, kMax},
      {kOnnx, "MaxPool", 1, kLatest, kNumeric, kMaxPool},
      {kOnnx, "MaxPoolGrad", 9, kLatest, kFloat, kMaxPoolGrad},  // ONNX Runtime's, in the ONNX domain
      {kOnnx, "Mean", 1, kLatest, kFloat, kMean},
      {kOnnx, "Min", 1, kLatest, kNumeric, kMin},
      {kOnnx, "Mod", 10, kLatest, kNumeric, kMod},
      {kOnnx, "Mul", 1, kLatest, kNumeric, kMul},
      {kOnnx, "Neg", 1, kLatest, kSigned, kNeg},
      {kOnnx, "NegativeLogLikelihoodLoss", 12, kLatest, kFloat, kNegativeLogLikelihoodLoss},
      {kOnnx, "Not", 1, kLatest, kBool, kNot},
      {kOnnx, "OneHot", 9, kLatest, kNumeric, kOneHot},
      {kOnnx, "Or", 1, kLatest, kBool, kOr},
      {kOnnx, "PRelu", 1, kLatest, kNumeric, kPRelu},
      {kOnnx, "Pad", 1, 17, kAll, kPad},
      {kOnnx, "Pow", 1, kLatest, kNumeric, kPow},
      {kOnnx, "Range", 11, kLatest, kNumeric, kRange},
      {kOnnx, "Reciprocal", 1, kLatest, kFloat, kReciprocal},
      {kOnnx, "ReduceL1", 1, kLatest, kNumeric, kReduceL1},
      {kOnnx, "ReduceL2", 1, kLatest, kNumeric, kReduceL2},
      {kOnnx, "ReduceLogSum", 1, kLatest, kNumeric, kReduceLogSum},
      {kOnnx, "ReduceLogSumExp", 1, kLatest, kNumeric, kReduceLogSumExp},
      {kOnnx, "ReduceMax", 1, kLatest, kNumeric, kReduceMax},
      {kOnnx, "ReduceMean", 1, kLatest, kNumeric, kReduceMean},
      {kOnnx, "ReduceMin", 1, kLatest, kNumeric, kReduceMin},
      {kOnnx, "ReduceProd", 1, kLatest, kNumeric, kReduceProd},
      {kOnnx, "ReduceSum", 1, kLatest, kNumeric, kReduceSum},
      {kOnnx, "ReduceSumSquare", 1, kLatest, kNumeric, kReduceSumSquare},
      {kOnnx, "Relu", 1, kLatest, kSigned, kRelu},
      {kOnnx, "Reshape", 1, kLatest, kAll, kReshape},
      {kOnnx, "Round", 11, kLatest, kFloat, kRound},
      {kOnnx, "Selu", 1, kLatest, kFloat, kSelu},
      {kOnnx, "Shape", 1, kLatest, kAll, kShape},
      {kOnnx, "Sigmoid", 1, kLatest, kFloat, kSigmoid},
      {kOnnx, "Sign", 9, kLatest, kNumeric, kSign},
      {kOnnx, "Sin", 7, kLatest, kFloat, kSin},
      {kOnnx, "Sinh", 9, kLatest, kFloat, kSinh},
      {kOnnx, "Size", 1, kLatest, kAll, kSize},
      {kOnnx, "Slice", 1, kLatest, kAll, kSlice},
      {kOnnx, "Softmax", 1, kLatest, kFloat, kSoftmax},
      {kOnnx, "SoftmaxCrossEntropyLoss", 12, kLatest, kFloat, kSoftmaxCrossEntropyLoss},
      {kOnnx, "Softplus", 1, kLatest, kFloat, kSoftplus},
      {kOnnx, "Softsign", 1, kLatest, kFloat, kSoftsign},
      {kOnnx, "Split", 1, 17, kAll, kSplit},
      {kOnnx, "Sqrt", 1, kLatest, kFloat, kSqrt},
      {kOnnx, "Squeeze", 1, kLatest, kAll, kSqueeze},
      {kOnnx, "Sub", 1, kLatest, kNumeric, kSub},
      {kOnnx, "Sum", 1, kLatest, kNumeric, kSum},
      {kOnnx, "Tan", 7, kLatest, kFloat, kTan},
      {kOnnx, "Tanh", 1, kLatest, kFloat, kTanh},
      {kOnnx, "ThresholdedRelu", 10, kLatest, kFloat, kThresholdedRelu},
      {kOnnx, "Tile", 1, kLatest, kAll, kTile},
      {kOnnx, "Transpose", 1, kLatest, kAll, kTranspose},
      {kOnnx, "Trilu", 14, kLatest, kAll, kTrilu},
      {kOnnx, "Unsqueeze", 1, kLatest, kAll, kUnsqueeze},
      {kOnnx, "Where", 9, kLatest, kAll, kWhere, 1},
      {kOnnx, "Xor", 1, kLatest, kBool, kXor},
      // ai.onnx.preview.training
      {kPreview, "Adagrad", 1, 1, kFloat32, kAdagrad},
      {kPreview, "Adam", 1, 1, kFloat32, kAdam},
      {kPreview, "Momentum", 1, 1, kFloat32, kMomentum},
      // com.microsoft: contrib and training ops, as ONNX Runtime's gradient builder emits them
      {kMs, "BatchNormInternal", 1, 1, kFloat, kBatchNormInternal},
      {kMs, "BatchNormalizationGrad", 1, 1, kFloat, kBatchNormalizationGrad},
      {kMs, "BroadcastGradientArgs", 1, 1, kIndex, kBroadcastGradientArgs},
      {kMs, "ConcatTraining", 1, 1, kAll, kConcatTraining},
      {kMs, "ConvGrad", 1, 1, kConvTypes, kConvGrad},
      {kMs, "DivGrad", 1, 1, kFloat, kDivGrad},
      {kMs, "DropoutGrad", 1, 1, kFloat, kDropoutGrad},
      {kMs, "FastGelu", 1, 1, kFloat, kMsFastGelu},
      {kMs, "FastGeluGrad", 1, 1, kFloat, kFastGeluGrad},
      {kMs, "FusedMatMul", 1, 1, kConvTypes, kFusedMatMul},
      {kMs, "GatherElementsGrad", 1, 1, kFloat, kGatherElementsGrad},
      {kMs, "GatherGrad", 1, 1, kFloat, kGatherGrad, 2},
      {kMs, "Gelu", 1, 1, kFloat, kMsGelu},
      {kMs, "GeluGrad", 1, 1, kFloat, kGeluGrad},
      {kMs, "InPlaceAccumulatorV2", 1, 1, kFloat, kInPlaceAccumulatorV2},
      {kMs, "LayerNormalization", 1, 1, kFloat, kLayerNormalization},
      {kMs, "LayerNormalizationGrad", 1, 1, kFloat, kLayerNormalizationGrad},
      {kMs, "LeakyReluGrad", 1, 1, kFloat, kLeakyReluGrad},
      {kMs, "LogSoftmaxGrad", 1, 1, kFloat, kLogSoftmaxGrad},
      {kMs, "LogSoftmaxGrad_13", 1, 1, kFloat, kLogSoftmaxGrad13},
      {kMs, "ReduceSumTraining", 1, 1, kNumeric, kReduceSumTraining},
      {kMs, "ReluGrad", 1, 1, kFloat, kReluGrad},
      {kMs, "Scale", 1, 1, kFloat, kScale},
      {kMs, "SigmoidGrad", 1, 1, kFloat, kSigmoidGrad},
      {kMs, "SliceGrad", 1, 1, kAll, kSliceGrad},
      {kMs, "SoftmaxCrossEntropyLossGrad", 1, 1, kFloat, kSoftmaxCrossEntropyLossGrad},
      {kMs, "SoftmaxCrossEntropyLossInternal", 1, 1, kFloat, kSoftmaxCrossEntropyLossInternal},
      {kMs, "SoftmaxCrossEntropyLossInternalGrad", 1, 1, kFloat, kSoftmaxCrossEntropyLossInternalGrad},
      {kMs, "SoftmaxGrad", 1, 1, kFloat, kSoftmaxGrad},
      {kMs, "SoftmaxGrad_13", 1, 1, kFloat, kSoftmaxGrad13},
      {kMs, "SplitTraining", 1, 1, kAll, kSplitTraining},
      {kMs, "TanhGrad", 1, 1, kFloat, kTanhGrad},
  };
}

}  // namespace ontrain
