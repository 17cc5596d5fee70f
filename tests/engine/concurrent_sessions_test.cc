// The thread-safety contract of engine/training_session.h, tested: two sessions, each with its own
// checkpoint state and CPU provider (two intra-op threads each), or both on one shared provider, train
// concurrently in two threads and end with exactly the parameters they reach when run one after the other. Run under --config=tsan as well
// (docs/reliability.md), where any data race between the sessions (shared registries, the host allocator,
// model loading, the kernels' static tables) is an error.
#include <cmath>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

// Trains a fresh session from `dir` for 8 steps on data drawn from `seed`; returns every parameter. The
// session gets its own CPU provider, or `shared` when given.
std::vector<float> Train(const std::string& dir, int seed, IExecutionProvider* shared = nullptr) {
  auto own = CpuExecutionProvider::Create({2}).value();
  IExecutionProvider* cpu = shared ? shared : own.get();
  CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
  auto s = TrainingSession::Create({{cpu}}, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                   ModelSource::FromPath(dir + "/eval_model.onnx"),
                                   ModelSource::FromPath(dir + "/optimizer_model.onnx"));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  const int64_t batch = 8;
  std::vector<float> x(batch * 16 * 16);
  std::vector<int64_t> labels(batch);
  for (int step = 0; step < 8; ++step) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.11 * i + seed + 0.7 * step));
    for (int64_t i = 0; i < batch; ++i) labels[i] = (i + seed + step) % 10;
    std::vector<Tensor> out;
    EXPECT_TRUE(s.value()->TrainStep({Tensor::FromVector(x, {batch, 1, 16, 16}), Tensor::FromVector(labels, {batch})}, &out).ok());
    EXPECT_TRUE(s.value()->OptimizerStep().ok());
    s.value()->LazyResetGrad();
    EXPECT_TRUE(s.value()->EvalStep({Tensor::FromVector(x, {batch, 1, 16, 16}), Tensor::FromVector(labels, {batch})}, &out).ok());
  }
  std::vector<float> params;
  for (const auto& [name, p] : state.parameters) {
    params.insert(params.end(), p.data.data<float>(), p.data.data<float>() + p.data.NumElements());
  }
  return params;
}

TEST(ConcurrentSessionsTest, TwoSessionsInTwoThreadsMatchSequentialRuns) {
  auto a = GenerateArtifacts(MakeCnnClassifier(16, 10, 9), ArtifactOptions());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::string dir = ::testing::TempDir() + "/concurrent_sessions";
  ASSERT_TRUE(WriteArtifacts(a.value(), dir).ok());
  std::vector<float> first = Train(dir, 1), second = Train(dir, 2);
  ASSERT_FALSE(first.empty());
  ASSERT_NE(first, second) << "the two runs must differ for the comparison to mean anything";
  for (int round = 0; round < 3; ++round) {
    std::vector<float> c1, c2;
    std::thread t1([&] { c1 = Train(dir, 1); });
    std::thread t2([&] { c2 = Train(dir, 2); });
    t1.join();
    t2.join();
    EXPECT_EQ(c1, first) << "round " << round;
    EXPECT_EQ(c2, second) << "round " << round;
  }
  // One provider shared by both sessions: its thread pool serves one ParallelFor at a time and runs a
  // concurrent caller's loop inline, which changes no result (blocks are fixed before any thread runs).
  auto shared = CpuExecutionProvider::Create({2}).value();
  std::vector<float> c1, c2;
  std::thread t1([&] { c1 = Train(dir, 1, shared.get()); });
  std::thread t2([&] { c2 = Train(dir, 2, shared.get()); });
  t1.join();
  t2.join();
  EXPECT_EQ(c1, first) << "shared provider";
  EXPECT_EQ(c2, second) << "shared provider";
}

}  // namespace
}  // namespace ontrain
