// ThreadPool on Eigen's non-blocking pool.
#include "providers/cpu/thread_pool.h"

#include <algorithm>

#define EIGEN_USE_THREADS
#include <unsupported/Eigen/CXX11/ThreadPool>

namespace ontrain {

struct ThreadPool::Impl {
  explicit Impl(int n) : pool(n) {}
  Eigen::ThreadPool pool;
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  if (num_threads_ > 1) impl_ = std::make_unique<Impl>(num_threads_ - 1);  // the caller is a worker too
}

ThreadPool::~ThreadPool() = default;

void ThreadPool::ParallelFor(int64_t n, double cost_per_item, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  // Waking a worker costs tens of microseconds on a shared machine: a block must be worth about 1M scalar
  // operations (vectorized loops do that in well under that time) before it is handed over.
  constexpr double kMinBlockCost = 1000000.0;
  int64_t max_blocks = static_cast<int64_t>(n * std::max(cost_per_item, 1e-3) / kMinBlockCost);
  int64_t blocks = std::min<int64_t>({static_cast<int64_t>(num_threads_), max_blocks, n});
  if (blocks <= 1 || !impl_) {
    fn(0, n);
    return;
  }
  int64_t per = (n + blocks - 1) / blocks;
  blocks = (n + per - 1) / per;
  Eigen::Barrier barrier(static_cast<unsigned>(blocks - 1));
  for (int64_t b = 1; b < blocks; ++b) {
    int64_t begin = b * per, end = std::min(n, begin + per);
    impl_->pool.Schedule([&fn, &barrier, begin, end] {
      fn(begin, end);
      barrier.Notify();
    });
  }
  fn(0, std::min(n, per));
  barrier.Wait();
}

void ParallelFor(ThreadPool* pool, int64_t n, double cost_per_item, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool) pool->ParallelFor(n, cost_per_item, fn);
  else if (n > 0) fn(0, n);
}

}  // namespace ontrain
