// Optimizer model: build, read and check.
#include "graph/optimizer_model.h"

#include "graph/builder.h"

namespace ontrain {

std::vector<std::string> OptimizerInputNames(OptimizerKind kind) {
  std::vector<std::string> names = {"learning_rate", "step", "params", "gradients", "first_order_moments"};
  if (kind == OptimizerKind::kAdamW) names.push_back("second_order_moments");
  return names;
}

std::vector<std::string> MomentNames(OptimizerKind kind) {
  if (kind == OptimizerKind::kAdamW) return {"momentum0", "momentum1"};
  return {"momentum0"};
}

namespace {

Status ReadAdamW(const Node& n, AdamWConfig* c) {
  c->alpha = n.GetFloat("alpha", 0.9f);
  c->beta = n.GetFloat("beta", 0.999f);
  c->epsilon = n.GetFloat("epsilon", 1e-8f);
  c->weight_decay = n.GetFloat("weight_decay", 0.0f);
  c->adam_mode = n.GetInt("adam_mode", 0);
  int64_t cb = n.GetInt("correct_bias", 1);
  if ((c->adam_mode != 0 && c->adam_mode != 1) || (cb != 0 && cb != 1)) {
    return InvalidArgument(n.Describe(), ": adam_mode and correct_bias must be 0 or 1");
  }
  if (c->adam_mode == 0 && cb == 0) return InvalidArgument(n.Describe(), ": adam_mode 0 requires correct_bias 1");
  c->correct_bias = cb == 1;
  return Status::OK();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return "[" + s + "]";
}
}  // namespace

StatusOr<OptimizerModelInfo> ReadOptimizerModel(const Model& model) {
  // 1. The kind from the optimizer nodes: exactly one, of one kind.
  OptimizerModelInfo info;
  int adamw = 0, sgd = 0;
  const Node* optimizer = nullptr;
  for (const Node& n : model.graph.nodes) {
    if (n.domain != "com.microsoft") continue;
    if (n.op_type == "AdamWOptimizer") {
      adamw++;
      optimizer = &n;
      ONT_RETURN_IF_ERROR(ReadAdamW(n, &info.adamw));
    } else if (n.op_type == "SGDOptimizerV2") {
      sgd++;
      optimizer = &n;
    } else if (n.op_type == "InplaceClipGradNorm") {
      info.clip_max_norm = n.GetFloat("max_norm", 1.0f);
    }
  }
  if (adamw > 0 && sgd > 0) return InvalidArgument("only one type of optimizer algorithm is supported, got 2");
  if (adamw + sgd != 1) {
    return InvalidArgument("the optimizer model must hold exactly one AdamWOptimizer or SGDOptimizerV2 node, got ",
                           adamw + sgd);
  }
  info.kind = adamw ? OptimizerKind::kAdamW : OptimizerKind::kSGD;
  // update_signal: AdamWOptimizer's input 6, SGDOptimizerV2's input 3.
  const size_t signal = info.kind == OptimizerKind::kAdamW ? 6 : 3;
  const bool no_signal = optimizer->inputs.size() <= signal || optimizer->inputs[signal].empty();
  info.flag_always_set = no_signal && !model.graph.outputs.empty() && !optimizer->outputs.empty() &&
                         model.graph.outputs[0].name == optimizer->outputs[0];
  // 2. The input signature ONNX Runtime feeds.
  std::vector<std::string> expected = OptimizerInputNames(info.kind), actual;
  for (const ValueInfo& v : model.graph.inputs) actual.push_back(v.name);
  if (actual != expected) {
    return InvalidArgument("invalid optimizer graph inputs: expected ", Join(expected), ", got ", Join(actual));
  }
  return info;
}

Model MakeOptimizerModel(OptimizerKind kind, const AdamWConfig& c, int64_t opset) {
  Model m;
  m.producer_name = "orttraining";
  m.opset_imports[""] = opset;
  m.opset_imports["com.microsoft"] = 1;
  Graph& g = m.graph;
  g.name = "graph";
  for (const std::string& name : OptimizerInputNames(kind)) {
    g.inputs.push_back(name == "learning_rate" ? TensorInfo(name, DType::kFloat32, {1})
                       : name == "step"        ? TensorInfo(name, DType::kInt64, {1})
                                               : SequenceInfo(name));
  }
  if (kind == OptimizerKind::kAdamW) {
    g.nodes.push_back(MakeNode("AdamWOptimizer",
                               {"learning_rate", "step", "params", "gradients", "first_order_moments",
                                "second_order_moments"},
                               {"onnx::adamw.updated_flag::1"},
                               {AttrFloat("alpha", c.alpha), AttrFloat("beta", c.beta), AttrFloat("epsilon", c.epsilon),
                                AttrFloat("weight_decay", c.weight_decay), AttrInt("adam_mode", c.adam_mode),
                                AttrInt("correct_bias", c.correct_bias ? 1 : 0)},
                               "onnx::AdamWOptimizer::1", "com.microsoft"));
    g.outputs = {TensorInfo("onnx::adamw.updated_flag::1", DType::kBool, {1})};
  } else {
    g.nodes.push_back(MakeNode("SGDOptimizerV2", {"learning_rate", "params", "gradients"},
                               {"onnx::update_completed::1"}, {}, "onnx::SGDOptimizerV2::1", "com.microsoft"));
    ValueInfo flag;  // no shape: ONNX Runtime 1.19.2 rejects the [1] that onnxblock declares
    flag.name = "onnx::update_completed::1";
    flag.dtype = DType::kBool;
    g.outputs = {flag};
  }
  return m;
}

}  // namespace ontrain
