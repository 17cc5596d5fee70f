// The optimizer's state in a checkpoint: zero moments created like each parameter, moments restored from
// a checkpoint (and checked against their parameters), ONNX Runtime's errors for missing ones.
#include "optimizer/optimizer_state.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

MomentPlacement Host() { return {HostAllocator(), nullptr}; }

TEST(OptimizerStateTest, CreatesZeroMomentsLikeEachParameter) {
  CheckpointState s;
  s.AddParameter("w", Tensor::FromVector<float>({1, 2, 3}, {3}), true);
  ASSERT_TRUE(PrepareOptimizerState(&s, {"w"}, OptimizerKind::kAdamW, Host()).ok());
  const auto& m = s.optimizer_groups.at("group0").param_states.at("w").momentums;
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(testing::ToVector(m.at("momentum0")), (std::vector<float>{0, 0, 0}));
  EXPECT_EQ(testing::ToVector(m.at("momentum1")), (std::vector<float>{0, 0, 0}));
}

TEST(OptimizerStateTest, RestoresAndChecksMoments) {
  CheckpointState s;
  s.AddParameter("w", Tensor::FromVector<float>({1, 2}, {2}), true);
  s.optimizer_groups["group0"].param_states["w"].momentums["momentum0"] = Tensor::FromVector<float>({5, 6}, {2});
  ASSERT_TRUE(PrepareOptimizerState(&s, {"w"}, OptimizerKind::kSGD, Host()).ok());
  EXPECT_EQ(testing::ToVector(s.optimizer_groups["group0"].param_states["w"].momentums["momentum0"]),
            (std::vector<float>{5, 6}));
  Status missing = PrepareOptimizerState(&s, {"w"}, OptimizerKind::kAdamW, Host());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(), HasSubstr("has no \"momentum1\""));
  s.optimizer_groups["group0"].param_states["w"].momentums["momentum0"] = Tensor::FromVector<float>({5}, {1});
  Status shape = PrepareOptimizerState(&s, {"w"}, OptimizerKind::kSGD, Host());
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.message(), HasSubstr("but the parameter is [2]"));
  Status absent = PrepareOptimizerState(&s, {"nope"}, OptimizerKind::kSGD, Host());
  ASSERT_FALSE(absent.ok());
  EXPECT_THAT(absent.message(), HasSubstr("\"nope\" is not in the checkpoint"));
}

}  // namespace
}  // namespace ontrain
