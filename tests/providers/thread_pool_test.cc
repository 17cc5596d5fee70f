// The CPU provider's intra-op thread pool: every index of a loop runs once, back-to-back jobs never share a
// block, and idle workers leave the cores.
#include "providers/cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace ontrain {
namespace {

// The bits of a product whose IEEE result is subnormal (2^-140), through volatile so that nothing folds it.
// Bits, not floats, are compared: with DAZ set a float comparison would read the subnormal as zero.
uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
uint32_t SubnormalProduct() {
  volatile float a = 0x1p-70f, b = 0x1p-70f;
  return Bits(a * b);
}
const uint32_t kSubnormal = Bits(0x1p-140f), kZero = Bits(0.0f);

TEST(ThreadPoolTest, ScopedFlushDenormalsFlushesAndRestoresTheCallersMode) {
  if (!CanFlushDenormals()) GTEST_SKIP() << "this build's CPU has no flush-to-zero mode (x86 SSE only)";
  ASSERT_EQ(SubnormalProduct(), kSubnormal);
  {
    ScopedFlushDenormals flush(true);
    EXPECT_EQ(SubnormalProduct(), kZero);
    volatile float subnormal = 0x1p-140f, one = 1.0f;
    EXPECT_EQ(Bits(subnormal * one), kZero) << "subnormal inputs read as zero (DAZ)";
    {
      ScopedFlushDenormals off(false);  // does nothing
      EXPECT_EQ(SubnormalProduct(), kZero);
    }
  }
  EXPECT_EQ(SubnormalProduct(), kSubnormal) << "the caller's IEEE mode came back";
}

// With flush_denormals, every block a worker runs flushes; the caller's blocks keep its own mode (the CPU
// provider sets it around each kernel); without, workers compute IEEE subnormals.
TEST(ThreadPoolTest, WorkersFlushDenormalsOnlyWhenTheirPoolWasMadeSo) {
  if (!CanFlushDenormals()) GTEST_SKIP() << "this build's CPU has no flush-to-zero mode (x86 SSE only)";
  for (bool flush : {true, false}) {
    SCOPED_TRACE(flush);
    ThreadPool pool(2, true, flush);
    const std::thread::id caller = std::this_thread::get_id();
    int worker_blocks = 0;
    for (int attempt = 0; attempt < 1000 && worker_blocks == 0; ++attempt) {
      std::atomic<int> bad{0}, by_worker{0};
      pool.ParallelFor(2, 1e6, [&](int64_t, int64_t) {
        const bool on_worker = std::this_thread::get_id() != caller;
        const uint32_t expected = on_worker && flush ? kZero : kSubnormal;
        if (SubnormalProduct() != expected) bad++;
        if (on_worker) by_worker++;
        // The caller claims block 0 first: holding it gives a waking worker time to claim block 1.
        if (!on_worker) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      });
      EXPECT_EQ(bad.load(), 0);
      worker_blocks += by_worker.load();
    }
    EXPECT_GT(worker_blocks, 0) << "no block ran on a worker in 1000 jobs";
  }
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  ThreadPool pool(2);
  std::vector<int> hits(100000, 0);
  pool.ParallelFor(static_cast<int64_t>(hits.size()), 100.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  int calls = 0;
  pool.ParallelFor(10, 1.0, [&](int64_t b, int64_t e) { calls++; EXPECT_EQ(e - b, 10); });
  EXPECT_EQ(calls, 1) << "tiny loops stay on the caller";
}

// Back-to-back jobs whose blocks finish at different times, on 2 and 3 threads: every block of every job runs
// exactly once and each job returns only after all its blocks (a worker still looping over a finished job's
// blocks must not take a block of the next one: that ran a block twice and hung the caller).
TEST(ThreadPoolTest, BackToBackJobsRunEachBlockOnce) {
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<std::atomic<int>> hits(threads);
    for (int job = 0; job < 20000; ++job) {
      for (auto& h : hits) h.store(0);
      pool.ParallelFor(threads, 2e6, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          if ((job + i) % 3 == 0) std::this_thread::yield();  // uneven block times
          hits[i].fetch_add(1);
        }
      });
      for (int i = 0; i < threads; ++i) ASSERT_EQ(hits[i].load(), 1) << threads << " threads, job " << job << ", block " << i;
    }
  }
}

// Idle workers poll for at most a few milliseconds and then sleep: a pool with nothing to do uses no CPU
// (a session between steps, or waiting for data, must leave the cores to other processes).
TEST(ThreadPoolTest, IdleWorkersSleep) {
  auto cpu_ms = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
  };
  ThreadPool pool(3);
  std::atomic<int> blocks{0};
  pool.ParallelFor(3, 2e6, [&](int64_t b, int64_t e) { blocks.fetch_add(static_cast<int>(e - b)); });
  ASSERT_EQ(blocks.load(), 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past every polling bound
  const double before = cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const double used = cpu_ms() - before;
  EXPECT_LT(used, 30.0) << "two idle workers used " << used << " ms of CPU in 300 ms";
}

}  // namespace
}  // namespace ontrain
