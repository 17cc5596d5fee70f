// See fuzz_util.h.
#include "tests/fuzz/fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ontrain {
namespace fuzz {

std::vector<std::string> SplitSections(const uint8_t* data, size_t size, size_t count) {
  std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> out;
  const std::string mark(kSectionMark);
  size_t start = 0;
  while (out.size() + 1 < count) {
    size_t at = all.find(mark, start);
    if (at == std::string::npos) break;
    out.push_back(all.substr(start, at - start));
    start = at + mark.size();
  }
  out.push_back(start <= all.size() ? all.substr(start) : "");
  out.resize(count);
  return out;
}

const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TEST_TMPDIR");
    if (base == nullptr || *base == '\0') base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ontrain-fuzz.XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      std::perror("fuzz harness: mkdtemp");
      std::abort();
    }
    return std::string(buf.data());
  }();
  return dir;
}

std::string WriteScratchFile(const std::string& name, const std::string& bytes) {
  std::string path = ScratchDir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) {
    std::fprintf(stderr, "fuzz harness: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

void RemoveScratchFile(const std::string& name) { std::remove((ScratchDir() + "/" + name).c_str()); }

}  // namespace fuzz
}  // namespace ontrain
