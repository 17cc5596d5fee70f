// The CPU kernels of the contrib and fused domains (com.microsoft, ai.ontrain) given float inputs of mixed
// precision: every op case of the parity table (op_cases.cc) that has at least two float32 inputs is run
// again with one of them as float64 (the same values). The kernel must either refuse it, or compute from
// its values: outputs as the all-float32 run's, within the case's tolerance. A kernel that reads the float64
// buffer as floats fails here (it sees other values); one reading a float32 buffer as doubles reads past its
// end (SoftmaxGrad did: the session fuzzer found it). The ONNX domain's ops are left out: ONNX's type
// inference checks their type constraints when a model loads. Then the recurrent gradients' optional inputs.
#include <gtest/gtest.h>

#include "graph/builder.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/kernel_registry.h"
#include "tests/parity/op_cases.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace parity {
namespace {

Tensor Widened(const Tensor& t) {
  Tensor d = Tensor::Allocate(DType::kFloat64, t.shape(), HostAllocator()).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) d.data<double>()[i] = t.data<float>()[i];
  return d;
}
Tensor Narrowed(const Tensor& t) {
  if (t.dtype() != DType::kFloat64) return t;
  Tensor f = Tensor::Allocate(DType::kFloat32, t.shape(), HostAllocator()).value();
  for (int64_t i = 0; i < t.NumElements(); ++i) f.data<float>()[i] = static_cast<float>(t.data<double>()[i]);
  return f;
}

TEST(MixedFloatInputsTest, AreRefusedOrComputedFromTheirValues) {
  KernelRegistry registry = KernelRegistry::Create(CpuKernelList()).value();
  int probed = 0, refused = 0, unprobed = 0;
  for (const OpCase& c : OpCases()) {
    if (c.domain.empty()) continue;
    std::vector<Tensor> inputs;
    std::vector<DType> dtypes;
    std::vector<std::string> in_names, out_names;
    int floats = 0;
    bool plain = true;  // tensors only (no sequences)
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const Value& v = c.inputs[i];
      if (v.defined() && v.is_sequence()) plain = false;
      inputs.push_back(v.defined() && !v.is_sequence() ? v.tensor() : Tensor());
      dtypes.push_back(inputs.back().defined() ? inputs.back().dtype() : DType::kUndefined);
      in_names.push_back(inputs.back().defined() ? "in" + std::to_string(i) : "");
      floats += dtypes.back() == DType::kFloat32;
    }
    if (!plain || floats < 2) continue;
    for (size_t o = 0; o < c.outputs.size(); ++o) out_names.push_back("out" + std::to_string(o));
    const Node node = MakeNode(c.op, in_names, out_names, c.attrs, c.name, c.domain);
    auto def = registry.Find(c.domain, c.op, c.opset, dtypes);
    ASSERT_TRUE(def.ok()) << c.name << ": " << def.status().ToString();
    const KernelRun base = RunCpuKernel(def.value()->create, node, c.opset, inputs);
    if (!base.status.ok()) {  // cases that need more than the kernel alone (declared output shapes)
      ++unprobed;
      continue;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (dtypes[i] != DType::kFloat32) continue;
      SCOPED_TRACE(c.name + ": input " + std::to_string(i) + " as float64");
      std::vector<Tensor> mixed = inputs;
      mixed[i] = Widened(inputs[i]);
      // The row the planner would pick for the mixed dtypes, when there is one.
      std::vector<DType> mixed_types = dtypes;
      mixed_types[i] = DType::kFloat64;
      auto mixed_def = registry.Find(c.domain, c.op, c.opset, mixed_types);
      if (!mixed_def.ok()) {  // no kernel takes these dtypes: the planner refuses the node
        ++refused;
        ++probed;
        continue;
      }
      const KernelRun run = RunCpuKernel(mixed_def.value()->create, node, c.opset, mixed);
      ++probed;
      if (!run.status.ok()) {
        ++refused;
        continue;
      }
      ASSERT_EQ(run.outputs.size(), base.outputs.size());
      for (size_t o = 0; o < base.outputs.size(); ++o) {
        Tolerance tol = c.tol;
        tol.atol = std::max(tol.atol, 1e-4);
        tol.rtol = std::max(tol.rtol, 1e-3);
        EXPECT_EQ(Compare(base.outputs[o], Narrowed(run.outputs[o]), tol), "") << "output " << o;
      }
    }
  }
  EXPECT_GT(probed, 30);
  std::printf("%d mixed-precision runs of contrib and fused kernels, %d refused; %d cases not run alone\n", probed,
              refused, unprobed);
}

// The recurrent gradients' optional inputs (not checked by the forward op's checks, which they do not
// run): a sequence length past the sequence, and an initial state of the wrong shape, are errors naming them
// where they used to be read out of bounds.
TEST(RecurrentGradientInputsTest, AreChecked) {
  KernelRegistry registry = KernelRegistry::Create(CpuKernelList()).value();
  struct G {
    const char* name;
    int lens, h0;
  };
  int checked = 0;
  for (const G& g : {G{"LSTMGrad_float32", 3, 4}, G{"GRUGrad_float32", 4, 5}, G{"RNNGrad_float32", 4, 5}}) {
    const OpCase* c = nullptr;
    for (const OpCase& oc : OpCases()) if (oc.name == g.name) c = &oc;
    ASSERT_NE(c, nullptr) << g.name;
    std::vector<Tensor> inputs;
    std::vector<DType> dtypes;
    std::vector<std::string> in_names, out_names;
    for (size_t i = 0; i < c->inputs.size(); ++i) {
      inputs.push_back(c->inputs[i].defined() ? c->inputs[i].tensor() : Tensor());
      dtypes.push_back(inputs.back().defined() ? inputs.back().dtype() : DType::kUndefined);
      in_names.push_back(inputs.back().defined() ? "in" + std::to_string(i) : "");
    }
    for (size_t o = 0; o < c->outputs.size(); ++o) out_names.push_back("out" + std::to_string(o));
    const Node node = MakeNode(c->op, in_names, out_names, c->attrs, c->name, c->domain);
    KernelFactory make = registry.Find(c->domain, c->op, c->opset, dtypes).value()->create;
    ASSERT_TRUE(RunCpuKernel(make, node, c->opset, inputs).status.ok()) << g.name;
    const int64_t seq = inputs[0].dim(0);
    std::vector<Tensor> bad = inputs;
    bad[g.lens] = inputs[g.lens].Clone();
    bad[g.lens].data<int32_t>()[0] = static_cast<int32_t>(seq + 1);
    Status st = RunCpuKernel(make, node, c->opset, bad).status;
    EXPECT_NE(st.ToString().find("is outside [0, " + std::to_string(seq) + "]"), std::string::npos) << st.ToString();
    bad = inputs;
    Shape h0 = inputs[g.h0].shape();
    h0.back() += 1;
    bad[g.h0] = Random(DType::kFloat32, h0, 7);
    st = RunCpuKernel(make, node, c->opset, bad).status;
    EXPECT_NE(st.ToString().find("input " + std::to_string(g.h0) + " has shape"), std::string::npos) << st.ToString();
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

}  // namespace
}  // namespace parity
}  // namespace ontrain
