// The emulated CUDA runtime (cuda_emu.h): memory and its registry, streams, events, stream capture and
// graphs, errors, and kernel launches run block by block with one fiber per thread.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <numeric>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "providers/cuda/host_emu/emu_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define EMU_ASAN 1
#else
#define EMU_ASAN 0
#endif

#if !defined(__x86_64__)
#error "the emulated CUDA device switches fibers with x86-64 code"
#endif

// Device code runs only under the API lock, one launch at a time: its state is plain globals.
uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

struct CUstream_st {
  bool capturing = false;
  bool invalidated = false;
  CUgraph_st* graph = nullptr;
  // Work queued and not yet run: it runs, in order, when the host synchronizes with the stream (or with
  // everything), so host code that does not wait sees what it would see on a GPU.
  std::vector<cuda_emu::Work> queue;
};
struct CUevent_st {};
// A graph's work, shared by the graph and the executables made from it.
struct CUgraph_st {
  std::shared_ptr<std::vector<cuda_emu::Work>> work = std::make_shared<std::vector<cuda_emu::Work>>();
};
struct CUgraphExec_st {
  std::shared_ptr<std::vector<cuda_emu::Work>> work;
};

namespace cuda_emu {
namespace {

struct Allocation {
  size_t bytes;
  MemoryKind kind;
};

struct State {
  std::recursive_mutex lock;
  std::map<uintptr_t, Allocation> allocations;
  std::vector<CUstream_st*> streams;
  CUstream_st legacy;  // the null stream
  cudaError_t sticky = cudaSuccess;
  int messages = 0;
  // The work of destroyed graph executables, kept until no queue can refer to it.
  std::vector<std::shared_ptr<std::vector<Work>>> retired;
};

State& S() {
  static State* s = new State;  // never destroyed: providers may be torn down at exit
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;

void Report(const char* kind, const char* call, const char* what) {
  State& s = S();
  if (s.messages++ < 20) std::fprintf(stderr, "cuda_emu: %s in %s: %s\n", kind, call, what);
}

CUstream_st* StreamOf(cudaStream_t stream) { return stream == nullptr ? &S().legacy : stream; }

// Runs the work queued on a stream (defined with the device memory below).
void RunQueued(CUstream_st* st);

void RunAll() {
  State& s = S();
  RunQueued(&s.legacy);
  for (CUstream_st* st : s.streams) RunQueued(st);
}

// Synchronizing a capturing stream is an error that ends its capture as invalid.
cudaError_t SyncStream(CUstream_st* st) {
  if (st->capturing) {
    st->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  RunQueued(st);
  return S().sticky;
}

// ---- Fibers --------------------------------------------------------------------------------------------

// Saves the callee-saved registers on the current stack, stores the stack pointer in *from and resumes the
// context whose stack pointer is `to`. MXCSR and the x87 control word are not switched: every fiber of a
// launch runs in the launching thread's floating-point mode, and device code does not change it.
extern "C" void ontrain_cuda_emu_switch(void** from, void* to);
asm(R"(
  .text
  .globl ontrain_cuda_emu_switch
  .hidden ontrain_cuda_emu_switch
  .type ontrain_cuda_emu_switch, @function
ontrain_cuda_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size ontrain_cuda_emu_switch, .-ontrain_cuda_emu_switch
)");

constexpr size_t kStackBytes = 128 * 1024;
constexpr int kMaxThreads = 1024;

enum class FiberState { kReady, kWaitBlock, kWaitWarp, kDone };

struct Fiber {
  void* sp = nullptr;
  FiberState state = FiberState::kDone;
  uint3 tid{};
  int linear = 0;
};

// The block being run on this thread.
struct BlockRun {
  bool fibers = false;      // threads run as fibers (else one after another, with no barriers allowed)
  bool used_barrier = false;
  bool failed = false;
  const char* kernel = "";
  void (*body)(void*) = nullptr;
  void* state = nullptr;
  void* scheduler_sp = nullptr;
  Fiber threads[kMaxThreads];
  int thread_count = 0;
  int current = 0;
  int live = 0, arrived = 0;
  int warp_live[kMaxThreads / 32] = {}, warp_arrived[kMaxThreads / 32] = {};
  // Two sets of slots, used by alternate exchanges: a lane can be at most one exchange ahead of the
  // slowest lane of its warp (each exchange waits for all 32), so one barrier per exchange suffices.
  uint64_t exchange[2][kMaxThreads / 32][32] = {};
  uint8_t exchanges[kMaxThreads] = {};  // per thread: its exchange count, mod 2
};

BlockRun* run = nullptr;
std::vector<char*> stacks;  // each kStackBytes, above a guard page

char* StackTop(int i) {
  while (static_cast<int>(stacks.size()) <= i) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    void* p = ::mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "cuda_emu: no memory for a fiber stack\n");
      std::abort();
    }
    ::mprotect(p, page, PROT_NONE);  // an overflowing fiber faults instead of writing into its neighbour
    stacks.push_back(static_cast<char*>(p) + page);
  }
  return stacks[i] + kStackBytes;
}

void Yield() { ontrain_cuda_emu_switch(&run->threads[run->current].sp, run->scheduler_sp); }

void ReleaseBlock() {
  for (int t = 0; t < run->thread_count; ++t) {
    if (run->threads[t].state == FiberState::kWaitBlock) run->threads[t].state = FiberState::kReady;
  }
  run->arrived = 0;
}

void ReleaseWarp(int w) {
  const int end = std::min(32 * w + 32, run->thread_count);
  for (int t = 32 * w; t < end; ++t) {
    if (run->threads[t].state == FiberState::kWaitWarp) run->threads[t].state = FiberState::kReady;
  }
  run->warp_arrived[w] = 0;
}

void BlockFailed(const char* what) {
  if (!run->failed) Fault(cudaErrorLaunchFailure, run->kernel, what);
  run->failed = true;
}

void WarpBarrier() {
  Fiber& f = run->threads[run->current];
  const int w = f.linear / 32;
  if (++run->warp_arrived[w] == run->warp_live[w]) {
    ReleaseWarp(w);
    return;
  }
  f.state = FiberState::kWaitWarp;
  Yield();
}

extern "C" void ontrain_cuda_emu_fiber_entry() {
  run->body(run->state);
  Fiber& f = run->threads[run->current];
  f.state = FiberState::kDone;
  --run->live;
  const int w = f.linear / 32;
  --run->warp_live[w];
  if (run->arrived > 0 && run->arrived == run->live) ReleaseBlock();
  if (run->warp_arrived[w] > 0) {
    BlockFailed("a thread exited while the rest of its warp waited in a shuffle");
    ReleaseWarp(w);
  }
  Yield();  // never resumed
  std::abort();
}

// A fresh fiber's stack: what ontrain_cuda_emu_switch pops, returning into the entry function with the
// stack aligned as at a call.
void* InitialStack(int i) {
  // Stack tops staggered by a cache line per fiber: at one offset in every stack they would all fall in
  // the same cache sets, and switching among hundreds of fibers would evict each other's frames.
  uintptr_t top = (reinterpret_cast<uintptr_t>(StackTop(i)) - 64 * static_cast<uintptr_t>(i % 64)) & ~uintptr_t{15};
  uint64_t* sp = reinterpret_cast<uint64_t*>(top - 16);
  sp[0] = reinterpret_cast<uint64_t>(&ontrain_cuda_emu_fiber_entry);  // the return address
  sp -= 6;
  for (int r = 0; r < 6; ++r) sp[r] = 0;  // r15 r14 r13 r12 rbx rbp
  return sp;
}

// An order in which to visit n items, i -> (a i + c) mod n with a coprime to n, different for every launch:
// threads and blocks do not run in index order, so a kernel that reads what another thread writes without a
// barrier between them (which on a GPU is a race) computes the wrong thing here too.
struct Order {
  uint64_t n = 1, a = 1, c = 0;
  uint64_t operator()(uint64_t i) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * i + c) % n);
  }
};

Order MakeOrder(uint64_t n, uint64_t seed) {
  Order o;
  if (n <= 1) return o;
  o.n = n;
  uint64_t h = (seed + 1) * 0x9E3779B97F4A7C15ull;
  o.a = (h >> 17) % n;
  while (std::gcd(o.a, n) != 1) o.a = (o.a + 1) % n;
  o.c = (h >> 7) % n;
  return o;
}

uint64_t launch_count = 0;

uint3 ThreadIndex(dim3 block, int linear) {
  uint3 t;
  t.x = linear % block.x;
  t.y = (linear / block.x) % block.y;
  t.z = linear / (block.x * block.y);
  return t;
}

void RunBlockDirect(BlockRun& b, int threads, const Order& order) {
  for (int i = 0; i < threads && !b.failed; ++i) {
    const int t = static_cast<int>(order(i));
    b.current = t;
    threadIdx = ThreadIndex(blockDim, t);
    b.body(b.state);
  }
}

void RunBlockFibers(BlockRun& b, int threads, const Order& order) {
  b.thread_count = threads;
  std::memset(b.exchanges, 0, sizeof b.exchanges);
  b.live = threads;
  b.arrived = 0;
  for (int w = 0; w < (threads + 31) / 32; ++w) {
    b.warp_live[w] = std::min(32, threads - 32 * w);
    b.warp_arrived[w] = 0;
  }
  for (int t = 0; t < threads; ++t) {
    b.threads[t].sp = InitialStack(t);
    b.threads[t].state = FiberState::kReady;
    b.threads[t].tid = ThreadIndex(blockDim, t);
    b.threads[t].linear = t;
  }
  while (b.live > 0) {
    bool ran = false;
    for (int i = 0; i < threads; ++i) {
      const int t = static_cast<int>(order(i));
      if (b.threads[t].state != FiberState::kReady) continue;
      b.current = t;
      threadIdx = b.threads[t].tid;
      ontrain_cuda_emu_switch(&b.scheduler_sp, b.threads[t].sp);
      ran = true;
    }
    if (!ran) {
      BlockFailed("deadlock: threads wait at a barrier that the others never reach");
      return;  // the stuck fibers are abandoned; their stacks are reused
    }
  }
}

struct KernelInfo {
  bool seen = false;
  bool barrier_free = false;
};

}  // namespace

void ExecuteGrid(dim3 grid, dim3 block, const char* kernel, const void* key, void (*body)(void*), void* state) {
  // ONTRAIN_CUDA_EMU_FAULT_AT=N: the N-th kernel to run (counted from 1 in this process) faults, as a
  // kernel with a bad address would, to rehearse how callers handle a sticky device fault.
  static const long fault_at = [] {
    const char* v = std::getenv("ONTRAIN_CUDA_EMU_FAULT_AT");
    return v == nullptr ? 0L : std::atol(v);
  }();
  static long executed = 0;
  if (++executed == fault_at) {
    Fault(cudaErrorIllegalAddress, kernel, "a fault injected by ONTRAIN_CUDA_EMU_FAULT_AT");
    return;
  }
  static std::unordered_map<const void*, KernelInfo>* infos = new std::unordered_map<const void*, KernelInfo>;
  KernelInfo& info = (*infos)[key];
  static BlockRun* storage = new BlockRun;  // one launch runs at a time, under the API lock
  BlockRun& b = *storage;
  b.failed = false;
  b.used_barrier = false;
  b.kernel = kernel;
  b.body = body;
  b.state = state;
  // The first launch of a kernel runs with fibers and learns whether it synchronizes; one that never did
  // runs its threads plainly after that (a barrier there is reported as a failure).
  b.fibers = !info.barrier_free;
  run = &b;
  gridDim = grid;
  blockDim = block;
  const int threads = static_cast<int>(block.x * block.y * block.z);
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  const uint64_t seed = launch_count++;
  const Order block_order = MakeOrder(blocks, seed), thread_order = MakeOrder(static_cast<uint64_t>(threads), ~seed);
  for (uint64_t i = 0; i < blocks && !b.failed; ++i) {
    const uint64_t k = block_order(i);
    blockIdx = uint3{static_cast<unsigned>(k % grid.x), static_cast<unsigned>((k / grid.x) % grid.y),
                     static_cast<unsigned>(k / (uint64_t{grid.x} * grid.y))};
    if (b.fibers) {
      RunBlockFibers(b, threads, thread_order);
    } else {
      RunBlockDirect(b, threads, thread_order);
    }
  }
  run = nullptr;
  if (!info.seen || b.used_barrier) {
    info.seen = true;
    info.barrier_free = !b.used_barrier;
  }
}

namespace {

// ---- Device memory --------------------------------------------------------------------------------------

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

class DeviceAccess {
 public:
  DeviceAccess() { Heap().Open(); }
  ~DeviceAccess() { Heap().Close(); }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

void RunQueued(CUstream_st* st) {
  if (st->queue.empty()) return;
  DeviceAccess open;
  // By index, and cleared keeping its capacity: a queue in steady state allocates nothing.
  for (size_t i = 0; i < st->queue.size(); ++i) st->queue[i]();
  st->queue.clear();
  State& s = S();
  if (s.retired.empty() || !s.legacy.queue.empty()) return;
  for (CUstream_st* other : s.streams) {
    if (!other->queue.empty()) return;
  }
  s.retired.clear();
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

void InstallFaultHandler() {
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

// ---- Shared with the libraries --------------------------------------------------------------------------

std::recursive_mutex& ApiLock() { return S().lock; }

cudaError_t StickyFault() { return S().sticky; }

void Fault(cudaError_t e, const char* call, const char* what) {
  if (S().sticky == cudaSuccess) S().sticky = e;
  Report("device fault", call, what);
}

bool DeviceRange(const void* p, size_t bytes) {
  bool inside = false;
  return KindOf(p, bytes, &inside) == MemoryKind::kDevice && inside;
}

MemoryKind KindOf(const void* p, size_t bytes, bool* inside) {
  State& s = S();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  *inside = false;
  auto it = s.allocations.upper_bound(a);
  if (it == s.allocations.begin()) return MemoryKind::kHost;
  --it;
  const uintptr_t base = it->first, end = base + it->second.bytes;
  if (a < base || a >= end) return MemoryKind::kHost;
  *inside = a + bytes <= end;
  return it->second.kind;
}

void LaunchFailed(cudaError_t e, const char* kernel, const char* what) {
  if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure) {
    Fault(e, kernel, what);
    return;
  }
  last_error = e;
  Report("launch error", kernel, what);
}

void ResetForTesting() {
  std::lock_guard<std::recursive_mutex> lock(ApiLock());
  State& s = S();
  s.sticky = cudaSuccess;
  s.messages = 0;
  last_error = cudaSuccess;
  s.legacy.queue.clear();
  for (CUstream_st* st : s.streams) st->queue.clear();
}

int LaneId() { return run == nullptr ? 0 : run->current % 32; }

uint64_t WarpExchange(unsigned int mask, uint64_t mine, int source) {
  if (run == nullptr || !run->fibers) {
    if (run != nullptr) BlockFailed("a shuffle in a kernel whose first launch never synchronized");
    return mine;
  }
  run->used_barrier = true;
  if (mask != 0xffffffffu) {
    BlockFailed("a shuffle with a partial mask (the emulator supports whole warps only)");
    return mine;
  }
  Fiber& f = run->threads[run->current];
  const int w = f.linear / 32, lane = f.linear % 32;
  if (run->warp_live[w] != 32) {
    BlockFailed("a shuffle with a full mask in a warp that does not have 32 live threads");
    return mine;
  }
  const int set = run->exchanges[f.linear];
  run->exchanges[f.linear] ^= 1;
  run->exchange[set][w][lane] = mine;
  WarpBarrier();
  return source >= 0 && source < 32 ? run->exchange[set][w][source] : mine;
}

bool LaunchConfigOk(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, const char* kernel) {
  std::lock_guard<std::recursive_mutex> lock(ApiLock());
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  const char* bad = nullptr;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
    bad = "block dimensions outside 1..1024 threads (x, y <= 1024, z <= 64)";
  } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    bad = "grid dimensions outside 1..2^31-1 (x) and 1..65535 (y, z)";
  } else if (shared_bytes > 48 * 1024) {
    bad = "more than 48 KiB of dynamic shared memory";
  }
  if (bad == nullptr) return true;
  char what[192];
  std::snprintf(what, sizeof what, "%s: grid (%u, %u, %u), block (%u, %u, %u)", bad, grid.x, grid.y, grid.z, block.x,
                block.y, block.z);
  LaunchFailed(cudaErrorInvalidConfiguration, kernel, what);
  CUstream_st* st = StreamOf(stream);
  if (st->capturing) st->invalidated = true;
  return false;
}

bool Faulted() { return S().sticky != cudaSuccess; }

cudaError_t EnqueueWork(cudaStream_t stream, Work work) {
  std::lock_guard<std::recursive_mutex> lock(ApiLock());
  CUstream_st* st = StreamOf(stream);
  if (st->capturing) {
    st->graph->work->push_back(std::move(work));
  } else {
    st->queue.push_back(std::move(work));
  }
  return cudaSuccess;
}

bool Capturing(cudaStream_t stream) { return StreamOf(stream)->capturing; }

}  // namespace cuda_emu

using cuda_emu::ApiLock;
using cuda_emu::KindOf;
using cuda_emu::MemoryKind;
using cuda_emu::S;
using cuda_emu::StreamOf;

#define EMU_LOCK std::lock_guard<std::recursive_mutex> emu_lock_(ApiLock())

// ---- Devices and errors ---------------------------------------------------------------------------------

// ONTRAIN_CUDA_EMU_DEVICES: the device count (default 1); "nodriver" emulates a machine without a driver.
cudaError_t cudaGetDeviceCount(int* count) {
  const char* v = std::getenv("ONTRAIN_CUDA_EMU_DEVICES");
  *count = 0;
  if (v != nullptr && std::strcmp(v, "nodriver") == 0) return cudaErrorInsufficientDriver;
  int n = v == nullptr || v[0] == 0 ? 1 : std::atoi(v);
  if (n <= 0) return cudaErrorNoDevice;
  *count = n;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) return e;
  return device >= 0 && device < n ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetLastError() {
  EMU_LOCK;
  cudaError_t e = cuda_emu::last_error;
  cuda_emu::last_error = cudaSuccess;
  return e != cudaSuccess ? e : S().sticky;
}

cudaError_t cudaPeekAtLastError() {
  EMU_LOCK;
  return cuda_emu::last_error != cudaSuccess ? cuda_emu::last_error : S().sticky;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  }
  return "unknown error";
}

// ---- Memory ---------------------------------------------------------------------------------------------

namespace {

cudaError_t Allocate(void** p, size_t bytes, MemoryKind kind) {
  EMU_LOCK;
  *p = nullptr;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes == 0) return cudaSuccess;
  cuda_emu::InstallFaultHandler();
  void* m = nullptr;
  if (kind == MemoryKind::kDevice) {
    m = cuda_emu::Heap().Allocate(bytes);
    if (m == nullptr) return cudaErrorMemoryAllocation;
    cuda_emu::DeviceAccess open;
    std::memset(m, 0xff, bytes);  // NaN as float, -1 as integers: uninitialized memory is not zero
  } else {
    m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (m == nullptr) return cudaErrorMemoryAllocation;
    std::memset(m, 0xff, bytes);
  }
  S().allocations[reinterpret_cast<uintptr_t>(m)] = cuda_emu::Allocation{bytes, kind};
  *p = m;
  return cudaSuccess;
}

cudaError_t Release(void* p, MemoryKind kind) {
  EMU_LOCK;
  if (p == nullptr) return cudaSuccess;
  cuda_emu::RunAll();  // freeing synchronizes the device
  auto it = S().allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == S().allocations.end() || it->second.kind != kind) return cudaErrorInvalidValue;
  const size_t bytes = it->second.bytes;
  S().allocations.erase(it);
  if (kind == MemoryKind::kDevice) {
    cuda_emu::Heap().Free(p, bytes);
  } else {
    std::free(p);
  }
  return S().sticky;
}

}  // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) { return Allocate(p, bytes, MemoryKind::kDevice); }
cudaError_t cudaFree(void* p) { return Release(p, MemoryKind::kDevice); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return Allocate(p, bytes, MemoryKind::kPinned); }
cudaError_t cudaFreeHost(void* p) { return Release(p, MemoryKind::kPinned); }

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  EMU_LOCK;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes == 0) return cudaSuccess;
  bool dst_inside = false, src_inside = false;
  const MemoryKind dk = KindOf(dst, bytes, &dst_inside), sk = KindOf(src, bytes, &src_inside);
  const bool dst_dev = dk == MemoryKind::kDevice, src_dev = sk == MemoryKind::kDevice;
  if (kind == cudaMemcpyDefault) {
    kind = src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                   : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  const bool want_dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_dev != want_dst_dev || src_dev != want_src_dev) {
    cuda_emu::Report("error", "cudaMemcpyAsync", "a pointer is not in the memory its kind names");
    return cudaErrorInvalidValue;
  }
  if ((dk != MemoryKind::kHost && !dst_inside) || (sk != MemoryKind::kHost && !src_inside)) {
    cuda_emu::Report("error", "cudaMemcpyAsync", "the range runs past the end of its allocation");
    return cudaErrorInvalidValue;
  }
  CUstream_st* st = StreamOf(stream);
  if (st->capturing && ((kind == cudaMemcpyHostToDevice && sk == MemoryKind::kHost) ||
                        (kind == cudaMemcpyDeviceToHost && dk == MemoryKind::kHost))) {
    st->invalidated = true;  // a copy with pageable host memory cannot be part of a graph
    cuda_emu::Report("error", "cudaMemcpyAsync", "a copy with pageable host memory while the stream captures");
    return cudaErrorStreamCaptureUnsupported;
  }
  if (kind == cudaMemcpyHostToDevice && sk == MemoryKind::kHost) {
    // From pageable memory: the call returns once the source is staged, so later host writes to it do not
    // matter; the copy to the device runs in stream order.
    struct Staged {
      void* p;
      Staged(const void* src, size_t n) : p(std::malloc(n)) { std::memcpy(p, src, n); }
      Staged(Staged&& o) noexcept : p(o.p) { o.p = nullptr; }
      ~Staged() { std::free(p); }
    };
    return cuda_emu::Enqueue(stream, [dst, bytes, staged = Staged(src, bytes)] { std::memcpy(dst, staged.p, bytes); });
  }
  if (kind == cudaMemcpyDeviceToHost && dk == MemoryKind::kPinned && !st->capturing) {
    std::memset(dst, 0xff, bytes);  // until the copy runs, the destination holds NaN bytes, not stale values
  }
  cuda_emu::Enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  if ((kind == cudaMemcpyDeviceToHost && dk == MemoryKind::kHost) || kind == cudaMemcpyHostToHost) {
    cuda_emu::RunQueued(st);  // to pageable memory the call returns only when the copy is done
  }
  return S().sticky;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  EMU_LOCK;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes == 0) return cudaSuccess;
  if (!cuda_emu::DeviceRange(dst, bytes)) {
    cuda_emu::Report("error", "cudaMemsetAsync", "the range is not inside one device allocation");
    return cudaErrorInvalidValue;
  }
  return cuda_emu::Enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
}

// ---- Streams and events ---------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  EMU_LOCK;
  *stream = new CUstream_st;
  S().streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  EMU_LOCK;
  auto& v = S().streams;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == stream) {
      cuda_emu::RunQueued(stream);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      delete stream;
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidResourceHandle;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  EMU_LOCK;
  return cuda_emu::SyncStream(StreamOf(stream));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  EMU_LOCK;
  return event == nullptr ? cudaErrorInvalidResourceHandle : S().sticky;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EMU_LOCK;
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  cuda_emu::RunAll();  // events are not tracked: waiting for one waits for all queued work
  return S().sticky;
}

// ---- Capture and graphs ---------------------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  EMU_LOCK;
  if (stream == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot capture
  if (stream->capturing) return cudaErrorIllegalState;
  stream->capturing = true;
  stream->invalidated = false;
  stream->graph = new CUgraph_st;
  return S().sticky;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  EMU_LOCK;
  *graph = nullptr;
  if (stream == nullptr || !stream->capturing) return cudaErrorIllegalState;
  stream->capturing = false;
  if (stream->invalidated) {
    delete stream->graph;
    stream->graph = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = stream->graph;
  stream->graph = nullptr;
  return S().sticky;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  EMU_LOCK;
  CUstream_st* st = StreamOf(stream);
  *status = !st->capturing ? cudaStreamCaptureStatusNone
                           : st->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return S().sticky;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  EMU_LOCK;
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->work};  // shares the recorded work
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  EMU_LOCK;
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (StreamOf(stream)->capturing) return cudaErrorNotSupported;
  // The graph's work, as it was recorded, queued in stream order (the executable may be destroyed before
  // it runs).
  for (const cuda_emu::Work& w : *exec->work) StreamOf(stream)->queue.push_back(w.Ref());
  return S().sticky;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  EMU_LOCK;
  delete graph;  // executables made from it keep its work
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  EMU_LOCK;
  if (exec == nullptr) return cudaErrorInvalidValue;
  S().retired.push_back(std::move(exec->work));  // replays still queued refer to it until they run
  delete exec;
  return cudaSuccess;
}

void __syncthreads() {
  using cuda_emu::run;
  if (run == nullptr) return;
  if (!run->fibers) {
    cuda_emu::BlockFailed("__syncthreads in a kernel whose first launch never synchronized");
    return;
  }
  run->used_barrier = true;
  cuda_emu::Fiber& f = run->threads[run->current];
  if (++run->arrived == run->live) {
    cuda_emu::ReleaseBlock();
    return;
  }
  f.state = cuda_emu::FiberState::kWaitBlock;
  cuda_emu::Yield();
}
