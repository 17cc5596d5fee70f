// Every ONNX Runtime artifact set of ../shared/ort-artifacts (plus the MLP that tools/make_mlp_fixture.py
// writes in ONNX Runtime's conventions, and the artifacts ontrain's own generator makes for its built-in MLP
// and CNN, for a BatchNormalization model, for torch.nn.TransformerEncoderLayer, for F.pad + max_pool1d and for a
// U-Net with symbolic height and width) trains in ontrain, and its 20 AdamW losses and the eval loss
// after them match those ONNX Runtime 1.19.2's own training engine produced on the same batches
// (tests/data/ort_reference_losses.txt, made by tools/ort_reference/make_reference.sh).
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/ort_artifacts.h"

namespace ontrain {
namespace {

constexpr int kSteps = 20;

struct Reference {
  std::vector<double> losses;  // per training step
  double eval_loss = NAN;      // the eval model after training, on the next batch
};

std::map<std::string, Reference> ReadReference() {
  std::map<std::string, Reference> out;
  std::ifstream f("tests/data/ort_reference_losses.txt");
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string set, step;
    double loss;
    ss >> set >> step >> loss;
    if (step == "eval") out[set].eval_loss = loss;
    else out[set].losses.push_back(loss);
  }
  return out;
}

class OrtParityTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OrtParityTest, LossesMatchOnnxRuntime) {
  const testing::ArtifactSet& set = testing::ReferenceSets()[GetParam()];
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto reference = ReadReference();
  const Reference& ref = reference[set.name];
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps)) << "no reference losses for " << set.name;
  ASSERT_FALSE(std::isnan(ref.eval_loss)) << "no reference eval loss for " << set.name;
  auto cpu = CpuExecutionProvider::Create({}).value();
  testing::LoadedSet& l = loaded.value();
  auto session = TrainingSession::Create({{cpu.get()}}, &l.state, l.train, l.eval, l.optimizer);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  TrainingSession& s = *session.value();
  std::vector<std::string> names;
  for (const testing::InputSpec& in : set.inputs) names.push_back(in.name);
  EXPECT_EQ(s.training_input_names(), names);
  double worst = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Tensor> out;
    ASSERT_TRUE(s.TrainStep(testing::MakeBatch(set, step), &out).ok());
    ASSERT_TRUE(s.OptimizerStep().ok());
    s.LazyResetGrad();
    double ours = out[0].data<float>()[0], theirs = ref.losses[step];
    double rel = std::abs(ours - theirs) / std::max(1e-12, std::abs(theirs));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-5) << "step " << step << ": ontrain " << ours << ", ONNX Runtime " << theirs;
  }
  std::vector<Tensor> eval_out;
  ASSERT_TRUE(s.EvalStep(testing::MakeBatch(set, kSteps), &eval_out).ok());
  // The eval model after training sees the trained parameters and, for BatchNormalization, the running
  // statistics that both engines updated in place during the training steps.
  double eval_rel = std::abs(eval_out[0].data<float>()[0] - ref.eval_loss) / std::max(1e-12, std::abs(ref.eval_loss));
  EXPECT_LE(eval_rel, 1e-5) << "eval loss after training: ontrain " << eval_out[0].data<float>()[0]
                            << ", ONNX Runtime " << ref.eval_loss;
  std::printf("[ort-parity] %s: %d optimizer steps, largest relative loss difference vs ONNX Runtime %.3g, eval loss "
              "after training %.3g\n", set.name.c_str(), kSteps, worst, eval_rel);
}

INSTANTIATE_TEST_SUITE_P(Sets, OrtParityTest, ::testing::Range<size_t>(0, testing::ReferenceSets().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string n = testing::ReferenceSets()[info.param].name;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ontrain
