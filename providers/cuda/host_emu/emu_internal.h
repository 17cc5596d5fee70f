// What the emulated device's files share: the API lock, the sticky device fault, device memory and checks
// of the memory a call is given (emu_runtime.cc, emu_memory.cc, emu_launch.cc, emu_blas.cc, emu_dnn.cc).
#pragma once

#include <mutex>

#include "providers/cuda/host_emu/include/cuda_emu.h"

namespace cuda_emu {

// Every API call holds this while it runs (the emulated device runs work on the calling thread).
std::recursive_mutex& ApiLock();

// A fault while work ran (a bad address found when a kernel or library call executed): like a GPU's, it is
// sticky, and every later runtime call returns it. cudaSuccess while none happened.
cudaError_t StickyFault();
void Fault(cudaError_t e, const char* call, const char* what);

// Whether [p, p + bytes) lies inside one live device allocation (bytes 0: p itself, or null).
bool DeviceRange(const void* p, size_t bytes);

// The device memory region (emu_memory.cc): 256-byte aligned blocks, null when the region is full; the
// region is inaccessible to host code except inside a DeviceAccess, where device work runs.
void* DeviceAllocate(size_t bytes);
void DeviceFree(void* p, size_t bytes);
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

}  // namespace cuda_emu
