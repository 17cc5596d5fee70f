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

struct InputSpec {
  std::string name, kind;  // kind: float, target, int32, int64
  Shape shape;
  int classes = 0;
};

struct SetSpec {
  std::string name;
  std::vector<InputSpec> inputs;
  std::vector<std::string> zero_dropout;  // initializers set to 0 in both engines
  std::string local_dir;                  // in the repository (runfiles), not in ../shared
  std::string generate;                   // made by ontrain's generator from this built-in model
  std::string model;                      // made by ontrain's generator from this forward model (repository)
};

// Mirrors tools/ort_reference/sets.json.
const std::vector<SetSpec>& Sets() {
  static const auto* sets = new std::vector<SetSpec>{
      {"ort-testdata-mlp", {{"input-0", "float", {4, 784}}, {"labels", "int32", {4}, 10}}, {}},
      {"carzh-web-mnist", {{"input", "float", {4, 784}}, {"labels", "int64", {4}, 10}}, {}},
      {"srij-lora", {{"input", "float", {4, 10}}, {"target", "target", {4, 2}}}, {}},
      {"srij-transformer-lora", {{"input", "float", {4, 32}}, {"labels", "int64", {4}, 32}},
       {"/dropout/Constant_output_0"}},
      {"seizureguard-cnn1d", {{"input", "float", {2, 18, 1024}}, {"labels", "int64", {2}, 2}}, {}},
      {"ort_mlp", {{"input", "float", {8, 6}}, {"labels", "int64", {8}, 3}}, {}, "tests/data/ort_mlp"},
      {"gen-mlp", {{"input", "float", {4, 784}}, {"labels", "int64", {4}, 10}}, {}, "", "mlp"},
      {"gen-cnn", {{"input", "float", {2, 1, 28, 28}}, {"labels", "int64", {2}, 10}}, {}, "", "cnn"},
      {"gen-bn", {{"input", "float", {8, 3, 6, 6}}, {"labels", "int64", {8}, 5}}, {}, "", "",
       "tests/data/torch/bn_dropout/forward.onnx"},
      {"gen-encoder", {{"input", "float", {4, 6, 16}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/encoder_layer/forward.onnx"},
      {"gen-padpool", {{"input", "float", {4, 2, 16}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/pad_pool/forward.onnx"},
      {"gen-unet", {{"input", "float", {2, 1, 8, 8}}, {"labels", "int64", {2, 8, 8}, 5}}, {}, "", "",
       "tests/data/torch/unet/forward.onnx"},
  };
  return *sets;
}

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

// Sets the named initializers to zero (those the model has; `required` ones must exist).
StatusOr<ModelSource> PatchedModel(const std::string& path, const std::vector<std::string>& zero, bool required) {
  if (zero.empty()) return ModelSource::FromPath(path);
  ONT_ASSIGN_OR_RETURN(Model m, LoadModel(path));
  for (const std::string& name : zero) {
    auto it = m.graph.initializers.find(name);
    if (it == m.graph.initializers.end()) {
      if (required) return NotFound("initializer ", name, " in ", path);
      continue;
    }
    Tensor z = it->second.Clone();
    std::memset(z.raw_data(), 0, z.SizeInBytes());
    it->second = z;
  }
  std::string bytes;
  ModelToProto(m).SerializeToString(&bytes);
  return ModelSource::FromBytes(bytes);
}

std::vector<Tensor> MakeBatch(const SetSpec& set, int step) {
  std::vector<Tensor> batch;
  for (const InputSpec& in : set.inputs) {
    if (in.kind == "float") batch.push_back(testing::SyntheticFloats(in.shape, step));
    else if (in.kind == "target") batch.push_back(testing::SyntheticTargets(in.shape, step));
    else batch.push_back(testing::SyntheticLabels(in.shape, step, in.classes, in.kind == "int32" ? DType::kInt32 : DType::kInt64));
  }
  return batch;
}

class OrtParityTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OrtParityTest, LossesMatchOnnxRuntime) {
  const SetSpec& set = Sets()[GetParam()];
  std::string why;
  std::string dir = set.local_dir.empty() ? testing::OrtArtifactDir(set.name, &why) : set.local_dir;
  if (!set.generate.empty() || !set.model.empty()) {  // what `ontrain generate --builtin/--model` writes
    dir = ::testing::TempDir() + "/" + set.name;
    Model forward;
    if (!set.model.empty()) {
      auto loaded = LoadModel(set.model);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      forward = loaded.value();
    } else {
      forward = set.generate == "mlp" ? MakeMlpClassifier(784, {256}, 10, 0) : MakeCnnClassifier(28, 10, 0);
    }
    auto artifacts = GenerateArtifacts(forward, ArtifactOptions());
    ASSERT_TRUE(artifacts.ok()) << artifacts.status().ToString();
    ASSERT_TRUE(WriteArtifacts(artifacts.value(), dir).ok());
  }
  if (dir.empty()) GTEST_SKIP() << why;
  auto reference = ReadReference();
  const Reference& ref = reference[set.name];
  ASSERT_EQ(ref.losses.size(), static_cast<size_t>(kSteps)) << "no reference losses for " << set.name;
  ASSERT_FALSE(std::isnan(ref.eval_loss)) << "no reference eval loss for " << set.name;
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto state = LoadCheckpoint(dir + "/checkpoint");
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  auto train = PatchedModel(dir + "/training_model.onnx", set.zero_dropout, true);
  auto eval = PatchedModel(dir + "/eval_model.onnx", set.zero_dropout, false);  // eval runs Dropout in inference mode
  ASSERT_TRUE(train.ok()) << train.status().ToString();
  ASSERT_TRUE(eval.ok()) << eval.status().ToString();
  auto session = TrainingSession::Create({{cpu.get()}}, &state.value(), train.value(), eval.value(),
                                         ModelSource::FromPath(dir + "/optimizer_model.onnx"));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  TrainingSession& s = *session.value();
  std::vector<std::string> names;
  for (const InputSpec& in : set.inputs) names.push_back(in.name);
  EXPECT_EQ(s.training_input_names(), names);
  double worst = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Tensor> out;
    ASSERT_TRUE(s.TrainStep(MakeBatch(set, step), &out).ok());
    ASSERT_TRUE(s.OptimizerStep().ok());
    s.LazyResetGrad();
    double ours = out[0].data<float>()[0], theirs = ref.losses[step];
    double rel = std::abs(ours - theirs) / std::max(1e-12, std::abs(theirs));
    worst = std::max(worst, rel);
    EXPECT_LE(rel, 1e-5) << "step " << step << ": ontrain " << ours << ", ONNX Runtime " << theirs;
  }
  std::vector<Tensor> eval_out;
  ASSERT_TRUE(s.EvalStep(MakeBatch(set, kSteps), &eval_out).ok());
  // The eval model after training sees the trained parameters and, for BatchNormalization, the running
  // statistics that both engines updated in place during the training steps.
  double eval_rel = std::abs(eval_out[0].data<float>()[0] - ref.eval_loss) / std::max(1e-12, std::abs(ref.eval_loss));
  EXPECT_LE(eval_rel, 1e-5) << "eval loss after training: ontrain " << eval_out[0].data<float>()[0]
                            << ", ONNX Runtime " << ref.eval_loss;
  std::printf("[ort-parity] %s: %d AdamW steps, largest relative loss difference vs ONNX Runtime %.3g, eval loss "
              "after training %.3g\n", set.name.c_str(), kSteps, worst, eval_rel);
}

INSTANTIATE_TEST_SUITE_P(Sets, OrtParityTest, ::testing::Range<size_t>(0, 12),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string n = Sets()[info.param].name;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ontrain
