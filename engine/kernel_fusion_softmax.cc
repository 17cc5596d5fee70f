// The attention softmax's fusions (kernel_fusion.h): the scaling by a single value and the mask before a
// Softmax, and the same ops after its gradient, into ai.ontrain ScaledMaskedSoftmax and
// ScaledMaskedSoftmaxGrad (providers/cpu/kernels/softmax_fused.cc says what they compute).
#include <string>
#include <vector>

#include "engine/kernel_fusion_internal.h"
#include "graph/builder.h"

namespace ontrain {
namespace fusion {

// Whether value `v` is certainly of rank 0: a scalar constant, or made from such values by ops that keep
// rank 0 (the attention's scale, sqrt(head size), is computed from a Gather of a Shape at run time).
bool Fuser::RankZero(const std::string& v, int depth) const {
  if (ScalarConstant(v) != nullptr) return true;
  const int p = ProducerOf(v);
  if (p < 0 || depth > 8) return false;
  const Node& n = g_.nodes[p];
  if (NormalizeDomain(n.domain) != "" || n.outputs.empty() || n.outputs[0] != v) return false;
  const std::string& op = n.op_type;
  if (op == "Gather") {  // Gather(Shape(x), rank-0 index): one dim, rank 0
    const int s = n.inputs.empty() ? -1 : ProducerOf(n.inputs[0]);
    return n.inputs.size() == 2 && s >= 0 && Is(static_cast<size_t>(s), "", "Shape") && RankZero(n.inputs[1], depth + 1);
  }
  const bool unary = op == "Cast" || op == "Sqrt" || op == "Reciprocal" || op == "Neg" || op == "Identity" ||
                     op == "Abs" || op == "Floor" || op == "Ceil" || op == "Exp" || op == "Log";
  const bool binary = op == "Div" || op == "Mul" || op == "Add" || op == "Sub" || op == "Pow";
  if (!(unary && n.inputs.size() == 1) && !(binary && n.inputs.size() == 2)) return false;
  for (const std::string& in : n.inputs) {
    if (!RankZero(in, depth + 1)) return false;
  }
  return true;
}

// Div(X, S) or Mul(X, S) / Mul(S, X) -> `v` with S of rank 0, on provider p: its X and S, and scale_op (1
// Div, 2 Mul); false otherwise. With S of rank 0 the result has X's shape.
bool Fuser::ScaleOf(int node, int p, const std::string& v, std::string* x, std::string* s, int64_t* op) const {
  if (node < 0 || Provider(static_cast<size_t>(node)) != p) return false;
  const Node& n = g_.nodes[node];
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0] != v) return false;
  const bool div = Is(static_cast<size_t>(node), "", "Div"), mul = Is(static_cast<size_t>(node), "", "Mul");
  if (!div && !mul) return false;
  for (int k = 0; k < 2; ++k) {
    if (k == 1 && div) break;  // Div(S, X) is not a scaling of X
    const std::string& a = n.inputs[k];
    const std::string& b = n.inputs[1 - k];
    if (a.empty() || b.empty() || a == b || TypeOf(a) != DType::kFloat32 || TypeOf(b) != DType::kFloat32) continue;
    if (!RankZero(b, 0)) continue;
    *x = a;
    *s = b;
    *op = div ? 1 : 2;
    return true;
  }
  return false;
}

// Where(C, F, V) or Where(C, V, F) -> `w` with F a float scalar constant, on provider p: V, C, F and
// fill_where (1 when F is taken where C is true); false otherwise.
bool Fuser::MaskOf(int node, int p, const std::string& w, std::string* v, std::string* c, std::string* f,
                   bool* fill_where) const {
  if (node < 0 || Provider(static_cast<size_t>(node)) != p || !Is(static_cast<size_t>(node), "", "Where")) return false;
  const Node& n = g_.nodes[node];
  if (n.inputs.size() != 3 || n.outputs.size() != 1 || n.outputs[0] != w || TypeOf(n.inputs[0]) != DType::kBool) {
    return false;
  }
  for (int k = 1; k <= 2; ++k) {
    const std::string& fill = n.inputs[k];
    const std::string& value = n.inputs[3 - k];
    const Tensor* t = ScalarConstant(fill);
    if (t == nullptr || t->dtype() != DType::kFloat32 || value.empty() || value == fill) continue;
    *v = value;
    *c = n.inputs[0];
    *f = fill;
    *fill_where = k == 1;
    return true;
  }
  return false;
}

// Whether `v`'s readers are `reader` (once) and Shape nodes, which are collected into *shapes.
bool Fuser::ReadOnlyBy(const std::string& v, size_t reader, std::vector<Use>* shapes) {
  const std::vector<Use>* readers = Readers(v);
  if (readers == nullptr) return false;
  int seen = 0;
  shapes->clear();
  for (const Use& u : *readers) {
    if (u.node == reader) ++seen;
    else if (Is(u.node, "", "Shape")) shapes->push_back(u);
    else return false;
  }
  return seen == 1;
}

// Node i becomes ai.ontrain `op` with the ops' attributes (its inputs already rewired); the mask and scale
// nodes it absorbed (-1: none) leave the graph.
void Fuser::BecomeFusedSoftmax(size_t i, const char* op, int64_t scale_op, bool fill_where, int mask_node,
                               int scale_node) {
  Node& n = g_.nodes[i];
  n.op_type = op;
  n.domain = kOntrain;
  n.attributes.clear();
  n.attributes["scale_op"] = AttrInt("scale_op", scale_op);
  n.attributes["fill_where"] = AttrInt("fill_where", fill_where ? 1 : 0);
  if (mask_node >= 0) removed_.insert(static_cast<size_t>(mask_node));
  if (scale_node >= 0) removed_.insert(static_cast<size_t>(scale_node));
  Import(kOntrain);
}

// Softmax(V) along the last axis (opset 13's default, or axis -1), V = [Where(C, F, ] Div or Mul(X, S) [)] or
// V = Where(C, F, X), each value between read by nothing else but Shape nodes: ScaledMaskedSoftmax(X, S, C,
// F). Shape nodes of the scaled value read X (S of rank 0 keeps X's shape); of the masked one, the softmax.
bool Fuser::FuseSoftmaxPrologue(size_t sm) {
  Node& n = g_.nodes[sm];
  if (n.inputs.size() != 1 || n.outputs.size() != 1 || n.outputs[0].empty() || n.inputs[0].empty()) return false;
  const int64_t axis = n.GetInt("axis", m_.OpsetFor("") >= 13 ? -1 : 1);
  if (axis != -1 || TypeOf(n.outputs[0]) != DType::kFloat32) return false;
  const int p = Provider(sm);
  if (!Runs(p, kOntrain, "ScaledMaskedSoftmax", DType::kFloat32)) return false;
  std::string v = n.inputs[0], x, s, c, f;
  int64_t scale_op = 0;
  bool fill_where = true;
  std::vector<Use> masked_shapes, scaled_shapes;
  int mask_node = -1, scale_node = -1;
  std::string masked_value;
  if (MaskOf(ProducerOf(v), p, v, &masked_value, &c, &f, &fill_where) &&
      ReadOnlyBy(v, sm, &masked_shapes)) {
    mask_node = ProducerOf(v);
    v = masked_value;
  }
  const size_t scale_reader = mask_node >= 0 ? static_cast<size_t>(mask_node) : sm;
  if (ScaleOf(ProducerOf(v), p, v, &x, &s, &scale_op) && ReadOnlyBy(v, scale_reader, &scaled_shapes)) {
    scale_node = ProducerOf(v);
  } else {
    x = v;
    scale_op = 0;
    s.clear();
    scaled_shapes.clear();
  }
  if (mask_node < 0 && scale_node < 0) return false;
  if (mask_node < 0) masked_shapes.clear();
  const std::string y = n.outputs[0];
  Rewire(sm, 0, x);
  Rewire(sm, 1, s);
  Rewire(sm, 2, c);
  Rewire(sm, 3, f);
  for (const Use& u : scaled_shapes) Rewire(u.node, u.input, x);
  for (const Use& u : masked_shapes) Rewire(u.node, u.input, y);
  BecomeFusedSoftmax(sm, "ScaledMaskedSoftmax", scale_op, fill_where, mask_node, scale_node);
  return true;
}

// SoftmaxGrad_13(dY, Y) along the last axis -> G, then Where(C, F, G) (or Where(C, G, F)) and/or Div or Mul(.,
// S), in that order, each value between read by nothing else but Shape nodes: ScaledMaskedSoftmaxGrad(dY, Y,
// S, C, F) with mask_first (the order a forward scale-then-mask gives its gradient). Shape nodes of G read
// dY; of the masked value, the fused output when a scaling of rank 0 follows it (the same shape).
bool Fuser::FuseSoftmaxGradEpilogue(size_t sg) {
  Node& n = g_.nodes[sg];
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0].empty() || n.inputs[0].empty() ||
      n.inputs[1].empty() || n.GetInt("axis", -1) != -1 || TypeOf(n.outputs[0]) != DType::kFloat32) {
    return false;
  }
  const int p = Provider(sg);
  if (!Runs(p, kOntrain, "ScaledMaskedSoftmaxGrad", DType::kFloat32)) return false;
  const std::string g = n.outputs[0];
  const std::vector<Use>* readers = Readers(g);
  if (readers == nullptr) return false;
  int next = -1;
  for (const Use& u : *readers) {
    if (Is(u.node, "", "Shape")) continue;
    if (next >= 0) return false;
    next = static_cast<int>(u.node);
  }
  if (next < 0) return false;
  std::vector<Use> g_shapes, w_shapes;
  if (!ReadOnlyBy(g, static_cast<size_t>(next), &g_shapes)) return false;
  std::string v, c, f, x, s, out = g;
  bool fill_where = true;
  int64_t scale_op = 0;
  int mask_node = -1, scale_node = -1;
  const std::string next_out = g_.nodes[next].outputs.empty() ? "" : g_.nodes[next].outputs[0];
  if (MaskOf(next, p, next_out, &v, &c, &f, &fill_where) && v == g) {
    mask_node = next;
    out = next_out;
    const std::vector<Use>* after = Readers(out);
    if (after != nullptr) {
      int scale_reader = -1;
      for (const Use& u : *after) {
        if (Is(u.node, "", "Shape")) continue;
        scale_reader = scale_reader < 0 ? static_cast<int>(u.node) : -2;
      }
      const std::string scaled = scale_reader >= 0 && !g_.nodes[scale_reader].outputs.empty()
                                     ? g_.nodes[scale_reader].outputs[0]
                                     : "";
      if (scale_reader >= 0 && ScaleOf(scale_reader, p, scaled, &x, &s, &scale_op) && x == out &&
          ReadOnlyBy(out, static_cast<size_t>(scale_reader), &w_shapes)) {
        scale_node = scale_reader;
        out = scaled;
      }
    }
  } else if (ScaleOf(next, p, next_out, &x, &s, &scale_op) && x == g) {
    scale_node = next;
    out = next_out;
  } else {
    return false;
  }
  if (scale_node < 0) {
    scale_op = 0;
    s.clear();
  }
  const std::string dy = n.inputs[0];
  Rewire(sg, 2, s);
  Rewire(sg, 3, c);
  Rewire(sg, 4, f);
  n.outputs[0] = out;
  producer_[out] = sg;
  for (const Use& u : g_shapes) Rewire(u.node, u.input, dy);
  for (const Use& u : w_shapes) Rewire(u.node, u.input, out);
  BecomeFusedSoftmax(sg, "ScaledMaskedSoftmaxGrad", scale_op, fill_where, mask_node, scale_node);
  g_.nodes[sg].attributes["mask_first"] = AttrInt("mask_first", 1);
  return true;
}

}  // namespace fusion
}  // namespace ontrain
