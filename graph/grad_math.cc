// Gradient builders of elementwise ops, activations, softmax, the losses and Einsum.
#include <cctype>
#include <cmath>

#include "graph/gradient_helpers.h"

namespace ontrain {
namespace grad {

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
// Mod: Y = A - B * Q with Q = trunc(A / B) (fmod=1) or floor(A / B) (fmod=0). Q is piecewise constant, so
// dA = dY and dB = -dY * Q, where Q = Round((A - Y) / B) recovers the integer quotient without a Trunc op.
Status ModGrad(GradContext& c) {
  if (c.wants(0)) ONT_RETURN_IF_ERROR(c.ReduceTo(0, c.dy[0], c.out(0)));
  if (c.wants(1)) {
    std::string diff = c.Emit("Sub", {c.in(0), c.out(0)}, {c.Tmp("a_minus_y")});
    std::string q = c.Emit("Round", {c.Emit("Div", {diff, c.in(1)}, {c.Tmp("ratio")})}, {c.Tmp("quotient")});
    std::string g = c.Emit("Neg", {c.Emit("Mul", {c.dy[0], q}, {c.Tmp("dy_q")})}, {c.Tmp("neg_dy_q")});
    ONT_RETURN_IF_ERROR(c.ReduceTo(1, g, c.out(0)));
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

const char kReluGrad[] = "ReluGrad";
const char kSigmoidGrad[] = "SigmoidGrad";
const char kTanhGrad[] = "TanhGrad";
const char kFastGeluGrad[] = "FastGeluGrad";
const char kLeakyReluGrad[] = "LeakyReluGrad";

Status GeluGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  if (c.node().domain == kMs && c.has_input(1)) return Unimplemented("Gelu with a bias input has no gradient builder");
  bool tanh = c.node().GetString("approximate", "none") == "tanh";
  c.Emit(tanh ? "FastGeluGrad" : "GeluGrad", {c.dy[0], c.in(0)}, {c.dx[0]}, {}, kMs);
  return Status::OK();
}
Status FastGeluGrad(GradContext& c) {
  if (!c.has_input(1)) return MsUnaryGrad<kFastGeluGrad, false>(c);
  // FastGelu(X, bias) = FastGelu(X + bias): the derivative at X + bias; dBias sums dX over the leading axes.
  if (!c.wants(0) && !c.wants(1)) return Status::OK();
  std::string xb = c.Emit("Add", {c.in(0), c.in(1)}, {c.Tmp("x_plus_bias")});
  std::string dx = c.wants(0) ? c.dx[0] : c.Tmp("dx");
  c.Emit("FastGeluGrad", {c.dy[0], xb}, {dx}, {}, kMs);
  if (c.wants(1)) ONT_RETURN_IF_ERROR(c.ReduceTo(1, dx, c.out(0)));
  return Status::OK();
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
// The inverse trigonometric and the hyperbolic functions, from their derivatives:
//   asin' = 1/sqrt(1-x^2), acos' = -1/sqrt(1-x^2), atan' = 1/(1+x^2), tan' = 1+tan^2,
//   sinh' = cosh, cosh' = sinh, asinh' = 1/sqrt(x^2+1), acosh' = 1/sqrt(x^2-1), atanh' = 1/(1-x^2).
Status TrigGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const std::string& op = c.node().op_type;
  const std::string x = c.in(0);
  auto one = [&] { return c.ConstFloat("one", 1.0f); };
  if (op == "Sinh" || op == "Cosh") {
    c.Emit("Mul", {c.dy[0], c.Emit(op == "Sinh" ? "Cosh" : "Sinh", {x}, {c.Tmp("derivative")})}, {c.dx[0]});
    return Status::OK();
  }
  if (op == "Tan") {
    std::string y2 = c.Emit("Mul", {c.out(0), c.out(0)}, {c.Tmp("tan2")});
    c.Emit("Mul", {c.dy[0], c.Emit("Add", {y2, one()}, {c.Tmp("sec2")})}, {c.dx[0]});
    return Status::OK();
  }
  std::string x2 = c.Emit("Mul", {x, x}, {c.Tmp("x2")});
  std::string denom;
  if (op == "Asin" || op == "Acos") denom = c.Emit("Sqrt", {c.Emit("Sub", {one(), x2}, {c.Tmp("one_minus_x2")})}, {c.Tmp("denom")});
  else if (op == "Atan") denom = c.Emit("Add", {one(), x2}, {c.Tmp("denom")});
  else if (op == "Asinh") denom = c.Emit("Sqrt", {c.Emit("Add", {x2, one()}, {c.Tmp("x2_plus_one")})}, {c.Tmp("denom")});
  else if (op == "Acosh") denom = c.Emit("Sqrt", {c.Emit("Sub", {x2, one()}, {c.Tmp("x2_minus_one")})}, {c.Tmp("denom")});
  else denom = c.Emit("Sub", {one(), x2}, {c.Tmp("denom")});  // Atanh
  if (op == "Acos") {
    std::string q = c.Emit("Div", {c.dy[0], denom}, {c.Tmp("quotient")});
    c.Emit("Neg", {q}, {c.dx[0]});
  } else {
    c.Emit("Div", {c.dy[0], denom}, {c.dx[0]});
  }
  return Status::OK();
}
// CastLike(x, like): the gradient is cast back to x's type; `like` only gives a type.
Status CastLikeGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("CastLike", {c.dy[0], c.in(0)}, {c.dx[0]});
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
// Floor, Ceil, Round, Sign: piecewise constant, so zero gradient almost everywhere (as PyTorch gives).
Status ZeroGrad(GradContext& c) {
  if (c.wants(0)) c.Emit("Mul", {c.dy[0], Zero(c, c.in(0))}, {c.dx[0]});
  return Status::OK();
}
// -onehot(target) over `depth` classes on axis 1, in the scores' element type: NLL's gradient pattern.
static std::string NegativeOneHot(GradContext& c, const std::string& target, int64_t depth, DType dtype) {
  Tensor values = dtype == DType::kFloat64 ? Tensor::FromVector<double>({0.0, -1.0}, {2})
                                           : Tensor::FromVector<float>({0.0f, -1.0f}, {2});
  return c.Emit("OneHot", {target, c.ConstInts("depth", {depth}), c.Const("values", values)}, {c.Tmp("onehot")},
                {AttrInt("axis", 1)});
}

// NegativeLogLikelihoodLoss with class weights and/or ignore_index: every target position n gets the
// weight w_n = weight[t_n] (1 without weights), 0 where t_n == ignore_index; then
// dX[n, c] = -[c == t_n] * w_n * dY_n, divided by sum(w_n) for reduction "mean".
Status WeightedNllLossGrad(GradContext& c) {
  const Node& n = c.node();
  const ValueInfo* x = c.Type(c.in(0));
  const ValueInfo* t = c.Type(c.in(1));
  if (x == nullptr || x->dims.size() < 2 || x->dims[1].value <= 0) {
    return Unimplemented("NegativeLogLikelihoodLoss gradient needs the input's rank and class count");
  }
  std::string target = c.in(1);
  if (t == nullptr || t->dtype != DType::kInt64) {
    target = c.Emit("Cast", {target}, {c.Tmp("target64")}, {AttrInt("to", static_cast<int64_t>(DType::kInt64))});
  }
  const int64_t to_x = static_cast<int64_t>(x->dtype);
  std::string weight;  // per target position, x's element type
  std::string safe = target;
  if (n.HasAttribute("ignore_index")) {
    std::string ignored = c.Emit("Equal", {target, c.ConstInts("ignore_index", {n.GetInt("ignore_index", 0)})},
                                 {c.Tmp("ignored")});
    safe = c.Emit("Where", {ignored, c.ConstInts("class0", {0}), target}, {c.Tmp("safe_target")});
    weight = c.Emit("Cast", {c.Emit("Not", {ignored}, {c.Tmp("kept")})}, {c.Tmp("kept_w")}, {AttrInt("to", to_x)});
  }
  if (c.has_input(2)) {
    std::string cw = c.Emit("Gather", {c.in(2), safe}, {c.Tmp("class_w")}, {AttrInt("axis", 0)});
    weight = weight.empty() ? cw : c.Emit("Mul", {cw, weight}, {c.Tmp("w")});
  }
  std::string onehot = NegativeOneHot(c, safe, x->dims[1].value, x->dtype);
  std::string g = c.Emit("Mul", {c.dy[0], weight}, {c.Tmp("dy_w")});  // dY is a scalar or has the target's shape
  std::string reduction = n.GetString("reduction", "mean");
  if (reduction == "mean") {
    std::string total = c.Emit("ReduceSum", {weight}, {c.Tmp("w_total")}, {AttrInt("keepdims", 0)});
    g = c.Emit("Div", {g, total}, {c.Tmp("dy_mean")});
  }
  g = c.Emit("Unsqueeze", {g, c.ConstInts("axis1", {1})}, {c.Tmp("dy_c")});
  c.Emit("Mul", {onehot, g}, {c.dx[0]});
  return Status::OK();
}

// NegativeLogLikelihoodLoss: dX = -onehot(target) * dY (/ count for mean); the weighted form above when
// the node has class weights or an ignore_index.
Status NllLossGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const Node& n = c.node();
  if (c.has_input(2) || n.HasAttribute("ignore_index")) return WeightedNllLossGrad(c);
  const ValueInfo* x = c.Type(c.in(0));
  if (!Static(x)) return Unimplemented("NegativeLogLikelihoodLoss gradient needs a static input shape");
  std::vector<int64_t> xd = DimsOf(x);
  std::string reduction = n.GetString("reduction", "mean");
  std::string onehot = NegativeOneHot(c, c.in(1), xd[1], x->dtype);
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

Status ThresholdedReluGrad(GradContext& c) {  // x > alpha ? 1 : 0
  if (!c.wants(0)) return Status::OK();
  std::string above = c.Emit("Greater", {c.in(0), c.ConstFloat("alpha", c.node().GetFloat("alpha", 1.0f))}, {c.Tmp("above")});
  c.Emit("Where", {above, c.dy[0], Zero(c, c.in(0))}, {c.dx[0]});
  return Status::OK();
}
Status CeluGrad(GradContext& c) {  // x > 0 ? 1 : exp(x / alpha)
  if (!c.wants(0)) return Status::OK();
  std::string pos = c.Emit("Greater", {c.in(0), Zero(c, c.in(0))}, {c.Tmp("pos")});
  std::string e = c.Emit("Exp", {c.Emit("Div", {c.in(0), c.ConstFloat("alpha", c.node().GetFloat("alpha", 1.0f))},
                                        {c.Tmp("x_over_alpha")})}, {c.Tmp("exp")});
  c.Emit("Where", {pos, c.dy[0], c.Emit("Mul", {c.dy[0], e}, {c.Tmp("dneg")})}, {c.dx[0]});
  return Status::OK();
}
Status HardSwishGrad(GradContext& c) {  // 0 below -3, 1 above 3, (2x + 3) / 6 between
  if (!c.wants(0)) return Status::OK();
  const std::string& x = c.in(0);
  std::string mid = c.Emit("Div", {c.Emit("Add", {c.Emit("Mul", {x, c.ConstFloat("two", 2.0f)}, {c.Tmp("2x")}),
                                                  c.ConstFloat("three", 3.0f)}, {c.Tmp("2x3")}),
                                   c.ConstFloat("six", 6.0f)}, {c.Tmp("mid")});
  std::string hi = c.Emit("Where", {c.Emit("Greater", {x, c.ConstFloat("three", 3.0f)}, {c.Tmp("gt3")}),
                                    c.ConstFloat("one", 1.0f), mid}, {c.Tmp("hi")});
  std::string d = c.Emit("Where", {c.Emit("Less", {x, c.ConstFloat("minus_three", -3.0f)}, {c.Tmp("lt3")}),
                                   Zero(c, x), hi}, {c.Tmp("slope")});
  c.Emit("Mul", {c.dy[0], d}, {c.dx[0]});
  return Status::OK();
}
Status PReluGrad(GradContext& c) {  // dX = x < 0 ? slope dY : dY; dSlope = reduce(x < 0 ? x dY : 0)
  std::string neg = c.Emit("Less", {c.in(0), Zero(c, c.in(0))}, {c.Tmp("neg")});
  if (c.wants(0)) {
    std::string scaled = c.Emit("Mul", {c.dy[0], c.in(1)}, {c.Tmp("scaled")});
    c.Emit("Where", {neg, scaled, c.dy[0]}, {c.dx[0]});
  }
  if (c.wants(1)) {
    std::string xdy = c.Emit("Mul", {c.dy[0], c.in(0)}, {c.Tmp("x_dy")});
    ONT_RETURN_IF_ERROR(c.ReduceTo(1, Masked(c, neg, xdy, Zero(c, c.in(0))), c.out(0)));
  }
  return Status::OK();
}


// Einsum: operand k's gradient is the einsum of dY with the other operands, written with k's letters as the
// output ("out,others->k"); letters only k has (summed away in the forward pass) are restored by Unsqueeze
// and Expand. Ellipses are spelled out with unused letters (ranks from the graph); an operand whose ellipsis
// dims may be broadcast (size 1 or unknown) gets its gradient summed back to its shape. An operand with a
// letter repeated (a diagonal: "ii->i", "bii->b", "...ii->...i") takes its gradient through
// DiagonalEinsumGrad, into `result`.
Status DiagonalEinsumGrad(GradContext& c, int k, const std::string& mine, const std::string& grad_lhs,
                          const std::string& fresh, const std::vector<std::string>& grad_ins, const std::string& result);

Status EinsumGrad(GradContext& c) {
  std::string eq;
  for (char ch : c.node().GetString("equation", "")) if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  {
    const std::string lhs = eq.substr(0, arrow);
    size_t start = 0;
    for (size_t i = 0; i <= lhs.size(); ++i) {
      if (i == lhs.size() || lhs[i] == ',') {
        terms.push_back(lhs.substr(start, i - start));
        start = i + 1;
      }
    }
  }
  std::string out = arrow == std::string::npos ? "" : eq.substr(arrow + 2);
  std::string used;
  for (char ch : eq) if (std::isalpha(static_cast<unsigned char>(ch))) used += ch;
  std::string spare;
  for (char ch = 'A'; ch <= 'Z'; ++ch) if (used.find(ch) == std::string::npos) spare += ch;
  for (char ch = 'a'; ch <= 'z'; ++ch) if (used.find(ch) == std::string::npos) spare += ch;
  // ellipses -> letters, right-aligned to the widest
  int64_t widest = 0;
  std::vector<int64_t> ell(terms.size(), -1);
  for (size_t k = 0; k < terms.size(); ++k) {
    if (terms[k].find("...") == std::string::npos) continue;
    const ValueInfo* t = c.Type(c.in(static_cast<int>(k)));
    if (!t || !t->has_shape) return Unimplemented("Einsum gradient with an ellipsis needs operand ranks");
    int64_t named = 0;
    for (char ch : terms[k]) named += std::isalpha(static_cast<unsigned char>(ch)) ? 1 : 0;
    ell[k] = static_cast<int64_t>(t->dims.size()) - named;
    widest = std::max(widest, ell[k]);
  }
  if (widest > static_cast<int64_t>(spare.size())) return Unimplemented("Einsum gradient: too many ellipsis dims");
  auto spell = [&](const std::string& term, int64_t n) {
    const size_t dots = term.find("...");
    if (dots == std::string::npos) return term;
    return term.substr(0, dots) + spare.substr(static_cast<size_t>(widest - n), static_cast<size_t>(n)) + term.substr(dots + 3);
  };
  for (size_t k = 0; k < terms.size(); ++k) terms[k] = spell(terms[k], ell[k] < 0 ? 0 : ell[k]);
  if (arrow == std::string::npos) {  // implicit: ellipsis letters, then letters used once, alphabetically
    std::string all;
    for (const std::string& t : terms) all += t;
    out = spare.substr(0, static_cast<size_t>(widest));
    std::string once;
    for (char ch : all) {
      if (spare.substr(0, static_cast<size_t>(widest)).find(ch) != std::string::npos) continue;
      if (std::count(all.begin(), all.end(), ch) == 1) once += ch;
    }
    std::sort(once.begin(), once.end());
    out += once;
  } else {
    out = spell(out, widest);
  }
  for (size_t k = 0; k < terms.size(); ++k) {
    if (!c.wants(static_cast<int>(k))) continue;
    const std::string& mine = terms[k];
    std::string others;
    std::vector<std::string> ins = {c.dy[0]};
    for (size_t j = 0; j < terms.size(); ++j) {
      if (j == k) continue;
      others += terms[j];
      ins.push_back(c.in(static_cast<int>(j)));
    }
    std::string kept;
    std::vector<int64_t> lonely;
    for (size_t d = 0; d < mine.size(); ++d) {
      if (out.find(mine[d]) == std::string::npos && others.find(mine[d]) == std::string::npos) lonely.push_back(static_cast<int64_t>(d));
      else kept += mine[d];
    }
    std::string grad_eq = out;
    for (size_t j = 0; j < terms.size(); ++j) if (j != k) grad_eq += "," + terms[j];
    // An ellipsis dim of size 1 here may be broadcast against a larger one elsewhere: the einsum then gives
    // the larger size, summed back to 1 by ReduceTo. (Ellipsis dims this operand lacks are summed by the
    // einsum itself.) Unless every such dim is known and not 1.
    bool broadcast = false;
    if (ell[k] > 0) {
      const ValueInfo* t = c.Type(c.in(static_cast<int>(k)));  // shaped: checked when spelling the ellipsis
      const size_t dots = mine.find(spare[static_cast<size_t>(widest - ell[k])]);  // its first spelled letter
      for (int64_t d = 0; d < ell[k]; ++d) {
        const size_t at = dots + static_cast<size_t>(d);
        if (at >= t->dims.size() || !t->dims[at].known() || t->dims[at].value == 1) broadcast = true;
      }
    }
    const bool diagonal = std::any_of(mine.begin(), mine.end(), [&](char ch) { return std::count(mine.begin(), mine.end(), ch) > 1; });
    if (diagonal) {  // ellipsis letters are spelled out by now: they are letters like the others there
      const std::string fresh = spare.substr(static_cast<size_t>(widest));
      if (!broadcast) {
        ONT_RETURN_IF_ERROR(DiagonalEinsumGrad(c, static_cast<int>(k), mine, grad_eq, fresh, ins, c.dx[k]));
      } else {
        const std::string g = c.Tmp("einsum_grad");
        ONT_RETURN_IF_ERROR(DiagonalEinsumGrad(c, static_cast<int>(k), mine, grad_eq, fresh, ins, g));
        ONT_RETURN_IF_ERROR(c.ReduceTo(static_cast<int>(k), g, ""));
      }
      continue;
    }
    grad_eq += "->" + kept;
    if (lonely.empty()) {
      if (!broadcast) {
        c.Emit("Einsum", ins, {c.dx[k]}, {AttrString("equation", grad_eq)});
      } else {
        std::string g = c.Emit("Einsum", ins, {c.Tmp("einsum_grad")}, {AttrString("equation", grad_eq)});
        ONT_RETURN_IF_ERROR(c.ReduceTo(static_cast<int>(k), g, ""));
      }
      continue;
    }
    if (broadcast) {
      return Unimplemented(c.node().Describe(), ": no gradient for an operand that is broadcast under an ellipsis and has "
                           "letters of its own summed away (\"", mine, "\")");
    }
    std::string g = c.Emit("Einsum", ins, {c.Tmp("einsum_grad")}, {AttrString("equation", grad_eq)});
    g = c.Emit("Unsqueeze", {g, c.ConstInts("lonely_axes", lonely)}, {c.Tmp("unsqueezed")});
    c.Emit("Expand", {g, c.Emit("Shape", {c.in(static_cast<int>(k))}, {c.Tmp("shape")})}, {c.dx[k]});
  }
  return Status::OK();
}

// Operand k's term `mine` repeats a letter. With D its diagonal (the letters of `mine` once each, in order
// of first use), the forward einsum reads X only through D, so
//   1. dD over the letters that also appear in the output or another operand is the einsum "grad_lhs->kept";
//   2. dX puts dD on the diagonal and spreads it over the letters only X has (summed away in the forward
//      pass): one more einsum, in which each repeat of a letter L becomes a fresh letter F tied to L by an
//      identity matrix [n_L, n_L] (operand "LF"), and each letter only X has comes from a vector of ones
//      (operand "L"): "kept,LF...,L...->mine with repeats renamed". Sizes come from X's shape at run time.
Status DiagonalEinsumGrad(GradContext& c, int k, const std::string& mine, const std::string& grad_lhs,
                          const std::string& fresh, const std::vector<std::string>& grad_ins, const std::string& result) {
  const ValueInfo* t = c.Type(c.in(k));
  if (t && t->dtype != DType::kFloat32 && t->dtype != DType::kFloat64) {
    return Unimplemented(c.node().Describe(), ": the gradient of a repeated letter (\"", mine, "\") supports float and "
                         "double only, got ", DTypeName(t->dtype));
  }
  const bool f64 = t && t->dtype == DType::kFloat64;
  auto filled = [&](double v) {
    return f64 ? Tensor::FromVector<double>({v}, {1}) : Tensor::FromVector<float>({static_cast<float>(v)}, {1});
  };
  const size_t arrow = grad_lhs.find("->");
  const std::string outside = grad_lhs.substr(0, arrow == std::string::npos ? grad_lhs.size() : arrow);
  std::string kept, renamed, extra_terms;
  std::vector<std::string> extra;
  std::string shape;  // X's shape, made on first need
  auto size_of = [&](size_t pos) {
    if (shape.empty()) shape = c.Emit("Shape", {c.in(k)}, {c.Tmp("shape")});
    return c.Emit("Gather", {shape, c.ConstInts("axis_index", {static_cast<int64_t>(pos)})}, {c.Tmp("dim")},
                  {AttrInt("axis", 0)});
  };
  size_t next_fresh = 0;
  for (size_t d = 0; d < mine.size(); ++d) {
    const char ch = mine[d];
    const size_t first = mine.find(ch);
    if (first != d) {  // a repeat: a fresh letter, tied to the first by an identity matrix
      if (next_fresh >= fresh.size()) return Unimplemented(c.node().Describe(), ": Einsum gradient: out of letters");
      const char f = fresh[next_fresh++];
      renamed += f;
      std::string n = size_of(first);
      std::string nn = c.Emit("Concat", {n, n}, {c.Tmp("square")}, {AttrInt("axis", 0)});
      std::string zeros = c.Emit("ConstantOfShape", {nn}, {c.Tmp("zeros")}, {AttrTensor("value", filled(0.0))});
      extra.push_back(c.Emit("EyeLike", {zeros}, {c.Tmp("identity")}));
      extra_terms += std::string(",") + ch + f;
      continue;
    }
    renamed += ch;
    if (outside.find(ch) != std::string::npos) {
      kept += ch;
    } else {  // only X has it: spread by ones
      extra.push_back(c.Emit("ConstantOfShape", {size_of(d)}, {c.Tmp("ones")}, {AttrTensor("value", filled(1.0))}));
      extra_terms += std::string(",") + ch;
    }
  }
  std::string dd = c.Emit("Einsum", grad_ins, {c.Tmp("einsum_grad")}, {AttrString("equation", outside + "->" + kept)});
  if (kept.empty()) {  // dD is a scalar ("ii->", a trace): scale the spread instead of naming an empty term
    std::string spread = c.Emit("Einsum", extra, {c.Tmp("spread")}, {AttrString("equation", extra_terms.substr(1) + "->" + renamed)});
    c.Emit("Mul", {spread, dd}, {result});
    return Status::OK();
  }
  std::vector<std::string> ins = {dd};
  ins.insert(ins.end(), extra.begin(), extra.end());
  c.Emit("Einsum", ins, {result}, {AttrString("equation", kept + extra_terms + "->" + renamed)});
  return Status::OK();
}

}  // namespace grad
}  // namespace ontrain
