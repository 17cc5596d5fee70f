// PoolTuner: whether a graph's runs at one set of input shapes are faster with the intra-op thread pool or on
// the calling thread alone, decided by timing both.
//
// Splitting an op across cores pays only when its work outweighs the hand-over and, on a machine whose cores
// share caches slowly, the cost of reading data another core just wrote. A small model's step (an MLP of
// 784-128-10 at batch 64: 0.2 ms) loses on both counts, and no per-op cost model gets the second right: it
// depends on which core wrote each operand last, across ops and across graphs. So the executor measures.
// Its schedule, per memory plan: kWarmupRuns runs with the pool (the first run at a shape plans the arenas),
// then 2 * kTrialRuns runs alternating pooled and serial, then the faster one (serial unless the pool's
// median is kMinGain faster) until kRetuneRuns runs later, when the trial repeats (the load on a shared
// machine changes). Every kernel gives the same bits with and without the pool, so switching changes no
// result. It keeps its samples in fixed arrays: a step allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ontrain {

class PoolTuner {
 public:
  static constexpr int kWarmupRuns = 3;
  static constexpr int kTrialRuns = 8;  // per arm
  static constexpr int64_t kRetuneRuns = 2000;
  static constexpr double kMinGain = 0.03;

  enum class Choice { kUndecided, kPool, kSerial };

  // Whether the next run should use the pool.
  bool NextRunPooled() const;
  // Reports the run just made (as NextRunPooled said) and how long it took; failed runs are not reported.
  void Record(double seconds);

  Choice choice() const { return choice_; }
  // The medians of the last trial, in seconds (0 before the first trial ends).
  double pooled_seconds() const { return pooled_median_; }
  double serial_seconds() const { return serial_median_; }
  // "pool (0.41 ms vs 0.52 ms serial)", "serial (...)", or "undecided".
  std::string Describe() const;

 private:
  int64_t runs_ = 0;  // since the last trial began (the warm-up counts toward the first)
  int trial_ = -1;    // runs of the current trial so far; -1 outside a trial
  std::array<double, kTrialRuns> pooled_{}, serial_{};
  Choice choice_ = Choice::kUndecided;
  double pooled_median_ = 0, serial_median_ = 0;
};

}  // namespace ontrain
