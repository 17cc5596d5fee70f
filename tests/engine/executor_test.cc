// Executor: results against a plain-loop reference, memory planning (no allocation through the provider's
// allocator after the first run at a shape, arena reuse), and thread-count independence.
#include "engine/executor.h"

#include <cmath>
#include <thread>

#include "engine/pool_tuner.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

std::vector<float> Iota(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * scale);
  return v;
}

TEST(ExecutorTest, MlpMatchesReference) {
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto ex = Executor::Create(testing::MakeMlpModel(), cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<float> x = Iota(5 * 4, 0.7f);
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run({{"x", Tensor::FromVector(x, {5, 4})}}, {"y"}, &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (Shape{5, 2}));
  std::vector<float> ref = testing::MlpReference(x, 5);
  std::vector<float> got = testing::ToVector(out[0]);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(got[i], ref[i], 1e-6f) << i;
}

TEST(ExecutorTest, NoAllocationAfterFirstRunAtSameShape) {
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto ex = Executor::Create(testing::MakeMlpModel(), cpu.get()).value();
  const AllocatorStats& stats = cpu->cpu_allocator().stats();
  Tensor x8 = Tensor::FromVector(Iota(8 * 4, 0.3f), {8, 4});
  Tensor x3 = Tensor::FromVector(Iota(3 * 4, 0.9f), {3, 4});
  std::vector<Tensor> out;
  ASSERT_TRUE(ex->Run({{"x", x8}}, {"y"}, &out).ok());  // plans batch 8
  int64_t after_first = stats.num_allocs.load();
  EXPECT_GT(after_first, 0);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(ex->Run({{"x", x8}}, {"y"}, &out).ok());
  EXPECT_EQ(stats.num_allocs.load(), after_first) << "runs at a planned shape must not allocate";
  ASSERT_TRUE(ex->Run({{"x", x3}}, {"y"}, &out).ok());  // a new shape plans again
  EXPECT_EQ(ex->num_plans(), 2u);
  int64_t after_second_shape = stats.num_allocs.load();
  ASSERT_TRUE(ex->Run({{"x", x8}}, {"y"}, &out).ok());
  ASSERT_TRUE(ex->Run({{"x", x3}}, {"y"}, &out).ok());
  EXPECT_EQ(stats.num_allocs.load(), after_second_shape);
  // Results stay right when served from the arena.
  std::vector<float> ref = testing::MlpReference(testing::ToVector(x3), 3);
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(out[0].data<float>()[i], ref[i], 1e-6f);
}

TEST(ExecutorTest, ArenaReusesBuffersAfterLastUse) {
  // A chain of 8 Relu nodes on 1 MiB tensors: at most two intermediates are alive at once, and the output
  // is kept, so the arena needs about three buffers rather than eight.
  Model m;
  m.opset_imports[""] = 17;
  const int64_t n = 256 * 1024;
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {n}));
  m.graph.outputs.push_back(TensorInfo("v8", DType::kFloat32, {n}));
  for (int i = 0; i < 8; ++i) {
    m.graph.nodes.push_back(
        MakeNode("Relu", {i == 0 ? "x" : "v" + std::to_string(i)}, {"v" + std::to_string(i + 1)}));
  }
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto ex = Executor::Create(m, cpu.get()).value();
  std::vector<Tensor> out;
  Tensor x = Tensor::FromVector(Iota(n, 0.01f), {n});
  ASSERT_TRUE(ex->Run({{"x", x}}, {"v8"}, &out).ok());
  ASSERT_TRUE(ex->Run({{"x", x}}, {"v8"}, &out).ok());
  size_t one = n * sizeof(float);
  EXPECT_LE(ex->last_arena_bytes(), 3 * one);
  EXPECT_GE(ex->last_arena_bytes(), 2 * one);
  for (int64_t i = 0; i < n; i += 997) EXPECT_EQ(out[0].data<float>()[i], std::max(0.0f, x.data<float>()[i]));
}

// Reshape, Identity, Squeeze and Unsqueeze outputs share their input's storage (no arena slot, no copy)
// unless the output is a graph output; the values read through the views are the right ones, and the arena
// keeps a viewed buffer alive for as long as its view is read.
TEST(ExecutorTest, ReshapesAreViewsOfTheirInput) {
  Model m;
  m.opset_imports[""] = 17;
  const int64_t n = 64 * 1024;
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {n}));
  m.graph.AddInitializer("shape", Tensor::FromVector<int64_t>({256, -1}, {2}));
  m.graph.AddInitializer("axes", Tensor::FromVector<int64_t>({0}, {1}));
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}, {}, "relu"),
                   MakeNode("Reshape", {"r", "shape"}, {"r2"}, {}, "reshape"),
                   MakeNode("Identity", {"r2"}, {"r3"}, {}, "identity"),
                   MakeNode("Unsqueeze", {"r3", "axes"}, {"r4"}, {}, "unsqueeze"),
                   MakeNode("Squeeze", {"r4", "axes"}, {"r5"}, {}, "squeeze"),
                   MakeNode("Neg", {"r5"}, {"y"}, {}, "neg"),
                   MakeNode("Reshape", {"y", "shape"}, {"out"}, {}, "reshape_out")};
  m.graph.outputs = {TensorInfo("out", DType::kFloat32, {256, n / 256})};
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get()).value();
  std::vector<Tensor> out;
  Tensor x = Tensor::FromVector(Iota(n, 0.013f), {n});
  for (int run = 0; run < 3; ++run) {  // the first run allocates per value, the later ones use the arena
    ASSERT_TRUE(ex->Run({{"x", x}}, {"out"}, &out).ok());
    ASSERT_EQ(out[0].shape(), (Shape{256, n / 256}));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[0].data<float>()[i], -std::max(0.0f, x.data<float>()[i])) << i;
  }
  const std::vector<size_t>& bytes = ex->last_value_bytes();
  size_t total = 0;
  for (size_t b : bytes) total += b;
  // r, y and the graph output "out" (a copy: graph outputs never view) own memory; r2..r5 are views of r.
  EXPECT_EQ(total, 3 * n * sizeof(float));
}

TEST(ExecutorTest, ThreadCountDoesNotChangeResults) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("a", DType::kFloat32, {64, 96}));
  m.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, {96, 80}));
  m.graph.outputs.push_back(TensorInfo("c", DType::kFloat32, {64, 80}));
  m.graph.nodes.push_back(MakeNode("MatMul", {"a", "b"}, {"c"}));
  Tensor a = Tensor::FromVector(Iota(64 * 96, 0.11f), {64, 96});
  Tensor b = Tensor::FromVector(Iota(96 * 80, 0.07f), {96, 80});
  std::vector<float> results[2];
  for (int threads : {1, 2}) {
    auto cpu = CpuExecutionProvider::Create({threads}).value();
    EXPECT_EQ(cpu->thread_pool()->num_threads(), threads);
    auto ex = Executor::Create(m, cpu.get()).value();
    std::vector<Tensor> out;
    ASSERT_TRUE(ex->Run({{"a", a}, {"b", b}}, {"c"}, &out).ok());
    results[threads - 1] = testing::ToVector(out[0]);
  }
  EXPECT_EQ(results[0], results[1]);
  // And against a double-precision reference.
  for (int i = 0; i < 64; i += 7) {
    for (int j = 0; j < 80; j += 9) {
      double s = 0;
      for (int k = 0; k < 96; ++k) s += static_cast<double>(a.data<float>()[i * 96 + k]) * b.data<float>()[k * 80 + j];
      EXPECT_NEAR(results[0][i * 80 + j], s, 1e-4);
    }
  }
}

// With a pool of two tunable threads the executor times runs with and without it (PoolTuner) and decides
// after the warm-up and trial; results stay those of one thread, and switching allocates nothing.
TEST(ExecutorTest, PoolTuningDecidesWithoutChangingResultsOrAllocating) {
  auto one = CpuExecutionProvider::Create({1}).value();
  auto one_ex = Executor::Create(testing::MakeMlpModel(), one.get()).value();
  EXPECT_EQ(one_ex->PoolChoice(), "not tuned");
  CpuProviderOptions fixed;
  fixed.intra_op_threads = 2;
  fixed.tune_pool = false;
  auto fixed_cpu = CpuExecutionProvider::Create(fixed).value();
  EXPECT_EQ(Executor::Create(testing::MakeMlpModel(), fixed_cpu.get()).value()->PoolChoice(), "not tuned");

  auto two = CpuExecutionProvider::Create({2}).value();
  ASSERT_TRUE(two->thread_pool()->tunable());
  auto ex = Executor::Create(testing::MakeMlpModel(), two.get()).value();
  EXPECT_EQ(ex->PoolChoice(), "undecided");
  Tensor x = Tensor::FromVector(Iota(8 * 4, 0.3f), {8, 4});
  std::vector<Tensor> ref, out;
  ASSERT_TRUE(one_ex->Run({{"x", x}}, {"y"}, &ref).ok());
  ASSERT_TRUE(ex->Run({{"x", x}}, {"y"}, &out).ok());  // plans
  const int64_t allocs = two->cpu_allocator().stats().num_allocs.load();
  for (int i = 0; i < PoolTuner::kWarmupRuns + PoolTuner::kTrialLength + 5; ++i) {
    ASSERT_TRUE(ex->Run({{"x", x}}, {"y"}, &out).ok());
    EXPECT_EQ(testing::ToVector(out[0]), testing::ToVector(ref[0])) << "run " << i;
  }
  EXPECT_EQ(two->cpu_allocator().stats().num_allocs.load(), allocs);
  const std::string choice = ex->PoolChoice();
  EXPECT_TRUE(choice.rfind("pool (pooled ", 0) == 0 || choice.rfind("serial (pooled ", 0) == 0) << choice;
}

// A follower (ExecutorOptions::pool_leader) runs in its leader's choice and adds its time to the leader's
// sample. The leader here replans at the same shapes on every run (Range's output grows past the plan), so
// the plan holding the tuner is replaced each time: its tuner must carry over, and the follower must never
// read a dropped one (this is an AddressSanitizer case too).
TEST(ExecutorTest, FollowerUsesItsLeadersTunerAcrossReplans) {
  auto cpu = CpuExecutionProvider::Create({2}).value();
  Model range;
  range.opset_imports[""] = 17;
  for (const char* in : {"start", "limit", "delta"}) range.graph.inputs.push_back(TensorInfo(in, DType::kFloat32, {}));
  range.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {-1}));
  range.graph.nodes.push_back(MakeNode("Range", {"start", "limit", "delta"}, {"y"}));
  ExecutorOptions lo;
  lo.providers = {cpu.get()};
  lo.name = "leader graph";
  auto made = Executor::Create(range, lo);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  auto leader = std::move(made).value();
  ExecutorOptions fo = lo;
  fo.name = "follower graph";
  fo.pool_leader = leader.get();
  auto follower = Executor::Create(testing::MakeMlpModel(), fo).value();
  EXPECT_EQ(follower->PoolChoice(), "follows the leader graph");
  Tensor x = Tensor::FromVector(Iota(8 * 4, 0.3f), {8, 4});
  std::vector<Tensor> out, ref;
  auto one = CpuExecutionProvider::Create({1}).value();
  ASSERT_TRUE(Executor::Create(testing::MakeMlpModel(), one.get()).value()->Run({{"x", x}}, {"y"}, &ref).ok());
  const int runs = PoolTuner::kWarmupRuns + PoolTuner::kTrialLength + 4;
  for (int i = 0; i < runs; ++i) {
    auto scalar = [](float v) { return Tensor::FromVector<float>({v}, {}); };
    // one more element each run: a bigger output than the plan holds
    ASSERT_TRUE(leader->Run({{"start", scalar(0)}, {"limit", scalar(static_cast<float>(i + 1))}, {"delta", scalar(1)}},
                            {"y"}, &out).ok());
    EXPECT_EQ(out[0].shape(), (Shape{i + 1}));
    ASSERT_TRUE(follower->Run({{"x", x}}, {"y"}, &out).ok());
    EXPECT_EQ(testing::ToVector(out[0]), testing::ToVector(ref[0])) << "run " << i;
  }
  const std::string choice = leader->PoolChoice();
  EXPECT_TRUE(choice.rfind("pool (pooled ", 0) == 0 || choice.rfind("serial (pooled ", 0) == 0) << choice;
}

TEST(ExecutorTest, InitializerCanBeOverriddenByFeed) {
  Model m = testing::MakeMlpModel();
  m.graph.inputs.push_back(TensorInfo("b1", DType::kFloat32, {3}));
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto ex = Executor::Create(m, cpu.get()).value();
  EXPECT_EQ(ex->required_inputs(), std::vector<std::string>{"x"});
  std::vector<Tensor> base, over;
  Tensor x = Tensor::FromVector(Iota(4, 1.0f), {1, 4});
  ASSERT_TRUE(ex->Run({{"x", x}}, {"y"}, &base).ok());
  std::vector<float> y0 = testing::ToVector(base[0]);
  ASSERT_TRUE(ex->Run({{"x", x}, {"b1", Tensor::FromVector<float>({5, 5, -5}, {3})}}, {"y"}, &over).ok());
  EXPECT_NE(y0, testing::ToVector(over[0]));
}

TEST(ExecutorTest, DefaultThreadsIsHardwareConcurrency) {
  auto cpu = CpuExecutionProvider::Create({}).value();
  EXPECT_EQ(cpu->thread_pool()->num_threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  EXPECT_FALSE(CpuExecutionProvider::Create({-1}).ok());
}

}  // namespace
}  // namespace ontrain
