// Fuzz target: external-data resolution. Sections: [model bytes, the data file "weights.bin"]. The model is
// written beside the data file and loaded by path, so every location, offset and length it declares is
// resolved against a real file (and "../" or absolute locations must be refused without being opened).
#include "graph/model_io.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> s = ontrain::fuzz::SplitSections(data, size, 2);
  std::string model = ontrain::fuzz::WriteScratchFile("model.onnx", s[0]);
  ontrain::fuzz::WriteScratchFile("weights.bin", s[1]);
  (void)ontrain::LoadModel(model);
  (void)ontrain::LoadModelFromBuffer(s[0].data(), s[0].size(), ontrain::fuzz::ScratchDir());
  return 0;
}
