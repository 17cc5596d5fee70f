// Whole-file reads, directory creation and crash-safe (temporary file, fsync, rename) writes.
#include "core/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

Status WriteFileAtomically(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return IoError("cannot create \"", tmp, "\" (is the folder writable?)");
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("writing \"", tmp, "\" failed after ", done, " of ", bytes.size(), " bytes");
    }
    done += static_cast<size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return IoError("flushing \"", tmp, "\" failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return IoError("renaming \"", tmp, "\" to \"", path, "\" failed");
  }
  return Status::OK();
}

}  // namespace ontrain
