// The MLP artifacts that tools/make_mlp_fixture.py writes in ONNX Runtime's conventions (no ../shared
// needed): ten AdamW steps match an independent numpy computation; a saved and resumed run equals an
// uninterrupted one bit for bit; learning-rate schedules behave as ONNX Runtime's tests expect and continue
// across a checkpoint.
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/model_io.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/ort_artifacts.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

const std::string kDir = "tests/data/ort_mlp";

struct Reference {
  std::vector<double> losses;
  std::map<std::string, std::vector<double>> params;
};

Reference ReadReference() {
  Reference r;
  std::ifstream f(kDir + "/reference.txt");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ss(line);
    std::string kind;
    ss >> kind;
    if (kind == "loss") {
      int step;
      double v;
      ss >> step >> v;
      r.losses.push_back(v);
    } else if (kind == "param") {
      std::string name;
      int i;
      double v;
      ss >> name >> i >> v;
      r.params[name].push_back(v);
    }
  }
  return r;
}

class MlpFixtureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = CpuExecutionProvider::Create({}).value();
    auto st = LoadCheckpoint(kDir + "/checkpoint");
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    state_ = std::move(st).value();
  }
  std::unique_ptr<TrainingSession> Make(CheckpointState* state) {
    auto s = TrainingSession::Create({{cpu_.get()}}, state, ModelSource::FromPath(kDir + "/training_model.onnx"),
                                     ModelSource::FromPath(kDir + "/eval_model.onnx"),
                                     ModelSource::FromPath(kDir + "/optimizer_model.onnx"));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  static std::vector<Tensor> Batch(int step) {
    return {testing::SyntheticFloats({8, 6}, step), testing::SyntheticLabels({8}, step, 3, DType::kInt64)};
  }
  // One TrainStep + OptimizerStep + LazyResetGrad; returns the loss.
  static float Step(TrainingSession& s, int step) {
    std::vector<Tensor> out;
    Status st = s.TrainStep(Batch(step), &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(s.OptimizerStep().ok());
    s.LazyResetGrad();
    return out.empty() ? NAN : out[0].data<float>()[0];
  }
  std::unique_ptr<CpuExecutionProvider> cpu_;
  CheckpointState state_;
};

TEST_F(MlpFixtureTest, TenAdamWStepsMatchNumpy) {
  Reference ref = ReadReference();
  ASSERT_EQ(ref.losses.size(), 10u);
  auto s = Make(&state_);
  EXPECT_EQ(s->training_output_names(), (std::vector<std::string>{"onnx::loss::2", "logits"}));
  double worst_loss = 0, worst_param = 0;
  for (int step = 0; step < 10; ++step) {
    double loss = Step(*s, step);
    double rel = std::abs(loss - ref.losses[step]) / std::abs(ref.losses[step]);
    worst_loss = std::max(worst_loss, rel);
    EXPECT_LE(rel, 1e-5) << "step " << step << ": " << loss << " vs numpy " << ref.losses[step];
  }
  for (const auto& [name, values] : ref.params) {
    const Tensor& t = state_.parameters.at(name).data;
    ASSERT_EQ(static_cast<size_t>(t.NumElements()), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      double rel = std::abs(t.data<float>()[i] - values[i]) / std::max(std::abs(values[i]), 1e-2);
      worst_param = std::max(worst_param, rel);
      EXPECT_LE(rel, 1e-5) << name << "[" << i << "]";
    }
  }
  std::printf("[numpy-parity] 10 AdamW steps: largest relative difference: loss %.3g, parameters %.3g\n", worst_loss,
              worst_param);
}

TEST_F(MlpFixtureTest, ResumeReproducesUninterruptedRunBitForBit) {
  CheckpointState a = LoadCheckpoint(kDir + "/checkpoint").value();
  auto sa = Make(&a);
  LrSchedule cosine;
  cosine.kind = ScheduleKind::kCosine;
  cosine.warmup_steps = 2;
  cosine.total_steps = 8;
  ASSERT_TRUE(sa->RegisterScheduler(cosine, 0.01f).ok());
  std::vector<float> straight, resumed, lrs_straight, lrs_resumed;
  for (int step = 0; step < 8; ++step) {
    straight.push_back(Step(*sa, step));
    ASSERT_TRUE(sa->SchedulerStep().ok());
    lrs_straight.push_back(sa->GetLearningRate().value());
  }
  CheckpointState b = LoadCheckpoint(kDir + "/checkpoint").value();
  auto sb = Make(&b);
  ASSERT_TRUE(sb->RegisterScheduler(cosine, 0.01f).ok());
  for (int step = 0; step < 3; ++step) {
    resumed.push_back(Step(*sb, step));
    ASSERT_TRUE(sb->SchedulerStep().ok());
    lrs_resumed.push_back(sb->GetLearningRate().value());
  }
  std::string path = ::testing::TempDir() + "/mlp_resume.ckpt";
  ASSERT_TRUE(SaveCheckpoint(b, path).ok());
  sb.reset();
  CheckpointState c = LoadCheckpoint(path).value();
  auto sc = Make(&c);  // the stored schedule is restored at the stored step
  EXPECT_EQ(sc->GetLearningRate().value(), lrs_resumed.back());
  for (int step = 3; step < 8; ++step) {
    resumed.push_back(Step(*sc, step));
    ASSERT_TRUE(sc->SchedulerStep().ok());
    lrs_resumed.push_back(sc->GetLearningRate().value());
  }
  EXPECT_EQ(straight, resumed);
  EXPECT_EQ(lrs_straight, lrs_resumed);
}

// ONNX Runtime's LinearLRScheduler test: initial lr 1e-3, 100 total steps, warmup 70, resumed at step 51.
TEST_F(MlpFixtureTest, LinearSchedulerResumedAtStep51) {
  state_.optimizer_groups["group0"].step = 51;
  state_.optimizer_groups["group0"].initial_learning_rate = 1e-3f;
  auto s = Make(&state_);
  LrSchedule linear;
  linear.warmup_steps = 70;
  linear.total_steps = 100;
  ASSERT_TRUE(s->RegisterScheduler(linear, 1e-3f).ok());
  ASSERT_TRUE(s->SchedulerStep().ok());
  const std::map<int64_t, double> expected = {{51, 7.285714e-4}, {69, 9.857143e-4}, {70, 1.0e-3}, {71, 9.666667e-4},
                                              {99, 3.3333e-5}};
  for (int64_t step = 51; step < 100; ++step) {
    EXPECT_EQ(s->optimizer()->step(), step);
    auto it = expected.find(step);
    if (it != expected.end()) {
      EXPECT_NEAR(s->GetLearningRate().value(), it->second, 1e-9) << "step " << step;
    }
    Step(*s, static_cast<int>(step));
    ASSERT_TRUE(s->SchedulerStep().ok());
  }
}

// The model exported after 10 steps gives the logits that ONNX Runtime (onnxruntime-node) computed for
// the same export (tests/data/ort_mlp/export_reference.txt, from tools/ort_reference/check_export.sh).
TEST_F(MlpFixtureTest, ExportedModelMatchesOnnxRuntimeInference) {
  auto s = Make(&state_);
  for (int step = 0; step < 10; ++step) Step(*s, step);
  std::string path = ::testing::TempDir() + "/mlp_inference.onnx";
  ASSERT_TRUE(s->ExportModelForInferencing(path, {"logits"}).ok());
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->graph.inputs.size(), 1u);
  auto ex = Executor::Create(m.value(), cpu_.get()).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(ex->Run({{"input", testing::SyntheticFloats({8, 6}, 10)}}, {"logits"}, &out).ok());
  std::ifstream f(kDir + "/export_reference.txt");
  std::vector<double> ort;
  std::string line;
  while (std::getline(f, line)) if (!line.empty() && line[0] != '#') ort.push_back(std::stod(line));
  ASSERT_EQ(ort.size(), static_cast<size_t>(out[0].NumElements()));
  double worst = 0;
  for (size_t i = 0; i < ort.size(); ++i) {
    double rel = std::abs(out[0].data<float>()[i] - ort[i]) / std::max(std::abs(ort[i]), 1e-3);
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-5) << i;
  }
  std::printf("[export-parity] exported logits vs onnxruntime-node: largest relative difference %.3g\n", worst);
}

TEST_F(MlpFixtureTest, OptimizerSignatureIsChecked) {
  Model opt = LoadModel(kDir + "/optimizer_model.onnx").value();
  std::swap(opt.graph.inputs[2], opt.graph.inputs[3]);
  std::string bytes;
  ModelToProto(opt).SerializeToString(&bytes);
  auto s = TrainingSession::Create({{cpu_.get()}}, &state_, ModelSource::FromPath(kDir + "/training_model.onnx"), {},
                                   ModelSource::FromBytes(bytes));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("expected [learning_rate, step, params, gradients"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace ontrain
