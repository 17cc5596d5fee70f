// ModelProto <-> Model; files through core/file_io.
#include "graph/model_io.h"

#include <limits>

#include "graph/tensor_proto.h"

namespace ontrain {

StatusOr<ValueInfo> ValueInfoFromProto(const onnx::ValueInfoProto& proto) {
  ValueInfo v;
  v.name = proto.name();
  v.type = proto.type();
  if (!proto.type().has_tensor_type()) {
    v.is_tensor = false;
    return v;
  }
  const auto& tt = proto.type().tensor_type();
  if (tt.elem_type() != 0) {
    auto dt = DTypeFromOnnx(tt.elem_type());
    v.dtype = dt.ok() ? dt.value() : DType::kUndefined;  // unsupported types fail later, where they are used
  }
  if (tt.has_shape()) {
    v.has_shape = true;
    for (const auto& d : tt.shape().dim()) {
      Dim dim;
      if (d.has_dim_value()) dim.value = d.dim_value();
      else if (d.has_dim_param()) dim.param = d.dim_param();
      v.dims.push_back(dim);
    }
  }
  return v;
}

onnx::ValueInfoProto ValueInfoToProto(const ValueInfo& info) {
  onnx::ValueInfoProto p;
  p.set_name(info.name);
  if (!info.is_tensor) {
    *p.mutable_type() = info.type;
    return p;
  }
  auto* tt = p.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(info.dtype));
  if (info.has_shape) {
    auto* shape = tt->mutable_shape();
    for (const Dim& d : info.dims) {
      auto* dp = shape->add_dim();
      if (d.known()) dp->set_dim_value(d.value);
      else if (!d.param.empty()) dp->set_dim_param(d.param);
    }
  }
  return p;
}

namespace {

Status GraphFromProto(const onnx::GraphProto& gp, const std::string& base_dir, Graph* g) {
  g->name = gp.name();
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return InvalidArgument("an initializer has no name");
    auto t = TensorFromProto(init, base_dir);
    if (!t.ok()) return t.status().WithContext(StrCat("initializer \"", init.name(), "\""));
    g->AddInitializer(init.name(), std::move(t).value());
  }
  for (const auto& in : gp.input()) {
    ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(in));
    g->inputs.push_back(std::move(v));
  }
  for (const auto& out : gp.output()) {
    ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(out));
    g->outputs.push_back(std::move(v));
  }
  for (const auto& vi : gp.value_info()) {
    ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(vi));
    g->value_infos.push_back(std::move(v));
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node n;
    n.name = np.name().empty() ? StrCat(np.op_type(), "_", i) : np.name();
    n.op_type = np.op_type();
    n.domain = NormalizeDomain(np.domain());
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    n.doc_string = np.doc_string();
    for (const auto& a : np.attribute()) n.attributes[a.name()] = a;
    g->nodes.push_back(std::move(n));
  }
  return Status::OK();
}

}  // namespace

StatusOr<Model> ModelFromProto(const onnx::ModelProto& proto, const std::string& base_dir) {
  Model m;
  m.ir_version = proto.ir_version();
  m.producer_name = proto.producer_name();
  m.producer_version = proto.producer_version();
  m.domain = proto.domain();
  m.model_version = proto.model_version();
  m.doc_string = proto.doc_string();
  m.metadata_props.assign(proto.metadata_props().begin(), proto.metadata_props().end());
  for (const auto& op : proto.opset_import()) m.opset_imports[NormalizeDomain(op.domain())] = op.version();
  if (!proto.has_graph()) return InvalidArgument("the model has no graph");
  ONT_RETURN_IF_ERROR(GraphFromProto(proto.graph(), base_dir, &m.graph));
  return m;
}

onnx::ModelProto ModelToProto(const Model& m) {
  onnx::ModelProto p;
  p.set_ir_version(m.ir_version);
  p.set_producer_name(m.producer_name);
  p.set_producer_version(m.producer_version);
  p.set_domain(m.domain);
  p.set_model_version(m.model_version);
  p.set_doc_string(m.doc_string);
  for (const auto& kv : m.metadata_props) *p.add_metadata_props() = kv;
  for (const auto& kv : m.opset_imports) {
    auto* op = p.add_opset_import();
    op->set_domain(kv.first);
    op->set_version(kv.second);
  }
  const Graph& g = m.graph;
  auto* gp = p.mutable_graph();
  gp->set_name(g.name);
  for (const Node& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(n.op_type);
    np->set_domain(n.domain);
    np->set_doc_string(n.doc_string);
    for (const auto& i : n.inputs) np->add_input(i);
    for (const auto& o : n.outputs) np->add_output(o);
    for (const auto& kv : n.attributes) *np->add_attribute() = kv.second;
  }
  for (const std::string& name : g.initializer_order) {
    *gp->add_initializer() = TensorToProto(g.initializers.at(name), name);
  }
  for (const auto& v : g.inputs) *gp->add_input() = ValueInfoToProto(v);
  for (const auto& v : g.outputs) *gp->add_output() = ValueInfoToProto(v);
  for (const auto& v : g.value_infos) *gp->add_value_info() = ValueInfoToProto(v);
  return p;
}

StatusOr<Model> LoadModelFromBuffer(const void* data, size_t size, const std::string& base_dir) {
  if (data == nullptr || size == 0) return InvalidArgument("the model buffer is empty");
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return InvalidArgument("the model buffer is ", size, " bytes; use external data above 2 GB");
  }
  onnx::ModelProto proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) {
    return DataLoss("the ", size, "-byte buffer is not a valid ONNX ModelProto (truncated or corrupt)");
  }
  return ModelFromProto(proto, base_dir);
}

StatusOr<Model> LoadModel(const std::string& path) {
  ONT_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  auto m = LoadModelFromBuffer(bytes.data(), bytes.size(), dir);
  if (!m.ok()) return m.status().WithContext(StrCat("loading model \"", path, "\""));
  return m;
}

Status SaveModel(const Model& model, const std::string& path) {
  onnx::ModelProto proto = ModelToProto(model);
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) {
    return InvalidArgument("model \"", path, "\" cannot be serialized (over 2 GB without external data?)");
  }
  return WriteFileAtomically(path, bytes);
}

}  // namespace ontrain
