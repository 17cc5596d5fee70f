// The fusions of kernel_fusion.h: one scan for each pattern over the partitioned graph, then the fused
// pairs' second nodes removed (the Fuser: kernel_fusion_internal.h). Here the scans, the helpers, and the
// convolution, pooling, GELU and linear-layer fusions; Clip's gradient and batch normalization with its
// activation in kernel_fusion_norm.cc.
#include "engine/kernel_fusion.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "engine/kernel_fusion_internal.h"
#include "graph/builder.h"

namespace ontrain {
namespace fusion {

Fuser::Fuser(Model* model, const GraphPartition& partition, const std::vector<IExecutionProvider*>& providers)
    : m_(*model), g_(model->graph), part_(partition), providers_(providers) {
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    const Node& n = g_.nodes[i];
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (!n.inputs[k].empty()) uses_[n.inputs[k]].push_back({i, k});
    }
  }
  for (const ValueInfo& o : g_.outputs) outputs_.insert(o.name);
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    for (const std::string& o : g_.nodes[i].outputs) {
      if (!o.empty()) producer_[o] = i;
    }
  }
}

KernelFusionCounts Fuser::Run() {
  KernelFusionCounts counts;
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, "", "Conv") && FuseActivation(i, "FusedConv")) ++counts.conv_relu;
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, "", "Gemm") && FuseActivation(i, "FusedGemm")) ++counts.gemm_relu;
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, "", "MaxPoolGrad") && FuseMaxPoolReluGrad(i)) ++counts.maxpool_relu_grad;
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, "", "Where") && FuseClipGrad(i)) ++counts.clip_grad;
  }
  // After ClipGrad's rule: a Where it would take is no attention mask.
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, "", "Softmax") && FuseSoftmaxPrologue(i)) ++counts.softmax_prologue;
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, kMs, "SoftmaxGrad_13") && FuseSoftmaxGradEpilogue(i)) ++counts.softmax_grad_epilogue;
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, kMs, "ConvGrad") && FuseMaxPoolReluConvGrad(i)) ++counts.max_pool_relu_conv_grad;
  }
  // After ClipGrad's rule, whose fused node it reads.
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, kMs, "BatchNormInternal") && FuseBatchNormActivation(i)) ++counts.batch_norm_act;
  }
  // After MaxPoolReluGrad's rule, which finds the MaxPool by its op type.
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, kMs, "FusedConv") && FuseConvMaxPool(i)) ++counts.conv_max_pool;
  }
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if ((Is(i, kMs, "Gelu") || Is(i, "", "Gelu")) && FuseGeluSlope(i)) ++counts.gelu_slope;
  }
  if (m_.OpsetFor("") >= 7) {  // Add broadcasts as NumPy does
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (Is(i, kMs, "FusedMatMul") && FuseMatMulBias(i)) ++counts.matmul_bias;
    }
  }
  // After the pooling rules, whose fused nodes it marks.
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (Is(i, kOntrain, "FusedConvMaxPool") && CompactPoolIndices(i)) ++counts.compact_pool_indices;
  }
  std::vector<Node> kept;
  kept.reserve(g_.nodes.size() - removed_.size());
  for (size_t i = 0; i < g_.nodes.size(); ++i) {
    if (!removed_.count(i)) kept.push_back(std::move(g_.nodes[i]));
  }
  g_.nodes = std::move(kept);
  return counts;
}

bool Fuser::Is(size_t i, const char* domain, const char* op) const {
  const Node& n = g_.nodes[i];
  return !removed_.count(i) && n.op_type == op && NormalizeDomain(n.domain) == domain;
}

int Fuser::Provider(size_t i) const {
  return part_.nodes[i].provider;
}

DType Fuser::TypeOf(const std::string& v) const {
  auto it = part_.dtypes.find(v);
  return it == part_.dtypes.end() ? DType::kUndefined : it->second;
}

// Whether provider p has a kernel for (domain, op) at opset 1 whose type input has dtype t.
bool Fuser::Runs(int p, const char* domain, const char* op, DType t) const {
  if (p < 0 || p >= static_cast<int>(providers_.size()) || t == DType::kUndefined) return false;
  return providers_[p]->kernel_registry().Find(domain, op, 1, {t, t, t}).ok();
}

// The readers of `v` that are still in the graph (uses_ follows every rewiring), or nullptr when it is a
// graph output or has none.
const std::vector<Use>* Fuser::Readers(const std::string& v) {
  if (v.empty() || outputs_.count(v)) return nullptr;
  auto it = uses_.find(v);
  if (it == uses_.end()) return nullptr;
  live_.clear();
  for (const Use& u : it->second) {
    if (!removed_.count(u.node) && g_.nodes[u.node].inputs[u.input] == v) live_.push_back(u);
  }
  return live_.empty() ? nullptr : &live_;
}

// Points input k of node i at `v`, keeping uses_ current.
void Fuser::Rewire(size_t i, size_t k, const std::string& v) {
  Node& n = g_.nodes[i];
  if (k == n.inputs.size()) n.inputs.push_back(v);
  else n.inputs[k] = v;
  if (!v.empty()) uses_[v].push_back({i, k});
}

void Fuser::Import(const char* domain) {
  if (m_.OpsetFor(domain) < 1) m_.opset_imports[domain] = 1;
}

// Conv (or Gemm) -> C -> Relu -> Y, C read otherwise only as ReluGrad's X: FusedConv (FusedGemm) -> Y, those
// ReluGrads read Y.
bool Fuser::FuseActivation(size_t conv, const char* fused) {
  Node& c = g_.nodes[conv];
  if (c.outputs.size() != 1) return false;
  const std::vector<Use>* readers = Readers(c.outputs[0]);
  if (readers == nullptr) return false;
  int relu = -1;
  std::vector<size_t> grads;
  for (const Use& u : *readers) {
    if (Is(u.node, "", "Relu") && u.input == 0 && relu < 0) {
      relu = static_cast<int>(u.node);
    } else if (Is(u.node, kMs, "ReluGrad") && u.input == 1 && g_.nodes[u.node].inputs[0] != c.outputs[0]) {
      grads.push_back(u.node);
    } else {
      return false;
    }
  }
  if (relu < 0 || Provider(relu) != Provider(conv)) return false;
  if (!Runs(Provider(conv), kMs, fused, TypeOf(c.inputs[0]))) return false;
  const std::string y = g_.nodes[relu].outputs[0];
  c.op_type = fused;
  c.domain = kMs;
  c.attributes["activation"] = AttrString("activation", "Relu");
  c.outputs[0] = y;
  producer_[y] = conv;
  for (size_t r : grads) Rewire(r, 1, y);
  removed_.insert(static_cast<size_t>(relu));
  Import(kMs);
  return true;
}

// The node producing `v` (kept current as fusions move outputs), or -1.
int Fuser::ProducerOf(const std::string& v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? -1 : static_cast<int>(it->second);
}

// MaxPool(P) -> (Z, I); MaxPoolGrad(dZ, I) -> G -> ReluGrad(G, X) -> D, G read by nothing else, X either P
// or the input of the Relu that made P: MaxPoolReluGrad(dZ, I, Z) -> D (the kernel's comment says why
// testing Z where it tests X gives the same result).
bool Fuser::FuseMaxPoolReluGrad(size_t grad) {
  Node& p = g_.nodes[grad];
  if (p.inputs.size() != 2 || p.outputs.size() != 1) return false;
  const std::vector<Use>* readers = Readers(p.outputs[0]);
  if (readers == nullptr || readers->size() != 1) return false;
  const Use u = readers->front();
  if (!Is(u.node, kMs, "ReluGrad") || u.input != 0 || Provider(u.node) != Provider(grad)) return false;
  const Node& r = g_.nodes[u.node];
  if (r.inputs.size() != 2 || r.outputs.size() != 1 || r.inputs[1].empty() || r.outputs[0].empty()) return false;
  const int pool = ProducerOf(p.inputs[1]);
  if (pool < 0) return false;
  const Node& mp = g_.nodes[pool];
  if (mp.op_type != "MaxPool" || NormalizeDomain(mp.domain) != "" || mp.outputs.size() != 2 ||
      mp.outputs[1] != p.inputs[1] || mp.outputs[0].empty() || mp.GetInt("storage_order", 0) != 0) {
    return false;
  }
  const std::string& pooled = mp.inputs[0];
  const int relu = ProducerOf(pooled);
  const bool masks_pooled = r.inputs[1] == pooled;
  const bool masks_relu_input = relu >= 0 && g_.nodes[relu].op_type == "Relu" &&
                                NormalizeDomain(g_.nodes[relu].domain).empty() &&
                                g_.nodes[relu].inputs[0] == r.inputs[1];
  if (!masks_pooled && !masks_relu_input) return false;
  if (!Runs(Provider(grad), kOntrain, "MaxPoolReluGrad", TypeOf(p.inputs[0]))) return false;
  // The kernel sizes dX from its output's declared shape (the pooled input's), as MaxPoolGrad does.
  const std::string d = r.outputs[0];
  auto declared = [&](const std::string& name) -> const ValueInfo* {
    for (const ValueInfo& v : g_.value_infos) if (v.name == name) return &v;
    for (const ValueInfo& v : g_.outputs) if (v.name == name) return &v;
    return nullptr;
  };
  const ValueInfo* dv = declared(d);
  if (dv == nullptr || !dv->has_shape) {
    const ValueInfo* gv = declared(p.outputs[0]);
    if (gv == nullptr || !gv->has_shape) return false;
    ValueInfo copy = *gv;
    copy.name = d;
    if (dv == nullptr) {
      g_.value_infos.push_back(std::move(copy));
    } else {
      for (ValueInfo& v : g_.value_infos) if (v.name == d) v = copy;
      for (ValueInfo& v : g_.outputs) if (v.name == d) v = copy;
    }
  }
  p.op_type = "MaxPoolReluGrad";
  p.domain = kOntrain;
  Rewire(grad, p.inputs.size(), mp.outputs[0]);
  p.outputs[0] = d;
  producer_[d] = grad;
  removed_.insert(u.node);
  Import(kOntrain);
  return true;
}

// ConvGrad(D, X, W) -> (none, dW, dB?) with D = ai.ontrain MaxPoolReluGrad(dZ, I, Z) read by nothing else:
// ai.ontrain MaxPoolReluConvGrad(dZ, I, Z, X, W), which makes D image by image in cache (where its weight
// gradient takes it so) instead of writing it whole. Only where dX is not wanted (a network's first layer):
// dX would need D whole again.
bool Fuser::FuseMaxPoolReluConvGrad(size_t grad) {
  Node& g = g_.nodes[grad];
  if (g.inputs.size() != 3 || (!g.outputs.empty() && !g.outputs[0].empty())) return false;
  const std::vector<Use>* readers = Readers(g.inputs[0]);
  if (readers == nullptr || readers->size() != 1) return false;
  const int p = ProducerOf(g.inputs[0]);
  if (p < 0 || !Is(p, kOntrain, "MaxPoolReluGrad") || Provider(p) != Provider(grad)) return false;
  const Node& mp = g_.nodes[p];
  if (mp.inputs.size() != 3 || mp.outputs.size() != 1) return false;
  if (!Runs(Provider(grad), kOntrain, "MaxPoolReluConvGrad", TypeOf(g.inputs[1]))) return false;
  const std::vector<std::string> inputs = {mp.inputs[0], mp.inputs[1], mp.inputs[2], g.inputs[1], g.inputs[2]};
  g.op_type = "MaxPoolReluConvGrad";
  g.domain = kOntrain;
  g.inputs.clear();
  for (size_t k = 0; k < inputs.size(); ++k) Rewire(grad, k, inputs[k]);
  removed_.insert(static_cast<size_t>(p));
  Import(kOntrain);
  return true;
}

// FusedConv(activation Relu) -> Y -> MaxPool(Y) -> (Z, I?), Y read by nothing else, the pooling 2x2 windows
// at stride 2 without pads or dilation (floor mode, row-major indices): ai.ontrain FusedConvMaxPool -> (Z, I?).
bool Fuser::FuseConvMaxPool(size_t conv) {
  Node& c = g_.nodes[conv];
  if (c.outputs.size() != 1 || c.inputs.size() > 3 || c.GetString("activation", "") != "Relu") return false;
  const std::vector<Use>* readers = Readers(c.outputs[0]);
  if (readers == nullptr || readers->size() != 1) return false;
  const Use u = readers->front();
  if (!Is(u.node, "", "MaxPool") || u.input != 0 || Provider(u.node) != Provider(conv)) return false;
  const Node& mp = g_.nodes[u.node];
  auto all = [](const std::vector<int64_t>& v, int64_t value, size_t size) {
    if (v.empty()) return true;  // the default
    return v.size() == size && std::all_of(v.begin(), v.end(), [value](int64_t e) { return e == value; });
  };
  const std::string pad = mp.GetString("auto_pad", "NOTSET");
  if (mp.GetInts("kernel_shape") != std::vector<int64_t>{2, 2} || mp.GetInts("strides") != std::vector<int64_t>{2, 2} ||
      !all(mp.GetInts("pads"), 0, 4) || !all(mp.GetInts("dilations"), 1, 2) || mp.GetInt("ceil_mode", 0) != 0 ||
      mp.GetInt("storage_order", 0) != 0 || (pad != "NOTSET" && pad != "VALID") || mp.outputs.empty() ||
      mp.outputs[0].empty()) {
    return false;
  }
  if (!Runs(Provider(conv), kOntrain, "FusedConvMaxPool", TypeOf(c.inputs[0]))) return false;
  c.op_type = "FusedConvMaxPool";
  c.domain = kOntrain;
  c.outputs = mp.outputs;
  for (const std::string& o : c.outputs) {
    if (!o.empty()) producer_[o] = conv;
  }
  removed_.insert(u.node);
  Import(kOntrain);
  return true;
}

// Gelu(X) -> Y (com.microsoft's, or ONNX's without the tanh approximation) and GeluGrad(dY, X) -> dX, X
// float32 and read by nothing else: ai.ontrain GeluAndSlope(X) -> (Y, D) and GeluSlopeGrad(dY, D) -> dX.
// The gradient then multiplies by a derivative the forward pass made from its own exp and erfc, instead of
// computing both again from X (in double, about 1.8 ns per element on a Zen 4 core).
bool Fuser::FuseGeluSlope(size_t gelu) {
  Node& g = g_.nodes[gelu];
  if (g.inputs.size() != 1 || g.outputs.size() != 1 || g.outputs[0].empty() || g.inputs[0].empty()) return false;
  if (NormalizeDomain(g.domain).empty() && g.GetString("approximate", "none") != "none") return false;
  const std::string x = g.inputs[0];
  if (TypeOf(x) != DType::kFloat32) return false;
  const std::vector<Use>* readers = Readers(x);
  if (readers == nullptr) return false;
  std::vector<size_t> grads;
  for (const Use& u : *readers) {
    if (u.node == gelu) continue;
    const Node& r = g_.nodes[u.node];
    if (!Is(u.node, kMs, "GeluGrad") || u.input != 1 || r.inputs.size() != 2 || r.inputs[0] == x ||
        r.outputs.size() != 1 || Provider(u.node) != Provider(gelu)) {
      return false;
    }
    grads.push_back(u.node);
  }
  if (grads.empty()) return false;
  if (!Runs(Provider(gelu), kOntrain, "GeluAndSlope", DType::kFloat32) ||
      !Runs(Provider(gelu), kOntrain, "GeluSlopeGrad", DType::kFloat32)) {
    return false;
  }
  std::string d = x + "/gelu_slope";  // a new value: a name nothing else has
  while (producer_.count(d) || uses_.count(d) || g_.initializers.count(d) || g_.FindInput(d)) d += "_";
  g.op_type = "GeluAndSlope";
  g.domain = kOntrain;
  g.attributes.clear();
  g.outputs.push_back(d);
  producer_[d] = gelu;
  for (size_t r : grads) {
    g_.nodes[r].op_type = "GeluSlopeGrad";
    g_.nodes[r].domain = kOntrain;
    Rewire(r, 1, d);
  }
  Import(kOntrain);
  return true;
}

// The declared dims of graph input or initializer `v`, all known; false otherwise.
bool Fuser::DeclaredDims(const std::string& v, std::vector<int64_t>* dims) const {
  dims->clear();
  if (const ValueInfo* in = g_.FindInput(v)) {
    if (!in->has_shape) return false;
    for (const Dim& d : in->dims) {
      if (!d.known()) return false;
      dims->push_back(d.value);
    }
    return true;
  }
  auto it = g_.initializers.find(v);
  if (it == g_.initializers.end()) return false;
  dims->assign(it->second.shape().begin(), it->second.shape().end());
  return true;
}

// FusedMatMul(A, W) -> T -> Add(T, bias) or Add(bias, T) -> Y, T read otherwise only by Shape nodes, with
// bias declared [N] and W declared 2-D with N columns in op(W): ai.ontrain MatMulBias(A, W, bias) -> Y,
// the bias added while the product's rows are in cache instead of in a pass of its own over T (the
// benchmark GPT's [16, 64, 512] + [512]: 0.23 ms each). The Shape nodes read Y, which has T's shape: a
// bias of [N] adds to every row of the product without broadcasting it further.
bool Fuser::FuseMatMulBias(size_t mm) {
  Node& f = g_.nodes[mm];
  if (f.inputs.size() != 2 || f.outputs.size() != 1 || f.inputs[0].empty() || f.inputs[1].empty() ||
      f.outputs[0].empty() || f.GetInt("transBatchA", 0) != 0 || f.GetInt("transBatchB", 0) != 0) {
    return false;
  }
  const std::vector<Use>* readers = Readers(f.outputs[0]);
  if (readers == nullptr) return false;
  int add = -1;
  size_t add_input = 0;
  std::vector<Use> shapes;
  for (const Use& u : *readers) {
    if (add < 0 && Is(u.node, "", "Add")) {
      add = static_cast<int>(u.node);
      add_input = u.input;
    } else if (Is(u.node, "", "Shape")) {
      shapes.push_back(u);
    } else {
      return false;
    }
  }
  if (add < 0) return false;
  const Node& a = g_.nodes[add];
  if (a.inputs.size() != 2 || a.outputs.size() != 1 || a.outputs[0].empty() || a.inputs[0] == a.inputs[1]) return false;
  const std::string bias = a.inputs[1 - add_input];
  std::vector<int64_t> bd, wd;
  if (!DeclaredDims(bias, &bd) || bd.size() != 1 || !DeclaredDims(f.inputs[1], &wd) || wd.size() != 2) return false;
  if (bd[0] != (f.GetInt("transB", 0) != 0 ? wd[0] : wd[1])) return false;
  const int p = Provider(mm);
  const DType t = TypeOf(f.outputs[0]);
  if (Provider(static_cast<size_t>(add)) != p || TypeOf(bias) != t || !Runs(p, kOntrain, "MatMulBias", t)) return false;
  const std::string y = a.outputs[0];
  f.op_type = "MatMulBias";
  f.domain = kOntrain;
  Rewire(mm, 2, bias);
  f.outputs[0] = y;
  producer_[y] = mm;
  for (const Use& u : shapes) Rewire(u.node, u.input, y);
  removed_.insert(static_cast<size_t>(add));
  Import(kOntrain);
  return true;
}

// FusedConvMaxPool -> (Z, I), I read only as the Indices of MaxPoolReluGrads and MaxPoolReluConvGrads whose
// mask is Z itself, on the same provider: compact_indices = 1 on all of them, so that I is one byte per
// window (its maximum's position and whether that is positive, vrows.h) instead of an int64 offset, and
// the gradients need not read Z.
bool Fuser::CompactPoolIndices(size_t conv) {
  Node& c = g_.nodes[conv];
  if (c.outputs.size() != 2 || c.outputs[0].empty()) return false;
  const std::vector<Use>* readers = Readers(c.outputs[1]);
  if (readers == nullptr) return false;
  const std::vector<Use> uses = *readers;
  for (const Use& u : uses) {
    const Node& r = g_.nodes[u.node];
    const bool grad = Is(u.node, kOntrain, "MaxPoolReluGrad") || Is(u.node, kOntrain, "MaxPoolReluConvGrad");
    if (!grad || u.input != 1 || r.inputs.size() < 3 || r.inputs[2] != c.outputs[0] || Provider(u.node) != Provider(conv)) {
      return false;
    }
  }
  const onnx::AttributeProto compact = AttrInt("compact_indices", 1);
  c.attributes["compact_indices"] = compact;
  for (const Use& u : uses) g_.nodes[u.node].attributes["compact_indices"] = compact;
  return true;
}

}  // namespace fusion

KernelFusionCounts FuseKernels(Model* model, const GraphPartition& partition,
                               const std::vector<IExecutionProvider*>& providers) {
  return fusion::Fuser(model, partition, providers).Run();
}

}  // namespace ontrain
