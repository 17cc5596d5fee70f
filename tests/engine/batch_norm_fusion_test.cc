// The executor's BatchNormalization + activation fusion (engine/kernel_fusion.h): a training model made from
// Conv -> BatchNormalization -> Clip (ReLU6) and -> Relu layers runs ai.ontrain BatchNormActivation and its
// gradient in place of four nodes each, with the same bits as those nodes, at one and two threads; values
// read elsewhere keep the nodes apart.
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/artifacts.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::Count;
using testing::ExpectSameBits;
using testing::RunBoth;
using testing::Values;

std::vector<onnx::AttributeProto> Conv3x3() {
  return {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})};
}

// x [4, 3, 7, 7] -> Conv 3->8 -> BatchNormalization -> Clip(0, 6) -> Conv 8->8 -> BatchNormalization ->
// Relu -> GlobalAveragePool -> Flatten -> [4, 8], MSE. Channels 0-2 of the first normalization have scale 0,
// so that their outputs are exactly 0 (ReLU6's lower bound, where its gradient passes), 6 (its upper bound)
// and -1 (clipped); channel 0 of the second one is exactly 0 (where ReLU's gradient is shut).
Model ForwardModel() {
  Model fwd;
  fwd.opset_imports[""] = 17;
  Graph& g = fwd.graph;
  g.inputs = {TensorInfo("x", DType::kFloat32, {4, 3, 7, 7})};
  g.AddInitializer("w1", Tensor::FromVector(Values(8 * 3 * 9, 11, false), {8, 3, 3, 3}));
  g.AddInitializer("w2", Tensor::FromVector(Values(8 * 8 * 9, 12, false), {8, 8, 3, 3}));
  for (int k = 1; k <= 2; ++k) {
    std::vector<float> scale = Values(8, 13 * k, false), bias = Values(8, 14 * k, false);
    for (float& s : scale) s += 1.5f;
    scale[0] = 0.0f;
    bias[0] = 0.0f;
    if (k == 1) {
      scale[1] = scale[2] = 0.0f;
      bias[1] = 6.0f;
      bias[2] = -1.0f;
    }
    const std::string p = "bn" + std::to_string(k);
    g.AddInitializer(p + "_scale", Tensor::FromVector(scale, {8}));
    g.AddInitializer(p + "_bias", Tensor::FromVector(bias, {8}));
    g.AddInitializer(p + "_mean", Tensor::FromVector(std::vector<float>(8, 0.0f), {8}));
    g.AddInitializer(p + "_var", Tensor::FromVector(std::vector<float>(8, 1.0f), {8}));
  }
  g.AddInitializer("lo", Tensor::FromVector<float>({0.0f}, {}));
  g.AddInitializer("hi", Tensor::FromVector<float>({6.0f}, {}));
  g.nodes = {MakeNode("Conv", {"x", "w1"}, {"c1"}, Conv3x3(), "conv1"),
             MakeNode("BatchNormalization", {"c1", "bn1_scale", "bn1_bias", "bn1_mean", "bn1_var"}, {"n1"}, {}, "bn1"),
             MakeNode("Clip", {"n1", "lo", "hi"}, {"a1"}, {}, "relu6"),
             MakeNode("Conv", {"a1", "w2"}, {"c2"}, Conv3x3(), "conv2"),
             MakeNode("BatchNormalization", {"c2", "bn2_scale", "bn2_bias", "bn2_mean", "bn2_var"}, {"n2"}, {}, "bn2"),
             MakeNode("Relu", {"n2"}, {"a2"}, {}, "relu"),
             MakeNode("GlobalAveragePool", {"a2"}, {"p"}, {}, "pool"),
             MakeNode("Flatten", {"p"}, {"y"}, {}, "flatten")};
  g.outputs = {TensorInfo("y", DType::kFloat32, {4, 8})};
  return fwd;
}

Model TrainingModel() {
  ArtifactOptions options;
  options.loss = LossKind::kMSE;
  auto a = GenerateArtifacts(ForwardModel(), options);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) return Model{};
  Model training = a.value().training;
  testing::ExposeAccumulatedGradients(&training);
  return training;
}

// Every input of the training model: the parameters and running statistics with their values in the
// forward model, x with exact zeros, targets, and the lazy-reset flag true.
NamedTensors Feeds(const Model& training) { return testing::TrainingFeeds(training, ForwardModel(), 40, 4); }

int Unfused(const testing::FusionRuns& r) {
  return Count(r, "::Clip") + Count(r, "::Relu") + Count(r, "ai.ontrain::ClipGrad") + Count(r, "com.microsoft::ReluGrad") +
         Count(r, "com.microsoft::BatchNormInternal") + Count(r, "com.microsoft::BatchNormalizationGrad");
}

TEST(BatchNormFusionTest, ClipAndReluLayersFuseWithTheSameBits) {
  const Model training = TrainingModel();
  ASSERT_FALSE(training.graph.nodes.empty());
  ASSERT_GE(training.graph.outputs.size(), 9u);  // the loss, the flags, and 8 gradients (2 convs, 2 x 3 of BN)
  for (int threads : {1, 2}) {
    testing::FusionRuns r = RunBoth(training, Feeds(training), threads);
    EXPECT_EQ(Count(r, "ai.ontrain::BatchNormActivation"), 2) << threads;
    EXPECT_EQ(Count(r, "ai.ontrain::BatchNormActivationGrad"), 2) << threads;
    EXPECT_EQ(Unfused(r), 0) << threads;
    ExpectSameBits(r);
  }
}

// ReluGrad may test the Relu's output for its input (ONNX Runtime's builders do): positive at the same places.
TEST(BatchNormFusionTest, ReluGradOfTheReluOutputFusesToo) {
  Model training = TrainingModel();
  int changed = 0;
  for (Node& n : training.graph.nodes) {
    if (n.op_type != "ReluGrad") continue;
    for (const Node& relu : training.graph.nodes) {
      if (relu.op_type == "Relu" && relu.inputs[0] == n.inputs[1]) {
        n.inputs[1] = relu.outputs[0];
        ++changed;
      }
    }
  }
  ASSERT_EQ(changed, 1);
  testing::FusionRuns r = RunBoth(training, Feeds(training));
  EXPECT_EQ(Count(r, "ai.ontrain::BatchNormActivationGrad"), 2);
  EXPECT_EQ(Unfused(r), 0);
  ExpectSameBits(r);
}

// A normalized value that is also a graph output must stay, and so its layer stays as four nodes; the
// other layer still fuses.
TEST(BatchNormFusionTest, NormalizedValueReadElsewhereKeepsItsLayerApart) {
  Model training = TrainingModel();
  std::string n1;
  for (const Node& n : training.graph.nodes) {
    if (n.op_type == "BatchNormInternal" && n.inputs[0] == "c1") n1 = n.outputs[0];
  }
  ASSERT_FALSE(n1.empty());
  training.graph.outputs.push_back(TensorInfo(n1, DType::kFloat32, {4, 8, 7, 7}));
  testing::FusionRuns r = RunBoth(training, Feeds(training));
  EXPECT_EQ(Count(r, "ai.ontrain::BatchNormActivation"), 1);
  EXPECT_EQ(Count(r, "::Clip"), 1);
  EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 1);
  ExpectSameBits(r);
}

// Clip's bounds must be the ones its gradient tests: with another upper bound in ClipGrad the pair could
// differ from the fused kernel, so it is not fused.
TEST(BatchNormFusionTest, ClipGradWithOtherBoundsIsNotFused) {
  Model training = TrainingModel();
  training.graph.AddInitializer("other_hi", Tensor::FromVector<float>({5.0f}, {}));
  int changed = 0;
  for (Node& n : training.graph.nodes) {
    if (n.op_type == "LessOrEqual" && n.inputs[1] == "hi") {
      n.inputs[1] = "other_hi";
      ++changed;
    }
  }
  ASSERT_EQ(changed, 1);
  testing::FusionRuns r = RunBoth(training, Feeds(training));
  EXPECT_EQ(Count(r, "ai.ontrain::BatchNormActivation"), 1);
  EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 1);
  ExpectSameBits(r);
}

}  // namespace
}  // namespace ontrain
