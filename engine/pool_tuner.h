// PoolTuner: whether a graph's runs at one set of input shapes are faster with the intra-op thread pool or on
// the calling thread alone, decided by timing both.
//
// Splitting an op across cores pays only when its work outweighs the hand-over and, on a machine whose cores
// share caches slowly, the cost of reading data another core just wrote. A small model's step (an MLP of
// 784-128-10 at batch 64: 0.2 ms) loses on both counts, and no per-op cost model gets the second right: it
// depends on which core wrote each operand last, across ops and across graphs. So the executor measures.
// Its schedule, per memory plan: kWarmupRuns runs with the pool (the first run at a shape plans the arenas),
// then a trial of blocks of kBlockRuns runs, pooled and serial blocks in turn, kTrialRuns timed runs per
// side, then the faster side (the pool unless serial runs' median is kMinGain faster: the user asked for the
// threads, and medians of this few runs on a shared machine differ by a few percent), and a new trial later,
// since the load on a shared machine changes: kRetuneRuns runs after a trial that kept the pool, and after
// one that chose serial runs first kFirstRecheckRuns, then twice as many after each trial that chose serial
// again, up to kRetuneRuns. A trial lasts only kTrialLength runs (11 ms for the 784-128-10 MLP): another
// process busy on the second core for that long makes serial runs look faster, and holding that choice for
// kRetuneRuns runs would cost the whole pool's gain (a 0.26 ms step run at 0.31 ms), while each early
// recheck of a right serial choice costs half a trial's runs made a little slower. The first run of each block is not
// timed: it reads what the other side's last run left in the other core's cache, which measured 15-20%
// slower on a 2-core VM and made strict alternation misjudge both sides. Every kernel gives the same bits
// with and without the pool, so switching changes no result. Samples live in fixed arrays: a step
// allocates nothing.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ontrain {

class PoolTuner {
 public:
  static constexpr int kWarmupRuns = 3;
  static constexpr int kBlockRuns = 3;   // one settling run, then timed ones
  static constexpr int kTrialRuns = 12;  // timed, per side
  static constexpr int kTimedPerBlock = kBlockRuns - 1;
  static constexpr int kTrialLength = 2 * kTrialRuns / kTimedPerBlock * kBlockRuns;  // runs in a trial
  static_assert(kTrialRuns % kTimedPerBlock == 0, "whole blocks");
  static constexpr int64_t kRetuneRuns = 2000;
  static constexpr int64_t kFirstRecheckRuns = 16;
  static constexpr double kMinGain = 0.03;

  enum class Choice { kUndecided, kPool, kSerial };

  // A run as executors see it: BeginRun says whether it uses the pool (and closes the previous run's time);
  // AddTime adds time spent in it, by the executor that owns the tuner and by the executors that follow
  // that one's choice (a session's optimizer graph follows its training graph: it reads the gradients the
  // training graph's threads wrote, so the two are timed and decided together). A run that failed after
  // BeginRun still counts with the time added so far.
  bool BeginRun();
  void AddTime(double seconds) { pending_ += seconds; }
  bool pooled_now() const { return pooled_now_; }

  // The schedule underneath: whether the next run should use the pool, and the whole time of the run just
  // made as NextRunPooled said.
  bool NextRunPooled() const;
  void Record(double seconds);

  Choice choice() const { return choice_; }
  // The medians of the last trial, in seconds (0 before the first trial ends).
  double pooled_seconds() const { return pooled_median_; }
  double serial_seconds() const { return serial_median_; }
  // "pool (pooled 0.410 ms, serial 0.520 ms)", "serial (...)", or "undecided".
  std::string Describe() const;

 private:
  int64_t runs_ = 0;  // since the last trial ended (before the first: the warm-up runs)
  int64_t wait_ = kWarmupRuns;               // runs_ at which the next trial starts
  int64_t serial_wait_ = kFirstRecheckRuns;  // the wait after the next trial that chooses serial runs
  int trial_ = -1;    // runs of the current trial so far; -1 outside a trial
  int timed_pooled_ = 0, timed_serial_ = 0;
  bool open_ = false, pooled_now_ = true;  // BeginRun: a run is open, and whether it uses the pool
  double pending_ = 0;                     // its time so far
  std::array<double, kTrialRuns> pooled_{}, serial_{};
  Choice choice_ = Choice::kUndecided;
  double pooled_median_ = 0, serial_median_ = 0;
};

}  // namespace ontrain
