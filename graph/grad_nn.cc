// Gradient builders of matrix products, convolution, pooling, normalization and dropout.
#include <cmath>

#include "graph/conv_pads.h"
#include "graph/gradient_helpers.h"

namespace ontrain {
namespace grad {

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
  if (b->dims.size() == 2 && b->dims[0].known() && b->dims[1].known()) {
    // A [..., M, K] times a matrix B [K, N] (a Linear layer over a sequence): dA has A's shape as it is, and
    // dB is one GEMM over all rows, A and dY viewed as [rows, K] and [rows, N], instead of a product per
    // batch and a sum over the batches.
    if (c.wants(0)) c.Emit("FusedMatMul", {c.dy[0], c.in(1)}, {c.dx[0]}, {AttrInt("transB", 1)}, kMs);
    if (c.wants(1)) {
      std::string a2 = c.Emit("Reshape", {c.in(0), c.ConstInts("a_rows", {-1, b->dims[0].value})}, {c.Tmp("a_rows")});
      std::string g2 = c.Emit("Reshape", {c.dy[0], c.ConstInts("dy_rows", {-1, b->dims[1].value})}, {c.Tmp("dy_rows")});
      c.Emit("Gemm", {a2, g2}, {c.dx[1]}, {AttrFloat("beta", 0.0f), AttrInt("transA", 1)});
    }
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

// FusedMatMul(A, B) with B a matrix, transB either way, transA 0 and alpha 1 (what graph/fusion makes of
// MatMul(x, Transpose(W))): Y = A op(B). dA = dY op(B)^T; dB = dY_rows^T A_rows (transB) or A_rows^T dY_rows,
// one GEMM over all of A's rows.
Status FusedMatMulGrad(GradContext& c) {
  const Node& n = c.node();
  if (n.GetInt("transA", 0) != 0 || n.GetFloat("alpha", 1.0f) != 1.0f || n.GetInt("transBatchA", 0) != 0 ||
      n.GetInt("transBatchB", 0) != 0) {
    return Unimplemented("FusedMatMul gradient with transA, alpha != 1 or transBatch (", n.Describe(), ")");
  }
  const ValueInfo *a = c.Type(c.in(0)), *b = c.Type(c.in(1));
  if (!a || !b || !a->has_shape || !b->has_shape || b->dims.size() != 2 || a->dims.size() < 2 ||
      !b->dims[0].known() || !b->dims[1].known()) {
    return Unimplemented("FusedMatMul gradient needs A of rank >= 2 and B a matrix of known dims (", n.Describe(), ")");
  }
  const bool tb = n.GetInt("transB", 0) != 0;
  const int64_t k = tb ? b->dims[1].value : b->dims[0].value, nn = tb ? b->dims[0].value : b->dims[1].value;
  if (c.wants(0)) c.Emit("FusedMatMul", {c.dy[0], c.in(1)}, {c.dx[0]}, {AttrInt("transB", tb ? 0 : 1)}, kMs);
  if (c.wants(1)) {
    std::string a2 = c.in(0), g2 = c.dy[0];
    if (a->dims.size() > 2) {
      a2 = c.Emit("Reshape", {c.in(0), c.ConstInts("a_rows", {-1, k})}, {c.Tmp("a_rows")});
      g2 = c.Emit("Reshape", {c.dy[0], c.ConstInts("dy_rows", {-1, nn})}, {c.Tmp("dy_rows")});
    }
    if (tb) c.Emit("Gemm", {g2, a2}, {c.dx[1]}, {AttrFloat("beta", 0.0f), AttrInt("transA", 1)});
    else c.Emit("Gemm", {a2, g2}, {c.dx[1]}, {AttrFloat("beta", 0.0f), AttrInt("transA", 1)});
  }
  return Status::OK();
}

// com.microsoft LSTMTraining (the rewritten LSTM): ONNX Runtime's LSTMGrad(X, W, R, SL, H0, C0, HAll, CAll,
// iofc, dHAll, dHFinal, dCFinal) -> dX, dW, dR, dB, dH0, dC0, dP, plus the peephole weights as input 12 when
// the LSTM has them (ontrain's extension: the peephole terms need them).
Status LstmGrad(GradContext& c) {
  auto in = [&](int i) { return c.has_input(i) ? c.in(i) : std::string(); };
  std::vector<std::string> ins = {c.in(0), c.in(1), c.in(2), in(4), in(5), in(6), c.out(0), c.out(3), c.out(4),
                                  c.dy.size() > 0 ? c.dy[0] : "", c.dy.size() > 1 ? c.dy[1] : "",
                                  c.dy.size() > 2 ? c.dy[2] : ""};
  if (c.has_input(7)) ins.push_back(c.in(7));
  std::vector<std::string> outs;
  for (int i : {0, 1, 2, 3, 5, 6, 7}) outs.push_back(c.wants(i) ? c.dx[i] : "");
  while (!outs.empty() && outs.back().empty()) outs.pop_back();
  if (outs.empty()) return Status::OK();
  c.Emit("LSTMGrad", ins, outs, CopyAttrs(c.node()), kMs);
  return Status::OK();
}

// com.microsoft GRUTraining (the rewritten GRU): ONNX Runtime's GRUGrad(X, W, R, B, SL, H0, HAll, zrh, dHAll,
// dHFinal) -> dX, dW, dR, dB, dH0.
Status GruGrad(GradContext& c) {
  auto in = [&](int i) { return c.has_input(i) ? c.in(i) : std::string(); };
  std::vector<std::string> ins = {c.in(0), c.in(1), c.in(2), in(3), in(4), in(5), c.out(0), c.out(2),
                                  c.dy.size() > 0 ? c.dy[0] : "", c.dy.size() > 1 ? c.dy[1] : ""};
  std::vector<std::string> outs;
  for (int i : {0, 1, 2, 3, 5}) outs.push_back(c.wants(i) ? c.dx[i] : "");
  while (!outs.empty() && outs.back().empty()) outs.pop_back();
  if (outs.empty()) return Status::OK();
  c.Emit("GRUGrad", ins, outs, CopyAttrs(c.node()), kMs);
  return Status::OK();
}

// RNN (layout 0 after the rewrite): ontrain's com.microsoft RNNGrad(X, W, R, B, SL, H0, Y, dY, dY_h) -> dX, dW,
// dR, dB, dH0 (ONNX Runtime has no RNN gradient).
Status RnnGrad(GradContext& c) {
  auto in = [&](int i) { return c.has_input(i) ? c.in(i) : std::string(); };
  std::vector<std::string> ins = {c.in(0), c.in(1), c.in(2), in(3), in(4), in(5), c.out(0),
                                  c.dy.size() > 0 ? c.dy[0] : "", c.dy.size() > 1 ? c.dy[1] : ""};
  std::vector<std::string> outs;
  for (int i : {0, 1, 2, 3, 5}) outs.push_back(c.wants(i) ? c.dx[i] : "");
  while (!outs.empty() && outs.back().empty()) outs.pop_back();
  if (outs.empty()) return Status::OK();
  c.Emit("RNNGrad", ins, outs, CopyAttrs(c.node(), {"layout"}), kMs);
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
  bool known = x->has_shape;
  for (size_t d = 1; known && d < x->dims.size(); ++d) known = x->dims[d].known();
  if (!known && max && c.node().GetInt("storage_order", 0) == 0) {
    // The pooled input's dims are known only at run time (e.g. after a Pad with computed pads), so
    // MaxPoolGrad could not size dX. MaxPool's Indices are flat row-major positions in X: scatter-add dY
    // there over the flattened X, then restore X's shape.
    std::string flat = c.ConstInts("flat", {-1});
    std::string size = c.Emit("Reshape", {c.Emit("Size", {c.in(0)}, {c.Tmp("size")}), c.ConstInts("one", {1})},
                              {c.Tmp("flat_shape")});
    std::string dy = c.Emit("Reshape", {c.dy[0], flat}, {c.Tmp("dy_flat")});
    std::string idx = c.Emit("Reshape", {c.out(1), flat}, {c.Tmp("indices_flat")});
    std::string dx = c.Emit("GatherElementsGrad", {dy, size, idx}, {c.Tmp("dx_flat")}, {AttrInt("axis", 0)}, kMs);
    c.Emit("Reshape", {dx, c.Emit("Shape", {c.in(0)}, {c.Tmp("x_shape")})}, {c.dx[0]});
    return Status::OK();
  }
  if (!known && !max) {
    // AveragePoolGrad sizes dX from the graph (ONNX Runtime's kernel reads it there); with run-time dims,
    // X goes along as a second input whose shape the CPU kernel reads (an ontrain extension: ONNX Runtime
    // could not run this case at all).
    c.Emit("AveragePoolGrad", {c.dy[0], c.in(0)}, {c.dx[0]}, CopyAttrs(c.node()));
    return Status::OK();
  }
  if (!known) {
    return Unimplemented(c.node().op_type, " gradient needs the pooled input's dims after the batch to be known, got ",
                         x->TypeString());
  }
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
  // dX always has a name: ONNX Runtime's LayerNormalizationGrad kernel fails when its first output is omitted
  // (a LayerNorm applied to the graph input, as in a pre-LayerNorm transformer's first block).
  std::vector<std::string> outs = {c.wants(0) ? c.dx[0] : c.Tmp("unused_dx"), c.wants(1) ? c.dx[1] : "",
                                   c.wants(2) ? c.dx[2] : ""};
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
// ConvTranspose with output_padding, output_shape or auto_pad. The pads resolve to numbers (as the forward
// kernel resolves them, possibly negative; output_shape and SAME_* from the static spatial dims):
// Y = full[pb : F - pe] of the full scatter result of length F = s*(in-1) + output_padding + span. dY padded by (pb, pe) (negative pads crop)
// is dFull, and X's and W's gradients are those of the adjoint convolution over dFull without padding; the
// last output_padding rows of dFull are reached by no input and drop out when output_padding < stride.
Status ResolvedConvTransposeGrad(GradContext& c, std::vector<onnx::AttributeProto>* attrs, std::string* dy) {
  const Node& n = c.node();
  const ValueInfo* x = c.Type(c.in(0));
  const ValueInfo* w = c.Type(c.in(1));
  // Only output_shape and SAME_* read the spatial dims (the target length, or in * stride, is compared with
  // the full scatter length); explicit pads with output_padding need no shapes at all.
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  const bool needs_dims = n.HasAttribute("output_shape") || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  auto spatial_known = [](const ValueInfo* v) {
    if (v == nullptr || !v->has_shape || v->dims.size() < 3) return false;
    for (size_t d = 2; d < v->dims.size(); ++d) if (!v->dims[d].known()) return false;
    return true;
  };
  if (needs_dims && (!spatial_known(x) || !spatial_known(w) || x->dims.size() != w->dims.size())) {
    return Unimplemented("ConvTranspose gradient with output_shape or auto_pad ", auto_pad, " needs the spatial "
                         "dims of X and W to be known (", x ? x->TypeString() : "X untyped", ", ",
                         w ? w->TypeString() : "W untyped", ")");
  }
  size_t rank = x && x->has_shape ? x->dims.size() : w && w->has_shape ? w->dims.size() : 0;
  if (rank < 3) return InvalidArgument("ConvTranspose gradient needs the rank of X or W (at least 3)");
  std::vector<int64_t> xd(rank, -1), wd(rank, -1);
  if (needs_dims) {
    for (size_t d = 0; d < rank; ++d) xd[d] = x->dims[d].known() ? x->dims[d].value : -1;
    for (size_t d = 0; d < rank; ++d) wd[d] = w->dims[d].known() ? w->dims[d].value : -1;
  }
  const size_t nd = rank - 2;
  auto per_dim = [&](const char* name, int64_t fill, size_t count) {
    std::vector<int64_t> v = n.GetInts(name);
    return v.empty() ? std::vector<int64_t>(count, fill) : v;
  };
  std::vector<int64_t> strides = per_dim("strides", 1, nd), dil = per_dim("dilations", 1, nd);
  std::vector<int64_t> pads = per_dim("pads", 0, 2 * nd), out_pad = per_dim("output_padding", 0, nd);
  std::vector<int64_t> out_shape = n.GetInts("output_shape");
  if (out_shape.size() > nd) out_shape.erase(out_shape.begin(), out_shape.end() - static_cast<std::ptrdiff_t>(nd));
  if (strides.size() != nd || dil.size() != nd || pads.size() != 2 * nd || out_pad.size() != nd ||
      (!out_shape.empty() && out_shape.size() != nd)) {
    return InvalidArgument("ConvTranspose attributes do not match ", nd, " spatial dims");
  }
  std::vector<int64_t> pad_dy(2 * (nd + 2), 0);
  for (size_t i = 0; i < nd; ++i) {
    if (out_pad[i] >= strides[i]) {
      return Unimplemented("ConvTranspose gradient with output_padding ", out_pad[i], " >= stride ", strides[i]);
    }
    int64_t pb = pads[i], pe = pads[i + nd];
    if (needs_dims) {
      int64_t full = strides[i] * (xd[i + 2] - 1) + out_pad[i] + (wd[i + 2] - 1) * dil[i] + 1;
      ResolveConvTransposePads(auto_pad, full, xd[i + 2], strides[i], out_shape.empty() ? -1 : out_shape[i], &pb, &pe);
    } else if (auto_pad == "VALID") {
      pb = pe = 0;
    }
    pad_dy[i + 2] = pb;
    pad_dy[nd + 2 + i + 2] = pe;
  }
  bool any = false;
  for (int64_t p : pad_dy) any = any || p != 0;
  if (any) *dy = c.Emit("Pad", {*dy, c.ConstInts("full_pads", pad_dy)}, {c.Tmp("dfull")});
  attrs->clear();
  attrs->push_back(AttrInts("strides", strides));
  attrs->push_back(AttrInts("dilations", dil));
  attrs->push_back(AttrInts("pads", std::vector<int64_t>(2 * nd, 0)));
  attrs->push_back(AttrInt("group", n.GetInt("group", 1)));
  return Status::OK();
}

Status ConvTransposeGrad(GradContext& c) {
  const Node& n = c.node();
  std::vector<onnx::AttributeProto> attrs = CopyAttrs(n, {"output_padding", "output_shape"});
  std::string dy = c.dy[0];
  if (n.HasAttribute("output_shape") || n.GetString("auto_pad", "NOTSET") != "NOTSET" ||
      !n.GetInts("output_padding").empty()) {
    ONT_RETURN_IF_ERROR(ResolvedConvTransposeGrad(c, &attrs, &dy));
  }
  if (c.wants(0)) c.Emit("Conv", {dy, c.in(1)}, {c.dx[0]}, attrs);
  if (c.wants(1)) c.Emit("ConvGrad", {c.in(0), dy, c.in(1)}, {"", c.dx[1], ""}, attrs, kMs);
  if (c.wants(2)) {
    const ValueInfo* y = c.Type(c.out(0));
    if (!y || !y->has_shape) return InvalidArgument("ConvTranspose bias gradient needs the output's rank");
    std::vector<int64_t> axes = {0};
    for (size_t d = 2; d < y->dims.size(); ++d) axes.push_back(static_cast<int64_t>(d));
    c.Emit("ReduceSum", {c.dy[0], c.ConstInts("axes", axes)}, {c.dx[2]}, {AttrInt("keepdims", 0)});
  }
  return Status::OK();
}

}  // namespace grad
}  // namespace ontrain
