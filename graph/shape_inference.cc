// Bridges ontrain's Model to onnx::shape_inference::InferShapes, adding the output types of the
// com.microsoft forward ops that ontrain's own rewrites introduce (ONNX's inference skips that domain), and
// ranks where ONNX's rules stop short (computed Slice starts, Reshape to a computed shape).
#include "graph/shape_inference.h"

#include <algorithm>
#include <exception>
#include <map>
#include <set>

#include <onnx/shape_inference/implementation.h>

#include "graph/model_io.h"

namespace ontrain {
namespace {

// Output types of a com.microsoft node whose outputs follow from its inputs' types, or false when the op
// has no rule here or its first input is untyped. BatchNormInternal: Y like X, the four statistics [C];
// ConcatTraining: Concat's rule and int64 [inputs]; the elementwise activations: Y like X; FusedMatMul:
// MatMul's rule on the (optionally) transposed operands; LSTMTraining / GRUTraining: the recurrent layer's
// outputs plus every step's states and gate pre-activations.
// Without `need_shape`, an input known by type alone gives outputs known by type alone.
bool InferMicrosoftNode(const Node& n, const std::map<std::string, const ValueInfo*>& known,
                        std::vector<ValueInfo>* out, bool need_shape) {
  if (n.inputs.empty()) return false;
  auto x = known.find(n.inputs[0]);
  if (x == known.end() || x->second->dtype == DType::kUndefined) return false;
  if (need_shape && !x->second->has_shape) return false;
  const ValueInfo& xi = *x->second;
  // An output already known needs nothing more, unless it is known by type alone and a shape is asked for:
  // a later round, with more of the inputs shaped, may give it one (a ConcatTraining typed before its
  // second input had a shape kept no shape, and every layer after it none: DenseNet).
  auto settled = [&](const std::string& name) {
    auto k = known.find(name);
    return k != known.end() && (k->second->has_shape || !need_shape);
  };
  auto emit = [&](ValueInfo v) {
    auto k = known.find(v.name);
    if (k != known.end() && !(v.has_shape && !k->second->has_shape)) return;
    out->push_back(std::move(v));
  };
  auto like = [&](size_t i, bool channels) {
    if (i >= n.outputs.size() || n.outputs[i].empty() || settled(n.outputs[i])) return;
    ValueInfo v;
    v.name = n.outputs[i];
    v.dtype = xi.dtype;
    if (xi.has_shape && (!channels || xi.dims.size() >= 2)) {
      v.has_shape = true;
      v.dims = channels ? std::vector<Dim>{xi.dims[1]} : xi.dims;
    }
    emit(std::move(v));
  };
  if (n.op_type == "BatchNormInternal") {
    like(0, false);
    for (size_t i = 1; i < 5; ++i) like(i, true);
    return true;
  }
  if (n.op_type == "ConcatTraining") {  // Concat's shape rule, plus int64 [number of inputs]
    if (n.outputs.size() > 1 && !n.outputs[1].empty() && !settled(n.outputs[1])) {
      ValueInfo lengths;
      lengths.name = n.outputs[1];
      lengths.dtype = DType::kInt64;
      lengths.has_shape = true;
      lengths.dims = {Dim{static_cast<int64_t>(n.inputs.size()), ""}};
      emit(std::move(lengths));
    }
    if (n.outputs.empty() || settled(n.outputs[0])) return true;
    ValueInfo y;
    y.name = n.outputs[0];
    y.dtype = xi.dtype;
    y.has_shape = xi.has_shape;
    y.dims = xi.dims;
    const int64_t rank = static_cast<int64_t>(xi.dims.size());
    int64_t axis = n.GetInt("axis", 0);
    if (axis < 0) axis += rank;
    if (!xi.has_shape || axis < 0 || axis >= rank) {
      y.has_shape = false;
      y.dims.clear();
    } else {
      for (size_t k = 1; k < n.inputs.size() && y.has_shape; ++k) {
        auto in = known.find(n.inputs[k]);
        if (in == known.end() || !in->second->has_shape || in->second->dims.size() != xi.dims.size()) {
          y.has_shape = false;
          y.dims.clear();
          break;
        }
        Dim& d = y.dims[axis];
        const Dim& e = in->second->dims[axis];
        d = d.known() && e.known() ? Dim{d.value + e.value, ""} : Dim{};
        for (int64_t j = 0; j < rank; ++j) {
          if (j != axis && !y.dims[j].known() && in->second->dims[j].known()) y.dims[j] = in->second->dims[j];
        }
      }
    }
    emit(std::move(y));
    return true;
  }
  if (n.op_type == "LSTMTraining" || n.op_type == "GRUTraining") {
    // X [S, B, I] -> LSTM: [S, D, B, H], [D, B, H] twice, [S, D, B, H], [S, D, B, 4H];
    //                GRU: [S, D, B, H], [D, B, H], [S, D, B, 3H]
    const bool lstm = n.op_type == "LSTMTraining";
    const int64_t h = n.GetInt("hidden_size", 0), d = n.GetString("direction", "forward") == "bidirectional" ? 2 : 1;
    const bool shaped = xi.has_shape && xi.dims.size() == 3;
    const Dim H{h, ""}, D{d, ""}, G{(lstm ? 4 : 3) * h, ""}, S = shaped ? xi.dims[0] : Dim{}, B = shaped ? xi.dims[1] : Dim{};
    const std::vector<Dim> all = {S, D, B, H}, state = {D, B, H}, gates = {S, D, B, G};
    const std::vector<std::vector<Dim>> dims =
        lstm ? std::vector<std::vector<Dim>>{all, state, state, all, gates} : std::vector<std::vector<Dim>>{all, state, gates};
    for (size_t i = 0; i < n.outputs.size() && i < dims.size(); ++i) {
      if (n.outputs[i].empty() || settled(n.outputs[i])) continue;
      ValueInfo v;
      v.name = n.outputs[i];
      v.dtype = xi.dtype;
      v.has_shape = true;
      v.dims = dims[i];
      emit(std::move(v));
    }
    return true;
  }
  if (n.op_type == "Gelu" || n.op_type == "FastGelu" || n.op_type == "QuickGelu" || n.op_type == "BiasGelu") {
    like(0, false);
    return true;
  }
  if (n.op_type == "FusedMatMul") {  // MatMul's rule with A and B transposed in their last two dims on request
    if (n.inputs.size() < 2 || n.outputs.empty() || settled(n.outputs[0])) return false;
    auto b = known.find(n.inputs[1]);
    if (b == known.end() || (need_shape && !b->second->has_shape)) return false;
    const ValueInfo& bi = *b->second;
    ValueInfo y;
    y.name = n.outputs[0];
    y.dtype = xi.dtype;
    const size_t ra = xi.dims.size(), rb = bi.dims.size();
    if (xi.has_shape && bi.has_shape && ra >= 2 && rb >= 2 && (rb == 2 || ra == rb)) {
      y.has_shape = true;
      for (size_t d = 0; d + 2 < ra; ++d) {
        Dim da = xi.dims[d], db = rb == 2 ? Dim{1, ""} : bi.dims[d];
        y.dims.push_back(da.known() && da.value == 1 ? db : (db.known() && db.value == 1 ? da : (da.known() ? da : db)));
      }
      y.dims.push_back(n.GetInt("transA", 0) ? xi.dims[ra - 1] : xi.dims[ra - 2]);
      y.dims.push_back(n.GetInt("transB", 0) ? bi.dims[rb - 2] : bi.dims[rb - 1]);
    }
    emit(std::move(y));
    return true;
  }
  return false;
}

// Pad with `axes` (opset 18): libonnx 1.12 knows Pad up to opset 13 and rejects a fourth input, so
// InferShapes hides such a node from it (in a domain it has no schemas for) and types it here: the input's
// type; each padded axis grows by its two pads when the pads and axes are initializers and the dim is
// known; unknown dims otherwise.
bool IsPadWithAxes(const Node& n, const Model& model) {
  auto onnx_opset = model.opset_imports.find("");
  return n.op_type == "Pad" && (n.domain.empty() || n.domain == "ai.onnx") && n.inputs.size() >= 4 &&
         !n.inputs[3].empty() && onnx_opset != model.opset_imports.end() && onnx_opset->second >= 18;
}

bool InferPadWithAxes(const Node& n, const Model& model, const std::map<std::string, const ValueInfo*>& known,
                      std::vector<ValueInfo>* out, bool need_shape) {
  if (n.outputs.empty()) return false;
  auto done = known.find(n.outputs[0]);  // known by type alone: a shape may still be found (InferMicrosoftNode)
  if (done != known.end() && (done->second->has_shape || !need_shape)) return false;
  auto x = known.find(n.inputs[0]);
  if (x == known.end() || x->second->dtype == DType::kUndefined || (need_shape && !x->second->has_shape)) return false;
  ValueInfo y;
  y.name = n.outputs[0];
  y.dtype = x->second->dtype;
  if (x->second->has_shape) {
    y.has_shape = true;
    y.dims = x->second->dims;
    const int64_t rank = static_cast<int64_t>(y.dims.size());
    auto pads = model.graph.initializers.find(n.inputs[1]);
    auto axes = model.graph.initializers.find(n.inputs[3]);
    const bool constant = pads != model.graph.initializers.end() && axes != model.graph.initializers.end() &&
                          pads->second.dtype() == DType::kInt64 && axes->second.dtype() == DType::kInt64 &&
                          pads->second.NumElements() == 2 * axes->second.NumElements();
    const int64_t k = constant ? axes->second.NumElements() : 0;
    for (int64_t i = 0; i < k; ++i) {
      int64_t a = axes->second.data<int64_t>()[i];
      if (a < 0) a += rank;
      if (a < 0 || a >= rank) return false;  // the kernel reports it
      int64_t grow = 0, grown = 0;  // overflowing pads (a damaged file) leave the dim unknown
      const bool fits = !__builtin_add_overflow(pads->second.data<int64_t>()[i], pads->second.data<int64_t>()[i + k], &grow) &&
                        y.dims[a].known() && !__builtin_add_overflow(y.dims[a].value, grow, &grown) && grown >= 0;
      y.dims[a] = fits ? Dim{grown, ""} : Dim{};
    }
    if (!constant) {
      for (Dim& d : y.dims) d = Dim{};
    }
  }
  out->push_back(std::move(y));
  return true;
}

// Rank, and the dims that follow, of an ONNX-domain node's first output that ONNX's inference left without
// a shape: the ONNX version here gives up on Slice with computed starts and on Reshape to a computed shape
// (PyTorch's MultiheadAttention export has both), and then on everything downstream, while gradient
// builders need at least ranks. Dims that do not follow are left unknown; false when no rule applies.
bool InferRank(const Node& n, const std::map<std::string, const ValueInfo*>& known, std::vector<ValueInfo>* out) {
  static const std::set<std::string> kSameShape = {
      "Abs", "Cast", "Ceil", "Celu", "Clip", "Cos", "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu",
      "HardSigmoid", "HardSwish", "Identity", "LayerNormalization", "LeakyRelu", "Log", "LogSoftmax", "Neg", "Not",
      "Reciprocal",
      "Relu", "Selu", "Sigmoid", "Sign", "Sin", "Softmax", "Softplus", "Softsign", "Sqrt", "Tanh"};
  static const std::set<std::string> kBroadcast = {"Add", "And", "Div", "Equal", "Greater", "Less", "Max",
                                                   "Mean", "Min", "Mod", "Mul", "Or", "Pow", "Sub", "Sum", "Where"};
  if (!n.domain.empty() || n.outputs.empty() || n.outputs[0].empty()) return false;
  auto y = known.find(n.outputs[0]);
  if (y != known.end() && y->second->has_shape) return false;
  auto shaped = [&](size_t i) -> const ValueInfo* {
    if (i >= n.inputs.size() || n.inputs[i].empty()) return nullptr;
    auto it = known.find(n.inputs[i]);
    return it == known.end() || !it->second->has_shape ? nullptr : it->second;
  };
  const ValueInfo* x = shaped(0);
  std::vector<Dim> dims;
  DType dtype = x ? x->dtype : DType::kUndefined;
  const std::string& op = n.op_type;
  if (kSameShape.count(op)) {
    if (!x) return false;
    dims = x->dims;
    if (op == "Cast") dtype = static_cast<DType>(n.GetInt("to", 0));
    if (op == "Not") dtype = DType::kBool;
  } else if (kBroadcast.count(op)) {
    size_t rank = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!shaped(i)) return false;
      rank = std::max(rank, shaped(i)->dims.size());
    }
    dims.assign(rank, Dim{});
    for (size_t k = 0; k < rank; ++k) {  // from the right; a known dim > 1 decides, all-known ones give 1
      bool all_known = true;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const std::vector<Dim>& d = shaped(i)->dims;
        if (k >= d.size()) continue;
        const Dim& e = d[d.size() - 1 - k];
        if (!e.known()) all_known = false;
        else if (e.value != 1) dims[rank - 1 - k] = e;
      }
      if (all_known && !dims[rank - 1 - k].known()) dims[rank - 1 - k] = Dim{1, ""};
    }
    if (op == "Where") dtype = shaped(1)->dtype;
    if (op == "Equal" || op == "Greater" || op == "Less" || op == "And" || op == "Or") dtype = DType::kBool;
  } else if (op == "Slice" || op == "Concat") {
    if (!x) return false;
    dims.assign(x->dims.size(), Dim{});
  } else if (op == "Reshape") {
    const ValueInfo* s = shaped(1);
    if (!s || s->dims.size() != 1 || !s->dims[0].known() || dtype == DType::kUndefined) return false;
    dims.assign(static_cast<size_t>(s->dims[0].value), Dim{});
  } else if (op == "Transpose") {
    if (!x) return false;
    std::vector<int64_t> perm = n.GetInts("perm");
    if (perm.empty()) for (size_t i = x->dims.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != x->dims.size()) return false;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(x->dims.size())) return false;
      dims.push_back(x->dims[p]);
    }
  } else if (op == "MatMul") {
    const ValueInfo* b = shaped(1);
    if (!x || !b || x->dims.size() < 2 || b->dims.size() < 2) return false;
    dims.assign(std::max(x->dims.size(), b->dims.size()), Dim{});
    dims[dims.size() - 2] = x->dims[x->dims.size() - 2];
    dims.back() = b->dims.back();
  } else {
    return false;
  }
  ValueInfo v;
  v.name = n.outputs[0];
  v.dtype = y != known.end() && y->second->dtype != DType::kUndefined ? y->second->dtype : dtype;
  if (v.dtype == DType::kUndefined) return false;
  v.has_shape = true;
  v.dims = std::move(dims);
  out->push_back(std::move(v));
  return true;
}

// A domain ONNX has no schemas for: InferShapes moves there the nodes whose ONNX rule must not run (its
// inference skips them) and types them itself.
constexpr char kHiddenDomain[] = "ontrain.hidden";

// ConvTranspose: libonnx 1.12's rule reads W's dim 1, and one kernel dim of W per spatial axis of X, without
// checking W's rank (out-of-range reads; model_fuzzer found the crash). InferShapes keeps such a node hidden
// until a round has shaped both its inputs and CheckConvTransposeRanks has passed them; inside a subgraph,
// whose values ontrain does not type, it stays hidden.
bool IsConvTranspose(const std::string& op_type, const std::string& domain) {
  return op_type == "ConvTranspose" && (domain.empty() || domain == "ai.onnx");
}

Status CheckConvTransposeRanks(const Node& n, const ValueInfo& x, const ValueInfo& w) {
  if (x.dims.size() < 3 || w.dims.size() != x.dims.size()) {
    return InvalidArgument("node \"", n.name, "\" (ConvTranspose): X must have rank 3 or more and W the same rank, got X ",
                           x.TypeString(), " (", n.inputs[0], ") and W ", w.TypeString(), " (", n.inputs[1], ")");
  }
  return Status::OK();
}

// A hidden ConvTranspose whose X is typed but not shaped (so ONNX's rule would give Y only X's type): that
// type, so that nodes past it still get types.
void InferHiddenConvTransposeType(const Node& n, const std::map<std::string, const ValueInfo*>& known,
                                  std::vector<ValueInfo>* out) {
  if (n.inputs.empty() || n.outputs.empty() || n.outputs[0].empty() || known.count(n.outputs[0])) return;
  auto x = known.find(n.inputs[0]);
  if (x == known.end() || x->second->dtype == DType::kUndefined) return;
  ValueInfo y;
  y.name = n.outputs[0];
  y.dtype = x->second->dtype;
  out->push_back(std::move(y));
}

// Attribute values on which libonnx 1.12's own inference faults instead of reporting: a zero stride divides
// by zero in its Conv/pool rule (SIGFPE; the fuzzer found it). Checked in every graph ONNX will visit,
// subgraphs included, so that such a model is an error naming the node. ConvTranspose nodes in subgraphs
// move to kHiddenDomain (`hid` says whether any did).
Status CheckInferenceHazards(onnx::GraphProto* g, bool subgraph, bool* hid) {
  for (onnx::NodeProto& n : *g->mutable_node()) {
    if (subgraph && IsConvTranspose(n.op_type(), n.domain())) {
      n.set_domain(kHiddenDomain);
      *hid = true;
    }
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.name() == "strides") {
        for (int64_t v : a.ints()) {
          if (v <= 0) {
            return InvalidArgument("node \"", n.name(), "\" (", n.op_type(), "): strides must be positive, got ", v);
          }
        }
      }
      if (a.has_g()) ONT_RETURN_IF_ERROR(CheckInferenceHazards(a.mutable_g(), true, hid));
      for (onnx::GraphProto& sub : *a.mutable_graphs()) ONT_RETURN_IF_ERROR(CheckInferenceHazards(&sub, true, hid));
    }
  }
  return Status::OK();
}

// Declares kHiddenDomain in `proto` once, so that ONNX skips that domain's nodes instead of failing on it.
void ImportHiddenDomain(onnx::ModelProto* proto) {
  for (const onnx::OperatorSetIdProto& o : proto->opset_import()) {
    if (o.domain() == kHiddenDomain) return;
  }
  onnx::OperatorSetIdProto* opset = proto->add_opset_import();
  opset->set_domain(kHiddenDomain);
  opset->set_version(1);
}

// Runs ONNX's inference on `proto` in place. Data propagation (shapes computed by Shape/Gather/Concat
// feeding Reshape and the like) is wanted, but libonnx 1.12 dereferences a null type when a node with a
// data-propagation function reads a value that has no type (an input nothing defines, or the output of an
// op ONNX cannot type): the fuzzer found that crash. So inference first runs without propagation on a copy;
// propagation follows only when every input such a node reads then has a type. Otherwise the copy's
// result stands (fewer static shapes, no crash).
Status RunOnnxInference(onnx::ModelProto* proto) {
  bool hid = false;
  ONT_RETURN_IF_ERROR(CheckInferenceHazards(proto->mutable_graph(), false, &hid));
  if (hid) ImportHiddenDomain(proto);
  onnx::ShapeInferenceOptions options;
  options.check_type = true;
  options.error_mode = 1;  // throw on errors in known ops; unknown ops are skipped
  onnx::ModelProto plain = *proto;
  try {
    onnx::shape_inference::InferShapes(plain, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return InvalidArgument("shape inference failed: ", e.what());
  }
  std::set<std::string> typed;
  auto add = [&](const onnx::ValueInfoProto& v) {
    if (v.has_type() && v.type().value_case() != onnx::TypeProto::VALUE_NOT_SET) typed.insert(v.name());
  };
  const onnx::GraphProto& g = plain.graph();
  for (const auto& v : g.input()) add(v);
  for (const auto& v : g.value_info()) add(v);
  for (const auto& v : g.output()) add(v);
  for (const auto& t : g.initializer()) typed.insert(t.name());
  std::map<std::string, int> opsets;
  for (const auto& o : plain.opset_import()) opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = static_cast<int>(o.version());
  bool safe = true;
  for (const onnx::NodeProto& n : g.node()) {
    const std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
    auto opset = opsets.find(domain);
    if (opset == opsets.end()) continue;
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(n.op_type(), opset->second, domain);
    if (schema == nullptr || !schema->has_data_propagation_function()) continue;
    for (const std::string& in : n.input()) {
      if (!in.empty() && !typed.count(in)) safe = false;
    }
  }
  if (!safe) {
    *proto = std::move(plain);
    return Status::OK();
  }
  options.enable_data_propagation = true;
  try {
    onnx::shape_inference::InferShapes(*proto, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return InvalidArgument("shape inference failed: ", e.what());
  }
  return Status::OK();
}

}  // namespace

Status InferShapes(Model* model) {
  // Seeds: types ontrain adds for com.microsoft outputs, so that ONNX's inference continues past them.
  // Each round can type one more layer of such nodes; a graph has at most as many layers as nodes.
  std::vector<ValueInfo> seeds;
  std::vector<ValueInfo> initializer_infos;  // W of a ConvTranspose is usually one
  for (const auto& [name, t] : model->graph.initializers) {
    ValueInfo v;
    v.name = name;
    v.dtype = t.dtype();
    v.has_shape = true;
    for (int64_t d : t.shape()) v.dims.push_back(Dim{d, ""});
    initializer_infos.push_back(std::move(v));
  }
  std::set<size_t> cleared;  // ConvTranspose nodes whose input ranks CheckConvTransposeRanks passed
  for (size_t round = 0; round <= 2 * model->graph.nodes.size(); ++round) {
    onnx::ModelProto proto = ModelToProto(*model);
    proto.mutable_graph()->clear_value_info();
    // com.microsoft LSTMTraining is ONNX's LSTM (layout 0) plus two outputs: ONNX infers its first three
    // outputs as an LSTM (else a Shape of them would meet an untyped value, on which libonnx 1.12's data
    // propagation crashes), the other two come from InferMicrosoftNode.
    bool hidden = false;
    for (int i = 0; i < proto.graph().node_size() && i < static_cast<int>(model->graph.nodes.size()); ++i) {
      const Node& n = model->graph.nodes[i];  // node i of the proto is node i of the graph
      if (!IsPadWithAxes(n, *model) && !(IsConvTranspose(n.op_type, n.domain) && !cleared.count(i))) continue;
      proto.mutable_graph()->mutable_node(i)->set_domain(kHiddenDomain);
      hidden = true;
    }
    if (hidden) ImportHiddenDomain(&proto);
    for (onnx::NodeProto& node : *proto.mutable_graph()->mutable_node()) {
      if (node.domain() != "com.microsoft" || (node.op_type() != "LSTMTraining" && node.op_type() != "GRUTraining")) continue;
      const bool lstm = node.op_type() == "LSTMTraining";  // GRUTraining likewise: GRU plus one output
      node.set_domain("");
      node.set_op_type(lstm ? "LSTM" : "GRU");
      while (node.output_size() > (lstm ? 3 : 2)) node.mutable_output()->RemoveLast();
    }
    for (const ValueInfo& s : seeds) *proto.mutable_graph()->add_value_info() = ValueInfoToProto(s);
    ONT_RETURN_IF_ERROR(RunOnnxInference(&proto));
    model->graph.value_infos.clear();
    for (const auto& vi : proto.graph().value_info()) {
      ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(vi));
      model->graph.value_infos.push_back(std::move(v));
    }
    for (int i = 0; i < proto.graph().output_size(); ++i) {
      ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(proto.graph().output(i)));
      if (v.dtype != DType::kUndefined) model->graph.outputs[i] = std::move(v);
    }
    std::map<std::string, const ValueInfo*> known;
    for (const ValueInfo& v : model->graph.inputs) known[v.name] = &v;
    for (const ValueInfo& v : model->graph.value_infos) known[v.name] = &v;
    for (const ValueInfo& v : model->graph.outputs) if (v.dtype != DType::kUndefined) known[v.name] = &v;
    for (const ValueInfo& v : initializer_infos) known.emplace(v.name, &v);
    // A hidden ConvTranspose whose inputs now have shapes: checked, and ONNX's rule runs in the next round.
    bool unhid = false;
    for (size_t i = 0; i < model->graph.nodes.size(); ++i) {
      const Node& n = model->graph.nodes[i];
      if (!IsConvTranspose(n.op_type, n.domain) || cleared.count(i) || n.inputs.size() < 2) continue;
      auto x = known.find(n.inputs[0]);
      auto w = known.find(n.inputs[1]);
      if (x == known.end() || w == known.end() || !x->second->has_shape || !w->second->has_shape) continue;
      ONT_RETURN_IF_ERROR(CheckConvTransposeRanks(n, *x->second, *w->second));
      cleared.insert(i);
      unhid = true;
    }
    if (unhid) continue;
    std::vector<ValueInfo> added;
    for (const Node& n : model->graph.nodes) {
      if (n.domain == "com.microsoft") InferMicrosoftNode(n, known, &added, true);
      if (IsPadWithAxes(n, *model)) InferPadWithAxes(n, *model, known, &added, true);
    }
    if (added.empty()) {  // only once ONNX's rules have gone as far as they can: ranks past its gaps
      for (const Node& n : model->graph.nodes) InferRank(n, known, &added);
    }
    if (added.empty()) {  // and only then types without shapes, which would stop a later shape
      for (size_t i = 0; i < model->graph.nodes.size(); ++i) {
        const Node& n = model->graph.nodes[i];
        if (n.domain == "com.microsoft") InferMicrosoftNode(n, known, &added, false);
        if (IsPadWithAxes(n, *model)) InferPadWithAxes(n, *model, known, &added, false);
        if (IsConvTranspose(n.op_type, n.domain) && !cleared.count(i)) InferHiddenConvTransposeType(n, known, &added);
      }
    }
    if (added.empty()) break;
    for (ValueInfo& a : added) {  // a shape found for a value seeded by type alone replaces that seed
      auto same = std::find_if(seeds.begin(), seeds.end(), [&](const ValueInfo& s) { return s.name == a.name; });
      if (same != seeds.end()) *same = std::move(a);
      else seeds.push_back(std::move(a));
    }
  }
  return Status::OK();
}

}  // namespace ontrain
