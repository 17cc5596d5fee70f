// Data-parallel TrainingSession over LocalGroup (ranks as threads): two ranks training on the two halves of
// each batch must follow one session training on the whole batch (same losses, same parameters), with and
// without gradient accumulation, on the built-in MLP and CNN; creation makes every rank start from rank 0's
// parameters and refuses ranks whose checkpoints differ.
//
// Tolerance: the two runs add the same numbers in a different order (each rank's GEMMs sum over half the
// batch, then the halves are averaged), so they differ by float32 rounding, which AdamW's normalised update
// can grow over the steps: parameters agree to 2e-5 absolute after 20 steps, losses to 1e-5 relative.
#include <cmath>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "distributed/local_group.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_zoo.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

struct RunResult {
  std::vector<float> losses;                 // per TrainStep (rank 0's shard when data parallel)
  std::map<std::string, std::vector<float>> params;
  CommunicationStats stats;
  Status status;
};

std::string MakeArtifacts(const std::string& name, const Model& forward) {
  ArtifactOptions options;
  options.adamw = {0.9f, 0.999f, 1e-8f, 0.01f, 0, true};
  auto a = GenerateArtifacts(forward, options);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  const std::string dir = ::testing::TempDir() + "/data_parallel_" + name;
  EXPECT_TRUE(WriteArtifacts(a.value(), dir).ok());
  return dir;
}

// A deterministic global batch for step `step`: example i of the global batch never depends on the rank.
void GlobalBatch(int step, int64_t global, int64_t features, std::vector<float>* x, std::vector<int64_t>* y) {
  x->resize(global * features);
  y->resize(global);
  for (int64_t i = 0; i < global * features; ++i) (*x)[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step));
  for (int64_t i = 0; i < global; ++i) (*y)[i] = (7 * i + 3 * step) % 10;
}

// Trains `steps` optimizer steps of `accumulate` TrainSteps each, on rows [rank*B, (rank+1)*B) of each global
// batch of size*B. `perturb` adds to every parameter before creation (rank 0's are the ones broadcast).
RunResult Train(const std::string& dir, Shape example, int64_t per_rank, int steps, int accumulate, Communicator* comm,
               float perturb = 0, bool overlap = false) {
  RunResult r;
  auto cpu = CpuExecutionProvider::Create({1}).value();
  CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
  for (auto& [name, p] : state.parameters) {
    for (int64_t i = 0; i < p.data.NumElements(); ++i) p.data.data<float>()[i] += perturb;
  }
  TrainingSessionOptions options{{cpu.get()}};
  options.communicator = comm;
  options.bucket_bytes = 64 << 10;  // several buckets, so bucket boundaries are exercised
  if (overlap) options.gradient_accumulation_steps = accumulate;
  auto s = TrainingSession::Create(options, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                   ModelSource::FromPath(dir + "/eval_model.onnx"),
                                   ModelSource::FromPath(dir + "/optimizer_model.onnx"));
  if (!s.ok()) {
    r.status = s.status();
    return r;
  }
  const int ranks = comm ? comm->size() : 1, rank = comm ? comm->rank() : 0;
  int64_t features = ShapeNumElements(example);
  Shape input_shape = {per_rank};
  input_shape.insert(input_shape.end(), example.begin(), example.end());
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int step = 0; step < steps; ++step) {
    for (int k = 0; k < accumulate; ++k) {
      GlobalBatch(step * accumulate + k, per_rank * ranks, features, &x, &y);
      std::vector<float> xs(x.begin() + rank * per_rank * features, x.begin() + (rank + 1) * per_rank * features);
      std::vector<int64_t> ys(y.begin() + rank * per_rank, y.begin() + (rank + 1) * per_rank);
      std::vector<Tensor> out;
      r.status = s.value()->TrainStep({Tensor::FromVector(xs, input_shape), Tensor::FromVector(ys, {per_rank})}, &out);
      if (!r.status.ok()) return r;
      r.losses.push_back(out[0].data<float>()[0]);
    }
    r.status = s.value()->OptimizerStep();
    if (!r.status.ok()) return r;
    s.value()->LazyResetGrad();
  }
  r.stats = s.value()->communication_stats();
  s.value().reset();  // parameters back on the host
  for (const auto& [name, p] : state.parameters) {
    r.params[name].assign(p.data.data<float>(), p.data.data<float>() + p.data.NumElements());
  }
  return r;
}

// Two ranks on threads; returns both results.
std::vector<RunResult> RunTwoRanks(const std::string& dir, Shape example, int64_t per_rank, int steps, int accumulate,
                                   float rank1_perturb = 0, bool overlap = false) {
  LocalGroup group(2);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < 2; ++r) comms.push_back(group.Rank(r));
  std::vector<RunResult> results(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      results[r] = Train(dir, example, per_rank, steps, accumulate, comms[r].get(), r == 1 ? rank1_perturb : 0.0f,
                         overlap);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

void ExpectMatchesOneProcess(const std::string& dir, Shape example, int64_t per_rank, int steps, int accumulate) {
  RunResult one = Train(dir, example, 2 * per_rank, steps, accumulate, nullptr);
  ASSERT_TRUE(one.status.ok()) << one.status.ToString();
  std::vector<RunResult> two = RunTwoRanks(dir, example, per_rank, steps, accumulate, 0.01f);
  for (const RunResult& r : two) ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  // The global batch's loss is the mean of the two ranks' shard losses.
  ASSERT_EQ(one.losses.size(), two[0].losses.size());
  for (size_t i = 0; i < one.losses.size(); ++i) {
    float global = 0.5f * (two[0].losses[i] + two[1].losses[i]);
    EXPECT_NEAR(global, one.losses[i], 1e-5 * std::fabs(one.losses[i]) + 1e-7) << "TrainStep " << i;
  }
  double worst = 0;
  for (const auto& [name, p] : one.params) {
    const std::vector<float>& a = two[0].params.at(name);
    const std::vector<float>& b = two[1].params.at(name);
    ASSERT_EQ(a.size(), p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      ASSERT_EQ(a[i], b[i]) << name << "[" << i << "]: the ranks diverged";  // same update on every rank
      worst = std::max(worst, static_cast<double>(std::fabs(a[i] - p[i])));
    }
  }
  EXPECT_LT(worst, 2e-5) << "largest parameter difference from one process with the whole batch";
  // One average per optimizer step, in buckets of 64 KiB over the flat gradient buffer.
  EXPECT_EQ(two[0].stats.allreduces, steps);
  EXPECT_GT(two[0].stats.buckets, steps);
  EXPECT_GT(two[0].stats.bytes, 0);
  EXPECT_EQ(one.stats.allreduces, 0);
}

TEST(DataParallelTest, MlpTwoRanksMatchOneProcessWithTheWholeBatch) {
  std::string dir = MakeArtifacts("mlp", MakeMlpClassifier(784, {128}, 10, 1));
  ExpectMatchesOneProcess(dir, {784}, 16, 20, 1);
}

TEST(DataParallelTest, MlpWithGradientAccumulation) {
  std::string dir = MakeArtifacts("mlp_acc", MakeMlpClassifier(784, {128}, 10, 1));
  ExpectMatchesOneProcess(dir, {784}, 8, 10, 3);
}

TEST(DataParallelTest, CnnTwoRanksMatchOneProcessWithTheWholeBatch) {
  std::string dir = MakeArtifacts("cnn", MakeCnnClassifier(28, 10, 3));
  ExpectMatchesOneProcess(dir, {1, 28, 28}, 8, 20, 1);
}

// Averaging buckets during the last TrainStep of each window, as the backward pass finishes them, computes
// exactly what averaging after it does.
TEST(DataParallelTest, OverlappedAveragingGivesTheSameBits) {
  std::string dir = MakeArtifacts("overlap", MakeCnnClassifier(28, 10, 3));
  for (int accumulate : {1, 2}) {
    std::vector<RunResult> after = RunTwoRanks(dir, {1, 28, 28}, 4, 6, accumulate);
    std::vector<RunResult> during = RunTwoRanks(dir, {1, 28, 28}, 4, 6, accumulate, 0, true);
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(after[r].status.ok()) << after[r].status.ToString();
      ASSERT_TRUE(during[r].status.ok()) << during[r].status.ToString();
      EXPECT_EQ(after[r].losses, during[r].losses) << "accumulate " << accumulate;
      EXPECT_EQ(after[r].params, during[r].params) << "accumulate " << accumulate;
      EXPECT_EQ(during[r].stats.allreduces, 6);
      // Most buckets start before the run ends (the last ones complete with its last steps).
      EXPECT_GT(during[r].stats.overlapped, during[r].stats.buckets / 2) << during[r].stats.buckets;
      EXPECT_EQ(after[r].stats.overlapped, 0);
    }
  }
}

TEST(DataParallelTest, ATrainStepAfterTheWindowsLastIsRefused) {
  std::string dir = MakeArtifacts("overlap_misuse", MakeMlpClassifier(784, {32}, 10, 1));
  LocalGroup group(2);
  std::vector<Status> second(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto comm = group.Rank(r);
      auto cpu = CpuExecutionProvider::Create({1}).value();
      CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
      TrainingSessionOptions options{{cpu.get()}};
      options.communicator = comm.get();
      options.gradient_accumulation_steps = 1;
      auto s = TrainingSession::Create(options, &state, ModelSource::FromPath(dir + "/training_model.onnx"), {},
                                       ModelSource::FromPath(dir + "/optimizer_model.onnx"));
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      std::vector<float> x(2 * 784, 0.5f);
      std::vector<int64_t> y = {1, 2};
      std::vector<Tensor> out;
      ASSERT_TRUE(s.value()->TrainStep({Tensor::FromVector(x, {2, 784}), Tensor::FromVector(y, {2})}, &out).ok());
      second[r] = s.value()->TrainStep({Tensor::FromVector(x, {2, 784}), Tensor::FromVector(y, {2})}, &out);
      EXPECT_TRUE(s.value()->OptimizerStep().ok());  // the started averages still complete
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& st : second) {
    EXPECT_THAT(st.message(), HasSubstr("already being averaged across ranks (gradient_accumulation_steps = 1)"));
  }
}

TEST(DataParallelTest, EveryRankStartsFromRankZerosParameters) {
  std::string dir = MakeArtifacts("bcast", MakeMlpClassifier(784, {32}, 10, 1));
  std::vector<RunResult> two = RunTwoRanks(dir, {784}, 4, 0, 1, 0.5f);
  ASSERT_TRUE(two[0].status.ok() && two[1].status.ok());
  CheckpointState original = LoadCheckpoint(dir + "/checkpoint").value();
  for (const auto& [name, p] : original.parameters) {
    std::vector<float> want(p.data.data<float>(), p.data.data<float>() + p.data.NumElements());
    EXPECT_EQ(two[1].params.at(name), want) << name;
    EXPECT_EQ(two[0].params.at(name), want) << name;
  }
}

TEST(DataParallelTest, RanksWithDifferentCheckpointsAreRefusedOnEveryRank) {
  std::string a = MakeArtifacts("diff_a", MakeMlpClassifier(784, {32}, 10, 1));
  std::string b = MakeArtifacts("diff_b", MakeMlpClassifier(784, {64}, 10, 1));
  LocalGroup group(2);
  auto c0 = group.Rank(0), c1 = group.Rank(1);
  RunResult r0, r1;
  std::thread t0([&] { r0 = Train(a, {784}, 4, 1, 1, c0.get()); });
  std::thread t1([&] { r1 = Train(b, {784}, 4, 1, 1, c1.get()); });
  t0.join();
  t1.join();
  EXPECT_THAT(r1.status.message(), HasSubstr("rank 1's checkpoint has"));
  EXPECT_THAT(r1.status.message(), HasSubstr("every rank must start from the same checkpoint"));
  EXPECT_THAT(r0.status.message(), HasSubstr("another rank's checkpoint differs from rank 0's"));
}

}  // namespace
}  // namespace ontrain
