// Small helpers for building graphs in code: typed value infos, nodes and attributes. Used by tests today
// and by the artifact generator (autodiff, loss blocks, optimizer graphs).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace ontrain {

// dims: >= 0 known, -1 unknown; `params` names symbolic dims by position (empty string: none).
ValueInfo TensorInfo(const std::string& name, DType dtype, const std::vector<int64_t>& dims,
                     const std::vector<std::string>& params = {});

// A seq(tensor(elem)) value info, without a shape (as optimizer models declare theirs).
ValueInfo SequenceInfo(const std::string& name, DType elem = DType::kFloat32);

onnx::AttributeProto AttrInt(const std::string& name, int64_t v);
onnx::AttributeProto AttrFloat(const std::string& name, float v);
onnx::AttributeProto AttrString(const std::string& name, const std::string& v);
onnx::AttributeProto AttrInts(const std::string& name, const std::vector<int64_t>& v);
onnx::AttributeProto AttrFloats(const std::string& name, const std::vector<float>& v);
onnx::AttributeProto AttrStrings(const std::string& name, const std::vector<std::string>& v);
onnx::AttributeProto AttrTensor(const std::string& name, const Tensor& v);

// A tensor filled with v, in the floating-point type `dtype` (float64 and float16 as such; anything else
// gets float32), for constants that must match a value's type.
Tensor FloatConstant(DType dtype, float v, const Shape& shape);

Node MakeNode(const std::string& op_type, const std::vector<std::string>& inputs,
              const std::vector<std::string>& outputs, const std::vector<onnx::AttributeProto>& attributes = {},
              const std::string& name = "", const std::string& domain = "");

}  // namespace ontrain
