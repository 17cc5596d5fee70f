// ThreadPool: workers that wait for a job by polling briefly (then yielding the core between polls) and then sleeping.
//
// A ParallelFor publishes one job (the function and its block count) under a new epoch. Thread t (the caller
// is 0) first claims block t, then any block nobody has claimed yet; the caller waits for the last block.
// Claiming its own block first gives every thread the same part of each batch-major tensor op after op
// (block t of an op over images and block t of the elementwise op after it cover the same images), so the
// data a thread reads was mostly written by itself: on the shared machine's two cores, reading data the
// other core just wrote made memory-bound ops slower at 2 threads than at 1. A claim is tagged with its
// epoch, so a worker still finishing one job can never claim a block of the next.
// Handing a short job to a worker that is still polling costs well under a microsecond, where waking a
// sleeping thread costs tens on a shared machine: the caller's notify took 20-60 us and the worker started
// ~75 us late. An idle thread polls for kSpinNanos, then keeps polling up to kYieldNanos with a yield
// between polls (so a process waiting for this core gets it), then sleeps. With sleep after 50 us, the
// worker slept before 30% of the ResNet's jobs at 2 threads (serial ops between them) and the
// caller often ran both blocks; polling for 1 ms took the ResNet's step from 30.5 to 27.3 ms, the
// MobileNet's from 26.1 to 19.8 and the GPT's from 14.0 to 12.9 (Zen 5, 2 threads). With another process
// busy on one core, the yields keep the step as fast as with 50 us (GPT 22.1 vs 21.8 ms), where 1 ms of
// plain spinning made it 14% slower. Blocks are computed as before any thread sees them, so which
// thread runs a block never changes a result.
#include "providers/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace ontrain {
namespace {

constexpr int64_t kSpinNanos = 50000;     // how long an idle thread polls before it yields
constexpr int64_t kYieldNanos = 1000000;  // then polls yielding the core, before it sleeps

inline void CpuRelax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

// Polls `done` for up to kSpinNanos, then for up to kYieldNanos yielding the core between polls; true when
// it became true.
template <typename F>
bool SpinUntil(F done) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (done()) return true;
    CpuRelax();
    if ((i & 255) == 255 &&
        std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(kSpinNanos)) {
      break;
    }
  }
  for (;;) {
    if (done()) return true;
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() - start > std::chrono::nanoseconds(kYieldNanos)) return done();
  }
}

thread_local bool in_pool_worker = false;

}  // namespace

struct ThreadPool::Impl {
  std::mutex job_mu;  // one ParallelFor at a time; a concurrent caller runs its loop inline
  std::mutex mu;
  std::condition_variable wake, finished;
  std::atomic<uint64_t> epoch{0};
  std::atomic<int64_t> done_blocks{0};
  std::unique_ptr<std::atomic<uint64_t>[]> claimed;  // per block: the epoch of the job that last claimed it
  bool stop = false;
  std::vector<std::thread> threads;

  // Epochs only grow: a block already claimed for this job or a later one is not claimable, so a worker
  // still looping over the blocks of a finished job cannot take (or re-tag) a block of the next one.
  bool Claim(int64_t b, uint64_t job) {
    uint64_t last = claimed[b].load(std::memory_order_acquire);
    while (last < job) {
      if (claimed[b].compare_exchange_weak(last, job, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

  // One job as a thread saw it: copied under `mu`, where ParallelFor writes it, so a worker never reads a
  // job's fields while the next job is being written (ThreadSanitizer found that race: a worker still looping
  // over the blocks of a finished job read `blocks` while the caller set up the next one).
  struct Job {
    uint64_t epoch = 0;
    int64_t n = 0, per = 0, blocks = 0;
    const RangeFn* fn = nullptr;
  };
  Job job;  // the latest job (written and read under mu)

  void RunBlock(const Job& j, int64_t b) {
    (*j.fn)(b * j.per, std::min(j.n, (b + 1) * j.per));
    if (done_blocks.fetch_add(1) + 1 == j.blocks) {
      std::lock_guard<std::mutex> lock(mu);
      finished.notify_one();
    }
  }

  // Thread `self`'s share of job `j`: its own block, then whatever is left. A job that has already finished
  // has every block claimed, so a late worker runs nothing (and never calls its finished `fn`).
  void RunBlocks(int64_t self, const Job& j) {
    if (self < j.blocks && Claim(self, j.epoch)) RunBlock(j, self);
    for (int64_t b = 0; b < j.blocks; ++b) {
      if (b != self && Claim(b, j.epoch)) RunBlock(j, b);
    }
  }

  void Worker(int self) {
    in_pool_worker = true;
    uint64_t seen = 0;
    for (;;) {
      if (!SpinUntil([&] { return epoch.load(std::memory_order_acquire) != seen; })) {
        std::unique_lock<std::mutex> lock(mu);
        wake.wait(lock, [&] { return stop || epoch.load(std::memory_order_acquire) != seen; });
      }
      Job j;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (stop) return;
        j = job;
      }
      seen = j.epoch;
      RunBlocks(self, j);
    }
  }
};

ThreadPool::ThreadPool(int num_threads, bool tunable, bool flush_denormals)
    : num_threads_(std::max(1, num_threads)), tunable_(tunable) {
  if (num_threads_ <= 1) return;
  impl_ = std::make_unique<Impl>();
  impl_->claimed = std::make_unique<std::atomic<uint64_t>[]>(num_threads_);
  for (int i = 0; i < num_threads_; ++i) impl_->claimed[i].store(0);
  for (int i = 1; i < num_threads_; ++i) {
    impl_->threads.emplace_back([this, i, flush_denormals] {
      ScopedFlushDenormals flush(flush_denormals);  // the worker's own mode, for its whole life
      impl_->Worker(i);
    });
  }
}

#if defined(__SSE__)
bool CanFlushDenormals() { return true; }
ScopedFlushDenormals::ScopedFlushDenormals(bool enable) {
  if (!enable) return;
  constexpr unsigned kFtz = 0x8000, kDaz = 0x0040;
  saved_ = _mm_getcsr();
  active_ = true;
  _mm_setcsr(saved_ | kFtz | kDaz);
}
ScopedFlushDenormals::~ScopedFlushDenormals() {
  if (active_) _mm_setcsr(saved_);
}
#else
bool CanFlushDenormals() { return false; }
ScopedFlushDenormals::ScopedFlushDenormals(bool) {}
ScopedFlushDenormals::~ScopedFlushDenormals() {}
#endif

ThreadPool::~ThreadPool() {
  if (!impl_) return;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  for (std::thread& t : impl_->threads) t.join();
}

void ThreadPool::ParallelFor(int64_t n, double cost_per_item, RangeFn fn) {
  if (n <= 0) return;
  // A block must be worth about 250K scalar operations (an elementwise op over 64K floats) before it is
  // handed over: below that, the hand-over and the caller's wait cost more than the work. It was 1M while
  // idle workers slept after 50 us; with them polling, 250K took the ResNet's step at 2 threads from 28.2 to
  // 26.2 ms (its ReLUs, their gradients and the gradient Sums now split) and changed no MLP.
  constexpr double kMinBlockCost = 250000.0;
  int64_t max_blocks = static_cast<int64_t>(n * std::max(cost_per_item, 1e-3) / kMinBlockCost);
  int64_t blocks = std::min<int64_t>({static_cast<int64_t>(num_threads_), max_blocks, n});
  if (blocks <= 1 || !impl_ || in_pool_worker) {
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> job_lock(impl_->job_mu, std::try_to_lock);
  if (!job_lock.owns_lock()) {  // another thread is using the pool
    fn(0, n);
    return;
  }
  Impl& im = *impl_;
  Impl::Job j;
  j.n = n;
  j.per = (n + blocks - 1) / blocks;
  j.blocks = (n + j.per - 1) / j.per;
  j.fn = &fn;
  {
    std::lock_guard<std::mutex> lock(im.mu);
    im.done_blocks.store(0);
    j.epoch = im.epoch.load(std::memory_order_relaxed) + 1;
    im.job = j;
    im.epoch.store(j.epoch, std::memory_order_release);
  }
  im.wake.notify_all();
  const int64_t total = j.blocks;
  im.RunBlocks(0, j);
  if (!SpinUntil([&] { return im.done_blocks.load(std::memory_order_acquire) == total; })) {
    std::unique_lock<std::mutex> lock(im.mu);
    im.finished.wait(lock, [&] { return im.done_blocks.load(std::memory_order_acquire) == total; });
  }
}

void ParallelFor(ThreadPool* pool, int64_t n, double cost_per_item, RangeFn fn) {
  if (pool) pool->ParallelFor(n, cost_per_item, fn);
  else if (n > 0) fn(0, n);
}

}  // namespace ontrain
