// The CPU provider's intra-op thread pool: a fixed set of workers and a blocking ParallelFor.
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
  // without the pool when timing shows that it is faster (engine/pool_tuner.h).
  explicit ThreadPool(int num_threads, bool tunable = true);
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

// Runs on `pool` when given, else serially.
void ParallelFor(ThreadPool* pool, int64_t n, double cost_per_item, RangeFn fn);

}  // namespace ontrain
