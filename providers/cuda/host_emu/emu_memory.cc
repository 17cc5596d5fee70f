// The emulated device's memory (emu_internal.h): one reserved region, handed out first fit, that host code
// can touch only while device work runs, and a fault handler that names a host access to it.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>

#include "providers/cuda/host_emu/emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

namespace cuda_emu {
namespace {

// Device allocations come from one reserved region that is inaccessible (PROT_NONE) except while emulated
// device work runs (DeviceAccess): host code that reads or writes device memory without a copy faults at
// once, as it would on a GPU, and the fault handler names it.
class DeviceHeap {
 public:
  static constexpr size_t kReserve = size_t{1} << 36;  // 64 GiB of address space, committed as used
  static constexpr size_t kGranule = 2u << 20;         // protection changes in 2 MiB steps (huge pages)

  DeviceHeap() {
    void* p = ::mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "cuda_emu: cannot reserve the emulated device's memory\n");
      std::abort();
    }
    base_ = reinterpret_cast<uintptr_t>(p);
    ::madvise(p, kReserve, MADV_HUGEPAGE);
    free_[base_] = kReserve;
  }

  bool Contains(uintptr_t a) const { return a >= base_ && a < base_ + kReserve; }

  // Under AddressSanitizer every allocation is followed by a poisoned redzone, and free space is poisoned,
  // so device code (instrumented like any host code here) that runs past an allocation is reported.
  static constexpr size_t kRedzone = EMU_ASAN ? 256 : 0;

  // First fit, 256-byte aligned; null when the region is full.
  void* Allocate(size_t bytes) {
#if EMU_ASAN
    const size_t asked = bytes;
#endif
    bytes = (bytes + 255) / 256 * 256 + kRedzone;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const uintptr_t a = it->first;
      const size_t left = it->second - bytes;
      free_.erase(it);
      if (left > 0) free_[a + bytes] = left;
      Commit(a + bytes);
#if EMU_ASAN
      ASAN_UNPOISON_MEMORY_REGION(reinterpret_cast<void*>(a), asked);
      ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(a + asked), bytes - asked);
#endif
      return reinterpret_cast<void*>(a);
    }
    return nullptr;
  }

  void Free(void* p, size_t bytes) {
    bytes = (bytes + 255) / 256 * 256 + kRedzone;
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
#if EMU_ASAN
    ASAN_POISON_MEMORY_REGION(p, bytes);
#endif
    auto next = free_.lower_bound(a);
    if (next != free_.end() && a + bytes == next->first) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == a) {
        a = prev->first;
        bytes += prev->second;
        free_.erase(prev);
      }
    }
    free_[a] = bytes;
    // Whole pages inside the free range go back to the system (they read as zero when reused, and
    // allocations fill themselves anyway).
    const uintptr_t page = 4096, lo = (a + page - 1) / page * page, hi = (a + bytes) / page * page;
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  }

  // Opens device memory to the host while emulated device work runs; nests.
  void Open() {
    if (open_++ == 0) Protect(PROT_READ | PROT_WRITE);
  }
  void Close() {
    if (--open_ == 0) Protect(PROT_NONE);
  }

 private:
  void Commit(uintptr_t end) {
    const uintptr_t want = (end - base_ + kGranule - 1) / kGranule * kGranule;
    if (want <= committed_) return;
#if EMU_ASAN
    ASAN_POISON_MEMORY_REGION(reinterpret_cast<void*>(base_ + committed_), want - committed_);
#endif
    if (open_ > 0) ::mprotect(reinterpret_cast<void*>(base_ + committed_), want - committed_, PROT_READ | PROT_WRITE);
    committed_ = want;
  }
  void Protect(int prot) {
    if (committed_ > 0 && ::mprotect(reinterpret_cast<void*>(base_), committed_, prot) != 0) {
      std::fprintf(stderr, "cuda_emu: mprotect of the emulated device's memory failed\n");
      std::abort();
    }
  }

  uintptr_t base_ = 0;
  size_t committed_ = 0;  // [base_, base_ + committed_) has been handed out at some time
  int open_ = 0;
  std::map<uintptr_t, size_t> free_;
};

DeviceHeap& Heap() {
  static DeviceHeap* h = new DeviceHeap;
  return *h;
}

// A fault on the emulated device's memory outside device work is host code touching device memory.
struct sigaction previous_segv;

void OnSegv(int sig, siginfo_t* info, void* context) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
  if (Heap().Contains(a)) {
    char msg[200];
    int n = std::snprintf(msg, sizeof msg,
                          "cuda_emu: host code touched emulated device memory at %p outside a copy or kernel (on a "
                          "GPU this is an invalid host access to a device pointer)\n",
                          info->si_addr);
    if (n > 0) (void)!::write(2, msg, static_cast<size_t>(n));
  }
  // Hand the fault on: the previous handler, or the default action (a crash with the usual report).
  if (previous_segv.sa_flags & SA_SIGINFO) {
    if (previous_segv.sa_sigaction != nullptr) {
      previous_segv.sa_sigaction(sig, info, context);
      return;
    }
  } else if (previous_segv.sa_handler != SIG_DFL && previous_segv.sa_handler != SIG_IGN) {
    previous_segv.sa_handler(sig);
    return;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void InstallHandler() {
  static bool installed = [] {
    struct sigaction sa = {};
    sa.sa_sigaction = &OnSegv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGSEGV, &sa, &previous_segv);
    return true;
  }();
  (void)installed;
}

}  // namespace

void* DeviceAllocate(size_t bytes) {
  InstallHandler();
  return Heap().Allocate(bytes);
}
void DeviceFree(void* p, size_t bytes) { Heap().Free(p, bytes); }
DeviceAccess::DeviceAccess() { Heap().Open(); }
DeviceAccess::~DeviceAccess() { Heap().Close(); }

}  // namespace cuda_emu
