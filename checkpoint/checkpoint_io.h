// Reading and writing CheckpointState in ONNX Runtime's flatbuffer checkpoint format (identifier "ODTC").
//
// Writes version 2 (what ONNX Runtime 1.19.2 requires) with ONNX Runtime's sorting rules; reads versions 1
// and 2 (the same tables; version 1 predates the nominal and external-data flags). Every buffer is checked
// by the flatbuffers verifier before any field is read, then every tensor's byte count against its shape,
// so a truncated or corrupt file is an error, never an out-of-bounds read. Saves are atomic.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/data_transfer.h"
#include "core/status.h"

namespace ontrain {

constexpr int32_t kCheckpointVersion = 2;

struct CheckpointSaveOptions {
  bool include_optimizer_state = true;
  // true: parameters in the state's parameter_order (as the offline artifact writer does); false: sorted
  // by name (as ONNX Runtime's runtime save does).
  bool keep_parameter_order = false;
  // When the tensors' bytes add up to more than this, they go to a side file "<path>.data" (flatbuffers
  // cannot address more than 2 GB).
  int64_t external_data_threshold = int64_t{1800} * 1000 * 1000;
  // Copies device tensors to the host before writing, in addition to the state's own `devices` (empty:
  // every tensor must be on the host or on a device the state names).
  std::vector<IDataTransfer*> devices;
};

Status SaveCheckpoint(const CheckpointState& state, const std::string& path, const CheckpointSaveOptions& options = {});
// The checkpoint as bytes (no external data).
StatusOr<std::string> SerializeCheckpoint(const CheckpointState& state, const CheckpointSaveOptions& options = {});

StatusOr<CheckpointState> LoadCheckpoint(const std::string& path);
StatusOr<CheckpointState> LoadCheckpointFromBuffer(const void* data, size_t size);

// The side file holding a checkpoint's external tensor data.
std::string ExternalCheckpointDataPath(const std::string& checkpoint_path);

}  // namespace ontrain
