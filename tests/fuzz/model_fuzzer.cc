// Fuzz target: an ONNX model from bytes (protobuf parsing, ontrain's graph import), then ONNX's shape
// inference through graph/shape_inference, then a save/load round trip of whatever loaded.
#include <cstdio>
#include <cstdlib>

#include "graph/model_io.h"
#include "graph/shape_inference.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto model = ontrain::LoadModelFromBuffer(data, size, "");
  if (!model.ok()) return 0;
  ontrain::Model typed = model.value();
  (void)ontrain::InferShapes(&typed);
  // A model ontrain loaded must survive its own serialization: ModelToProto is what every save uses.
  std::string bytes;
  if (!ontrain::ModelToProto(model.value()).SerializeToString(&bytes)) return 0;  // over 2 GB: not a fuzz size
  auto again = ontrain::LoadModelFromBuffer(bytes.data(), bytes.size(), "");
  if (!again.ok()) {
    std::fprintf(stderr, "a loaded model does not reload after ModelToProto: %s\n", again.status().ToString().c_str());
    std::abort();
  }
  return 0;
}
