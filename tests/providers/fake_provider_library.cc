// A provider library from "another build": it exports OntrainProviderLibrary with an ABI version the
// engine does not know, so loading it must fail with a clear error instead of calling into it.
#include "providers/provider_library.h"

namespace {

const ontrain::ProviderLibraryApi kStale = {ontrain::kProviderAbiVersion + 1, 0, "FAKE", "a stale build", nullptr, nullptr,
                                            nullptr};

}  // namespace

extern "C" __attribute__((visibility("default"))) const ontrain::ProviderLibraryApi* OntrainProviderLibrary() {
  return &kStale;
}
