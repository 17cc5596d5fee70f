// BatchNormalization's running statistics in generated artifacts: frozen checkpoint parameters that each
// TrainStep updates (PyTorch's rule: momentum, unbiased batch variance; or ONNX's biased variance), checked
// against values computed here in double precision from the batches, across a dynamic batch size and
// gradient accumulation; the eval model, a checkpoint round trip and an exported inference model all see
// the updated values; `constant` keeps ONNX Runtime's behaviour; misuse is an error naming the statistic.
#include <cmath>
#include <cstdio>

#include "checkpoint/checkpoint_io.h"
#include "engine/executor.h"
#include "engine/training_session.h"
#include "gmock/gmock.h"
#include "graph/artifacts.h"
#include "graph/builder.h"
#include "graph/model_io.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kC = 2, kS = 3;  // channels, spatial size
constexpr float kMomentum = 0.7f, kEps = 1e-3f;
const std::vector<float> kMean0 = {0.25f, -0.5f}, kVar0 = {1.5f, 0.75f}, kScale = {1.2f, 0.8f}, kBias = {0.1f, -0.2f};

// x [batch, 2, 3] -> BatchNormalization (momentum 0.7, epsilon 1e-3) -> y; MSELoss against `target`.
Model BnModel() {
  Model m;
  m.opset_imports[""] = 15;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {-1, kC, kS}, {"batch", "", ""})};
  m.graph.AddInitializer("bn.scale", Tensor::FromVector(kScale, {kC}));
  m.graph.AddInitializer("bn.bias", Tensor::FromVector(kBias, {kC}));
  m.graph.AddInitializer("bn.mean", Tensor::FromVector(kMean0, {kC}));
  m.graph.AddInitializer("bn.var", Tensor::FromVector(kVar0, {kC}));
  m.graph.nodes = {MakeNode("BatchNormalization", {"x", "bn.scale", "bn.bias", "bn.mean", "bn.var"}, {"y"},
                            {AttrFloat("momentum", kMomentum), AttrFloat("epsilon", kEps)}, "bn")};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {-1, kC, kS}, {"batch", "", ""})};
  return m;
}

Tensor Batch(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n * kC * kS));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * i + 1.9 * seed) * (1.0 + 0.5 * (i % kS)) + 0.3 * seed;
  return Tensor::FromVector(v, {n, kC, kS});
}

// The statistics after one training forward on `x`, in double.
void Update(const Tensor& x, bool unbiased, std::vector<double>* mean, std::vector<double>* var) {
  const int64_t n = x.shape()[0];
  const double count = static_cast<double>(n * kS);
  for (int64_t c = 0; c < kC; ++c) {
    double s = 0, ss = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < kS; ++k) s += x.data<float>()[(b * kC + c) * kS + k];
    double mu = s / count;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t k = 0; k < kS; ++k) ss += std::pow(x.data<float>()[(b * kC + c) * kS + k] - mu, 2);
    double v = ss / count * (unbiased ? count / (count - 1) : 1.0);
    (*mean)[c] = kMomentum * (*mean)[c] + (1 - kMomentum) * mu;
    (*var)[c] = kMomentum * (*var)[c] + (1 - kMomentum) * v;
  }
}

void ExpectNear(const Tensor& t, const std::vector<double>& expected, const std::string& what) {
  ASSERT_EQ(static_cast<size_t>(t.NumElements()), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(t.data<float>()[i], expected[i], 2e-6 * std::max(1.0, std::abs(expected[i]))) << what << "[" << i << "]";
  }
}

struct Session {
  std::string dir;
  std::unique_ptr<IExecutionProvider> cpu;
  CheckpointState state;
  std::unique_ptr<TrainingSession> session;
};

void Start(BnRunningStats mode, const std::string& name, Session* r) {
  ArtifactOptions o;
  o.loss = LossKind::kMSE;
  o.bn_running_stats = mode;
  auto a = GenerateArtifacts(BnModel(), o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  r->dir = ::testing::TempDir() + "/running_stats_" + name;
  ASSERT_TRUE(WriteArtifacts(a.value(), r->dir).ok());
  r->cpu = CpuExecutionProvider::Create({1}).value();
  auto state = LoadCheckpoint(r->dir + "/checkpoint");
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  r->state = std::move(state.value());
  auto s = TrainingSession::Create({{r->cpu.get()}}, &r->state, ModelSource::FromPath(r->dir + "/training_model.onnx"),
                                   ModelSource::FromPath(r->dir + "/eval_model.onnx"),
                                   ModelSource::FromPath(r->dir + "/optimizer_model.onnx"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  r->session = std::move(s.value());
}

class RunningStatsTest : public ::testing::TestWithParam<BnRunningStats> {};

TEST_P(RunningStatsTest, EachTrainStepUpdatesTheCheckpointStatistics) {
  const bool unbiased = GetParam() == BnRunningStats::kPyTorch;
  Session r;
  Start(GetParam(), unbiased ? "pytorch" : "onnx", &r);
  if (HasFatalFailure()) return;
  const Parameter* mean = r.state.FindParameter("bn.mean");
  const Parameter* var = r.state.FindParameter("bn.var");
  ASSERT_NE(mean, nullptr);
  ASSERT_NE(var, nullptr);
  EXPECT_FALSE(mean->requires_grad);
  EXPECT_FALSE(var->requires_grad);
  std::vector<double> em(kMean0.begin(), kMean0.end()), ev(kVar0.begin(), kVar0.end());
  // Batch sizes 2, 5, 3 (the Bessel factor follows the runtime shape); steps 1 and 2 accumulate gradients
  // without a reset in between, and still update the statistics once per forward, as PyTorch does.
  const int64_t sizes[] = {2, 5, 3};
  for (int step = 0; step < 3; ++step) {
    Tensor x = Batch(sizes[step], step);
    std::vector<Tensor> out;
    ASSERT_TRUE(r.session->TrainStep({x, Batch(sizes[step], step + 10)}, &out).ok());
    Update(x, unbiased, &em, &ev);
    ExpectNear(r.state.FindParameter("bn.mean")->data, em, "running mean after step " + std::to_string(step));
    ExpectNear(r.state.FindParameter("bn.var")->data, ev, "running var after step " + std::to_string(step));
    if (step != 1) {
      ASSERT_TRUE(r.session->OptimizerStep().ok());
      r.session->LazyResetGrad();
    }
  }
  // The eval model normalises with the updated statistics and the trained scale and bias.
  Tensor x = Batch(2, 7);
  std::vector<Tensor> eval;
  ASSERT_TRUE(r.session->EvalStep({x, Batch(2, 8)}, &eval).ok());
  const float* scale = r.state.FindParameter("bn.scale")->data.data<float>();
  const float* bias = r.state.FindParameter("bn.bias")->data.data<float>();
  double loss = 0;
  std::vector<double> y(static_cast<size_t>(x.NumElements()));
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    int64_t c = (i / kS) % kC;
    y[i] = (x.data<float>()[i] - em[c]) / std::sqrt(ev[c] + kEps) * scale[c] + bias[c];
    loss += std::pow(y[i] - Batch(2, 8).data<float>()[i], 2) / static_cast<double>(x.NumElements());
  }
  EXPECT_NEAR(eval[0].data<float>()[0], loss, 1e-5 * loss);
  // The statistics are checkpoint state: saved and loaded with the parameters, in the flat buffer of all
  // parameters, and embedded in an exported inference model.
  std::string ckpt = r.dir + "/trained_checkpoint";
  ASSERT_TRUE(SaveCheckpoint(r.state, ckpt).ok());
  auto loaded = LoadCheckpoint(ckpt);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ExpectNear(loaded->FindParameter("bn.mean")->data, em, "saved running mean");
  ExpectNear(loaded->FindParameter("bn.var")->data, ev, "saved running var");
  EXPECT_EQ(r.session->GetParametersSize(false).value(), 8u);
  EXPECT_EQ(r.session->GetParametersSize(true).value(), 4u);
  std::string exported = r.dir + "/inference.onnx";
  ASSERT_TRUE(r.session->ExportModelForInferencing(exported, {"y"}).ok());
  auto model = LoadModel(exported);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto ex = Executor::Create(model.value(), r.cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> inferred;
  ASSERT_TRUE(ex.value()->Run({{"x", x}}, {"y"}, &inferred).ok());
  ExpectNear(inferred[0], y, "exported model's output");
}

INSTANTIATE_TEST_SUITE_P(Modes, RunningStatsTest, ::testing::Values(BnRunningStats::kPyTorch, BnRunningStats::kOnnx),
                         [](const ::testing::TestParamInfo<BnRunningStats>& info) {
                           return std::string(info.param == BnRunningStats::kPyTorch ? "PyTorch" : "Onnx");
                         });

TEST(RunningStatsConstantTest, OnnxRuntimeBehaviourKeepsThemConstants) {
  Session r;
  Start(BnRunningStats::kConstant, "constant", &r);
  if (HasFatalFailure()) return;
  EXPECT_EQ(r.state.FindParameter("bn.mean"), nullptr);
  EXPECT_EQ(r.state.FindParameter("bn.var"), nullptr);
  auto training = LoadModel(r.dir + "/training_model.onnx");
  ASSERT_TRUE(training.ok());
  EXPECT_TRUE(training->graph.initializers.count("bn.mean"));
  for (const Node& n : training->graph.nodes) EXPECT_EQ(n.name.find("RunningStats"), std::string::npos) << n.name;
  std::vector<Tensor> out;
  ASSERT_TRUE(r.session->TrainStep({Batch(2, 0), Batch(2, 1)}, &out).ok());
  EXPECT_EQ(training->graph.initializers.at("bn.mean").data<float>()[0], kMean0[0]);
  EXPECT_EQ(r.session->GetParametersSize(false).value(), 4u);
}

TEST(RunningStatsConstantTest, ParsesModeNames) {
  EXPECT_EQ(ParseBnRunningStats("pytorch").value(), BnRunningStats::kPyTorch);
  EXPECT_EQ(ParseBnRunningStats("onnx").value(), BnRunningStats::kOnnx);
  EXPECT_EQ(ParseBnRunningStats("constant").value(), BnRunningStats::kConstant);
  auto bad = ParseBnRunningStats("torch");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"torch\""));
}

TEST(RunningStatsErrorsTest, MisuseNamesTheStatistic) {
  // A running statistic cannot be trained.
  ArtifactOptions o;
  o.loss = LossKind::kMSE;
  o.requires_grad = {"bn.scale", "bn.var"};
  auto a = GenerateArtifacts(BnModel(), o);
  ASSERT_FALSE(a.ok());
  EXPECT_THAT(a.status().message(), HasSubstr("\"bn.var\", a running statistic of"));
  // A statistic that another node also reads cannot be updated in place.
  Model shared = BnModel();
  shared.graph.nodes.push_back(MakeNode("Identity", {"bn.mean"}, {"mean_copy"}, {}, "reads_mean"));
  shared.graph.outputs.push_back(TensorInfo("mean_copy", DType::kFloat32, {kC}));
  ArtifactOptions so;
  so.loss = LossKind::kMSE;
  auto b = GenerateArtifacts(shared, so);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("\"bn.mean\""));
  EXPECT_THAT(b.status().message(), HasSubstr("reads_mean"));
  // Only float32 statistics are updated; others name the node and the way out (a float64 model's loss
  // block and gradients are built in float64).
  Model f64 = BnModel();
  f64.graph.inputs[0] = TensorInfo("x", DType::kFloat64, {-1, kC, kS}, {"batch", "", ""});
  f64.graph.outputs[0] = TensorInfo("y", DType::kFloat64, {-1, kC, kS}, {"batch", "", ""});
  for (const char* name : {"bn.scale", "bn.bias", "bn.mean", "bn.var"}) {
    const Tensor& t = f64.graph.initializers.at(name);
    f64.graph.AddInitializer(name, Tensor::FromVector<double>({t.data<float>()[0], t.data<float>()[1]}, {kC}));
  }
  ArtifactOptions fo;
  fo.loss = LossKind::kMSE;
  auto d = GenerateArtifacts(f64, fo);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("only float32"));
  EXPECT_THAT(d.status().message(), HasSubstr("\"bn\""));
  fo.bn_running_stats = BnRunningStats::kConstant;
  auto e = GenerateArtifacts(f64, fo);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  // A shared statistic is fine when the statistics stay constant.
  so.bn_running_stats = BnRunningStats::kConstant;
  so.requires_grad = {"bn.scale", "bn.bias"};
  auto c = GenerateArtifacts(shared, so);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
}

}  // namespace
}  // namespace ontrain
