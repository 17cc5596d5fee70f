// Loading and saving ONNX models: bytes or files <-> ontrain's Model.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "core/status.h"
#include "core/file_io.h"
#include "graph/graph.h"

namespace ontrain {

// Reads an ONNX model file; tensors with external data are read from files beside it.
StatusOr<Model> LoadModel(const std::string& path);
// Parses serialized ModelProto bytes. `base_dir` locates external data files ("" allows none).
StatusOr<Model> LoadModelFromBuffer(const void* data, size_t size, const std::string& base_dir = "");

StatusOr<Model> ModelFromProto(const onnx::ModelProto& proto, const std::string& base_dir);
onnx::ModelProto ModelToProto(const Model& model);

// Writes the model atomically (temporary file, then rename), all tensors inline.
Status SaveModel(const Model& model, const std::string& path);

StatusOr<ValueInfo> ValueInfoFromProto(const onnx::ValueInfoProto& proto);
onnx::ValueInfoProto ValueInfoToProto(const ValueInfo& info);

}  // namespace ontrain
