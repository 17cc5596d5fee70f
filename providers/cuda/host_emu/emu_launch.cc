// The emulated device's kernel launches (cuda_emu.h): every block of a grid in turn, every thread of a
// block as a fiber (its own stack, switched in place) so that __syncthreads and the warp shuffles wait for
// the others, threads and blocks in a permuted order, and the failures a GPU reports (deadlocks, shuffles
// in partial warps).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "providers/cuda/host_emu/emu_internal.h"

#if !defined(__x86_64__)
#error "the emulated CUDA device switches fibers with x86-64 code"
#endif

// Device code runs only under the API lock, one launch at a time: its state is plain globals.
uint3 threadIdx;
uint3 blockIdx;
dim3 blockDim;
dim3 gridDim;

namespace cuda_emu {
namespace {

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

int LaneId() { return run == nullptr ? 0 : run->current % 32; }

// Every lane of the calling warp gives `mine`; once all have, returns the warp's 32 values (null when the
// call is refused: the block has failed). The values stay readable until the warp's next exchange but one
// (two sets alternate), which no lane can reach before every lane has read these.
static const uint64_t* WarpValues(unsigned int mask, uint64_t mine, const char* what) {
  if (run == nullptr || !run->fibers) {
    if (run != nullptr) BlockFailed((std::string("a ") + what + " in a kernel whose first launch never synchronized").c_str());
    return nullptr;
  }
  run->used_barrier = true;
  if (mask != 0xffffffffu) {
    BlockFailed((std::string("a ") + what + " with a partial mask (the emulator supports whole warps only)").c_str());
    return nullptr;
  }
  Fiber& f = run->threads[run->current];
  const int w = f.linear / 32, lane = f.linear % 32;
  if (run->warp_live[w] != 32) {
    BlockFailed((std::string("a ") + what + " with a full mask in a warp that does not have 32 live threads").c_str());
    return nullptr;
  }
  const int set = run->exchanges[f.linear];
  run->exchanges[f.linear] ^= 1;
  run->exchange[set][w][lane] = mine;
  WarpBarrier();
  return run->exchange[set][w];
}

uint64_t WarpExchange(unsigned int mask, uint64_t mine, int source) {
  const uint64_t* values = WarpValues(mask, mine, "shuffle");
  return values != nullptr && source >= 0 && source < 32 ? values[source] : mine;
}

unsigned int WarpBallot(unsigned int mask, bool predicate) {
  const uint64_t* values = WarpValues(mask, predicate ? 1 : 0, "ballot");
  if (values == nullptr) return 0;
  unsigned int bits = 0;
  for (int k = 0; k < 32; ++k) bits |= static_cast<unsigned int>(values[k] & 1) << k;
  return bits;
}

}  // namespace cuda_emu

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
