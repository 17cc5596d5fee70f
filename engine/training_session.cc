// TrainingSession: input classification, state placement and binding, steps, schedules, flat parameter
// copies. ExportModelForInferencing lives in training_export.cc, the data-parallel buckets in
// training_session_parallel.cc.
#include "engine/training_session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/session_plan.h"
#include "graph/model_io.h"
#include "optimizer/optimizer_state.h"

namespace ontrain {

namespace {
constexpr const char* kResetInput = "lazy_reset_grad";

StatusOr<Model> LoadSource(const ModelSource& src, const char* what) {
  StatusOr<Model> m = src.path.empty() ? LoadModelFromBuffer(src.bytes.data(), src.bytes.size(), "")
                                       : LoadModel(src.path);
  if (!m.ok()) return m.status().WithContext(what);
  return m;
}

// The graph input's declared static shape, or an error when a dim is symbolic.
StatusOr<Shape> StaticShape(const ValueInfo& v) {
  if (!v.has_shape) return InvalidArgument("input \"", v.name, "\" has no declared shape");
  Shape s;
  for (const Dim& d : v.dims) {
    if (!d.known()) return InvalidArgument("input \"", v.name, "\" has a symbolic dimension: ", v.TypeString());
    s.push_back(d.value);
  }
  return s;
}

}  // namespace

Status TrainingSession::BindParameters() {
  train_feeds_.clear();  // the parameters and buffers fed from now on may be other tensors
  eval_feeds_.clear();
  // Parameters move to their devices; each trainable one gets a zeroed gradient buffer on its device.
  for (const std::string& name : train_params_) {
    Parameter& p = *state_->FindParameter(name);
    const ValueInfo* info = train_model_.graph.FindInput(name);
    if (info->dtype != DType::kUndefined && info->dtype != p.data.dtype()) {
      return InvalidArgument("parameter \"", name, "\" is ", DTypeName(p.data.dtype()), " in the checkpoint but ",
                             info->TypeString(), " in the training model");
    }
    auto declared = StaticShape(*info);
    if (declared.ok() && declared.value() != p.data.shape()) {
      return InvalidArgument("parameter \"", name, "\" has shape ", ShapeToString(p.data.shape()),
                             " in the checkpoint but ", info->TypeString(), " in the training model");
    }
    Device d = devices_.at(name);
    if (p.data.device() == d) continue;
    ONT_ASSIGN_OR_RETURN(Tensor host, CopyToHost(p.data, state_->devices));
    IExecutionProvider* provider = providers_[ProviderIndexFor(providers_, d)];
    ONT_ASSIGN_OR_RETURN(p.data, PlaceTensor(host, host, {provider->allocator(), provider}));
  }
  if (!data_parallel()) {
    for (const std::string& name : trainable_) {
      const Tensor& w = state_->parameters.at(name).data;
      IExecutionProvider* provider = providers_[ProviderIndexFor(providers_, devices_.at(grad_buffer_input_.at(name)))];
      ONT_ASSIGN_OR_RETURN(grads_[name], PlaceTensor(w, Tensor(), {provider->allocator(), provider}));
    }
    return Status::OK();
  }
  return LayoutGradients();
}

Status TrainingSession::LayoutGradients() {
  // Data parallel: per device, one zeroed flat buffer holding every gradient (each starting on a 64-byte
  // boundary), so that averaging is a few large collectives over contiguous memory instead of one per tensor,
  // in grad_order_ (the order the backward pass finishes them, once the training executor exists).
  constexpr int64_t kAlign = 16;  // floats
  if (grad_order_.size() != trainable_.size()) grad_order_ = trainable_;
  std::vector<Device> devices;
  for (const std::string& name : grad_order_) {
    const Tensor& w = state_->parameters.at(name).data;
    if (w.dtype() != DType::kFloat32) {
      return Unimplemented("data-parallel training averages float32 gradients; parameter \"", name, "\" is ",
                           DTypeName(w.dtype()));
    }
    Device d = devices_.at(grad_buffer_input_.at(name));
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  flat_grads_.clear();
  buckets_.clear();
  for (const Device& d : devices) {
    int64_t total = 0;
    for (const std::string& name : grad_order_) {
      if (devices_.at(grad_buffer_input_.at(name)) != d) continue;
      total += (state_->parameters.at(name).data.NumElements() + kAlign - 1) / kAlign * kAlign;
    }
    IExecutionProvider* provider = providers_[ProviderIndexFor(providers_, d)];
    ONT_ASSIGN_OR_RETURN(Tensor flat, PlaceTensor(Tensor::View(DType::kFloat32, {total}, nullptr, d), Tensor(),
                                                  {provider->allocator(), provider}));
    int64_t offset = 0;
    for (const std::string& name : grad_order_) {
      if (devices_.at(grad_buffer_input_.at(name)) != d) continue;
      const Tensor& w = state_->parameters.at(name).data;
      grads_[name] = flat.SubView(static_cast<size_t>(offset) * sizeof(float), DType::kFloat32, w.shape());
      offset += (w.NumElements() + kAlign - 1) / kAlign * kAlign;
    }
    const int64_t per = std::max<int64_t>(kAlign, bucket_bytes_ / static_cast<int64_t>(sizeof(float)) / kAlign * kAlign);
    for (int64_t b = 0; b < total; b += per) {
      Bucket bucket;
      int64_t n = std::min(per, total - b);
      bucket.flat = flat.SubView(static_cast<size_t>(b) * sizeof(float), DType::kFloat32, {n});
      if (!d.is_host() && !comm_->Accepts(d)) {
        ONT_ASSIGN_OR_RETURN(bucket.host, Tensor::Allocate(DType::kFloat32, {n}, HostAllocator()));
      }
      buckets_.push_back(std::move(bucket));
    }
    flat_grads_.push_back(std::move(flat));
  }
  return Status::OK();
}

Status TrainingSession::ChargeStateMemory() {
  // Every parameter once, and a gradient buffer of the same size per trainable one.
  size_t bytes = 0, largest = 0;
  std::string largest_name;
  for (const std::string& name : train_params_) {
    const Parameter* p = state_->FindParameter(name);
    if (p == nullptr) continue;
    size_t b = p->data.SizeInBytes() * (p->requires_grad ? 2 : 1);
    bytes += b;
    if (b > largest) largest = b, largest_name = name;
  }
  if (bytes > budget_.limit) {
    return ResourceExhausted("the training graph's parameters and gradient buffers need ", bytes,
                             " bytes, over the session's memory limit of ", budget_.limit, " (the largest, \"",
                             largest_name, "\", needs ", largest, ")");
  }
  budget_.planned += bytes;
  return Status::OK();
}

StatusOr<std::unique_ptr<TrainingSession>> TrainingSession::Create(const TrainingSessionOptions& options,
                                                                   CheckpointState* state, const ModelSource& train,
                                                                   const ModelSource& eval,
                                                                   const ModelSource& optimizer) {
  if (options.providers.empty() || options.providers[0] == nullptr) {
    return InvalidArgument("a training session needs at least one execution provider");
  }
  if (state == nullptr) return InvalidArgument("a training session needs a checkpoint state");
  if (train.empty()) return InvalidArgument("training session creation failed: train model data cannot be empty");
  // A state lives on one session's devices at a time: a second session would move it away from the first,
  // whose steps would then fail, and the first one's end would move it back from under the second.
  auto on_device = [&](const std::string& what, const Tensor& t) -> Status {
    if (!t.defined() || t.device().is_host()) return Status::OK();
    return FailedPrecondition("the checkpoint state is held on ", t.device().ToString(), " by another training session (",
                              what, "); release that session before creating another over the same state");
  };
  for (const auto& [name, p] : state->parameters) ONT_RETURN_IF_ERROR(on_device(StrCat("parameter \"", name, "\""), p.data));
  for (const auto& [gname, group] : state->optimizer_groups) {
    for (const auto& [pname, ps] : group.param_states) {
      for (const auto& [mname, m] : ps.momentums) {
        ONT_RETURN_IF_ERROR(on_device(StrCat("optimizer state \"", pname, "/", mname, "\""), m));
      }
    }
  }
  std::unique_ptr<TrainingSession> s(new TrainingSession());
  s->state_ = state;
  s->providers_ = options.providers;
  s->comm_ = options.communicator;
  s->bucket_bytes_ = options.bucket_bytes > 0 ? options.bucket_bytes : (8 << 20);
  if (options.gradient_accumulation_steps < 0) {
    return InvalidArgument("gradient_accumulation_steps must be >= 0, got ", options.gradient_accumulation_steps);
  }
  s->overlap_every_ = options.gradient_accumulation_steps;
  // 1. Models; where the state goes; the state named devices so that it can be read and saved.
  ONT_ASSIGN_OR_RETURN(s->train_model_, LoadSource(train, "training model"));
  std::optional<Model> em, om;
  if (!eval.empty()) {
    ONT_ASSIGN_OR_RETURN(em, LoadSource(eval, "eval model"));
  }
  if (!optimizer.empty()) {
    ONT_ASSIGN_OR_RETURN(om, LoadSource(optimizer, "optimizer model"));
    if (state->is_nominal) {
      return Unimplemented("an optimizer over a nominal checkpoint: load the parameters first, then create the session");
    }
  }
  ONT_ASSIGN_OR_RETURN(SessionPlan plan, PlanSession(s->train_model_, em ? &*em : nullptr, om ? &*om : nullptr,
                                                     *state, s->providers_));
  s->train_user_inputs_ = plan.user_inputs;
  s->train_user_outputs_ = plan.user_outputs;
  s->train_params_ = plan.params;
  s->trainable_ = plan.trainable;
  s->grad_buffer_input_ = plan.grad_buffer;
  s->devices_ = plan.devices;
  s->gradients_device_ = plan.gradients_device;
  s->moments_device_ = plan.moments_device;
  for (IExecutionProvider* p : s->providers_) {
    if (!p->device().is_host() && !FindTransfer(state->devices, p->device())) state->devices.push_back(p);
  }
  if (options.memory_limit_bytes < 0) {
    return InvalidArgument("memory_limit_bytes must be >= 0, got ", options.memory_limit_bytes);
  }
  s->budget_.limit = static_cast<size_t>(options.memory_limit_bytes);
  if (s->budget_.limit > 0) ONT_RETURN_IF_ERROR(s->ChargeStateMemory());
  if (!state->is_nominal) {
    ONT_RETURN_IF_ERROR(s->BindParameters());
    if (s->data_parallel()) ONT_RETURN_IF_ERROR(s->BroadcastParameters().WithContext("data-parallel start"));
  }
  // 2. One executor per graph, planned for where the state is fed from.
  ExecutorOptions to;
  to.providers = s->providers_;
  to.input_devices = s->devices_;
  to.budget = &s->budget_;
  to.name = "training graph";
  ONT_ASSIGN_OR_RETURN(s->train_, Executor::Create(s->train_model_, to).WithContext("training model"));
  if (s->data_parallel() && s->overlap_every_ > 0 && !state->is_nominal) ONT_RETURN_IF_ERROR(s->PlanOverlap());
  if (em) {
    for (const ValueInfo& v : em->graph.inputs) {
      (state->FindParameter(v.name) ? s->eval_params_ : s->eval_user_inputs_).push_back(v.name);
    }
    for (const ValueInfo& v : em->graph.outputs) s->eval_outputs_.push_back(v.name);
    to.name = "eval graph";  // tunes its own pool use: eval batches run back to back, apart from training
    ONT_ASSIGN_OR_RETURN(s->eval_, Executor::Create(*em, to).WithContext("eval model"));
    s->eval_model_ = std::move(em);
  }
  if (om) {
    OptimizerOptions oo;
    oo.providers = s->providers_;
    if (!s->trainable_.empty()) oo.params_device = s->devices_.at(s->trainable_[0]);
    oo.gradients_device = s->gradients_device_;
    oo.moments_device = s->moments_device_;
    oo.budget = &s->budget_;
    oo.pool_leader = s->train_.get();  // timed and decided with the training graph (engine/pool_tuner.h)
    ONT_ASSIGN_OR_RETURN(s->optimizer_, Optimizer::Create(*om, state, s->trainable_, oo));
    // A schedule stored in the checkpoint continues where it stopped.
    ONT_ASSIGN_OR_RETURN(std::optional<LrSchedule> sched, LoadSchedule(state->properties));
    if (sched) {
      s->schedule_ = sched;
      ONT_RETURN_IF_ERROR(s->SchedulerStep());
    }
  }
  s->reset_flag_ = Tensor::FromVector<bool>({true}, {1});
  return s;
}

TrainingSession::~TrainingSession() {
  if (state_ == nullptr) return;
  // The state outlives the session: its tensors come back to the host while the devices still exist. A
  // failed copy leaves the tensor where it is (its memory stays valid: allocators live as long as it).
  auto to_host = [&](Tensor* t) {
    if (!t->defined() || t->device().is_host()) return;
    auto host = CopyToHost(*t, state_->devices);
    if (host.ok()) *t = std::move(host).value();
  };
  for (auto& [name, p] : state_->parameters) to_host(&p.data);
  for (auto& [gname, group] : state_->optimizer_groups) {
    for (auto& [pname, ps] : group.param_states) {
      for (auto& [mname, m] : ps.momentums) to_host(&m);
    }
  }
  auto& devs = state_->devices;
  for (IExecutionProvider* p : providers_) devs.erase(std::remove(devs.begin(), devs.end(), p), devs.end());
}

IDataTransfer* TrainingSession::TransferFor(Device d) const {
  int p = ProviderIndexFor(providers_, d);
  return p < 0 ? nullptr : providers_[p];
}

Status TrainingSession::CheckNotNominal(const char* what) const {
  if (state_->is_nominal) {
    return FailedPrecondition("cannot ", what, " with a nominal checkpoint state; load the parameters first "
                              "(CopyBufferToParameters with trainable_only = false)");
  }
  return Status::OK();
}

Status TrainingSession::FeedUserInputs(const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                                       NamedValues* feeds) const {
  if (inputs.size() != names.size()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return InvalidArgument("expected ", names.size(), " user inputs (", list, "), got ", inputs.size());
  }
  // `feeds` starts with the user inputs: named at the first call, given their values at every call.
  if (feeds->size() < names.size()) {
    feeds->clear();
    for (const std::string& n : names) feeds->push_back({n, Value()});
  }
  for (size_t i = 0; i < names.size(); ++i) (*feeds)[i].second = inputs[i];
  return Status::OK();
}

Status TrainingSession::OutputsToHost(const Executor& ex, const std::vector<Tensor>& out, std::vector<Tensor>* cache,
                                      std::vector<Tensor>* outputs) {
  outputs->clear();
  cache->resize(out.size());
  output_waits_.clear();
  for (size_t i = 0; i < out.size(); ++i) {
    const Tensor& t = out[i];
    if (t.device().is_host()) {
      // The executor's tensor is a view into its arena: the caller gets a copy, written into last step's copy
      // when nothing else holds that one any more.
      Tensor& c = (*cache)[i];
      if (c.SoleOwner() && c.dtype() == t.dtype() && c.shape() == t.shape() && t.dtype() != DType::kString) {
        if (t.SizeInBytes() > 0) std::memcpy(c.raw_data(), t.raw_data(), t.SizeInBytes());
      } else {
        c = t.Clone();
      }
      outputs->push_back(c);
      continue;
    }
    // From the device into last step's host copy when nothing else holds that one any more; every copy is
    // queued first, then each device waited for once.
    IDataTransfer* transfer = nullptr;
    ONT_RETURN_IF_ERROR(ex.QueueToHost(t, &(*cache)[i], &transfer));
    if (std::find(output_waits_.begin(), output_waits_.end(), transfer) == output_waits_.end()) {
      output_waits_.push_back(transfer);
    }
    outputs->push_back((*cache)[i]);
  }
  for (IDataTransfer* t : output_waits_) ONT_RETURN_IF_ERROR(t->Synchronize());
  return Status::OK();
}

Status TrainingSession::TrainStep(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  ONT_RETURN_IF_ERROR(CheckNotNominal("run TrainStep"));
  NamedValues& feeds = train_feeds_;
  ONT_RETURN_IF_ERROR(FeedUserInputs(train_user_inputs_, inputs, &feeds));
  size_t k = inputs.size();
  if (feeds.size() == k) {  // the first step names the rest
    for (const std::string& p : train_params_) feeds.push_back({p, Value()});
    for (const auto& [p, buffer] : grad_buffer_input_) feeds.push_back({buffer, Value()});
    feeds.push_back({kResetInput, Value()});
  }
  for (const std::string& p : train_params_) feeds[k++].second = state_->parameters.at(p).data;
  for (const auto& [p, buffer] : grad_buffer_input_) feeds[k++].second = grads_.at(p);
  reset_flag_.data<bool>()[0] = !accumulate_;
  feeds[k].second = reset_flag_;
  // The K-th TrainStep of a window (gradient_accumulation_steps = K) starts averaging buckets as they complete.
  RunObserver* observer = nullptr;
  if (data_parallel() && overlap_every_ > 0 && starter_.s != nullptr) {
    if (window_started_) {
      return FailedPrecondition("TrainStep: this window's gradients are already being averaged across ranks "
                                "(gradient_accumulation_steps = ", overlap_every_, "); call OptimizerStep first");
    }
    if (window_steps_ + 1 == overlap_every_) {
      observer = &starter_;
      next_bucket_ = 0;
    }
  }
  ONT_RETURN_IF_ERROR(train_->Run(feeds, train_user_outputs_, &train_out_, observer).WithContext("TrainStep"));
  ++window_steps_;
  if (observer != nullptr) {
    ONT_RETURN_IF_ERROR(StartReadyBuckets(std::numeric_limits<int>::max()).WithContext("TrainStep"));
    window_started_ = true;
  }
  ONT_RETURN_IF_ERROR(OutputsToHost(*train_, train_out_, &train_host_, outputs).WithContext("TrainStep"));
  accumulate_ = true;
  return Status::OK();
}

Status TrainingSession::EvalStep(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  if (!eval_) return FailedPrecondition("EvalStep needs an eval model, and this session was created without one");
  ONT_RETURN_IF_ERROR(CheckNotNominal("run EvalStep"));
  NamedValues& feeds = eval_feeds_;
  ONT_RETURN_IF_ERROR(FeedUserInputs(eval_user_inputs_, inputs, &feeds));
  size_t k = inputs.size();
  if (feeds.size() == k) {
    for (const std::string& p : eval_params_) feeds.push_back({p, Value()});
  }
  for (const std::string& p : eval_params_) feeds[k++].second = state_->parameters.at(p).data;
  ONT_RETURN_IF_ERROR(eval_->Run(feeds, eval_outputs_, &eval_out_).WithContext("EvalStep"));
  return OutputsToHost(*eval_, eval_out_, &eval_host_, outputs).WithContext("EvalStep");
}

Status TrainingSession::OptimizerStep() {
  if (!optimizer_) return FailedPrecondition("OptimizerStep needs an optimizer model, and this session has none");
  if (data_parallel()) ONT_RETURN_IF_ERROR(AverageGradients().WithContext("OptimizerStep: averaging gradients across ranks"));
  window_steps_ = 0;
  window_started_ = false;
  return optimizer_->Step(grads_).WithContext("OptimizerStep");
}

Status TrainingSession::SetLearningRate(float lr) {
  if (!optimizer_) return FailedPrecondition("no optimizer: SetLearningRate needs an optimizer model");
  if (!(lr >= 0.0f) || std::isinf(lr)) return InvalidArgument("learning rate must be a finite value >= 0, got ", lr);
  optimizer_->set_learning_rate(lr);
  return Status::OK();
}

StatusOr<float> TrainingSession::GetLearningRate() const {
  if (!optimizer_) return FailedPrecondition("no optimizer: GetLearningRate needs an optimizer model");
  return optimizer_->learning_rate();
}

Status TrainingSession::RegisterScheduler(const LrSchedule& schedule, float initial_lr) {
  if (!optimizer_) return FailedPrecondition("no optimizer: RegisterScheduler needs an optimizer model");
  ONT_RETURN_IF_ERROR(ValidateSchedule(schedule));
  schedule_ = schedule;
  optimizer_->set_initial_learning_rate(initial_lr);
  StoreSchedule(schedule, &state_->properties);
  return Status::OK();
}

Status TrainingSession::SchedulerStep() {
  if (!schedule_) return FailedPrecondition("no learning rate scheduler was registered; register one first");
  OptimizerGroup& g = state_->optimizer_groups.at("group0");
  g.learning_rate = g.initial_learning_rate * LrFactor(*schedule_, g.step);
  return Status::OK();
}

StatusOr<size_t> TrainingSession::GetParametersSize(bool trainable_only) const {
  size_t total = 0;
  for (const std::string& name : train_params_) {
    const Parameter& p = state_->parameters.at(name);
    if (trainable_only && !p.requires_grad) continue;
    if (!state_->is_nominal) {
      total += static_cast<size_t>(p.data.NumElements());
      continue;
    }
    ONT_ASSIGN_OR_RETURN(Shape s, StaticShape(*train_model_.graph.FindInput(name)));
    total += static_cast<size_t>(ShapeNumElements(s));
  }
  return total;
}

Status TrainingSession::CopyParametersToBuffer(Tensor* buffer, bool trainable_only) {
  ONT_RETURN_IF_ERROR(CheckNotNominal("copy parameters to a buffer"));
  ONT_ASSIGN_OR_RETURN(size_t size, GetParametersSize(trainable_only));
  if (buffer == nullptr || !buffer->defined()) return InvalidArgument("the parameters buffer must be pre-allocated");
  if (buffer->dtype() != DType::kFloat32) return InvalidArgument("only float32 parameter buffers are supported");
  if (!buffer->device().is_host()) return InvalidArgument("the parameters buffer must be on the host");
  if (static_cast<size_t>(buffer->NumElements()) != size) {
    return InvalidArgument("parameters buffer size incorrect: expected ", size, ", actual ", buffer->NumElements());
  }
  int64_t offset = 0;
  std::vector<IDataTransfer*> used;
  for (const std::string& name : train_params_) {
    const Parameter& p = state_->parameters.at(name);
    if (trainable_only && !p.requires_grad) continue;
    if (p.data.dtype() != DType::kFloat32) return InvalidArgument("parameter \"", name, "\" is not float32");
    Tensor dst = Tensor::View(DType::kFloat32, p.data.shape(), buffer->data<float>() + offset);
    IDataTransfer* t = TransferFor(p.data.device());
    if (t == nullptr) return Internal("parameter \"", name, "\" is on ", p.data.device().ToString(), ", which no provider serves");
    ONT_RETURN_IF_ERROR(t->CopyTensor(p.data, &dst));
    if (std::find(used.begin(), used.end(), t) == used.end()) used.push_back(t);
    offset += p.data.NumElements();
  }
  for (IDataTransfer* t : used) ONT_RETURN_IF_ERROR(t->Synchronize());
  return Status::OK();
}

Status TrainingSession::CopyBufferToParameters(const Tensor& buffer, bool trainable_only) {
  if (state_->is_nominal && trainable_only) {
    return InvalidArgument("for a nominal checkpoint state all parameters must be loaded (trainable_only = false)");
  }
  ONT_ASSIGN_OR_RETURN(size_t size, GetParametersSize(trainable_only));
  if (!buffer.defined() || buffer.dtype() != DType::kFloat32) return InvalidArgument("the buffer must be float32");
  if (!buffer.device().is_host()) return InvalidArgument("the buffer must be on the host");
  if (static_cast<size_t>(buffer.NumElements()) != size) {
    return InvalidArgument("parameters buffer size incorrect: expected ", size, ", actual ", buffer.NumElements());
  }
  int64_t offset = 0;
  std::vector<IDataTransfer*> used;
  for (const std::string& name : train_params_) {
    Parameter& p = state_->parameters.at(name);
    if (trainable_only && !p.requires_grad) continue;
    if (state_->is_nominal) {  // the graph's declared shape gives the parameter its storage, on the host
      ONT_ASSIGN_OR_RETURN(Shape s, StaticShape(*train_model_.graph.FindInput(name)));
      ONT_ASSIGN_OR_RETURN(p.data, Tensor::Allocate(DType::kFloat32, s, HostAllocator()));
    }
    Tensor src = Tensor::View(DType::kFloat32, p.data.shape(), const_cast<float*>(buffer.data<float>()) + offset);
    IDataTransfer* t = p.data.device().is_host() ? providers_.back() : TransferFor(p.data.device());
    if (t == nullptr) return Internal("parameter \"", name, "\" is on ", p.data.device().ToString(), ", which no provider serves");
    ONT_RETURN_IF_ERROR(t->CopyTensor(src, &p.data));
    if (std::find(used.begin(), used.end(), t) == used.end()) used.push_back(t);
    offset += p.data.NumElements();
  }
  for (IDataTransfer* t : used) ONT_RETURN_IF_ERROR(t->Synchronize());
  if (state_->is_nominal) {
    state_->is_nominal = false;
    ONT_RETURN_IF_ERROR(BindParameters());
    if (data_parallel()) ONT_RETURN_IF_ERROR(BroadcastParameters().WithContext("data-parallel start"));
    if (data_parallel() && overlap_every_ > 0) ONT_RETURN_IF_ERROR(PlanOverlap());
  }
  return Status::OK();
}

const Tensor* TrainingSession::gradient(const std::string& param) const {
  auto it = grads_.find(param);
  return it == grads_.end() ? nullptr : &it->second;
}

}  // namespace ontrain
