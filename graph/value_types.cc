// Static dtype propagation: declared types, then one rule per op in topological order.
#include "graph/value_types.h"

#include <set>

namespace ontrain {

DType ElementDType(const ValueInfo& v) {
  if (v.is_tensor) return v.dtype;
  if (v.type.has_sequence_type() && v.type.sequence_type().elem_type().has_tensor_type()) {
    auto dt = DTypeFromOnnx(v.type.sequence_type().elem_type().tensor_type().elem_type());
    return dt.ok() ? dt.value() : DType::kUndefined;
  }
  return DType::kUndefined;
}

namespace {

DType AttrDType(const Node& n, const char* name, DType fallback) {
  if (!n.HasAttribute(name)) return fallback;
  const onnx::AttributeProto& a = n.attributes.at(name);
  int32_t code = a.has_t() ? a.t().data_type() : static_cast<int32_t>(a.i());
  auto dt = DTypeFromOnnx(code);
  return dt.ok() ? dt.value() : DType::kUndefined;
}

// The type of output `k` of `n`, given its inputs' types (kUndefined when unknown).
DType OutputDType(const Node& n, size_t k, const std::vector<DType>& in) {
  auto input = [&](size_t i) { return i < in.size() ? in[i] : DType::kUndefined; };
  static const std::set<std::string> kBoolOut = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                                                 "Not", "And", "Or", "Xor", "IsNaN", "IsInf"};
  static const std::set<std::string> kInt64Out = {"Shape", "Size", "ArgMax", "ArgMin", "NonZero",
                                                  "BroadcastGradientArgs", "SequenceLength"};
  const std::string& op = n.op_type;
  if (kBoolOut.count(op)) return DType::kBool;
  if (kInt64Out.count(op)) return DType::kInt64;
  if (op == "Cast") return AttrDType(n, "to", DType::kUndefined);
  if (op == "CastLike") return input(1);
  if (op == "Constant") {
    if (n.HasAttribute("value_int") || n.HasAttribute("value_ints")) return DType::kInt64;
    return AttrDType(n, "value", DType::kFloat32);
  }
  if (op == "ConstantOfShape") return AttrDType(n, "value", DType::kFloat32);
  if (op == "EyeLike") return AttrDType(n, "dtype", input(0));
  if (op == "Where") return input(1);
  if (op == "OneHot") return input(2);
  if (op == "GatherGrad" || op == "GatherNDGrad") return input(2);
  if (op == "Dropout" && k == 1) return DType::kBool;
  if ((op == "MaxPool" || op == "TopK") && k == 1) return DType::kInt64;
  if (op == "ConcatTraining" && k == 1) return DType::kInt64;
  if (op == "InPlaceAccumulatorV2") return k == 0 ? DType::kBool : input(0);
  if (op == "AdamWOptimizer" || op == "SGDOptimizerV2") return k == 0 ? DType::kBool : input(2);
  if (op == "SequenceEmpty") return AttrDType(n, "dtype", DType::kFloat32);
  for (DType t : in) {
    if (t != DType::kUndefined) return t;
  }
  return DType::kUndefined;
}

}  // namespace

std::map<std::string, DType> InferValueDTypes(const Graph& g) {
  std::map<std::string, DType> types;
  for (const ValueInfo& v : g.inputs) types[v.name] = ElementDType(v);
  for (const auto& [name, t] : g.initializers) types[name] = t.dtype();
  for (const ValueInfo& v : g.value_infos) {
    DType t = ElementDType(v);
    if (t != DType::kUndefined) types[v.name] = t;
  }
  for (const ValueInfo& v : g.outputs) {
    DType t = ElementDType(v);
    if (t != DType::kUndefined) types[v.name] = t;
  }
  auto order = TopologicalOrder(g);
  if (!order.ok()) return types;  // the executor reports the broken graph
  std::vector<DType> in;
  for (size_t idx : order.value()) {
    const Node& n = g.nodes[idx];
    in.clear();
    for (const std::string& i : n.inputs) {
      auto it = i.empty() ? types.end() : types.find(i);
      in.push_back(it == types.end() ? DType::kUndefined : it->second);
    }
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const std::string& o = n.outputs[k];
      if (o.empty()) continue;
      auto it = types.find(o);
      if (it != types.end() && it->second != DType::kUndefined) continue;  // declared
      types[o] = OutputDType(n, k, in);
    }
  }
  return types;
}

}  // namespace ontrain
