// Graph-building helpers.
#include "graph/builder.h"

#include "graph/tensor_proto.h"

namespace ontrain {

ValueInfo TensorInfo(const std::string& name, DType dtype, const std::vector<int64_t>& dims,
                     const std::vector<std::string>& params) {
  ValueInfo v;
  v.name = name;
  v.dtype = dtype;
  v.has_shape = true;
  for (size_t i = 0; i < dims.size(); ++i) {
    Dim d;
    d.value = dims[i];
    if (i < params.size() && !params[i].empty()) {
      d.value = -1;
      d.param = params[i];
    }
    v.dims.push_back(d);
  }
  return v;
}

ValueInfo SequenceInfo(const std::string& name, DType elem) {
  ValueInfo v;
  v.name = name;
  v.is_tensor = false;
  v.dtype = elem;
  v.type.mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(static_cast<int32_t>(elem));
  return v;
}

onnx::AttributeProto AttrInt(const std::string& name, int64_t v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(v);
  return a;
}

onnx::AttributeProto AttrFloat(const std::string& name, float v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

onnx::AttributeProto AttrString(const std::string& name, const std::string& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(v);
  return a;
}

onnx::AttributeProto AttrInts(const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

onnx::AttributeProto AttrFloats(const std::string& name, const std::vector<float>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a.add_floats(x);
  return a;
}

onnx::AttributeProto AttrStrings(const std::string& name, const std::vector<std::string>& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::STRINGS);
  for (const std::string& x : v) a.add_strings(x);
  return a;
}

onnx::AttributeProto AttrTensor(const std::string& name, const Tensor& v) {
  onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(onnx::AttributeProto::TENSOR);
  *a.mutable_t() = TensorToProto(v, name);
  return a;
}

Node MakeNode(const std::string& op_type, const std::vector<std::string>& inputs,
              const std::vector<std::string>& outputs, const std::vector<onnx::AttributeProto>& attributes,
              const std::string& name, const std::string& domain) {
  Node n;
  n.op_type = op_type;
  n.inputs = inputs;
  n.outputs = outputs;
  n.name = name.empty() ? op_type + "_" + (outputs.empty() ? std::string("node") : outputs[0]) : name;
  n.domain = NormalizeDomain(domain);
  for (const auto& a : attributes) n.attributes[a.name()] = a;
  return n;
}

Tensor FloatConstant(DType dtype, float v, const Shape& shape) {
  const size_t n = static_cast<size_t>(ShapeNumElements(shape));
  if (dtype == DType::kFloat64) return Tensor::FromVector<double>(std::vector<double>(n, v), shape);
  if (dtype == DType::kFloat16) return Tensor::FromVector<Float16>(std::vector<Float16>(n, Float16(v)), shape);
  return Tensor::FromVector<float>(std::vector<float>(n, v), shape);
}

}  // namespace ontrain
