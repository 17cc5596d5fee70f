// Conversion between ONNX TensorProtos and ontrain host tensors, including external data files.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "core/status.h"
#include "core/tensor.h"

namespace ontrain {

// Reads a TensorProto into a new host tensor. External data is read relative to `base_dir` (the model's
// folder); an empty base_dir rejects external data. Sizes are checked against the dims: a short or long
// payload is an error naming the tensor.
StatusOr<Tensor> TensorFromProto(const onnx::TensorProto& proto, const std::string& base_dir);

// Writes a host tensor as a TensorProto with raw_data.
onnx::TensorProto TensorToProto(const Tensor& tensor, const std::string& name);

}  // namespace ontrain
