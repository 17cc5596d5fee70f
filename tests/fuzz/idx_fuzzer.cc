// Fuzz target: the IDX image/label reader (plain or gzip). Sections: [images file, labels file].
#include "tests/fuzz/fuzz_util.h"
#include "tools/cli/dataset.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> s = ontrain::fuzz::SplitSections(data, size, 2);
  std::string images = ontrain::fuzz::WriteScratchFile("images-idx3-ubyte", s[0]);
  std::string labels = ontrain::fuzz::WriteScratchFile("labels-idx1-ubyte", s[1]);
  (void)ontrain::cli::LoadIdxPair(images, labels);
  return 0;
}
