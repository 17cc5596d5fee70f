// The LayerNorm, GELU and MatMul-Transpose fusions of fusion.h: pattern matchers over the producer/consumer maps of the
// graph, each rewriting one matched sequence into one node put in place of the sequence's last op.
#include "graph/fusion.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "graph/builder.h"
#include "graph/tensor_proto.h"

namespace ontrain {
namespace {

class Matcher {
 public:
  explicit Matcher(Graph* g) : g_(*g) { Index(); }

  const Node& node(size_t i) const { return g_.nodes[i]; }
  size_t size() const { return g_.nodes.size(); }

  // The nodes that read `value`; none when `value` is also a graph output (it must then stay).
  std::vector<size_t> Consumers(const std::string& value) const {
    auto it = consumers_.find(value);
    if (it == consumers_.end() || outputs_.count(value)) return {};
    return it->second;
  }

  // The node that alone reads `value`, if it is the ONNX op `op`.
  std::optional<size_t> OnlyConsumer(const std::string& value, const std::string& op) const {
    std::vector<size_t> c = Consumers(value);
    if (c.size() != 1 || !Is(c[0], op)) return std::nullopt;
    return c[0];
  }

  // The node that writes `value`, if any.
  std::optional<size_t> Producer(const std::string& value) const {
    auto it = producer_.find(value);
    if (it == producer_.end()) return std::nullopt;
    return it->second;
  }

  // Input or output k of node i, or "" when the node has no such one (a malformed node then matches nothing).
  const std::string& in(size_t i, size_t k) const { return k < g_.nodes[i].inputs.size() ? g_.nodes[i].inputs[k] : kNone; }
  const std::string& out(size_t i, size_t k) const { return k < g_.nodes[i].outputs.size() ? g_.nodes[i].outputs[k] : kNone; }
  static inline const std::string kNone;

  bool Is(size_t i, const std::string& op) const { return g_.nodes[i].domain.empty() && g_.nodes[i].op_type == op; }

  // The value of a one-element float constant (an initializer or a Constant node's output); none for none
  // (Other() of a node without exactly two inputs: malformed graphs must not match, nor crash).
  std::optional<double> Scalar(const std::optional<std::string>& value) const {
    return value ? Scalar(*value) : std::nullopt;
  }
  std::optional<double> Scalar(const std::string& value) const {
    Tensor t;
    if (auto it = g_.initializers.find(value); it != g_.initializers.end()) {
      t = it->second;
    } else if (auto p = producer_.find(value); p != producer_.end() && Is(p->second, "Constant")) {
      StatusOr<Tensor> v = ConstantNodeValue(g_.nodes[p->second]);
      if (!v.ok()) return std::nullopt;
      t = std::move(*v);
    } else {
      return std::nullopt;
    }
    if (t.NumElements() != 1) return std::nullopt;
    if (t.dtype() == DType::kFloat32) return t.data<float>()[0];
    if (t.dtype() == DType::kFloat64) return t.data<double>()[0];
    return std::nullopt;
  }

  // Whether a ReduceMean averages exactly the last axis, keeping it.
  bool MeansLastAxis(size_t i) const {
    const Node& n = g_.nodes[i];
    if (!Is(i, "ReduceMean") || n.GetInt("keepdims", 1) != 1) return false;
    std::vector<int64_t> axes = n.GetInts("axes");
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) {  // opset 18: the axes are an input
      auto it = g_.initializers.find(n.inputs[1]);
      if (it == g_.initializers.end() || it->second.dtype() != DType::kInt64) return false;
      axes.assign(it->second.data<int64_t>(), it->second.data<int64_t>() + it->second.NumElements());
    }
    return axes.size() == 1 && axes[0] == -1;
  }

  // The operand of binary node i other than `value` (either position).
  std::optional<std::string> Other(size_t i, const std::string& value) const {
    const Node& n = g_.nodes[i];
    if (n.inputs.size() != 2) return std::nullopt;
    if (n.inputs[0] == value) return n.inputs[1];
    if (n.inputs[1] == value) return n.inputs[0];
    return std::nullopt;
  }

  // Replaces the nodes `gone` by `fused`, which takes the place of the last of them.
  void Replace(std::vector<size_t> gone, Node fused) {
    std::sort(gone.begin(), gone.end());
    g_.nodes[gone.back()] = std::move(fused);
    for (auto it = gone.rbegin() + 1; it != gone.rend(); ++it) g_.nodes.erase(g_.nodes.begin() + static_cast<long>(*it));
    Index();
  }

 private:
  void Index() {
    producer_.clear();
    consumers_.clear();
    outputs_.clear();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      for (const std::string& o : g_.nodes[i].outputs) if (!o.empty()) producer_[o] = i;
      for (const std::string& in : g_.nodes[i].inputs) if (!in.empty()) consumers_[in].push_back(i);
    }
    for (const ValueInfo& v : g_.outputs) outputs_.insert(v.name);
  }

  Graph& g_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> consumers_;
  std::set<std::string> outputs_;
};

bool Near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-6 * std::fabs(want); }

// mean = ReduceMean(x); d = Sub(x, mean); Pow(d, 2) (or Mul(d, d)); var = ReduceMean; Add(var, eps); Sqrt;
// Div(d, std); Mul(gamma); [Add(beta)]  =>  LayerNormalization(x, gamma[, beta], axis=-1, epsilon=eps).
bool FuseLayerNorm(Matcher& m, size_t r1) {
  if (!m.MeansLastAxis(r1)) return false;
  const std::string x = m.in(r1, 0), mean = m.out(r1, 0);
  if (x.empty() || mean.empty()) return false;
  auto sub = m.OnlyConsumer(mean, "Sub");
  if (!sub || m.in(*sub, 0) != x) return false;
  const std::string d = m.out(*sub, 0);
  std::vector<size_t> uses = m.Consumers(d);
  if (uses.size() != 2) return false;
  std::optional<size_t> sq, div;
  for (size_t u : uses) {
    const Node& n = m.node(u);
    if (m.Is(u, "Pow") && n.inputs.size() == 2 && n.inputs[0] == d && Near(m.Scalar(n.inputs[1]), 2.0)) sq = u;
    else if (m.Is(u, "Mul") && n.inputs.size() == 2 && n.inputs[0] == d && n.inputs[1] == d) sq = u;
    else if (m.Is(u, "Div") && n.inputs.size() == 2 && n.inputs[0] == d) div = u;
  }
  if (!sq || !div) return false;
  auto r2 = m.OnlyConsumer(m.out(*sq, 0), "ReduceMean");
  if (!r2 || !m.MeansLastAxis(*r2)) return false;
  auto add_eps = m.OnlyConsumer(m.out(*r2, 0), "Add");
  if (!add_eps) return false;
  std::optional<double> eps = m.Scalar(m.Other(*add_eps, m.out(*r2, 0)));
  if (!eps || *eps < 0) return false;
  auto sqrt = m.OnlyConsumer(m.out(*add_eps, 0), "Sqrt");
  if (!sqrt || m.OnlyConsumer(m.out(*sqrt, 0), "Div") != div || m.node(*div).inputs.size() != 2 ||
      m.in(*div, 1) != m.out(*sqrt, 0)) {
    return false;
  }
  auto scale = m.OnlyConsumer(m.out(*div, 0), "Mul");
  if (!scale) return false;
  std::optional<std::string> gamma_in = m.Other(*scale, m.out(*div, 0));
  if (!gamma_in) return false;
  const std::string gamma = *gamma_in;
  std::vector<size_t> gone = {r1, *sub, *sq, *r2, *add_eps, *sqrt, *div, *scale};
  std::vector<std::string> inputs = {x, gamma};
  std::string y = m.out(*scale, 0);
  if (auto shift = m.OnlyConsumer(y, "Add"); shift && m.Other(*shift, y)) {
    inputs.push_back(*m.Other(*shift, y));
    gone.push_back(*shift);
    y = m.out(*shift, 0);
  }
  // gamma and beta must be one value per normalized element, not per row: both from outside the sequence
  // and not the normalized value itself.
  for (size_t k = 1; k < inputs.size(); ++k) if (inputs[k] == x || inputs[k] == d) return false;
  std::string name = m.node(*scale).name.empty() ? y : m.node(*scale).name;
  m.Replace(gone, MakeNode("LayerNormalization", inputs, {y},
                           {AttrInt("axis", -1), AttrFloat("epsilon", static_cast<float>(*eps))}, name + ".fused_layer_norm"));
  return true;
}

// Div(x, sqrt 2) (or Mul(x, 1/sqrt 2)); Erf; Add(1); Mul(x, .); Mul(0.5), the last two in either order
// =>  com.microsoft Gelu(x).
bool FuseGelu(Matcher& m, size_t erf) {
  if (!m.Is(erf, "Erf") || m.node(erf).inputs.size() != 1 || m.node(erf).outputs.empty()) return false;
  // Erf's input is the scaled x: Div(x, sqrt 2) or Mul by 1/sqrt 2, in either operand order.
  const std::string a = m.in(erf, 0);
  std::optional<size_t> scaling = m.Producer(a);
  std::string x;
  if (scaling && m.node(*scaling).inputs.size() == 2) {
    const Node& n = m.node(*scaling);
    if (m.Is(*scaling, "Div") && Near(m.Scalar(n.inputs[1]), M_SQRT2)) x = n.inputs[0];
    else if (m.Is(*scaling, "Mul") && Near(m.Scalar(n.inputs[1]), M_SQRT1_2)) x = n.inputs[0];
    else if (m.Is(*scaling, "Mul") && Near(m.Scalar(n.inputs[0]), M_SQRT1_2)) x = n.inputs[1];
  }
  if (x.empty()) return false;
  if (!scaling || m.Consumers(a).size() != 1) return false;
  auto plus1 = m.OnlyConsumer(m.out(erf, 0), "Add");
  if (!plus1 || !Near(m.Scalar(m.Other(*plus1, m.out(erf, 0))), 1.0)) return false;
  const std::string e1 = m.out(*plus1, 0);
  auto mul1 = m.OnlyConsumer(e1, "Mul");
  if (!mul1) return false;
  std::optional<std::string> other_in = m.Other(*mul1, e1);
  if (!other_in) return false;
  std::string other = *other_in, y;
  std::vector<size_t> gone = {*scaling, erf, *plus1, *mul1};
  if (other == x) {  // x * (1 + erf) then * 0.5
    auto half = m.OnlyConsumer(m.out(*mul1, 0), "Mul");
    if (!half || !Near(m.Scalar(m.Other(*half, m.out(*mul1, 0))), 0.5)) return false;
    gone.push_back(*half);
    y = m.out(*half, 0);
  } else {  // (x * 0.5) * (1 + erf)
    std::optional<size_t> half = m.Producer(other);
    if (!half || !m.Is(*half, "Mul") || !m.Other(*half, x) || !Near(m.Scalar(m.Other(*half, x)), 0.5) ||
        m.Consumers(other).size() != 1) {
      return false;
    }
    gone.push_back(*half);
    y = m.out(*mul1, 0);
  }
  const std::string name = m.node(gone.back()).name.empty() ? y : m.node(gone.back()).name;
  m.Replace(gone, MakeNode("Gelu", {x}, {y}, {}, name + ".fused_gelu", "com.microsoft"));
  return true;
}

// MatMul(a, Transpose(w)) with w a matrix (perm [1, 0]) read by nothing else  =>  com.microsoft
// FusedMatMul(a, w, transB=1): PyTorch exports nn.Linear without constant folding this way, and the
// transposed copy of w (and, in the gradient, of dW) is then never made.
bool FuseMatMulTranspose(Matcher& m, size_t mm) {
  if (!m.Is(mm, "MatMul") || m.node(mm).inputs.size() != 2) return false;
  const std::string a = m.in(mm, 0), wt = m.in(mm, 1);
  std::optional<size_t> t = m.Producer(wt);
  if (!t || !m.Is(*t, "Transpose") || a == wt || m.Consumers(wt).size() != 1) return false;
  if (m.node(*t).GetInts("perm") != std::vector<int64_t>{1, 0}) return false;
  const std::string w = m.in(*t, 0), y = m.out(mm, 0);
  const std::string name = m.node(mm).name.empty() ? y : m.node(mm).name;
  m.Replace({*t, mm}, MakeNode("FusedMatMul", {a, w}, {y}, {AttrInt("transB", 1), AttrFloat("alpha", 1.0f)},
                               name + ".fused_transpose", "com.microsoft"));
  return true;
}

}  // namespace

FusionCounts FuseForTraining(Model* model) {
  FusionCounts counts;
  Matcher m(&model->graph);
  for (size_t i = 0; i < m.size();) {
    // A fusion rewrites the node list; start over from the first node it could have shifted.
    if (FuseLayerNorm(m, i)) {
      ++counts.layer_norms;
      i = 0;
    } else if (FuseGelu(m, i)) {
      ++counts.gelus;
      i = 0;
    } else if (FuseMatMulTranspose(m, i)) {
      ++counts.matmul_transposes;
      i = 0;
    } else {
      ++i;
    }
  }
  if (counts.gelus + counts.matmul_transposes > 0 && model->OpsetFor("com.microsoft") == 0) model->opset_imports["com.microsoft"] = 1;
  // The Constant nodes that only fed fused sequences (epsilon, sqrt 2, 1, 0.5, the exponent 2).
  if (counts.layer_norms + counts.gelus > 0) {
    Graph& g = model->graph;
    std::set<std::string> used;
    for (const Node& n : g.nodes) used.insert(n.inputs.begin(), n.inputs.end());
    for (const ValueInfo& v : g.outputs) used.insert(v.name);
    g.nodes.erase(std::remove_if(g.nodes.begin(), g.nodes.end(),
                                 [&](const Node& n) {
                                   return n.domain.empty() && n.op_type == "Constant" && n.outputs.size() == 1 &&
                                          !used.count(n.outputs[0]);
                                 }),
                  g.nodes.end());
  }
  return counts;
}

}  // namespace ontrain
