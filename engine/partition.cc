// PartitionGraph: kernel-row lookup per provider in priority order, then the host-side pass.
#include "engine/partition.h"

#include <set>

#include "graph/builder.h"
#include "graph/tensor_proto.h"
#include "graph/value_types.h"

namespace ontrain {

InputUse UseOfInput(const NodePlacement& p, const Node& n, int i) {
  if (i >= static_cast<int>(n.inputs.size()) || n.inputs[i].empty()) return InputUse::kNone;
  if (p.def == nullptr) return InputUse::kDevice;
  if (p.def->is_shape_only_input(i)) return InputUse::kShapeOnly;
  if (p.def->is_host_input(i)) return InputUse::kHost;
  if (p.def->is_in_place_input(i)) return InputUse::kInPlace;
  return InputUse::kDevice;
}

namespace {

std::string DomainName(const std::string& d) { return d.empty() ? "ai.onnx" : d; }

// The row of `provider` for node `n` at its static input dtypes; `why` says why there is none.
const KernelDef* FindRow(const IExecutionProvider& provider, const Node& n, int64_t opset,
                         const std::map<std::string, DType>& dtypes, std::string* why) {
  const KernelRegistry& reg = provider.kernel_registry();
  const KernelDef* any = reg.FindAnyType(n.domain, n.op_type, opset);
  if (any == nullptr) {
    *why = StrCat(provider.name(), ": no kernel");
    return nullptr;
  }
  if (any->type_input < 0) return any;
  std::vector<DType> in;
  for (const std::string& name : n.inputs) {
    auto it = name.empty() ? dtypes.end() : dtypes.find(name);
    in.push_back(it == dtypes.end() ? DType::kUndefined : it->second);
  }
  DType t = any->type_input < static_cast<int>(in.size()) ? in[any->type_input] : DType::kUndefined;
  if (t == DType::kUndefined) {
    *why = StrCat(provider.name(), ": input dtype unknown before the first run");
    return nullptr;
  }
  auto row = reg.Find(n.domain, n.op_type, opset, in);
  if (!row.ok()) {
    *why = StrCat(provider.name(), ": no kernel for dtype ", DTypeName(t));
    return nullptr;
  }
  if (row.value()->rejects != nullptr) {
    if (const char* reason = row.value()->rejects(n)) {
      *why = StrCat(provider.name(), ": ", reason);
      return nullptr;
    }
  }
  return row.value();
}

// Marks nodes whose outputs only feed host inputs (directly or through other such nodes) and moves them to
// the host provider.
void KeepHostSideOnHost(const Model& model, const std::vector<IExecutionProvider*>& providers, GraphPartition* p) {
  const Graph& g = model.graph;
  const int host = static_cast<int>(providers.size()) - 1;
  std::map<std::string, std::vector<std::pair<size_t, int>>> readers;  // value -> (node, input index)
  for (size_t idx : p->order) {
    const Node& n = g.nodes[idx];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!n.inputs[i].empty()) readers[n.inputs[i]].push_back({idx, static_cast<int>(i)});
    }
  }
  std::vector<bool> host_side(g.nodes.size(), false);
  for (auto it = p->order.rbegin(); it != p->order.rend(); ++it) {
    const Node& n = g.nodes[*it];
    bool any_edge = false, all_host = true;
    for (const std::string& o : n.outputs) {
      if (o.empty()) continue;
      if (g.FindOutput(o)) all_host = false;
      auto r = readers.find(o);
      if (r == readers.end()) continue;
      for (const auto& [reader, i] : r->second) {
        InputUse use = UseOfInput(p->nodes[reader], g.nodes[reader], i);
        if (use == InputUse::kShapeOnly) continue;
        any_edge = true;
        if (use != InputUse::kHost && !host_side[reader]) all_host = false;
      }
    }
    if (!any_edge || !all_host) continue;
    host_side[*it] = true;
    NodePlacement& place = p->nodes[*it];
    if (place.provider == host) continue;
    std::string why;
    const KernelDef* row = FindRow(*providers[host], n, model.OpsetFor(n.domain), p->dtypes, &why);
    if (row == nullptr) continue;  // the host cannot run it: it stays where it is, and its outputs are copied
    place.provider = host;
    place.def = row;
    place.why_fallback = "computes only host-side inputs (shapes, axes) of other nodes";
  }
}

// Integer arithmetic on constants and shapes (a padding's pads, the index ranges of its gradient, a
// Concat's lengths) gives the same values at every run at the same shapes. It runs on the host, where its
// roots are (initializers, Shape), and a device node that reads its result gets a copy to the device;
// computed on the device, the host nodes among it (Range has no CUDA kernel) would need copies back, each a
// synchronization in the middle of a run.
void KeepShapeArithmeticOnHost(const Model& model, const std::vector<IExecutionProvider*>& providers,
                               GraphPartition* p) {
  const Graph& g = model.graph;
  const int host = static_cast<int>(providers.size()) - 1;
  auto integer = [&](const std::string& v) {
    auto t = p->dtypes.find(v);
    return t != p->dtypes.end() && t->second != DType::kUndefined && !IsFloatingPoint(t->second);
  };
  std::set<std::string> known;  // integer values that depend on constants and shapes only
  for (const auto& [name, t] : g.initializers) {
    if (!IsFloatingPoint(t.dtype()) && !g.FindInput(name)) known.insert(name);
  }
  for (size_t idx : p->order) {
    const Node& n = g.nodes[idx];
    NodePlacement& place = p->nodes[idx];
    bool computable = !n.outputs.empty();
    for (size_t i = 0; i < n.inputs.size() && computable; ++i) {
      InputUse use = UseOfInput(place, n, static_cast<int>(i));
      if (use == InputUse::kInPlace) computable = false;
      if (use != InputUse::kNone && use != InputUse::kShapeOnly && !known.count(n.inputs[i])) computable = false;
    }
    for (const std::string& o : n.outputs) computable = computable && (o.empty() || integer(o));
    if (!computable) continue;
    for (const std::string& o : n.outputs) {
      if (!o.empty()) known.insert(o);
    }
    if (place.provider == host) continue;
    std::string why;
    const KernelDef* row = FindRow(*providers[host], n, model.OpsetFor(n.domain), p->dtypes, &why);
    if (row == nullptr) continue;
    place.provider = host;
    place.def = row;
    place.why_fallback = "integer arithmetic on constants and shapes";
  }
}

// ConcatTraining(x...) -> (y, lengths): lengths[i] = x[i].shape[axis], made by Shape and Gather per input and
// a Concat; the node keeps y alone.
void SplitConcatLengths(Model* model) {
  Graph& g = model->graph;
  std::vector<Node> added;
  std::set<std::string> read;
  for (const Node& n : g.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (Node& n : g.nodes) {
    if (n.op_type != "ConcatTraining" || n.domain != "com.microsoft" || n.outputs.size() < 2 || n.outputs[1].empty() ||
        !read.count(n.outputs[1])) {
      continue;
    }
    const std::string base = (n.name.empty() ? n.outputs[0] : n.name) + "/per_input_length";
    const std::string axis = base + "/axis";
    if (g.initializers.count(axis)) continue;  // already split (a name the graph uses otherwise: leave it)
    g.initializers[axis] = Tensor::FromVector<int64_t>({n.GetInt("axis", 0)}, {1});  // Gather takes it negative too
    std::vector<std::string> lengths;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string shape = StrCat(base, "/shape_", i), length = StrCat(base, "/length_", i);
      added.push_back(MakeNode("Shape", {n.inputs[i]}, {shape}, {}, shape));
      added.push_back(MakeNode("Gather", {shape, axis}, {length}, {AttrInt("axis", 0)}, length));
      lengths.push_back(length);
    }
    added.push_back(MakeNode("Concat", lengths, {n.outputs[1]}, {AttrInt("axis", 0)}, base));
    n.outputs.resize(1);
  }
  for (Node& n : added) g.nodes.push_back(std::move(n));
}

}  // namespace

void PrepareForPlanning(Model* model, const std::vector<IExecutionProvider*>& providers) {
  FoldConstantNodes(&model->graph);
  if (providers.size() > 1 && model->OpsetFor("") > 0) SplitConcatLengths(model);
}

StatusOr<GraphPartition> PartitionGraph(const Model& model, const std::vector<IExecutionProvider*>& providers) {
  if (providers.empty()) return InvalidArgument("no execution provider given");
  for (const IExecutionProvider* p : providers) {
    if (p == nullptr) return InvalidArgument("a null execution provider in the provider list");
  }
  if (!providers.back()->device().is_host()) {
    return InvalidArgument("the provider list must end with a host provider (CPU), the fallback for every node; "
                           "it ends with ", providers.back()->name());
  }
  GraphPartition p;
  const Graph& g = model.graph;
  ONT_ASSIGN_OR_RETURN(p.order, TopologicalOrder(g));
  p.dtypes = InferValueDTypes(g);
  p.nodes.assign(g.nodes.size(), NodePlacement());
  // 1. The first provider with a row for the node's static input dtypes.
  for (size_t idx : p.order) {
    const Node& n = g.nodes[idx];
    int64_t opset = model.OpsetFor(n.domain);
    if (opset == 0) {
      return InvalidArgument(n.Describe(), ": the model imports no opset for domain \"", DomainName(n.domain), "\"");
    }
    NodePlacement& place = p.nodes[idx];
    std::string why;
    for (size_t k = 0; k < providers.size() && place.provider < 0; ++k) {
      std::string reason;
      const KernelDef* row = FindRow(*providers[k], n, opset, p.dtypes, &reason);
      if (row != nullptr) {
        place.provider = static_cast<int>(k);
        place.def = row;
        place.why_fallback = why;
      } else {
        why += (why.empty() ? "" : "; ") + reason;
      }
    }
    if (place.provider >= 0) continue;
    // 2. A dtype unknown before the first run: the host provider takes the node if it has the op at all;
    //    its row is chosen at the first run.
    if (providers.back()->kernel_registry().HasOp(n.domain, n.op_type, opset)) {
      place.provider = static_cast<int>(providers.size()) - 1;
      place.why_fallback = why;
      continue;
    }
    std::string names;
    for (const IExecutionProvider* pr : providers) names += (names.empty() ? "" : ", ") + pr->name();
    return NotFound(n.Describe(), ": no kernel for op ", n.op_type, " (domain ", DomainName(n.domain), ", opset ",
                    opset, ") on provider", providers.size() > 1 ? "s " : " ", names);
  }
  // 3. Host-side computations stay on the host, and so does integer arithmetic on constants and shapes.
  if (providers.size() > 1) {
    KeepShapeArithmeticOnHost(model, providers, &p);
    KeepHostSideOnHost(model, providers, &p);
  }
  return p;
}

}  // namespace ontrain
