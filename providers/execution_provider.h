// IExecutionProvider: what the planner and the executor need from a device backend, and nothing more.
//
// A provider is a data transfer for its device (IDataTransfer: device, copies, synchronize), owns one
// allocator for it, lists its kernels (capability is derived from that list, never declared separately)
// and runs them.
#pragma once

#include <string>

#include "core/allocator.h"
#include "core/data_transfer.h"
#include "core/status.h"
#include "core/tensor.h"
#include "providers/kernel.h"
#include "providers/kernel_registry.h"

namespace ontrain {

class ThreadPool;

class IExecutionProvider : public IDataTransfer {
 public:
  virtual const std::string& name() const = 0;  // "CPU", "CUDA"
  virtual const KernelRegistry& kernel_registry() const = 0;
  virtual IAllocator* allocator() = 0;
  // Runs one prepared kernel. A device provider may override to enqueue or capture instead.
  virtual Status Run(OpKernel& kernel, KernelContext& ctx) { return kernel.Compute(ctx); }
  // The intra-op pool kernels may use (nullptr: run single-threaded).
  virtual ThreadPool* thread_pool() { return nullptr; }
};

}  // namespace ontrain
