// The kernel fusions around normalization and clipping (kernel_fusion.h lists them all): Clip's gradient as
// autodiff writes it -> ai.ontrain ClipGrad, and BatchNormInternal with its Relu or Clip and their
// gradients -> ai.ontrain BatchNormActivation and BatchNormActivationGrad. Part of the Fuser
// (kernel_fusion_internal.h), whose scans in kernel_fusion.cc call these.
#include <string>
#include <vector>

#include "engine/kernel_fusion_internal.h"
#include "graph/builder.h"

namespace ontrain {
namespace fusion {

// A scalar (rank 0) initializer that no feed can replace, or nullptr.
const Tensor* Fuser::ScalarConstant(const std::string& v) const {
  auto it = g_.initializers.find(v);
  if (it == g_.initializers.end() || !it->second.shape().empty() || g_.FindInput(v) != nullptr) return nullptr;
  return &it->second;
}

// Where(M, dY, fill) with M = And(GreaterOrEqual(X, min), LessOrEqual(X, max)) (either order) or one of the
// comparisons alone, as autodiff writes Clip's gradient: each mask read by nothing else, min, max and fill
// scalar constants (so they change no shape), X and dY of one dtype: ai.ontrain ClipGrad(dY, X, min, max,
// fill).
bool Fuser::FuseClipGrad(size_t where) {
  Node& w = g_.nodes[where];
  if (w.inputs.size() != 3 || w.outputs.size() != 1 || w.outputs[0].empty()) return false;
  auto single = [&](const std::string& v) { const std::vector<Use>* r = Readers(v); return r && r->size() == 1; };
  // The comparison producing `v` (read only by `reader`): its X, and its bound into *lo or *hi.
  std::string x, lo, hi;
  std::vector<size_t> parts;
  auto comparison = [&](const std::string& v) {
    const int c = ProducerOf(v);
    if (c < 0 || removed_.count(c) || !single(v) || Provider(c) != Provider(where)) return false;
    const Node& n = g_.nodes[c];
    const bool ge = Is(c, "", "GreaterOrEqual"), le = Is(c, "", "LessOrEqual");
    if ((!ge && !le) || n.inputs.size() != 2 || n.outputs.size() != 1) return false;
    if (!x.empty() && n.inputs[0] != x) return false;
    std::string& bound = ge ? lo : hi;
    if (!bound.empty() || ScalarConstant(n.inputs[1]) == nullptr) return false;
    x = n.inputs[0];
    bound = n.inputs[1];
    parts.push_back(static_cast<size_t>(c));
    return true;
  };
  const int m = ProducerOf(w.inputs[0]);
  if (m < 0) return false;
  if (Is(m, "", "And")) {
    const Node& a = g_.nodes[m];
    if (a.inputs.size() != 2 || !single(w.inputs[0]) || Provider(m) != Provider(where) ||
        !comparison(a.inputs[0]) || !comparison(a.inputs[1])) {
      return false;
    }
    parts.push_back(static_cast<size_t>(m));
  } else if (!comparison(w.inputs[0])) {
    return false;
  }
  const std::string& dy = w.inputs[1];
  if (ScalarConstant(w.inputs[2]) == nullptr || TypeOf(x) != TypeOf(dy) || x.empty()) return false;
  if (!Runs(Provider(where), kOntrain, "ClipGrad", TypeOf(dy))) return false;
  w.op_type = "ClipGrad";
  w.domain = kOntrain;
  const std::vector<std::string> inputs = {dy, x, lo, hi, w.inputs[2]};
  w.inputs.clear();
  for (size_t k = 0; k < inputs.size(); ++k) Rewire(where, k, inputs[k]);  // uses_ follows (the BN fusion reads it)
  for (size_t p : parts) removed_.insert(p);
  Import(kOntrain);
  return true;
}

// BatchNormInternal(X, scale, B, ...) -> (Y, running stats, saved mean, saved inv_std); A = Relu(Y) or
// Clip(Y, min, max) -> Z; its gradient G = ReluGrad(dZ, Y or Z) or ai.ontrain ClipGrad(dZ, Y, min, max,
// fill) -> dY; BatchNormalizationGrad(dY, X, scale, saved mean, saved inv_std). Y read by A and G alone, dY
// by the BatchNormalizationGrad alone, the bounds and fill scalar float constants, Clip's bounds the ones
// ClipGrad tests: ai.ontrain BatchNormActivation -> (Z, stats, affine) and BatchNormActivationGrad(dZ, X,
// scale, saved mean, saved inv_std, affine). (ReluGrad may test Z for Y: Z > 0 exactly where Y > 0.)
bool Fuser::FuseBatchNormActivation(size_t bn) {
  const Node& b = g_.nodes[bn];
  if (b.inputs.size() < 5 || b.outputs.size() < 5 || b.outputs[0].empty() || b.outputs[3].empty() ||
      b.outputs[4].empty() || TypeOf(b.inputs[0]) != DType::kFloat32) {
    return false;
  }
  int act = -1, grad = -1;
  if (!FindActivationPair(b, &act, &grad)) return false;
  const Node &a = g_.nodes[act], &gr = g_.nodes[grad];
  const bool relu = a.op_type == "Relu";
  std::vector<onnx::AttributeProto> attrs = {AttrString("activation", relu ? "Relu" : "Clip")};
  if (!relu && !ClipBounds(a, gr, &attrs)) return false;
  const std::vector<Use>* dy_readers = Readers(gr.outputs[0]);
  if (dy_readers == nullptr || dy_readers->size() != 1 || dy_readers->front().input != 0) return false;
  const size_t bg = dy_readers->front().node;
  if (!Is(bg, kMs, "BatchNormalizationGrad")) return false;
  const Node& d = g_.nodes[bg];
  if (d.inputs.size() != 5 || d.inputs[1] != b.inputs[0] || d.inputs[2] != b.inputs[1] || d.inputs[3] != b.outputs[3] ||
      d.inputs[4] != b.outputs[4]) {
    return false;
  }
  const int p = Provider(bn);
  if (Provider(act) != p || Provider(grad) != p || Provider(bg) != p ||
      !Runs(p, kOntrain, "BatchNormActivation", DType::kFloat32) ||
      !Runs(p, kOntrain, "BatchNormActivationGrad", DType::kFloat32)) {
    return false;
  }
  RewriteBatchNormActivation(bn, static_cast<size_t>(act), static_cast<size_t>(grad), bg, attrs);
  return true;
}

// The activation A that reads the BatchNormalization b's Y (a Relu or Clip) and its gradient G (a ReluGrad
// or ClipGrad reading Y, or a ReluGrad reading A's Z): false unless Y has no other readers and both exist,
// of the same kind.
bool Fuser::FindActivationPair(const Node& b, int* act, int* grad) {
  const std::vector<Use>* readers = Readers(b.outputs[0]);
  if (readers == nullptr || readers->size() > 2) return false;
  const std::vector<Use> y_readers = *readers;
  for (const Use& u : y_readers) {
    if (u.input == 0 && *act < 0 && (Is(u.node, "", "Relu") || Is(u.node, "", "Clip"))) *act = static_cast<int>(u.node);
    else if (u.input == 1 && *grad < 0 && (Is(u.node, kMs, "ReluGrad") || Is(u.node, kOntrain, "ClipGrad"))) *grad = static_cast<int>(u.node);
    else return false;
  }
  if (*act < 0) return false;
  const Node& a = g_.nodes[*act];
  const bool relu = a.op_type == "Relu";
  if (a.outputs.size() != 1 || a.outputs[0].empty()) return false;
  if (*grad < 0 && relu) {  // a ReluGrad that tests Z
    const std::vector<Use>* z_readers = Readers(a.outputs[0]);
    if (z_readers == nullptr) return false;
    for (const Use& u : *z_readers) {
      if (u.input == 1 && Is(u.node, kMs, "ReluGrad")) {
        if (*grad >= 0) return false;
        *grad = static_cast<int>(u.node);
      }
    }
  }
  if (*grad < 0) return false;
  const Node& gr = g_.nodes[*grad];
  return relu == (gr.op_type == "ReluGrad") && gr.outputs.size() == 1 && !gr.outputs[0].empty() && !gr.inputs[0].empty();
}

// Clip's bounds, the ones its ClipGrad tests, and ClipGrad's fill, all scalar float constants, as
// attributes min, max and fill; false where they are not.
bool Fuser::ClipBounds(const Node& a, const Node& gr, std::vector<onnx::AttributeProto>* attrs) {
  if (a.inputs.size() != 3 || gr.inputs.size() != 5 || a.inputs[1] != gr.inputs[2] || a.inputs[2] != gr.inputs[3]) {
    return false;
  }
  const Tensor *lo = ScalarConstant(a.inputs[1]), *hi = ScalarConstant(a.inputs[2]), *fill = ScalarConstant(gr.inputs[4]);
  for (const Tensor* t : {lo, hi, fill}) {
    if (t == nullptr || t->dtype() != DType::kFloat32) return false;
  }
  attrs->push_back(AttrFloat("min", lo->data<float>()[0]));
  attrs->push_back(AttrFloat("max", hi->data<float>()[0]));
  attrs->push_back(AttrFloat("fill", fill->data<float>()[0]));
  return true;
}

// The rewrite FuseBatchNormActivation matched: bn becomes BatchNormActivation -> (Z, stats, affine), bg
// BatchNormActivationGrad(dZ, ..., affine); the activation and its gradient go.
void Fuser::RewriteBatchNormActivation(size_t bn, size_t act, size_t grad, size_t bg,
                                       const std::vector<onnx::AttributeProto>& attrs) {
  Node &b = g_.nodes[bn], &d = g_.nodes[bg];
  std::string affine = b.outputs[0] + "/affine";  // a new value: a name nothing else has
  while (producer_.count(affine) || uses_.count(affine) || g_.initializers.count(affine) || g_.FindInput(affine)) {
    affine += "_";
  }
  const std::string dz = g_.nodes[grad].inputs[0], z = g_.nodes[act].outputs[0];
  b.op_type = "BatchNormActivation";
  b.domain = kOntrain;
  for (size_t k = 0; k < attrs.size(); ++k) {
    if (attrs[k].name() != "fill") b.attributes[attrs[k].name()] = attrs[k];
  }
  b.outputs.resize(5);
  b.outputs[0] = z;
  b.outputs.push_back(affine);
  producer_[z] = producer_[affine] = bn;
  d.op_type = "BatchNormActivationGrad";
  d.domain = kOntrain;
  d.attributes.clear();
  for (const onnx::AttributeProto& at : attrs) d.attributes[at.name()] = at;
  Rewire(bg, 0, dz);
  Rewire(bg, 5, affine);
  removed_.insert({act, grad});
  Import(kOntrain);
}

}  // namespace fusion
}  // namespace ontrain
