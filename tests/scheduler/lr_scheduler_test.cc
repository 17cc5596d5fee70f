// Learning-rate schedules: ONNX Runtime's LinearLRScheduler values (its test tables), the other kinds
// against hand-computed values, and persistence in the property bag.
#include "scheduler/lr_scheduler.h"

#include <cmath>

#include "gtest/gtest.h"

namespace ontrain {
namespace {

LrSchedule Linear(int64_t warmup) {
  LrSchedule s;
  s.warmup_steps = warmup;
  s.total_steps = 100;
  return s;
}

TEST(LrSchedulerTest, LinearMatchesOnnxRuntimeTables) {
  struct Sample { int64_t warmup, step; double lr; };
  const Sample samples[] = {
      {30, 0, 0.0},        {30, 1, 3.3333e-5},   {30, 15, 5.0e-4},       {30, 30, 1.0e-3},
      {30, 31, 9.857142857e-4}, {30, 50, 7.142857e-4}, {30, 99, 1.4285714e-5}, {70, 51, 7.285714e-4},
      {70, 69, 9.857143e-4}, {70, 70, 1.0e-3},   {70, 71, 9.666667e-4},  {70, 99, 3.3333e-5},
      {200, 96, 4.8e-4},   {200, 99, 4.95e-4}};
  for (const Sample& s : samples) {
    EXPECT_NEAR(1e-3f * LrFactor(Linear(s.warmup), s.step), s.lr, 1e-9) << "warmup " << s.warmup << " step " << s.step;
  }
  for (int64_t k = 0; k < 100; ++k) {
    EXPECT_NEAR(1e-3f * LrFactor(Linear(0), k), (100 - k) * 1e-5, 1e-9) << k;
    EXPECT_NEAR(1e-3f * LrFactor(Linear(200), k), k * 5e-6, 1e-9) << k;
  }
  EXPECT_EQ(LrFactor(Linear(30), 150), 0.0f) << "never negative after the total";
}

TEST(LrSchedulerTest, OtherKinds) {
  LrSchedule cosine;
  cosine.kind = ScheduleKind::kCosine;
  cosine.warmup_steps = 10;
  cosine.total_steps = 110;
  cosine.min_ratio = 0.1f;
  EXPECT_FLOAT_EQ(LrFactor(cosine, 5), 0.5f);
  EXPECT_FLOAT_EQ(LrFactor(cosine, 10), 1.0f);
  EXPECT_FLOAT_EQ(LrFactor(cosine, 60), 0.1f + 0.9f * 0.5f);
  EXPECT_FLOAT_EQ(LrFactor(cosine, 110), 0.1f);
  EXPECT_FLOAT_EQ(LrFactor(cosine, 500), 0.1f);
  LrSchedule step;
  step.kind = ScheduleKind::kStep;
  step.step_size = 30;
  step.gamma = 0.5f;
  EXPECT_FLOAT_EQ(LrFactor(step, 29), 1.0f);
  EXPECT_FLOAT_EQ(LrFactor(step, 30), 0.5f);
  EXPECT_FLOAT_EQ(LrFactor(step, 95), 0.125f);
  LrSchedule expo;
  expo.kind = ScheduleKind::kExponential;
  expo.warmup_steps = 2;
  expo.gamma = 0.9f;
  EXPECT_FLOAT_EQ(LrFactor(expo, 1), 0.5f);
  EXPECT_FLOAT_EQ(LrFactor(expo, 5), 0.729f);
  LrSchedule constant;
  constant.kind = ScheduleKind::kConstant;
  constant.warmup_steps = 4;
  EXPECT_FLOAT_EQ(LrFactor(constant, 1), 0.25f);
  EXPECT_FLOAT_EQ(LrFactor(constant, 1000), 1.0f);
}

TEST(LrSchedulerTest, PersistsInPropertyBag) {
  PropertyBag bag;
  auto none = LoadSchedule(bag);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none.value().has_value());
  LrSchedule s;
  s.kind = ScheduleKind::kStep;
  s.warmup_steps = 3;
  s.step_size = 7;
  s.gamma = 0.25f;
  StoreSchedule(s, &bag);
  auto back = LoadSchedule(bag);
  ASSERT_TRUE(back.ok() && back.value().has_value());
  EXPECT_EQ(back.value()->kind, ScheduleKind::kStep);
  EXPECT_EQ(back.value()->step_size, 7);
  EXPECT_EQ(back.value()->gamma, 0.25f);
  bag.Set("ontrain.lr_schedule.gamma", std::string("oops"));
  EXPECT_FALSE(LoadSchedule(bag).ok());
  bag.Set("ontrain.lr_schedule.kind", std::string("zigzag"));
  EXPECT_FALSE(LoadSchedule(bag).ok());
}

TEST(LrSchedulerTest, Validation) {
  LrSchedule s;
  s.warmup_steps = -1;
  EXPECT_FALSE(ValidateSchedule(s).ok());
  s.warmup_steps = 0;
  s.kind = ScheduleKind::kStep;
  s.step_size = 0;
  EXPECT_FALSE(ValidateSchedule(s).ok());
  EXPECT_FALSE(ParseScheduleKind("sawtooth").ok());
  EXPECT_EQ(ParseScheduleKind("cosine").value(), ScheduleKind::kCosine);
}

}  // namespace
}  // namespace ontrain
