// Execution providers that live in their own shared library (today: libontrain_cuda.so), loaded at run time
// when a session asks for them, so the engine, the CLI and the tests start on machines that lack the
// device's libraries, driver or hardware.
//
// A provider library exports one C symbol, `OntrainProviderLibrary`, returning a ProviderLibraryApi. The
// struct passes C++ types (Status, KernelDef, IExecutionProvider): a library is only ever loaded by the
// ontrain build it was built with, which `abi_version` and `abi_sizes` check. It is never unloaded: its
// kernels, allocators and tensors may outlive every session.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "providers/execution_provider.h"
#include "providers/kernel_registry.h"

namespace ontrain {

// What a session asks of a device provider.
struct DeviceProviderOptions {
  int device_index = 0;
  // Fixed library algorithms and no atomics in reductions: two runs give bit-identical results.
  bool deterministic = true;
  // Record a graph's run as one device graph once its shapes have been seen, and replay it
  // (engine/executor_capture.cc); false runs every kernel eagerly.
  bool graph_capture = true;
  // The engine's seed source for random kernels without a seed attribute (core/random.h's
  // NextKernelSeed): the library has its own copy of core/, so the engine's global seed reaches it
  // only through this.
  uint64_t (*next_kernel_seed)() = nullptr;
};

// 2: IAllocator::counters; 3: graph capture (IExecutionProvider's capture calls, OpKernel::capturable).
constexpr uint32_t kProviderAbiVersion = 3;

// sizeof of the types that cross the boundary, summed: a stale library built against other headers fails
// the check instead of corrupting memory.
constexpr uint64_t ProviderAbiSizes() {
  return sizeof(Status) + sizeof(KernelDef) * 3 + sizeof(DeviceProviderOptions) * 7 + sizeof(Tensor) * 11 +
         sizeof(KernelContext) * 13 + sizeof(NodeInfo) * 17;
}

struct ProviderLibraryApi {
  uint32_t abi_version;
  uint64_t abi_sizes;
  const char* name;        // "CUDA"
  const char* build_info;  // toolkit and library versions, device code targets
  // The number of usable devices, or an error saying why there is none (no driver, no device).
  Status (*CountDevices)(int* count);
  Status (*Create)(const DeviceProviderOptions& options, std::unique_ptr<IExecutionProvider>* out);
  // The kernel list, without touching any device (placement reports, the operator table).
  std::vector<KernelDef> (*KernelList)();
};

// Loads the library (once per process) and checks its ABI. `file` is the library's file name, looked for:
// 1. at the path in the environment variable `path_env` when it is set (an error if it is not there);
// 2. beside the binary or shared library holding this code, and in its Bazel runfiles under `runfiles_path`;
// 3. on the dynamic loader's search path (LD_LIBRARY_PATH, the run path, the system folders).
// The error names every place tried and what the loader said.
StatusOr<const ProviderLibraryApi*> LoadProviderLibrary(const std::string& file, const std::string& runfiles_path,
                                                        const std::string& path_env);

}  // namespace ontrain
