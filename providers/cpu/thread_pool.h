// The CPU provider's intra-op thread pool: a fixed set of workers and a blocking ParallelFor.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

namespace ontrain {

class ThreadPool {
 public:
  // `num_threads` <= 1 runs everything on the calling thread.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  int num_threads() const { return num_threads_; }

  // Calls fn(begin, end) over [0, n) in contiguous blocks, using the calling thread as one worker.
  // `cost_per_item` (roughly, scalar operations per item) decides how many blocks are worth making.
  void ParallelFor(int64_t n, double cost_per_item, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Impl;
  int num_threads_;
  std::unique_ptr<Impl> impl_;
};

// Runs on `pool` when given, else serially.
void ParallelFor(ThreadPool* pool, int64_t n, double cost_per_item, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ontrain
