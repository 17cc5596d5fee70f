// Artifact generation: loss blocks, parameters as inputs, eval copy, gradient accumulation, optimizer model.
#include "graph/artifacts.h"

#include <sys/stat.h>
#include <cerrno>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "checkpoint/checkpoint_io.h"
#include "graph/autodiff.h"
#include "graph/builder.h"
#include "graph/gradient_builders.h"
#include "graph/model_io.h"
#include "graph/shape_inference.h"

namespace ontrain {

StatusOr<LossKind> ParseLossKind(const std::string& name) {
  if (name == "MSELoss") return LossKind::kMSE;
  if (name == "CrossEntropyLoss") return LossKind::kCrossEntropy;
  if (name == "BCEWithLogitsLoss") return LossKind::kBCEWithLogits;
  if (name == "L1Loss") return LossKind::kL1;
  return InvalidArgument("unknown loss \"", name, "\"; expected MSELoss, CrossEntropyLoss, BCEWithLogitsLoss or L1Loss");
}

StatusOr<BnRunningStats> ParseBnRunningStats(const std::string& name) {
  if (name == "pytorch") return BnRunningStats::kPyTorch;
  if (name == "onnx") return BnRunningStats::kOnnx;
  if (name == "constant") return BnRunningStats::kConstant;
  return InvalidArgument("unknown BatchNormalization running-statistics mode \"", name,
                         "\"; expected pytorch, onnx or constant");
}

namespace {

const char* kLoss = "onnx::loss::1";

// 1. The loss block (ONNX Runtime's onnxblock losses); the graph outputs become [loss, extra outputs].
Status AddLoss(Model* m, const ArtifactOptions& o, const std::map<std::string, ValueInfo>& types) {
  Graph& g = m->graph;
  if (g.outputs.empty()) return InvalidArgument("the forward model has no outputs");
  const ValueInfo out = g.outputs[0];
  std::string loss;
  if (o.reduction != "mean" && o.reduction != "sum" && o.reduction != "none") {
    return InvalidArgument("loss reduction must be mean, sum or none, got \"", o.reduction, "\"");
  }
  auto reduce_mean = [&](const std::string& in) {  // onnxblock's reduction: no axes, keepdims=1
    if (o.reduction == "none") {
      g.nodes.push_back(MakeNode("Identity", {in}, {kLoss}, {}, "onnx::Identity::loss"));
    } else {
      g.nodes.push_back(MakeNode(o.reduction == "mean" ? "ReduceMean" : "ReduceSum", {in}, {kLoss}, {}, "onnx::Reduce::loss"));
    }
    return std::string(kLoss);
  };
  switch (o.loss) {
    case LossKind::kOutput: {
      if (!g.FindOutput(o.loss_output) && !types.count(o.loss_output)) {
        return NotFound("loss output \"", o.loss_output, "\" is not a value of the model");
      }
      loss = o.loss_output;
      break;
    }
    case LossKind::kCrossEntropy: {
      ValueInfo labels = out;
      labels.name = "labels";
      labels.dtype = o.label_dtype;
      if (!labels.has_shape || labels.dims.size() < 2) return InvalidArgument("CrossEntropyLoss needs scores of rank >= 2");
      labels.dims.erase(labels.dims.begin() + 1);
      if (!g.FindInput("labels")) g.inputs.push_back(labels);
      std::vector<onnx::AttributeProto> attrs = {AttrString("reduction", o.reduction)};
      if (o.has_ignore_index) attrs.push_back(AttrInt("ignore_index", o.ignore_index));
      g.nodes.push_back(MakeNode("SoftmaxCrossEntropyLoss", {out.name, "labels"}, {kLoss, "onnx::log_prob::1"}, attrs,
                                 "onnx::SoftmaxCrossEntropyLoss::1"));
      loss = kLoss;
      break;
    }
    case LossKind::kMSE:
    case LossKind::kL1: {
      ValueInfo target = out;
      target.name = "target";
      if (!g.FindInput("target")) g.inputs.push_back(target);
      g.nodes.push_back(MakeNode("Sub", {out.name, "target"}, {"onnx::sub_output::1"}, {}, "onnx::Sub::1"));
      if (o.loss == LossKind::kMSE) {
        g.AddInitializer("onnx::pow_exponent::1", FloatConstant(out.dtype, 2.0f, {1}));
        g.nodes.push_back(MakeNode("Pow", {"onnx::sub_output::1", "onnx::pow_exponent::1"}, {"onnx::pow_output::1"}, {},
                                   "onnx::Pow::1"));
        loss = reduce_mean("onnx::pow_output::1");
      } else {
        g.nodes.push_back(MakeNode("Abs", {"onnx::sub_output::1"}, {"onnx::abs_output::1"}, {}, "onnx::Abs::1"));
        loss = reduce_mean("onnx::abs_output::1");
      }
      break;
    }
    case LossKind::kBCEWithLogits: {
      ValueInfo target = out;
      target.name = "target";
      if (!g.FindInput("target")) g.inputs.push_back(target);
      g.AddInitializer("bceloss.sub_ones", FloatConstant(out.dtype, 1.0f, {1}));
      const std::string x = out.name;
      g.nodes.push_back(MakeNode("Sigmoid", {x}, {"bce.s"}, {}, "bce.Sigmoid"));
      g.nodes.push_back(MakeNode("Log", {"bce.s"}, {"bce.log_s"}, {}, "bce.Log"));
      g.nodes.push_back(MakeNode("Mul", {"bce.log_s", "target"}, {"bce.a1"}, {}, "bce.Mul1"));
      g.nodes.push_back(MakeNode("Sub", {"bceloss.sub_ones", "bce.s"}, {"bce.one_minus_s"}, {}, "bce.Sub1"));
      g.nodes.push_back(MakeNode("Log", {"bce.one_minus_s"}, {"bce.log_1ms"}, {}, "bce.Log2"));
      g.nodes.push_back(MakeNode("Sub", {"bceloss.sub_ones", "target"}, {"bce.one_minus_t"}, {}, "bce.Sub2"));
      g.nodes.push_back(MakeNode("Mul", {"bce.log_1ms", "bce.one_minus_t"}, {"bce.a2"}, {}, "bce.Mul2"));
      g.nodes.push_back(MakeNode("Add", {"bce.a1", "bce.a2"}, {"bce.sum"}, {}, "bce.Add"));
      g.nodes.push_back(MakeNode("Neg", {"bce.sum"}, {"bce.neg"}, {}, "bce.Neg"));
      loss = reduce_mean("bce.neg");
      break;
    }
  }
  // Graph outputs: the loss, then the extra outputs (typed from shape inference).
  std::vector<ValueInfo> outs;
  ValueInfo lv;
  lv.name = loss;
  lv.dtype = DType::kUndefined;  // typed by inference below: the model's float type
  outs.push_back(lv);
  for (const std::string& e : o.extra_outputs) {
    auto it = types.find(e);
    if (it == types.end()) return NotFound("extra output \"", e, "\" is not a value of the model");
    outs.push_back(it->second);
  }
  g.outputs = outs;
  Model typed = *m;
  ONT_RETURN_IF_ERROR(InferShapes(&typed).WithContext("loss block"));
  g.outputs[0] = typed.graph.outputs[0];
  return Status::OK();
}

// The values the loss depends on through node inputs that carry a gradient: reverse reachability from the
// loss over the (topologically ordered) nodes, skipping each gradient rule's stop inputs. An op without a
// gradient rule passes the reach to all its inputs, so that the initializers before it become trainable and
// gradient building names the op, instead of training silently only what lies after it.
std::set<std::string> GradientReach(const Graph& g, const std::string& loss) {
  std::set<std::string> reach = {loss};
  for (auto it = g.nodes.rbegin(); it != g.nodes.rend(); ++it) {
    const Node& n = *it;
    bool feeds = false;
    for (const std::string& out : n.outputs) feeds = feeds || (!out.empty() && reach.count(out));
    if (!feeds) continue;
    std::string domain = n.op_type == "BatchNormalization" ? "com.microsoft" : n.domain;
    std::string op = n.op_type == "BatchNormalization" ? "BatchNormInternal" : n.op_type;
    const GradientRule* rule = FindGradientRule(domain, op);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      if (rule == nullptr || std::find(rule->stop.begin(), rule->stop.end(), static_cast<int>(i)) == rule->stop.end()) {
        reach.insert(n.inputs[i]);
      }
    }
  }
  return reach;
}

// Whether a floating-point tensor holds NaN or an infinity.
bool HasNonFinite(const Tensor& t) {
  const int64_t n = t.NumElements();
  switch (t.dtype()) {
    case DType::kFloat32:
      for (int64_t i = 0; i < n; ++i) if (!std::isfinite(t.data<float>()[i])) return true;
      return false;
    case DType::kFloat64:
      for (int64_t i = 0; i < n; ++i) if (!std::isfinite(t.data<double>()[i])) return true;
      return false;
    case DType::kFloat16:
    case DType::kBFloat16: {
      const uint16_t exp = t.dtype() == DType::kFloat16 ? 0x7C00 : 0x7F80;  // all-ones exponent: inf or NaN
      const auto* bits = static_cast<const uint16_t*>(t.raw_data());
      for (int64_t i = 0; i < n; ++i) if ((bits[i] & exp) == exp) return true;
      return false;
    }
    default:
      return false;
  }
}

// BatchNormalization's running statistics (inputs 3 and 4) that are initializers, each with the node that
// reads it. A statistic read by any other node as well cannot be updated in place without changing what
// that node sees, so it is an error.
StatusOr<std::map<std::string, std::string>> RunningStatistics(const Graph& g) {
  std::map<std::string, std::string> stats;
  std::map<std::string, size_t> owner;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (!n.domain.empty() || n.op_type != "BatchNormalization") continue;
    for (size_t i = 3; i < 5 && i < n.inputs.size(); ++i) {
      if (g.initializers.count(n.inputs[i]) && owner.emplace(n.inputs[i], k).second) stats[n.inputs[i]] = n.Describe();
    }
  }
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      auto it = stats.find(n.inputs[i]);
      if (it == stats.end() || (owner.at(it->first) == k && i >= 3)) continue;
      return InvalidArgument("running statistic \"", it->first, "\" of ", it->second, " is also read by ",
                             n.Describe(), " (input ", i, "); updating it would change that node's input too. "
                             "Give each BatchNormalization its own statistics, or keep them constant");
    }
  }
  return stats;
}

// 2. Trainable and frozen initializers become graph inputs (static shapes) and checkpoint parameters.
// Running statistics that the training model updates become frozen parameters.
Status MoveParameters(Model* m, const ArtifactOptions& o, const std::map<std::string, std::string>& running,
                      CheckpointState* ckpt, std::vector<std::string>* trainable,
                      std::vector<InitializerDecision>* decisions) {
  Graph& g = m->graph;
  std::set<std::string> frozen(o.frozen.begin(), o.frozen.end());
  std::set<std::string> wanted(o.requires_grad.begin(), o.requires_grad.end());
  for (const std::string& n : o.requires_grad) {
    if (frozen.count(n)) return InvalidArgument("a parameter cannot be frozen and require gradients: \"", n, "\"");
    if (!g.initializers.count(n)) return NotFound("requires_grad names \"", n, "\", which is not an initializer");
    if (running.count(n)) {
      return InvalidArgument("requires_grad names \"", n, "\", a running statistic of ", running.at(n),
                             ": it is updated from batch statistics, not trained");
    }
  }
  for (const std::string& n : o.requires_grad) {
    if (HasNonFinite(g.initializers.at(n))) {
      return InvalidArgument("requires_grad names \"", n, "\", which holds non-finite values (a mask or other "
                             "buffer, not a weight): training it would make every step NaN");
    }
  }
  for (const std::string& n : o.frozen) {
    if (!g.initializers.count(n)) return NotFound("frozen names \"", n, "\", which is not an initializer");
  }
  for (const auto& [name, node] : running) frozen.insert(name);
  const std::set<std::string> reach = GradientReach(g, g.outputs[0].name);
  std::vector<std::string> order = g.initializer_order;
  for (const std::string& name : order) {
    const Tensor t = g.initializers.at(name);
    InitializerDecision d;
    d.name = name;
    d.elements = t.NumElements();
    bool train = false;
    if (!o.requires_grad.empty()) {
      train = wanted.count(name) > 0;
      if (!train) d.why = "not named by --requires-grad";
    } else if (frozen.count(name)) {
      d.why = "--frozen";
    } else if (!IsFloatingPoint(t.dtype())) {
      d.why = std::string(DTypeName(t.dtype())) + " values";
    } else if (HasNonFinite(t)) {
      d.why = "holds non-finite values (a mask or other buffer)";
    } else if (!reach.count(name)) {
      d.why = "no gradient reaches it from the loss";
    } else {
      train = true;
    }
    if (train) {
      d.kind = InitializerDecision::Kind::kTrainable;
    } else if (frozen.count(name)) {  // kept in the checkpoint without gradients
      d.kind = InitializerDecision::Kind::kFrozen;
      d.why = running.count(name) ? "BatchNormalization running statistic" : "--frozen";
    }
    decisions->push_back(d);
    if (!train && !frozen.count(name)) continue;
    ckpt->AddParameter(name, t, train);
    if (train) trainable->push_back(name);
  }
  // Inputs in initializer order, trainable and frozen together (as onnxblock appends them).
  for (const std::string& name : order) {
    const Parameter* p = ckpt->FindParameter(name);
    if (!p) continue;
    std::vector<int64_t> dims(p->data.shape().begin(), p->data.shape().end());
    g.inputs.push_back(TensorInfo(name, p->data.dtype(), dims));
    g.RemoveInitializer(name);
  }
  if (trainable->empty()) return InvalidArgument("the model has no trainable parameters");
  return Status::OK();
}

// 3. Eval model: Dropout and BatchNormalization in inference mode. A BatchNormalization exported in
// training mode declares running-statistic outputs, which ONNX makes invalid in inference mode (ONNX
// Runtime refuses such a model), so unread ones are dropped.
void MakeEvalModel(Model* m) {
  std::set<std::string> read;
  for (const Node& n : m->graph.nodes) read.insert(n.inputs.begin(), n.inputs.end());
  for (const ValueInfo& v : m->graph.outputs) read.insert(v.name);
  for (Node& n : m->graph.nodes) {
    if (n.domain.empty() && n.op_type == "Dropout" && n.inputs.size() > 2) n.inputs[2] = "";
    if (n.domain.empty() && n.op_type == "BatchNormalization") {
      n.attributes["training_mode"] = AttrInt("training_mode", 0);
      while (n.outputs.size() > 1 && (n.outputs.back().empty() || !read.count(n.outputs.back()))) n.outputs.pop_back();
    }
  }
}

// 4. Running-statistic updates for each BatchNormInternal (the training model's BatchNormalization) whose
// statistics are frozen parameters. BatchNormInternal's outputs 1 and 2 already hold ONNX's update
//   mean' = momentum * mean + (1 - momentum) * batch_mean
//   var'  = momentum * var + (1 - momentum) * batch_var      (biased batch variance)
// and InPlaceAccumulatorV2(statistic, update, overwrite=true) writes them into the statistics' buffers. In
// PyTorch mode var' gains (1 - momentum) * batch_var / (n - 1), n = numel(X) / C, which turns the biased
// variance into the unbiased one; batch_var = 1 / saved_inv_std^2 - epsilon. The updates are computed
// from the node's outputs, never from the statistics themselves, because ONNX Runtime's kernel writes
// outputs 1 and 2 into the buffers of inputs 3 and 4 (they alias): there the write-back copies a buffer
// onto itself, and the result is the same in both engines.
Status AddRunningStatUpdates(Model* m, BnRunningStats mode, const std::map<std::string, std::string>& running) {
  Graph& g = m->graph;
  const std::string overwrite = "onnx::running_stats.overwrite";
  std::vector<Node> added;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& n = g.nodes[k];
    if (n.domain != "com.microsoft" || n.op_type != "BatchNormInternal" || n.inputs.size() < 5 || n.outputs.size() < 5) {
      continue;
    }
    const std::string& mean = n.inputs[3];
    const std::string& var = n.inputs[4];
    if (!running.count(mean) && !running.count(var)) continue;
    const ValueInfo* info = g.FindInput(running.count(mean) ? mean : var);
    if (info == nullptr || info->dtype != DType::kFloat32) {
      return Unimplemented(n.Describe(), ": updating running statistics of type ",
                           info ? DTypeName(info->dtype) : "unknown", " (only float32); keep them constant instead");
    }
    const std::string p = (n.name.empty() ? "BatchNormInternal_" + std::to_string(k) : n.name) + "_RunningStats/";
    auto scalar = [&](const std::string& name, float v) {
      g.AddInitializer(p + name, Tensor::FromVector<float>({v}, {}));
      return p + name;
    };
    auto write = [&](const std::string& stat, const std::string& update, const std::string& name) {
      added.push_back(MakeNode("InPlaceAccumulatorV2", {stat, update, overwrite}, {p + name + "_updated"}, {},
                               p + name + "_write", "com.microsoft"));
    };
    if (running.count(mean)) write(mean, n.outputs[1], "running_mean");
    if (!running.count(var)) continue;
    if (mode != BnRunningStats::kPyTorch) {
      write(var, n.outputs[2], "running_var");
      continue;
    }
    const float momentum = n.GetFloat("momentum", 0.9f), eps = n.GetFloat("epsilon", 1e-5f);
    const std::string inv_std = n.outputs[4];
    added.push_back(MakeNode("Mul", {inv_std, inv_std}, {p + "inv_var_eps"}, {}, p + "inv_var_eps"));
    added.push_back(MakeNode("Reciprocal", {p + "inv_var_eps"}, {p + "var_eps"}, {}, p + "var_eps"));
    added.push_back(MakeNode("Sub", {p + "var_eps", scalar("epsilon", eps)}, {p + "batch_var"}, {}, p + "batch_var"));
    added.push_back(MakeNode("Size", {n.inputs[0]}, {p + "numel"}, {}, p + "numel"));
    added.push_back(MakeNode("Size", {n.outputs[3]}, {p + "channels"}, {}, p + "channels"));
    added.push_back(MakeNode("Div", {p + "numel", p + "channels"}, {p + "count_i"}, {}, p + "count_i"));
    added.push_back(MakeNode("Cast", {p + "count_i"}, {p + "count"}, {AttrInt("to", 1)}, p + "count"));
    added.push_back(MakeNode("Sub", {p + "count", scalar("one", 1.0f)}, {p + "count_m1"}, {}, p + "count_m1"));
    added.push_back(MakeNode("Div", {p + "batch_var", p + "count_m1"}, {p + "bessel_extra"}, {}, p + "bessel_extra"));
    added.push_back(MakeNode("Mul", {p + "bessel_extra", scalar("one_minus_momentum", 1.0f - momentum)},
                             {p + "correction"}, {}, p + "correction"));
    added.push_back(MakeNode("Add", {n.outputs[2], p + "correction"}, {p + "running_var"}, {}, p + "running_var"));
    write(var, p + "running_var", "running_var");
  }
  if (added.empty()) return Status::OK();
  g.AddInitializer(overwrite, Tensor::FromVector<bool>({true}, {1}));
  g.nodes.insert(g.nodes.end(), added.begin(), added.end());
  return Status::OK();
}

// 5. Gradient accumulation: each "<p>_grad" output feeds InPlaceAccumulatorV2 into its buffer input.
void AddAccumulation(Model* m) {
  Graph& g = m->graph;
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    ValueInfo& out = g.outputs[k];
    const std::string grad = out.name;
    if (grad.size() < 5 || grad.compare(grad.size() - 5, 5, "_grad") != 0) continue;
    ValueInfo buffer = out;
    buffer.name = grad + ".accumulation.buffer";
    g.inputs.push_back(buffer);
    g.nodes.push_back(MakeNode("InPlaceAccumulatorV2", {buffer.name, grad, "lazy_reset_grad"},
                               {grad + ".accumulation.out"}, {}, "GradientAccumulator" + std::to_string(k),
                               "com.microsoft"));
    out = TensorInfo(grad + ".accumulation.out", DType::kBool, {1});
  }
  g.inputs.push_back(TensorInfo("lazy_reset_grad", DType::kBool, {1}));
}

}  // namespace

StatusOr<Artifacts> GenerateArtifacts(const Model& forward, const ArtifactOptions& options) {
  if (forward.OpsetFor("") < 13) return Unimplemented("forward models need ONNX opset >= 13, got ", forward.OpsetFor(""));
  Artifacts a;
  Model m = forward;
  m.graph.value_infos.clear();
  m.producer_name = "ontrain";
  if (m.ir_version < 7) m.ir_version = 8;
  Model typed = m;
  ONT_RETURN_IF_ERROR(InferShapes(&typed).WithContext("forward model"));
  std::map<std::string, ValueInfo> types;
  for (const ValueInfo& v : typed.graph.value_infos) types[v.name] = v;
  for (const ValueInfo& v : typed.graph.outputs) types[v.name] = v;
  ONT_RETURN_IF_ERROR(AddLoss(&m, options, types));
  std::map<std::string, std::string> running;
  if (options.bn_running_stats != BnRunningStats::kConstant) {
    ONT_ASSIGN_OR_RETURN(running, RunningStatistics(m.graph));
  }
  std::vector<std::string> trainable;
  ONT_RETURN_IF_ERROR(MoveParameters(&m, options, running, &a.checkpoint, &trainable, &a.initializers));
  a.eval = m;
  MakeEvalModel(&a.eval);
  a.training = m;
  if (options.fuse) a.fused = FuseForTraining(&a.training);
  ONT_RETURN_IF_ERROR(PrepareForGradients(&a.training));
  ONT_RETURN_IF_ERROR(BuildGradientGraph(&a.training, m.graph.outputs[0].name, trainable));
  ONT_RETURN_IF_ERROR(AddRunningStatUpdates(&a.training, options.bn_running_stats, running));
  AddAccumulation(&a.training);
  a.optimizer = MakeOptimizerModel(options.optimizer, options.adamw, forward.OpsetFor(""));
  return a;
}

Status WriteArtifacts(const Artifacts& a, const std::string& dir) {
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& [name, model] : {std::make_pair("training_model.onnx", &a.training),
                                    std::make_pair("eval_model.onnx", &a.eval),
                                    std::make_pair("optimizer_model.onnx", &a.optimizer)}) {
    std::string bytes;
    if (!ModelToProto(*model).SerializeToString(&bytes)) return Internal("serializing ", name, " failed");
    files.push_back({name, std::move(bytes)});
  }
  CheckpointSaveOptions co;
  co.keep_parameter_order = true;
  ONT_ASSIGN_OR_RETURN(std::string ckpt, SerializeCheckpoint(a.checkpoint, co));
  files.push_back({"checkpoint", std::move(ckpt)});
  ONT_RETURN_IF_ERROR(MakeDirectories(dir));
  std::vector<std::string> written;
  for (const auto& [name, bytes] : files) {
    std::string path = dir + "/" + name;
    Status s = WriteFileAtomically(path, bytes);
    if (!s.ok()) {
      for (const std::string& w : written) ::unlink(w.c_str());
      return s;
    }
    written.push_back(path);
  }
  return Status::OK();
}

}  // namespace ontrain
