// File helpers shared by every folder that reads or writes files (models, checkpoints, data, reports).
#pragma once

#include <string>

#include "core/status.h"

namespace ontrain {

// Reads a whole file; an error names the path.
StatusOr<std::string> ReadFileToString(const std::string& path);
// Creates `dir` and any missing parents (like mkdir -p).
Status MakeDirectories(const std::string& dir);

// Writes `bytes` to `path` through a temporary file in the same folder, fsync and rename, so that a crash
// leaves either the old or the new file, never a torn one.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

}  // namespace ontrain
