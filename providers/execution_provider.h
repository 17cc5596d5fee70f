// IExecutionProvider: what the planner and the executor need from a device backend, and nothing more.
//
// A provider is a data transfer for its device (IDataTransfer: device, copies, synchronize), owns one
// allocator for it, lists its kernels (capability is derived from that list, never declared separately)
// and runs them. A device provider may also record the work of a run and replay it (graph capture: the
// executor decides when, engine/executor_capture.cc).
#pragma once

#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/data_transfer.h"
#include "core/status.h"
#include "core/tensor.h"
#include "providers/kernel.h"
#include "providers/kernel_registry.h"

namespace ontrain {

class ThreadPool;

// The device work queued between IExecutionProvider::BeginCapture and EndCapture (kernels and copies),
// replayable as one launch. A replay reads the device memory and the host staging that the recorded work
// names as they are at the replay; whatever else the kernels took from the host while they were recorded
// (scalars, shapes, pointers, launch sizes) is frozen as it was then.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  // Queues the recorded work again, in order after everything queued before.
  virtual Status Replay() = 0;
  // Returns once the last Replay no longer reads its host staging, so the caller may rewrite it.
  virtual Status WaitForReplay() = 0;
};

class IExecutionProvider : public IDataTransfer {
 public:
  virtual const std::string& name() const = 0;  // "CPU", "CUDA"
  virtual const KernelRegistry& kernel_registry() const = 0;
  virtual IAllocator* allocator() = 0;
  // Runs one prepared kernel. A device provider may override to enqueue or capture instead.
  virtual Status Run(OpKernel& kernel, KernelContext& ctx) { return kernel.Compute(ctx); }
  // The intra-op pool kernels may use (nullptr: run single-threaded).
  virtual ThreadPool* thread_pool() { return nullptr; }

  // Graph capture. A provider that can record and replay says so (and can be told not to, by its options).
  virtual bool can_capture() const { return false; }
  // Until EndCapture or AbortCapture, Run and CopyTensor record their work instead of doing it. A copy's
  // host source must come from staging_allocator() and stay allocated while the recording lives (a replay
  // reads it again); Synchronize and copies to the host fail.
  virtual Status BeginCapture() { return Unimplemented(name(), " cannot capture its work"); }
  virtual StatusOr<std::unique_ptr<CapturedWork>> EndCapture() { return Unimplemented(name(), " cannot capture its work"); }
  // Ends a capture that failed midway, dropping what was recorded.
  virtual void AbortCapture() {}
  // Host memory that recorded copies to this device may read (page-locked for CUDA).
  virtual IAllocator* staging_allocator() { return HostAllocator(); }
};

}  // namespace ontrain
