// CreateProviders: parse, check the order, construct.
#include "engine/provider_list.h"

#include <algorithm>
#include <thread>

#include "providers/cpu/cpu_provider.h"
#include "providers/sim/sim_provider.h"

namespace ontrain {

const char* ProviderNamesHelp() { return "cpu, sim (a simulated device), cuda"; }

StatusOr<ProviderList> CreateProviders(const std::string& list, int threads) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) return InvalidArgument("empty provider name in the provider list \"", list, "\"");
    names.push_back(name);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return CreateProviders(names, threads);
}

StatusOr<ProviderList> CreateProviders(const std::vector<std::string>& given, int threads) {
  if (threads < 0) return InvalidArgument("threads must be >= 0, got ", threads);
  std::vector<std::string> names = given;
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::count(names.begin(), names.end(), names[i]) > 1) {
      return InvalidArgument("provider \"", names[i], "\" is listed twice");
    }
  }
  auto cpu = std::find(names.begin(), names.end(), "cpu");
  if (cpu != names.end() && cpu != names.end() - 1) {
    return InvalidArgument("\"cpu\" must come last in the provider list: it runs every node it has a kernel for, "
                           "so no provider after it would get any");
  }
  if (cpu == names.end()) names.push_back("cpu");
  int resolved = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ProviderList out;
  for (const std::string& n : names) {
    std::unique_ptr<IExecutionProvider> p;
    if (n == "cpu") {
      ONT_ASSIGN_OR_RETURN(p, CpuExecutionProvider::Create({resolved}));
    } else if (n == "sim") {
      SimProviderOptions o;
      o.threads = resolved;
      ONT_ASSIGN_OR_RETURN(p, SimExecutionProvider::Create(o));
    } else if (n == "cuda" || n.rfind("cuda:", 0) == 0) {
      return Unimplemented("provider \"", n, "\": this build of ontrain has no CUDA provider (it was built without "
                           "one, whatever the CUDA toolkit, driver and devices of this machine); use ",
                           "--provider cpu, or sim,cpu to check placement on a simulated device");
    } else {
      return InvalidArgument("unknown provider \"", n, "\"; expected one of: ", ProviderNamesHelp());
    }
    out.ordered.push_back(p.get());
    out.owned.push_back(std::move(p));
  }
  return out;
}

}  // namespace ontrain
