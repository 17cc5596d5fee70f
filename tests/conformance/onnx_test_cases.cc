// Runfiles lookup for the ONNX test data repository (@onnx_testdata, see WORKSPACE).
#include "tests/conformance/onnx_test_cases.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "tools/cpp/runfiles/runfiles.h"

namespace ontrain {

std::string TestDataDir() {
  static const std::string dir = [] {
    std::string error;
    std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> rf(
        bazel::tools::cpp::runfiles::Runfiles::CreateForTest(&error));
    if (!rf) return std::string("/usr/include/onnx/backend/test/data");
    return rf->Rlocation("onnx_testdata");
  }();
  return dir;
}

std::vector<std::string> ListCases() {
  std::vector<std::string> out;
  for (const char* kind : {"node", "simple"}) {
    if (DIR* d = opendir((TestDataDir() + "/" + kind).c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n.rfind("test_", 0) == 0) out.push_back(std::string(kind) + "/" + n);
      }
      closedir(d);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace ontrain
