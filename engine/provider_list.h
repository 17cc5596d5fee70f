// Execution providers by name, for the CLI, the C API and the other bindings: "cpu", "sim" (the simulated
// device of providers/sim, for checking placement without a GPU) and "cuda" or "cuda:N" (device N, from
// libontrain_cuda.so, loaded on first use: see providers/provider_library.h; ONTRAIN_CUDA_PROVIDER names
// its path). A list is in priority order and ends with "cpu", the fallback for every node; "cpu" is
// appended when missing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "providers/execution_provider.h"
#include "providers/provider_library.h"

namespace ontrain {

struct ProviderList {
  std::vector<std::unique_ptr<IExecutionProvider>> owned;
  std::vector<IExecutionProvider*> ordered;  // priority order, the CPU provider last
};

struct ProviderListOptions {
  int threads = 0;  // intra-op threads per provider (0: one per core)
  // The CPU provider's pool: executors time runs with and without it and keep the faster (pool_tuner.h).
  bool tune_pool = true;
  // Device providers only plan (PlanOnlyProvider): placement reports on machines without the device.
  bool plan_only = false;
  // Device providers: fixed algorithms, no atomics (bit-identical reruns).
  bool deterministic = true;
  // Device providers (cuda, sim): record a graph's run once its shapes have been seen and replay it
  // (engine/executor_capture.cc); false runs every kernel eagerly.
  bool graph_capture = true;
  // The CPU provider: subnormal floats flushed to zero (CpuProviderOptions::flush_denormals).
  bool flush_denormals = false;
};

// `names`: e.g. {"sim", "cpu"}.
StatusOr<ProviderList> CreateProviders(const std::vector<std::string>& names, const ProviderListOptions& options);
StatusOr<ProviderList> CreateProviders(const std::vector<std::string>& names, int threads);
// A comma-separated list ("cuda,cpu").
StatusOr<ProviderList> CreateProviders(const std::string& list, const ProviderListOptions& options);
StatusOr<ProviderList> CreateProviders(const std::string& list, int threads);

// The CUDA provider library's kernel list and build description, or why it cannot be loaded.
StatusOr<const ProviderLibraryApi*> LoadCudaProviderLibrary();

// The names CreateProviders accepts, for help texts; and whether `name` is one (an error naming it if not).
const char* ProviderNamesHelp();
Status CheckProviderName(const std::string& name);

}  // namespace ontrain
