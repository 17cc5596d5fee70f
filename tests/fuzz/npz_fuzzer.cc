// Fuzz target: the .npy and .npz readers of the CLI (tools/cli/npz): header parsing, zip directories,
// zip64 extra fields, deflate. Every array read must write back and read again unchanged.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "tests/fuzz/fuzz_util.h"
#include "tools/cli/npz.h"

namespace {

void CheckRoundTrip(const ontrain::Tensor& t) {
  auto bytes = ontrain::cli::SerializeNpy(t);
  auto back = bytes.ok() ? ontrain::cli::ParseNpy(bytes.value(), "round trip") : bytes.status();
  if (!back.ok() || back->dtype() != t.dtype() || back->shape() != t.shape() ||
      (t.SizeInBytes() && std::memcmp(back->raw_data(), t.raw_data(), t.SizeInBytes()) != 0)) {
    std::fprintf(stderr, "an array read from .npy does not survive SerializeNpy/ParseNpy\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto t = ontrain::cli::ParseNpy(bytes, "input.npy");
  if (t.ok()) CheckRoundTrip(t.value());
  std::string path = ontrain::fuzz::WriteScratchFile("input.npz", bytes);
  auto arrays = ontrain::cli::LoadNpz(path);
  if (arrays.ok()) {
    for (const auto& [name, a] : arrays.value()) CheckRoundTrip(a);
  }
  return 0;
}
