// Gradient builders of shape, index and reduction ops (and the broadcast reduction they share).
#include <cmath>
#include <limits>

#include "graph/gradient_helpers.h"

namespace ontrain {
namespace grad {

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
// ConcatTraining: SplitTraining(dY, per_input_length) along the same axis, as ONNX Runtime emits it.
Status ConcatTrainingGrad(GradContext& c) {
  if (c.out(1).empty()) return InvalidArgument("ConcatTraining gradient needs the per_input_length output");
  std::vector<std::string> outs;
  for (size_t i = 0; i < c.node().inputs.size(); ++i) {
    outs.push_back(c.wants(static_cast<int>(i)) ? c.dx[i] : c.Tmp("unused"));
  }
  c.Emit("SplitTraining", {c.dy[0], c.out(1)}, outs, {AttrInt("axis", c.node().GetInt("axis", 0))}, kMs);
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
// DepthToSpace and SpaceToDepth permute elements, so each one's gradient is the inverse permutation:
// SpaceToDepth undoes DepthToSpace in mode DCR and DepthToSpace (DCR) undoes SpaceToDepth. DepthToSpace in
// mode CRD reads channel k b^2 + i b + j where DCR reads (i b + j) c + k: its gradient is SpaceToDepth
// followed by a Gather of the channels back into CRD's order (it needs the channel count from the graph).
Status BlockShuffleGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const int64_t b = c.node().GetInt("blocksize", 0);
  if (c.node().op_type == "SpaceToDepth") {
    c.Emit("DepthToSpace", {c.dy[0]}, {c.dx[0]}, {AttrInt("blocksize", b), AttrString("mode", "DCR")});
    return Status::OK();
  }
  if (c.node().GetString("mode", "DCR") != "CRD") {
    c.Emit("SpaceToDepth", {c.dy[0]}, {c.dx[0]}, {AttrInt("blocksize", b)});
    return Status::OK();
  }
  const ValueInfo* t = c.Type(c.in(0));
  if (!t || !t->has_shape || t->dims.size() != 4 || !t->dims[1].known() || b < 1) {
    return Unimplemented(c.node().Describe(), ": the gradient of DepthToSpace in mode CRD needs the input's channel count");
  }
  const int64_t channels = t->dims[1].value, k_count = channels / (b * b);
  std::vector<int64_t> order(static_cast<size_t>(channels));
  for (int64_t k = 0; k < k_count; ++k)
    for (int64_t q = 0; q < b * b; ++q) order[static_cast<size_t>(k * b * b + q)] = q * k_count + k;
  std::string g = c.Emit("SpaceToDepth", {c.dy[0]}, {c.Tmp("space_to_depth")}, {AttrInt("blocksize", b)});
  c.Emit("Gather", {g, c.ConstInts("crd_order", order)}, {c.dx[0]}, {AttrInt("axis", 1)});
  return Status::OK();
}

// GatherND: ONNX Runtime's GatherNDGrad(shape, indices, dY) scatters dY back (adding at repeated indices).
Status GatherNDGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string s = c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")});
  c.Emit("GatherNDGrad", {s, c.in(1), c.dy[0]}, {c.dx[0]}, CopyAttrs(c.node()), kMs);
  return Status::OK();
}
// ScatterND and ScatterElements (and the older Scatter): with reduction none, data's gradient is dY with the
// scattered positions zeroed (ScatterND / ScatterElements of zeros into dY), with reduction add it is dY; the
// updates' gradient is dY gathered at the indices. Other reductions have no gradient here. (With duplicate
// indices and reduction none, every duplicate update receives the gradient of the position it was written to.)
Status ScatterGrad(GradContext& c) {
  const bool nd = c.node().op_type == "ScatterND";
  const std::string reduction = c.node().GetString("reduction", "none");
  if (reduction != "none" && reduction != "add") {
    return Unimplemented(c.node().Describe(), ": no gradient for reduction \"", reduction, "\"");
  }
  std::vector<onnx::AttributeProto> axis;
  if (!nd) axis.push_back(AttrInt("axis", c.node().GetInt("axis", 0)));
  if (c.wants(0)) {
    if (reduction == "add") {
      c.Emit("Identity", {c.dy[0]}, {c.dx[0]});
    } else {
      std::string zero = c.ConstFloat("zero", 0.0f, c.in(2));
      std::string shape = c.Emit("Shape", {c.in(2)}, {c.Tmp("updates_shape")});
      std::string zeros = c.Emit("Expand", {zero, shape}, {c.Tmp("zeros")});
      c.Emit(nd ? "ScatterND" : "ScatterElements", {c.dy[0], c.in(1), zeros}, {c.dx[0]}, axis);
    }
  }
  if (c.wants(2)) c.Emit(nd ? "GatherND" : "GatherElements", {c.dy[0], c.in(1)}, {c.dx[2]}, axis);
  return Status::OK();
}
// TopK: the values' gradient goes back to where they were taken from (ONNX Runtime's GatherElementsGrad with
// the output indices).
Status TopKGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::string s = c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")});
  c.Emit("GatherElementsGrad", {c.dy[0], s, c.out(1)}, {c.dx[0]}, {AttrInt("axis", c.node().GetInt("axis", -1))}, kMs);
  return Status::OK();
}
// Resize (X, roi, scales, sizes; gradient graphs start at opset 13): ONNX Runtime's com.microsoft
// ResizeGrad(dY, X, roi, scales) with the node's attributes. Without scales (sizes given), ResizeGrad takes
// the scales from dY's shape.
Status ResizeGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  std::vector<std::string> ins = {c.dy[0], c.in(0), c.has_input(1) ? c.in(1) : "", c.has_input(2) ? c.in(2) : ""};
  while (!ins.empty() && ins.back().empty()) ins.pop_back();
  c.Emit("ResizeGrad", ins, {c.dx[0]}, CopyAttrs(c.node()), kMs);
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
// Whether FoldedPadGrad applies: static input shape, pads from an initializer, none negative.
bool Foldable(GradContext& c) {
  const ValueInfo* x = c.Type(c.in(0));
  const Tensor* pads = c.Initializer(c.in(1));
  if (!Static(x) || pads == nullptr || pads->dtype() != DType::kInt64) return false;
  for (int64_t i = 0; i < pads->NumElements(); ++i) if (pads->data<int64_t>()[i] < 0) return false;
  return true;
}
// Pad in reflect or edge mode, with pads from an initializer and a static input shape. Both modes pad one
// axis after another, so the gradient undoes the axes in reverse order. Along an axis of length L padded by
// (b, e): dX = dY[b : b+L] plus the pads folded back. Reflect sends dY[i] (i < b) to x[b-i] and dY[b+L+i] to
// x[L-2-i], i.e. each pad reversed and shifted by one; edge sends the whole begin pad to x[0] and the end pad
// to x[L-1].
Status FoldedPadGrad(GradContext& c, const std::string& mode) {
  const ValueInfo* x = c.Type(c.in(0));
  const Tensor* pads_t = c.Initializer(c.in(1));
  std::vector<int64_t> xd = DimsOf(x);
  const int64_t rank = static_cast<int64_t>(xd.size());
  if (pads_t->dtype() != DType::kInt64 || pads_t->NumElements() != 2 * rank) {
    return InvalidArgument("Pad pads '", c.in(1), "' must be ", 2 * rank, " int64 values");
  }
  const int64_t* pads = pads_t->data<int64_t>();
  const bool reflect = mode == "reflect";
  std::string g = c.dy[0];
  for (int64_t d = rank - 1; d >= 0; --d) {
    const int64_t b = pads[d], e = pads[rank + d], len = xd[d];
    if (b < 0 || e < 0) return Unimplemented("Pad gradient in ", mode, " mode with negative pads");
    if (reflect ? (b >= len || e >= len) : len == 0) {
      return InvalidArgument("Pad in ", mode, " mode: pads (", b, ", ", e, ") do not fit axis ", d, " of length ", len);
    }
    if (b == 0 && e == 0) continue;
    const std::string src = g;
    auto slice = [&](int64_t start, int64_t end, int64_t step) {
      return c.Emit("Slice", {src, c.ConstInts("starts", {start}), c.ConstInts("ends", {end}), c.ConstInts("axis", {d}),
                              c.ConstInts("steps", {step})}, {c.Tmp("pad_slice")});
    };
    auto place = [&](const std::string& v, int64_t before, int64_t after) {  // zero-pad v to length L along d
      std::vector<int64_t> p(static_cast<size_t>(2 * rank), 0);
      p[d] = before;
      p[rank + d] = after;
      return c.Emit("Pad", {v, c.ConstInts("place", p)}, {c.Tmp("placed")});
    };
    auto total = [&](const std::string& v) {  // sum along d, keeping the axis
      if (c.opset() >= 13) return c.Emit("ReduceSum", {v, c.ConstInts("axis", {d})}, {c.Tmp("pad_sum")}, {AttrInt("keepdims", 1)});
      return c.Emit("ReduceSum", {v}, {c.Tmp("pad_sum")}, {AttrInts("axes", {d}), AttrInt("keepdims", 1)});
    };
    std::vector<std::string> parts = {slice(b, b + len, 1)};
    if (b > 0) {
      parts.push_back(reflect ? place(slice(b - 1, std::numeric_limits<int64_t>::min(), -1), 1, len - 1 - b)
                              : place(total(slice(0, b, 1)), 0, len - 1));
    }
    if (e > 0) {
      parts.push_back(reflect ? place(slice(b + len + e - 1, b + len - 1, -1), len - 1 - e, 1)
                              : place(total(slice(b + len, b + len + e, 1)), len - 1, 0));
    }
    g = c.Emit("Sum", parts, {c.Tmp("folded")});
  }
  c.Emit("Identity", {g}, {c.dx[0]});
  return Status::OK();
}
// Pad in reflect or edge mode with pads or shapes known only at run time. Each mode is a gather along one
// axis after another: output position j of an axis of length n padded by (b, e) reads input
//   edge:    clamp(j - b, 0, n - 1)
//   reflect: (n - 1) - |(n - 1) - |j - b||
//   wrap:    (j - b) mod n
// so the gradient is GatherGrad along the axes in reverse order, each into the shape the forward gather
// read (output dims before the axis, input dims from it on).
Status GatheredPadGrad(GradContext& c, const std::string& mode, int64_t rank, const std::string& pads) {
  auto scalar = [&](const std::string& hint, int64_t v) { return c.Const(hint, Tensor::FromVector<int64_t>({v}, {})); };
  const std::string zero = scalar("zero", 0), one = scalar("one", 1);
  const std::string xs = c.Emit("Shape", {c.in(0)}, {c.Tmp("x_shape")});
  const std::string ys = c.Emit("Shape", {c.out(0)}, {c.Tmp("y_shape")});
  std::vector<std::string> index(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) {
    std::string n = c.Emit("Gather", {xs, scalar("axis", d)}, {c.Tmp("n")});
    std::string b = c.Emit("Gather", {pads, scalar("begin_at", d)}, {c.Tmp("begin")});
    std::string e = c.Emit("Gather", {pads, scalar("end_at", rank + d)}, {c.Tmp("end")});
    std::string len = c.Emit("Add", {c.Emit("Add", {n, b}, {c.Tmp("n_b")}), e}, {c.Tmp("len")});
    std::string k = c.Emit("Sub", {c.Emit("Range", {zero, len, one}, {c.Tmp("j")}), b}, {c.Tmp("k")});
    std::string last = c.Emit("Sub", {n, one}, {c.Tmp("last")});
    if (mode == "edge") {
      index[d] = c.Emit("Max", {c.Emit("Min", {k, last}, {c.Tmp("k_hi")}), zero}, {c.Tmp("index")});
    } else if (mode == "wrap") {  // (j - b) mod n, taking the divisor's sign
      index[d] = c.Emit("Mod", {k, n}, {c.Tmp("index")});
    } else {
      std::string folded = c.Emit("Abs", {c.Emit("Sub", {last, c.Emit("Abs", {k}, {c.Tmp("abs_k")})}, {c.Tmp("from_end")})},
                                  {c.Tmp("abs_from_end")});
      index[d] = c.Emit("Sub", {last, folded}, {c.Tmp("index")});
    }
  }
  std::string g = c.dy[0];
  for (int64_t d = rank - 1; d >= 0; --d) {
    std::string shape = xs;
    if (d > 0) {
      std::string head = c.Emit("Slice", {ys, c.ConstInts("zero", {0}), c.ConstInts("d", {d})}, {c.Tmp("out_dims")});
      std::string tail = c.Emit("Slice", {xs, c.ConstInts("d", {d}), c.ConstInts("rank", {rank})}, {c.Tmp("in_dims")});
      shape = c.Emit("Concat", {head, tail}, {c.Tmp("gathered_shape")}, {AttrInt("axis", 0)});
    }
    g = c.Emit("GatherGrad", {shape, index[d], g}, {d == 0 ? c.dx[0] : c.Tmp("unpadded")}, {AttrInt("axis", d)}, kMs);
  }
  return Status::OK();
}
// Pad: reflect and edge as above; constant mode (pads known at run time, negative ones cropping) is dY
// with the padding sliced off.
Status PadGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  if (c.opset() < 11) return Unimplemented("Pad gradient before opset 11");
  const std::string mode = c.node().GetString("mode", "constant");
  const ValueInfo* x = c.Type(c.in(0));
  if (!x || !x->has_shape) return InvalidArgument("Pad gradient needs the input's rank");
  int64_t rank = static_cast<int64_t>(x->dims.size());
  std::string pads = c.in(1);
  if (c.has_input(3)) {
    // axes (opset 18): pads[2 * len(axes)] of the named axes -> pads[2 * rank] of all, zeros elsewhere:
    // ScatterElements of the pads into zeros at axes (made non-negative) and axes + rank.
    std::string r = c.Const("rank", Tensor::FromVector<int64_t>({rank}, {1}));
    std::string axes = c.Emit("Cast", {c.in(3)}, {c.Tmp("axes64")}, {AttrInt("to", static_cast<int64_t>(onnx::TensorProto::INT64))});
    axes = c.Emit("Mod", {c.Emit("Add", {axes, r}, {c.Tmp("axes_r")}), r}, {c.Tmp("axes")});
    std::string at = c.Emit("Concat", {axes, c.Emit("Add", {axes, r}, {c.Tmp("end_at")})}, {c.Tmp("pad_at")},
                            {AttrInt("axis", 0)});
    pads = c.Emit("ScatterElements", {c.ConstInts("zero_pads", std::vector<int64_t>(2 * rank, 0)), at, c.in(1)},
                  {c.Tmp("pads")}, {AttrInt("axis", 0)});
  }
  if (mode == "wrap") return GatheredPadGrad(c, mode, rank, pads);
  if (mode == "reflect" || mode == "edge") {
    return !c.has_input(3) && Foldable(c) ? FoldedPadGrad(c, mode) : GatheredPadGrad(c, mode, rank, pads);
  }
  if (mode != "constant") return Unimplemented("Pad gradient in ", mode, " mode");
  std::string shape = c.Emit("Shape", {c.in(0)}, {c.Tmp("shape")});
  // dX = dY without its padding: the slice starts after the begin pads (at 0 where a negative pad cropped).
  std::string begin = c.Emit("Slice", {pads, c.ConstInts("zero", {0}), c.ConstInts("rank", {rank})}, {c.Tmp("begin")});
  std::string zeros = c.ConstInts("zeros", std::vector<int64_t>(rank, 0));
  std::string starts = c.Emit("Max", {begin, zeros}, {c.Tmp("starts")});
  // The input rows the forward pass kept: negative pads cropped some at either end; those get zero gradient.
  std::string neg = c.Emit("Min", {begin, zeros}, {c.Tmp("neg_begin")});
  std::string end_pads = c.Emit("Slice", {pads, c.ConstInts("rank2", {rank}), c.ConstInts("twice", {2 * rank})},
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
// Tile: dY viewed as [r0, d0, r1, d1, ...] and summed over the repeat axes (that shape from constants when
// the shapes are static, else computed at run time; only the rank has to be known).
Status TileGrad(GradContext& c) {
  if (!c.wants(0)) return Status::OK();
  const ValueInfo* x = c.Type(c.in(0));
  const ValueInfo* y = c.Type(c.out(0));
  if (x == nullptr || !x->has_shape) return Unimplemented("Tile gradient needs the input's rank");
  std::vector<int64_t> axes;
  for (size_t d = 0; d < x->dims.size(); ++d) axes.push_back(static_cast<int64_t>(2 * d));
  std::string split;
  if (Static(x) && Static(y)) {
    std::vector<int64_t> xd = DimsOf(x), yd = DimsOf(y), dims;
    for (size_t d = 0; d < xd.size(); ++d) {
      dims.push_back(xd[d] ? yd[d] / xd[d] : 0);
      dims.push_back(xd[d]);
    }
    split = c.ConstInts("split_shape", dims);
  } else {  // shapes known only at run time: [r0, n0, r1, n1, ...] from the repeats and Shape(X)
    std::string one = c.ConstInts("axis1", {1});
    std::string reps = c.Emit("Unsqueeze", {c.in(1), one}, {c.Tmp("repeats_col")});
    std::string dims = c.Emit("Unsqueeze", {c.Emit("Shape", {c.in(0)}, {c.Tmp("x_shape")}), one}, {c.Tmp("dims_col")});
    std::string pairs = c.Emit("Concat", {reps, dims}, {c.Tmp("pairs")}, {AttrInt("axis", 1)});
    split = c.Emit("Reshape", {pairs, c.ConstInts("flat", {-1})}, {c.Tmp("split_shape")});
  }
  std::string r = c.Emit("Reshape", {c.dy[0], split}, {c.Tmp("split")});
  c.Emit("ReduceSum", {r, c.ConstInts("axes", axes)}, {c.dx[0]}, {AttrInt("keepdims", 0)});
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

}  // namespace grad
}  // namespace ontrain
