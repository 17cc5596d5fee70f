// What the emulated runtime shares with its cuBLAS and cuDNN (emu_blas.cc, emu_dnn.cc): the API lock, the
// sticky device fault, and checks of the memory a library call is given.
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

}  // namespace cuda_emu
