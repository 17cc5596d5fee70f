// Whole-file reads, directory creation and crash-safe (temporary file, fsync, rename) writes.
#include "core/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ontrain {

StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("cannot open file \"", path, "\"");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return IoError("reading \"", path, "\" failed");
  return ss.str();
}

Status MakeDirectories(const std::string& dir) {
  if (dir.empty()) return InvalidArgument("empty directory name");
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return IoError("cannot create directory \"", part, "\"");
    }
  }
  return Status::OK();
}

namespace {

std::atomic<const WriteFaultsForTesting*> g_faults{nullptr};
std::atomic<uint64_t> g_tmp_counter{0};

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Removes "<path>.tmp.<pid>[.<n>]" files whose process no longer runs: what a SIGKILL mid-save leaves.
void RemoveStaleTemporaries(const std::string& path) {
  const std::string dir = DirName(path);
  const std::string prefix = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || (*end != '\0' && *end != '.')) continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

}  // namespace

void SetWriteFaultsForTesting(const WriteFaultsForTesting* faults) { g_faults.store(faults); }

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  RemoveStaleTemporaries(path);
  const WriteFaultsForTesting* faults = g_faults.load();
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(g_tmp_counter++);
  int fd = faults && faults->create_errno ? (errno = faults->create_errno, -1)
                                          : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    return IoError("cannot save \"", path, "\": creating \"", tmp, "\" failed: ", std::strerror(errno));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    size_t chunk = bytes.size() - done;
    ssize_t w;
    if (faults && faults->fail_after_bytes >= 0 && done + chunk > static_cast<size_t>(faults->fail_after_bytes)) {
      chunk = static_cast<size_t>(faults->fail_after_bytes) - std::min(done, static_cast<size_t>(faults->fail_after_bytes));
      w = chunk > 0 ? ::write(fd, bytes.data() + done, chunk) : (errno = faults->write_errno, -1);
    } else {
      w = ::write(fd, bytes.data() + done, chunk);
    }
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("cannot save \"", path, "\": writing failed after ", done, " of ", bytes.size(),
                     " bytes: ", std::strerror(err), " (the previous file is unchanged)");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0) {
    int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return IoError("cannot save \"", path, "\": flushing failed: ", std::strerror(err), " (the previous file is unchanged)");
  }
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError("cannot save \"", path, "\": closing failed: ", std::strerror(err), " (the previous file is unchanged)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return IoError("cannot save \"", path, "\": renaming \"", tmp, "\" over it failed: ", std::strerror(err));
  }
  // The rename is durable only once the folder is on disk too.
  int dir = ::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::OK();
}

}  // namespace ontrain
