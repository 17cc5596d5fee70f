// Device memory for the CUDA provider: a caching allocator, so that after the first steps at a shape no
// call reaches cudaMalloc or cudaFree (both synchronize the device). Freed blocks go to a free list keyed
// by size and are handed out again for requests up to their size (at most twice as large as asked); when
// cudaMalloc runs out of memory, the free list is returned to the device and the request retried once.
//
// Blocks are reused in stream order: the provider has a single stream, so a kernel queued after a block
// was freed runs after every kernel that used it before.
#pragma once

#include <map>
#include <mutex>

#include "core/allocator.h"

namespace ontrain {
namespace cuda {

class CudaAllocator : public IAllocator {
 public:
  explicit CudaAllocator(int device_index) : device_index_(device_index) {}
  ~CudaAllocator() override;

  void* Allocate(size_t bytes) override;
  void Free(void* p) override;
  Device device() const override { return {DeviceType::kCUDA, device_index_}; }
  const AllocatorStats& stats() const { return stats_; }
  // backing_allocs counts the calls that reached cudaMalloc: none in steady-state steps (parity tests).
  const AllocatorStats* counters() const override { return &stats_; }

 private:
  void ReleaseCacheLocked();

  int device_index_;
  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // cached blocks by size
  std::map<void*, size_t> sizes_;      // every live or cached block -> its size
  AllocatorStats stats_;
};

// Page-locked host memory (cudaHostAlloc), for host buffers the device copies from asynchronously: the
// sources of copies in a recorded run (IExecutionProvider::staging_allocator). Its tensors are host tensors.
class PinnedHostAllocator : public IAllocator {
 public:
  void* Allocate(size_t bytes) override;
  void Free(void* p) override;
  Device device() const override { return Device(); }
  const AllocatorStats* counters() const override { return &stats_; }

 private:
  AllocatorStats stats_;
};

}  // namespace cuda
}  // namespace ontrain
