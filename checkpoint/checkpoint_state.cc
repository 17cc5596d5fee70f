// CheckpointState helpers.
#include "checkpoint/checkpoint_state.h"

namespace ontrain {

StatusOr<PropertyValue> PropertyBag::GetValue(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return NotFound("no property named \"", name, "\"");
  return it->second;
}

void CheckpointState::AddParameter(const std::string& name, Tensor data, bool requires_grad) {
  if (!parameters.count(name)) parameter_order.push_back(name);
  parameters[name] = Parameter{std::move(data), requires_grad};
}

const Parameter* CheckpointState::FindParameter(const std::string& name) const {
  auto it = parameters.find(name);
  return it == parameters.end() ? nullptr : &it->second;
}

Parameter* CheckpointState::FindParameter(const std::string& name) {
  auto it = parameters.find(name);
  return it == parameters.end() ? nullptr : &it->second;
}

}  // namespace ontrain
