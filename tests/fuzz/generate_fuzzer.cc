// Fuzz target: artifact generation (`ontrain generate`) from a fuzzed forward model: shape inference, the
// loss block, autodiff, fusion, the optimizer model and the checkpoint. The loss is CrossEntropyLoss, or
// MSELoss when the model's output does not suit it. Generated models must serialize.
#include <cstdio>
#include <cstdlib>

#include "graph/artifacts.h"
#include "graph/model_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto forward = ontrain::LoadModelFromBuffer(data, size, "");
  if (!forward.ok()) return 0;
  for (ontrain::LossKind loss : {ontrain::LossKind::kCrossEntropy, ontrain::LossKind::kMSE}) {
    ontrain::ArtifactOptions options;
    options.loss = loss;
    auto a = ontrain::GenerateArtifacts(forward.value(), options);
    if (!a.ok()) continue;
    for (const ontrain::Model* m : {&a->training, &a->eval, &a->optimizer}) {
      std::string bytes;
      if (!ontrain::ModelToProto(*m).SerializeToString(&bytes)) continue;
      auto again = ontrain::LoadModelFromBuffer(bytes.data(), bytes.size(), "");
      if (!again.ok()) {
        std::fprintf(stderr, "a generated model does not load: %s\n", again.status().ToString().c_str());
        std::abort();
      }
    }
    break;
  }
  return 0;
}
