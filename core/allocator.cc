// Host allocator with statistics.
#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace ontrain {

std::string Device::ToString() const {
  switch (type) {
    case DeviceType::kCPU: return "CPU";
    case DeviceType::kCUDA: return "CUDA:" + std::to_string(index);
    case DeviceType::kSimulated: return "SIM:" + std::to_string(index);
  }
  return "device?";
}

namespace {
constexpr size_t kAlign = 64;
constexpr size_t kHeader = kAlign;  // the block size is stored in front of the returned pointer
}  // namespace

void* CpuAllocator::Allocate(size_t bytes) {
  // At least one aligned unit after the header, also for 0 bytes: the pointer handed out then lies inside the
  // block (a pointer one past its end would make a live empty tensor look leaked to LeakSanitizer).
  size_t total = kHeader + std::max<size_t>(kAlign, ((bytes + kAlign - 1) / kAlign) * kAlign);
  void* base = std::aligned_alloc(kAlign, total);
  if (base == nullptr) return nullptr;
  std::memcpy(base, &bytes, sizeof(bytes));
  stats_.num_allocs++;
  stats_.backing_allocs++;
  int64_t now = stats_.bytes_in_use += static_cast<int64_t>(bytes);
  int64_t peak = stats_.peak_bytes.load();
  while (now > peak && !stats_.peak_bytes.compare_exchange_weak(peak, now)) {
  }
  return static_cast<uint8_t*>(base) + kHeader;
}

void CpuAllocator::Free(void* p) {
  if (p == nullptr) return;
  uint8_t* base = static_cast<uint8_t*>(p) - kHeader;
  size_t bytes;
  std::memcpy(&bytes, base, sizeof(bytes));
  stats_.num_frees++;
  stats_.bytes_in_use -= static_cast<int64_t>(bytes);
  std::free(base);
}

CpuAllocator* HostAllocator() {
  // Never destroyed: tensors may outlive main().
  static auto* allocator = new std::shared_ptr<CpuAllocator>(std::make_shared<CpuAllocator>());
  return allocator->get();
}

}  // namespace ontrain
