// CUDA-vs-CPU parity of whole training runs: the built-in MLP and CNN, a transformer encoder block, a
// BatchNorm CNN and two of ONNX Runtime's artifact sets train 50 steps (TrainStep, OptimizerStep,
// LazyResetGrad) on the CPU provider alone and with CUDA first. Compared: every loss, the final
// parameters, the eval output, and the checkpoints saved while the state lives on each device. A
// checkpoint saved from CUDA then resumes on the CPU (and the CPU's on CUDA) for 5 more steps, which must
// match the run that stayed on one provider. Two CUDA runs must give bit-identical losses (deterministic
// mode). Steady-state steps take no device memory (CheckSteadyState).
//
// Tolerances: float32 reductions in another order differ by a few ulps per step; over 50 AdamW steps the
// losses may drift by ~1e-5 relative. The bounds below (losses 1e-3 relative, parameters 2e-3 absolute
// plus 1e-2 relative) leave room for that and catch any real error, which shows as 1e-1 or more.
#include <cstring>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "gtest/gtest.h"
#include "tests/ort_artifacts.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace parity {
namespace {

constexpr int kSteps = 50;
constexpr int kResumeSteps = 5;
const Tolerance kLossTol{1e-6, 1e-3};
const Tolerance kParamTol{2e-3, 1e-2};

struct TrainRun {
  std::vector<float> losses;
  Tensor params;      // flat trainable parameters after training
  Tensor eval;        // the eval model's first output on the next batch
  std::string checkpoint;
  std::vector<float> resumed_losses;  // the continuation (see Resume)
  int64_t train_replayed = 0;         // training-graph runs that replayed a recording (graph capture)
  std::string train_capture;          // the training graph's CaptureStatus
};

// Trains `steps` steps of `set` from `state` on {device, cpu} ("": the CPU alone), starting at batch
// `first_step`.
void Train(const testing::ArtifactSet& set, testing::LoadedSet* l, const std::string& device, int first_step, int steps,
           TrainRun* r, bool graph_capture = true, bool deterministic = true) {
  auto providers = MakeProviders(device, graph_capture, deterministic);
  ASSERT_TRUE(providers.ok()) << providers.status().ToString();
  auto created = TrainingSession::Create({providers->ordered}, &l->state, l->train, l->eval, l->optimizer);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TrainingSession& s = *created.value();
  for (int step = first_step; step < first_step + steps; ++step) {
    std::vector<Tensor> out;
    Status st = s.TrainStep(testing::MakeBatch(set, step), &out);
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
    ASSERT_TRUE(s.OptimizerStep().ok());
    s.LazyResetGrad();
    r->losses.push_back(out[0].data<float>()[0]);
  }
  r->train_replayed = s.train_executor().capture_stats().replayed;
  r->train_capture = s.train_executor().CaptureStatus();
  std::vector<Tensor> eval;
  ASSERT_TRUE(s.EvalStep(testing::MakeBatch(set, first_step + steps), &eval).ok());
  r->eval = eval[0].Clone();
  auto size = s.GetParametersSize(true);
  ASSERT_TRUE(size.ok());
  r->params = Tensor::Allocate(DType::kFloat32, {static_cast<int64_t>(size.value())}, HostAllocator()).value();
  ASSERT_TRUE(s.CopyParametersToBuffer(&r->params, true).ok());
  auto bytes = SerializeCheckpoint(l->state);  // while the state is on the session's device
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  r->checkpoint = bytes.value();
}

// Loads `checkpoint` into the set's models and trains kResumeSteps more steps on {device, cpu}.
void Resume(const testing::ArtifactSet& set, const std::string& checkpoint, const std::string& device,
            std::vector<float>* losses) {
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto state = LoadCheckpointFromBuffer(checkpoint.data(), checkpoint.size());
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  loaded->state = std::move(state).value();
  TrainRun r;
  ASSERT_NO_FATAL_FAILURE(Train(set, &loaded.value(), device, kSteps, kResumeSteps, &r));
  *losses = r.losses;
}

void CompareCheckpoints(const std::string& cpu_bytes, const std::string& cuda_bytes) {
  auto a = LoadCheckpointFromBuffer(cpu_bytes.data(), cpu_bytes.size());
  auto b = LoadCheckpointFromBuffer(cuda_bytes.data(), cuda_bytes.size());
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->parameter_order, b->parameter_order);
  for (const std::string& name : a->parameter_order) {
    std::string diff = Compare(a->FindParameter(name)->data, b->FindParameter(name)->data, kParamTol);
    EXPECT_TRUE(diff.empty()) << "checkpoint parameter " << name << ": " << diff;
  }
  for (const auto& [group, g] : a->optimizer_groups) {
    const auto& other = b->optimizer_groups.at(group);
    EXPECT_EQ(g.step, other.step);
    for (const auto& [param, ps] : g.param_states) {
      for (const auto& [moment, t] : ps.momentums) {
        std::string diff = Compare(t, other.param_states.at(param).momentums.at(moment), kParamTol);
        EXPECT_TRUE(diff.empty()) << "checkpoint moment " << param << "/" << moment << ": " << diff;
      }
    }
  }
}

Tensor Losses(const std::vector<float>& v) { return Tensor::FromVector(v, {static_cast<int64_t>(v.size())}); }

// The comparisons of the file for one set, with `device` ("cuda", or "sim" to prove the harness).
void CheckSet(const std::string& name, const std::string& device) {
  const testing::ArtifactSet& set = testing::FindSet(name);
  std::string why;
  TrainRun runs[3];  // CPU, device, device again
  for (int i = 0; i < 3; ++i) {
    auto loaded = testing::LoadSet(set, &why);
    if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    ASSERT_NO_FATAL_FAILURE(Train(set, &loaded.value(), i > 0 ? device : "", 0, kSteps, &runs[i]));
  }
  const TrainRun &cpu = runs[0], &dev = runs[1];
  std::string diff = Compare(Losses(cpu.losses), Losses(dev.losses), kLossTol);
  EXPECT_TRUE(diff.empty()) << "losses: " << diff;
  diff = Compare(cpu.params, dev.params, kParamTol);
  EXPECT_TRUE(diff.empty()) << "final parameters: " << diff;
  diff = Compare(cpu.eval, dev.eval, kParamTol);
  EXPECT_TRUE(diff.empty()) << "eval output: " << diff;
  EXPECT_EQ(runs[1].losses, runs[2].losses) << "two deterministic runs on " << device << " differ";
  ASSERT_NO_FATAL_FAILURE(CompareCheckpoints(cpu.checkpoint, dev.checkpoint));
  // Cross-device resumption: each checkpoint continues on the other provider.
  std::vector<float> cpu_then_cpu, dev_then_cpu, cpu_then_dev;
  ASSERT_NO_FATAL_FAILURE(Resume(set, cpu.checkpoint, "", &cpu_then_cpu));
  ASSERT_NO_FATAL_FAILURE(Resume(set, dev.checkpoint, "", &dev_then_cpu));
  ASSERT_NO_FATAL_FAILURE(Resume(set, cpu.checkpoint, device, &cpu_then_dev));
  ASSERT_EQ(cpu_then_cpu.size(), static_cast<size_t>(kResumeSteps));
  diff = Compare(Losses(cpu_then_cpu), Losses(dev_then_cpu), kLossTol);
  EXPECT_TRUE(diff.empty()) << device << " checkpoint resumed on the CPU: " << diff;
  diff = Compare(Losses(cpu_then_cpu), Losses(cpu_then_dev), kLossTol);
  EXPECT_TRUE(diff.empty()) << "CPU checkpoint resumed on " << device << ": " << diff;
}

class TrainingParityTest : public ::testing::TestWithParam<std::string> {};

// Steady state: once a session has run its steps at a shape, more training steps (TrainStep, OptimizerStep,
// LazyResetGrad) and EvalSteps take nothing from the device provider's allocator, and nothing reaches that
// memory's source (cudaMalloc on CUDA: it synchronizes the device). The warm-up must have allocated, or the
// counters would prove nothing.
void CheckSteadyState(const std::string& name, const std::string& device, bool deterministic = true) {
  const testing::ArtifactSet& set = testing::FindSet(name);
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto providers = MakeProviders(device, true, deterministic);
  ASSERT_TRUE(providers.ok()) << providers.status().ToString();
  const AllocatorStats* counters = providers->ordered[0]->allocator()->counters();
  ASSERT_NE(counters, nullptr) << device << "'s allocator keeps no counters";
  auto created = TrainingSession::Create({providers->ordered}, &loaded->state, loaded->train, loaded->eval,
                                         loaded->optimizer);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TrainingSession& s = *created.value();
  auto run = [&](int step) {
    std::vector<Tensor> out, eval;
    Status st = s.TrainStep(testing::MakeBatch(set, step), &out);
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
    ASSERT_TRUE(s.OptimizerStep().ok());
    s.LazyResetGrad();
    st = s.EvalStep(testing::MakeBatch(set, step), &eval);
    ASSERT_TRUE(st.ok()) << "eval " << step << ": " << st.ToString();
  };
  for (int step = 0; step < 3; ++step) ASSERT_NO_FATAL_FAILURE(run(step));
  const int64_t allocs = counters->num_allocs, backing = counters->backing_allocs;
  EXPECT_GT(backing, 0) << "the warm-up allocated nothing on " << device;
  for (int step = 3; step < 13; ++step) ASSERT_NO_FATAL_FAILURE(run(step));
  EXPECT_EQ(counters->num_allocs.load(), allocs) << device << " allocations in steady-state steps";
  EXPECT_EQ(counters->backing_allocs.load(), backing) << device << " memory taken from its source in steady state";
}

TEST_P(TrainingParityTest, CudaSteadyStateAllocatesNothing) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  CheckSteadyState(GetParam(), "cuda");
}

// The same check on the simulated device, whose memory is one mmap per allocation: runs everywhere.
TEST(TrainingParityHarness, SimulatedDeviceSteadyState) {
  CheckSteadyState("gen-mlp", "sim");
  CheckSteadyState("gen-cnn", "sim");
}

TEST_P(TrainingParityTest, CudaTrainsLikeCpu) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  CheckSet(GetParam(), "cuda");
}

// The same harness against the simulated device (the CPU's kernels): runs everywhere.
TEST(TrainingParityHarness, SimulatedDeviceOnTheMlp) { CheckSet("gen-mlp", "sim"); }

// Graph capture changes no bit: the same losses and parameters with recorded steps replayed as with every
// kernel launched eagerly (deterministic mode), and the recorded run did replay.
TEST_P(TrainingParityTest, CudaReplaysMatchEagerBitForBit) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  const testing::ArtifactSet& set = testing::FindSet(GetParam());
  std::string why;
  TrainRun runs[2];  // graph capture on, off
  for (int i = 0; i < 2; ++i) {
    auto loaded = testing::LoadSet(set, &why);
    if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    ASSERT_NO_FATAL_FAILURE(Train(set, &loaded.value(), "cuda", 0, kSteps, &runs[i], i == 0));
  }
  EXPECT_GT(runs[0].train_replayed, kSteps / 2) << runs[0].train_capture;
  EXPECT_EQ(runs[1].train_replayed, 0) << runs[1].train_capture;
  EXPECT_EQ(runs[0].losses, runs[1].losses);
  EXPECT_EQ(Compare(runs[1].params, runs[0].params, {0, 0}), "");
  EXPECT_EQ(Compare(runs[1].eval, runs[0].eval, {0, 0}), "");
}

// Nondeterministic mode (`--nondeterministic`): cuDNN's convolution algorithms are timed on the first run at
// each shape (cudnnFind*AlgorithmEx, which overwrites the outputs it times into) and the fastest kept. The
// two convolutional sets still train like the CPU, within the same tolerances, and the search's temporary
// workspace is taken at the first steps only.
TEST(CudaNondeterministicTest, TimedConvolutionAlgorithmsTrainLikeCpu) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  for (const char* name : {"gen-cnn", "gen-bn"}) {
    const testing::ArtifactSet& set = testing::FindSet(name);
    std::string why;
    TrainRun runs[2];  // CPU, CUDA nondeterministic
    for (int i = 0; i < 2; ++i) {
      auto loaded = testing::LoadSet(set, &why);
      if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      ASSERT_NO_FATAL_FAILURE(Train(set, &loaded.value(), i == 0 ? "" : "cuda", 0, kSteps, &runs[i], true, false));
    }
    std::string diff = Compare(Losses(runs[0].losses), Losses(runs[1].losses), kLossTol);
    EXPECT_TRUE(diff.empty()) << name << " losses: " << diff;
    diff = Compare(runs[0].params, runs[1].params, kParamTol);
    EXPECT_TRUE(diff.empty()) << name << " final parameters: " << diff;
    diff = Compare(runs[0].eval, runs[1].eval, kParamTol);
    EXPECT_TRUE(diff.empty()) << name << " eval output: " << diff;
    ASSERT_NO_FATAL_FAILURE(CheckSteadyState(name, "cuda", false));
  }
}

INSTANTIATE_TEST_SUITE_P(Sets, TrainingParityTest,
                         ::testing::Values("gen-mlp", "gen-cnn", "gen-bn", "gen-encoder", "ort-testdata-mlp",
                                           "srij-transformer-lora", "opt-sgd-clip-lr"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace parity
}  // namespace ontrain
