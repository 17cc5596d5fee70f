// Optimizer: signature check, moment creation or restore, and the update step.
#include "optimizer/optimizer.h"

#include <cmath>
#include <cstring>

namespace ontrain {

std::vector<std::string> MomentNames(OptimizerKind kind) {
  if (kind == OptimizerKind::kAdamW) return {"momentum0", "momentum1"};
  return {"momentum0"};
}

Status Optimizer::ReadModel(const Model& model) {
  // 1. Exactly one update node, of one known kind; InplaceClipGradNorm may precede it.
  int adamw = 0, sgd = 0;
  for (const Node& n : model.graph.nodes) {
    bool ms = n.domain == "com.microsoft";
    if (ms && n.op_type == "AdamWOptimizer") {
      adamw++;
      adamw_.alpha = n.GetFloat("alpha", 0.9f);
      adamw_.beta = n.GetFloat("beta", 0.999f);
      adamw_.epsilon = n.GetFloat("epsilon", 1e-8f);
      adamw_.weight_decay = n.GetFloat("weight_decay", 0.0f);
      adamw_.adam_mode = n.GetInt("adam_mode", 0);
      int64_t cb = n.GetInt("correct_bias", 1);
      if ((adamw_.adam_mode != 0 && adamw_.adam_mode != 1) || (cb != 0 && cb != 1)) {
        return InvalidArgument(n.Describe(), ": adam_mode and correct_bias must be 0 or 1");
      }
      if (adamw_.adam_mode == 0 && cb == 0) return InvalidArgument(n.Describe(), ": adam_mode 0 requires correct_bias 1");
      adamw_.correct_bias = cb == 1;
    } else if (ms && n.op_type == "SGDOptimizerV2") {
      sgd++;
    } else if (ms && n.op_type == "InplaceClipGradNorm") {
      if (n.GetString("norm_type", "fro") != "fro") return Unimplemented(n.Describe(), ": only the Frobenius norm");
      clip_max_norm_ = n.GetFloat("max_norm", 1.0f);
    } else {
      return Unimplemented("optimizer model: unsupported ", n.Describe());
    }
  }
  if (adamw > 0 && sgd > 0) return InvalidArgument("only one type of optimizer algorithm is supported, got 2");
  if (adamw + sgd != 1) return InvalidArgument("the optimizer model must hold exactly one optimizer node, got ", adamw + sgd);
  kind_ = adamw ? OptimizerKind::kAdamW : OptimizerKind::kSGD;
  // 2. The input signature ONNX Runtime feeds.
  std::vector<std::string> expected = {"learning_rate", "step", "params", "gradients", "first_order_moments"};
  if (kind_ == OptimizerKind::kAdamW) expected.push_back("second_order_moments");
  std::vector<std::string> actual;
  for (const ValueInfo& v : model.graph.inputs) actual.push_back(v.name);
  if (actual != expected) {
    auto join = [](const std::vector<std::string>& v) {
      std::string s;
      for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
      return "[" + s + "]";
    };
    return InvalidArgument("invalid optimizer graph inputs: expected ", join(expected), ", got ", join(actual));
  }
  return Status::OK();
}

Status Optimizer::PrepareState(IExecutionProvider* provider) {
  // group0 with its moments: restored from the checkpoint when present, else zeros like each parameter.
  OptimizerGroup& g = state_->optimizer_groups["group0"];
  bool restore = !g.param_states.empty();
  for (const std::string& name : trainable_) {
    const Parameter* p = state_->FindParameter(name);
    if (p == nullptr) return NotFound("trainable parameter \"", name, "\" is not in the checkpoint");
    if (p->data.dtype() != DType::kFloat32) {
      return Unimplemented("parameter \"", name, "\" is ", DTypeName(p->data.dtype()), "; optimizers update float32");
    }
    ParameterOptimizerState& ps = g.param_states[name];
    for (const std::string& m : MomentNames(kind_)) {
      auto it = ps.momentums.find(m);
      if (restore && it == ps.momentums.end()) {
        return NotFound("parameter \"", name, "\" has no \"", m, "\" in the checkpoint's optimizer state");
      }
      if (restore) {
        if (it->second.shape() != p->data.shape() || it->second.dtype() != p->data.dtype()) {
          return InvalidArgument("optimizer state \"", m, "\" of \"", name, "\" is ", DTypeName(it->second.dtype()),
                                 ShapeToString(it->second.shape()), " but the parameter is ",
                                 ShapeToString(p->data.shape()));
        }
        if (it->second.device() != provider->device()) {
          ONT_ASSIGN_OR_RETURN(Tensor dev, Tensor::Allocate(it->second.dtype(), it->second.shape(), provider->allocator()));
          ONT_RETURN_IF_ERROR(provider->CopyTensor(it->second, &dev));
          it->second = dev;
        }
        continue;
      }
      ONT_ASSIGN_OR_RETURN(Tensor zero, Tensor::Allocate(p->data.dtype(), p->data.shape(), provider->allocator()));
      if (!zero.device().is_host()) return Unimplemented("optimizer state on ", zero.device().ToString());
      std::memset(zero.raw_data(), 0, zero.SizeInBytes());
      ps.momentums[m] = zero;
    }
  }
  return Status::OK();
}

StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const Model& model, CheckpointState* state,
                                                       const std::vector<std::string>& trainable,
                                                       IExecutionProvider* provider) {
  if (trainable.empty()) return InvalidArgument("the optimizer needs at least one trainable parameter");
  std::unique_ptr<Optimizer> opt(new Optimizer());
  opt->state_ = state;
  opt->trainable_ = trainable;
  ONT_RETURN_IF_ERROR(opt->ReadModel(model));
  ONT_RETURN_IF_ERROR(opt->PrepareState(provider));
  return opt;
}

void Optimizer::set_initial_learning_rate(float lr) {
  group().initial_learning_rate = lr;
  group().learning_rate = lr;
}

Status Optimizer::Step(const std::map<std::string, Tensor>& gradients) {
  OptimizerGroup& g = group();
  // 1. Optional global-norm clipping (InplaceClipGradNorm): scales every gradient by max_norm / norm.
  float clip = 1.0f;
  if (clip_max_norm_ > 0) {
    double sq = 0;
    for (const std::string& name : trainable_) {
      const Tensor& t = gradients.at(name);
      for (int64_t i = 0; i < t.NumElements(); ++i) sq += static_cast<double>(t.data<float>()[i]) * t.data<float>()[i];
    }
    double norm = std::sqrt(sq);
    if (norm > clip_max_norm_) clip = static_cast<float>(clip_max_norm_ / (norm + 1e-6));
  }
  // 2. Check everything before changing anything, so a bad call leaves the state untouched.
  for (const std::string& name : trainable_) {
    auto it = gradients.find(name);
    if (it == gradients.end()) return NotFound("no gradient for parameter \"", name, "\"");
    const Tensor& w = state_->parameters.at(name).data;
    if (it->second.shape() != w.shape() || it->second.dtype() != w.dtype()) {
      return InvalidArgument("gradient of \"", name, "\" is ", ShapeToString(it->second.shape()), ", parameter is ",
                             ShapeToString(w.shape()));
    }
    if (!w.device().is_host()) return Unimplemented("optimizer updates on ", w.device().ToString());
  }
  // 3. The update; the step counter advances after it succeeded.
  int64_t t = g.step + 1;
  for (const std::string& name : trainable_) {
    Tensor w = state_->parameters.at(name).data;
    const Tensor& grad = gradients.at(name);
    const float* gp = grad.data<float>();
    std::vector<float> scaled;
    if (clip != 1.0f) {
      scaled.assign(gp, gp + grad.NumElements());
      for (float& x : scaled) x *= clip;
      gp = scaled.data();
    }
    ParameterOptimizerState& ps = g.param_states.at(name);
    if (kind_ == OptimizerKind::kAdamW) {
      AdamWUpdate(adamw_, g.learning_rate, t, w.NumElements(), w.data<float>(), gp,
                  ps.momentums.at("momentum0").data<float>(), ps.momentums.at("momentum1").data<float>());
    } else {
      SgdUpdate(g.learning_rate, w.NumElements(), w.data<float>(), gp);
    }
  }
  g.step = t;
  return Status::OK();
}

}  // namespace ontrain
