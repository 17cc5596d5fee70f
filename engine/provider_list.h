// Execution providers by name, for the CLI, the C API and the other bindings: "cpu", "sim" (the simulated
// device of providers/sim, for checking placement without a GPU) and "cuda" (not in this build yet: asking
// for it says so). A list is in priority order and ends with "cpu", the fallback for every node; "cpu" is
// appended when missing.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct ProviderList {
  std::vector<std::unique_ptr<IExecutionProvider>> owned;
  std::vector<IExecutionProvider*> ordered;  // priority order, the CPU provider last
};

// `names`: e.g. {"sim", "cpu"}; `threads`: intra-op threads per provider (0: one per core).
StatusOr<ProviderList> CreateProviders(const std::vector<std::string>& names, int threads);
// A comma-separated list ("cuda,cpu").
StatusOr<ProviderList> CreateProviders(const std::string& list, int threads);

// The names CreateProviders accepts, for help texts.
const char* ProviderNamesHelp();

}  // namespace ontrain
