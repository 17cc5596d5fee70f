// Finding and opening ontrain's own shared libraries that are loaded at run time (providers such as
// libontrain_cuda.so, communicators such as libontrain_mpi.so), so that the engine, the CLI and the tests
// start on machines that lack those libraries' dependencies. A library is never unloaded.
#pragma once

#include <string>

#include "core/status.h"

namespace ontrain {

// Opens `file` (once per process) and returns its exported C symbol `symbol`. `file` is looked for:
// 1. at the path in the environment variable `path_env` when it is set (an error if it is not there);
// 2. beside the binary or shared library holding this code, and in its Bazel runfiles under `runfiles_path`;
// 3. on the dynamic loader's search path (LD_LIBRARY_PATH, the run path, the system folders).
// A library that is not found is NotFound naming every place tried and what the loader said; one that is
// found but cannot be loaded, or lacks `symbol`, is FailedPrecondition saying so.
StatusOr<void*> LoadPluginSymbol(const std::string& file, const std::string& runfiles_path,
                                 const std::string& path_env, const std::string& symbol);

}  // namespace ontrain
