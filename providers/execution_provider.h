// IExecutionProvider: what the executor and the planner need from a device backend, and nothing more.
//
// A provider names its device, owns one allocator for it, lists its kernels (capability is derived from that
// list, never declared separately), copies tensors between host and device, runs a kernel and synchronizes.
#pragma once

#include <string>

#include "engine/allocator.h"
#include "engine/status.h"
#include "engine/tensor.h"
#include "providers/kernel.h"
#include "providers/kernel_registry.h"

namespace ontrain {

class ThreadPool;

class IExecutionProvider {
 public:
  virtual ~IExecutionProvider() = default;

  virtual const std::string& name() const = 0;  // "CPU", "CUDA"
  virtual Device device() const = 0;
  virtual const KernelRegistry& kernel_registry() const = 0;
  virtual IAllocator* allocator() = 0;
  // Copies `src` into `dst` (same dtype and element count). Each side is on the host or on this device.
  virtual Status CopyTensor(const Tensor& src, Tensor* dst) = 0;
  // Runs one prepared kernel. A device provider may override to enqueue or capture instead.
  virtual Status Run(OpKernel& kernel, KernelContext& ctx) { return kernel.Compute(ctx); }
  // Waits until all queued work of this provider has finished.
  virtual Status Synchronize() = 0;
  // The intra-op pool kernels may use (nullptr: run single-threaded).
  virtual ThreadPool* thread_pool() { return nullptr; }
};

// Checks that a copy between `src` and `dst` is well-formed (same dtype and size).
Status CheckCopyCompatible(const Tensor& src, const Tensor& dst);

}  // namespace ontrain
