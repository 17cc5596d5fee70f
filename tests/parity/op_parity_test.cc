// CUDA-vs-CPU parity, op by op: every case of op_cases.cc runs as a single-node graph on the CPU provider
// alone and on the CUDA provider (the CPU only as fallback, which must not be needed: the test asserts the
// node ran on CUDA), from the same seeded inputs; every output, and every input the kernel updates in
// place, is compared within the case's tolerance. A coverage test (which needs no GPU) asserts that every
// (op, dtype) row of the CUDA kernel list has a case.
//
// Without a GPU every case skips and says why. The same cases also run everywhere against the simulated
// device (providers/sim: the CPU kernels in page-protected memory), which proves each case well-formed
// and the harness's device feeding and fetching sound before a GPU ever runs them.
#include <set>

#include "engine/executor.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/sim/sim_provider.h"
#include "gtest/gtest.h"
#include "tests/parity/op_cases.h"

namespace ontrain {
namespace parity {
namespace {

std::string RowKey(const std::string& domain, const std::string& op, DType t) {
  return StrCat(domain.empty() ? "" : domain + "::", op, " ", DTypeName(t));
}

// The CUDA kernel list's (op, dtype) pairs that have no case.
TEST(OpParityCoverage, EveryCudaKernelRowHasCases) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();
  std::set<std::string> covered;
  for (const OpCase& c : OpCases()) {
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      covered.insert(StrCat(RowKey(c.domain, c.op, c.inputs[i].dtype()), " #", i));
    }
  }
  int rows = 0;
  for (const KernelDef& d : api.value()->KernelList()) {
    for (DType t : d.types) {
      ++rows;
      std::string key = StrCat(RowKey(d.domain, d.op, t), " #", d.type_input);
      EXPECT_TRUE(covered.count(key)) << "no parity case for " << RowKey(d.domain, d.op, t);
    }
  }
  EXPECT_GT(rows, 100);
}

TEST(OpParityCoverage, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const OpCase& c : OpCases()) EXPECT_TRUE(names.insert(c.name).second) << c.name;
}

Model SingleNodeModel(const OpCase& c) {
  Model m;
  m.opset_imports[""] = c.domain.empty() ? c.opset : 17;
  if (!c.domain.empty()) m.opset_imports[c.domain] = c.opset;
  std::vector<std::string> ins, outs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const Value& v = c.inputs[i];
    if (!v.defined()) {
      ins.push_back("");
      continue;
    }
    ins.push_back("in" + std::to_string(i));
    m.graph.inputs.push_back(v.is_sequence() ? SequenceInfo(ins.back(), v.dtype())
                                             : TensorInfo(ins.back(), v.dtype(), v.tensor().shape()));
  }
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    outs.push_back("out" + std::to_string(i));
    if (i < c.output_shapes.size()) {
      m.graph.outputs.push_back(TensorInfo(outs.back(), c.outputs[i], c.output_shapes[i]));
    } else {
      m.graph.outputs.push_back(TensorInfo(outs.back(), c.outputs[i], {}));
      m.graph.outputs.back().has_shape = false;
    }
  }
  m.graph.nodes.push_back(MakeNode(c.op, ins, outs, c.attrs, "node", c.domain));
  return m;
}

// A deep host copy (in-place kernels must not change the case's own inputs).
Value CloneValue(const Value& v) {
  if (!v.is_sequence()) return v.defined() ? Value(v.tensor().Clone()) : Value();
  TensorSequence items;
  for (const Tensor& t : *v.sequence()) items.push_back(t.Clone());
  return Value::Sequence(std::move(items));
}

// `v` copied to `p`'s device.
StatusOr<Value> ToDevice(const Value& v, IExecutionProvider* p) {
  auto one = [&](const Tensor& t) -> StatusOr<Tensor> {
    ONT_ASSIGN_OR_RETURN(Tensor d, Tensor::Allocate(t.dtype(), t.shape(), p->allocator()));
    ONT_RETURN_IF_ERROR(p->CopyTensor(t, &d));
    return d;
  };
  if (!v.is_sequence()) {
    ONT_ASSIGN_OR_RETURN(Tensor t, one(v.tensor()));
    return Value(t);
  }
  TensorSequence items;
  for (const Tensor& t : *v.sequence()) {
    ONT_ASSIGN_OR_RETURN(Tensor d, one(t));
    items.push_back(d);
  }
  return Value::Sequence(std::move(items));
}

struct RunResult {
  std::vector<Tensor> outputs;  // host copies
  std::vector<Tensor> updated;  // in-place inputs after the run, flattened, host copies
};

enum class Side { kCpu, kCuda, kSim };

// {cpu}, {cuda, cpu} or {sim offering the case's op, cpu}.
StatusOr<ProviderList> CaseProviders(const OpCase& c, Side side) {
  if (side != Side::kSim) return MakeProviders(side == Side::kCuda);
  SimProviderOptions o;
  o.threads = 2;
  o.ops = {c.domain.empty() ? c.op : c.domain + "::" + c.op};
  ProviderList list;
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<SimExecutionProvider> sim, SimExecutionProvider::Create(o));
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<CpuExecutionProvider> cpu, CpuExecutionProvider::Create({2}));
  list.ordered = {sim.get(), cpu.get()};
  list.owned.push_back(std::move(sim));
  list.owned.push_back(std::move(cpu));
  return list;
}

// Runs the case; on a device, inputs its kernel row updates in place are fed on the device.
void RunCase(const OpCase& c, Side side, RunResult* r) {
  bool cuda = side != Side::kCpu;  // "on a device"
  auto providers = CaseProviders(c, side);
  ASSERT_TRUE(providers.ok()) << providers.status().ToString();
  IExecutionProvider* first = providers->ordered[0];
  Model m = SingleNodeModel(c);
  const KernelDef* def = first->kernel_registry().FindAnyType(c.domain, c.op, c.opset);
  ExecutorOptions o{providers->ordered, {}};
  NamedValues feeds;
  std::vector<Value> in_place;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].defined()) continue;
    Value v = CloneValue(c.inputs[i]);
    std::string name = "in" + std::to_string(i);
    if (cuda && def != nullptr && def->is_in_place_input(static_cast<int>(i))) {
      auto d = ToDevice(v, first);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      v = d.value();
      o.input_devices[name] = first->device();
    }
    if (def != nullptr && def->is_in_place_input(static_cast<int>(i))) in_place.push_back(v);
    feeds.push_back({name, v});
  }
  auto ex = Executor::Create(m, o);
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  if (cuda) {
    const NodePlacement& place = ex.value()->plan().partition.nodes[0];
    ASSERT_EQ(place.provider, 0) << "the node ran on " << providers->ordered[place.provider]->name() << ": "
                                 << place.why_fallback;
  }
  std::vector<std::string> fetch;
  for (size_t i = 0; i < c.outputs.size(); ++i) fetch.push_back("out" + std::to_string(i));
  std::vector<Tensor> out;
  Status s = ex.value()->Run(feeds, fetch, &out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  for (const Tensor& t : out) {
    auto h = ex.value()->ToHost(t);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    r->outputs.push_back(h.value().Clone());  // fetched host tensors are executor memory
  }
  std::vector<IDataTransfer*> transfers(providers->ordered.begin(), providers->ordered.end());
  for (IExecutionProvider* p : providers->ordered) ASSERT_TRUE(p->Synchronize().ok());
  for (const Value& v : in_place) {
    std::vector<Tensor> items = v.is_sequence() ? *v.sequence() : std::vector<Tensor>{v.tensor()};
    for (const Tensor& t : items) {
      auto h = CopyToHost(t, transfers);
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      for (IExecutionProvider* p : providers->ordered) ASSERT_TRUE(p->Synchronize().ok());
      r->updated.push_back(h.value().Clone());
    }
  }
}

void CheckParity(const OpCase& c, Side device) {
  RunResult cpu, cuda;
  ASSERT_NO_FATAL_FAILURE(RunCase(c, Side::kCpu, &cpu));
  ASSERT_NO_FATAL_FAILURE(RunCase(c, device, &cuda));
  ASSERT_EQ(cpu.outputs.size(), cuda.outputs.size());
  for (size_t i = 0; i < cpu.outputs.size(); ++i) {
    std::string diff = Compare(cpu.outputs[i], cuda.outputs[i], c.tol);
    EXPECT_TRUE(diff.empty()) << "output " << i << ": " << diff;
  }
  ASSERT_EQ(cpu.updated.size(), cuda.updated.size());
  for (size_t i = 0; i < cpu.updated.size(); ++i) {
    std::string diff = Compare(cpu.updated[i], cuda.updated[i], c.tol);
    EXPECT_TRUE(diff.empty()) << "in-place input tensor " << i << ": " << diff;
  }
}

class OpParityTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OpParityTest, CudaMatchesCpu) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  CheckParity(OpCases()[GetParam()], Side::kCuda);
}

// The harness on the simulated device: bit for bit (the same kernels), so a zero tolerance would do; the
// case's own tolerance is used to exercise the same comparison.
class OpHarnessOnSimTest : public ::testing::TestWithParam<size_t> {};

TEST_P(OpHarnessOnSimTest, SimMatchesCpu) { CheckParity(OpCases()[GetParam()], Side::kSim); }

std::vector<size_t> CaseIndices() {
  std::vector<size_t> v(OpCases().size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

std::string CaseName(const ::testing::TestParamInfo<size_t>& info) { return OpCases()[info.param].name; }

INSTANTIATE_TEST_SUITE_P(Ops, OpParityTest, ::testing::ValuesIn(CaseIndices()), CaseName);
INSTANTIATE_TEST_SUITE_P(Ops, OpHarnessOnSimTest, ::testing::ValuesIn(CaseIndices()), CaseName);

}  // namespace
}  // namespace parity
}  // namespace ontrain
