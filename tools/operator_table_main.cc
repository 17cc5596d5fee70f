// Prints docs/operators.md: `bazel run //tools:operator_table > docs/operators.md`. Needs a build with
// the CUDA provider library (it reads the CUDA kernel list from it, without any device).
#include <cstdio>

#include "engine/provider_list.h"
#include "providers/cpu/cpu_provider.h"
#include "tools/operator_table.h"

int main() {
  auto api = ontrain::LoadCudaProviderLibrary();
  if (!api.ok()) {
    std::fprintf(stderr, "operator_table: %s\n", api.status().ToString().c_str());
    return 1;
  }
  std::string table = ontrain::MakeOperatorTable(ontrain::CpuKernelList(), api.value()->KernelList());
  std::fwrite(table.data(), 1, table.size(), stdout);
  return 0;
}
