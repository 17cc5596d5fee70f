// The gradient rule table (one row per differentiable forward op: its builder and the inputs that never
// get gradients), GradContext, and the helpers the builder files share. The builders themselves are in
// grad_math.cc, grad_nn.cc and grad_tensor.cc.
#include "graph/gradient_builders.h"

#include <algorithm>

#include "graph/builder.h"
#include "graph/gradient_helpers.h"

namespace ontrain {
namespace grad {

std::vector<onnx::AttributeProto> CopyAttrs(const Node& n, const std::vector<std::string>& skip) {
  std::vector<onnx::AttributeProto> out;
  for (const auto& kv : n.attributes) {
    if (std::find(skip.begin(), skip.end(), kv.first) == skip.end()) out.push_back(kv.second);
  }
  return out;
}

bool SameShape(const ValueInfo* a, const ValueInfo* b) {
  if (!a || !b || !a->has_shape || !b->has_shape || a->dims.size() != b->dims.size()) return false;
  for (size_t i = 0; i < a->dims.size(); ++i) {
    const Dim &x = a->dims[i], &y = b->dims[i];
    if (x.known() && y.known() && x.value == y.value) continue;
    if (!x.known() && !y.known() && !x.param.empty() && x.param == y.param) continue;
    return false;
  }
  return true;
}

bool Static(const ValueInfo* v) {
  if (!v || !v->has_shape) return false;
  for (const Dim& d : v->dims) if (!d.known()) return false;
  return true;
}

std::vector<int64_t> DimsOf(const ValueInfo* v) {
  std::vector<int64_t> d;
  for (const Dim& x : v->dims) d.push_back(x.value);
  return d;
}

// Where(cond, a, b) with a = dY where cond holds, else b = dY.
std::string Masked(GradContext& c, const std::string& cond, const std::string& a, const std::string& b) {
  return c.Emit("Where", {cond, a, b}, {c.Tmp("where")});
}
std::string Zero(GradContext& c, const std::string& like) { return c.ConstFloat("zero", 0.0f, like); }

}  // namespace grad

namespace {
using namespace grad;  // NOLINT: the builders of the rule table

struct Row {
  const char* domain;
  const char* op;
  GradientRule rule;
};

const std::vector<Row>& Rules() {
  static const auto* rules = new std::vector<Row>{
      {"", "Abs", {AbsGrad, {}}},
      {"", "Acos", {TrigGrad, {}}},
      {"", "Acosh", {TrigGrad, {}}},
      {"", "Add", {AddGrad, {}}},
      {"", "Asin", {TrigGrad, {}}},
      {"", "Asinh", {TrigGrad, {}}},
      {"", "Atan", {TrigGrad, {}}},
      {"", "Atanh", {TrigGrad, {}}},
      {"", "AveragePool", {PoolGrad, {}}},
      {"", "Cast", {CastGrad, {}}},
      {"", "CastLike", {CastLikeGrad, {1}}},
      {"", "Ceil", {ZeroGrad, {}}},
      {"", "Celu", {CeluGrad, {}}},
      {"", "Clip", {ClipGrad, {1, 2}}},
      {"", "Concat", {ConcatGrad, {}}},
      {"", "Conv", {ConvGrad, {}}},
      {"", "ConvTranspose", {ConvTransposeGrad, {}}},
      {"", "Cos", {CosGrad, {}}},
      {"", "Cosh", {TrigGrad, {}}},
      {"", "CumSum", {CumSumGrad, {1}}},
      {"", "DepthToSpace", {BlockShuffleGrad, {}}},
      {"", "Div", {DivGrad, {}}},
      {"", "Dropout", {DropoutGrad, {1, 2}}},
      {"", "Einsum", {EinsumGrad, {}}},
      {"", "Elu", {EluGrad, {}}},
      {"", "Erf", {ErfGrad, {}}},
      {"", "Exp", {ExpGrad, {}}},
      {"", "Expand", {ExpandGrad, {1}}},
      {"", "Flatten", {ReshapeLikeGrad, {}}},
      {"", "Floor", {ZeroGrad, {}}},
      {"", "Gather", {GatherGrad, {1}}},
      {"", "GatherElements", {GatherElementsGrad, {1}}},
      {"", "GatherND", {GatherNDGrad, {1}}},
      {"", "Gelu", {GeluGrad, {}}},
      {"", "Gemm", {GemmGrad, {}}},
      {"", "GlobalAveragePool", {GlobalAveragePoolGrad, {}}},
      {"", "GlobalMaxPool", {GlobalMaxPoolGrad, {}}},
      {"", "HardSigmoid", {HardSigmoidGrad, {}}},
      {"", "HardSwish", {HardSwishGrad, {}}},
      {"", "Hardmax", {ZeroGrad, {}}},
      {"", "Identity", {IdentityGrad, {}}},
      {"", "LayerNormalization", {LayerNormGrad, {}}},
      {"", "LeakyRelu", {MsUnaryGrad<kLeakyReluGrad, true>, {}}},
      {"", "Log", {LogGrad, {}}},
      {"", "LogSoftmax", {SoftmaxGrad, {}}},
      {"", "MatMul", {MatMulGrad, {}}},
      {"", "Max", {MaxMinGrad, {}}},
      {"", "MaxPool", {PoolGrad, {}}},
      {"", "Mean", {MeanGrad, {}}},
      {"", "Min", {MaxMinGrad, {}}},
      {"", "Mod", {ModGrad, {}}},
      {"", "Mul", {MulGrad, {}}},
      {"", "Neg", {NegGrad, {}}},
      {"", "NegativeLogLikelihoodLoss", {NllLossGrad, {1, 2}}},
      {"", "PRelu", {PReluGrad, {}}},
      {"", "Pad", {PadGrad, {1, 2, 3}}},
      {"", "Pow", {PowGrad, {1}}},
      {"", "RNN", {RnnGrad, {4}}},
      {"", "Reciprocal", {ReciprocalGrad, {}}},
      {"", "ReduceL1", {ReduceOtherGrad, {1}}},
      {"", "ReduceL2", {ReduceOtherGrad, {1}}},
      {"", "ReduceLogSum", {ReduceOtherGrad, {1}}},
      {"", "ReduceLogSumExp", {ReduceOtherGrad, {1}}},
      {"", "ReduceMax", {ReduceOtherGrad, {1}}},
      {"", "ReduceMean", {ReduceGrad, {1}}},
      {"", "ReduceMin", {ReduceOtherGrad, {1}}},
      {"", "ReduceProd", {ReduceProdGrad, {1}}},
      {"", "ReduceSum", {ReduceGrad, {1}}},
      {"", "ReduceSumSquare", {ReduceOtherGrad, {1}}},
      {"", "Relu", {MsUnaryGrad<kReluGrad, false>, {}}},
      {"", "Reshape", {ReshapeLikeGrad, {1}}},
      {"", "Resize", {ResizeGrad, {1, 2, 3}}},
      {"", "Round", {ZeroGrad, {}}},
      {"", "ScatterElements", {ScatterGrad, {1}}},
      {"", "ScatterND", {ScatterGrad, {1}}},
      {"", "Selu", {SeluGrad, {}}},
      {"", "Sigmoid", {MsUnaryGrad<kSigmoidGrad, true>, {}}},
      {"", "Sign", {ZeroGrad, {}}},
      {"", "Sin", {SinGrad, {}}},
      {"", "Sinh", {TrigGrad, {}}},
      {"", "Slice", {SliceGrad, {1, 2, 3, 4}}},
      {"", "Softmax", {SoftmaxGrad, {}}},
      {"", "SoftmaxCrossEntropyLoss", {SceLossGrad, {1, 2}}},
      {"", "Softplus", {SoftplusGrad, {}}},
      {"", "Softsign", {SoftsignGrad, {}}},
      {"", "SpaceToDepth", {BlockShuffleGrad, {}}},
      {"", "Split", {SplitGrad, {1}}},
      {"", "Sqrt", {SqrtGrad, {}}},
      {"", "Squeeze", {ReshapeLikeGrad, {1}}},
      {"", "Sub", {SubGrad, {}}},
      {"", "Sum", {SumGrad, {}}},
      {"", "Tan", {TrigGrad, {}}},
      {"", "Tanh", {MsUnaryGrad<kTanhGrad, true>, {}}},
      {"", "ThresholdedRelu", {ThresholdedReluGrad, {}}},
      {"", "Tile", {TileGrad, {1, 2}}},
      {"", "TopK", {TopKGrad, {1}}},
      {"", "Transpose", {TransposeGrad, {}}},
      {"", "Trilu", {TriluGrad, {1}}},
      {"", "Unsqueeze", {ReshapeLikeGrad, {1}}},
      {"", "Where", {WhereGrad, {0}}},
      {kMs, "BatchNormInternal", {BatchNormGrad, {3, 4, 5}}},
      {kMs, "ConcatTraining", {ConcatTrainingGrad, {}}},
      {kMs, "FastGelu", {FastGeluGrad, {}}},
      {kMs, "FusedMatMul", {FusedMatMulGrad, {}}},
      {kMs, "GRUTraining", {GruGrad, {4}}},
      {kMs, "Gelu", {GeluGrad, {}}},
      {kMs, "LSTMTraining", {LstmGrad, {4}}},
      {kMs, "LayerNormalization", {LayerNormGrad, {}}},
  };
  return *rules;
}

}  // namespace

const GradientRule* FindGradientRule(const std::string& domain, const std::string& op) {
  for (const Row& r : Rules()) if (r.domain == domain && r.op == op) return &r.rule;
  return nullptr;
}

std::vector<std::string> GradientRuleNames() {
  std::vector<std::string> names;
  for (const Row& r : Rules()) names.push_back(std::string(r.domain).empty() ? r.op : std::string(r.domain) + "::" + r.op);
  return names;
}

// ---- GradContext ----

std::string GradContext::Tmp(const std::string& hint) {
  return node_.name + "_Grad/" + hint + "_" + std::to_string(counter_++);
}

std::string GradContext::Emit(const std::string& op, const std::vector<std::string>& inputs,
                              const std::vector<std::string>& outputs, const std::vector<onnx::AttributeProto>& attrs,
                              const std::string& domain) {
  std::string name = node_.name + "_Grad/" + op + "_" + std::to_string(counter_++);
  graph_->nodes.push_back(MakeNode(op, inputs, outputs, attrs, name, domain));
  return outputs.empty() ? "" : outputs[0];
}

std::string GradContext::Const(const std::string& hint, const Tensor& value) {
  std::string name = Tmp(hint);
  graph_->AddInitializer(name, value);
  return name;
}

std::string GradContext::ConstInts(const std::string& hint, const std::vector<int64_t>& v) {
  return Const(hint, Tensor::FromVector<int64_t>(v, {static_cast<int64_t>(v.size())}));
}

std::string GradContext::ConstFloat(const std::string& hint, float v, const std::string& like) {
  const ValueInfo* t = Type(like.empty() ? in(0) : like);
  return Const(hint, FloatConstant(t ? t->dtype : DType::kFloat32, v, {}));
}

const ValueInfo* GradContext::Type(const std::string& name) const {
  auto it = types_->find(name);
  return it == types_->end() ? nullptr : &it->second;
}

void GradContext::DeclareType(const std::string& name, const ValueInfo& like) {
  ValueInfo v = like;
  v.name = name;
  graph_->value_infos.push_back(v);
}

Status GradContext::ReduceTo(int i, const std::string& v, const std::string& full) {
  const ValueInfo* in_t = Type(in(i));
  const ValueInfo* full_t = full.empty() ? nullptr : Type(full);
  // 1. Same shape: nothing was broadcast.
  if (full_t && SameShape(in_t, full_t)) {
    Emit("Identity", {v}, {dx[i]});
    return Status::OK();
  }
  // 2. Static shapes: reduce over the known broadcast axes, then reshape to the input's shape.
  if (Static(in_t) && Static(full_t)) {
    std::vector<int64_t> a = DimsOf(in_t), f = DimsOf(full_t), axes;
    size_t off = f.size() - a.size();
    for (size_t d = 0; d < f.size(); ++d) {
      if (d < off || a[d - off] != f[d]) axes.push_back(static_cast<int64_t>(d));
    }
    std::string r = Emit("ReduceSum", {v, ConstInts("axes", axes)}, {Tmp("reduced")}, {AttrInt("keepdims", 1)});
    Emit("Reshape", {r, ConstInts("shape", a)}, {dx[i]});
    return Status::OK();
  }
  // 3. Shapes known only at run time: BroadcastGradientArgs finds the axes.
  std::string sa = Emit("Shape", {in(i)}, {Tmp("shape_in")});
  std::string sf = Emit("Shape", {v}, {Tmp("shape_full")});
  std::string axes = Emit("BroadcastGradientArgs", {sa, sf}, {Tmp("axes"), ""}, {}, kMs);
  std::string r = Emit("ReduceSum", {v, axes}, {Tmp("reduced")},
                       {AttrInt("keepdims", 1), AttrInt("noop_with_empty_axes", 1)});
  Emit("Reshape", {r, sa}, {dx[i]});
  return Status::OK();
}

}  // namespace ontrain
