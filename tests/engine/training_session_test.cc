// TrainingSession on ONNX Runtime's own test artifacts (ORT's MNIST MLP: fc1 [500,784], fc2 [10,500],
// int32 labels), checking the behaviours ONNX Runtime's tests check.
#include "engine/training_session.h"

#include <cmath>
#include <fstream>

#include "checkpoint/checkpoint_io.h"
#include "gmock/gmock.h"
#include "graph/model_io.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/ort_artifacts.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

class OrtMlpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    dir_ = testing::OrtArtifactDir("ort-testdata-mlp", &why);
    if (dir_.empty()) GTEST_SKIP() << why;
    cpu_ = CpuExecutionProvider::Create({}).value();
    auto st = LoadCheckpoint(dir_ + "/checkpoint");
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    state_ = std::move(st).value();
  }
  std::unique_ptr<TrainingSession> Make(bool eval = true, bool optimizer = true, CheckpointState* state = nullptr) {
    auto s = TrainingSession::Create({{cpu_.get()}}, state ? state : &state_,
                                     ModelSource::FromPath(dir_ + "/training_model.onnx"),
                                     eval ? ModelSource::FromPath(dir_ + "/eval_model.onnx") : ModelSource(),
                                     optimizer ? ModelSource::FromPath(dir_ + "/optimizer_model.onnx") : ModelSource());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  std::vector<Tensor> Batch(int step = 0) {
    return {testing::SyntheticFloats({2, 784}, step), Tensor::FromVector<int32_t>({1, 1}, {2})};
  }
  std::string dir_;
  std::unique_ptr<CpuExecutionProvider> cpu_;
  CheckpointState state_;
};

TEST_F(OrtMlpTest, NamesAndParameterSize) {
  auto s = Make();
  EXPECT_EQ(s->training_input_names(), (std::vector<std::string>{"input-0", "labels"}));
  EXPECT_EQ(s->training_output_names(), std::vector<std::string>{"onnx::loss::21273"});
  EXPECT_EQ(s->eval_input_names(), (std::vector<std::string>{"input-0", "labels"}));
  EXPECT_EQ(s->GetParametersSize(true).value(), 397510u);
  EXPECT_EQ(s->GetParametersSize(false).value(), 397510u);
}

TEST_F(OrtMlpTest, GradientsAccumulateExactly) {
  auto s = Make();
  std::vector<Tensor> out;
  ASSERT_TRUE(s->TrainStep(Batch(), &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), Shape{});
  std::vector<float> g1 = testing::ToVector(*s->gradient("fc2.weight"));
  for (int k = 2; k <= 4; ++k) {
    ASSERT_TRUE(s->TrainStep(Batch(), &out).ok());
    std::vector<float> gk = testing::ToVector(*s->gradient("fc2.weight"));
    for (size_t i = 0; i < g1.size(); i += 37) ASSERT_EQ(gk[i], g1[i] * k) << "step " << k << " element " << i;
  }
  s->LazyResetGrad();
  ASSERT_TRUE(s->TrainStep(Batch(), &out).ok());
  EXPECT_EQ(testing::ToVector(*s->gradient("fc2.weight")), g1);
}

TEST_F(OrtMlpTest, OptimizerStepMovesMomentsAndParameters) {
  auto s = Make();
  std::vector<float> w0 = testing::ToVector(state_.parameters.at("fc2.weight").data);
  const Tensor& m0 = state_.optimizer_groups.at("group0").param_states.at("fc2.weight").momentums.at("momentum0");
  for (float v : testing::ToVector(m0)) ASSERT_EQ(v, 0.0f);
  std::vector<Tensor> out;
  ASSERT_TRUE(s->TrainStep(Batch(), &out).ok());
  float loss1 = out[0].data<float>()[0];
  ASSERT_TRUE(s->OptimizerStep().ok());
  EXPECT_EQ(s->optimizer()->step(), 1);
  std::vector<float> g = testing::ToVector(*s->gradient("fc2.weight"));
  std::vector<float> m = testing::ToVector(m0);
  std::vector<float> w1 = testing::ToVector(state_.parameters.at("fc2.weight").data);
  int changed = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    if (g[i] != 0) {
      EXPECT_NE(m[i], 0.0f);
    }
    if (g[i] != 0 && m[i] != 0) changed += w1[i] != w0[i];
  }
  EXPECT_GT(changed, 0);
  s->LazyResetGrad();
  ASSERT_TRUE(s->TrainStep(Batch(), &out).ok());
  EXPECT_LT(out[0].data<float>()[0], loss1) << "one AdamW step on the same batch lowers its loss";
}

TEST_F(OrtMlpTest, LinearSchedulerAndLearningRate) {
  auto s = Make();
  EXPECT_EQ(s->GetLearningRate().value(), 0.001f);  // ONNX Runtime's default
  ASSERT_TRUE(s->SetLearningRate(0.245f).ok());
  EXPECT_EQ(s->GetLearningRate().value(), 0.245f);
  EXPECT_FALSE(s->SchedulerStep().ok());
  LrSchedule linear;
  linear.warmup_steps = 2;
  linear.total_steps = 4;
  ASSERT_TRUE(s->RegisterScheduler(linear, 0.1f).ok());
  EXPECT_EQ(s->GetLearningRate().value(), 0.1f);
  std::vector<Tensor> out;
  ASSERT_TRUE(s->TrainStep(Batch(), &out).ok());
  const float expected[] = {0.05f, 0.1f, 0.05f, 0.0f};
  for (float e : expected) {
    ASSERT_TRUE(s->OptimizerStep().ok());
    ASSERT_TRUE(s->SchedulerStep().ok());
    EXPECT_FLOAT_EQ(s->GetLearningRate().value(), e);
  }
}

TEST_F(OrtMlpTest, BufferRoundTripAndSizeError) {
  auto s = Make();
  std::vector<float> r(397510);
  for (size_t i = 0; i < r.size(); ++i) r[i] = std::sin(static_cast<float>(i));
  Tensor in = Tensor::FromVector(r, {397510});
  ASSERT_TRUE(s->CopyBufferToParameters(in, true).ok());
  Tensor out = Tensor::FromVector(std::vector<float>(397510, 0.0f), {397510});
  ASSERT_TRUE(s->CopyParametersToBuffer(&out, true).ok());
  EXPECT_EQ(testing::ToVector(out), r);
  // Training-graph input order: fc1.weight first.
  EXPECT_EQ(state_.parameters.at("fc1.weight").data.data<float>()[3], r[3]);
  Tensor small = Tensor::FromVector(std::vector<float>(10, 0.0f), {10});
  Status st = s->CopyParametersToBuffer(&small, true);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("expected 397510, actual 10"));
}

TEST_F(OrtMlpTest, ExportedModelHasOnlyTheInputAndRuns) {
  auto s = Make();
  std::string path = ::testing::TempDir() + "/inference.onnx";
  ASSERT_TRUE(s->ExportModelForInferencing(path, {"output-0"}).ok());
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->graph.inputs.size(), 1u);
  EXPECT_EQ(m->graph.inputs[0].name, "input-0");
  for (const Node& n : m->graph.nodes) EXPECT_NE(n.op_type, "SoftmaxCrossEntropyLoss");
  EXPECT_EQ(m->graph.initializers.size(), 4u);
  auto ex = Executor::Create(m.value(), cpu_.get()).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(ex->Run({{"input-0", testing::SyntheticFloats({2, 784}, 0)}}, {"output-0"}, &out).ok());
  EXPECT_EQ(out[0].shape(), (Shape{2, 10}));
  EXPECT_FALSE(s->ExportModelForInferencing(path, {}).ok());
  EXPECT_FALSE(s->ExportModelForInferencing(path, {"no-such-value"}).ok());
}

TEST_F(OrtMlpTest, NominalStateMatchesCompleteStateBitwise) {
  auto nominal_state = LoadCheckpoint(dir_ + "/nominal_checkpoint");
  ASSERT_TRUE(nominal_state.ok());
  CheckpointState nominal = std::move(nominal_state).value();
  ASSERT_TRUE(nominal.is_nominal);
  auto full = Make(true, true);
  auto nom = Make(true, false, &nominal);
  ASSERT_TRUE(nom);
  EXPECT_EQ(nom->GetParametersSize(false).value(), full->GetParametersSize(false).value());
  std::vector<Tensor> out;
  Status blocked = nom->TrainStep(Batch(), &out);
  ASSERT_FALSE(blocked.ok());
  EXPECT_THAT(blocked.message(), HasSubstr("nominal"));
  EXPECT_FALSE(nom->CopyBufferToParameters(Tensor::FromVector(std::vector<float>(397510), {397510}), true).ok());
  Tensor buffer = Tensor::FromVector(std::vector<float>(397510), {397510});
  ASSERT_TRUE(full->CopyParametersToBuffer(&buffer, false).ok());
  ASSERT_TRUE(nom->CopyBufferToParameters(buffer, false).ok());
  EXPECT_FALSE(nominal.is_nominal);
  for (int step = 0; step < 4; ++step) {
    std::vector<Tensor> a, b;
    ASSERT_TRUE(full->TrainStep(Batch(step), &a).ok());
    ASSERT_TRUE(nom->TrainStep(Batch(step), &b).ok());
    EXPECT_EQ(a[0].data<float>()[0], b[0].data<float>()[0]);
    EXPECT_EQ(testing::ToVector(*full->gradient("fc1.weight")), testing::ToVector(*nom->gradient("fc1.weight")));
    std::vector<Tensor> ea, eb;
    ASSERT_TRUE(full->EvalStep(Batch(step), &ea).ok());
    ASSERT_TRUE(nom->EvalStep(Batch(step), &eb).ok());
    EXPECT_EQ(ea[0].data<float>()[0], eb[0].data<float>()[0]);
  }
}

TEST_F(OrtMlpTest, ClearErrorsWithoutEvalOrOptimizer) {
  auto s = Make(false, false);
  std::vector<Tensor> out;
  Status e = s->EvalStep(Batch(), &out);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.message(), HasSubstr("eval model"));
  Status o = s->OptimizerStep();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(o.message(), HasSubstr("optimizer model"));
  EXPECT_FALSE(s->GetLearningRate().ok());
  Status n = s->TrainStep({Batch()[0]}, &out);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.message(), HasSubstr("expected 2 user inputs (input-0, labels), got 1"));
  Status d = s->TrainStep({Batch()[0], Tensor::FromVector<float>({1, 1}, {2})}, &out);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.message(), HasSubstr("labels"));
  EXPECT_FALSE(TrainingSession::Create({{cpu_.get()}}, &state_, ModelSource()).ok());
}

TEST_F(OrtMlpTest, SaveLoadResumeIsBitExact) {
  // Uninterrupted: 6 steps. Interrupted: 3 steps, save with optimizer state, reload into a new session, 3 more.
  auto run = [&](CheckpointState* st, std::unique_ptr<TrainingSession>& s, int from, int to, std::vector<float>* losses) {
    for (int step = from; step < to; ++step) {
      std::vector<Tensor> out;
      ASSERT_TRUE(s->TrainStep(Batch(step), &out).ok());
      ASSERT_TRUE(s->OptimizerStep().ok());
      s->LazyResetGrad();
      losses->push_back(out[0].data<float>()[0]);
    }
  };
  CheckpointState a = LoadCheckpoint(dir_ + "/checkpoint").value();
  auto sa = Make(true, true, &a);
  std::vector<float> straight, resumed;
  run(&a, sa, 0, 6, &straight);
  CheckpointState b = LoadCheckpoint(dir_ + "/checkpoint").value();
  auto sb = Make(true, true, &b);
  run(&b, sb, 0, 3, &resumed);
  std::string path = ::testing::TempDir() + "/resume.ckpt";
  ASSERT_TRUE(SaveCheckpoint(b, path).ok());
  CheckpointState c = LoadCheckpoint(path).value();
  EXPECT_EQ(c.optimizer_groups.at("group0").step, 3);
  auto sc = Make(true, true, &c);
  run(&c, sc, 3, 6, &resumed);
  ASSERT_EQ(straight.size(), resumed.size());
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(straight[i], resumed[i]) << "step " << i;
}

}  // namespace
}  // namespace ontrain
