// A training step at a shape it has already run allocates nothing on the heap: TrainStep, OptimizerStep,
// LazyResetGrad and EvalStep of the built-in MLP and CNN, at one and two threads, and of the PyTorch LSTM,
// GRU, RNN and einsum-attention fixtures (their Slice, Squeeze and recurrent kernels), counted by replacing
// the global operator new in this test binary (the library's own memory comes from the executor's arenas).
// On a CUDA device too (the step's loss and the optimizer's flag read back to the host), where the CUDA
// provider can be loaded: a GPU, or the emulated device of step_allocations_emu_test.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <new>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "engine/provider_list.h"
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

// Heap allocations of `steps` full steps (and an EvalStep each) after `warmup` of them, on the CPU, or on
// `device` ("cuda") and the CPU with graph capture on or off.
int64_t AllocationsPerSteps(const Model& forward, const Shape& input_shape, int threads, const std::string& name,
                            int64_t classes = 10, const std::string& device = "", bool graph_capture = true) {
  auto a = GenerateArtifacts(forward, ArtifactOptions());
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  if (!a.ok()) return -1;
  const std::string dir = ::testing::TempDir() + "/step_allocations_" + name;
  EXPECT_TRUE(WriteArtifacts(a.value(), dir).ok());
  auto cpu = CpuExecutionProvider::Create({threads}).value();
  std::vector<IExecutionProvider*> ordered = {cpu.get()};
  ProviderList device_list;
  if (!device.empty()) {
    ProviderListOptions po;
    po.threads = threads;
    po.graph_capture = graph_capture;
    auto providers = CreateProviders(device + ",cpu", po);
    EXPECT_TRUE(providers.ok()) << providers.status().ToString();
    if (!providers.ok()) return -1;
    device_list = std::move(providers).value();
    ordered = device_list.ordered;
  }
  CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
  auto s = TrainingSession::Create({ordered}, &state,
                                   ModelSource::FromPath(dir + "/training_model.onnx"),
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
  // On a device the executor runs a graph eagerly, then records it, then replays it (executor_capture.cc):
  // the steps counted are replays.
  const int warmup = device.empty() ? 3 : 6, steps = 5;
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

// Where the CUDA provider loads (a GPU, or ONTRAIN_CUDA_PROVIDER naming the emulated device's library),
// graph-captured steps of the MLP and CNN, whose losses and optimizer flags live on the device. Failed
// before the session and the optimizer kept their host copies: 4 allocations per step.
TEST(StepAllocationsTest, CapturedDeviceStepsAllocateNothing) {
  auto api = LoadCudaProviderLibrary();
  int count = 0;
  if (!api.ok()) GTEST_SKIP() << "no CUDA provider: " << api.status().message();
  if (Status s = api.value()->CountDevices(&count); !s.ok()) GTEST_SKIP() << "no CUDA device: " << s.message();
  EXPECT_EQ(AllocationsPerSteps(MakeMlpClassifier(784, {128}, 10, 1), {16, 784}, 1, "cuda_mlp", 10, "cuda"), 0);
  EXPECT_EQ(AllocationsPerSteps(MakeCnnClassifier(28, 10, 2), {8, 1, 28, 28}, 1, "cuda_cnn", 10, "cuda"), 0);
}

// The same steps run eagerly (graph capture off, as for shapes a graph cannot record): the CUDA kernels'
// own host work (pooling geometry, broadcast spaces, reduced axes, optimizer slot tables) is kept from run
// to run. Failed before those were kept: 19 allocations per CNN step.
TEST(StepAllocationsTest, EagerDeviceStepsAllocateNothing) {
  auto api = LoadCudaProviderLibrary();
  int count = 0;
  if (!api.ok()) GTEST_SKIP() << "no CUDA provider: " << api.status().message();
  if (Status s = api.value()->CountDevices(&count); !s.ok()) GTEST_SKIP() << "no CUDA device: " << s.message();
  EXPECT_EQ(AllocationsPerSteps(MakeMlpClassifier(784, {128}, 10, 1), {16, 784}, 1, "cuda_mlp_eager", 10, "cuda", false),
            0);
  EXPECT_EQ(AllocationsPerSteps(MakeCnnClassifier(28, 10, 2), {8, 1, 28, 28}, 1, "cuda_cnn_eager", 10, "cuda", false),
            0);
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
