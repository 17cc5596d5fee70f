// CreateProviders: parse, check the order, construct (loading the CUDA provider library when asked).
#include "engine/provider_list.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/random.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/plan_only_provider.h"
#include "providers/sim/sim_provider.h"

namespace ontrain {
namespace {

// "cuda" -> 0, "cuda:3" -> 3; an error for anything else after "cuda".
StatusOr<int> CudaDeviceIndex(const std::string& name) {
  if (name == "cuda") return 0;
  std::string digits = name.substr(5);
  if (digits.empty() || digits.size() > 4 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("provider \"", name, "\": expected cuda or cuda:N with N a device number");
  }
  return std::atoi(digits.c_str());
}

StatusOr<std::unique_ptr<IExecutionProvider>> CreateCuda(const std::string& name, const ProviderListOptions& o) {
  ONT_ASSIGN_OR_RETURN(int index, CudaDeviceIndex(name));
  ONT_ASSIGN_OR_RETURN(const ProviderLibraryApi* api, LoadCudaProviderLibrary().WithContext(StrCat("provider \"", name, "\"")));
  if (o.plan_only) {
    ONT_ASSIGN_OR_RETURN(KernelRegistry registry, KernelRegistry::Create(api->KernelList()));
    return std::unique_ptr<IExecutionProvider>(
        new PlanOnlyProvider(api->name, Device{DeviceType::kCUDA, index}, std::move(registry)));
  }
  DeviceProviderOptions d;
  d.device_index = index;
  d.deterministic = o.deterministic;
  d.graph_capture = o.graph_capture;
  d.next_kernel_seed = &NextKernelSeed;
  std::unique_ptr<IExecutionProvider> p;
  ONT_RETURN_IF_ERROR(api->Create(d, &p).WithContext(StrCat("provider \"", name, "\"")));
  return p;
}

}  // namespace

const char* ProviderNamesHelp() { return "cpu, sim (a simulated device), cuda or cuda:N (device N)"; }

Status CheckProviderName(const std::string& name) {
  if (name == "cpu" || name == "sim") return Status::OK();
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) return CudaDeviceIndex(name).status();
  return InvalidArgument("unknown provider \"", name, "\"; expected one of: ", ProviderNamesHelp());
}

StatusOr<const ProviderLibraryApi*> LoadCudaProviderLibrary() {
  return LoadProviderLibrary("libontrain_cuda.so", "ontrain/providers/cuda/libontrain_cuda.so", "ONTRAIN_CUDA_PROVIDER");
}

StatusOr<ProviderList> CreateProviders(const std::string& list, int threads) {
  ProviderListOptions o;
  o.threads = threads;
  return CreateProviders(list, o);
}

StatusOr<ProviderList> CreateProviders(const std::vector<std::string>& names, int threads) {
  ProviderListOptions o;
  o.threads = threads;
  return CreateProviders(names, o);
}

StatusOr<ProviderList> CreateProviders(const std::string& list, const ProviderListOptions& options) {
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
  return CreateProviders(names, options);
}

StatusOr<ProviderList> CreateProviders(const std::vector<std::string>& given, const ProviderListOptions& options) {
  if (options.threads < 0) return InvalidArgument("threads must be >= 0, got ", options.threads);
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
  int resolved =
      options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ProviderList out;
  for (const std::string& n : names) {
    std::unique_ptr<IExecutionProvider> p;
    if (n == "cpu") {
      CpuProviderOptions o;
      o.intra_op_threads = resolved;
      o.tune_pool = options.tune_pool;
      o.flush_denormals = options.flush_denormals;
      ONT_ASSIGN_OR_RETURN(p, CpuExecutionProvider::Create(o));
    } else if (n == "sim") {
      SimProviderOptions o;
      o.threads = resolved;
      o.graph_capture = options.graph_capture;
      ONT_ASSIGN_OR_RETURN(p, SimExecutionProvider::Create(o));
    } else if (n == "cuda" || n.rfind("cuda:", 0) == 0) {
      ONT_ASSIGN_OR_RETURN(p, CreateCuda(n, options));
    } else {
      return CheckProviderName(n);  // an error: the name is none of the above
    }
    out.ordered.push_back(p.get());
    out.owned.push_back(std::move(p));
  }
  return out;
}

}  // namespace ontrain
