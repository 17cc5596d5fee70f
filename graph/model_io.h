// Loading and saving ONNX models: bytes or files <-> ontrain's Model.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

#include "engine/status.h"
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

// Reads a whole file; an error names the path.
StatusOr<std::string> ReadFileToString(const std::string& path);
// Creates `dir` and any missing parents (like mkdir -p).
Status MakeDirectories(const std::string& dir);

// Writes `bytes` to `path` through a temporary file in the same folder, fsync and rename, so that a crash
// leaves either the old or the new file, never a torn one.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace ontrain
