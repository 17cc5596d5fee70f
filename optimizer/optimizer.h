// Optimizer: runs an ONNX Runtime optimizer model (one com.microsoft AdamWOptimizer or SGDOptimizerV2 node,
// optionally after InplaceClipGradNorm) against a CheckpointState.
//
// The model's graph inputs must be exactly [learning_rate, step, params, gradients, first_order_moments
// (, second_order_moments for AdamW)], as ONNX Runtime checks. Moments live in the state's "group0": zeros
// are created when the checkpoint has none, else every trainable parameter must have its own. Each Step()
// feeds step = group.step + 1 and counts the step only when the update succeeded.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "engine/status.h"
#include "graph/graph.h"
#include "optimizer/update_rules.h"
#include "providers/execution_provider.h"

namespace ontrain {

enum class OptimizerKind { kAdamW, kSGD };

class Optimizer {
 public:
  // `trainable` lists the parameters to update (the training graph's order); their tensors and moments
  // must be on `provider`'s device.
  static StatusOr<std::unique_ptr<Optimizer>> Create(const Model& model, CheckpointState* state,
                                                     const std::vector<std::string>& trainable,
                                                     IExecutionProvider* provider);

  // Updates every trainable parameter from its gradient (same shape), in place.
  Status Step(const std::map<std::string, Tensor>& gradients);

  OptimizerKind kind() const { return kind_; }
  const AdamWConfig& adamw_config() const { return adamw_; }
  float learning_rate() const { return group().learning_rate; }
  void set_learning_rate(float lr) { group().learning_rate = lr; }
  // Sets both the initial and the current rate (ONNX Runtime's SetInitialLearningRate).
  void set_initial_learning_rate(float lr);
  int64_t step() const { return group().step; }
  OptimizerGroup& group() { return state_->optimizer_groups.at("group0"); }
  const OptimizerGroup& group() const { return state_->optimizer_groups.at("group0"); }

 private:
  Optimizer() = default;
  Status ReadModel(const Model& model);
  Status PrepareState(IExecutionProvider* provider);

  OptimizerKind kind_ = OptimizerKind::kAdamW;
  AdamWConfig adamw_;
  float clip_max_norm_ = -1.0f;  // > 0 when InplaceClipGradNorm precedes the update
  CheckpointState* state_ = nullptr;
  std::vector<std::string> trainable_;
};

// Moment names per optimizer kind ("momentum0", "momentum1").
std::vector<std::string> MomentNames(OptimizerKind kind);

}  // namespace ontrain
