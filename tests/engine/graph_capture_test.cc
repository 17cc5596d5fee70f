// Graph capture (engine/executor_capture.cc) on the simulated device, which records runs with the semantics
// of CUDA's stream capture (providers/sim/sim_provider.h): recorded work does not run until replayed, a
// replay reads device memory as it is then, and every host value a kernel was given keeps the value it had
// when recorded. A replay that relied on a stale host value, a device address that moved, or staging that
// was not refreshed therefore computes the wrong numbers here, and the comparisons below (bit for bit
// against the CPU provider alone: the simulated device runs the same kernels) catch it.
//
// - Whole training runs, with the loops users write: step by step, two accumulated steps per update, and a
//   learning rate that changes every step; the training graph must actually replay, with no allocation.
// - Single graphs: fed host inputs refreshed, host scalars keying recordings, device feeds that move,
//   shapes that change and come back, and each reason a graph is not recorded.
// - A recording that fails midway leaves the run correct and its shapes eager.
// - The simulated device's own recording semantics, kernel by kernel.
#include <cmath>
#include <cstring>

#include "checkpoint/checkpoint_io.h"
#include "engine/executor.h"
#include "engine/training_session.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/sim/sim_provider.h"
#include "tests/ort_artifacts.h"

namespace ontrain {
namespace {

std::vector<uint32_t> Bits(const Tensor& t) {
  std::vector<uint32_t> b(static_cast<size_t>(t.SizeInBytes() / 4));
  std::memcpy(b.data(), t.raw_data(), b.size() * 4);
  return b;
}

struct Devices {
  std::unique_ptr<CpuExecutionProvider> cpu;
  std::unique_ptr<SimExecutionProvider> sim;
  std::vector<IExecutionProvider*> list;
};

// {cpu} alone, or {sim offering `ops`, cpu}.
Devices MakeDevices(bool sim, bool capture = true, std::vector<std::string> ops = AllCpuOps()) {
  Devices d;
  d.cpu = CpuExecutionProvider::Create({2}).value();
  if (sim) {
    SimProviderOptions o;
    o.threads = 2;
    o.graph_capture = capture;
    o.ops = std::move(ops);
    d.sim = SimExecutionProvider::Create(o).value();
    d.list.push_back(d.sim.get());
  }
  d.list.push_back(d.cpu.get());
  return d;
}

// ---------------------------------------------------------------------------------------------------------
// Training

enum class Loop { kStep, kAccumulateTwo, kScheduledRate };

struct Trained {
  std::vector<uint32_t> losses, params, eval;
  std::string checkpoint;
  Executor::CaptureStats train, optimizer;
  std::string train_status, optimizer_status;
  int64_t steady_allocs = -1;  // allocations on both devices over the last kSteadySteps steps
};

constexpr int kSteps = 14;
constexpr int kSteadySteps = 6;

void Train(const std::string& set_name, bool on_sim, Loop loop, Trained* r) {
  const testing::ArtifactSet& set = testing::FindSet(set_name);
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  testing::LoadedSet& l = loaded.value();
  Devices d = MakeDevices(on_sim);
  auto created = TrainingSession::Create({d.list}, &l.state, l.train, l.eval, l.optimizer);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TrainingSession& s = *created.value();
  auto allocs = [&] {
    return d.cpu->cpu_allocator().stats().num_allocs + (on_sim ? d.sim->allocator_stats().num_allocs.load() : 0);
  };
  int64_t before = 0;
  for (int step = 0; step < kSteps; ++step) {
    if (step == kSteps - kSteadySteps) before = allocs();
    if (loop == Loop::kScheduledRate) {
      ASSERT_TRUE(s.SetLearningRate(1e-3f * static_cast<float>(1 + step % 5)).ok());
    }
    std::vector<Tensor> out;
    Status st = s.TrainStep(testing::MakeBatch(set, step), &out);
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
    r->losses.push_back(Bits(out[0])[0]);
    if (loop != Loop::kAccumulateTwo || step % 2 == 1) {
      st = s.OptimizerStep();
      ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
      s.LazyResetGrad();
    }
  }
  r->steady_allocs = allocs() - before;
  std::vector<Tensor> eval;
  ASSERT_TRUE(s.EvalStep(testing::MakeBatch(set, kSteps), &eval).ok());
  r->eval = Bits(eval[0]);
  auto size = s.GetParametersSize(false);
  ASSERT_TRUE(size.ok());
  Tensor flat = Tensor::Allocate(DType::kFloat32, {static_cast<int64_t>(size.value())}, HostAllocator()).value();
  ASSERT_TRUE(s.CopyParametersToBuffer(&flat, false).ok());
  r->params = Bits(flat);
  auto bytes = SerializeCheckpoint(l.state);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  r->checkpoint = bytes.value();
  r->train = s.train_executor().capture_stats();
  r->train_status = s.train_executor().CaptureStatus();
  r->optimizer = s.optimizer()->executor().capture_stats();
  r->optimizer_status = s.optimizer()->executor().CaptureStatus();
}

struct TrainingCase {
  std::string set;
  Loop loop;
  int train_recordings;  // 0: never recorded, for the reason `refusal` names
  std::string refusal;
};

void PrintTo(const TrainingCase& c, std::ostream* os) { *os << c.set << " loop " << static_cast<int>(c.loop); }

class CapturedTrainingTest : public ::testing::TestWithParam<TrainingCase> {};

// Replayed steps give the CPU's bits, each graph replays once recorded (or says why it is not), and the
// last steps allocate nothing.
TEST_P(CapturedTrainingTest, ReplaysMatchCpuBitForBit) {
  const TrainingCase& c = GetParam();
  std::string why;
  if (!testing::LoadSet(testing::FindSet(c.set), &why).ok() && !why.empty()) GTEST_SKIP() << why;
  Trained cpu, sim;
  ASSERT_NO_FATAL_FAILURE(Train(c.set, false, c.loop, &cpu));
  ASSERT_NO_FATAL_FAILURE(Train(c.set, true, c.loop, &sim));
  EXPECT_EQ(sim.losses, cpu.losses);
  EXPECT_EQ(sim.params, cpu.params);
  EXPECT_EQ(sim.eval, cpu.eval);
  EXPECT_TRUE(sim.checkpoint == cpu.checkpoint) << "checkpoints differ";
  SCOPED_TRACE("training graph: " + sim.train_status + "; optimizer graph: " + sim.optimizer_status);
  // The training graph: two warm-up runs at the plan, one recording per value of lazy_reset_grad once it
  // repeats, then replays.
  EXPECT_EQ(sim.train.recorded, c.train_recordings);
  if (c.train_recordings > 0) {
    EXPECT_GE(sim.train.replayed, kSteps - 4 - c.train_recordings);
  } else {
    EXPECT_EQ(sim.train.replayed, 0);
    EXPECT_NE(sim.train_status.find(c.refusal), std::string::npos);
  }
  // The optimizer graph: the learning rate and the step count (new at every step, and a rate that changes)
  // reach the device through the recording's staging, so one recording replays at every step.
  const Executor::CaptureStats& opt = sim.optimizer;
  EXPECT_EQ(opt.recorded, 1);
  EXPECT_EQ(opt.replayed, opt.runs - 4);
  EXPECT_EQ(sim.steady_allocs, 0) << "allocations in the last " << kSteadySteps << " steps";
}

std::string TrainingCaseName(const ::testing::TestParamInfo<TrainingCase>& info) {
  static const char* const kLoops[] = {"step", "accumulate_two", "scheduled_rate"};
  std::string n = info.param.set;
  for (char& ch : n) if (ch == '-') ch = '_';
  return n + "_" + kLoops[static_cast<int>(info.param.loop)];
}

INSTANTIATE_TEST_SUITE_P(Sets, CapturedTrainingTest,
                         ::testing::Values(TrainingCase{"gen-mlp", Loop::kStep, 1, ""},
                                           TrainingCase{"gen-cnn", Loop::kStep, 1, ""},
                                           TrainingCase{"gen-mlp", Loop::kAccumulateTwo, 2, ""},
                                           TrainingCase{"gen-cnn", Loop::kScheduledRate, 1, ""},
                                           TrainingCase{"opt-sgd-clip-lr", Loop::kStep, 1, ""},
                                           TrainingCase{"opt-clip", Loop::kScheduledRate, 1, ""},
                                           TrainingCase{"ort-testdata-mlp", Loop::kStep, 1, ""},
                                           // The CPU's Dropout draws on the host at every run (CUDA's does not).
                                           TrainingCase{"gen-bn", Loop::kStep, 0, "(Dropout) cannot be recorded"},
                                           TrainingCase{"gen-encoder", Loop::kStep, 0, "(Dropout) cannot be recorded"}),
                         TrainingCaseName);

// ---------------------------------------------------------------------------------------------------------
// Single graphs

Tensor Floats(const Shape& shape, float seed) {
  Tensor t = Tensor::Allocate(DType::kFloat32, shape, HostAllocator()).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = std::sin(0.7f * static_cast<float>(i) + seed) * 2.0f;
  return t;
}

Tensor Scalar(float v) { return Tensor::FromVector<float>({v}, {}); }

// y = Relu(x) * w + x, with x [batch, 8] fed on the host and w an initializer.
Model ReluMulModel() {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {-1, 8}, {"batch"})};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {-1, 8}, {"batch"})};
  m.graph.initializers["w"] = Floats({8}, 3.0f);
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}, {}, "relu"), MakeNode("Mul", {"r", "w"}, {"rw"}, {}, "mul"),
                   MakeNode("Add", {"rw", "x"}, {"y"}, {}, "add")};
  return m;
}

// y = Clip(x, lo, hi) * 2, lo and hi fed on the host (Clip reads them there).
Model ClipModel() {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {4, 8}), TensorInfo("lo", DType::kFloat32, {}),
                    TensorInfo("hi", DType::kFloat32, {})};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {4, 8})};
  m.graph.initializers["two"] = Scalar(2.0f);
  m.graph.nodes = {MakeNode("Clip", {"x", "lo", "hi"}, {"c"}, {}, "clip"), MakeNode("Mul", {"c", "two"}, {"y"}, {}, "mul")};
  return m;
}

// Runs `m` on `d.list` and on the CPU alone with each run's feeds and expects the same bits every run;
// returns the device executor.
std::unique_ptr<Executor> ExpectSameAsCpu(const Model& m, Devices& d, const std::vector<NamedTensors>& runs) {
  auto dev = Executor::Create(m, {d.list, {}});
  EXPECT_TRUE(dev.ok()) << dev.status().ToString();
  auto cpu = Executor::Create(m, {{d.cpu.get()}, {}});
  EXPECT_TRUE(cpu.ok()) << cpu.status().ToString();
  if (!dev.ok() || !cpu.ok()) return nullptr;
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<Tensor> a, b;
    Status s = dev.value()->Run(ToNamedValues(runs[r]), {"y"}, &a);
    EXPECT_TRUE(s.ok()) << "run " << r << ": " << s.ToString();
    EXPECT_TRUE(cpu.value()->Run(ToNamedValues(runs[r]), {"y"}, &b).ok());
    if (!s.ok()) break;
    auto host = dev.value()->ToHost(a[0]);
    EXPECT_TRUE(host.ok());
    EXPECT_EQ(Bits(host.value()), Bits(b[0])) << "run " << r << " (" << dev.value()->CaptureStatus() << ")";
  }
  return std::move(dev).value();
}

// A new x at every run reaches the device through the recording's staging, rewritten before each replay.
TEST(GraphCaptureTest, FedHostInputsAreRefreshedBeforeEachReplay) {
  Devices d = MakeDevices(true);
  std::vector<NamedTensors> runs;
  for (int r = 0; r < 10; ++r) runs.push_back({{"x", Floats({2, 8}, static_cast<float>(r))}});
  auto ex = ExpectSameAsCpu(ReluMulModel(), d, runs);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->capture_stats().recorded, 1) << ex->CaptureStatus();
  EXPECT_EQ(ex->capture_stats().replayed, 6) << ex->CaptureStatus();  // runs 5 to 10
  EXPECT_EQ(d.sim->stats().replays, 7);  // the recorded run is its first replay
}

// Host scalars that a device kernel reads are frozen into a recording: each value that repeats gets its
// own recording, and values that never repeat run eagerly.
TEST(GraphCaptureTest, HostScalarsKeyTheRecordings) {
  Devices d = MakeDevices(true);
  std::vector<NamedTensors> runs;
  for (int r = 0; r < 12; ++r) {  // lo alternates between two values
    runs.push_back({{"x", Floats({4, 8}, static_cast<float>(r))}, {"lo", Scalar(r % 2 ? -0.5f : -1.0f)}, {"hi", Scalar(1.0f)}});
  }
  for (int r = 0; r < 6; ++r) {  // a new lo at every run
    runs.push_back({{"x", Floats({4, 8}, static_cast<float>(r))}, {"lo", Scalar(-0.05f - 0.1f * static_cast<float>(r))}, {"hi", Scalar(1.0f)}});
  }
  auto ex = ExpectSameAsCpu(ClipModel(), d, runs);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->capture_stats().recorded, 2) << ex->CaptureStatus();
  EXPECT_GE(ex->capture_stats().replayed, 7) << ex->CaptureStatus();
  EXPECT_NE(ex->CaptureStatus().find("have not repeated"), std::string::npos) << ex->CaptureStatus();
}

// y = x + b with b fed on the device: its address keys the recording, and its contents are read at the
// replay.
TEST(GraphCaptureTest, DeviceFeedsAreReadWhereAndAsTheyAre) {
  Devices d = MakeDevices(true);
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {4, 8}), TensorInfo("b", DType::kFloat32, {4, 8})};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {4, 8})};
  m.graph.nodes = {MakeNode("Add", {"x", "b"}, {"y"}, {}, "add")};
  ExecutorOptions o{d.list, {{"b", d.sim->device()}}};
  auto ex = Executor::Create(m, o);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  auto on_device = [&](const Tensor& host) {
    Tensor t = Tensor::Allocate(DType::kFloat32, host.shape(), d.sim->allocator()).value();
    EXPECT_TRUE(d.sim->CopyTensor(host, &t).ok());
    return t;
  };
  Tensor b1 = on_device(Floats({4, 8}, 1.0f)), b2 = on_device(Floats({4, 8}, 2.0f));
  Tensor x = Floats({4, 8}, 5.0f);
  auto run = [&](const Tensor& b, const Tensor& b_host, const char* what) {
    std::vector<Tensor> out;
    Status s = ex.value()->Run({{"x", x}, {"b", b}}, {"y"}, &out);
    ASSERT_TRUE(s.ok()) << s.ToString();
    Tensor y = ex.value()->ToHost(out[0]).value();
    for (int64_t i = 0; i < y.NumElements(); ++i) {
      ASSERT_EQ(y.data<float>()[i], x.data<float>()[i] + b_host.data<float>()[i]) << what << ", element " << i;
    }
  };
  for (int r = 0; r < 6; ++r) run(b1, Floats({4, 8}, 1.0f), "b1");
  EXPECT_EQ(ex.value()->capture_stats().replayed, 2) << ex.value()->CaptureStatus();
  ASSERT_TRUE(d.sim->CopyTensor(Floats({4, 8}, 3.0f), &b1).ok());  // new contents, same address
  run(b1, Floats({4, 8}, 3.0f), "b1 rewritten");
  EXPECT_EQ(ex.value()->capture_stats().replayed, 3) << "rewritten device memory is read at the replay";
  for (int r = 0; r < 4; ++r) run(b2, Floats({4, 8}, 2.0f), "b2");  // another address: recorded anew
  EXPECT_EQ(ex.value()->capture_stats().recorded, 2) << ex.value()->CaptureStatus();
}

// Other shapes drop the recordings (the kernels may regrow what they name); back at the first shapes, the
// graph is recorded again after its warm-up.
TEST(GraphCaptureTest, OtherShapesDropTheRecordings) {
  Devices d = MakeDevices(true);
  std::vector<NamedTensors> runs;
  for (int r = 0; r < 6; ++r) runs.push_back({{"x", Floats({2, 8}, static_cast<float>(r))}});
  for (int r = 0; r < 2; ++r) runs.push_back({{"x", Floats({3, 8}, static_cast<float>(r))}});
  for (int r = 0; r < 6; ++r) runs.push_back({{"x", Floats({2, 8}, static_cast<float>(r + 10))}});
  auto ex = ExpectSameAsCpu(ReluMulModel(), d, runs);
  ASSERT_NE(ex, nullptr);
  // [2,8]: run 1 plans, 2-3 warm up, 4 is recorded, 5-6 replay; [3,8]: eager (the [2,8] recording is
  // dropped); [2,8] again (its plan kept): 2 warm-up runs, a recording, 3 replays.
  EXPECT_EQ(ex->capture_stats().recorded, 2) << ex->CaptureStatus();
  EXPECT_EQ(ex->capture_stats().replayed, 5) << ex->CaptureStatus();
}

// Each reason a graph is not recorded is named, and its runs still compute the right thing.
TEST(GraphCaptureTest, GraphsThatCannotBeRecordedSayWhy) {
  std::vector<NamedTensors> runs;
  for (int r = 0; r < 6; ++r) runs.push_back({{"x", Floats({2, 8}, static_cast<float>(r))}});
  struct Case {
    const char* what;
    bool sim, capture;
    std::vector<std::string> ops;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"capture off", true, false, AllCpuOps(), "SIM does not record runs"},
      {"no device", false, true, {}, "every node runs on the host"},
      {"Mul on the host", true, true, {"Relu", "Add"}, "to the host in the middle of a run"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Devices d = MakeDevices(c.sim, c.capture, c.ops);
    auto ex = ExpectSameAsCpu(ReluMulModel(), d, runs);
    ASSERT_NE(ex, nullptr);
    EXPECT_EQ(ex->capture_stats().recorded, 0);
    EXPECT_NE(ex->CaptureStatus().find(c.expected), std::string::npos) << ex->CaptureStatus();
  }
  // A device kernel that draws at every run.
  {
    Devices d = MakeDevices(true);
    Model m;
    m.opset_imports[""] = 17;
    m.graph.inputs = {TensorInfo("x", DType::kFloat32, {4, 8})};
    m.graph.outputs = {TensorInfo("y", DType::kFloat32, {4, 8})};
    m.graph.initializers["ratio"] = Scalar(0.0f);  // keeps every element: results comparable with the CPU's
    m.graph.initializers["training"] = Tensor::FromVector<bool>({true}, {});
    m.graph.nodes = {MakeNode("Dropout", {"x", "ratio", "training"}, {"y"}, {}, "drop")};
    std::vector<NamedTensors> feeds;
    for (int r = 0; r < 6; ++r) feeds.push_back({{"x", Floats({4, 8}, static_cast<float>(r))}});
    auto ex = ExpectSameAsCpu(m, d, feeds);
    ASSERT_NE(ex, nullptr);
    EXPECT_NE(ex->CaptureStatus().find("node \"drop\" (Dropout) cannot be recorded"), std::string::npos)
        << ex->CaptureStatus();
  }
  // A host input that keys a recording may be at most 64 bytes: a 9-dim shape is 72.
  {
    Devices d = MakeDevices(true);
    Model m;
    m.opset_imports[""] = 17;
    m.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 8}), TensorInfo("shape", DType::kInt64, {9})};
    m.graph.outputs = {TensorInfo("y", DType::kFloat32, {})};
    m.graph.outputs[0].has_shape = false;
    m.graph.nodes = {MakeNode("Reshape", {"x", "shape"}, {"y"}, {}, "reshape")};
    auto ex = Executor::Create(m, {d.list, {}});
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    Tensor shape = Tensor::FromVector<int64_t>({1, 1, 1, 1, 1, 1, 1, 2, 8}, {9});
    for (int r = 0; r < 6; ++r) {
      std::vector<Tensor> out;
      ASSERT_TRUE(ex.value()->Run({{"x", Floats({2, 8}, 1.0f)}, {"shape", shape}}, {"y"}, &out).ok());
    }
    EXPECT_EQ(ex.value()->capture_stats().recorded, 0);
    EXPECT_NE(ex.value()->CaptureStatus().find("\"shape\" is read on the host and is 72 bytes"), std::string::npos)
        << ex.value()->CaptureStatus();
  }
}

// A provider that forwards to a simulated device but whose recordings fail when they end.
class FailingRecorder : public IExecutionProvider {
 public:
  explicit FailingRecorder(SimExecutionProvider* sim) : sim_(sim) {}
  const std::string& name() const override { return sim_->name(); }
  Device device() const override { return sim_->device(); }
  const KernelRegistry& kernel_registry() const override { return sim_->kernel_registry(); }
  IAllocator* allocator() override { return sim_->allocator(); }
  Status CopyTensor(const Tensor& src, Tensor* dst) override { return sim_->CopyTensor(src, dst); }
  Status Run(OpKernel& kernel, KernelContext& ctx) override { return sim_->Run(kernel, ctx); }
  Status Synchronize() override { return sim_->Synchronize(); }
  ThreadPool* thread_pool() override { return sim_->thread_pool(); }
  bool can_capture() const override { return true; }
  Status BeginCapture() override { return sim_->BeginCapture(); }
  StatusOr<std::unique_ptr<CapturedWork>> EndCapture() override {
    ONT_RETURN_IF_ERROR(sim_->EndCapture().status());
    return Internal("graph instantiation failed (injected)");
  }
  void AbortCapture() override { sim_->AbortCapture(); }

 private:
  SimExecutionProvider* sim_;
};

TEST(GraphCaptureTest, AFailedRecordingLeavesTheRunRightAndItsShapesEager) {
  Devices d = MakeDevices(true);
  FailingRecorder failing(d.sim.get());
  d.list[0] = &failing;
  std::vector<NamedTensors> runs;
  for (int r = 0; r < 8; ++r) runs.push_back({{"x", Floats({2, 8}, static_cast<float>(r))}});
  auto ex = ExpectSameAsCpu(ReluMulModel(), d, runs);
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->capture_stats().recorded, 0);
  EXPECT_EQ(ex->capture_stats().replayed, 0);
  EXPECT_NE(ex->CaptureStatus().find("recording failed: graph instantiation failed (injected)"), std::string::npos)
      << ex->CaptureStatus();
  EXPECT_EQ(d.sim->stats().replays, 0);
}

// A run that fails on its own input while it is recorded returns that error, and its shapes stay recordable:
// only a recording that fails where the eager run works marks them eager.
TEST(GraphCaptureTest, ARunsOwnErrorWhileRecordedLeavesItsShapesRecordable) {
  Devices d = MakeDevices(true);
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {4, 8}), TensorInfo("index", DType::kInt64, {2})};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {2, 8})};
  m.graph.nodes = {MakeNode("Gather", {"x", "index"}, {"y"}, {}, "gather")};
  auto ex = Executor::Create(m, {d.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  auto run = [&](int64_t second) {
    std::vector<Tensor> out;
    return ex.value()->Run({{"x", Floats({4, 8}, 1.0f)}, {"index", Tensor::FromVector<int64_t>({1, second}, {2})}},
                           {"y"}, &out);
  };
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(run(3).ok());  // a plan, two warm-up runs
  Status bad = run(9);                                     // the run that is recorded: index 9 of 4 rows
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("index 9"), std::string::npos) << bad.ToString();
  EXPECT_EQ(ex.value()->CaptureStatus().find("recording failed"), std::string::npos) << ex.value()->CaptureStatus();
  for (int r = 0; r < 4; ++r) ASSERT_TRUE(run(3).ok());
  EXPECT_EQ(ex.value()->capture_stats().recorded, 1) << ex.value()->CaptureStatus();
  EXPECT_GE(ex.value()->capture_stats().replayed, 3) << ex.value()->CaptureStatus();
}

// ---------------------------------------------------------------------------------------------------------
// The simulated device's recordings, kernel by kernel: nothing runs while recorded, a replay reads device
// memory as it is then, and host inputs keep the values they had when recorded (as a CUDA graph's launch
// arguments do).
TEST(SimRecordingTest, HostInputsAreFrozenAndDeviceMemoryIsReadLive) {
  SimProviderOptions o;
  o.graph_capture = true;
  o.ops = {"Clip"};
  auto sim = SimExecutionProvider::Create(o).value();
  Node node = MakeNode("Clip", {"x", "lo", "hi"}, {"y"}, {}, "clip");
  const KernelDef* def = sim->kernel_registry().FindAnyType("", "Clip", 17);
  ASSERT_NE(def, nullptr);
  NodeInfo info{&node, 17, {nullptr}};
  auto kernel = def->create(info).value();
  Tensor x = Tensor::Allocate(DType::kFloat32, {4}, sim->allocator()).value();
  Tensor y = Tensor::Allocate(DType::kFloat32, {4}, sim->allocator()).value();
  ASSERT_TRUE(sim->CopyTensor(Tensor::FromVector<float>({-3, -1, 1, 3}, {4}), &x).ok());
  Tensor lo = Scalar(-2.0f), hi = Scalar(2.0f);  // host inputs
  Value vx(x), vlo(lo), vhi(hi);
  KernelContext ctx;
  ctx.Reset({&vx, &vlo, &vhi}, {true}, nullptr);
  ASSERT_TRUE(kernel->Prepare(ctx).ok());
  ctx.outputs()[0] = Value(y);
  ASSERT_TRUE(sim->BeginCapture().ok());
  ASSERT_TRUE(sim->Run(*kernel, ctx).ok());
  EXPECT_FALSE(sim->Synchronize().ok()) << "a recording device cannot synchronize";
  auto work = sim->EndCapture();
  ASSERT_TRUE(work.ok()) << work.status().ToString();
  auto read_y = [&] {
    Tensor h = Tensor::Allocate(DType::kFloat32, {4}, HostAllocator()).value();
    EXPECT_TRUE(sim->CopyTensor(y, &h).ok());
    EXPECT_TRUE(sim->Synchronize().ok());
    return std::vector<float>(h.data<float>(), h.data<float>() + 4);
  };
  EXPECT_EQ(read_y(), std::vector<float>({0, 0, 0, 0})) << "a recorded launch ran before its replay";
  lo.data<float>()[0] = -0.5f;  // host input changed after the recording: not seen
  ASSERT_TRUE(sim->CopyTensor(Tensor::FromVector<float>({-4, -1, 1, 4}, {4}), &x).ok());  // device input: seen
  ASSERT_TRUE(work.value()->Replay().ok());
  EXPECT_EQ(read_y(), std::vector<float>({-2, -1, 1, 2}));
}

}  // namespace
}  // namespace ontrain
