// TrainingSession: ONNX Runtime's on-device training API over ontrain's executor.
//
// A session binds a CheckpointState to a training model (forward + backward + gradient accumulation, in
// ONNX Runtime's artifact conventions), an optional eval model and an optional optimizer model.
// Training-graph inputs are classified as ONNX Runtime does: checkpoint parameter names are parameters,
// `lazy_reset_grad` is the reset flag, names ending in _grad.accumulation.buffer / _grad /
// _grad.accumulation.out are gradients, anything else is a user input. Gradient buffers start at zero;
// the first TrainStep after creation or LazyResetGrad overwrites them, later ones accumulate.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "engine/executor.h"
#include "engine/status.h"
#include "graph/graph.h"
#include "optimizer/optimizer.h"
#include "providers/execution_provider.h"
#include "scheduler/lr_scheduler.h"

namespace ontrain {

// A model given as a file path or as serialized bytes.
struct ModelSource {
  std::string path;
  std::string bytes;
  static ModelSource FromPath(std::string p) { return {std::move(p), ""}; }
  static ModelSource FromBytes(std::string b) { return {"", std::move(b)}; }
  bool empty() const { return path.empty() && bytes.empty(); }
};

struct TrainingSessionOptions {
  // Providers in priority order; the session runs on the first (the planner that splits graphs across
  // several providers comes with the CUDA provider).
  std::vector<IExecutionProvider*> providers;
};

class TrainingSession {
 public:
  // `state` must outlive the session; its parameters move to the session's device.
  static StatusOr<std::unique_ptr<TrainingSession>> Create(const TrainingSessionOptions& options,
                                                           CheckpointState* state, const ModelSource& train,
                                                           const ModelSource& eval = {},
                                                           const ModelSource& optimizer = {});

  // User inputs in training_input_names() order; outputs are host copies, in training_output_names() order.
  Status TrainStep(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs);
  Status EvalStep(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs);
  void LazyResetGrad() { accumulate_ = false; }
  Status OptimizerStep();

  Status SetLearningRate(float lr);
  StatusOr<float> GetLearningRate() const;
  // Registers a schedule starting from `initial_lr` (ONNX Runtime's order: the current rate becomes
  // initial_lr; SchedulerStep applies the factor) and stores it in the checkpoint's property bag.
  Status RegisterScheduler(const LrSchedule& schedule, float initial_lr);
  Status SchedulerStep();

  // Parameter counts and flat copies, in training-graph input order (ONNX Runtime's order).
  StatusOr<size_t> GetParametersSize(bool trainable_only) const;
  Status CopyParametersToBuffer(Tensor* buffer, bool trainable_only);
  Status CopyBufferToParameters(const Tensor& buffer, bool trainable_only);

  // Writes an inference model: the eval graph pruned to `outputs`, parameters embedded as initializers
  // with their current values, inputs that nothing reads any more dropped.
  Status ExportModelForInferencing(const std::string& path, const std::vector<std::string>& outputs);

  const std::vector<std::string>& training_input_names() const { return train_user_inputs_; }
  const std::vector<std::string>& training_output_names() const { return train_user_outputs_; }
  const std::vector<std::string>& eval_input_names() const { return eval_user_inputs_; }
  const std::vector<std::string>& eval_output_names() const { return eval_outputs_; }
  bool has_eval_model() const { return eval_ != nullptr; }
  bool has_optimizer() const { return optimizer_ != nullptr; }
  const Optimizer* optimizer() const { return optimizer_.get(); }
  CheckpointState* state() { return state_; }
  IExecutionProvider* provider() { return provider_; }
  // Gradient accumulation buffer of a trainable parameter (for inspection and tests).
  const Tensor* gradient(const std::string& param) const;

 private:
  TrainingSession() = default;
  Status ClassifyTrainingInputs();
  Status BindParameters();
  Status CheckNotNominal(const char* what) const;
  Status FeedUserInputs(const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                        NamedTensors* feeds) const;

  CheckpointState* state_ = nullptr;
  IExecutionProvider* provider_ = nullptr;
  Model train_model_;
  std::optional<Model> eval_model_;
  std::unique_ptr<Executor> train_;
  std::unique_ptr<Executor> eval_;
  std::unique_ptr<Optimizer> optimizer_;
  std::optional<LrSchedule> schedule_;

  std::vector<std::string> train_user_inputs_, train_user_outputs_, train_params_;
  std::vector<std::string> eval_user_inputs_, eval_outputs_, eval_params_;
  std::vector<std::string> trainable_;                  // training-graph order
  std::map<std::string, std::string> grad_buffer_input_;  // param -> its buffer input name
  std::map<std::string, Tensor> grads_;                   // param -> accumulation buffer
  bool accumulate_ = false;
};

// True when `name` has one of ONNX Runtime's gradient suffixes.
bool IsGradientName(const std::string& name);

}  // namespace ontrain
