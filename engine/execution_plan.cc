// PlanExecution: value homes, copy insertion and the synchronization pass; PlaceInputs.
#include "engine/execution_plan.h"

#include <set>
#include <utility>

namespace ontrain {

int ExecutionPlan::num_copy_steps() const {
  int n = 0;
  for (const PlanStep& s : steps) n += s.kind == PlanStep::Kind::kCopy;
  return n;
}

int ProviderIndexFor(const std::vector<IExecutionProvider*>& providers, Device device) {
  for (size_t i = 0; i < providers.size(); ++i) {
    if (providers[i]->device() == device) return static_cast<int>(i);
  }
  return -1;
}

namespace {

using DeviceKey = std::pair<int, int>;
DeviceKey KeyOf(Device d) { return {static_cast<int>(d.type), d.index}; }

class Planner {
 public:
  Planner(const Model& model, const std::vector<IExecutionProvider*>& providers) : model_(model), providers_(providers) {}

  StatusOr<ExecutionPlan> Plan(GraphPartition partition, const std::map<std::string, Device>& input_devices);

 private:
  int AddValue(const std::string& name, Device device, int source, bool constant);
  StatusOr<int> CopyTo(int v, Device dst);
  Status AddKernelStep(size_t idx);
  void AddSynchronizations();

  const Model& model_;
  const std::vector<IExecutionProvider*>& providers_;
  ExecutionPlan plan_;
  std::map<std::pair<int, DeviceKey>, int> copies_;  // (value, destination) -> the copy's value id
};

int Planner::AddValue(const std::string& name, Device device, int source, bool constant) {
  plan_.values.push_back({name, device, source, constant});
  return static_cast<int>(plan_.values.size()) - 1;
}

StatusOr<int> Planner::CopyTo(int v, Device dst) {
  if (plan_.values[v].device == dst) return v;
  auto key = std::make_pair(v, KeyOf(dst));
  auto it = copies_.find(key);
  if (it != copies_.end()) return it->second;
  Device src = plan_.values[v].device;
  int from = v;
  if (!src.is_host() && !dst.is_host()) {  // device to device goes through the host
    ONT_ASSIGN_OR_RETURN(from, CopyTo(v, Device()));
    src = Device();
  }
  const PlannedValue origin = plan_.values[from];
  int id = AddValue(origin.name, dst, from, origin.constant);
  Device side = dst.is_host() ? src : dst;
  int provider = ProviderIndexFor(providers_, side);
  if (provider < 0) return InvalidArgument("value \"", origin.name, "\" is on ", side.ToString(), ", which no provider of this session serves");
  if (origin.constant) {
    plan_.constant_copies.push_back(id);
  } else {
    PlanStep step;
    step.kind = PlanStep::Kind::kCopy;
    step.provider = provider;
    step.inputs = {from};
    step.outputs = {id};
    plan_.steps.push_back(std::move(step));
  }
  copies_[key] = id;
  return id;
}

Status Planner::AddKernelStep(size_t idx) {
  const Node& n = model_.graph.nodes[idx];
  const NodePlacement& place = plan_.partition.nodes[idx];
  Device dev = providers_[place.provider]->device();
  PlanStep step;
  step.node = static_cast<int>(idx);
  step.provider = place.provider;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i].empty()) {
      step.inputs.push_back(-1);
      continue;
    }
    auto it = plan_.ids.find(n.inputs[i]);
    if (it == plan_.ids.end()) return Internal(n.Describe(), ": input \"", n.inputs[i], "\" has no value");
    int v = it->second;
    switch (UseOfInput(place, n, static_cast<int>(i))) {
      case InputUse::kNone:
      case InputUse::kShapeOnly:
        break;
      case InputUse::kHost: {
        ONT_ASSIGN_OR_RETURN(v, CopyTo(v, Device()));
        break;
      }
      case InputUse::kDevice: {
        ONT_ASSIGN_OR_RETURN(v, CopyTo(v, dev));
        break;
      }
      case InputUse::kInPlace:
        if (plan_.values[v].device != dev) {
          return InvalidArgument(n.Describe(), " on ", providers_[place.provider]->name(), " updates input \"",
                                 n.inputs[i], "\" in place, but that value lives on ",
                                 plan_.values[v].device.ToString(), "; it must live on ", dev.ToString());
        }
        break;
    }
    step.inputs.push_back(v);
  }
  for (const std::string& o : n.outputs) {
    if (o.empty()) {
      step.outputs.push_back(-1);
      continue;
    }
    if (plan_.ids.count(o)) return InvalidArgument(n.Describe(), ": value \"", o, "\" is produced twice");
    int id = AddValue(o, dev, -1, false);
    plan_.ids[o] = id;
    step.outputs.push_back(id);
  }
  plan_.steps.push_back(std::move(step));
  return Status::OK();
}

void Planner::AddSynchronizations() {
  // Values copied to the host by each provider since its last synchronization.
  std::vector<std::set<int>> pending(providers_.size());
  for (PlanStep& step : plan_.steps) {
    std::vector<int> host_reads;
    if (step.kind == PlanStep::Kind::kCopy) {
      if (plan_.values[step.inputs[0]].device.is_host()) host_reads.push_back(step.inputs[0]);
    } else {
      const Node& n = model_.graph.nodes[step.node];
      const NodePlacement& place = plan_.partition.nodes[step.node];
      bool on_host = providers_[step.provider]->device().is_host();
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        InputUse use = UseOfInput(place, n, static_cast<int>(i));
        if (use == InputUse::kHost || (on_host && (use == InputUse::kDevice || use == InputUse::kInPlace))) {
          host_reads.push_back(step.inputs[i]);
        }
      }
    }
    for (size_t p = 0; p < providers_.size(); ++p) {
      bool needed = false;
      for (int v : host_reads) needed |= pending[p].count(v) > 0;
      if (needed) {
        step.sync_before.push_back(static_cast<int>(p));
        pending[p].clear();
      }
    }
    if (step.kind == PlanStep::Kind::kCopy && plan_.values[step.outputs[0]].device.is_host()) {
      pending[step.provider].insert(step.outputs[0]);
    }
  }
}

StatusOr<ExecutionPlan> Planner::Plan(GraphPartition partition, const std::map<std::string, Device>& input_devices) {
  plan_ = ExecutionPlan();
  plan_.partition = std::move(partition);
  const Graph& g = model_.graph;
  // 1. Graph inputs live where they are fed; initializers (that are not inputs) on the host.
  for (const ValueInfo& v : g.inputs) {
    auto d = input_devices.find(v.name);
    Device dev = d == input_devices.end() ? Device() : d->second;
    if (ProviderIndexFor(providers_, dev) < 0) {
      return InvalidArgument("input \"", v.name, "\" is to be fed on ", dev.ToString(), ", which no provider serves");
    }
    plan_.ids[v.name] = AddValue(v.name, dev, -1, false);
  }
  for (const auto& [name, t] : g.initializers) {
    if (!plan_.ids.count(name)) plan_.ids[name] = AddValue(name, Device(), -1, true);
  }
  // 2. Kernel steps in topological order, each preceded by the copies its inputs need.
  for (size_t idx : plan_.partition.order) ONT_RETURN_IF_ERROR(AddKernelStep(idx));
  // 3. Synchronizations before host reads of copied-back values.
  AddSynchronizations();
  return std::move(plan_);
}

}  // namespace

StatusOr<ExecutionPlan> PlanExecution(const Model& model, GraphPartition partition,
                                      const std::vector<IExecutionProvider*>& providers,
                                      const std::map<std::string, Device>& input_devices) {
  Planner planner(model, providers);
  return planner.Plan(std::move(partition), input_devices);
}

std::map<std::string, InputPlacement> PlaceInputs(const Model& model, const GraphPartition& partition,
                                                  const std::vector<IExecutionProvider*>& providers) {
  std::map<std::string, InputPlacement> out;
  for (const ValueInfo& v : model.graph.inputs) out[v.name] = InputPlacement();
  for (size_t idx : partition.order) {
    const Node& n = model.graph.nodes[idx];
    const NodePlacement& place = partition.nodes[idx];
    Device dev = providers[place.provider]->device();
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto it = out.find(n.inputs[i]);
      if (n.inputs[i].empty() || it == out.end()) continue;
      InputPlacement& p = it->second;
      InputUse use = UseOfInput(place, n, static_cast<int>(i));
      if (use == InputUse::kInPlace && !p.in_place) {
        p.in_place = true;
        p.in_place_node = n.Describe();
        p.read = true;
        p.device = dev;
      } else if ((use == InputUse::kDevice || use == InputUse::kHost) && !p.read) {
        p.read = true;
        p.device = use == InputUse::kHost ? Device() : dev;
      }
    }
  }
  return out;
}

}  // namespace ontrain
