// The CPU provider's intra-op thread pool: a fixed set of workers and a blocking ParallelFor; and the scoped
// flush-to-zero mode that the provider and the pool's workers run kernels in when asked.
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>

namespace ontrain {

// A reference to a callable fn(begin, end) that does not own it. ParallelFor returns only after every block
// has run, so the callable outlives each use; unlike std::function, making one never allocates.
class RangeFn {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, RangeFn>>>
  RangeFn(const F& f)  // NOLINT: implicit, so lambdas pass as they are
      : obj_(&f), call_([](const void* o, int64_t b, int64_t e) { (*static_cast<const F*>(o))(b, e); }) {}
  void operator()(int64_t b, int64_t e) const { call_(obj_, b, e); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t, int64_t);
};

class ThreadPool {
 public:
  // `num_threads` <= 1 runs everything on the calling thread. `tunable`: an executor may run a graph
  // without the pool when timing shows that it is faster (engine/pool_tuner.h). `flush_denormals`: the
  // workers run with the CPU's flush-to-zero and denormals-are-zero modes (see ScopedFlushDenormals).
  explicit ThreadPool(int num_threads, bool tunable = true, bool flush_denormals = false);
  ~ThreadPool();
  int num_threads() const { return num_threads_; }
  bool tunable() const { return tunable_; }

  // Calls fn(begin, end) over [0, n) in contiguous blocks, using the calling thread as one worker.
  // `cost_per_item` (roughly, scalar operations per item) decides how many blocks are worth making.
  void ParallelFor(int64_t n, double cost_per_item, RangeFn fn);

 private:
  struct Impl;
  int num_threads_;
  bool tunable_;
  std::unique_ptr<Impl> impl_;
};

// While alive, the calling thread's float arithmetic (SSE/AVX) flushes subnormal results to zero and reads
// subnormal inputs as zero (MXCSR's FTZ and DAZ bits); the previous mode comes back at destruction. Where
// `enable` is false, or the CPU is not x86, it does nothing.
class ScopedFlushDenormals {
 public:
  explicit ScopedFlushDenormals(bool enable);
  ~ScopedFlushDenormals();
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  bool active_ = false;
  unsigned saved_ = 0;
};

// Whether this build can flush denormals (x86 with SSE).
bool CanFlushDenormals();

// Runs on `pool` when given, else serially.
void ParallelFor(ThreadPool* pool, int64_t n, double cost_per_item, RangeFn fn);

}  // namespace ontrain
