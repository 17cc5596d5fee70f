// Conversion between ONNX TensorProtos and ontrain host tensors, including external data files.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace ontrain {

// Reads a TensorProto into a new host tensor. External data is read relative to `base_dir` (the model's
// folder); an empty base_dir rejects external data. Sizes are checked against the dims: a short or long
// payload is an error naming the tensor.
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir);

// Writes a host tensor as a TensorProto with raw_data.
onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name);

// The tensor a Constant node produces, from whichever value attribute it has.
StatusOr<Tensor> ConstantNodeValue(const Node& n);

// Replaces every ONNX Constant node by an initializer holding its value, so that executors make constants
// once (and copy them to a device once) instead of at every run. Nodes whose value cannot be read here
// (sparse, strings) stay.
void FoldConstantNodes(Graph* g);

}  // namespace ontrain
