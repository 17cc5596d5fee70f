// Gradient builders, one per forward op, emitting the nodes ONNX Runtime's gradient builder emits
// (dY = gradient of the node's output 0, dX_i = gradient of input i).
#include "graph/gradient_builders.h"

#include <algorithm>
#include <cmath>

#include "graph/builder.h"

namespace ontrain {

namespace {
constexpr const char* kMs = "com.microsoft";

// Attributes of the forward node, copied to its gradient node.
std::vector<onnx::AttributeProto> CopyAttrs(const Node& n, const std::vector<std::string>& skip = {}) {
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

// ---- elementwise ----
Status IdentityGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Identity", {c.dy[0]}, {c.dx[0]});
  return Status::OK();
}
Status AddGrad(GradContext& c) {
  for (int i = 0; i < 2; ++i) if (c.wants(i)) ONT_RETURN_IF_ERROR(c.ReduceTo(i, c.dy[0], c.out(0)));
  return Status::OK();
}
Status SubGrad(GradContext& c) {
  if (c.wants(0)) ONT_RETURN_IF_ERROR(c.ReduceTo(0, c.dy[0], c.out(0)));
  if (c.wants(1)) ONT_RETURN_IF_ERROR(c.ReduceTo(1, c.Emit("Neg", {c.dy[0]}, {c.Tmp("neg")}), c.out(0)));
  return Status::OK();
}
Status MulGrad(GradContext& c) {
  for (int i = 0; i < 2; ++i) {
    if (c.wants(i)) ONT_RETURN_IF_ERROR(c.ReduceTo(i, c.Emit("Mul", {c.dy[0], c.in(1 - i)}, {c.Tmp("mul")}), c.out(0)));
  }
  return Status::OK();
}
Status DivGrad(GradContext& c) {
  if (c.wants(0) && c.wants(1)) {
    c.Emit("DivGrad", {c.dy[0], c.in(0), c.in(1)}, {c.dx[0], c.dx[1]}, {}, kMs);
  } else if (c.wants(0)) {
    ONT_RETURN_IF_ERROR(c.ReduceTo(0, c.Emit("Div", {c.dy[0], c.in(1)}, {c.Tmp("div")}), c.out(0)));
  } else if (c.wants(1)) {
    c.Emit("DivGrad", {c.dy[0], c.in(0), c.in(1)}, {"", c.dx[1]}, {}, kMs);
  }
  return Status::OK();
}
Status NegGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Neg", {c.dy[0]}, {c.dx[0]});
  return Status::OK();
}
Status SumGrad(GradContext& c) {
  for (int i = 0; i < static_cast<int>(c.dx.size()); ++i) if (c.wants(i)) ONT_RETURN_IF_ERROR(c.ReduceTo(i, c.dy[0], c.out(0)));
  return Status::OK();
}
Status ExpandGrad(GradContext& c) {
  if (c.wants(0)) ONT_RETURN_IF_ERROR(c.ReduceTo(0, c.dy[0], c.out(0)));
  return Status::OK();
}

// (dY, X) or (dY, Y) -> dX through a com.microsoft gradient op.
template <const char* kOp, bool kUsesOutput>
Status MsUnaryGrad(GradContext& c) {
  if (c.wants(0)) c.Emit(kOp, {c.dy[0], kUsesOutput ? c.out(0) : c.in(0)}, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
constexpr char kReluGrad[] = "ReluGrad";
constexpr char kSigmoidGrad[] = "SigmoidGrad";
constexpr char kTanhGrad[] = "TanhGrad";
constexpr char kFastGeluGrad[] = "FastGeluGrad";
constexpr char kLeakyReluGrad[] = "LeakyReluGrad";

Status GeluGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  if (c.node().domain == kMs && c.has_input(1)) return Unimplemented("Gelu with a bias input has no gradient builder");
  bool tanh = c.node().GetString("approximate", "none") == "tanh";
  c.Emit(tanh ? "FastGeluGrad" : "GeluGrad", {c.dy[0], c.in(0)}, {c.dx[0]}, {}, kMs);
  return Status::OK();
}
Status FastGeluGrad(GradContext& c) {
  if (c.has_input(1)) return Unimplemented("FastGelu with a bias input has no gradient builder");
  return MsUnaryGrad<kFastGeluGrad, false>(c);
}
Status ExpGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Mul", {c.dy[0], c.out(0)}, {c.dx[0]});
  return Status::OK();
}
Status LogGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Div", {c.dy[0], c.in(0)}, {c.dx[0]});
  return Status::OK();
}
Status SqrtGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string two_y = c.Emit("Mul", {c.out(0), c.ConstFloat("two", 2.0f, c.out(0))}, {c.Tmp("two_y")});
  c.Emit("Div", {c.dy[0], two_y}, {c.dx[0]});
  return Status::OK();
}
Status ReciprocalGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string y2 = c.Emit("Mul", {c.out(0), c.out(0)}, {c.Tmp("y2")});
  std::string t = c.Emit("Mul", {c.dy[0], y2}, {c.Tmp("t")});
  c.Emit("Neg", {t}, {c.dx[0]});
  return Status::OK();
}
Status AbsGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  c.Emit("Mul", {c.dy[0], c.Emit("Sign", {c.in(0)}, {c.Tmp("sign")})}, {c.dx[0]});
  return Status::OK();
}
Status ErfGrad(GradContext& c) {  // d erf(x) = 2/sqrt(pi) exp(-x^2)
  if (!c.wants(0)) return Status::OK();
  std::string sq = c.Emit("Mul", {c.in(0), c.in(0)}, {c.Tmp("sq")});
  std::string e = c.Emit("Exp", {c.Emit("Neg", {sq}, {c.Tmp("neg")})}, {c.Tmp("exp")});
  std::string s = c.Emit("Mul", {e, c.ConstFloat("two_over_sqrt_pi", static_cast<float>(2.0 / std::sqrt(M_PI)))},
                         {c.Tmp("scaled")});
  c.Emit("Mul", {c.dy[0], s}, {c.dx[0]});
  return Status::OK();
}
Status PowGrad(GradContext& c) {  // d x^p = p x^(p-1); the exponent gets no gradient
  if (!c.wants(0)) return Status::OK();
  const ValueInfo* pt = c.Type(c.in(1));
  const ValueInfo* xt = c.Type(c.in(0));
  if (!pt || !xt || pt->dtype != xt->dtype) return Unimplemented("Pow gradient needs an exponent of the base's type");
  std::string pm1 = c.Emit("Sub", {c.in(1), c.ConstFloat("one", 1.0f, c.in(1))}, {c.Tmp("p_minus_1")});
  std::string t = c.Emit("Pow", {c.in(0), pm1}, {c.Tmp("pow")});
  std::string t2 = c.Emit("Mul", {t, c.in(1)}, {c.Tmp("mul_p")});
  return c.ReduceTo(0, c.Emit("Mul", {t2, c.dy[0]}, {c.Tmp("mul_dy")}), c.out(0));
}
Status CastGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const ValueInfo* t = c.Type(c.in(0));
  if (!t || t->dtype == DType::kUndefined) return InvalidArgument("the type of Cast's input is unknown");
  c.Emit("Cast", {c.dy[0]}, {c.dx[0]}, {AttrInt("to", static_cast<int64_t>(t->dtype))});
  return Status::OK();
}

// ---- softmax family and losses ----
Status SoftmaxGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  bool log = c.node().op_type == "LogSoftmax";
  std::string op = std::string(log ? "LogSoftmaxGrad" : "SoftmaxGrad") + (c.opset() >= 13 ? "_13" : "");
  c.Emit(op, {c.dy[0], c.out(0)}, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
Status SceLossGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::vector<std::string> ins = {c.dy[0], c.out(1), c.in(1)};
  if (c.has_input(2)) ins.push_back(c.in(2));
  c.Emit("SoftmaxCrossEntropyLossGrad", ins, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}

// ---- matrix products ----
Status GemmGrad(GradContext& c) {
  const Node& n = c.node();
  bool ta = n.GetInt("transA", 0) != 0, tb = n.GetInt("transB", 0) != 0;
  float alpha = n.GetFloat("alpha", 1.0f), beta = n.GetFloat("beta", 1.0f);
  std::vector<onnx::AttributeProto> base = {AttrFloat("beta", 0.0f)};
  if (alpha != 1.0f) base.push_back(AttrFloat("alpha", alpha));
  auto with = [&](bool a, bool b) {
    std::vector<onnx::AttributeProto> attrs = base;
    if (a) attrs.push_back(AttrInt("transA", 1));
    if (b) attrs.push_back(AttrInt("transB", 1));
    return attrs;
  };
  const std::string &A = c.in(0), &B = c.in(1), &dY = c.dy[0];
  if (c.wants(0)) {
    if (!ta && !tb) c.Emit("Gemm", {dY, B}, {c.dx[0]}, with(false, true));
    else if (!ta && tb) c.Emit("Gemm", {dY, B}, {c.dx[0]}, with(false, false));
    else if (ta && !tb) c.Emit("Gemm", {B, dY}, {c.dx[0]}, with(false, true));
    else c.Emit("Gemm", {B, dY}, {c.dx[0]}, with(true, true));
  }
  if (c.wants(1)) {
    if (!ta && !tb) c.Emit("Gemm", {A, dY}, {c.dx[1]}, with(true, false));
    else if (!ta && tb) c.Emit("Gemm", {dY, A}, {c.dx[1]}, with(true, false));
    else if (ta && !tb) c.Emit("Gemm", {A, dY}, {c.dx[1]}, with(false, false));
    else c.Emit("Gemm", {dY, A}, {c.dx[1]}, with(true, true));
  }
  if (c.wants(2)) {
    if (beta == 0.0f) return InvalidArgument("Gemm with beta = 0 cannot differentiate its C input");
    std::string g = dY;
    if (beta != 1.0f) g = c.Emit("Mul", {dY, c.ConstFloat("beta", beta, c.out(0))}, {c.Tmp("beta_dy")});
    ONT_RETURN_IF_ERROR(c.ReduceTo(2, g, c.out(0)));
  }
  return Status::OK();
}

Status MatMulGrad(GradContext& c) {
  const ValueInfo *a = c.Type(c.in(0)), *b = c.Type(c.in(1));
  if (!a || !b || !a->has_shape || !b->has_shape) return InvalidArgument("MatMul gradient needs the operand ranks");
  if (a->dims.size() < 2 || b->dims.size() < 2) return Unimplemented("MatMul gradient with 1-D operands");
  if (a->dims.size() == 2 && b->dims.size() == 2) {
    if (c.wants(0)) c.Emit("Gemm", {c.dy[0], c.in(1)}, {c.dx[0]}, {AttrFloat("beta", 0.0f), AttrInt("transB", 1)});
    if (c.wants(1)) c.Emit("Gemm", {c.in(0), c.dy[0]}, {c.dx[1]}, {AttrFloat("beta", 0.0f), AttrInt("transA", 1)});
    return Status::OK();
  }
  if (c.wants(0)) {
    std::string t = c.Emit("FusedMatMul", {c.dy[0], c.in(1)}, {c.Tmp("dA")}, {AttrInt("transB", 1)}, kMs);
    ONT_RETURN_IF_ERROR(c.ReduceTo(0, t, ""));
  }
  if (c.wants(1)) {
    std::string t = c.Emit("FusedMatMul", {c.in(0), c.dy[0]}, {c.Tmp("dB")}, {AttrInt("transA", 1)}, kMs);
    ONT_RETURN_IF_ERROR(c.ReduceTo(1, t, ""));
  }
  return Status::OK();
}

// ---- convolution, pooling, normalization ----
Status ConvGrad(GradContext& c) {
  std::vector<std::string> outs = {c.wants(0) ? c.dx[0] : "", c.wants(1) ? c.dx[1] : "", c.wants(2) ? c.dx[2] : ""};
  c.Emit("ConvGrad", {c.dy[0], c.in(0), c.in(1)}, outs, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
Status PoolGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const ValueInfo* x = c.Type(c.in(0));
  if (!x) return InvalidArgument("pooling gradient needs the input's shape");
  bool max = c.node().op_type == "MaxPool";
  std::vector<std::string> ins = {c.dy[0]};
  if (max) ins.push_back(c.out(1));
  c.Emit(max ? "MaxPoolGrad" : "AveragePoolGrad", ins, {c.dx[0]}, CopyAttrs(c.node(), {"storage_order"}));
  c.DeclareType(c.dx[0], *x);  // dX's shape comes from the graph, as ONNX Runtime's kernels read it
  return Status::OK();
}
Status GlobalAveragePoolGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string sx = c.Emit("Size", {c.in(0)}, {c.Tmp("size_x")});
  std::string sy = c.Emit("Size", {c.out(0)}, {c.Tmp("size_y")});
  std::string ratio = c.Emit("Div", {sx, sy}, {c.Tmp("ratio")});
  std::string rf = c.Emit("Cast", {ratio}, {c.Tmp("ratio_f")}, {AttrInt("to", 1)});
  std::string t = c.Emit("Scale", {c.dy[0], rf}, {c.Tmp("scaled")}, {AttrInt("scale_down", 1)}, kMs);
  c.Emit("Expand", {t, c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")})}, {c.dx[0]});
  return Status::OK();
}
Status BatchNormGrad(GradContext& c) {
  std::vector<std::string> outs = {c.wants(0) ? c.dx[0] : "", c.wants(1) ? c.dx[1] : "", c.wants(2) ? c.dx[2] : ""};
  c.Emit("BatchNormalizationGrad", {c.dy[0], c.in(0), c.in(1), c.out(3), c.out(4)}, outs,
         {AttrFloat("epsilon", c.node().GetFloat("epsilon", 1e-5f))}, kMs);
  return Status::OK();
}
Status LayerNormGrad(GradContext& c) {
  std::vector<std::string> outs = {c.wants(0) ? c.dx[0] : "", c.wants(1) ? c.dx[1] : "", c.wants(2) ? c.dx[2] : ""};
  c.Emit("LayerNormalizationGrad", {c.dy[0], c.in(0), c.in(1), c.out(1), c.out(2)}, outs, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
Status DropoutGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::vector<std::string> ins = {c.dy[0], c.out(1)};
  if (c.has_input(1) || c.has_input(2)) ins.push_back(c.has_input(1) ? c.in(1) : "");
  if (c.has_input(2)) ins.push_back(c.in(2));
  c.Emit("DropoutGrad", ins, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}

// ---- shape ops ----
Status ReshapeLikeGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  c.Emit("Reshape", {c.dy[0], c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")})}, {c.dx[0]});
  return Status::OK();
}
Status TransposeGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::vector<int64_t> perm = c.node().GetInts("perm");
  std::vector<onnx::AttributeProto> attrs;
  if (!perm.empty()) {
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
    attrs.push_back(AttrInts("perm", inv));
  }
  c.Emit("Transpose", {c.dy[0]}, {c.dx[0]}, attrs);
  return Status::OK();
}
Status ConcatGrad(GradContext& c) {
  int64_t axis = c.node().GetInt("axis", 0);
  std::vector<std::string> lens, outs;
  for (size_t i = 0; i < c.node().inputs.size(); ++i) {
    std::string s = c.Emit("Shape", {c.in(static_cast<int>(i))}, {c.Tmp("shape")});
    const ValueInfo* t = c.Type(c.in(static_cast<int>(i)));
    int64_t a = axis;
    if (a < 0) {
      if (!t || !t->has_shape) return InvalidArgument("Concat gradient with a negative axis needs input ranks");
      a += static_cast<int64_t>(t->dims.size());
    }
    lens.push_back(c.Emit("Gather", {s, c.ConstInts("axis", {a})}, {c.Tmp("len")}));
    outs.push_back(c.wants(static_cast<int>(i)) ? c.dx[i] : c.Tmp("unused"));
  }
  std::string sizes = c.Emit("Concat", lens, {c.Tmp("sizes")}, {AttrInt("axis", 0)});
  c.Emit("Split", {c.dy[0], sizes}, outs, {AttrInt("axis", axis)});
  return Status::OK();
}
Status GatherGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string s = c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")});
  c.Emit("GatherGrad", {s, c.in(1), c.dy[0]}, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
// ReduceSum / ReduceMean: put the reduced axes back (when keepdims=0), scale (mean), expand to X.
Status ReduceGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const Node& n = c.node();
  bool axes_input = n.op_type == "ReduceSum" ? c.opset() >= 13 : c.opset() >= 18;
  std::string g = c.dy[0];
  if (n.GetInt("keepdims", 1) == 0) {
    std::string axes;
    if (axes_input && c.has_input(1)) axes = c.in(1);
    else if (!axes_input && n.HasAttribute("axes")) axes = c.ConstInts("axes", n.GetInts("axes"));
    if (!axes.empty()) g = c.Emit("Unsqueeze", {g, axes}, {c.Tmp("unsqueezed")});
  }
  if (n.op_type == "ReduceMean") {
    std::string sx = c.Emit("Size", {c.in(0)}, {c.Tmp("size_x")});
    std::string sy = c.Emit("Size", {c.out(0)}, {c.Tmp("size_y")});
    std::string rf = c.Emit("Cast", {c.Emit("Div", {sx, sy}, {c.Tmp("ratio")})}, {c.Tmp("ratio_f")}, {AttrInt("to", 1)});
    g = c.Emit("Scale", {g, rf}, {c.Tmp("scaled")}, {AttrInt("scale_down", 1)}, kMs);
  }
  c.Emit("Expand", {g, c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")})}, {c.dx[0]});
  return Status::OK();
}

// ---- more elementwise ops, composed from forward ops ----
// Where(cond, a, b) with a = dY where cond holds, else b = dY.
std::string Masked(GradContext& c, const std::string& cond, const std::string& a, const std::string& b) {
  return c.Emit("Where", {cond, a, b}, {c.Tmp("where")});
}
std::string Zero(GradContext& c, const std::string& like) { return c.ConstFloat("zero", 0.0f, like); }

Status SoftplusGrad(GradContext& c) {  // sigmoid(x)
  if (!c.wants(0)) return Status::OK();
  c.Emit("Mul", {c.dy[0], c.Emit("Sigmoid", {c.in(0)}, {c.Tmp("sigmoid")})}, {c.dx[0]});
  return Status::OK();
}
Status SoftsignGrad(GradContext& c) {  // 1 / (1 + |x|)^2
  if (!c.wants(0)) return Status::OK();
  std::string d = c.Emit("Add", {c.Emit("Abs", {c.in(0)}, {c.Tmp("abs")}), c.ConstFloat("one", 1.0f)}, {c.Tmp("den")});
  c.Emit("Div", {c.dy[0], c.Emit("Mul", {d, d}, {c.Tmp("den2")})}, {c.dx[0]});
  return Status::OK();
}
Status EluGrad(GradContext& c) {  // x > 0 ? 1 : y + alpha
  if (!c.wants(0)) return Status::OK();
  std::string pos = c.Emit("Greater", {c.in(0), Zero(c, c.in(0))}, {c.Tmp("pos")});
  std::string neg = c.Emit("Mul", {c.dy[0], c.Emit("Add", {c.out(0), c.ConstFloat("alpha", c.node().GetFloat("alpha", 1.0f))},
                                                    {c.Tmp("y_alpha")})}, {c.Tmp("neg")});
  c.Emit("Where", {pos, c.dy[0], neg}, {c.dx[0]});
  return Status::OK();
}
Status SeluGrad(GradContext& c) {  // x > 0 ? gamma : y + alpha gamma
  if (!c.wants(0)) return Status::OK();
  float alpha = c.node().GetFloat("alpha", 1.67326319217681884765625f);
  float gamma = c.node().GetFloat("gamma", 1.05070102214813232421875f);
  std::string pos = c.Emit("Greater", {c.in(0), Zero(c, c.in(0))}, {c.Tmp("pos")});
  std::string dpos = c.Emit("Mul", {c.dy[0], c.ConstFloat("gamma", gamma)}, {c.Tmp("dpos")});
  std::string slope = c.Emit("Add", {c.out(0), c.ConstFloat("alpha_gamma", alpha * gamma)}, {c.Tmp("slope")});
  c.Emit("Where", {pos, dpos, c.Emit("Mul", {c.dy[0], slope}, {c.Tmp("dneg")})}, {c.dx[0]});
  return Status::OK();
}
Status HardSigmoidGrad(GradContext& c) {  // alpha where 0 < alpha x + beta < 1
  if (!c.wants(0)) return Status::OK();
  std::string inside = c.Emit("And", {c.Emit("Greater", {c.out(0), Zero(c, c.in(0))}, {c.Tmp("gt0")}),
                                      c.Emit("Less", {c.out(0), c.ConstFloat("one", 1.0f)}, {c.Tmp("lt1")})},
                              {c.Tmp("inside")});
  std::string scaled = c.Emit("Mul", {c.dy[0], c.ConstFloat("alpha", c.node().GetFloat("alpha", 0.2f))}, {c.Tmp("scaled")});
  c.Emit("Where", {inside, scaled, Zero(c, c.in(0))}, {c.dx[0]});
  return Status::OK();
}
Status SinGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Mul", {c.dy[0], c.Emit("Cos", {c.in(0)}, {c.Tmp("cos")})}, {c.dx[0]});
  return Status::OK();
}
Status CosGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string s = c.Emit("Neg", {c.Emit("Sin", {c.in(0)}, {c.Tmp("sin")})}, {c.Tmp("neg_sin")});
  c.Emit("Mul", {c.dy[0], s}, {c.dx[0]});
  return Status::OK();
}
Status WhereGrad(GradContext& c) {
  for (int i = 1; i <= 2; ++i) {
    if (!c.wants(i)) continue;
    std::string z = Zero(c, c.out(0));
    std::string g = i == 1 ? Masked(c, c.in(0), c.dy[0], z) : Masked(c, c.in(0), z, c.dy[0]);
    ONT_RETURN_IF_ERROR(c.ReduceTo(i, g, c.out(0)));
  }
  return Status::OK();
}
Status ClipGrad(GradContext& c) {  // dY where min <= x <= max
  if (!c.wants(0)) return Status::OK();
  if (c.opset() < 11) return Unimplemented("Clip gradient before opset 11");
  std::string keep;
  if (c.has_input(1)) keep = c.Emit("GreaterOrEqual", {c.in(0), c.in(1)}, {c.Tmp("ge_min")});
  if (c.has_input(2)) {
    std::string le = c.Emit("LessOrEqual", {c.in(0), c.in(2)}, {c.Tmp("le_max")});
    keep = keep.empty() ? le : c.Emit("And", {keep, le}, {c.Tmp("inside")});
  }
  if (keep.empty()) return IdentityGrad(c);
  c.Emit("Where", {keep, c.dy[0], Zero(c, c.in(0))}, {c.dx[0]});
  return Status::OK();
}
// Max / Min: the gradient goes to the inputs equal to the result.
Status MaxMinGrad(GradContext& c) {
  for (int i = 0; i < static_cast<int>(c.dx.size()); ++i) {
    if (!c.wants(i)) continue;
    std::string eq = c.Emit("Equal", {c.in(i), c.out(0)}, {c.Tmp("is_extreme")});
    ONT_RETURN_IF_ERROR(c.ReduceTo(i, Masked(c, eq, c.dy[0], Zero(c, c.out(0))), c.out(0)));
  }
  return Status::OK();
}
Status MeanGrad(GradContext& c) {
  std::string g = c.Emit("Div", {c.dy[0], c.ConstFloat("n", static_cast<float>(c.node().inputs.size()), c.out(0))},
                         {c.Tmp("scaled")});
  for (int i = 0; i < static_cast<int>(c.dx.size()); ++i) if (c.wants(i)) ONT_RETURN_IF_ERROR(c.ReduceTo(i, g, c.out(0)));
  return Status::OK();
}
Status CumSumGrad(GradContext& c) {  // the cumulative sum taken the other way
  if (!c.wants(0)) return Status::OK();
  c.Emit("CumSum", {c.dy[0], c.in(1)}, {c.dx[0]},
         {AttrInt("exclusive", c.node().GetInt("exclusive", 0)), AttrInt("reverse", 1 - c.node().GetInt("reverse", 0))});
  return Status::OK();
}
Status TriluGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::vector<std::string> ins = {c.dy[0]};
  if (c.has_input(1)) ins.push_back(c.in(1));
  c.Emit("Trilu", ins, {c.dx[0]}, CopyAttrs(c.node()));
  return Status::OK();
}
Status GatherElementsGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string s = c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")});
  c.Emit("GatherElementsGrad", {c.dy[0], s, c.in(1)}, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
Status SplitGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::vector<std::string> parts;
  for (size_t i = 0; i < c.node().outputs.size(); ++i) {
    if (!c.dy[i].empty()) {
      parts.push_back(c.dy[i]);
      continue;
    }
    std::string s = c.Emit("Shape", {c.out(static_cast<int>(i))}, {c.Tmp("shape")});
    const ValueInfo* t = c.Type(c.in(0));
    Tensor zero = t && t->dtype == DType::kFloat64 ? Tensor::FromVector<double>({0.0}, {1})
                                                   : Tensor::FromVector<float>({0.0f}, {1});
    parts.push_back(c.Emit("ConstantOfShape", {s}, {c.Tmp("zeros")}, {AttrTensor("value", zero)}));
  }
  c.Emit("Concat", parts, {c.dx[0]}, {AttrInt("axis", c.node().GetInt("axis", 0))});
  return Status::OK();
}
Status SliceGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  if (c.opset() < 10) return Unimplemented("Slice gradient before opset 10");
  std::vector<std::string> ins = {c.dy[0], c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")}), c.in(1), c.in(2)};
  if (c.has_input(3)) ins.push_back(c.in(3));
  if (c.has_input(4)) {
    if (!c.has_input(3)) ins.push_back("");
    ins.push_back(c.in(4));
  }
  c.Emit("SliceGrad", ins, {c.dx[0]}, {}, kMs);
  return Status::OK();
}
// ReduceMax/Min/SumSquare/L1/L2/LogSum/LogSumExp: dY and Y brought back to X's rank, then the local
// derivative of each element.
Status ReduceOtherGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const Node& n = c.node();
  std::string g = c.dy[0], y = c.out(0);
  if (n.GetInt("keepdims", 1) == 0) {
    std::string axes;
    if (c.opset() >= 18 && c.has_input(1)) axes = c.in(1);
    else if (n.HasAttribute("axes")) axes = c.ConstInts("axes", n.GetInts("axes"));
    if (!axes.empty()) {
      g = c.Emit("Unsqueeze", {g, axes}, {c.Tmp("dy_kept")});
      y = c.Emit("Unsqueeze", {y, axes}, {c.Tmp("y_kept")});
    }
  }
  const std::string& x = c.in(0);
  const std::string& op = n.op_type;
  std::string local;
  if (op == "ReduceMax" || op == "ReduceMin") {
    std::string eq = c.Emit("Equal", {x, y}, {c.Tmp("is_extreme")});
    local = c.Emit("Cast", {eq}, {c.Tmp("mask")}, {AttrInt("to", static_cast<int64_t>(c.Type(x) ? c.Type(x)->dtype : DType::kFloat32))});
  } else if (op == "ReduceSumSquare") {
    local = c.Emit("Mul", {x, c.ConstFloat("two", 2.0f)}, {c.Tmp("two_x")});
  } else if (op == "ReduceL1") {
    local = c.Emit("Sign", {x}, {c.Tmp("sign")});
  } else if (op == "ReduceL2") {
    local = c.Emit("Div", {x, y}, {c.Tmp("x_over_y")});
  } else if (op == "ReduceLogSum") {
    local = c.Emit("Reciprocal", {c.Emit("Exp", {y}, {c.Tmp("sum")})}, {c.Tmp("inv_sum")});
    local = c.Emit("Expand", {local, c.Emit("Shape", {x}, {c.Tmp("shape")})}, {c.Tmp("local")});
  } else {  // ReduceLogSumExp: softmax weights exp(x - y)
    local = c.Emit("Exp", {c.Emit("Sub", {x, y}, {c.Tmp("x_minus_y")})}, {c.Tmp("weights")});
  }
  c.Emit("Mul", {local, g}, {c.dx[0]});
  return Status::OK();
}
Status GlobalMaxPoolGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string eq = c.Emit("Equal", {c.in(0), c.out(0)}, {c.Tmp("is_max")});
  c.Emit("Where", {eq, c.Emit("Expand", {c.dy[0], c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")})}, {c.Tmp("dy_full")}),
                   Zero(c, c.in(0))},
         {c.dx[0]});
  return Status::OK();
}

// ConvTranspose(X, W[, B]): dX = Conv(dY, W), dW = the weight gradient of that convolution read the other
// way (ConvGrad with X and dY swapped), dB = dY summed over batch and space. Explicit pads only.
Status ConvTransposeGrad(GradContext& c) {
  const Node& n = c.node();
  if (n.HasAttribute("output_shape") || n.GetString("auto_pad", "NOTSET") != "NOTSET" ||
      !n.GetInts("output_padding").empty()) {
    return Unimplemented("ConvTranspose gradient with output_shape, output_padding or auto_pad");
  }
  std::vector<onnx::AttributeProto> attrs = CopyAttrs(n, {"output_padding", "output_shape"});
  if (c.wants(0)) c.Emit("Conv", {c.dy[0], c.in(1)}, {c.dx[0]}, attrs);
  if (c.wants(1)) c.Emit("ConvGrad", {c.in(0), c.dy[0], c.in(1)}, {"", c.dx[1], ""}, attrs, kMs);
  if (c.wants(2)) {
    const ValueInfo* y = c.Type(c.out(0));
    if (!y || !y->has_shape) return InvalidArgument("ConvTranspose bias gradient needs the output's rank");
    std::vector<int64_t> axes = {0};
    for (size_t d = 2; d < y->dims.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    c.Emit("ReduceSum", {c.dy[0], c.ConstInts("axes", axes)}, {c.dx[2]}, {AttrInt("keepdims", 0)});
  }
  return Status::OK();
}
// Pad (constant mode, pads known): the gradient is dY with the padding sliced off.
Status PadGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  if (c.node().GetString("mode", "constant") != "constant") return Unimplemented("Pad gradient in ", c.node().GetString("mode", ""), " mode");
  if (c.opset() < 11) return Unimplemented("Pad gradient before opset 11");
  const ValueInfo* x = c.Type(c.in(0));
  if (!x || !x->has_shape) return InvalidArgument("Pad gradient needs the input's rank");
  std::string shape = c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")});
  // dX = dY without its padding: the slice starts after the begin pads (at 0 where a negative pad cropped).
  int64_t rank = static_cast<int64_t>(x->dims.size());
  std::string begin = c.Emit("Slice", {c.in(1), c.ConstInts("zero", {0}), c.ConstInts("rank", {rank})}, {c.Tmp("begin")});
  std::string zeros = c.ConstInts("zeros", std::vector<int64_t>(rank, 0));
  std::string starts = c.Emit("Max", {begin, zeros}, {c.Tmp("starts")});
  // The input rows the forward pass kept: negative pads cropped some at either end; those get zero gradient.
  std::string neg = c.Emit("Min", {begin, zeros}, {c.Tmp("neg_begin")});
  std::string end_pads = c.Emit("Slice", {c.in(1), c.ConstInts("rank2", {rank}), c.ConstInts("twice", {2 * rank})},
                                {c.Tmp("end_pads")});
  std::string neg_end = c.Emit("Min", {end_pads, zeros}, {c.Tmp("neg_end")});
  std::string kept = c.Emit("Add", {c.Emit("Add", {shape, neg}, {c.Tmp("kept0")}), neg_end}, {c.Tmp("kept")});
  std::string ends = c.Emit("Add", {starts, kept}, {c.Tmp("ends")});
  std::string cropped = c.Emit("Slice", {c.dy[0], starts, ends}, {c.Tmp("cropped")});
  std::string restore = c.Emit("Neg", {c.Emit("Concat", {neg, neg_end}, {c.Tmp("crop")}, {AttrInt("axis", 0)})},
                               {c.Tmp("restore")});
  c.Emit("Pad", {cropped, restore}, {c.dx[0]});
  return Status::OK();
}
// Tile with known shapes: dY viewed as [r0, d0, r1, d1, ...] and summed over the repeat axes.
Status TileGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const ValueInfo* x = c.Type(c.in(0));
  const ValueInfo* y = c.Type(c.out(0));
  if (!Static(x) || !Static(y)) return Unimplemented("Tile gradient needs static input and output shapes");
  std::vector<int64_t> xd = DimsOf(x), yd = DimsOf(y), split, axes;
  for (size_t d = 0; d < xd.size(); ++d) {
    split.push_back(xd[d] ? yd[d] / xd[d] : 0);
    split.push_back(xd[d]);
    axes.push_back(static_cast<int64_t>(2 * d));
  }
  std::string r = c.Emit("Reshape", {c.dy[0], c.ConstInts("split_shape", split)}, {c.Tmp("split")});
  c.Emit("ReduceSum", {r, c.ConstInts("axes", axes)}, {c.dx[0]}, {AttrInt("keepdims", 0)});
  return Status::OK();
}
// NegativeLogLikelihoodLoss without weights or ignore_index: dX = -onehot(target) * dY (/ count for mean).
Status NllLossGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const Node& n = c.node();
  if (c.has_input(2) || n.HasAttribute("ignore_index")) {
    return Unimplemented("NegativeLogLikelihoodLoss gradient with weights or ignore_index");
  }
  const ValueInfo* x = c.Type(c.in(0));
  if (!Static(x)) return Unimplemented("NegativeLogLikelihoodLoss gradient needs a static input shape");
  std::vector<int64_t> xd = DimsOf(x);
  std::string reduction = n.GetString("reduction", "mean");
  Tensor values = x->dtype == DType::kFloat64 ? Tensor::FromVector<double>({0.0, -1.0}, {2})
                                              : Tensor::FromVector<float>({0.0f, -1.0f}, {2});
  std::string onehot = c.Emit("OneHot", {c.in(1), c.ConstInts("depth", {xd[1]}), c.Const("values", values)},
                              {c.Tmp("onehot")}, {AttrInt("axis", 1)});
  std::string g = c.dy[0];
  if (reduction == "none") g = c.Emit("Unsqueeze", {g, c.ConstInts("axis1", {1})}, {c.Tmp("dy_c")});
  if (reduction == "mean") {
    int64_t count = 1;
    for (size_t d = 0; d < xd.size(); ++d) if (d != 1) count *= xd[d];
    g = c.Emit("Div", {g, c.ConstFloat("count", static_cast<float>(count))}, {c.Tmp("dy_mean")});
  }
  c.Emit("Mul", {onehot, g}, {c.dx[0]});
  return Status::OK();
}

// Floor, Ceil, Round, Sign: piecewise constant, so zero gradient almost everywhere (as PyTorch gives).
Status ZeroGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Mul", {c.dy[0], Zero(c, c.in(0))}, {c.dx[0]});
  return Status::OK();
}
// ReduceProd: d prod / dx_i = prod / x_i (defined where x_i != 0).
Status ReduceProdGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const Node& n = c.node();
  std::string g = c.dy[0], y = c.out(0);
  if (n.GetInt("keepdims", 1) == 0 && n.HasAttribute("axes")) {
    std::string axes = c.ConstInts("axes", n.GetInts("axes"));
    g = c.Emit("Unsqueeze", {g, axes}, {c.Tmp("dy_kept")});
    y = c.Emit("Unsqueeze", {y, axes}, {c.Tmp("y_kept")});
  }
  std::string local = c.Emit("Div", {y, c.in(0)}, {c.Tmp("y_over_x")});
  c.Emit("Mul", {local, g}, {c.dx[0]});
  return Status::OK();
}

struct Row {
  const char* domain;
  const char* op;
  GradientRule rule;
};

const std::vector<Row>& Rules() {
  static const auto* rules = new std::vector<Row>{
      {"", "Abs", {AbsGrad, {}}},
      {"", "Add", {AddGrad, {}}},
      {"", "AveragePool", {PoolGrad, {}}},
      {"", "Cast", {CastGrad, {}}},
      {"", "Ceil", {ZeroGrad, {}}},
      {"", "Clip", {ClipGrad, {1, 2}}},
      {"", "Concat", {ConcatGrad, {}}},
      {"", "Conv", {ConvGrad, {}}},
      {"", "ConvTranspose", {ConvTransposeGrad, {}}},
      {"", "Cos", {CosGrad, {}}},
      {"", "CumSum", {CumSumGrad, {1}}},
      {"", "Div", {DivGrad, {}}},
      {"", "Dropout", {DropoutGrad, {1, 2}}},
      {"", "Elu", {EluGrad, {}}},
      {"", "Erf", {ErfGrad, {}}},
      {"", "Exp", {ExpGrad, {}}},
      {"", "Expand", {ExpandGrad, {1}}},
      {"", "Flatten", {ReshapeLikeGrad, {}}},
      {"", "Floor", {ZeroGrad, {}}},
      {"", "Gather", {GatherGrad, {1}}},
      {"", "GatherElements", {GatherElementsGrad, {1}}},
      {"", "Gelu", {GeluGrad, {}}},
      {"", "Gemm", {GemmGrad, {}}},
      {"", "GlobalAveragePool", {GlobalAveragePoolGrad, {}}},
      {"", "GlobalMaxPool", {GlobalMaxPoolGrad, {}}},
      {"", "HardSigmoid", {HardSigmoidGrad, {}}},
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
      {"", "Mul", {MulGrad, {}}},
      {"", "Neg", {NegGrad, {}}},
      {"", "NegativeLogLikelihoodLoss", {NllLossGrad, {1, 2}}},
      {"", "Pad", {PadGrad, {1, 2, 3}}},
      {"", "Pow", {PowGrad, {1}}},
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
      {"", "Round", {ZeroGrad, {}}},
      {"", "Selu", {SeluGrad, {}}},
      {"", "Sigmoid", {MsUnaryGrad<kSigmoidGrad, true>, {}}},
      {"", "Sign", {ZeroGrad, {}}},
      {"", "Sin", {SinGrad, {}}},
      {"", "Slice", {SliceGrad, {1, 2, 3, 4}}},
      {"", "Softmax", {SoftmaxGrad, {}}},
      {"", "SoftmaxCrossEntropyLoss", {SceLossGrad, {1, 2}}},
      {"", "Softplus", {SoftplusGrad, {}}},
      {"", "Softsign", {SoftsignGrad, {}}},
      {"", "Split", {SplitGrad, {1}}},
      {"", "Sqrt", {SqrtGrad, {}}},
      {"", "Squeeze", {ReshapeLikeGrad, {1}}},
      {"", "Sub", {SubGrad, {}}},
      {"", "Sum", {SumGrad, {}}},
      {"", "Tanh", {MsUnaryGrad<kTanhGrad, true>, {}}},
      {"", "Tile", {TileGrad, {1, 2}}},
      {"", "Transpose", {TransposeGrad, {}}},
      {"", "Trilu", {TriluGrad, {1}}},
      {"", "Unsqueeze", {ReshapeLikeGrad, {1}}},
      {"", "Where", {WhereGrad, {0}}},
      {kMs, "BatchNormInternal", {BatchNormGrad, {3, 4, 5}}},
      {kMs, "FastGelu", {FastGeluGrad, {}}},
      {kMs, "Gelu", {GeluGrad, {}}},
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
  if (t && t->dtype == DType::kFloat64) return Const(hint, Tensor::FromVector<double>({v}, {}));
  if (t && t->dtype == DType::kFloat16) return Const(hint, Tensor::FromVector<Float16>({Float16(v)}, {}));
  return Const(hint, Tensor::FromVector<float>({v}, {}));
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
