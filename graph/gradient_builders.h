// The per-op gradient builders used by autodiff.cc, and the context they emit backward nodes through.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace ontrain {

// What a builder sees: the forward node, the gradients of its outputs, and the names it must produce for
// the gradients of its inputs ("" where no gradient is wanted).
class GradContext {
 public:
  GradContext(Graph* graph, const Node& node, const std::map<std::string, ValueInfo>* types, int64_t opset)
      : graph_(graph), node_(node), types_(types), opset_(opset) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }
  const std::string& in(int i) const { return node_.inputs[i]; }
  std::string out(int i) const { return i < static_cast<int>(node_.outputs.size()) ? node_.outputs[i] : ""; }
  bool has_input(int i) const { return i < static_cast<int>(node_.inputs.size()) && !node_.inputs[i].empty(); }

  std::vector<std::string> dy;  // per forward output; "" when that output has no gradient
  std::vector<std::string> dx;  // per forward input; "" when no gradient is wanted
  bool wants(int i) const { return i < static_cast<int>(dx.size()) && !dx[i].empty(); }

  // Emits a backward node; returns its first output.
  std::string Emit(const std::string& op, const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
                   const std::vector<onnx::AttributeProto>& attrs = {}, const std::string& domain = "");
  // A fresh intermediate name "<node>_Grad/<hint>_<k>".
  std::string Tmp(const std::string& hint);
  // A new initializer; returns its name.
  std::string Const(const std::string& hint, const Tensor& value);
  std::string ConstInts(const std::string& hint, const std::vector<int64_t>& v);
  // A scalar of value v with the element type of `like` (default: the node's input 0).
  std::string ConstFloat(const std::string& hint, float v, const std::string& like = "");
  // Emits dx[i] = v summed over the axes along which input i was broadcast to the shape of `full`
  // (a forward value with the broadcast shape, or "" to read the shape of v at run time).
  Status ReduceTo(int i, const std::string& v, const std::string& full);
  // Declares the type of a value (for gradient ops whose output shape comes from the graph).
  void DeclareType(const std::string& name, const ValueInfo& like);
  const ValueInfo* Type(const std::string& name) const;
  // The value of an initializer of the graph being differentiated, or null when `name` is not one.
  const Tensor* Initializer(const std::string& name) const {
    auto it = graph_->initializers.find(name);
    return it == graph_->initializers.end() ? nullptr : &it->second;
  }

 private:
  Graph* graph_;
  const Node& node_;
  const std::map<std::string, ValueInfo>* types_;
  int64_t opset_;
  int counter_ = 0;
};

using GradientBuilder = Status (*)(GradContext& ctx);

struct GradientRule {
  GradientBuilder build;
  std::vector<int> stop;  // input indices that never get gradients
};

// The builder for (domain, op), or nullptr.
const GradientRule* FindGradientRule(const std::string& domain, const std::string& op);
std::vector<std::string> GradientRuleNames();

}  // namespace ontrain
