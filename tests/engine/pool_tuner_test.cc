// PoolTuner's schedule with given run times: the warm-up runs pooled, the trial takes pooled and serial blocks
// in turn and times all but each block's first run, the decision follows the medians (the pool unless serial
// runs win by kMinGain) and changes only when a trial ends, and the trial repeats: kRetuneRuns runs after
// one that kept the pool, sooner after one that chose serial runs.
// The executor's use of it is checked in executor_test.
#include "engine/pool_tuner.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace ontrain {
namespace {

// Runs `t` through warm-up and one trial, timing pooled runs at `pooled` and serial ones at `serial`.
// Returns how many trial runs were pooled.
int RunTrial(PoolTuner* t, double pooled, double serial, bool warm_up) {
  const PoolTuner::Choice decided = t->choice();
  if (warm_up) {
    for (int i = 0; i < PoolTuner::kWarmupRuns; ++i) {
      EXPECT_TRUE(t->NextRunPooled()) << "warm-up run " << i;
      t->Record(1.0);  // warm-up times are not used
    }
  }
  int pooled_runs = 0;
  for (int i = 0; i < PoolTuner::kTrialLength; ++i) {
    bool p = t->NextRunPooled();
    const int block = i / PoolTuner::kBlockRuns;
    EXPECT_EQ(p, block % 2 == 0) << "trial run " << i;
    pooled_runs += p;
    EXPECT_EQ(t->choice(), decided) << "decided before the trial ended, run " << i;
    if (i % PoolTuner::kBlockRuns == 0) {
      t->Record(1000.0);  // a block's settling run is not timed: this would swing either median
      continue;
    }
    // One outlier in each side's first block: the median ignores it.
    double outlier = block < 2 && i % PoolTuner::kBlockRuns == 1 ? 50.0 : 1.0;
    t->Record((p ? pooled : serial) * outlier);
  }
  return pooled_runs;
}

TEST(PoolTunerTest, KeepsThePoolWhenItIsFaster) {
  PoolTuner t;
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kUndecided);
  EXPECT_EQ(t.Describe(), "undecided");
  EXPECT_EQ(RunTrial(&t, 0.002, 0.003, true), PoolTuner::kTrialLength / 2);
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kPool);
  EXPECT_DOUBLE_EQ(t.pooled_seconds(), 0.002);
  EXPECT_DOUBLE_EQ(t.serial_seconds(), 0.003);
  EXPECT_EQ(t.Describe(), "pool (pooled 2.000 ms, serial 3.000 ms)");
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(t.NextRunPooled());
    t.Record(0.002);
  }
}

TEST(PoolTunerTest, RunsSeriallyOnlyWhenThatIsClearlyFaster) {
  PoolTuner slower;
  RunTrial(&slower, 0.0005, 0.0003, true);
  EXPECT_EQ(slower.choice(), PoolTuner::Choice::kSerial);
  EXPECT_FALSE(slower.NextRunPooled());
  EXPECT_EQ(slower.Describe(), "serial (pooled 0.500 ms, serial 0.300 ms)");
  // Serial runs 2% faster is within kMinGain: the pool the user asked for stays; 4% is not.
  PoolTuner close;
  RunTrial(&close, 1.0, 0.98, true);
  EXPECT_EQ(close.choice(), PoolTuner::Choice::kPool);
  PoolTuner clear;
  RunTrial(&clear, 1.0, 0.96, true);
  EXPECT_EQ(clear.choice(), PoolTuner::Choice::kSerial);
}

// Runs `runs` runs outside a trial, each as the choice says, and expects no trial to start among them.
void RunDecided(PoolTuner* t, int64_t runs, double seconds) {
  const bool pooled = t->choice() == PoolTuner::Choice::kPool;
  for (int64_t i = 0; i < runs; ++i) {
    ASSERT_EQ(t->NextRunPooled(), pooled) << "run " << i << " of " << runs;
    t->Record(seconds);
  }
}

TEST(PoolTunerTest, TriesAgainAfterRetuneRuns) {
  PoolTuner t;
  RunTrial(&t, 0.001, 0.002, true);
  ASSERT_EQ(t.choice(), PoolTuner::Choice::kPool);
  RunDecided(&t, PoolTuner::kRetuneRuns, 0.001);
  // The load changed (another process took a core): the new trial finds serial runs faster.
  EXPECT_EQ(RunTrial(&t, 0.004, 0.002, false), PoolTuner::kTrialLength / 2) << "a trial right after kRetuneRuns";
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kSerial);
  RunDecided(&t, PoolTuner::kFirstRecheckRuns, 0.002);
  RunTrial(&t, 0.001, 0.002, false);
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kPool);
  RunDecided(&t, PoolTuner::kRetuneRuns, 0.001);
}

// A serial choice made while another process briefly held the second core would otherwise cost the pool's
// gain for kRetuneRuns runs: it is checked again after kFirstRecheckRuns, then after twice as many runs each
// time it holds, up to kRetuneRuns; a trial that keeps the pool starts the doubling over.
TEST(PoolTunerTest, ChecksASerialChoiceSoonThenLessOften) {
  PoolTuner t;
  RunTrial(&t, 0.004, 0.002, true);
  int64_t wait = PoolTuner::kFirstRecheckRuns;
  for (int trial = 0; trial < 12; ++trial) {
    ASSERT_EQ(t.choice(), PoolTuner::Choice::kSerial) << "trial " << trial;
    RunDecided(&t, wait, 0.002);
    ASSERT_EQ(RunTrial(&t, 0.004, 0.002, false), PoolTuner::kTrialLength / 2) << "trial " << trial + 1;
    wait = std::min(2 * wait, PoolTuner::kRetuneRuns);
  }
  EXPECT_EQ(wait, PoolTuner::kRetuneRuns) << "the doubling reached its cap within the loop";
  RunDecided(&t, PoolTuner::kRetuneRuns, 0.002);
  RunTrial(&t, 0.001, 0.002, false);  // the second core is free again
  ASSERT_EQ(t.choice(), PoolTuner::Choice::kPool);
  RunDecided(&t, PoolTuner::kRetuneRuns, 0.001);
  RunTrial(&t, 0.004, 0.002, false);
  ASSERT_EQ(t.choice(), PoolTuner::Choice::kSerial);
  RunDecided(&t, PoolTuner::kFirstRecheckRuns, 0.002);  // the short wait again
  EXPECT_EQ(RunTrial(&t, 0.004, 0.002, false), PoolTuner::kTrialLength / 2);
}

// Executors see a run through BeginRun and AddTime: the times a run's leader and followers add make one
// sample, closed when the next run begins.
TEST(PoolTunerTest, ARunIsTheTimeAddedBetweenBeginnings) {
  PoolTuner t;
  for (int i = 0; i < PoolTuner::kWarmupRuns + PoolTuner::kTrialLength; ++i) {
    const bool pooled = t.BeginRun();
    EXPECT_EQ(pooled, t.pooled_now());
    // The leader alone is faster pooled, but its follower is much slower pooled: serial wins as a whole.
    t.AddTime(pooled ? 1.0 : 1.5);
    t.AddTime(pooled ? 2.0 : 0.5);
  }
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kUndecided) << "the last run's time is closed by the next BeginRun";
  EXPECT_FALSE(t.BeginRun());
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kSerial);
  EXPECT_DOUBLE_EQ(t.pooled_seconds(), 3.0);
  EXPECT_DOUBLE_EQ(t.serial_seconds(), 2.0);
}

}  // namespace
}  // namespace ontrain
