// The fusion tests' helpers (fusion_test_util.h).
#include "tests/engine/fusion_test_util.h"

#include <cstring>

#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace testing {

std::vector<float> Values(int64_t n, uint32_t seed, bool zeros) {
  std::vector<float> v(n);
  for (float& f : v) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
    if (zeros && (seed >> 3) % 5 == 0) f = 0.0f;
  }
  return v;
}

FusionRuns RunBoth(const Model& m, const NamedTensors& feeds, int threads) {
  FusionRuns r;
  auto cpu = CpuExecutionProvider::Create({threads}).value();
  for (bool fuse : {true, false}) {
    ExecutorOptions options;
    options.providers = {cpu.get()};
    options.fuse_kernels = fuse;
    auto ex = Executor::Create(m, options);
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    if (!ex.ok()) return r;
    std::vector<Tensor> out;
    for (int run = 0; run < 2; ++run) {  // the second from the planned arenas
      // Fresh copies: a training graph updates buffers it is fed (running statistics) in place.
      NamedTensors copies;
      for (const auto& [name, t] : feeds) copies.push_back({name, t.Clone()});
      Status s = ex.value()->Run(ToNamedValues(copies), ex.value()->output_names(), &out);
      EXPECT_TRUE(s.ok()) << s.ToString();
    }
    if (fuse) {
      for (const Node& n : ex.value()->graph().nodes) {
        r.fused_ops.push_back(n.domain + "::" + n.op_type);
        if (n.GetInt("compact_indices", 0) != 0) r.compact_ops.push_back(n.op_type);
      }
    }
    (fuse ? r.fused : r.plain) = std::move(out);
  }
  return r;
}

void ExpectSameBits(const FusionRuns& r) {
  ASSERT_EQ(r.fused.size(), r.plain.size());
  for (size_t i = 0; i < r.fused.size(); ++i) {
    ASSERT_EQ(r.fused[i].shape(), r.plain[i].shape()) << "output " << i;
    ASSERT_EQ(r.fused[i].dtype(), r.plain[i].dtype()) << "output " << i;
    const size_t bytes = static_cast<size_t>(r.fused[i].NumElements()) * DTypeSize(r.fused[i].dtype());
    EXPECT_EQ(std::memcmp(r.fused[i].raw_data(), r.plain[i].raw_data(), bytes), 0) << "output " << i << " differs";
  }
}

void ExposeAccumulatedGradients(Model* training) {
  for (const Node& n : training->graph.nodes) {
    if (n.op_type != "InPlaceAccumulatorV2" || n.inputs.size() < 2) continue;
    ValueInfo v;
    v.name = n.inputs[1];
    v.dtype = DType::kFloat32;
    training->graph.outputs.push_back(v);
  }
}

int Count(const FusionRuns& r, const std::string& op) {
  int n = 0;
  for (const std::string& o : r.fused_ops) n += o == op;
  return n;
}

}  // namespace testing
}  // namespace ontrain
