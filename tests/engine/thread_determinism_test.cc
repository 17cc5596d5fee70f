// Training gives the same bits at one and at two threads, and with the pool tuner switching the pool on and
// off between steps (engine/pool_tuner.h: from the fifth step its trial turns the pool off and on every
// three steps): the built-in CNN (large enough that the pool splits its convolutions, GEMMs and the AdamW
// update across threads) trained for 20 steps by TrainingSession, every parameter compared exactly. It
// guards the property end to end; it does not reproduce the one case seen so far (GCC's FMA contraction in
// AdamW changed a ResNet's results with the thread count, docs/notes.md: with that file compiled with
// contraction again, this model still matches).
#include <cmath>
#include <cstring>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

std::vector<std::vector<float>> Train(int threads, bool tune_pool, const std::string& dir) {
  CpuProviderOptions o;
  o.intra_op_threads = threads;
  o.tune_pool = tune_pool;
  auto cpu = CpuExecutionProvider::Create(o).value();
  CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
  auto s = TrainingSession::Create({{cpu.get()}}, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                   ModelSource::FromPath(dir + "/eval_model.onnx"),
                                   ModelSource::FromPath(dir + "/optimizer_model.onnx"));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  const int64_t batch = 16;
  std::vector<float> x(batch * 28 * 28);
  std::vector<int64_t> labels(batch);
  for (int step = 0; step < 20; ++step) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step));
    for (int64_t i = 0; i < batch; ++i) labels[i] = (7 * i + 3 * step) % 10;
    std::vector<Tensor> out;
    EXPECT_TRUE(s.value()->TrainStep({Tensor::FromVector(x, {batch, 1, 28, 28}), Tensor::FromVector(labels, {batch})}, &out).ok());
    EXPECT_TRUE(s.value()->OptimizerStep().ok());
    s.value()->LazyResetGrad();
  }
  std::vector<std::vector<float>> params;
  for (const auto& [name, p] : state.parameters) {
    params.emplace_back(p.data.data<float>(), p.data.data<float>() + p.data.NumElements());
  }
  return params;
}

TEST(ThreadDeterminismTest, TrainingIsBitIdenticalAtOneAndTwoThreads) {
  ArtifactOptions options;
  options.adamw = {0.9f, 0.999f, 1e-8f, 0.01f, 0, true};  // PyTorch's AdamW (adam_mode 0), with weight decay
  auto a = GenerateArtifacts(MakeCnnClassifier(28, 10, 3), options);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::string dir = ::testing::TempDir() + "/thread_determinism";
  ASSERT_TRUE(WriteArtifacts(a.value(), dir).ok());
  size_t elements = 0;
  for (const auto& [name, p] : a->checkpoint.parameters) elements += p.data.NumElements();
  ASSERT_GT(elements, 200000u) << "too small for the pool to split the optimizer update";
  // Two threads with the pool always used, and with the pool tuner switching it on and off between steps.
  std::vector<std::vector<float>> one = Train(1, false, dir), two = Train(2, false, dir), tuned = Train(2, true, dir);
  ASSERT_FALSE(one.empty());
  for (const auto* other : {&two, &tuned}) {
    ASSERT_EQ(one.size(), other->size());
    for (size_t k = 0; k < one.size(); ++k) {
      ASSERT_EQ(one[k].size(), (*other)[k].size());
      EXPECT_EQ(std::memcmp(one[k].data(), (*other)[k].data(), one[k].size() * sizeof(float)), 0)
          << "parameter " << k << (other == &tuned ? " (tuned pool)" : " (pool)");
    }
  }
}

}  // namespace
}  // namespace ontrain
