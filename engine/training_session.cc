// TrainingSession: input classification, parameter binding, steps, schedules, flat parameter copies.
// ExportModelForInferencing lives in training_export.cc.
#include "engine/training_session.h"

#include <cmath>
#include <cstring>

#include "graph/model_io.h"

namespace ontrain {

namespace {
constexpr const char* kResetInput = "lazy_reset_grad";
const char* const kGradSuffixes[] = {"_grad.accumulation.buffer", "_grad", "_grad.accumulation.out"};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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

bool IsGradientName(const std::string& name) {
  for (const char* s : kGradSuffixes) if (EndsWith(name, s)) return true;
  return false;
}

Status TrainingSession::ClassifyTrainingInputs() {
  const Graph& g = train_model_.graph;
  bool has_reset = false;
  std::map<std::string, bool> is_buffer;
  for (const ValueInfo& v : g.inputs) {
    if (state_->FindParameter(v.name)) train_params_.push_back(v.name);
    else if (v.name == kResetInput) has_reset = true;
    else if (IsGradientName(v.name)) is_buffer[v.name] = true;
    else train_user_inputs_.push_back(v.name);
  }
  if (!has_reset) return InvalidArgument("the training model has no \"lazy_reset_grad\" input");
  for (const std::string& p : train_params_) {
    if (!state_->parameters.at(p).requires_grad) continue;
    std::string buffer = p + "_grad.accumulation.buffer";
    if (!is_buffer.count(buffer)) return InvalidArgument("gradient buffer input not provided for param: ", p);
    trainable_.push_back(p);
    grad_buffer_input_[p] = buffer;
  }
  for (const ValueInfo& v : g.outputs) {
    if (!IsGradientName(v.name)) train_user_outputs_.push_back(v.name);
  }
  return Status::OK();
}

Status TrainingSession::BindParameters() {
  // Parameters move to the session's device; each trainable one gets a zeroed gradient buffer there.
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
    if (p.data.device() != provider_->device()) {
      ONT_ASSIGN_OR_RETURN(Tensor dev, Tensor::Allocate(p.data.dtype(), p.data.shape(), provider_->allocator()));
      ONT_RETURN_IF_ERROR(provider_->CopyTensor(p.data, &dev));
      p.data = dev;
    }
  }
  for (const std::string& name : trainable_) {
    const Tensor& w = state_->parameters.at(name).data;
    ONT_ASSIGN_OR_RETURN(Tensor g, Tensor::Allocate(w.dtype(), w.shape(), provider_->allocator()));
    if (!g.device().is_host()) return Unimplemented("gradient buffers on ", g.device().ToString());
    std::memset(g.raw_data(), 0, g.SizeInBytes());
    grads_[name] = g;
  }
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
  std::unique_ptr<TrainingSession> s(new TrainingSession());
  s->state_ = state;
  s->provider_ = options.providers[0];
  ONT_ASSIGN_OR_RETURN(s->train_model_, LoadSource(train, "training model"));
  ONT_RETURN_IF_ERROR(s->ClassifyTrainingInputs());
  if (!state->is_nominal) ONT_RETURN_IF_ERROR(s->BindParameters());
  ONT_ASSIGN_OR_RETURN(s->train_, Executor::Create(s->train_model_, s->provider_));
  if (!eval.empty()) {
    ONT_ASSIGN_OR_RETURN(Model em, LoadSource(eval, "eval model"));
    for (const ValueInfo& v : em.graph.inputs) {
      (state->FindParameter(v.name) ? s->eval_params_ : s->eval_user_inputs_).push_back(v.name);
    }
    for (const ValueInfo& v : em.graph.outputs) s->eval_outputs_.push_back(v.name);
    ONT_ASSIGN_OR_RETURN(s->eval_, Executor::Create(em, s->provider_));
    s->eval_model_ = std::move(em);
  }
  if (!optimizer.empty()) {
    ONT_ASSIGN_OR_RETURN(Model om, LoadSource(optimizer, "optimizer model"));
    if (state->is_nominal) {
      return Unimplemented("an optimizer over a nominal checkpoint: load the parameters first, then create the session");
    }
    ONT_ASSIGN_OR_RETURN(s->optimizer_, Optimizer::Create(om, state, s->trainable_, s->provider_));
    // A schedule stored in the checkpoint continues where it stopped.
    ONT_ASSIGN_OR_RETURN(std::optional<LrSchedule> sched, LoadSchedule(state->properties));
    if (sched) {
      s->schedule_ = sched;
      ONT_RETURN_IF_ERROR(s->SchedulerStep());
    }
  }
  return s;
}

Status TrainingSession::CheckNotNominal(const char* what) const {
  if (state_->is_nominal) {
    return FailedPrecondition("cannot ", what, " with a nominal checkpoint state; load the parameters first "
                              "(CopyBufferToParameters with trainable_only = false)");
  }
  return Status::OK();
}

Status TrainingSession::FeedUserInputs(const std::vector<std::string>& names, const std::vector<Tensor>& inputs,
                                       NamedTensors* feeds) const {
  if (inputs.size() != names.size()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return InvalidArgument("expected ", names.size(), " user inputs (", list, "), got ", inputs.size());
  }
  for (size_t i = 0; i < names.size(); ++i) feeds->push_back({names[i], inputs[i]});
  return Status::OK();
}

Status TrainingSession::TrainStep(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  ONT_RETURN_IF_ERROR(CheckNotNominal("run TrainStep"));
  NamedTensors feeds;
  ONT_RETURN_IF_ERROR(FeedUserInputs(train_user_inputs_, inputs, &feeds));
  for (const std::string& p : train_params_) feeds.push_back({p, state_->parameters.at(p).data});
  for (const auto& [p, buffer] : grad_buffer_input_) feeds.push_back({buffer, grads_.at(p)});
  feeds.push_back({kResetInput, Tensor::FromVector<bool>({!accumulate_}, {1})});
  std::vector<Tensor> out;
  ONT_RETURN_IF_ERROR(train_->Run(feeds, train_user_outputs_, &out).WithContext("TrainStep"));
  outputs->clear();
  for (const Tensor& t : out) outputs->push_back(t.Clone());
  accumulate_ = true;
  return Status::OK();
}

Status TrainingSession::EvalStep(const std::vector<Tensor>& inputs, std::vector<Tensor>* outputs) {
  if (!eval_) return FailedPrecondition("EvalStep needs an eval model, and this session was created without one");
  ONT_RETURN_IF_ERROR(CheckNotNominal("run EvalStep"));
  NamedTensors feeds;
  ONT_RETURN_IF_ERROR(FeedUserInputs(eval_user_inputs_, inputs, &feeds));
  for (const std::string& p : eval_params_) feeds.push_back({p, state_->parameters.at(p).data});
  std::vector<Tensor> out;
  ONT_RETURN_IF_ERROR(eval_->Run(feeds, eval_outputs_, &out).WithContext("EvalStep"));
  outputs->clear();
  for (const Tensor& t : out) outputs->push_back(t.Clone());
  return Status::OK();
}

Status TrainingSession::OptimizerStep() {
  if (!optimizer_) return FailedPrecondition("OptimizerStep needs an optimizer model, and this session has none");
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
  if (static_cast<size_t>(buffer->NumElements()) != size) {
    return InvalidArgument("parameters buffer size incorrect: expected ", size, ", actual ", buffer->NumElements());
  }
  int64_t offset = 0;
  for (const std::string& name : train_params_) {
    const Parameter& p = state_->parameters.at(name);
    if (trainable_only && !p.requires_grad) continue;
    if (p.data.dtype() != DType::kFloat32) return InvalidArgument("parameter \"", name, "\" is not float32");
    Tensor dst = Tensor::View(DType::kFloat32, p.data.shape(), buffer->data<float>() + offset, buffer->device());
    ONT_RETURN_IF_ERROR(provider_->CopyTensor(p.data, &dst));
    offset += p.data.NumElements();
  }
  return provider_->Synchronize();
}

Status TrainingSession::CopyBufferToParameters(const Tensor& buffer, bool trainable_only) {
  if (state_->is_nominal && trainable_only) {
    return InvalidArgument("for a nominal checkpoint state all parameters must be loaded (trainable_only = false)");
  }
  ONT_ASSIGN_OR_RETURN(size_t size, GetParametersSize(trainable_only));
  if (!buffer.defined() || buffer.dtype() != DType::kFloat32) return InvalidArgument("the buffer must be float32");
  if (static_cast<size_t>(buffer.NumElements()) != size) {
    return InvalidArgument("parameters buffer size incorrect: expected ", size, ", actual ", buffer.NumElements());
  }
  int64_t offset = 0;
  for (const std::string& name : train_params_) {
    Parameter& p = state_->parameters.at(name);
    if (trainable_only && !p.requires_grad) continue;
    if (state_->is_nominal) {  // the graph's declared shape gives the parameter its storage
      ONT_ASSIGN_OR_RETURN(Shape s, StaticShape(*train_model_.graph.FindInput(name)));
      ONT_ASSIGN_OR_RETURN(p.data, Tensor::Allocate(DType::kFloat32, s, provider_->allocator()));
    }
    Tensor src = Tensor::View(DType::kFloat32, p.data.shape(), const_cast<float*>(buffer.data<float>()) + offset,
                              buffer.device());
    ONT_RETURN_IF_ERROR(provider_->CopyTensor(src, &p.data));
    offset += p.data.NumElements();
  }
  if (state_->is_nominal) {
    state_->is_nominal = false;
    ONT_RETURN_IF_ERROR(BindParameters());
  }
  return provider_->Synchronize();
}

const Tensor* TrainingSession::gradient(const std::string& param) const {
  auto it = grads_.find(param);
  return it == grads_.end() ? nullptr : &it->second;
}

}  // namespace ontrain
