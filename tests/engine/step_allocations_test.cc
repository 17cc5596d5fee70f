// A training step at a shape it has already run allocates nothing on the heap: TrainStep, OptimizerStep,
// LazyResetGrad and EvalStep of the built-in MLP and CNN, at one and two threads, and of the PyTorch LSTM,
// GRU, RNN and einsum-attention fixtures (their Slice, Squeeze and recurrent kernels), counted by replacing
// the global operator new in this test binary (the library's own memory comes from the executor's arenas).
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// The nothrow forms too (std::stable_sort's temporary buffer uses them): every form a delete may pair with
// must come from malloc here, or a sanitizer sees new/free mismatches.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace ontrain {
namespace {

// Heap allocations of `steps` full steps (and an EvalStep each) after `warmup` of them.
int64_t AllocationsPerSteps(const Model& forward, const Shape& input_shape, int threads, const std::string& name,
                            int64_t classes = 10) {
  auto a = GenerateArtifacts(forward, ArtifactOptions());
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) return -1;
  const std::string dir = ::testing::TempDir() + "/step_allocations_" + name;
  EXPECT_TRUE(WriteArtifacts(a.value(), dir).ok());
  auto cpu = CpuExecutionProvider::Create({threads}).value();
  CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
  auto s = TrainingSession::Create({{cpu.get()}}, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                   ModelSource::FromPath(dir + "/eval_model.onnx"),
                                   ModelSource::FromPath(dir + "/optimizer_model.onnx"));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return -1;
  const int64_t batch = input_shape[0];
  std::vector<float> x(static_cast<size_t>(ShapeNumElements(input_shape)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.37 * static_cast<double>(i)));
  std::vector<int64_t> labels(static_cast<size_t>(batch));
  for (int64_t i = 0; i < batch; ++i) labels[i] = (7 * i) % classes;
  const std::vector<Tensor> inputs = {Tensor::FromVector(x, input_shape), Tensor::FromVector(labels, {batch})};
  std::vector<Tensor> out, eval_out;
  const int warmup = 3, steps = 5;
  int64_t before = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    if (step == warmup) before = g_allocations.load();
    if (!s.value()->TrainStep(inputs, &out).ok() || !s.value()->OptimizerStep().ok()) return -1;
    s.value()->LazyResetGrad();
    if (!s.value()->EvalStep(inputs, &eval_out).ok()) return -1;
  }
  return g_allocations.load() - before;
}

TEST(StepAllocationsTest, MlpStepsAllocateNothing) {
  for (int threads : {1, 2}) {
    EXPECT_EQ(AllocationsPerSteps(MakeMlpClassifier(784, {128}, 10, 1), {16, 784}, threads, "mlp"), 0) << threads << " threads";
  }
}

TEST(StepAllocationsTest, CnnStepsAllocateNothing) {
  for (int threads : {1, 2}) {
    EXPECT_EQ(AllocationsPerSteps(MakeCnnClassifier(28, 10, 2), {8, 1, 28, 28}, threads, "cnn"), 0) << threads << " threads";
  }
}

TEST(StepAllocationsTest, RecurrentAndEinsumFixturesAllocateNothing) {
  const std::string root = std::string(std::getenv("TEST_SRCDIR")) + "/ontrain/tests/data/torch/";
  struct Fixture {
    const char* name;
    int64_t steps, features;  // input [4, steps, features]
  };
  const Fixture fixtures[] = {{"lstm", 5, 6}, {"gru", 5, 6}, {"rnn", 5, 6}, {"einsum_attention", 6, 8}};
  for (const Fixture& f : fixtures) {
    const std::string name = f.name;
    const Shape shape = {4, f.steps, f.features};
    auto forward = LoadModel(root + name + "/forward.onnx");
    ASSERT_TRUE(forward.ok()) << forward.status().ToString();
    for (int threads : {1, 2}) {
      EXPECT_EQ(AllocationsPerSteps(forward.value(), shape, threads, name, 2), 0) << name << ", " << threads << " threads";
    }
  }
}

}  // namespace
}  // namespace ontrain
