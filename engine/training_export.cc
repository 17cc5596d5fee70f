// TrainingSession::ExportModelForInferencing: the eval graph pruned to the requested outputs, with the
// current parameters embedded as initializers.
#include <set>

#include "engine/training_session.h"
#include "graph/model_io.h"
#include "graph/shape_inference.h"

namespace ontrain {

namespace {

// Keeps only the nodes that the requested outputs depend on (reverse reachability).
void Prune(Graph* g, const std::vector<std::string>& outputs) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g->nodes.size(); ++i)
    for (const std::string& o : g->nodes[i].outputs) if (!o.empty()) producer[o] = i;
  std::set<size_t> keep;
  std::vector<std::string> work(outputs.begin(), outputs.end());
  while (!work.empty()) {
    std::string v = work.back();
    work.pop_back();
    auto it = producer.find(v);
    if (it == producer.end() || !keep.insert(it->second).second) continue;
    for (const std::string& in : g->nodes[it->second].inputs) if (!in.empty()) work.push_back(in);
  }
  std::vector<Node> kept;
  for (size_t i = 0; i < g->nodes.size(); ++i) if (keep.count(i)) kept.push_back(std::move(g->nodes[i]));
  g->nodes = std::move(kept);
}

}  // namespace

Status TrainingSession::ExportModelForInferencing(const std::string& path, const std::vector<std::string>& outputs) {
  if (!eval_model_) return FailedPrecondition("an eval model is needed to export an inference model");
  ONT_RETURN_IF_ERROR(CheckNotNominal("export an inference model"));
  if (outputs.empty()) return InvalidArgument("empty list of graph output names: name at least one output");
  Model m = *eval_model_;
  // 1. Types of every value, so that any intermediate can become an output.
  Model typed = m;
  Status inferred = InferShapes(&typed);
  std::map<std::string, ValueInfo> types;
  for (const ValueInfo& v : typed.graph.inputs) types[v.name] = v;
  for (const ValueInfo& v : typed.graph.value_infos) types[v.name] = v;
  for (const ValueInfo& v : typed.graph.outputs) types[v.name] = v;
  for (const ValueInfo& v : m.graph.outputs) if (v.dtype != DType::kUndefined) types[v.name] = v;
  std::vector<ValueInfo> new_outputs;
  for (const std::string& name : outputs) {
    if (name.empty()) return InvalidArgument("graph output names cannot be empty");
    auto it = types.find(name);
    bool produced = false;
    for (const Node& n : m.graph.nodes)
      for (const std::string& o : n.outputs) produced |= o == name;
    if (!produced && !m.graph.FindInput(name)) {
      return InvalidArgument("output \"", name, "\" for the inference graph is not a value of the eval graph");
    }
    if (it == types.end() || it->second.dtype == DType::kUndefined) {
      return InvalidArgument("the type of output \"", name, "\" is unknown",
                             inferred.ok() ? "" : " (shape inference: " + inferred.message() + ")");
    }
    new_outputs.push_back(it->second);
  }
  m.graph.outputs = new_outputs;
  Prune(&m.graph, outputs);
  // 2. Parameters become initializers holding their current values; unread inputs go away.
  std::set<std::string> read(outputs.begin(), outputs.end());
  for (const Node& n : m.graph.nodes)
    for (const std::string& i : n.inputs) read.insert(i);
  std::vector<ValueInfo> inputs;
  for (const ValueInfo& v : m.graph.inputs) {
    const Parameter* p = state_->FindParameter(v.name);
    if (p != nullptr) {
      if (!read.count(v.name)) continue;
      ONT_ASSIGN_OR_RETURN(Tensor host, CopyToHost(p->data, state_->devices));
      m.graph.AddInitializer(v.name, host.Clone());
    } else if (read.count(v.name)) {
      inputs.push_back(v);
    }
  }
  m.graph.inputs = inputs;
  for (const std::string& name : std::vector<std::string>(m.graph.initializer_order)) {
    if (!read.count(name)) m.graph.RemoveInitializer(name);
  }
  m.graph.value_infos.clear();
  return SaveModel(m, path);
}

}  // namespace ontrain
