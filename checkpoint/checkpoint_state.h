// CheckpointState: everything a training run needs to resume: parameters (trainable and frozen), optimizer
// groups (step, learning rates, per-parameter moments) and a property bag. Plain data; the training session
// and optimizer refer to it. The file format is ONNX Runtime's flatbuffer checkpoint (identifier "ODTC");
// see checkpoint_io.h.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/data_transfer.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ontrain {

struct Parameter {
  Tensor data;  // on the host, or on the session's device while a session uses the state
  bool requires_grad = true;
};

struct ParameterOptimizerState {
  std::map<std::string, Tensor> momentums;  // "momentum0", "momentum1"
};

struct OptimizerGroup {
  int64_t step = 0;                      // successful optimizer steps so far
  float initial_learning_rate = 0.001f;  // ONNX Runtime's default
  float learning_rate = 0.001f;          // current; not stored in checkpoints (as in ONNX Runtime)
  std::map<std::string, ParameterOptimizerState> param_states;  // by parameter name
};

using PropertyValue = std::variant<int64_t, float, std::string>;

class PropertyBag {
 public:
  void Set(const std::string& name, PropertyValue value) { values_[name] = std::move(value); }
  bool Contains(const std::string& name) const { return values_.count(name) > 0; }
  template <typename T>
  StatusOr<T> Get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) return NotFound("no property named \"", name, "\"");
    if (!std::holds_alternative<T>(it->second)) {
      return InvalidArgument("property \"", name, "\" holds another type than the one asked for");
    }
    return std::get<T>(it->second);
  }
  StatusOr<PropertyValue> GetValue(const std::string& name) const;
  void Remove(const std::string& name) { values_.erase(name); }
  size_t size() const { return values_.size(); }
  const std::map<std::string, PropertyValue>& values() const { return values_; }

 private:
  std::map<std::string, PropertyValue> values_;
};

struct CheckpointState {
  std::map<std::string, Parameter> parameters;
  std::vector<std::string> parameter_order;  // file order (trainable first), for deterministic iteration
  std::map<std::string, OptimizerGroup> optimizer_groups;  // ONNX Runtime uses "group0"
  PropertyBag properties;
  bool is_nominal = false;  // parameters are names without data (ONNX Runtime's nominal checkpoint)
  // The devices that tensors of this state live on besides the host. A TrainingSession that places
  // parameters and moments on a device names it here for its lifetime (and moves them back to the host
  // when it ends), so that saving and reading the state works without the session at hand.
  std::vector<IDataTransfer*> devices;

  // Adds or replaces a parameter, keeping parameter_order.
  void AddParameter(const std::string& name, Tensor data, bool requires_grad);
  const Parameter* FindParameter(const std::string& name) const;
  Parameter* FindParameter(const std::string& name);
};

}  // namespace ontrain
