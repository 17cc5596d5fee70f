// The main() of a fuzz target outside the fuzz build: runs LLVMFuzzerTestOneInput once on every file named
// on the command line (folders: every file in them, sorted), so that the seed corpus and every crash found
// so far replay as a regression test in the ordinary test suite, under any sanitizer config. Prints how
// many inputs ran; exits non-zero when none did (an empty corpus is a broken test, not a pass).
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace {

void Collect(const std::string& path, std::vector<std::string>* files) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    std::fprintf(stderr, "replay: %s does not exist\n", path.c_str());
    std::exit(2);
  }
  if (!S_ISDIR(st.st_mode)) {
    files->push_back(path);
    return;
  }
  DIR* d = ::opendir(path.c_str());
  std::vector<std::string> names;
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  if (d) ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) Collect(path + "/" + n, files);
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') continue;  // libFuzzer flags, accepted and ignored
    Collect(argv[i], &files);
  }
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("replay: %zu inputs ran without a crash\n", files.size());
  return files.empty() ? 1 : 0;
}
