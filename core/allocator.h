// Devices and allocators. Each execution provider owns exactly one IAllocator for its device; every tensor
// buffer, arena and scratch area of that provider comes from it, so its counters see all allocations.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ontrain {

// kSimulated: a device simulated in protected host memory (providers/sim), for testing placement and copies.
enum class DeviceType { kCPU = 0, kCUDA = 1, kSimulated = 2 };

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  bool is_host() const { return type == DeviceType::kCPU; }
  std::string ToString() const;
};

// Counts calls and bytes; the executor's "no allocation after warm-up" guarantee is tested through it.
struct AllocatorStats {
  std::atomic<int64_t> num_allocs{0};
  std::atomic<int64_t> num_frees{0};
  std::atomic<int64_t> bytes_in_use{0};
  std::atomic<int64_t> peak_bytes{0};
  // Allocate calls that reached the memory's own source (aligned_alloc, mmap, cudaMalloc) rather than a
  // cache: a steady-state step must add none.
  std::atomic<int64_t> backing_allocs{0};
};

// Allocators that are owned by a std::shared_ptr (providers' and the host allocator) stay alive while any
// tensor they allocated lives, so a CheckpointState may outlive the session and provider that allocated
// its tensors.
class IAllocator : public std::enable_shared_from_this<IAllocator> {
 public:
  virtual ~IAllocator() = default;
  // Returns nullptr when the memory cannot be had; `bytes` may be 0.
  virtual void* Allocate(size_t bytes) = 0;
  virtual void Free(void* p) = 0;
  virtual Device device() const = 0;
  // The allocator's counters, where it keeps them (the steady-state tests read them through this).
  virtual const AllocatorStats* counters() const { return nullptr; }
};

// 64-byte aligned host memory.
class CpuAllocator : public IAllocator {
 public:
  void* Allocate(size_t bytes) override;
  void Free(void* p) override;
  Device device() const override { return Device(); }
  const AllocatorStats& stats() const { return stats_; }
  const AllocatorStats* counters() const override { return &stats_; }

 private:
  AllocatorStats stats_;
};

// The process-wide host allocator used for tensors made outside any provider (model loading, tests).
CpuAllocator* HostAllocator();

}  // namespace ontrain
