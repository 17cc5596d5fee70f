// The planner on small graphs split between the simulated device (providers/sim) and the CPU: which
// provider runs each node and why, one copy per value and destination device (also between two devices,
// through the host), shape computations kept on the host, synchronization only before host reads of
// device data, sequences copied whole, in-place inputs refused on the wrong device, and no allocation on
// either device once a shape is planned. Results are checked against hand-computed values.
#include <cmath>
#include <map>

#include "engine/executor.h"
#include "engine/op_profile.h"
#include "gmock/gmock.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/sim/sim_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

struct Devices {
  std::unique_ptr<SimExecutionProvider> sim;
  std::unique_ptr<CpuExecutionProvider> cpu;
  std::vector<IExecutionProvider*> list;
};

Devices Make(std::vector<std::string> sim_ops) {
  Devices s;
  SimProviderOptions o;
  o.ops = std::move(sim_ops);
  s.sim = SimExecutionProvider::Create(o).value();
  s.cpu = CpuExecutionProvider::Create({1}).value();
  s.list = {s.sim.get(), s.cpu.get()};
  return s;
}

Model Base() {
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports["com.microsoft"] = 1;
  return m;
}

int CountSyncs(const ExecutionPlan& p) {
  int n = 0;
  for (const PlanStep& s : p.steps) n += static_cast<int>(s.sync_before.size());
  return n;
}

const NodePlacement& PlacementOf(const Executor& ex, const Model& m, const std::string& node) {
  for (size_t i = 0; i < m.graph.nodes.size(); ++i) {
    if (m.graph.nodes[i].name == node) return ex.plan().partition.nodes[i];
  }
  static NodePlacement none;
  ADD_FAILURE() << "no node " << node;
  return none;
}

// x -> Relu (SIM) -> r; Exp(r), Neg(r) on the CPU; Add (SIM) of both -> y.
Model Diamond() {
  Model m = Base();
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {2, 3}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2, 3}));
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}, {}, "relu"), MakeNode("Exp", {"r"}, {"e"}, {}, "exp"),
                   MakeNode("Neg", {"r"}, {"n"}, {}, "neg"), MakeNode("Add", {"e", "n"}, {"y"}, {}, "add")};
  return m;
}

TEST(PlannerTest, AssignsCopiesOncePerValueAndDeviceAndSynchronizesOnce) {
  Devices s = Make({"Relu", "Add"});
  Model m = Diamond();
  auto ex = Executor::Create(m, {s.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const Executor& e = *ex.value();
  EXPECT_EQ(PlacementOf(e, m, "relu").provider, 0);
  EXPECT_EQ(PlacementOf(e, m, "exp").provider, 1);
  EXPECT_EQ(PlacementOf(e, m, "exp").why_fallback, "SIM: no kernel");
  EXPECT_EQ(PlacementOf(e, m, "neg").provider, 1);
  EXPECT_EQ(PlacementOf(e, m, "add").provider, 0);
  // x in, r out once (read by two CPU nodes), e and n in: four copies; one synchronization before Exp.
  EXPECT_EQ(e.plan().num_copy_steps(), 4);
  EXPECT_EQ(CountSyncs(e.plan()), 1);
  std::vector<float> x = {-1, 0.5f, 2, -3, 1, 0};
  std::vector<Tensor> out;
  int64_t syncs = s.sim->stats().synchronizations;
  ASSERT_TRUE(ex.value()->Run({{"x", Tensor::FromVector(x, {2, 3})}}, {"y"}, &out).ok());
  EXPECT_EQ(s.sim->stats().synchronizations - syncs, 1);
  EXPECT_EQ(out[0].device(), s.sim->device());
  auto host = ex.value()->ToHost(out[0]);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  for (size_t i = 0; i < x.size(); ++i) {
    float r = std::max(0.0f, x[i]);
    EXPECT_FLOAT_EQ(host->data<float>()[i], std::exp(r) - r) << i;
  }
}

// Profiled (`ontrain bench --profile`), a device kernel's time is its work's: the device is drained before
// and after each of its kernels (two synchronizations per device kernel beside the plan's one), and every
// node is tallied once; unprofiled, only the plan's synchronization remains.
TEST(PlannerTest, ProfilingDrainsTheDeviceAroundEachOfItsKernels) {
  Devices s = Make({"Relu", "Add"});
  Model m = Diamond();
  auto ex = Executor::Create(m, {s.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  NamedValues feeds = {{"x", Tensor::FromVector(std::vector<float>{-1, 0.5f, 2, -3, 1, 0}, {2, 3})}};
  std::vector<Tensor> out;
  ResetOpProfile();
  EnableOpProfile(true);
  int64_t syncs = s.sim->stats().synchronizations;
  Status st = ex.value()->Run(feeds, {"y"}, &out);
  EnableOpProfile(false);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(s.sim->stats().synchronizations - syncs, 1 + 2 * 2);
  std::map<std::string, int64_t> calls;
  for (const OpTime& t : OpProfile()) calls[t.op] = t.calls;
  EXPECT_EQ(calls, (std::map<std::string, int64_t>{{"Add", 1}, {"Exp", 1}, {"Neg", 1}, {"Relu", 1}}));
  syncs = s.sim->stats().synchronizations;
  ASSERT_TRUE(ex.value()->Run(feeds, {"y"}, &out).ok());
  EXPECT_EQ(s.sim->stats().synchronizations - syncs, 1);
}

TEST(PlannerTest, NothingIsAllocatedOnEitherDeviceOnceAShapeIsPlanned) {
  Devices s = Make({"Relu", "Add"});
  Model m = Diamond();
  m.graph.inputs[0] = TensorInfo("x", DType::kFloat32, {-1, 3});
  m.graph.inputs[0].dims[0] = Dim{-1, "batch"};
  m.graph.outputs[0].has_shape = false;
  auto ex = Executor::Create(m, {s.list, {}}).value();
  auto run = [&](int64_t batch) {
    std::vector<Tensor> out;
    Tensor x = Tensor::FromVector(std::vector<float>(batch * 3, 0.5f), {batch, 3});
    ASSERT_TRUE(ex->Run({{"x", x}}, {"y"}, &out).ok());
  };
  run(4);
  int64_t cpu = s.cpu->cpu_allocator().stats().num_allocs, sim = s.sim->allocator_stats().num_allocs;
  for (int i = 0; i < 3; ++i) run(4);
  EXPECT_EQ(s.cpu->cpu_allocator().stats().num_allocs, cpu);
  EXPECT_EQ(s.sim->allocator_stats().num_allocs, sim);
  EXPECT_GT(ex->last_arena_bytes(0), 0u);  // SIM's arena
  EXPECT_GT(ex->last_arena_bytes(1), 0u);  // the CPU's
  run(7);  // a new shape plans again
  EXPECT_EQ(ex->num_plans(), 2u);
}

TEST(PlannerTest, ShapeComputationsStayOnTheHost) {
  // Reshape(r, Concat(Gather(Shape(r), 0), [-1])) with r on SIM: the shape chain runs on the CPU from r's
  // shape alone, and the device Reshape reads its shape on the host. Only x is copied.
  Devices s = Make({"Relu", "Reshape", "Gather", "Concat"});
  Model m = Base();
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {2, 3, 4}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2, 12}));
  m.graph.AddInitializer("zero", Tensor::FromVector<int64_t>({0}, {1}));
  m.graph.AddInitializer("minus_one", Tensor::FromVector<int64_t>({-1}, {1}));
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}, {}, "relu"), MakeNode("Shape", {"r"}, {"s"}, {}, "shape"),
                   MakeNode("Gather", {"s", "zero"}, {"b"}, {}, "gather"),
                   MakeNode("Concat", {"b", "minus_one"}, {"target"}, {AttrInt("axis", 0)}, "concat"),
                   MakeNode("Reshape", {"r", "target"}, {"y"}, {}, "reshape")};
  auto ex = Executor::Create(m, {s.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const Executor& e = *ex.value();
  EXPECT_EQ(PlacementOf(e, m, "shape").provider, 1);
  EXPECT_EQ(PlacementOf(e, m, "gather").provider, 1);
  EXPECT_THAT(PlacementOf(e, m, "gather").why_fallback, HasSubstr("integer arithmetic on constants and shapes"));
  EXPECT_EQ(PlacementOf(e, m, "concat").provider, 1);
  EXPECT_EQ(PlacementOf(e, m, "reshape").provider, 0);
  EXPECT_EQ(e.plan().num_copy_steps(), 1);
  EXPECT_EQ(CountSyncs(e.plan()), 0);
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i % 5) - 2;
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run({{"x", Tensor::FromVector(x, {2, 3, 4})}}, {"y"}, &out).ok());
  EXPECT_EQ(out[0].shape(), (Shape{2, 12}));
  Tensor y = ex.value()->ToHost(out[0]).value();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(y.data<float>()[i], std::max(0.0f, x[i])) << i;
}

// The index arithmetic of a padding's gradient (as PyTorch exports F.pad): integers computed from a shape,
// some read on the host (Range's bounds), the last read by a device Gather. It all runs on the host and only
// its result is copied to the device: computed there, the Range's bound would come back (a synchronization).
TEST(PlannerTest, IntegerArithmeticOnShapesRunsOnTheHost) {
  Devices s = Make({"Relu", "Gather", "Sub", "Min"});
  Model m = Base();
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {2, 5}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2, 5}));
  m.graph.AddInitializer("one_at", Tensor::FromVector<int64_t>({1}, {}));
  m.graph.AddInitializer("zero", Tensor::FromVector<int64_t>({0}, {}));
  m.graph.AddInitializer("one", Tensor::FromVector<int64_t>({1}, {}));
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}, {}, "relu"), MakeNode("Shape", {"r"}, {"s"}, {}, "shape"),
                   MakeNode("Gather", {"s", "one_at"}, {"n"}, {}, "width"),
                   MakeNode("Sub", {"n", "one"}, {"last"}, {}, "last"),
                   MakeNode("Range", {"zero", "n", "one"}, {"j"}, {}, "range"),
                   MakeNode("Min", {"j", "last"}, {"k"}, {}, "clamp"),
                   MakeNode("Sub", {"last", "k"}, {"reversed"}, {}, "reverse"),
                   MakeNode("Gather", {"r", "reversed"}, {"y"}, {AttrInt("axis", 1)}, "gather")};
  auto ex = Executor::Create(m, {s.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const Executor& e = *ex.value();
  for (const char* host : {"width", "last", "clamp", "reverse"}) {
    EXPECT_EQ(PlacementOf(e, m, host).provider, 1) << host;
    EXPECT_THAT(PlacementOf(e, m, host).why_fallback, HasSubstr("integer arithmetic on constants and shapes")) << host;
  }
  EXPECT_EQ(PlacementOf(e, m, "gather").provider, 0);
  EXPECT_EQ(CountSyncs(e.plan()), 0);
  int to_device = 0;
  for (const PlanStep& st : e.plan().steps) {
    if (st.kind != PlanStep::Kind::kCopy) continue;
    EXPECT_FALSE(e.plan().values[st.outputs[0]].device.is_host()) << e.plan().values[st.inputs[0]].name;
    ++to_device;
  }
  EXPECT_EQ(to_device, 2);  // x, and the reversed indices
  std::vector<float> x = {1, -2, 3, -4, 5, -6, 7, -8, 9, -10};
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run({{"x", Tensor::FromVector(x, {2, 5})}}, {"y"}, &out).ok());
  Tensor y = ex.value()->ToHost(out[0]).value();
  for (int row = 0; row < 2; ++row) {
    for (int c = 0; c < 5; ++c) {
      EXPECT_EQ(y.data<float>()[row * 5 + c], std::max(0.0f, x[row * 5 + 4 - c])) << row << "," << c;
    }
  }
}

// ConcatTraining's lengths (shapes only) are read on the host by SplitTraining in the backward pass. With a
// device they are made by nodes of their own on the host (PrepareForPlanning), not on the device and copied
// back.
TEST(PlannerTest, ConcatLengthsAreMadeOnTheHost) {
  Devices s = Make({"Relu", "com.microsoft::ConcatTraining", "com.microsoft::SplitTraining"});
  Model m = Base();
  m.graph.inputs = {TensorInfo("a", DType::kFloat32, {2, 3}), TensorInfo("b", DType::kFloat32, {2, 4})};
  m.graph.outputs = {TensorInfo("oa", DType::kFloat32, {2, 3}), TensorInfo("ob", DType::kFloat32, {2, 4})};
  m.graph.nodes = {MakeNode("ConcatTraining", {"a", "b"}, {"c", "lengths"}, {AttrInt("axis", 1)}, "concat", "com.microsoft"),
                   MakeNode("Relu", {"c"}, {"r"}, {}, "relu"),
                   MakeNode("SplitTraining", {"r", "lengths"}, {"oa", "ob"}, {AttrInt("axis", 1)}, "split",
                            "com.microsoft")};
  auto ex = Executor::Create(m, {s.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  const Executor& e = *ex.value();
  EXPECT_EQ(CountSyncs(e.plan()), 0);
  for (const PlanStep& st : e.plan().steps) {
    if (st.kind == PlanStep::Kind::kCopy) {
      EXPECT_FALSE(e.plan().values[st.outputs[0]].device.is_host()) << e.plan().values[st.inputs[0]].name;
    }
  }
  const Graph& g = e.graph();
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].name == "concat/per_input_length") EXPECT_EQ(e.plan().partition.nodes[i].provider, 1);
    if (g.nodes[i].name == "concat") EXPECT_EQ(g.nodes[i].outputs.size(), 1u);
  }
  std::vector<float> a = {1, -2, 3, -4, 5, -6}, b = {-1, 2, -3, 4, -5, 6, -7, 8};
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run({{"a", Tensor::FromVector(a, {2, 3})}, {"b", Tensor::FromVector(b, {2, 4})}},
                              {"oa", "ob"}, &out).ok());
  Tensor oa = ex.value()->ToHost(out[0]).value(), ob = ex.value()->ToHost(out[1]).value();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(oa.data<float>()[i], std::max(0.0f, a[i])) << i;
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(ob.data<float>()[i], std::max(0.0f, b[i])) << i;
}

TEST(PlannerTest, CopiesBetweenTwoDevicesGoThroughTheHost) {
  SimProviderOptions a, b;
  a.ops = {"Relu"};
  b.ops = {"Exp"};
  b.device_index = 1;
  auto sim0 = SimExecutionProvider::Create(a).value();
  auto sim1 = SimExecutionProvider::Create(b).value();
  auto cpu = CpuExecutionProvider::Create({1}).value();
  Model m = Base();
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {3}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {3}));
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}), MakeNode("Exp", {"r"}, {"y"})};
  auto ex = Executor::Create(m, {{sim0.get(), sim1.get(), cpu.get()}, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex.value()->plan().num_copy_steps(), 3);  // x to SIM:0, r to the host, r to SIM:1
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run({{"x", Tensor::FromVector<float>({-1, 0, 2}, {3})}}, {"y"}, &out).ok());
  EXPECT_EQ(out[0].device(), sim1->device());
  Tensor y = ex.value()->ToHost(out[0]).value();
  EXPECT_EQ(testing::ToVector(y), (std::vector<float>{1, 1, std::exp(2.0f)}));
}

TEST(PlannerTest, SequencesAreCopiedWhole) {
  Devices s = Make({"SequenceAt", "Relu"});
  Model m = Base();
  m.graph.inputs = {SequenceInfo("items"), TensorInfo("k", DType::kInt64, {})};
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2}));
  m.graph.nodes = {MakeNode("SequenceAt", {"items", "k"}, {"t"}), MakeNode("Relu", {"t"}, {"y"})};
  auto ex = Executor::Create(m, {s.list, {}});
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex.value()->plan().num_copy_steps(), 1);  // the sequence; the position stays on the host
  std::vector<Tensor> out;
  NamedValues feeds = {{"items", Value::Sequence({Tensor::FromVector<float>({1, -2}, {2}),
                                                  Tensor::FromVector<float>({-3, 4}, {2})})},
                       {"k", Tensor::FromVector<int64_t>({1}, {})}};
  ASSERT_TRUE(ex.value()->Run(feeds, {"y"}, &out).ok());
  EXPECT_EQ(testing::ToVector(ex.value()->ToHost(out[0]).value()), (std::vector<float>{0, 4}));
}

TEST(PlannerTest, InPlaceInputsMustLiveOnTheirKernelsDevice) {
  Devices s = Make({"com.microsoft::InPlaceAccumulatorV2"});
  Model m = Base();
  m.graph.inputs = {TensorInfo("buffer", DType::kFloat32, {2}), TensorInfo("g", DType::kFloat32, {2})};
  m.graph.outputs.push_back(TensorInfo("done", DType::kBool, {1}));
  m.graph.nodes = {MakeNode("InPlaceAccumulatorV2", {"buffer", "g"}, {"done"}, {}, "acc", "com.microsoft")};
  auto wrong = Executor::Create(m, {s.list, {}});  // the buffer would be fed on the host
  ASSERT_FALSE(wrong.ok());
  EXPECT_THAT(wrong.status().message(), HasSubstr("updates input \"buffer\" in place, but that value lives on CPU"));
  auto right = Executor::Create(m, {s.list, {{"buffer", s.sim->device()}}});
  ASSERT_TRUE(right.ok()) << right.status().ToString();
  Tensor buffer = Tensor::Allocate(DType::kFloat32, {2}, s.sim->allocator()).value();
  ASSERT_TRUE(s.sim->CopyTensor(Tensor::FromVector<float>({1, 2}, {2}), &buffer).ok());
  std::vector<Tensor> out;
  ASSERT_TRUE(right.value()->Run({{"buffer", buffer}, {"g", Tensor::FromVector<float>({10, 20}, {2})}}, {}, &out).ok());
  EXPECT_EQ(testing::ToVector(right.value()->ToHost(buffer).value()), (std::vector<float>{11, 22}));
  // Fed on the wrong device: a clear error, not a fault.
  Status s2 = right.value()->Run({{"buffer", Tensor::FromVector<float>({1, 2}, {2})},
                                  {"g", Tensor::FromVector<float>({10, 20}, {2})}}, {}, &out);
  ASSERT_FALSE(s2.ok());
  EXPECT_THAT(s2.message(), HasSubstr("input \"buffer\" is on CPU but the plan expects it on SIM:0"));
}

// A provider that runs Relu on float64 only, to see the dtype in a fallback reason.
class Float64Relu : public IExecutionProvider {
 public:
  Float64Relu() : registry_(KernelRegistry::Create({{"", "Relu", 1, 21, {DType::kFloat64}, nullptr}}).value()) {}
  const std::string& name() const override { return name_; }
  Device device() const override { return {DeviceType::kSimulated, 7}; }
  const KernelRegistry& kernel_registry() const override { return registry_; }
  IAllocator* allocator() override { return nullptr; }
  Status CopyTensor(const Tensor&, Tensor*) override { return Unimplemented("not used"); }
  Status Synchronize() override { return Status::OK(); }

 private:
  std::string name_ = "F64";
  KernelRegistry registry_;
};

TEST(PlannerTest, PartitionSaysWhyANodeFallsBackAndNeedsAHostProviderLast) {
  Float64Relu f64;
  auto cpu = CpuExecutionProvider::Create({1}).value();
  Model m = Base();
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {3}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {3}));
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"r"}, {}, "relu"), MakeNode("Exp", {"r"}, {"y"}, {}, "exp")};
  auto p = PartitionGraph(m, {&f64, cpu.get()});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->nodes[0].provider, 1);
  EXPECT_EQ(p->nodes[0].why_fallback, "F64: no kernel for dtype float32");
  EXPECT_EQ(p->nodes[1].why_fallback, "F64: no kernel");
  auto no_host = PartitionGraph(m, {&f64});
  ASSERT_FALSE(no_host.ok());
  EXPECT_THAT(no_host.status().message(), HasSubstr("must end with a host provider"));
  m.graph.nodes[1].op_type = "NoSuchOp";
  auto unknown = PartitionGraph(m, {&f64, cpu.get()});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("no kernel for op NoSuchOp (domain ai.onnx, opset 17) on providers F64, CPU"));
}

}  // namespace
}  // namespace ontrain
