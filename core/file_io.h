// File helpers shared by every folder that reads or writes files (models, checkpoints, data, reports).
#pragma once

#include <string>

#include "core/status.h"

namespace ontrain {

// Reads a whole file; an error names the path.
StatusOr<std::string> ReadFileToString(const std::string& path);
// Creates `dir` and any missing parents (like mkdir -p).
Status MakeDirectories(const std::string& dir);

// Writes `bytes` to `path` through a temporary file in the same folder ("<path>.tmp.<pid>.<n>"), fsync,
// rename and an fsync of the folder, so that a crash or SIGKILL at any point leaves the old file or the new
// one, never a torn one. A failure (full disk, read-only folder) is an error naming the path and the
// system's reason, and leaves the old file untouched and no temporary file. Temporary files left by
// processes that were killed mid-save (their pid no longer runs) are removed by the next save to the path.
Status WriteFileAtomically(const std::string& path, const std::string& bytes);

// Test hook: makes WriteFileAtomically fail as a full disk or a read-only folder would. null: no faults.
struct WriteFaultsForTesting {
  int create_errno = 0;          // nonzero: creating the temporary file fails with this errno (EROFS, EACCES)
  int64_t fail_after_bytes = -1;  // >= 0: writing fails with write_errno once this many bytes are written
  int write_errno = 28;           // ENOSPC
};
void SetWriteFaultsForTesting(const WriteFaultsForTesting* faults);

}  // namespace ontrain
