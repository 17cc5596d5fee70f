// Optimizer: an optimizer model runs as a graph against a CheckpointState. Checked here: ONNX Runtime's
// model checks, moments in group0, the step counter (counted only when the updated flag is set, never on
// a failed step), and models whose optimizer node is surrounded by other nodes (learning-rate arithmetic,
// gradient clipping, sequence ops), against values computed by hand.
#include "engine/optimizer.h"

#include <cmath>

#include "gmock/gmock.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;
constexpr const char* kMs = "com.microsoft";

Model SgdModel() {
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports[kMs] = 1;
  m.graph.inputs = {TensorInfo("learning_rate", DType::kFloat32, {1}), TensorInfo("step", DType::kInt64, {1}),
                    SequenceInfo("params"), SequenceInfo("gradients"), SequenceInfo("first_order_moments")};
  m.graph.nodes.push_back(MakeNode("SGDOptimizerV2", {"learning_rate", "params", "gradients"}, {"flag"}, {}, "sgd", kMs));
  m.graph.outputs.push_back(TensorInfo("flag", DType::kBool, {1}));
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

TEST(OptimizerTest, ChecksTheModelAndTheMoments) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  CheckpointState s;
  s.AddParameter("w", Tensor::FromVector<float>({1}, {1}), true);
  // Two optimizer nodes of different kinds, as ONNX Runtime rejects them.
  Model two = SgdModel();
  two.graph.nodes.push_back(MakeNode("AdamWOptimizer", {"learning_rate", "step", "params", "gradients",
                                                        "first_order_moments", "first_order_moments"},
                                     {"flag2"}, {}, "adamw", kMs));
  auto r = Optimizer::Create(two, &s, {"w"}, cpu.get());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("only one type of optimizer algorithm"));
  // The input signature is exact.
  Model renamed = SgdModel();
  renamed.graph.inputs[0].name = "lr";
  renamed.graph.nodes[0].inputs[0] = "lr";
  auto r2 = Optimizer::Create(renamed, &s, {"w"}, cpu.get());
  ASSERT_FALSE(r2.ok());
  EXPECT_THAT(r2.status().message(), HasSubstr("invalid optimizer graph inputs"));
  // A checkpoint with optimizer state must hold it for every trainable parameter.
  s.AddParameter("v", Tensor::FromVector<float>({1}, {1}), true);
  s.optimizer_groups["group0"].param_states["w"].momentums["momentum0"] = Tensor::FromVector<float>({0}, {1});
  auto r3 = Optimizer::Create(SgdModel(), &s, {"w", "v"}, cpu.get());
  ASSERT_FALSE(r3.ok());
  EXPECT_THAT(r3.status().message(), HasSubstr("\"v\""));
}

TEST(OptimizerTest, SkippedUpdateIsNotCounted) {
  // The update signal comes from the graph: false here, so nothing changes and the step stays.
  auto cpu = CpuExecutionProvider::Create({1}).value();
  CheckpointState s;
  s.AddParameter("w", Tensor::FromVector<float>({1, 2}, {2}), true);
  Model m = SgdModel();
  m.graph.nodes.insert(m.graph.nodes.begin(),
                       MakeNode("Constant", {}, {"no"}, {AttrTensor("value", Tensor::FromVector<bool>({false}, {1}))}));
  m.graph.nodes.back().inputs.push_back("no");
  auto opt = Optimizer::Create(m, &s, {"w"}, cpu.get());
  ASSERT_TRUE(opt.ok()) << opt.status().ToString();
  ASSERT_TRUE(opt.value()->Step({{"w", Tensor::FromVector<float>({1, 1}, {2})}}).ok());
  EXPECT_EQ(opt.value()->step(), 0);
  EXPECT_EQ(testing::ToVector(s.parameters.at("w").data), (std::vector<float>{1, 2}));
}

TEST(OptimizerTest, TheFlagIsReadOnlyWhereTheModelCanClearIt) {
  // Without update_signal the optimizer node sets its flag at every step, and the step is counted without
  // reading it back (Optimizer::Step); with one, or with the flag passing through other nodes, it is read.
  auto always = [](const Model& m) { return ReadOptimizerModel(m).value().flag_always_set; };
  EXPECT_TRUE(always(SgdModel()));
  EXPECT_TRUE(always(MakeOptimizerModel(OptimizerKind::kAdamW, AdamWConfig(), 17)));
  EXPECT_TRUE(always(MakeOptimizerModel(OptimizerKind::kSGD, AdamWConfig(), 17)));
  Model signal = SgdModel();
  signal.graph.nodes.insert(signal.graph.nodes.begin(),
                            MakeNode("Constant", {}, {"yes"}, {AttrTensor("value", Tensor::FromVector<bool>({true}, {1}))}));
  signal.graph.nodes.back().inputs.push_back("yes");
  EXPECT_FALSE(always(signal));
  Model adamw_signal = MakeOptimizerModel(OptimizerKind::kAdamW, AdamWConfig(), 17);
  adamw_signal.graph.nodes[0].inputs.push_back("yes");
  adamw_signal.graph.nodes.insert(adamw_signal.graph.nodes.begin(),
                                  MakeNode("Constant", {}, {"yes"}, {AttrTensor("value", Tensor::FromVector<bool>({true}, {1}))}));
  EXPECT_FALSE(always(adamw_signal));
  Model passed = SgdModel();
  passed.graph.nodes.push_back(MakeNode("Not", {"flag"}, {"not_flag"}));
  passed.graph.outputs[0].name = "not_flag";
  EXPECT_FALSE(always(passed));
  // An empty update_signal name is an omitted input.
  Model empty = SgdModel();
  empty.graph.nodes.back().inputs.push_back("");
  EXPECT_TRUE(always(empty));
}

TEST(OptimizerTest, RunsLearningRateArithmeticClippingAndSequenceOps) {
  // lr' = lr * 0.5 * step (a warm-up computed in the graph), gradients clipped to norm 1, and the first
  // gradient taken apart with SequenceAt and put back with SequenceInsert/SequenceErase around it (an
  // identity that exercises the sequence ops), then SGD.
  auto cpu = CpuExecutionProvider::Create({1}).value();
  CheckpointState s;
  s.AddParameter("a", Tensor::FromVector<float>({1, 1}, {2}), true);
  s.AddParameter("b", Tensor::FromVector<float>({2}, {1}), true);
  Model m = SgdModel();
  m.graph.nodes.clear();
  m.graph.nodes = {
      MakeNode("Cast", {"step"}, {"step_f"}, {AttrInt("to", 1)}),
      MakeNode("Constant", {}, {"half"}, {AttrTensor("value", Tensor::FromVector<float>({0.5f}, {1}))}),
      MakeNode("Mul", {"learning_rate", "half"}, {"lr_half"}),
      MakeNode("Mul", {"lr_half", "step_f"}, {"lr2"}),
      MakeNode("InplaceClipGradNorm", {"gradients"}, {"clipped"}, {AttrFloat("max_norm", 1.0f)}, "clip", kMs),
      MakeNode("Constant", {}, {"zero"}, {AttrTensor("value", Tensor::FromVector<int64_t>({0}, {}))}),
      MakeNode("SequenceAt", {"clipped", "zero"}, {"g0"}),
      MakeNode("SequenceErase", {"clipped", "zero"}, {"rest"}),
      MakeNode("SequenceInsert", {"rest", "g0", "zero"}, {"regrouped"}),
      MakeNode("SGDOptimizerV2", {"lr2", "params", "regrouped"}, {"flag"}, {}, "sgd", kMs),
  };
  auto opt = Optimizer::Create(m, &s, {"a", "b"}, cpu.get());
  ASSERT_TRUE(opt.ok()) << opt.status().ToString();
  opt.value()->set_learning_rate(0.2f);
  // Gradients {3, 0} and {4}: norm 5, clipped by 1/5 to {0.6, 0}, {0.8}. Step 1 then 2: lr' = 0.1, 0.2.
  std::map<std::string, Tensor> g = {{"a", Tensor::FromVector<float>({3, 0}, {2})},
                                     {"b", Tensor::FromVector<float>({4}, {1})}};
  ASSERT_TRUE(opt.value()->Step(g).ok());
  EXPECT_EQ(opt.value()->step(), 1);
  double c = 1.0 / (5.0 + 1e-6);
  EXPECT_NEAR(s.parameters.at("a").data.data<float>()[0], 1 - 0.1 * 3 * c, 1e-6);
  EXPECT_NEAR(s.parameters.at("a").data.data<float>()[1], 1.0, 1e-7);
  EXPECT_NEAR(s.parameters.at("b").data.data<float>()[0], 2 - 0.1 * 4 * c, 1e-6);
  // The clip wrote into the gradient tensors themselves, as ONNX Runtime's does.
  EXPECT_NEAR(g.at("a").data<float>()[0], 3 * c, 1e-6);
}

}  // namespace
}  // namespace ontrain
