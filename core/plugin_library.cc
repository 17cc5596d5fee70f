// Finding and opening run-time libraries (dlopen; never dlclose).
#include "core/plugin_library.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace ontrain {
namespace {

bool IsFile(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Dirname(const std::string& p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// The file holding this code: the executable, or libontrain.so when the C API library loads us.
std::string ThisModulePath() {
  Dl_info info;
  if (::dladdr(reinterpret_cast<void*>(&IsFile), &info) != 0 && info.dli_fname != nullptr && info.dli_fname[0]) {
    char resolved[4096];
    if (::realpath(info.dli_fname, resolved) != nullptr) return resolved;
    return info.dli_fname;
  }
  return "";
}

// Places to look, in order, before the loader's own search path.
std::vector<std::string> Candidates(const std::string& file, const std::string& runfiles_path) {
  std::vector<std::string> out;
  std::string module = ThisModulePath();
  if (!module.empty()) out.push_back(Dirname(module) + "/" + file);
  std::vector<std::string> runfiles;
  for (const char* env : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* v = std::getenv(env); v != nullptr && v[0]) runfiles.push_back(v);
  }
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) runfiles.push_back(std::string(exe, n) + ".runfiles");
  if (!module.empty()) runfiles.push_back(module + ".runfiles");
  for (const std::string& r : runfiles) out.push_back(r + "/" + runfiles_path);
  return out;
}

StatusOr<void*> Open(const std::string& path, const std::string& symbol) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = ::dlerror();
    return FailedPrecondition("could not load ", path, ": ", err ? err : "unknown error");
  }
  void* sym = ::dlsym(handle, symbol.c_str());
  if (sym == nullptr) return FailedPrecondition(path, " is not the ontrain library expected here: it exports no ", symbol);
  return sym;
}

StatusOr<void*> LoadUncached(const std::string& file, const std::string& runfiles_path, const std::string& path_env,
                             const std::string& symbol) {
  if (const char* v = std::getenv(path_env.c_str()); v != nullptr && v[0]) {
    if (!IsFile(v)) return NotFound(path_env, "=", v, ": no such file");
    return Open(v, symbol);
  }
  std::string tried;
  for (const std::string& c : Candidates(file, runfiles_path)) {
    tried += "\n  " + c;
    if (IsFile(c)) return Open(c, symbol);
  }
  // The loader's search path: a missing library is "not found" there, anything else is an error worth showing.
  auto sym = Open(file, symbol);
  if (sym.ok()) return sym;
  return NotFound("the library ", file, " was not found; looked at", tried, "\n  and the dynamic loader's search path (",
                  sym.status().message(), ");\n  set ", path_env, " to its path");
}

}  // namespace

StatusOr<void*> LoadPluginSymbol(const std::string& file, const std::string& runfiles_path,
                                 const std::string& path_env, const std::string& symbol) {
  static std::mutex mu;
  static auto* loaded = new std::map<std::string, void*>();  // successes only
  std::lock_guard<std::mutex> lock(mu);
  const std::string key = file + "\n" + symbol;
  auto it = loaded->find(key);
  if (it != loaded->end()) return it->second;
  ONT_ASSIGN_OR_RETURN(void* sym, LoadUncached(file, runfiles_path, path_env, symbol));
  loaded->emplace(key, sym);
  return sym;
}

}  // namespace ontrain

