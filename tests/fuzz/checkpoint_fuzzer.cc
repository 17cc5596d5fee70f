// Fuzz target: the checkpoint reader (flatbuffers verification and everything after it, versions 1 and 2).
// Sections: [checkpoint bytes, its external data file]. Reads from the buffer and from files; a checkpoint
// that loads must serialize, and the bytes ontrain writes must load back with the same tensors.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "checkpoint/checkpoint_io.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void Fail(const char* what, const ontrain::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  std::abort();
}

bool SameBytes(const ontrain::Tensor& a, const ontrain::Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.SizeInBytes() == b.SizeInBytes() &&
         (a.SizeInBytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.SizeInBytes()) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> s = ontrain::fuzz::SplitSections(data, size, 2);
  (void)ontrain::LoadCheckpointFromBuffer(s[0].data(), s[0].size());
  std::string path = ontrain::fuzz::WriteScratchFile("checkpoint", s[0]);
  ontrain::fuzz::WriteScratchFile("checkpoint.data", s[1]);
  auto state = ontrain::LoadCheckpoint(path);
  if (!state.ok()) return 0;
  auto bytes = ontrain::SerializeCheckpoint(state.value());
  if (!bytes.ok()) return 0;  // e.g. a nominal state with optimizer moments: refused with a message
  auto again = ontrain::LoadCheckpointFromBuffer(bytes->data(), bytes->size());
  if (!again.ok()) Fail("a checkpoint ontrain wrote does not load", again.status());
  for (const auto& [name, p] : state->parameters) {
    const ontrain::Parameter* q = again->FindParameter(name);
    if (q == nullptr || q->requires_grad != p.requires_grad || (!state->is_nominal && !SameBytes(p.data, q->data))) {
      std::fprintf(stderr, "parameter \"%s\" changed in a save/load round trip\n", name.c_str());
      std::abort();
    }
  }
  return 0;
}
