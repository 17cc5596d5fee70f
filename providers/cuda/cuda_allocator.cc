// The caching device allocator.
#include "providers/cuda/cuda_allocator.h"

#include <cuda_runtime_api.h>

namespace ontrain {
namespace cuda {
namespace {

// 512-byte granules below 1 MiB, whole MiB above: few distinct sizes, little waste.
size_t RoundUp(size_t bytes) {
  constexpr size_t kSmall = 512, kLarge = size_t{1} << 20;
  if (bytes < kLarge) return (std::max<size_t>(bytes, 1) + kSmall - 1) / kSmall * kSmall;
  return (bytes + kLarge - 1) / kLarge * kLarge;
}

}  // namespace

CudaAllocator::~CudaAllocator() {
  cudaSetDevice(device_index_);
  for (const auto& [p, bytes] : sizes_) cudaFree(p);
}

void* CudaAllocator::Allocate(size_t bytes) {
  size_t size = RoundUp(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto it = free_.lower_bound(size);
  if (it != free_.end() && it->first <= 2 * size) {
    p = it->second;
    size = it->first;
    free_.erase(it);
  } else {
    if (cudaSetDevice(device_index_) != cudaSuccess) return nullptr;
    if (cudaMalloc(&p, size) != cudaSuccess) {
      cudaGetLastError();
      ReleaseCacheLocked();
      if (cudaMalloc(&p, size) != cudaSuccess) {
        cudaGetLastError();
        return nullptr;
      }
    }
    stats_.backing_allocs++;
    sizes_[p] = size;
  }
  stats_.num_allocs++;
  int64_t now = stats_.bytes_in_use += static_cast<int64_t>(size);
  if (now > stats_.peak_bytes) stats_.peak_bytes = now;
  return p;
}

void CudaAllocator::Free(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(p);
  if (it == sizes_.end()) return;
  free_.emplace(it->second, p);
  stats_.num_frees++;
  stats_.bytes_in_use -= static_cast<int64_t>(it->second);
}

void CudaAllocator::ReleaseCacheLocked() {
  cudaSetDevice(device_index_);
  for (const auto& [bytes, p] : free_) {
    cudaFree(p);
    sizes_.erase(p);
  }
  free_.clear();
}

void* PinnedHostAllocator::Allocate(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  stats_.num_allocs++;
  stats_.backing_allocs++;
  return p;
}

void PinnedHostAllocator::Free(void* p) {
  if (p == nullptr) return;
  cudaFreeHost(p);
  stats_.num_frees++;
}

}  // namespace cuda
}  // namespace ontrain
