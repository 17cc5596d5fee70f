// The fusion tests' helpers (fusion_test_util.h).
#include "tests/engine/fusion_test_util.h"

#include <cstring>

#include "graph/artifacts.h"
#include "graph/builder.h"
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

void RunGeneratedTraining(const Model& fwd, uint32_t seed, bool zeros, FusionRuns* r) {
  ArtifactOptions options;
  options.loss = LossKind::kMSE;
  auto a = GenerateArtifacts(fwd, options);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Model training = a.value().training;
  testing::ExposeAccumulatedGradients(&training);
  NamedTensors feeds;
  for (const ValueInfo& v : training.graph.inputs) {
    Shape s;
    for (const Dim& d : v.dims) s.push_back(d.known() ? d.value : 4);
    if (v.dtype == DType::kBool) feeds.push_back({v.name, Tensor::FromVector<bool>({true}, s)});
    else feeds.push_back({v.name, Tensor::FromVector(Values(ShapeNumElements(s), ++seed, zeros), s)});
  }
  *r = RunBoth(training, feeds);
}

int Count(const FusionRuns& r, const std::string& op) {
  int n = 0;
  for (const std::string& o : r.fused_ops) n += o == op;
  return n;
}

std::vector<onnx::AttributeProto> ConvAttrs(int64_t k, int64_t stride, int64_t pad, int64_t group) {
  return {AttrInts("kernel_shape", {k, k}), AttrInts("strides", {stride, stride}),
          AttrInts("pads", {pad, pad, pad, pad}), AttrInt("group", group)};
}

Model ConvPoolLayer(const ConvPoolSpec& s, bool conv_output_is_graph_output, bool grad_read_twice) {
  const int64_t n = s.n, m = s.m, k = s.k, oh = s.oh(), ow = s.ow(), ph = oh / 2, pw = ow / 2, cg = s.c / s.group;
  Model md;
  md.opset_imports[""] = 17;
  md.opset_imports["com.microsoft"] = 1;
  Graph& g = md.graph;
  g.inputs = {TensorInfo("x", DType::kFloat32, {n, s.c, s.h, s.w}), TensorInfo("w", DType::kFloat32, {m, cg, k, k}),
              TensorInfo("b", DType::kFloat32, {m}), TensorInfo("dz", DType::kFloat32, {n, m, ph, pw})};
  const std::vector<onnx::AttributeProto> conv = ConvAttrs(k, s.stride, s.pad, s.group);
  const std::vector<onnx::AttributeProto> pool = {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})};
  g.nodes.push_back(MakeNode("Conv", {"x", "w", "b"}, {"c"}, conv, "conv"));
  g.nodes.push_back(MakeNode("Relu", {"c"}, {"y"}, {}, "relu"));
  g.nodes.push_back(MakeNode("MaxPool", {"y"}, {"z", "i"}, pool, "pool"));
  g.nodes.push_back(MakeNode("MaxPoolGrad", {"dz", "i"}, {"dy"}, pool, "pool_grad"));
  g.nodes.push_back(MakeNode("ReluGrad", {"dy", "c"}, {"dc"}, {}, "relu_grad", "com.microsoft"));
  g.nodes.push_back(MakeNode("ConvGrad", {"dc", "x", "w"}, {s.first_layer ? "" : "dx", "dw", "db"}, conv, "conv_grad",
                             "com.microsoft"));
  g.value_infos = {TensorInfo("dy", DType::kFloat32, {n, m, oh, ow})};
  g.outputs = {TensorInfo("z", DType::kFloat32, {n, m, ph, pw}), TensorInfo("dw", DType::kFloat32, {m, cg, k, k}),
               TensorInfo("db", DType::kFloat32, {m})};
  if (!s.first_layer) {
    g.outputs.push_back(TensorInfo("dc", DType::kFloat32, {n, m, oh, ow}));
    g.outputs.push_back(TensorInfo("dx", DType::kFloat32, {n, s.c, s.h, s.w}));
  }
  if (conv_output_is_graph_output) g.outputs.push_back(TensorInfo("c", DType::kFloat32, {n, m, oh, ow}));
  if (grad_read_twice) {
    g.nodes.push_back(MakeNode("Neg", {"dy"}, {"neg_dy"}, {}, "neg"));
    g.outputs.push_back(TensorInfo("neg_dy", DType::kFloat32, {n, m, oh, ow}));
  }
  return md;
}

NamedTensors TrainingFeeds(const Model& training, const Model& fwd, uint32_t seed, int64_t symbolic_dim,
                           int64_t label) {
  NamedTensors feeds;
  for (const ValueInfo& v : training.graph.inputs) {
    if (training.graph.initializers.count(v.name)) continue;
    if (auto it = fwd.graph.initializers.find(v.name); it != fwd.graph.initializers.end()) {
      feeds.push_back({v.name, it->second.Clone()});
      continue;
    }
    Shape s;
    for (const Dim& d : v.dims) s.push_back(d.known() ? d.value : symbolic_dim);
    if (v.dtype == DType::kBool) {
      feeds.push_back({v.name, Tensor::FromVector<bool>({true}, s)});
    } else if (v.dtype == DType::kInt64) {
      feeds.push_back({v.name, Tensor::FromVector(std::vector<int64_t>(ShapeNumElements(s), label), s)});
    } else {
      feeds.push_back({v.name, Tensor::FromVector(Values(ShapeNumElements(s), ++seed), s)});
    }
  }
  return feeds;
}

}  // namespace testing
}  // namespace ontrain
