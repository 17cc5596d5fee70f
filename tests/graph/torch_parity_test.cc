// ontrain's generated artifacts against PyTorch (tests/data/torch, from tools/make_torch_fixtures.py): for
// an MLP, a CNN, a pre-LayerNorm transformer block (LayerNorm decomposed, GELU through Erf, as PyTorch
// exports them; trained with the generator's fusions of both, and without) and a model with BatchNormalization (training mode: batch statistics) and Dropout (ratio 0),
// the gradients at initialisation match within 1e-4 (relative to each tensor's largest entry) and the
// losses of 10 AdamW steps (PyTorch semantics: adam_mode 0) within 1e-4 relative; the eval model's logits
// match PyTorch's eval mode at initialisation and after the 10 steps, and BatchNorm's running statistics
// after the 10 steps match PyTorch's (momentum update with the unbiased batch variance).
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

struct Reference {
  std::map<std::string, std::pair<Shape, std::vector<double>>> tensors;
  std::vector<double> losses;
};

Reference Read(const std::string& path) {
  Reference r;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::string name, dims;
    ss >> name >> dims;
    std::vector<double> v;
    double x;
    while (ss >> x) v.push_back(x);
    if (name == "losses") {
      r.losses = v;
      continue;
    }
    Shape s;
    std::istringstream ds(dims);
    std::string d;
    while (std::getline(ds, d, ',')) s.push_back(std::stoll(d));
    r.tensors[name] = {s, v};
  }
  return r;
}

class TorchParityTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TorchParityTest, GradientsAndAdamWLossesMatchPyTorch) {
  // "NAME:unfused": the same model with the training model's LayerNorm and GELU fusions off.
  const std::string name = GetParam().substr(0, GetParam().find(':'));
  const bool unfused = GetParam().find(":unfused") != std::string::npos;
  const std::string dir = "tests/data/torch/" + name;
  Reference ref = Read(dir + "/reference.txt");
  ASSERT_EQ(ref.losses.size(), 10u);
  auto forward = LoadModel(dir + "/forward.onnx");
  ASSERT_TRUE(forward.ok()) << forward.status().ToString();
  ArtifactOptions o;
  o.adamw = {0.9f, 0.999f, 1e-8f, 0.01f, 0, true};  // torch.optim.AdamW
  o.extra_outputs = {"logits"};
  o.fuse = !unfused;
  auto artifacts = GenerateArtifacts(forward.value(), o);
  ASSERT_TRUE(artifacts.ok()) << artifacts.status().ToString();
  // Without flags, exactly PyTorch's parameters are trainable (not, e.g., a -inf attention mask buffer).
  std::set<std::string> torch_params, trainable;
  for (const auto& [key, tv] : ref.tensors) {
    if (key.rfind("grad:", 0) == 0) torch_params.insert(key.substr(5));
  }
  for (const auto& [pname, p] : artifacts->checkpoint.parameters) {
    if (p.requires_grad) trainable.insert(pname);
  }
  EXPECT_EQ(trainable, torch_params);
  if (name == "transformer") {
    EXPECT_EQ(artifacts->fused.layer_norms, unfused ? 0 : 2);
    EXPECT_EQ(artifacts->fused.gelus, unfused ? 0 : 1);
  }
  if (name == "encoder_layer") {  // nn.MultiheadAttention's output projection and the feed-forward Linears
    EXPECT_EQ(artifacts->fused.matmul_transposes, unfused ? 0 : 3);
  }
  std::string out = ::testing::TempDir() + "/torch_" + name + (unfused ? "_unfused" : "");
  ASSERT_TRUE(WriteArtifacts(artifacts.value(), out).ok());
  auto cpu = CpuExecutionProvider::Create({}).value();
  CheckpointState state = LoadCheckpoint(out + "/checkpoint").value();
  auto s = TrainingSession::Create({{cpu.get()}}, &state, ModelSource::FromPath(out + "/training_model.onnx"),
                                   ModelSource::FromPath(out + "/eval_model.onnx"),
                                   ModelSource::FromPath(out + "/optimizer_model.onnx"));
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_TRUE(s.value()->SetLearningRate(1e-2f).ok());
  const auto& [xs, xv] = ref.tensors.at("input");
  std::vector<float> xf(xv.begin(), xv.end());
  std::vector<int64_t> lv(ref.tensors.at("labels").second.begin(), ref.tensors.at("labels").second.end());
  std::vector<Tensor> batch = {Tensor::FromVector(xf, xs), Tensor::FromVector(lv, ref.tensors.at("labels").first)};
  // The eval model (Dropout off, BatchNorm on running statistics) against PyTorch's eval mode, before training.
  std::vector<Tensor> eval_out;
  Status evaluated = s.value()->EvalStep(batch, &eval_out);
  ASSERT_TRUE(evaluated.ok()) << evaluated.ToString();
  const auto& expected_logits = ref.tensors.at("eval_logits").second;
  ASSERT_EQ(static_cast<size_t>(eval_out[1].NumElements()), expected_logits.size());
  double worst_eval = 0;
  for (size_t i = 0; i < expected_logits.size(); ++i) {
    double rel = std::abs(eval_out[1].data<float>()[i] - expected_logits[i]) / std::max(1e-3, std::abs(expected_logits[i]));
    worst_eval = std::max(worst_eval, rel);
  }
  EXPECT_LE(worst_eval, 1e-4);
  double worst_grad = 0, worst_loss = 0;
  for (int step = 0; step < 10; ++step) {
    std::vector<Tensor> outs;
    ASSERT_TRUE(s.value()->TrainStep(batch, &outs).ok());
    if (step == 0) {
      int checked = 0;
      for (const auto& [name, tv] : ref.tensors) {
        if (name.rfind("grad:", 0) != 0) continue;
        std::string param = name.substr(5);
        const Tensor* g = s.value()->gradient(param);
        ASSERT_NE(g, nullptr) << "no gradient for " << param;
        ASSERT_EQ(g->shape(), tv.first) << param;
        double scale = 0, err = 0, ours = 0;
        for (double v : tv.second) scale = std::max(scale, std::abs(v));
        for (size_t i = 0; i < tv.second.size(); ++i) {
          err = std::max(err, std::abs(g->data<float>()[i] - tv.second[i]));
          ours = std::max(ours, static_cast<double>(std::abs(g->data<float>()[i])));
        }
        if (scale < 1e-6) {  // zero in exact arithmetic (a bias before BatchNormalization): rounding noise
          EXPECT_LT(ours, 1e-6) << param;
          continue;
        }
        worst_grad = std::max(worst_grad, err / scale);  // relative to the tensor's largest entry
        EXPECT_LE(err / scale, 1e-4) << param;
        checked++;
      }
      EXPECT_GT(checked, 0);
    }
    double loss = outs[0].data<float>()[0];
    double rel = std::abs(loss - ref.losses[step]) / std::abs(ref.losses[step]);
    worst_loss = std::max(worst_loss, rel);
    EXPECT_LE(rel, 1e-4) << "step " << step << ": ontrain " << loss << ", PyTorch " << ref.losses[step];
    ASSERT_TRUE(s.value()->OptimizerStep().ok());
    s.value()->LazyResetGrad();
  }
  // After the 10 steps: BatchNorm's running statistics (PyTorch's update: momentum, unbiased variance)
  // live in the checkpoint state, and the eval model normalises with them.
  double worst_stat = 0;
  int stats = 0;
  for (const auto& [name, tv] : ref.tensors) {
    if (name.rfind("running:", 0) != 0) continue;
    const Parameter* p = state.FindParameter(name.substr(8));
    ASSERT_NE(p, nullptr) << name.substr(8) << " is not a checkpoint parameter";
    EXPECT_FALSE(p->requires_grad) << name;
    ASSERT_EQ(p->data.shape(), tv.first) << name;
    for (size_t i = 0; i < tv.second.size(); ++i) {
      double rel = std::abs(p->data.data<float>()[i] - tv.second[i]) / std::max(1e-3, std::abs(tv.second[i]));
      worst_stat = std::max(worst_stat, rel);
    }
    stats++;
  }
  EXPECT_LE(worst_stat, 1e-4);
  // The models with BatchNorm: running mean and variance per layer.
  const int bn_layers = GetParam() == "bn_dropout" || GetParam() == "unet" ? 1 : GetParam() == "densenet" ? 10 : 0;
  EXPECT_EQ(stats, 2 * bn_layers);
  ASSERT_TRUE(s.value()->EvalStep(batch, &eval_out).ok());
  const auto& trained_logits = ref.tensors.at("trained_eval_logits").second;
  ASSERT_EQ(static_cast<size_t>(eval_out[1].NumElements()), trained_logits.size());
  // Relative to the largest logit: ten Adam steps turn rounding-level gradient differences of parameters
  // whose gradients are near zero into steps of up to lr, so single small logits drift further.
  double worst_trained = 0, logit_scale = 0;
  for (double v : trained_logits) logit_scale = std::max(logit_scale, std::abs(v));
  for (size_t i = 0; i < trained_logits.size(); ++i) {
    worst_trained = std::max(worst_trained, std::abs(eval_out[1].data<float>()[i] - trained_logits[i]) / logit_scale);
  }
  EXPECT_LE(worst_trained, 1e-4);
  std::printf("[torch-parity] %s: gradients %.3g, 10 AdamW losses %.3g, eval logits %.3g before and %.3g after "
              "training, running statistics %.3g (largest relative differences)\n", GetParam().c_str(), worst_grad,
              worst_loss, worst_eval, worst_trained, worst_stat);
}

INSTANTIATE_TEST_SUITE_P(Models, TorchParityTest, ::testing::Values("mlp", "cnn", "transformer", "transformer:unfused",
                                                                "bn_dropout", "encoder_layer", "encoder_layer:unfused",
                                                                "pad_pool", "unet", "unet_interp", "causal_mask", "lstm", "gru", "rnn",
                                                                "einsum_attention", "densenet"));

}  // namespace
}  // namespace ontrain
