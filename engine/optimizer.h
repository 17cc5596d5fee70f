// Optimizer: runs an ONNX Runtime optimizer model against a CheckpointState, as ONNX Runtime's training
// runtime does: an ordinary graph (the optimizer node plus any learning-rate arithmetic, clipping, casts or
// sequence ops around it) fed [learning_rate, step, params, gradients, moments...], where the sequences
// hold the session's own tensors, which the optimizer kernels update in place.
//
// It keeps ONNX Runtime's checks and bookkeeping: the model's kind and exact input signature
// (graph/optimizer_model.h), the moments in the checkpoint's group0 (optimizer/optimizer_state.h), and the
// step counter: each Step() feeds step = group0.step + 1 and counts the step only when the model's first
// output (the updated flag) says the update happened.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/status.h"
#include "engine/executor.h"
#include "graph/graph.h"
#include "graph/optimizer_model.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct OptimizerOptions {
  std::vector<IExecutionProvider*> providers;  // the session's, in priority order
  Device params_device;     // where the trainable parameters live (the session placed them)
  Device gradients_device;  // where the gradient buffers live
  Device moments_device;    // where the moments are to live
  MemoryBudget* budget = nullptr;  // the session's memory cap: charged for the moments and the graph
  Executor* pool_leader = nullptr;  // ExecutorOptions' (the session's training graph)
};

// Where each input of the optimizer model is fed from, for these options.
std::map<std::string, Device> OptimizerInputDevices(const OptimizerOptions& options);

class Optimizer {
 public:
  // `trainable` lists the parameters to update (the training graph's order).
  static StatusOr<std::unique_ptr<Optimizer>> Create(const Model& model, CheckpointState* state,
                                                     const std::vector<std::string>& trainable,
                                                     const OptimizerOptions& options);
  // Single-provider convenience: everything on `provider`'s device.
  static StatusOr<std::unique_ptr<Optimizer>> Create(const Model& model, CheckpointState* state,
                                                     const std::vector<std::string>& trainable,
                                                     IExecutionProvider* provider);

  // Runs the optimizer model once over every trainable parameter and its gradient (same shape).
  Status Step(const std::map<std::string, Tensor>& gradients);

  OptimizerKind kind() const { return info_.kind; }
  const AdamWConfig& adamw_config() const { return info_.adamw; }
  float learning_rate() const { return group().learning_rate; }
  void set_learning_rate(float lr) { group().learning_rate = lr; }
  // Sets both the initial and the current rate (ONNX Runtime's SetInitialLearningRate).
  void set_initial_learning_rate(float lr);
  int64_t step() const { return group().step; }
  OptimizerGroup& group() { return state_->optimizer_groups.at("group0"); }
  const OptimizerGroup& group() const { return state_->optimizer_groups.at("group0"); }
  const Executor& executor() const { return *executor_; }

 private:
  Optimizer() = default;

  OptimizerModelInfo info_;
  CheckpointState* state_ = nullptr;
  std::vector<std::string> trainable_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::string> output_names_;
  Tensor lr_, step_;  // host [1] feeds, reused every step
  // The feeds (names, and sequences refilled in place) and outputs, kept so that a step allocates nothing.
  NamedValues feeds_;
  std::vector<Tensor> out_;
  Tensor flag_;  // the updated flag read back from a device, reused from step to step
};

}  // namespace ontrain
