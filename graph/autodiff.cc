// The gradient graph builder: forward rewrites, reachability, and the reverse sweep that calls the
// per-op builders of gradient_builders.cc and sums partial gradients.
#include "graph/autodiff.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/builder.h"
#include "graph/gradient_builders.h"
#include "graph/shape_inference.h"

namespace ontrain {

namespace {

// A name not yet used in the graph, derived from `base`.
std::string FreshName(const Graph& g, const std::string& base) {
  std::set<std::string> used;
  for (const Node& n : g.nodes) for (const auto& o : n.outputs) used.insert(o);
  std::string name = base;
  for (int k = 1; used.count(name); ++k) name = base + "_" + std::to_string(k);
  return name;
}

void EnsureOutputs(Graph& g, Node& n, size_t count, const std::vector<std::string>& suffixes) {
  while (n.outputs.size() < count) n.outputs.push_back("");
  for (size_t i = 1; i < count; ++i) {
    if (n.outputs[i].empty()) n.outputs[i] = FreshName(g, n.name + "/" + suffixes[i - 1]);
  }
}

bool IsFloat(DType t) { return IsFloatingPoint(t); }

}  // namespace

// InstanceNormalization(X [N,C,...], scale [C], B [C]) as ops that have gradients:
// Xr = Reshape(X, [N, C, -1]); m = ReduceMean(Xr, 2); d = Xr - m; v = ReduceMean(d*d, 2);
// Y = Reshape(d / Sqrt(v + eps), Shape(X)) * scale' + B', with scale' and B' shaped [C, 1, ...].
void DecomposeInstanceNorm(Graph& g, size_t index, int64_t rank, DType dtype) {
  Node n = g.nodes[index];
  const std::string p = n.name + "/decomposed/";
  auto add = [&](const std::string& name, Tensor t) {
    g.AddInitializer(p + name, std::move(t));
    return p + name;
  };
  std::string ncs = add("ncs", Tensor::FromVector<int64_t>({0, 0, -1}, {3}));
  std::vector<int64_t> unsq;
  for (int64_t d = 1; d < rank - 1; ++d) unsq.push_back(d);
  std::string unsq_axes = add("unsqueeze_axes", Tensor::FromVector<int64_t>(unsq, {static_cast<int64_t>(unsq.size())}));
  float e = n.GetFloat("epsilon", 1e-5f);
  std::string eps = add("epsilon", dtype == DType::kFloat64 ? Tensor::FromVector<double>({e}, {})
                                                            : Tensor::FromVector<float>({e}, {}));
  std::vector<Node> nodes = {
      MakeNode("Reshape", {n.inputs[0], ncs}, {p + "xr"}, {}, p + "reshape"),
      MakeNode("ReduceMean", {p + "xr"}, {p + "mean"}, {AttrInts("axes", {2}), AttrInt("keepdims", 1)}, p + "mean"),
      MakeNode("Sub", {p + "xr", p + "mean"}, {p + "d"}, {}, p + "sub"),
      MakeNode("Mul", {p + "d", p + "d"}, {p + "d2"}, {}, p + "square"),
      MakeNode("ReduceMean", {p + "d2"}, {p + "var"}, {AttrInts("axes", {2}), AttrInt("keepdims", 1)}, p + "var"),
      MakeNode("Add", {p + "var", eps}, {p + "var_eps"}, {}, p + "add_eps"),
      MakeNode("Sqrt", {p + "var_eps"}, {p + "std"}, {}, p + "sqrt"),
      MakeNode("Div", {p + "d", p + "std"}, {p + "norm"}, {}, p + "normalize"),
      MakeNode("Shape", {n.inputs[0]}, {p + "shape"}, {}, p + "shape"),
      MakeNode("Reshape", {p + "norm", p + "shape"}, {p + "norm_x"}, {}, p + "reshape_back"),
      MakeNode("Unsqueeze", {n.inputs[1], unsq_axes}, {p + "scale"}, {}, p + "scale_shape"),
      MakeNode("Unsqueeze", {n.inputs[2], unsq_axes}, {p + "bias"}, {}, p + "bias_shape"),
      MakeNode("Mul", {p + "norm_x", p + "scale"}, {p + "scaled"}, {}, p + "scale"),
      MakeNode("Add", {p + "scaled", p + "bias"}, {n.outputs[0]}, {}, p + "shift"),
  };
  g.nodes.erase(g.nodes.begin() + index);
  g.nodes.insert(g.nodes.begin() + index, nodes.begin(), nodes.end());
}

Status PrepareForGradients(Model* model) {
  Graph& g = model->graph;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].domain.empty() && g.nodes[i].op_type == "InstanceNormalization") {
      Model typed = *model;
      ONT_RETURN_IF_ERROR(InferShapes(&typed));
      const ValueInfo* x = nullptr;
      for (const ValueInfo& v : typed.graph.inputs) if (v.name == g.nodes[i].inputs[0]) x = &v;
      for (const ValueInfo& v : typed.graph.value_infos) if (v.name == g.nodes[i].inputs[0]) x = &v;
      if (x == nullptr || !x->has_shape) {
        return InvalidArgument(g.nodes[i].Describe(), ": differentiating InstanceNormalization needs its input's rank");
      }
      int64_t rank = static_cast<int64_t>(x->dims.size());
      DecomposeInstanceNorm(g, i, rank, x->dtype);
    }
  }
  // LSTM and GRU: ONNX Runtime's LSTMReplacement and GRUReplacement, com.microsoft LSTMTraining (five
  // outputs: every hidden state, the final states, every cell state and the gate pre-activations the
  // gradient reads) and GRUTraining (three: every hidden state, the final one, the gate pre-activations),
  // both in layout 0; layout 1 is transposed into layout 0 around them.
  // RNN stays ONNX's RNN (its gradient recomputes the pre-activations from Y), in layout 0 with Y kept.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const std::string& op = g.nodes[i].op_type;
    if (!g.nodes[i].domain.empty() || (op != "LSTM" && op != "GRU" && op != "RNN")) continue;
    if (op == "RNN" && g.nodes[i].GetInt("layout", 0) == 0) {
      if (g.nodes[i].outputs.empty()) g.nodes[i].outputs.push_back("");
      if (g.nodes[i].outputs[0].empty()) g.nodes[i].outputs[0] = FreshName(g, g.nodes[i].name + "/all_hidden_states");
      continue;
    }
    Node n = g.nodes[i];
    const bool lstm = n.op_type == "LSTM", rnn = n.op_type == "RNN";
    const bool batch_first = n.GetInt("layout", 0) == 1;
    if (!rnn) {
      n.op_type = lstm ? "LSTMTraining" : "GRUTraining";
      n.domain = "com.microsoft";
    }
    n.attributes.erase("layout");
    while (n.outputs.size() < (lstm ? 5u : rnn ? 2u : 3u)) n.outputs.push_back("");
    std::vector<Node> before, after;
    auto transpose = [&](const std::string& from, const std::string& to, std::vector<int64_t> perm, const char* hint) {
      return MakeNode("Transpose", {from}, {to}, {AttrInts("perm", perm)}, FreshName(g, n.name + "/" + hint));
    };
    if (batch_first) {
      const std::string x = FreshName(g, n.name + "/x_seq_first");
      before.push_back(transpose(n.inputs[0], x, {1, 0, 2}, "x_transpose"));
      n.inputs[0] = x;
      for (size_t k : {size_t{5}, size_t{6}}) {
        if (k == 6 && !lstm) continue;
        if (k < n.inputs.size() && !n.inputs[k].empty()) {
          const std::string st = FreshName(g, n.name + (k == 5 ? "/h0_dir_first" : "/c0_dir_first"));
          before.push_back(transpose(n.inputs[k], st, {1, 0, 2}, "state_transpose"));
          n.inputs[k] = st;
        }
      }
      const std::vector<int64_t> y_perm = {2, 0, 1, 3}, state_perm = {1, 0, 2};
      for (size_t k = 0; k < (lstm ? 3u : 2u); ++k) {
        if (n.outputs[k].empty()) continue;
        const std::string seq_first = FreshName(g, n.name + "/out" + std::to_string(k) + "_seq_first");
        after.push_back(transpose(seq_first, n.outputs[k], k == 0 ? y_perm : state_perm, "out_transpose"));
        n.outputs[k] = seq_first;
      }
    }
    if (n.outputs[0].empty()) n.outputs[0] = FreshName(g, n.name + "/all_hidden_states");
    if (lstm) {
      if (n.outputs[3].empty()) n.outputs[3] = FreshName(g, n.name + "/all_cell_states");
      if (n.outputs[4].empty()) n.outputs[4] = FreshName(g, n.name + "/iofc");
    } else if (!rnn && n.outputs[2].empty()) {
      n.outputs[2] = FreshName(g, n.name + "/zrh");
    }
    g.nodes[i] = n;
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i) + 1, after.begin(), after.end());
    g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(i), before.begin(), before.end());
    i += before.size() + after.size();
  }
  for (Node& n : g.nodes) {
    if (!n.domain.empty()) continue;
    if (n.op_type == "MaxPool") EnsureOutputs(g, n, 2, {"indices"});
    else if (n.op_type == "SoftmaxCrossEntropyLoss") EnsureOutputs(g, n, 2, {"log_prob"});
    else if (n.op_type == "LayerNormalization") EnsureOutputs(g, n, 3, {"mean", "inv_std_dev"});
    else if (n.op_type == "Dropout") EnsureOutputs(g, n, 2, {"mask"});
    else if (n.op_type == "Concat") {
      // ONNX Runtime's ConcatReplacement: com.microsoft ConcatTraining, whose second output holds the
      // input lengths along the axis that the gradient splits by.
      n.op_type = "ConcatTraining";
      n.domain = "com.microsoft";
      EnsureOutputs(g, n, 2, {"per_input_length"});
    }
    else if (n.op_type == "BatchNormalization") {
      // ONNX Runtime's BatchNormReplacement: com.microsoft BatchNormInternal, training mode, 5 outputs.
      n.op_type = "BatchNormInternal";
      n.domain = "com.microsoft";
      n.attributes.erase("spatial");
      n.attributes["training_mode"] = AttrInt("training_mode", 1);
      EnsureOutputs(g, n, 5, {"running_mean", "running_var", "saved_mean", "saved_inv_std"});
    }
  }
  if (model->OpsetFor("com.microsoft") == 0) model->opset_imports["com.microsoft"] = 1;
  return Status::OK();
}

std::vector<std::string> DifferentiableOps() { return GradientRuleNames(); }

Status BuildGradientGraph(Model* model, const std::string& loss, const std::vector<std::string>& xs) {
  Graph& g = model->graph;
  if (model->OpsetFor("") < 13) return Unimplemented("gradient graphs need ONNX opset >= 13, got ", model->OpsetFor(""));
  if (model->OpsetFor("com.microsoft") == 0) model->opset_imports["com.microsoft"] = 1;
  // 1. Types and shapes of every forward value.
  Model typed = *model;
  ONT_RETURN_IF_ERROR(InferShapes(&typed).WithContext("gradient graph"));
  std::map<std::string, ValueInfo> types;
  for (const ValueInfo& v : typed.graph.inputs) types[v.name] = v;
  for (const ValueInfo& v : typed.graph.value_infos) types[v.name] = v;
  for (const ValueInfo& v : typed.graph.outputs) types[v.name] = v;
  for (const auto& [name, t] : g.initializers) {
    ValueInfo v;
    v.name = name;
    v.dtype = t.dtype();
    v.has_shape = true;
    for (int64_t d : t.shape()) v.dims.push_back(Dim{d, ""});
    types[name] = v;
  }
  ONT_ASSIGN_OR_RETURN(std::vector<size_t> order, TopologicalOrder(g));
  // 2. Values reachable from the xs (forward) and nodes that reach the loss (backward).
  std::set<std::string> from_x(xs.begin(), xs.end());
  for (size_t idx : order) {
    const Node& n = g.nodes[idx];
    bool hit = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& i) { return from_x.count(i) > 0; });
    if (!hit) continue;
    // Only float values carry a gradient: Shape, Size, comparisons and casts to integers end the forward
    // reach, so a value computed from a shape (attention's sqrt(head_dim)) is a constant to the sweep.
    for (const auto& o : n.outputs) {
      auto t = types.find(o);
      bool non_float = t != types.end() && t->second.dtype != DType::kUndefined && !IsFloat(t->second.dtype);
      if (!o.empty() && !non_float) from_x.insert(o);
    }
  }
  std::set<std::string> to_loss = {loss};
  std::vector<size_t> active;
  // Only edges that can carry a gradient count: a float output the loss depends on, and inputs the op's rule
  // does not stop. (Through a Shape the loss depends on a value's shape, not on its contents: counting that
  // edge made the value wait for a gradient partial that never came.)
  auto float_value = [&](const std::string& v) {
    auto t = types.find(v);
    return t == types.end() || t->second.dtype == DType::kUndefined || IsFloat(t->second.dtype);
  };
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node& n = g.nodes[*it];
    bool hit = std::any_of(n.outputs.begin(), n.outputs.end(),
                           [&](const std::string& o) { return to_loss.count(o) > 0 && float_value(o); });
    if (!hit) continue;
    const GradientRule* rule = FindGradientRule(n.domain, n.op_type);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      if (rule && std::find(rule->stop.begin(), rule->stop.end(), static_cast<int>(i)) != rule->stop.end()) continue;
      to_loss.insert(n.inputs[i]);
    }
    bool from = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& i) { return from_x.count(i) > 0; });
    if (from) active.push_back(*it);  // reverse topological order
  }
  // 3. Which inputs of which nodes receive gradients, and how many partials each value collects.
  std::map<size_t, std::vector<bool>> wants;
  std::map<std::string, int> partials;
  // Ops with no gradient between a trainable input and the loss: every one is named in one error, so a user
  // sees the whole gap at once (op -> its nodes, in graph order).
  std::map<std::string, std::vector<std::string>> missing;
  for (size_t idx : active) {
    const Node& n = g.nodes[idx];
    const GradientRule* rule = FindGradientRule(n.domain, n.op_type);
    if (rule == nullptr) {
      // Ops whose outputs are all non-float (Greater, Shape, ArgMax, ...) carry no gradient.
      bool float_out = std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) {
        auto t = types.find(o);
        return !o.empty() && (t == types.end() || t->second.dtype == DType::kUndefined || IsFloat(t->second.dtype));
      });
      if (float_out) missing[(n.domain.empty() ? "" : n.domain + "::") + n.op_type].push_back(n.name);
      continue;
    }
    std::vector<bool> w(n.inputs.size(), false);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const std::string& in = n.inputs[i];
      if (in.empty() || !from_x.count(in)) continue;
      if (std::find(rule->stop.begin(), rule->stop.end(), static_cast<int>(i)) != rule->stop.end()) continue;
      auto t = types.find(in);
      if (t != types.end() && t->second.dtype != DType::kUndefined && !IsFloat(t->second.dtype)) continue;
      w[i] = true;
      partials[in]++;
    }
    wants[idx] = w;
  }
  if (!missing.empty()) {
    std::string list;
    for (auto& [op, nodes] : missing) {
      std::reverse(nodes.begin(), nodes.end());  // collected in reverse graph order
      list += (list.empty() ? "" : "; ") + op + " (" + std::to_string(nodes.size()) + (nodes.size() == 1 ? " node: " : " nodes: ");
      for (size_t k = 0; k < nodes.size() && k < 3; ++k) list += (k ? ", " : "") + ("\"" + nodes[k] + "\"");
      if (nodes.size() > 3) list += ", ...";
      list += ")";
    }
    return Unimplemented("the gradient builder has not been registered for ", missing.size() == 1 ? "op " : "ops ", list,
                         ", which lie between trainable parameters and the loss. Freeze the parameters before them "
                         "(--frozen / frozen_params) to train the rest");
  }
  // 4. The seed, then the reverse sweep.
  // The seed d(loss)/d(loss) = 1: a scalar of the loss's type (float32 for ONNX Runtime's artifacts).
  auto lt = types.find(loss);
  if (lt == types.end() || !IsFloat(lt->second.dtype)) return InvalidArgument("loss \"", loss, "\" is not a float value of the graph");
  if (lt->second.dtype == DType::kFloat64) g.AddInitializer(loss + "_grad", Tensor::FromVector<double>({1.0}, {}));
  else if (lt->second.dtype == DType::kFloat32) g.AddInitializer(loss + "_grad", Tensor::FromVector<float>({1.0f}, {}));
  else return Unimplemented("loss of type ", DTypeName(lt->second.dtype));
  std::set<std::string> ready = {loss};  // values whose gradient "<v>_grad" is complete
  std::map<std::string, std::vector<std::string>> collected;
  for (size_t idx : active) {
    if (!wants.count(idx)) continue;  // no gradient flows through it
    const Node n = g.nodes[idx];  // copy: builders append to g.nodes
    GradContext ctx(&g, n, &types, model->OpsetFor(n.domain));
    bool any = false;
    for (const std::string& o : n.outputs) {
      bool has = !o.empty() && ready.count(o);
      ctx.dy.push_back(has ? o + "_grad" : "");
      any |= has;
    }
    if (!any) continue;
    if (ctx.dy[0].empty() && n.op_type != "Split" && n.op_type != "LSTMTraining" && n.op_type != "GRUTraining" &&
        n.op_type != "RNN") {
      return Unimplemented(n.Describe(), ": gradients through outputs other than the first are not supported");
    }
    const std::vector<bool>& w = wants[idx];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!w[i]) {
        ctx.dx.push_back("");
        continue;
      }
      const std::string& in = n.inputs[i];
      std::string name = partials[in] == 1 ? in + "_grad" : in + "_grad_" + std::to_string(collected[in].size());
      collected[in].push_back(name);
      ctx.dx.push_back(name);
    }
    const GradientRule* rule = FindGradientRule(n.domain, n.op_type);
    ONT_RETURN_IF_ERROR(rule->build(ctx).WithContext(StrCat("gradient of ", n.Describe())));
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!w[i]) continue;
      const std::string& in = n.inputs[i];
      if (static_cast<int>(collected[in].size()) != partials[in] || ready.count(in)) continue;
      if (partials[in] > 1) {
        g.nodes.push_back(MakeNode("Sum", collected[in], {in + "_grad"}, {}, "AccumulateGrad_" + in + "_grad"));
      }
      ready.insert(in);
    }
  }
  // 5. Gradients of the xs become graph outputs.
  for (const std::string& x : xs) {
    if (!ready.count(x)) {
      return InvalidArgument("cannot compute the partial derivative for '", x,
                             "' as it's unreachable from the output node(s)");
    }
    ValueInfo v = types.count(x) ? types[x] : ValueInfo();
    v.name = x + "_grad";
    g.outputs.push_back(v);
  }
  return Status::OK();
}

}  // namespace ontrain
