// Optimizer: checks, state placement, and one graph run per step.
#include "engine/optimizer.h"

#include "optimizer/optimizer_state.h"

namespace ontrain {

std::map<std::string, Device> OptimizerInputDevices(const OptimizerOptions& o) {
  return {{"params", o.params_device},
          {"gradients", o.gradients_device},
          {"first_order_moments", o.moments_device},
          {"second_order_moments", o.moments_device}};
}

StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const Model& model, CheckpointState* state,
                                                       const std::vector<std::string>& trainable,
                                                       IExecutionProvider* provider) {
  OptimizerOptions o;
  o.providers = {provider};
  o.params_device = o.gradients_device = o.moments_device = provider->device();
  return Create(model, state, trainable, o);
}

StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const Model& model, CheckpointState* state,
                                                       const std::vector<std::string>& trainable,
                                                       const OptimizerOptions& options) {
  if (trainable.empty()) return InvalidArgument("the optimizer needs at least one trainable parameter");
  std::unique_ptr<Optimizer> opt(new Optimizer());
  opt->state_ = state;
  opt->trainable_ = trainable;
  // 1. ONNX Runtime's checks: one optimizer node of one kind, the exact input signature, an output to read.
  ONT_ASSIGN_OR_RETURN(opt->info_, ReadOptimizerModel(model));
  if (model.graph.outputs.empty()) return InvalidArgument("the optimizer model has no output (the updated flag)");
  opt->output_names_ = {model.graph.outputs[0].name};
  // 2. Moments restored or created in group0, on their device.
  int p = ProviderIndexFor(options.providers, options.moments_device);
  if (p < 0) return InvalidArgument("no provider serves ", options.moments_device.ToString(), " for the moments");
  MomentPlacement placement{options.providers[p]->allocator(), options.providers[p]};
  if (options.budget && options.budget->limit > 0) {
    // The moments about to be made: two per trainable parameter, of its size (those restored count the same).
    size_t moments = 0;
    for (const std::string& name : trainable) {
      const Parameter* prm = state->FindParameter(name);
      if (prm) moments += 2 * prm->data.SizeInBytes();
    }
    if (options.budget->planned + moments > options.budget->limit) {
      return ResourceExhausted("optimizer model: the moments of ", trainable.size(), " parameters need ", moments,
                               " bytes, which would bring the session's planned memory to ",
                               options.budget->planned + moments, " bytes, over its limit of ", options.budget->limit);
    }
    options.budget->planned += moments;
  }
  ONT_RETURN_IF_ERROR(PrepareOptimizerState(state, trainable, opt->info_.kind, placement));
  // 3. The graph, planned for where each input will be fed.
  ExecutorOptions eo;
  eo.providers = options.providers;
  eo.input_devices = OptimizerInputDevices(options);
  eo.name = "optimizer graph";
  eo.budget = options.budget;
  eo.pool_leader = options.pool_leader;
  ONT_ASSIGN_OR_RETURN(opt->executor_, Executor::Create(model, eo).WithContext("optimizer model"));
  opt->lr_ = Tensor::FromVector<float>({0.0f}, {1});
  opt->step_ = Tensor::FromVector<int64_t>({0}, {1});
  return opt;
}

void Optimizer::set_initial_learning_rate(float lr) {
  group().initial_learning_rate = lr;
  group().learning_rate = lr;
}

Status Optimizer::Step(const std::map<std::string, Tensor>& gradients) {
  OptimizerGroup& g = group();
  // 1. The sequences alias the state's tensors: the kernels update them in place. They are made once and
  //    refilled in place at every step (same length: no allocation).
  const bool adamw = info_.kind == OptimizerKind::kAdamW;
  if (feeds_.empty()) {
    feeds_ = {{"learning_rate", lr_},
              {"step", step_},
              {"params", Value::Sequence({})},
              {"gradients", Value::Sequence({})},
              {"first_order_moments", Value::Sequence({})}};
    if (adamw) feeds_.push_back({"second_order_moments", Value::Sequence({})});
  }
  TensorSequence &params = *feeds_[2].second.sequence(), &grads = *feeds_[3].second.sequence(),
                 &first = *feeds_[4].second.sequence();
  TensorSequence* second = adamw ? feeds_[5].second.sequence() : nullptr;
  params.clear();
  grads.clear();
  first.clear();
  if (second) second->clear();
  for (const std::string& name : trainable_) {
    auto it = gradients.find(name);
    if (it == gradients.end()) return NotFound("no gradient for parameter \"", name, "\"");
    const Tensor& w = state_->parameters.at(name).data;
    if (it->second.shape() != w.shape() || it->second.dtype() != w.dtype()) {
      return InvalidArgument("gradient of \"", name, "\" is ", ShapeToString(it->second.shape()), ", parameter is ",
                             ShapeToString(w.shape()));
    }
    params.push_back(w);
    grads.push_back(it->second);
    const ParameterOptimizerState& ps = g.param_states.at(name);
    first.push_back(ps.momentums.at("momentum0"));
    if (second) second->push_back(ps.momentums.at("momentum1"));
  }
  lr_.data<float>()[0] = g.learning_rate;
  step_.data<int64_t>()[0] = g.step + 1;
  // 2. Run; the step counts when the updated flag (bool, or int64 1 in older artifacts) is set. Where the
  //    optimizer node always sets it (no update_signal), it is not read: on a device the step then returns
  //    once its work is queued, and the next read of a result (the next TrainStep's loss) waits for it.
  //    A fault in that work shows there, as on CUDA any asynchronous fault does.
  ONT_RETURN_IF_ERROR(executor_->Run(feeds_, output_names_, &out_));
  if (info_.flag_always_set) {
    g.step += 1;
    return Status::OK();
  }
  ONT_RETURN_IF_ERROR(executor_->ToHost(out_[0], &flag_));  // into last step's copy: no allocation
  const Tensor& flag = flag_;
  bool updated = false;
  if (flag.NumElements() > 0) {
    if (flag.dtype() == DType::kBool) updated = flag.data<bool>()[0];
    else if (flag.dtype() == DType::kInt64) updated = flag.data<int64_t>()[0] == 1;
    else return InvalidArgument("the optimizer model's first output is ", DTypeName(flag.dtype()), ", expected bool");
  }
  if (out_[0].device().is_host()) flag_ = Tensor();  // it was the executor's own tensor, not a copy
  if (updated) g.step += 1;
  return Status::OK();
}

}  // namespace ontrain
