// Helpers shared by the gradient builder files (grad_math.cc, grad_nn.cc, grad_tensor.cc) and the list
// of builders the rule table (gradient_builders.cc) refers to. Internal to //graph:autodiff.
#pragma once

#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/gradient_builders.h"

namespace ontrain {
namespace grad {

constexpr const char* kMs = "com.microsoft";

// Attributes of the forward node, copied to its gradient node (except `skip`).
std::vector<onnx::AttributeProto> CopyAttrs(const Node& n, const std::vector<std::string>& skip = {});
// Same rank and the same dims (equal values or the same symbol).
bool SameShape(const ValueInfo* a, const ValueInfo* b);
// Every dim known.
bool Static(const ValueInfo* v);
std::vector<int64_t> DimsOf(const ValueInfo* v);
// Where(cond, a, b) as a new value.
std::string Masked(GradContext& c, const std::string& cond, const std::string& a, const std::string& b);
// A zero scalar of `like`'s element type.
std::string Zero(GradContext& c, const std::string& like);

Status AbsGrad(GradContext& c);
Status AddGrad(GradContext& c);
Status BatchNormGrad(GradContext& c);
Status CastGrad(GradContext& c);
Status CeluGrad(GradContext& c);
Status ClipGrad(GradContext& c);
Status ConcatGrad(GradContext& c);
Status ConcatTrainingGrad(GradContext& c);
Status ConvGrad(GradContext& c);
Status ConvTransposeGrad(GradContext& c);
Status CosGrad(GradContext& c);
Status CumSumGrad(GradContext& c);
Status BlockShuffleGrad(GradContext& c);
Status DivGrad(GradContext& c);
Status DropoutGrad(GradContext& c);
Status EluGrad(GradContext& c);
Status ErfGrad(GradContext& c);
Status ExpGrad(GradContext& c);
Status ExpandGrad(GradContext& c);
Status FastGeluGrad(GradContext& c);
Status GatherElementsGrad(GradContext& c);
Status GatherGrad(GradContext& c);
Status GeluGrad(GradContext& c);
Status GemmGrad(GradContext& c);
Status GlobalAveragePoolGrad(GradContext& c);
Status GlobalMaxPoolGrad(GradContext& c);
Status HardSwishGrad(GradContext& c);
Status HardSigmoidGrad(GradContext& c);
Status IdentityGrad(GradContext& c);
Status LayerNormGrad(GradContext& c);
Status LogGrad(GradContext& c);
Status MatMulGrad(GradContext& c);
Status FusedMatMulGrad(GradContext& c);
Status MaxMinGrad(GradContext& c);
Status MeanGrad(GradContext& c);
Status MulGrad(GradContext& c);
Status ModGrad(GradContext& c);
Status NegGrad(GradContext& c);
Status NllLossGrad(GradContext& c);
Status PadGrad(GradContext& c);
Status PoolGrad(GradContext& c);
Status PReluGrad(GradContext& c);
Status PowGrad(GradContext& c);
Status ReciprocalGrad(GradContext& c);
Status ReduceGrad(GradContext& c);
Status ReduceOtherGrad(GradContext& c);
Status ReduceProdGrad(GradContext& c);
Status ReshapeLikeGrad(GradContext& c);
Status SceLossGrad(GradContext& c);
Status SeluGrad(GradContext& c);
Status SinGrad(GradContext& c);
Status SliceGrad(GradContext& c);
Status SoftmaxGrad(GradContext& c);
Status SoftplusGrad(GradContext& c);
Status SoftsignGrad(GradContext& c);
Status SplitGrad(GradContext& c);
Status SqrtGrad(GradContext& c);
Status SubGrad(GradContext& c);
Status SumGrad(GradContext& c);
Status ThresholdedReluGrad(GradContext& c);
Status TileGrad(GradContext& c);
Status TransposeGrad(GradContext& c);
Status TriluGrad(GradContext& c);
Status LstmGrad(GradContext& c);
Status GruGrad(GradContext& c);
Status RnnGrad(GradContext& c);
Status EinsumGrad(GradContext& c);
Status TrigGrad(GradContext& c);
Status CastLikeGrad(GradContext& c);
Status ResizeGrad(GradContext& c);
Status GatherNDGrad(GradContext& c);
Status ScatterGrad(GradContext& c);
Status TopKGrad(GradContext& c);
Status WhereGrad(GradContext& c);
Status ZeroGrad(GradContext& c);
template <const char* kOp, bool kUsesOutput>
Status MsUnaryGrad(GradContext& c) {
  if (c.wants(0)) c.Emit(kOp, {c.dy[0], kUsesOutput ? c.out(0) : c.in(0)}, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
extern const char kReluGrad[];
extern const char kSigmoidGrad[];
extern const char kTanhGrad[];
extern const char kFastGeluGrad[];
extern const char kLeakyReluGrad[];

}  // namespace grad
}  // namespace ontrain
