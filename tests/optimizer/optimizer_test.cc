// Optimizer update rules against their formulas written out in double precision, and the Optimizer's
// model checks, moment handling and step counting.
#include "optimizer/optimizer.h"

#include <cmath>

#include "gmock/gmock.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

TEST(UpdateRulesTest, AdamWBothModesMatchFormulas) {
  for (int mode : {0, 1}) {
    SCOPED_TRACE(mode);
    AdamWConfig c;
    c.alpha = 0.8f;
    c.beta = 0.95f;
    c.epsilon = 1e-4f;
    c.weight_decay = 0.1f;
    c.adam_mode = mode;
    std::vector<float> w = {0.5f, -1.0f, 2.0f}, m = {0.1f, 0.0f, -0.2f}, v = {0.01f, 0.0f, 0.04f};
    const std::vector<float> g = {0.3f, -0.6f, 0.0f};
    std::vector<double> wd(w.begin(), w.end()), md(m.begin(), m.end()), vd(v.begin(), v.end());
    const float lr = 0.05f;
    const int64_t t = 3;
    AdamWUpdate(c, lr, t, 3, w.data(), g.data(), m.data(), v.data());
    double ac = 1 - std::pow(0.8, t), bc = 1 - std::pow(0.95, t);
    for (int i = 0; i < 3; ++i) {
      if (mode == 0) wd[i] -= wd[i] * lr * 0.1;
      md[i] = 0.8 * md[i] + 0.2 * g[i];
      vd[i] = 0.95 * vd[i] + 0.05 * g[i] * g[i];
      if (mode == 0) {
        wd[i] -= lr * md[i] / (ac * (std::sqrt(vd[i] / bc) + 1e-4));
      } else {
        wd[i] -= lr * std::sqrt(bc) / ac * md[i] / (std::sqrt(vd[i]) + 1e-4);
        wd[i] -= lr * 0.1 * wd[i];
      }
      EXPECT_NEAR(w[i], wd[i], 1e-6) << i;
      EXPECT_NEAR(m[i], md[i], 1e-7) << i;
      EXPECT_NEAR(v[i], vd[i], 1e-7) << i;
    }
  }
  std::vector<float> w = {1, 2}, g = {0.5f, -1};
  SgdUpdate(0.1f, 2, w.data(), g.data());
  EXPECT_FLOAT_EQ(w[0], 0.95f);
  EXPECT_FLOAT_EQ(w[1], 2.1f);
}

Model SgdModel() {
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports["com.microsoft"] = 1;
  m.graph.inputs.push_back(TensorInfo("learning_rate", DType::kFloat32, {1}));
  m.graph.inputs.push_back(TensorInfo("step", DType::kInt64, {1}));
  for (const char* n : {"params", "gradients", "first_order_moments"}) {
    ValueInfo v;
    v.name = n;
    v.is_tensor = false;
    m.graph.inputs.push_back(v);
  }
  m.graph.nodes.push_back(MakeNode("SGDOptimizerV2", {"learning_rate", "params", "gradients"}, {"flag"}, {}, "sgd",
                                   "com.microsoft"));
  return m;
}

TEST(OptimizerTest, SgdStepsAndCounts) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  CheckpointState s;
  s.AddParameter("w", Tensor::FromVector<float>({1, 2, 3}, {3}), true);
  auto opt = Optimizer::Create(SgdModel(), &s, {"w"}, cpu.get());
  ASSERT_TRUE(opt.ok()) << opt.status().ToString();
  EXPECT_EQ(opt.value()->kind(), OptimizerKind::kSGD);
  EXPECT_EQ(s.optimizer_groups.at("group0").param_states.at("w").momentums.size(), 1u);
  opt.value()->set_learning_rate(0.5f);
  ASSERT_TRUE(opt.value()->Step({{"w", Tensor::FromVector<float>({2, 2, 2}, {3})}}).ok());
  EXPECT_EQ(testing::ToVector(s.parameters.at("w").data), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(opt.value()->step(), 1);
  Status bad = opt.value()->Step({{"w", Tensor::FromVector<float>({2, 2}, {2})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(opt.value()->step(), 1) << "a failed step is not counted";
  EXPECT_EQ(testing::ToVector(s.parameters.at("w").data), (std::vector<float>{0, 1, 2})) << "nor applied";
}

TEST(OptimizerTest, RejectsUnknownNodesAndMissingMoments) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  CheckpointState s;
  s.AddParameter("w", Tensor::FromVector<float>({1}, {1}), true);
  Model m = SgdModel();
  m.graph.nodes.push_back(MakeNode("Relu", {"x"}, {"y"}, {}, "stray"));
  auto r = Optimizer::Create(m, &s, {"w"}, cpu.get());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("stray"));
  // A checkpoint with optimizer state must hold it for every trainable parameter.
  s.AddParameter("v", Tensor::FromVector<float>({1}, {1}), true);
  s.optimizer_groups["group0"].param_states["w"].momentums["momentum0"] = Tensor::FromVector<float>({0}, {1});
  auto r2 = Optimizer::Create(SgdModel(), &s, {"w", "v"}, cpu.get());
  ASSERT_FALSE(r2.ok());
  EXPECT_THAT(r2.status().message(), HasSubstr("\"v\""));
}

}  // namespace
}  // namespace ontrain
