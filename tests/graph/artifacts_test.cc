// Artifact generation: ONNX Runtime's layout conventions, the loss blocks' values, and option errors.
#include "graph/artifacts.h"

#include <cmath>
#include <limits>
#include <map>

#include "checkpoint/checkpoint_io.h"
#include "engine/executor.h"
#include "gmock/gmock.h"
#include "graph/builder.h"
#include "graph/gradient_builders.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<ValueInfo>& v) {
  std::vector<std::string> out;
  for (const ValueInfo& x : v) out.push_back(x.name);
  return out;
}

TEST(ArtifactsTest, FollowsOnnxRuntimeConventions) {
  ArtifactOptions o;
  o.extra_outputs = {"logits"};
  auto a = GenerateArtifacts(MakeMlpClassifier(6, {5}, 3, 1), o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(Names(a->training.graph.inputs),
            (std::vector<std::string>{"input", "labels", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                                      "fc1.weight_grad.accumulation.buffer", "fc1.bias_grad.accumulation.buffer",
                                      "fc2.weight_grad.accumulation.buffer", "fc2.bias_grad.accumulation.buffer",
                                      "lazy_reset_grad"}));
  EXPECT_EQ(Names(a->training.graph.outputs),
            (std::vector<std::string>{"onnx::loss::1", "logits", "fc1.weight_grad.accumulation.out",
                                      "fc1.bias_grad.accumulation.out", "fc2.weight_grad.accumulation.out",
                                      "fc2.bias_grad.accumulation.out"}));
  EXPECT_EQ(Names(a->eval.graph.inputs), (std::vector<std::string>{"input", "labels", "fc1.weight", "fc1.bias",
                                                                   "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(Names(a->eval.graph.outputs), (std::vector<std::string>{"onnx::loss::1", "logits"}));
  EXPECT_EQ(Names(a->optimizer.graph.inputs),
            (std::vector<std::string>{"learning_rate", "step", "params", "gradients", "first_order_moments",
                                      "second_order_moments"}));
  EXPECT_TRUE(a->training.graph.initializers.count("onnx::loss::1_grad"));
  int accumulators = 0, relu_grads = 0;
  for (const Node& n : a->training.graph.nodes) {
    if (n.op_type == "InPlaceAccumulatorV2") {
      EXPECT_EQ(n.domain, "com.microsoft");
      EXPECT_EQ(n.name.rfind("GradientAccumulator", 0), 0u);
      accumulators++;
    }
    relu_grads += n.op_type == "ReluGrad";
  }
  EXPECT_EQ(accumulators, 4);
  EXPECT_EQ(relu_grads, 1);
  EXPECT_EQ(a->checkpoint.parameter_order, (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(a->training.graph.FindInput("labels")->TypeString(), "int64[batch]");
}

// Runs the eval model of generated artifacts on x/target and returns the loss.
double EvalLoss(const Artifacts& a, const NamedTensors& user) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(a.eval, cpu.get()).value();
  NamedTensors feeds = user;
  for (const auto& [n, p] : a.checkpoint.parameters) feeds.push_back({n, p.data});
  std::vector<Tensor> out;
  Status s = ex->Run(ToNamedValues(feeds), {a.eval.graph.outputs[0].name}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out.empty() ? NAN : out[0].data<float>()[0];
}

// A linear "model" y = x * w (w = 1) so that the loss blocks see known predictions.
Model Identityish() {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 3})};
  m.graph.AddInitializer("w", Tensor::FromVector<float>({1.0f}, {1}));
  m.graph.nodes = {MakeNode("Mul", {"x", "w"}, {"y"}, {}, "scale")};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {2, 3})};
  return m;
}

TEST(ArtifactsTest, LossBlocksComputeTheirDefinitions) {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.0f, 1.5f, -0.5f}, t = {1.0f, 0.0f, 1.0f, 0.0f, 1.0f, 0.0f};
  NamedTensors feeds = {{"x", Tensor::FromVector(x, {2, 3})}, {"target", Tensor::FromVector(t, {2, 3})}};
  double mse = 0, l1 = 0, bce = 0;
  for (int i = 0; i < 6; ++i) {
    mse += (x[i] - t[i]) * (x[i] - t[i]) / 6;
    l1 += std::abs(x[i] - t[i]) / 6;
    double s = 1 / (1 + std::exp(-x[i]));
    bce -= (t[i] * std::log(s) + (1 - t[i]) * std::log(1 - s)) / 6;
  }
  for (auto [kind, expected] : {std::make_pair(LossKind::kMSE, mse), std::make_pair(LossKind::kL1, l1),
                                std::make_pair(LossKind::kBCEWithLogits, bce)}) {
    ArtifactOptions o;
    o.loss = kind;
    auto a = GenerateArtifacts(Identityish(), o);
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    EXPECT_NEAR(EvalLoss(a.value(), feeds), expected, 1e-6);
  }
  // CrossEntropyLoss with sum reduction and an ignored label.
  ArtifactOptions ce;
  ce.reduction = "sum";
  ce.has_ignore_index = true;
  ce.ignore_index = 2;
  auto a = GenerateArtifacts(Identityish(), ce);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  NamedTensors cf = {{"x", Tensor::FromVector(x, {2, 3})}, {"labels", Tensor::FromVector<int64_t>({0, 2}, {2})}};
  double lse0 = std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0));
  EXPECT_NEAR(EvalLoss(a.value(), cf), lse0 - 0.5, 1e-6) << "row 2 has the ignored label";
}

TEST(ArtifactsTest, OptionErrors) {
  ArtifactOptions both;
  both.requires_grad = {"fc1.weight"};
  both.frozen = {"fc1.weight"};
  auto a = GenerateArtifacts(MakeMlpClassifier(6, {5}, 3, 1), both);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("cannot be frozen and require gradients"));
  ArtifactOptions bad_extra;
  bad_extra.extra_outputs = {"nope"};
  EXPECT_FALSE(GenerateArtifacts(MakeMlpClassifier(6, {5}, 3, 1), bad_extra).ok());
  ArtifactOptions bad_reduction;
  bad_reduction.reduction = "median";
  EXPECT_FALSE(GenerateArtifacts(MakeMlpClassifier(6, {5}, 3, 1), bad_reduction).ok());
  // Frozen parameters go to the checkpoint without gradients.
  ArtifactOptions frozen;
  frozen.frozen = {"fc1.weight", "fc1.bias"};
  auto f = GenerateArtifacts(MakeMlpClassifier(6, {5}, 3, 1), frozen);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_FALSE(f->checkpoint.parameters.at("fc1.weight").requires_grad);
  EXPECT_TRUE(f->checkpoint.parameters.at("fc2.weight").requires_grad);
  EXPECT_EQ(f->training.graph.FindInput("fc1.weight_grad.accumulation.buffer"), nullptr);
}

// Which initializers become parameters: a weight is trained; a -inf mask added to the logits, a float
// threshold that only feeds a comparison, and a float initializer on a branch the loss does not read stay
// constants, each with its reason; --requires-grad on the mask is refused.
TEST(ArtifactsTest, DecidesWhichInitializersAreParameters) {
  Model m = MakeMlpClassifier(4, {}, 3, 1);  // logits = Gemm(input, fc1.weight, fc1.bias)
  Graph& g = m.graph;
  const std::string logits = g.outputs[0].name;
  const float inf = std::numeric_limits<float>::infinity();
  g.AddInitializer("mask", Tensor::FromVector<float>({0.0f, -inf, 0.0f}, {3}));
  g.AddInitializer("threshold", Tensor::FromVector<float>({0.5f}, {1}));
  g.AddInitializer("side.scale", Tensor::FromVector<float>({2.0f, 3.0f, 4.0f}, {3}));
  for (Node& n : g.nodes) {
    for (std::string& out : n.outputs) {
      if (out == logits) out = "raw";
    }
  }
  g.nodes.push_back(MakeNode("Add", {"raw", "mask"}, {"masked"}, {}, "add_mask"));
  g.nodes.push_back(MakeNode("Greater", {"masked", "threshold"}, {"above"}, {}, "cmp"));
  g.nodes.push_back(MakeNode("Where", {"above", "masked", "masked"}, {logits}, {}, "where"));
  g.nodes.push_back(MakeNode("Mul", {"raw", "side.scale"}, {"side"}, {}, "side_mul"));
  ValueInfo side = g.outputs[0];
  side.name = "side";
  g.outputs.push_back(side);
  auto a = GenerateArtifacts(m, ArtifactOptions());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::map<std::string, InitializerDecision> by_name;
  for (const InitializerDecision& d : a->initializers) by_name[d.name] = d;
  using Kind = InitializerDecision::Kind;
  EXPECT_EQ(by_name.at("fc1.weight").kind, Kind::kTrainable);
  EXPECT_EQ(by_name.at("fc1.bias").kind, Kind::kTrainable);
  EXPECT_EQ(by_name.at("mask").kind, Kind::kConstant);
  EXPECT_THAT(by_name.at("mask").why, HasSubstr("non-finite"));
  EXPECT_EQ(by_name.at("threshold").kind, Kind::kConstant);
  EXPECT_THAT(by_name.at("threshold").why, HasSubstr("no gradient reaches it"));
  EXPECT_EQ(by_name.at("side.scale").kind, Kind::kConstant);
  EXPECT_THAT(by_name.at("side.scale").why, HasSubstr("no gradient reaches it"));
  EXPECT_EQ(a->checkpoint.parameter_order, (std::vector<std::string>{"fc1.weight", "fc1.bias"}));
  EXPECT_TRUE(a->training.graph.initializers.count("mask"));
  ArtifactOptions train_mask;
  train_mask.requires_grad = {"fc1.weight", "mask"};
  auto refused = GenerateArtifacts(m, train_mask);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("\"mask\", which holds non-finite values"));
}

// Ops without a gradient between the parameters and the loss are all named in one error, with their nodes,
// instead of the first one alone (and the parameters before them are not quietly left untrained).
TEST(ArtifactsTest, NamesEveryOpWithoutAGradient) {
  ASSERT_EQ(FindGradientRule("", "Shrink"), nullptr);
  ASSERT_EQ(FindGradientRule("", "LpNormalization"), nullptr);
  Model m = MakeMlpClassifier(4, {}, 3, 1);
  Graph& g = m.graph;
  const std::string logits = g.outputs[0].name;
  for (Node& n : g.nodes) {
    for (std::string& out : n.outputs) {
      if (out == logits) out = "raw";
    }
  }
  g.nodes.push_back(MakeNode("LpNormalization", {"raw"}, {"n1"}, {}, "norm_a"));
  g.nodes.push_back(MakeNode("Shrink", {"n1"}, {"s"}, {}, "shrink"));
  g.nodes.push_back(MakeNode("LpNormalization", {"s"}, {logits}, {}, "norm_b"));
  auto a = GenerateArtifacts(m, ArtifactOptions());
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("ops LpNormalization (2 nodes: \"norm_a\", \"norm_b\"); Shrink (1 node: \"shrink\")"));
  EXPECT_THAT(a.status().message(), HasSubstr("Freeze the parameters before them"));
}

}  // namespace
}  // namespace ontrain
