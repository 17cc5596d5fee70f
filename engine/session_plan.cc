// PlanSession: classify the training inputs, then place the state from how each graph reads it.
#include "engine/session_plan.h"

#include <optional>

#include "engine/execution_plan.h"
#include "engine/partition.h"
#include "graph/tensor_proto.h"

namespace ontrain {

namespace {
constexpr const char* kResetInput = "lazy_reset_grad";
const char* const kGradSuffixes[] = {"_grad.accumulation.buffer", "_grad", "_grad.accumulation.out"};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

using Placements = std::map<std::string, InputPlacement>;

StatusOr<Placements> InputPlacements(const Model& model, const std::vector<IExecutionProvider*>& providers,
                                     const char* what) {
  Model m = model;
  PrepareForPlanning(&m, providers);  // as the executor does
  auto p = PartitionGraph(m, providers);
  if (!p.ok()) return p.status().WithContext(what);
  return PlaceInputs(m, p.value(), providers);
}

const InputPlacement* Find(const Placements& m, const std::string& name) {
  auto it = m.find(name);
  return it == m.end() ? nullptr : &it->second;
}

Status Classify(const Model& train, const CheckpointState& state, SessionPlan* plan) {
  const Graph& g = train.graph;
  bool has_reset = false;
  std::map<std::string, bool> is_buffer;
  for (const ValueInfo& v : g.inputs) {
    if (state.FindParameter(v.name)) plan->params.push_back(v.name);
    else if (v.name == kResetInput) has_reset = true;
    else if (IsGradientName(v.name)) is_buffer[v.name] = true;
    else plan->user_inputs.push_back(v.name);
  }
  if (!has_reset) return InvalidArgument("the training model has no \"lazy_reset_grad\" input");
  for (const std::string& p : plan->params) {
    if (!state.parameters.at(p).requires_grad) continue;
    std::string buffer = p + "_grad.accumulation.buffer";
    if (!is_buffer.count(buffer)) return InvalidArgument("gradient buffer input not provided for param: ", p);
    plan->trainable.push_back(p);
    plan->grad_buffer[p] = buffer;
  }
  for (const ValueInfo& v : g.outputs) {
    if (!IsGradientName(v.name)) plan->user_outputs.push_back(v.name);
  }
  return Status::OK();
}
}  // namespace

bool IsGradientName(const std::string& name) {
  for (const char* s : kGradSuffixes) if (EndsWith(name, s)) return true;
  return false;
}

StatusOr<SessionPlan> PlanSession(const Model& train, const Model* eval, const Model* optimizer,
                                  const CheckpointState& state, const std::vector<IExecutionProvider*>& providers) {
  SessionPlan plan;
  ONT_RETURN_IF_ERROR(Classify(train, state, &plan));
  // 1. How each graph reads each state tensor.
  ONT_ASSIGN_OR_RETURN(Placements tr, InputPlacements(train, providers, "training model"));
  Placements ev, opt;
  if (eval) {
    ONT_ASSIGN_OR_RETURN(ev, InputPlacements(*eval, providers, "eval model"));
  }
  if (optimizer) {
    ONT_ASSIGN_OR_RETURN(opt, InputPlacements(*optimizer, providers, "optimizer model"));
  }
  const InputPlacement* opt_params = Find(opt, "params");
  // 2. Parameters.
  for (const std::string& p : plan.params) {
    const InputPlacement* t = Find(tr, p);
    const InputPlacement* e = Find(ev, p);
    bool trainable = state.parameters.at(p).requires_grad;
    Device d;
    if (trainable && opt_params && opt_params->read) d = opt_params->device;
    else if (t && t->read) d = t->device;
    else if (e && e->read) d = e->device;
    if (t && t->in_place && t->device != d) {
      return InvalidArgument("parameter \"", p, "\" is updated in place by ", t->in_place_node, " on ",
                             t->device.ToString(), " and by the optimizer on ", d.ToString());
    }
    plan.devices[p] = d;
  }
  // 3. Gradient buffers, all on one device.
  std::optional<Device> grads;
  for (const std::string& p : plan.trainable) {
    const std::string& b = plan.grad_buffer.at(p);
    const InputPlacement* t = Find(tr, b);
    Device d = t && t->read ? t->device : Device();
    if (grads && *grads != d) {
      return Unimplemented("gradient buffers on two devices (", grads->ToString(), " and ", d.ToString(), " for \"", b,
                           "\"): the optimizer takes them as one sequence");
    }
    grads = d;
    plan.devices[b] = d;
  }
  if (grads) plan.gradients_device = *grads;
  const InputPlacement* og = Find(opt, "gradients");
  if (og && og->in_place && og->device != plan.gradients_device) {
    return InvalidArgument(og->in_place_node, " on ", og->device.ToString(), " updates the gradients in place, but "
                           "they live on ", plan.gradients_device.ToString(), " where the training model accumulates them");
  }
  // 4. Moments: where the optimizer node updates them, else (unread, as SGD's) beside the parameters, as
  //    ONNX Runtime creates them.
  const InputPlacement* om = Find(opt, "first_order_moments");
  if (om && om->read) plan.moments_device = om->device;
  else if (!plan.trainable.empty()) plan.moments_device = plan.devices.at(plan.trainable[0]);
  return plan;
}

}  // namespace ontrain
