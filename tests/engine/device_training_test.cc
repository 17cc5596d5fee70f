// Training on the simulated device (providers/sim). The planner partitions the training, eval and optimizer
// graphs between SIM (a subset of the CPU kernels, in page-protected memory, with queued copies back to the
// host) and the CPU; the session keeps the parameters, gradient buffers and moments on SIM. The results must
// be bit for bit those of the CPU provider alone: every loss, the eval outputs after training, the final
// parameters (read, and written back from a host buffer), the exported inference model and the checkpoint
// saved while the state is on the device. Also asserted per set: where the state lives (and that it comes
// back to the host when the session ends), one copy per value and destination device, shape values that
// never leave the host, and no allocation on either device in steady-state steps.
#include <cmath>
#include <cstring>
#include <set>

#include "checkpoint/checkpoint_io.h"
#include "core/file_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/sim/sim_provider.h"
#include "tests/ort_artifacts.h"

namespace ontrain {
namespace {

constexpr int kSteps = 6;
constexpr int kWarmup = 2;  // steps after which nothing may be allocated

struct Result {
  std::vector<uint32_t> losses;  // float bits
  std::vector<uint32_t> eval;
  std::vector<uint32_t> params;
  std::vector<uint32_t> eval_after_load;  // eval outputs after CopyBufferToParameters of halved parameters
  std::string exported;                   // ExportModelForInferencing's file
  std::string checkpoint;        // serialized while the session (and its state placement) is alive
  std::string checkpoint_after;  // serialized after the session ended
};

std::vector<uint32_t> Bits(const Tensor& t) {
  std::vector<uint32_t> b(static_cast<size_t>(t.NumElements()));
  std::memcpy(b.data(), t.raw_data(), b.size() * 4);
  return b;
}

// Every read of a value is of a copy on the reader's device; one copy per (value, device); the host inputs
// of device kernels are host values that no device computed (no copy back just to learn a shape).
void CheckPlan(const Executor& ex, const char* graph) {
  SCOPED_TRACE(graph);
  const ExecutionPlan& p = ex.plan();
  const auto& providers = ex.providers();
  std::set<std::pair<int, std::string>> copies;
  for (const PlanStep& s : p.steps) {
    if (s.kind == PlanStep::Kind::kCopy) {
      EXPECT_TRUE(copies.insert({s.inputs[0], p.values[s.outputs[0]].device.ToString()}).second)
          << "two copies of " << p.values[s.inputs[0]].name;
      continue;
    }
    const NodePlacement& place = p.partition.nodes[s.node];
    Device dev = providers[s.provider]->device();
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      int v = s.inputs[i];
      if (v < 0 || place.def == nullptr) continue;
      const PlannedValue& pv = p.values[v];
      if (place.def->is_shape_only_input(static_cast<int>(i))) continue;
      if (place.def->is_host_input(static_cast<int>(i))) {
        EXPECT_TRUE(pv.device.is_host()) << pv.name;
        if (!dev.is_host()) {
          EXPECT_TRUE(pv.source < 0 || p.values[pv.source].device.is_host())
              << "a device kernel learns \"" << pv.name << "\" through a copy back from the device";
        }
      } else {
        EXPECT_EQ(pv.device, dev) << pv.name;
      }
    }
  }
}

struct Devices {
  std::unique_ptr<CpuExecutionProvider> cpu;
  std::unique_ptr<SimExecutionProvider> sim;
  std::vector<IExecutionProvider*> list;
};

Devices MakeDevices(bool sim) {
  Devices d;
  d.cpu = CpuExecutionProvider::Create({2}).value();
  if (sim) {
    SimProviderOptions o;
    o.threads = 2;
    d.sim = SimExecutionProvider::Create(o).value();
    d.list.push_back(d.sim.get());
  }
  d.list.push_back(d.cpu.get());
  return d;
}

void Train(const testing::ArtifactSet& set, bool on_sim, Result* r) {
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  testing::LoadedSet& l = loaded.value();
  Devices d = MakeDevices(on_sim);
  {
    auto created = TrainingSession::Create({d.list}, &l.state, l.train, l.eval, l.optimizer);
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    TrainingSession& s = *created.value();
    if (on_sim) {
      // The state lives on the device, every trainable parameter, gradient buffer and moment.
      for (const auto& [name, p] : l.state.parameters) {
        if (p.requires_grad) {
          EXPECT_EQ(p.data.device(), d.sim->device()) << name;
        }
      }
      for (const auto& [name, ps] : l.state.optimizer_groups.at("group0").param_states) {
        for (const auto& [m, t] : ps.momentums) EXPECT_EQ(t.device(), d.sim->device()) << name << " " << m;
      }
      CheckPlan(s.train_executor(), "training");
      CheckPlan(*s.eval_executor(), "eval");
      CheckPlan(s.optimizer()->executor(), "optimizer");
    }
    int64_t cpu_allocs = 0, sim_allocs = 0;
    for (int step = 0; step < kSteps; ++step) {
      if (step == kWarmup) {
        cpu_allocs = d.cpu->cpu_allocator().stats().num_allocs;
        sim_allocs = on_sim ? d.sim->allocator_stats().num_allocs.load() : 0;
      }
      std::vector<Tensor> out;
      ASSERT_TRUE(s.TrainStep(testing::MakeBatch(set, step), &out).ok());
      ASSERT_TRUE(s.OptimizerStep().ok());
      s.LazyResetGrad();
      r->losses.push_back(Bits(out[0])[0]);
    }
    EXPECT_EQ(d.cpu->cpu_allocator().stats().num_allocs, cpu_allocs) << "CPU allocations in steady-state steps";
    if (on_sim) {
      EXPECT_EQ(d.sim->allocator_stats().num_allocs, sim_allocs) << "SIM allocations in steady-state steps";
      EXPECT_GT(d.sim->stats().copies_to_host, 0);
      EXPECT_GT(d.sim->stats().synchronizations, 0);
    }
    std::vector<Tensor> eval_out;
    ASSERT_TRUE(s.EvalStep(testing::MakeBatch(set, kSteps), &eval_out).ok());
    r->eval = Bits(eval_out[0]);
    auto size = s.GetParametersSize(false);
    ASSERT_TRUE(size.ok());
    Tensor flat = Tensor::Allocate(DType::kFloat32, {static_cast<int64_t>(size.value())}, HostAllocator()).value();
    ASSERT_TRUE(s.CopyParametersToBuffer(&flat, false).ok());
    r->params = Bits(flat);
    // Parameters written from a host buffer land where they live, and the next step sees them.
    for (int64_t i = 0; i < flat.NumElements(); ++i) flat.data<float>()[i] *= 0.5f;
    ASSERT_TRUE(s.CopyBufferToParameters(flat, false).ok());
    ASSERT_TRUE(s.EvalStep(testing::MakeBatch(set, kSteps), &eval_out).ok());
    r->eval_after_load = Bits(eval_out[0]);
    std::string exported = ::testing::TempDir() + "/device_export_" + set.name + (on_sim ? "_sim" : "_cpu") + ".onnx";
    ASSERT_TRUE(s.ExportModelForInferencing(exported, {s.eval_output_names()[0]}).ok());
    auto bytes_of_export = ReadFileToString(exported);
    ASSERT_TRUE(bytes_of_export.ok());
    r->exported = bytes_of_export.value();
    auto bytes = SerializeCheckpoint(l.state);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    r->checkpoint = bytes.value();
  }
  // The session is gone: the state is back on the host, whole.
  for (const auto& [name, p] : l.state.parameters) EXPECT_TRUE(p.data.device().is_host()) << name;
  EXPECT_TRUE(l.state.devices.empty());
  auto after = SerializeCheckpoint(l.state);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  r->checkpoint_after = after.value();
}

class DeviceTrainingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeviceTrainingTest, SimulatedDeviceMatchesCpuBitForBit) {
  const testing::ArtifactSet& set = testing::FindSet(GetParam());
  std::string why;
  if (!testing::LoadSet(set, &why).ok() && !why.empty()) GTEST_SKIP() << why;
  Result cpu, sim;
  ASSERT_NO_FATAL_FAILURE(Train(set, false, &cpu));
  ASSERT_NO_FATAL_FAILURE(Train(set, true, &sim));
  EXPECT_EQ(sim.losses, cpu.losses);
  EXPECT_EQ(sim.eval, cpu.eval);
  EXPECT_EQ(sim.params, cpu.params);
  EXPECT_EQ(sim.eval_after_load, cpu.eval_after_load);
  EXPECT_TRUE(sim.exported == cpu.exported) << "inference model exported from the device differs";
  EXPECT_TRUE(sim.checkpoint == cpu.checkpoint) << "checkpoint saved from the device differs";
  EXPECT_TRUE(sim.checkpoint_after == cpu.checkpoint);
}

// OptimizerStep on the device queues its work and returns: no synchronization and no copy back (an optimizer
// node without update_signal always sets its flag, so the flag is not read), yet the step counts. The
// results stay the CPU's (SimulatedDeviceMatchesCpuBitForBit; on CUDA, whose stream really runs later,
// tests/parity's training runs).
TEST(DeviceOptimizerStepTest, QueuesItsWorkWithoutWaitingForTheDevice) {
  const testing::ArtifactSet& set = testing::FindSet("gen-mlp");
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  testing::LoadedSet& l = loaded.value();
  Devices d = MakeDevices(true);
  auto created = TrainingSession::Create({d.list}, &l.state, l.train, l.eval, l.optimizer);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TrainingSession& s = *created.value();
  for (int step = 0; step < 3; ++step) {
    std::vector<Tensor> out;
    ASSERT_TRUE(s.TrainStep(testing::MakeBatch(set, step), &out).ok());
    const int64_t syncs = d.sim->stats().synchronizations, back = d.sim->stats().copies_to_host,
                  runs = d.sim->stats().runs, counted = s.optimizer()->step();
    ASSERT_TRUE(s.OptimizerStep().ok());
    EXPECT_GT(d.sim->stats().runs, runs) << "the optimizer ran on the host";
    EXPECT_EQ(d.sim->stats().synchronizations, syncs) << "OptimizerStep waited for the device";
    EXPECT_EQ(d.sim->stats().copies_to_host, back) << "OptimizerStep copied a result back";
    EXPECT_EQ(s.optimizer()->step(), counted + 1);
    s.LazyResetGrad();
  }
}

// A step's outputs on the device are copied to the host with one wait for the device, not one per output:
// the copies are queued, then the device synchronized once (on CUDA each copy lands in page-locked memory,
// providers/cuda/cuda_provider.h). An MLP whose training and eval models also output the logits: both
// outputs are the CPU's, bit for bit (the simulated device fills a destination with NaN until the wait).
TEST(DeviceOutputsTest, AreCopiedBackWithOneWait) {
  ArtifactOptions o;
  o.extra_outputs = {"logits"};
  auto a = GenerateArtifacts(MakeMlpClassifier(12, {16}, 5, 3), o);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  const std::string dir = ::testing::TempDir() + "/device_outputs";
  ASSERT_TRUE(WriteArtifacts(a.value(), dir).ok());
  std::vector<std::vector<Tensor>> results[2];
  for (bool on_sim : {false, true}) {
    CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
    Devices d = MakeDevices(on_sim);
    if (on_sim) {  // the whole graph on the device, the loss too (as on CUDA): no copy in the middle of a step
      SimProviderOptions all;
      all.ops = AllCpuOps();
      d.sim = SimExecutionProvider::Create(all).value();
      d.list[0] = d.sim.get();
    }
    auto created = TrainingSession::Create({d.list}, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                           ModelSource::FromPath(dir + "/eval_model.onnx"),
                                           ModelSource::FromPath(dir + "/optimizer_model.onnx"));
    ASSERT_TRUE(created.ok()) << created.status().ToString();
    TrainingSession& s = *created.value();
    for (int step = 0; step < 3; ++step) {
      std::vector<float> x(4 * 12);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.3 * i + step));
      const std::vector<Tensor> batch = {Tensor::FromVector(x, {4, 12}),
                                         Tensor::FromVector(std::vector<int64_t>{0, 1, 2, step}, {4})};
      const int64_t syncs = on_sim ? d.sim->stats().synchronizations : 0;
      const int64_t back = on_sim ? d.sim->stats().copies_to_host : 0;
      std::vector<Tensor> out, eval;
      ASSERT_TRUE(s.TrainStep(batch, &out).ok());
      ASSERT_EQ(out.size(), 2u);
      if (on_sim) {
        EXPECT_EQ(d.sim->stats().copies_to_host - back, 2) << "the loss and the logits";
        EXPECT_EQ(d.sim->stats().synchronizations - syncs, 1) << "TrainStep waited once per output";
      }
      ASSERT_TRUE(s.OptimizerStep().ok());
      s.LazyResetGrad();
      ASSERT_TRUE(s.EvalStep(batch, &eval).ok());
      ASSERT_EQ(eval.size(), 2u);
      for (const std::vector<Tensor>* r : {&out, &eval}) {
        std::vector<Tensor> copies;
        for (const Tensor& t : *r) {
          ASSERT_TRUE(t.device().is_host());
          copies.push_back(t.Clone());
        }
        results[on_sim].push_back(copies);
      }
    }
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) {
    for (size_t k = 0; k < results[0][i].size(); ++k) {
      const Tensor &c = results[0][i][k], &sim = results[1][i][k];
      ASSERT_EQ(c.SizeInBytes(), sim.SizeInBytes());
      EXPECT_EQ(std::memcmp(c.raw_data(), sim.raw_data(), c.SizeInBytes()), 0) << "result " << i << " output " << k;
      for (int64_t e = 0; e < sim.NumElements(); ++e) ASSERT_FALSE(std::isnan(sim.data<float>()[e]));
    }
  }
}

// A state lives on one session's devices at a time. A second session over it, made while the first holds it
// on a device (as the Python API once did when an optimizer was attached: the new session first, then the
// old one released), is refused with an error that says so and leaves the first untouched; once the first
// is released the second takes the state, and training goes on exactly as on the CPU (where both sessions
// may coexist: the state stays on the host).
TEST(DeviceSessionHandoverTest, ASecondSessionTakesTheStateOnceTheFirstIsReleased) {
  const testing::ArtifactSet& set = testing::FindSet("gen-mlp");
  std::string why;
  std::vector<float> losses[2];
  for (bool on_sim : {false, true}) {
    auto loaded = testing::LoadSet(set, &why);
    if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    testing::LoadedSet& l = loaded.value();
    Devices first = MakeDevices(on_sim), second = MakeDevices(on_sim);
    auto s1 = TrainingSession::Create({first.list}, &l.state, l.train, l.eval, l.optimizer);
    ASSERT_TRUE(s1.ok()) << s1.status().ToString();
    auto step = [&](TrainingSession& s, int k) {
      std::vector<Tensor> out;
      Status st = s.TrainStep(testing::MakeBatch(set, k), &out);
      ASSERT_TRUE(st.ok()) << st.ToString();
      st = s.OptimizerStep();
      ASSERT_TRUE(st.ok()) << st.ToString();
      s.LazyResetGrad();
      losses[on_sim].push_back(out[0].data<float>()[0]);
    };
    for (int k = 0; k < 2; ++k) ASSERT_NO_FATAL_FAILURE(step(*s1.value(), k));
    {
      auto early = TrainingSession::Create({second.list}, &l.state, l.train, l.eval, l.optimizer);
      EXPECT_EQ(early.ok(), !on_sim);
      if (on_sim) {
        EXPECT_EQ(early.status().code(), StatusCode::kFailedPrecondition);
        EXPECT_NE(early.status().message().find("held on SIM:0 by another training session"), std::string::npos)
            << early.status().message();
      }
    }
    ASSERT_NO_FATAL_FAILURE(step(*s1.value(), 2));  // the refused session changed nothing
    s1.value().reset();
    first = Devices();
    auto s2 = TrainingSession::Create({second.list}, &l.state, l.train, l.eval, l.optimizer);
    ASSERT_TRUE(s2.ok()) << s2.status().ToString();
    for (int k = 3; k < 5; ++k) ASSERT_NO_FATAL_FAILURE(step(*s2.value(), k));
    s2.value().reset();
    for (const auto& [name, p] : l.state.parameters) EXPECT_TRUE(p.data.device().is_host()) << name;
  }
  EXPECT_EQ(losses[0], losses[1]);
}

INSTANTIATE_TEST_SUITE_P(Sets, DeviceTrainingTest,
                         ::testing::Values("gen-mlp", "gen-cnn", "gen-bn", "gen-encoder", "ort-testdata-mlp",
                                           "srij-transformer-lora", "opt-clip", "opt-sequence-ops", "opt-sgd-clip-lr"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ontrain
