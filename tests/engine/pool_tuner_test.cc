// PoolTuner's schedule with given run times: the warm-up runs pooled, the trial alternates pooled and serial
// runs, the decision follows the medians (serial unless the pool wins by kMinGain), and the trial repeats
// after kRetuneRuns runs. The executor's use of it is checked in executor_test.
#include "engine/pool_tuner.h"

#include "gtest/gtest.h"

namespace ontrain {
namespace {

// Runs `t` through warm-up and one trial, timing pooled runs at `pooled` and serial ones at `serial`.
// Returns how many trial runs were pooled.
int RunTrial(PoolTuner* t, double pooled, double serial, bool warm_up) {
  if (warm_up) {
    for (int i = 0; i < PoolTuner::kWarmupRuns; ++i) {
      EXPECT_TRUE(t->NextRunPooled()) << "warm-up run " << i;
      t->Record(1.0);  // warm-up times are not used
    }
  }
  int pooled_runs = 0;
  for (int i = 0; i < 2 * PoolTuner::kTrialRuns; ++i) {
    bool p = t->NextRunPooled();
    EXPECT_EQ(p, i % 2 == 0) << "trial run " << i;
    pooled_runs += p;
    // One outlier in each arm: the median ignores it.
    double outlier = i < 2 ? 50.0 : 1.0;
    t->Record((p ? pooled : serial) * outlier);
  }
  return pooled_runs;
}

TEST(PoolTunerTest, KeepsThePoolWhenItIsFaster) {
  PoolTuner t;
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kUndecided);
  EXPECT_EQ(t.Describe(), "undecided");
  EXPECT_EQ(RunTrial(&t, 0.002, 0.003, true), PoolTuner::kTrialRuns);
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kPool);
  EXPECT_DOUBLE_EQ(t.pooled_seconds(), 0.002);
  EXPECT_DOUBLE_EQ(t.serial_seconds(), 0.003);
  EXPECT_EQ(t.Describe(), "pool (pooled 2.000 ms, serial 3.000 ms)");
  for (int i = 0; i < 100; ++i) {
    EXPECT_TRUE(t.NextRunPooled());
    t.Record(0.002);
  }
}

TEST(PoolTunerTest, RunsSeriallyWhenThePoolIsSlowerOrNotClearlyFaster) {
  PoolTuner slower;
  RunTrial(&slower, 0.0005, 0.0003, true);
  EXPECT_EQ(slower.choice(), PoolTuner::Choice::kSerial);
  EXPECT_FALSE(slower.NextRunPooled());
  EXPECT_EQ(slower.Describe(), "serial (pooled 0.500 ms, serial 0.300 ms)");
  // 2% faster is within kMinGain: one thread leaves the other core to other work.
  PoolTuner close;
  RunTrial(&close, 0.98, 1.0, true);
  EXPECT_EQ(close.choice(), PoolTuner::Choice::kSerial);
  PoolTuner clear;
  RunTrial(&clear, 0.96, 1.0, true);
  EXPECT_EQ(clear.choice(), PoolTuner::Choice::kPool);
}

TEST(PoolTunerTest, TriesAgainAfterRetuneRuns) {
  PoolTuner t;
  RunTrial(&t, 0.001, 0.002, true);
  ASSERT_EQ(t.choice(), PoolTuner::Choice::kPool);
  for (int64_t i = 0; i < PoolTuner::kRetuneRuns; ++i) {
    ASSERT_TRUE(t.NextRunPooled()) << i;
    t.Record(0.001);
  }
  // The load changed (another process took a core): the new trial finds serial runs faster.
  RunTrial(&t, 0.004, 0.002, false);
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kSerial);
  for (int64_t i = 0; i < PoolTuner::kRetuneRuns; ++i) {
    ASSERT_FALSE(t.NextRunPooled()) << i;
    t.Record(0.002);
  }
  RunTrial(&t, 0.001, 0.002, false);
  EXPECT_EQ(t.choice(), PoolTuner::Choice::kPool);
}

}  // namespace
}  // namespace ontrain
