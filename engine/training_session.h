// TrainingSession: ONNX Runtime's on-device training API over ontrain's executor.
//
// A session binds a CheckpointState to a training model (forward + backward + gradient accumulation, in
// ONNX Runtime's artifact conventions), an optional eval model and an optional optimizer model.
// Training-graph inputs are classified as ONNX Runtime does: checkpoint parameter names are parameters,
// `lazy_reset_grad` is the reset flag, names ending in _grad.accumulation.buffer / _grad /
// _grad.accumulation.out are gradients, anything else is a user input. Gradient buffers start at zero;
// the first TrainStep after creation or LazyResetGrad overwrites them, later ones accumulate.
//
// Placement: the graphs are partitioned across the session's providers (engine/partition.h), and the
// training state lives where it is used, once, from creation: each parameter on the device of the node
// that updates it in place (the optimizer node) or else of its first reader, each gradient buffer on the
// device of its accumulator, the moments on the optimizer node's device. A step then moves only the user
// inputs in and the fetched outputs out. The state's tensors stay readable and savable while they are on
// a device (the session names its devices in CheckpointState::devices), and move back to the host when
// the session ends.
//
// Data parallelism: with a communicator of more than one rank, creation broadcasts every parameter from
// rank 0 (after checking that every rank's checkpoint has the same parameters), the gradient buffers of
// each device are carved from one flat buffer, and OptimizerStep first averages that buffer across ranks in
// buckets of bucket_bytes (staged through the host when the communicator cannot read the device), so every
// rank applies the same update. TrainStep and EvalStep stay local: each rank feeds its own shard.
//
// Threads (tests/engine/concurrent_sessions_test.cc, also run under --config=tsan):
// - A session and its CheckpointState are used by one thread at a time: no method of a session may run
//   while another of the same session (or a save of its state) runs. Nothing here locks; the caller does.
// - Separate sessions may run concurrently in separate threads, each with its own CheckpointState, and
//   give the same bits as when run one after the other. They may share a CPU provider (its thread pool runs
//   one parallel loop at a time and a concurrent caller's loop inline), model files and artifact folders
//   (only read), and anything process-wide (the kernel registry, the host allocator, loaded provider
//   libraries). Other providers (CUDA) serve one session at a time: give each concurrent session its own.
// - A session's tensors handed out by steps are host copies owned by the caller; parameter buffers and
//   the state's tensors belong to the session's thread while it runs.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/status.h"
#include "distributed/communicator.h"
#include "engine/executor.h"
#include "engine/optimizer.h"
#include "engine/session_plan.h"
#include "graph/graph.h"
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
  // Providers in priority order; each node runs on the first that has a kernel for it. The last must be
  // the CPU provider (the fallback); a list without one is an error.
  std::vector<IExecutionProvider*> providers;
  // Data-parallel training when set and of more than one rank; it must outlive the session.
  Communicator* communicator = nullptr;
  // Gradients are averaged in pieces of at most this many bytes (one collective each).
  int64_t bucket_bytes = 8 << 20;
  // 0: gradients are averaged in OptimizerStep, after the backward pass. K >= 1: OptimizerStep follows every
  // K TrainSteps, and during the K-th the session starts averaging each bucket of host gradients as soon as
  // the backward pass has finished writing it, overlapping communication with the rest of the backward
  // pass; OptimizerStep waits for what is left. A further TrainStep before OptimizerStep is then an error.
  int64_t gradient_accumulation_steps = 0;
  // A cap, in bytes, on the memory the session plans: parameters, gradient buffers, optimizer moments and
  // every graph's intermediate values (the arenas it keeps, and a first run's live values at new shapes).
  // Creation or a step that would pass it fails before allocating, naming the graph and the value. 0: none.
  int64_t memory_limit_bytes = 0;
};

// Time and volume of the gradient all-reduces so far (zero without a communicator).
struct CommunicationStats {
  int64_t allreduces = 0;  // OptimizerSteps that averaged gradients
  int64_t buckets = 0;     // collectives issued
  int64_t bytes = 0;       // gradient bytes averaged, summed over steps
  double seconds = 0;      // wall time in the collectives (including host staging)
  int64_t overlapped = 0;  // buckets started while the backward pass was still running
};

class TrainingSession {
 public:
  // `state` must outlive the session; its parameters move to the devices that use them.
  static StatusOr<std::unique_ptr<TrainingSession>> Create(const TrainingSessionOptions& options,
                                                           CheckpointState* state, const ModelSource& train,
                                                           const ModelSource& eval = {},
                                                           const ModelSource& optimizer = {});
  // Moves the state's tensors back to the host.
  ~TrainingSession();

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

  // Parameter counts and flat host copies, in training-graph input order (ONNX Runtime's order).
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
  const std::vector<IExecutionProvider*>& providers() const { return providers_; }
  // The executors (for inspection: partition, copies, arenas); eval may be null.
  const Executor& train_executor() const { return *train_; }
  const Executor* eval_executor() const { return eval_.get(); }
  // Gradient accumulation buffer of a trainable parameter, where it lives (for inspection and tests).
  const Tensor* gradient(const std::string& param) const;
  // Where each state tensor (parameters by name, gradient buffers by input name) was placed.
  const std::map<std::string, Device>& placement() const { return devices_; }
  // The communicator given at creation (null when none), and what averaging gradients has cost.
  Communicator* communicator() const { return comm_; }
  const CommunicationStats& communication_stats() const { return comm_stats_; }

 private:
  TrainingSession() = default;
  Status BindParameters();
  Status ChargeStateMemory();
  bool data_parallel() const { return comm_ != nullptr && comm_->size() > 1; }
  Status BroadcastParameters();
  Status LayoutGradients();
  Status PlanOverlap();
  Status AverageGradients();
  Status StartReadyBuckets(int pos);
  Status CheckNotNominal(const char* what) const;
  Status FeedUserInputs(const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                        NamedValues* feeds) const;
  Status OutputsToHost(const Executor& ex, const std::vector<Tensor>& out, std::vector<Tensor>* cache,
                       std::vector<Tensor>* outputs);
  IDataTransfer* TransferFor(Device d) const;

  CheckpointState* state_ = nullptr;
  std::vector<IExecutionProvider*> providers_;
  MemoryBudget budget_;  // declared before the executors, which charge it until they are destroyed
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
  std::map<std::string, Device> devices_;                 // state tensor -> its device
  Device gradients_device_, moments_device_;
  Tensor reset_flag_;                                     // host bool [1], fed as lazy_reset_grad
  // Data parallelism: the communicator, one flat gradient buffer per device (grads_ are views into them),
  // and the buckets that cover those buffers.
  struct Bucket {
    Tensor flat;         // view: a piece of one device's flat gradient buffer
    Tensor host;         // its host staging copy, when the communicator cannot read that device
    int ready_pos = -1;  // the training run's step after which no step touches it (overlap)
    int request = Communicator::kDone;
    bool started = false;
  };
  struct BucketStarter : RunObserver {
    TrainingSession* s = nullptr;
    Status AfterStep(size_t pos) override { return s->StartReadyBuckets(static_cast<int>(pos)); }
  };
  Communicator* comm_ = nullptr;
  int64_t bucket_bytes_ = 0;
  int64_t overlap_every_ = 0;      // gradient_accumulation_steps
  int64_t window_steps_ = 0;       // TrainSteps since the last OptimizerStep
  bool window_started_ = false;    // this window's buckets have been started (the K-th TrainStep ran)
  size_t next_bucket_ = 0;         // buckets_ are in ready order; the next one to start
  std::vector<std::string> grad_order_;  // flat layout order of the gradients (by when the backward finishes them)
  BucketStarter starter_;
  std::vector<Tensor> flat_grads_;
  std::vector<Bucket> buckets_;
  CommunicationStats comm_stats_;
  bool accumulate_ = false;
  // Per step, kept so that a step allocates nothing: the feeds (names fixed at the first step, values
  // refreshed), the executor's outputs, and the host copies handed out (reused when the caller has let
  // go of them).
  NamedValues train_feeds_, eval_feeds_;
  std::vector<Tensor> train_out_, eval_out_, train_host_, eval_host_;
  std::vector<IDataTransfer*> output_waits_;  // OutputsToHost: the devices its queued copies wait for
};

}  // namespace ontrain
