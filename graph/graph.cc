// Node attribute accessors and graph algorithms that need nothing but the graph.
#include "graph/graph.h"

#include <unordered_map>
#include <unordered_set>

namespace ontrain {

std::string ValueInfo::TypeString() const {
  if (!is_tensor) return "non-tensor";
  std::string s = DTypeName(dtype);
  if (!has_shape) return s + "[?]";
  s += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ",";
    s += dims[i].known() ? std::to_string(dims[i].value) : (dims[i].param.empty() ? "?" : dims[i].param);
  }
  return s + "]";
}

int64_t Node::GetInt(const std::string& name, int64_t fallback) const {
  auto it = attributes.find(name);
  return it == attributes.end() ? fallback : it->second.i();
}

float Node::GetFloat(const std::string& name, float fallback) const {
  auto it = attributes.find(name);
  return it == attributes.end() ? fallback : it->second.f();
}

std::string Node::GetString(const std::string& name, const std::string& fallback) const {
  auto it = attributes.find(name);
  return it == attributes.end() ? fallback : it->second.s();
}

std::vector<int64_t> Node::GetInts(const std::string& name) const {
  auto it = attributes.find(name);
  if (it == attributes.end()) return {};
  return std::vector<int64_t>(it->second.ints().begin(), it->second.ints().end());
}

Shape Node::GetDims(const std::string& name) const {
  auto it = attributes.find(name);
  if (it == attributes.end()) return {};
  return Shape(it->second.ints().begin(), it->second.ints().end());
}

std::vector<float> Node::GetFloats(const std::string& name) const {
  auto it = attributes.find(name);
  if (it == attributes.end()) return {};
  return std::vector<float>(it->second.floats().begin(), it->second.floats().end());
}

std::string Node::Describe() const {
  std::string d = domain.empty() ? "" : domain + "::";
  return StrCat("node \"", name, "\" (", d, op_type, ")");
}

const ValueInfo* Graph::FindInput(const std::string& n) const {
  for (const ValueInfo& v : inputs) if (v.name == n) return &v;
  return nullptr;
}

const ValueInfo* Graph::FindOutput(const std::string& n) const {
  for (const ValueInfo& v : outputs) if (v.name == n) return &v;
  return nullptr;
}

void Graph::AddInitializer(const std::string& n, Tensor value) {
  if (!initializers.count(n)) initializer_order.push_back(n);
  initializers[n] = std::move(value);
}

void Graph::RemoveInitializer(const std::string& n) {
  initializers.erase(n);
  for (auto it = initializer_order.begin(); it != initializer_order.end(); ++it) {
    if (*it == n) { initializer_order.erase(it); break; }
  }
}

std::string NormalizeDomain(const std::string& domain) { return domain == "ai.onnx" ? "" : domain; }

int64_t Model::OpsetFor(const std::string& d) const {
  auto it = opset_imports.find(NormalizeDomain(d));
  return it == opset_imports.end() ? 0 : it->second;
}

StatusOr<std::vector<size_t>> TopologicalOrder(const Graph& graph) {
  // 1. Map each value to the node producing it; graph inputs and initializers are available from the start.
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (const std::string& o : graph.nodes[i].outputs) {
      if (o.empty()) continue;
      if (producer.count(o)) {
        return InvalidArgument("value \"", o, "\" is produced twice: by ", graph.nodes[producer[o]].Describe(),
                               " and by ", graph.nodes[i].Describe());
      }
      producer[o] = i;
    }
  }
  std::unordered_set<std::string> sources;
  for (const ValueInfo& v : graph.inputs) sources.insert(v.name);
  for (const auto& kv : graph.initializers) sources.insert(kv.first);
  // 2. Count unresolved inputs per node and list each node's consumers (Kahn's algorithm, stable by index).
  std::vector<int> pending(graph.nodes.size(), 0);
  std::vector<std::vector<size_t>> consumers(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    for (const std::string& in : graph.nodes[i].inputs) {
      if (in.empty()) continue;
      auto it = producer.find(in);
      if (it != producer.end()) {
        pending[i]++;
        consumers[it->second].push_back(i);
      } else if (!sources.count(in)) {
        return InvalidArgument(graph.nodes[i].Describe(), ": input \"", in,
                               "\" is not a graph input, an initializer, or the output of any node");
      }
    }
  }
  // 3. Repeatedly emit the lowest-index ready node, so file order is kept where it is already valid.
  std::vector<size_t> order;
  std::vector<size_t> ready;
  for (size_t i = graph.nodes.size(); i-- > 0;) if (pending[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    size_t n = ready.back();
    ready.pop_back();
    order.push_back(n);
    for (size_t c : consumers[n]) {
      if (--pending[c] == 0) {
        auto pos = ready.begin();
        while (pos != ready.end() && *pos > c) ++pos;
        ready.insert(pos, c);
      }
    }
  }
  if (order.size() != graph.nodes.size()) {
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      if (pending[i] > 0) return InvalidArgument("the graph has a cycle through ", graph.nodes[i].Describe());
    }
  }
  return order;
}

}  // namespace ontrain
