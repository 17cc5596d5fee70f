// The executor's kernel fusions of convolutions, pooling and Clip's gradient (engine/kernel_fusion.h; batch
// normalization's are in batch_norm_fusion_test, Gelu's and the linear layers' bias in
// transformer_fusion_test): a fused graph gives the same bits as the same graph run node by node, the fused
// ops replace exactly the groups the rules allow, a FusedConv whose activation the CPU provider lacks is a
// clear error, and the fused ops refuse inputs they cannot take.
#include "engine/kernel_fusion.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::ConvAttrs;
using testing::ConvPoolLayer;
using testing::ConvPoolSpec;
using testing::Count;
using testing::ExpectSameBits;
using testing::RunBoth;
using testing::Values;
using Runs = testing::FusionRuns;

// The benchmark CNN's first layer's kind: square, stride 1, no pads.
Model CnnLayer(int64_t n, int64_t c, int64_t h, int64_t m, bool conv_output_is_graph_output, bool grad_read_twice,
               bool first_layer = false, int64_t k = 3) {
  ConvPoolSpec s{n, c, h, h, m, k};
  s.first_layer = first_layer;
  return ConvPoolLayer(s, conv_output_is_graph_output, grad_read_twice);
}

NamedTensors CnnFeeds(int64_t n, int64_t c, int64_t h, int64_t m, int64_t k = 3) {
  const int64_t ph = (h - k + 1) / 2;
  std::vector<float> b = Values(m, 3, false);
  b[0] = b[m / 2] = 0.0f;  // with zero patches of x: exact zeros out of the convolution
  std::vector<float> x = Values(n * c * h * h, 1);
  for (int64_t i = 0; i < c * h * h / 2; ++i) x[i] = 0.0f;  // half of image 0
  return {{"x", Tensor::FromVector(x, {n, c, h, h})},
          {"w", Tensor::FromVector(Values(m * c * k * k, 2), {m, c, k, k})},
          {"b", Tensor::FromVector(b, {m})},
          {"dz", Tensor::FromVector(Values(n * m * ph * ph, 4), {n, m, ph, ph})}};
}

TEST(KernelFusionTest, CnnLayerFusesAllThreeGroupsWithTheSameBits) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    Runs r = RunBoth(CnnLayer(4, 3, 14, 16, false, false), CnnFeeds(4, 3, 14, 16), threads);
    EXPECT_EQ(Count(r, "ai.ontrain::FusedConvMaxPool"), 1);
    EXPECT_EQ(Count(r, "ai.ontrain::MaxPoolReluGrad"), 1);
    EXPECT_EQ(Count(r, "::Relu") + Count(r, "com.microsoft::ReluGrad") + Count(r, "::Conv") + Count(r, "::MaxPoolGrad") +
                  Count(r, "::MaxPool") + Count(r, "com.microsoft::FusedConv"),
              0);
    EXPECT_EQ(r.fused_ops.size(), 3u);  // FusedConvMaxPool, MaxPoolReluGrad, ConvGrad
    ExpectSameBits(r);
  }
}

// A first layer (no dX): MaxPoolReluGrad goes into the ConvGrad too, its result made image by image for the
// 3x3 direct weight gradient, or whole for a 5x5 window (the GEMM path).
TEST(KernelFusionTest, FirstLayerFusesMaxPoolReluGradIntoConvGrad) {
  for (int64_t k : {3, 5}) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE("k " + std::to_string(k) + " threads " + std::to_string(threads));
      Runs r = RunBoth(CnnLayer(5, 1, 16, 32, false, false, true, k), CnnFeeds(5, 1, 16, 32, k), threads);
      EXPECT_EQ(r.fused_ops, (std::vector<std::string>{"ai.ontrain::FusedConvMaxPool", "ai.ontrain::MaxPoolReluConvGrad"}));
      ExpectSameBits(r);
    }
  }
  // With the scattered gradient also a graph output, the two stay apart.
  Model md = CnnLayer(2, 1, 12, 8, false, false, true);
  md.graph.outputs.push_back(TensorInfo("dc", DType::kFloat32, {2, 8, 10, 10}));
  Runs r = RunBoth(md, CnnFeeds(2, 1, 12, 8));
  EXPECT_EQ(Count(r, "ai.ontrain::MaxPoolReluConvGrad"), 0);
  EXPECT_EQ(Count(r, "ai.ontrain::MaxPoolReluGrad"), 1);
  ExpectSameBits(r);
}

// `md` and `feeds` with every float32 value made float64.
void ToFloat64(Model* md, NamedTensors* feeds) {
  for (std::vector<ValueInfo>* list : {&md->graph.inputs, &md->graph.outputs, &md->graph.value_infos}) {
    for (ValueInfo& v : *list) {
      if (v.dtype == DType::kFloat32) v.dtype = DType::kFloat64;
    }
  }
  for (auto& [name, t] : *feeds) {
    const float* f = t.data<float>();
    t = Tensor::FromVector(std::vector<double>(f, f + t.NumElements()), t.shape());
  }
}

// The Indices between FusedConvMaxPool and its fused gradients become window codes (compact_indices), with
// the same bits as the nodes run apart, on every path of the code kernels: pooled rows of fewer than 8
// windows and of more than 16 (a whole vector and a tail), odd activations (a row and a column that no
// window covers), the first layer's MaxPoolReluConvGrad, float64 (the scalar paths), a NaN, a -0 and exact
// zeros in dZ, at 1 and 2 threads.
TEST(KernelFusionTest, PoolIndicesBecomeWindowCodesWithTheSameBits) {
  struct Case {
    int64_t n, c, h, m;
    bool first_layer;
    bool float64 = false;
  };
  const Case cases[] = {
      {3, 3, 14, 8, false},        // 12x12 -> 6x6
      {2, 2, 40, 8, false},        // 38x38 -> 19x19: 16 windows and 3
      {2, 3, 21, 16, false},       // 19x19 -> 9x9: the last row and column unpooled
      {3, 1, 28, 32, true},        // the benchmark CNN's stem
      {2, 1, 37, 32, true},        // 35x35 -> 17x17
      {2, 1, 14, 8, true},         // 12x12: fewer than 256 positions (8 sum lanes), 8 channels of 16
      {3, 2, 29, 24, true},        // 27x27 -> 13x13, 24 channels: a block of 16 and one of 8
      {2, 3, 20, 64, true},        // 18x18 -> 9x9, 3 input channels by two tiles of 32 (dY in the tiles)
      {3, 2, 17, 32, true},        // 15x15 -> 7x7: dY in the tiles, a row and a column no window covers
      {2, 8, 21, 16, false},       // 19x19 on Winograd's kernel: only the 18x18 that is pooled computed,
                                   // pooled by its output transform (81 windows: 5 stores of 16, one of 1)
      {3, 8, 14, 8, false},        // 12x12 on Winograd's kernel, even: 36 windows
      {3, 9, 6, 9, false},         // 4x4 on Winograd's kernel: 4 windows a plane, stores over the next planes
      {2, 32, 13, 64, false},      // the benchmark CNN's second layer: 11x11, pooled 5x5 from 10x10
      {2, 3, 14, 8, false, true},  // float64
  };
  for (const Case& t : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE("c " + std::to_string(t.c) + " h " + std::to_string(t.h) + " m " + std::to_string(t.m) +
                   (t.float64 ? " float64" : "") + " threads " + std::to_string(threads));
      Model md = CnnLayer(t.n, t.c, t.h, t.m, false, false, t.first_layer);
      NamedTensors feeds = CnnFeeds(t.n, t.c, t.h, t.m);
      float* dz = feeds[3].second.data<float>();
      dz[1] = std::numeric_limits<float>::quiet_NaN();
      dz[2] = -0.0f;
      if (t.float64) ToFloat64(&md, &feeds);
      Runs r = RunBoth(md, feeds, threads);
      const std::string grad = t.first_layer ? "MaxPoolReluConvGrad" : "MaxPoolReluGrad";
      EXPECT_EQ(r.compact_ops, (std::vector<std::string>{"FusedConvMaxPool", grad}));
      ExpectSameBits(r);
    }
  }
  // Indices that are also a graph output stay int64.
  Model md = CnnLayer(2, 3, 14, 8, false, false);
  md.graph.outputs.push_back(TensorInfo("i", DType::kInt64, {2, 8, 6, 6}));
  Runs r = RunBoth(md, CnnFeeds(2, 3, 14, 8));
  EXPECT_EQ(Count(r, "ai.ontrain::FusedConvMaxPool"), 1);
  EXPECT_TRUE(r.compact_ops.empty());
  ExpectSameBits(r);
}

// An intermediate value that is a graph output or has another reader keeps its pair apart.
TEST(KernelFusionTest, ValuesReadElsewhereAreNotFused) {
  {
    SCOPED_TRACE("the Conv's output is a graph output");
    Runs r = RunBoth(CnnLayer(2, 3, 10, 8, true, false), CnnFeeds(2, 3, 10, 8));
    EXPECT_EQ(Count(r, "com.microsoft::FusedConv"), 0);
    EXPECT_EQ(Count(r, "::Conv"), 1);
    EXPECT_EQ(Count(r, "::Relu"), 1);
    // MaxPoolGrad's output is read only by ReluGrad, whose X is the Relu's input: still fused.
    EXPECT_EQ(Count(r, "ai.ontrain::MaxPoolReluGrad"), 1);
    ExpectSameBits(r);
  }
  {
    SCOPED_TRACE("MaxPoolGrad's output has a second reader");
    Runs r = RunBoth(CnnLayer(2, 3, 10, 8, false, true), CnnFeeds(2, 3, 10, 8));
    // ReluGrad stays and reads the Relu's output, so FusedConv's output is needed whole: no pooling inside.
    EXPECT_EQ(Count(r, "com.microsoft::FusedConv"), 1);
    EXPECT_EQ(Count(r, "::MaxPool"), 1);
    EXPECT_EQ(Count(r, "ai.ontrain::MaxPoolReluGrad"), 0);
    EXPECT_EQ(Count(r, "::MaxPoolGrad"), 1);
    EXPECT_EQ(Count(r, "com.microsoft::ReluGrad"), 1);
    EXPECT_TRUE(r.compact_ops.empty());
    ExpectSameBits(r);
  }
}

// ReluGrad whose X is the pooled tensor itself, and one whose X is unrelated to the MaxPool (not fused: the
// pooled values say nothing about it).
TEST(KernelFusionTest, MaxPoolReluGradNeedsTheMaskOfThePooledTensor) {
  for (bool pooled : {true, false}) {
    SCOPED_TRACE(pooled ? "X is the pooled tensor" : "X is another tensor");
    const int64_t n = 2, c = 5, h = 8;
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    Graph& g = md.graph;
    g.inputs = {TensorInfo("p", DType::kFloat32, {n, c, h, h}), TensorInfo("q", DType::kFloat32, {n, c, h, h}),
                TensorInfo("dz", DType::kFloat32, {n, c, h / 2, h / 2})};
    g.nodes.push_back(MakeNode("MaxPool", {"p"}, {"z", "i"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, "pool"));
    g.nodes.push_back(MakeNode("MaxPoolGrad", {"dz", "i"}, {"dp"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, "pg"));
    g.nodes.push_back(MakeNode("ReluGrad", {"dp", pooled ? "p" : "q"}, {"d"}, {}, "rg", "com.microsoft"));
    g.value_infos = {TensorInfo("dp", DType::kFloat32, {n, c, h, h})};
    g.outputs = {TensorInfo("z", DType::kFloat32, {n, c, h / 2, h / 2}), TensorInfo("d", DType::kFloat32, {n, c, h, h})};
    Runs r = RunBoth(md, {{"p", Tensor::FromVector(Values(n * c * h * h, 7), {n, c, h, h})},
                          {"q", Tensor::FromVector(Values(n * c * h * h, 8), {n, c, h, h})},
                          {"dz", Tensor::FromVector(Values(n * c * h * h / 4, 9), {n, c, h / 2, h / 2})}});
    EXPECT_EQ(Count(r, "ai.ontrain::MaxPoolReluGrad"), pooled ? 1 : 0);
    ExpectSameBits(r);
  }
}

// FusedConv on every path of the Conv kernel, against Conv then Relu: the benchmark CNN's one-channel stem,
// 16 channels (vector rows), 32 -> 64 on 13x13 (row tiles), stride 2, 1x1, depthwise, grouped, and float64;
// a NaN in each input, whose outputs ReLU makes 0.
TEST(KernelFusionTest, FusedConvMatchesConvThenRelu) {
  struct Case {
    int64_t n, c, h, m, k, stride, pad, group;
    DType dtype;
  };
  const Case cases[] = {
      {2, 1, 28, 32, 3, 1, 0, 1, DType::kFloat32}, {2, 16, 16, 16, 3, 1, 1, 1, DType::kFloat32},
      {2, 32, 13, 64, 3, 1, 0, 1, DType::kFloat32}, {2, 16, 12, 32, 3, 2, 1, 1, DType::kFloat32},
      {2, 8, 9, 12, 1, 1, 0, 1, DType::kFloat32},   {2, 8, 10, 8, 3, 1, 1, 8, DType::kFloat32},
      {2, 6, 9, 10, 3, 1, 1, 2, DType::kFloat32},   {2, 3, 9, 5, 3, 1, 1, 1, DType::kFloat64},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE("c " + std::to_string(t.c) + " h " + std::to_string(t.h) + " m " + std::to_string(t.m) + " k " +
                 std::to_string(t.k) + " stride " + std::to_string(t.stride) + " group " + std::to_string(t.group));
    Model md;
    md.opset_imports[""] = 17;
    const Shape xs = {t.n, t.c, t.h, t.h}, ws = {t.m, t.c / t.group, t.k, t.k};
    md.graph.inputs = {TensorInfo("x", t.dtype, xs), TensorInfo("w", t.dtype, ws), TensorInfo("b", t.dtype, {t.m})};
    md.graph.nodes.push_back(MakeNode("Conv", {"x", "w", "b"}, {"c"}, ConvAttrs(t.k, t.stride, t.pad, t.group), "conv"));
    md.graph.nodes.push_back(MakeNode("Relu", {"c"}, {"y"}, {}, "relu"));
    md.graph.outputs = {TensorInfo("y", t.dtype, {})};
    auto tensor = [&](std::vector<float> v, const Shape& s) {
      if (t.dtype == DType::kFloat32) return Tensor::FromVector(v, s);
      return Tensor::FromVector(std::vector<double>(v.begin(), v.end()), s);
    };
    std::vector<float> b = Values(t.m, 3, false);
    b[0] = 0.0f;
    std::vector<float> x = Values(ShapeNumElements(xs), 1);
    x[t.h + 1] = std::numeric_limits<float>::quiet_NaN();  // NaN outputs, which ReLU makes 0
    Runs r = RunBoth(md, {{"x", tensor(x, xs)},
                          {"w", tensor(Values(ShapeNumElements(ws), 2), ws)},
                          {"b", tensor(b, {t.m})}});
    EXPECT_EQ(r.fused_ops, std::vector<std::string>{"com.microsoft::FusedConv"});
    ExpectSameBits(r);
  }
}

// Conv + Relu + MaxPool(2x2, stride 2) on every path of the Conv kernel, against the three nodes: the pooled
// values and their indices, with NaNs (which ReLU makes 0) and exact zeros (ties: the first maximum wins);
// odd output sizes (the last row and column are not pooled), float64, and a MaxPool without Indices (on
// Winograd's kernel, the CNN's 32 -> 64 at 13x13: only the pooled rows' and columns' tiles computed).
TEST(KernelFusionTest, FusedConvMaxPoolMatchesTheThreeNodes) {
  struct Case {
    int64_t n, c, h, m, k, stride, pad, group;
    DType dtype;
    bool indices = true;
  };
  const Case cases[] = {
      {3, 1, 28, 32, 3, 1, 0, 1, DType::kFloat32},  {2, 16, 16, 16, 3, 1, 1, 1, DType::kFloat32},
      {2, 32, 13, 64, 3, 1, 0, 1, DType::kFloat32}, {2, 16, 12, 32, 3, 2, 1, 1, DType::kFloat32},
      {2, 8, 9, 12, 1, 1, 0, 1, DType::kFloat32},   {2, 8, 10, 8, 3, 1, 1, 8, DType::kFloat32},
      {2, 6, 9, 10, 3, 1, 1, 2, DType::kFloat32},   {2, 3, 9, 5, 3, 1, 1, 1, DType::kFloat64},
      {2, 5, 11, 7, 3, 1, 0, 1, DType::kFloat32, false}, {2, 32, 13, 64, 3, 1, 0, 1, DType::kFloat32, false},
      // One channel without Indices: 16 channels with pads, 48 on 13x13 (odd), 32 with pads of 2.
      {2, 1, 28, 16, 3, 1, 1, 1, DType::kFloat32, false},
      {3, 1, 15, 48, 3, 1, 0, 1, DType::kFloat32, false},
      {2, 1, 9, 32, 3, 1, 2, 1, DType::kFloat32, false},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE("c " + std::to_string(t.c) + " h " + std::to_string(t.h) + " m " + std::to_string(t.m) + " k " +
                 std::to_string(t.k) + " stride " + std::to_string(t.stride) + " group " + std::to_string(t.group));
    Model md;
    md.opset_imports[""] = 17;
    const Shape xs = {t.n, t.c, t.h, t.h}, ws = {t.m, t.c / t.group, t.k, t.k};
    md.graph.inputs = {TensorInfo("x", t.dtype, xs), TensorInfo("w", t.dtype, ws), TensorInfo("b", t.dtype, {t.m})};
    md.graph.nodes.push_back(MakeNode("Conv", {"x", "w", "b"}, {"c"}, ConvAttrs(t.k, t.stride, t.pad, t.group), "conv"));
    md.graph.nodes.push_back(MakeNode("Relu", {"c"}, {"y"}, {}, "relu"));
    std::vector<std::string> pool_out = {"z"};
    if (t.indices) pool_out.push_back("i");
    md.graph.nodes.push_back(
        MakeNode("MaxPool", {"y"}, pool_out, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, "pool"));
    md.graph.outputs = {TensorInfo("z", t.dtype, {})};
    if (t.indices) md.graph.outputs.push_back(TensorInfo("i", DType::kInt64, {}));
    auto tensor = [&](std::vector<float> v, const Shape& s) {
      if (t.dtype == DType::kFloat32) return Tensor::FromVector(v, s);
      return Tensor::FromVector(std::vector<double>(v.begin(), v.end()), s);
    };
    std::vector<float> b = Values(t.m, 3, false);
    b[0] = 0.0f;
    std::vector<float> x = Values(ShapeNumElements(xs), 1);
    x[t.h + 1] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t i = 0; i < t.c * t.h * t.h / 2; ++i) x[ShapeNumElements(xs) - 1 - i] = 0.0f;  // zero windows
    for (int threads : {1, 2}) {
      Runs r = RunBoth(md, {{"x", tensor(x, xs)}, {"w", tensor(Values(ShapeNumElements(ws), 2), ws)}, {"b", tensor(b, {t.m})}},
                       threads);
      EXPECT_EQ(r.fused_ops, std::vector<std::string>{"ai.ontrain::FusedConvMaxPool"});
      ExpectSameBits(r);
    }
  }
}

// Poolings other than 2x2 at stride 2 without pads, and activations read elsewhere, keep MaxPool apart.
TEST(KernelFusionTest, FusedConvMaxPoolOnlyForItsPooling) {
  struct Case {
    const char* name;
    std::vector<onnx::AttributeProto> attrs;
    bool y_read_elsewhere = false;
  };
  const Case cases[] = {
      {"stride 1", {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {1, 1})}},
      {"3x3 windows", {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2})}},
      {"pads", {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})}},
      {"ceil mode", {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2}), AttrInt("ceil_mode", 1)}},
      {"column-major indices", {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2}), AttrInt("storage_order", 1)}},
      {"activations also a graph output", {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, true},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(t.name);
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 9, 9}), TensorInfo("w", DType::kFloat32, {4, 3, 3, 3})};
    md.graph.nodes.push_back(MakeNode("Conv", {"x", "w"}, {"c"}, ConvAttrs(3, 1, 1, 1), "conv"));
    md.graph.nodes.push_back(MakeNode("Relu", {"c"}, {"y"}, {}, "relu"));
    md.graph.nodes.push_back(MakeNode("MaxPool", {"y"}, {"z", "i"}, t.attrs, "pool"));
    md.graph.outputs = {TensorInfo("z", DType::kFloat32, {}), TensorInfo("i", DType::kInt64, {})};
    if (t.y_read_elsewhere) md.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {}));
    Runs r = RunBoth(md, {{"x", Tensor::FromVector(Values(2 * 3 * 81, 1), {2, 3, 9, 9})},
                          {"w", Tensor::FromVector(Values(4 * 27, 2), {4, 3, 3, 3})}});
    EXPECT_EQ(r.fused_ops, (std::vector<std::string>{"com.microsoft::FusedConv", "::MaxPool"}));
    ExpectSameBits(r);
  }
}

// ONNX Runtime writes FusedConv with other activations too; the CPU provider runs only Relu and says so.
TEST(KernelFusionTest, FusedConvWithAnotherActivationIsAClearError) {
  Model md;
  md.opset_imports[""] = 17;
  md.opset_imports["com.microsoft"] = 1;
  md.graph.inputs = {TensorInfo("x", DType::kFloat32, {1, 2, 5, 5}), TensorInfo("w", DType::kFloat32, {3, 2, 3, 3})};
  md.graph.outputs = {TensorInfo("y", DType::kFloat32, {})};
  auto attrs = ConvAttrs(3, 1, 1, 1);
  attrs.push_back(AttrString("activation", "Tanh"));
  md.graph.nodes.push_back(MakeNode("FusedConv", {"x", "w"}, {"y"}, attrs, "fc", "com.microsoft"));
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto ex = Executor::Create(md, cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  Status s = ex.value()->Run({{"x", Tensor::FromVector(Values(50, 1), {1, 2, 5, 5})},
                              {"w", Tensor::FromVector(Values(54, 2), {3, 2, 3, 3})}},
                             {"y"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("activation \"Tanh\" is not supported"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("fc"), std::string::npos) << s.ToString();
}

// Clip's gradient as autodiff writes it: Where(And(GreaterOrEqual(X, min), LessOrEqual(X, max)), dY, 0).
struct ClipGradCase {
  const char* name;
  bool ge = true, le = true, le_first = false;
  DType dtype = DType::kFloat32;
  Shape x_shape = {5, 8};
};

Model ClipGradModel(const ClipGradCase& t, const Shape& dy_shape) {
  Model md;
  md.opset_imports[""] = 17;
  Graph& g = md.graph;
  g.inputs = {TensorInfo("x", t.dtype, t.x_shape), TensorInfo("dy", t.dtype, dy_shape)};
  auto scalar = [&](double v) {
    return t.dtype == DType::kFloat32 ? Tensor::FromVector<float>({static_cast<float>(v)}, {})
                                      : Tensor::FromVector<double>({v}, {});
  };
  g.AddInitializer("lo", scalar(0.0));
  g.AddInitializer("hi", scalar(6.0));
  g.AddInitializer("zero", scalar(0.0));
  std::vector<Node> cmp;
  if (t.ge) cmp.push_back(MakeNode("GreaterOrEqual", {"x", "lo"}, {"ge"}, {}, "ge"));
  if (t.le) cmp.push_back(MakeNode("LessOrEqual", {"x", "hi"}, {"le"}, {}, "le"));
  if (t.le_first) std::swap(cmp.front(), cmp.back());
  for (Node& n : cmp) g.nodes.push_back(n);
  std::string mask = t.ge ? "ge" : "le";
  if (t.ge && t.le) {
    g.nodes.push_back(MakeNode("And", {cmp[0].outputs[0], cmp[1].outputs[0]}, {"inside"}, {}, "and"));
    mask = "inside";
  }
  g.nodes.push_back(MakeNode("Where", {mask, "dy", "zero"}, {"dx"}, {}, "where"));
  g.outputs = {TensorInfo("dx", t.dtype, {})};
  return md;
}

// X with the bounds themselves, the floats next to them, -0, infinities and NaN; dY with a NaN.
NamedTensors ClipGradFeeds(const ClipGradCase& t, const Shape& dy_shape) {
  std::vector<float> x = Values(ShapeNumElements(t.x_shape), 11, false);
  for (float& v : x) v *= 8.0f;  // [-8, 8): both sides of both bounds
  const float special[] = {0.0f, -0.0f, 6.0f, std::nextafter(6.0f, 7.0f), std::nextafter(6.0f, 5.0f),
                           std::nextafter(0.0f, -1.0f), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (size_t i = 0; i < sizeof special / sizeof special[0] && i < x.size(); ++i) x[i] = special[i];
  std::vector<float> dy = Values(ShapeNumElements(dy_shape), 12, false);
  dy[dy.size() - 1] = std::numeric_limits<float>::quiet_NaN();
  auto tensor = [&](const std::vector<float>& v, const Shape& s) {
    if (t.dtype == DType::kFloat32) return Tensor::FromVector(v, s);
    return Tensor::FromVector(std::vector<double>(v.begin(), v.end()), s);
  };
  return {{"x", tensor(x, t.x_shape)}, {"dy", tensor(dy, dy_shape)}};
}

TEST(KernelFusionTest, ClipGradientFusesWithTheSameBits) {
  const ClipGradCase cases[] = {
      {"both bounds"},
      {"LessOrEqual first", true, true, true},
      {"min only", true, false},
      {"max only", false, true},
      {"float64", true, true, false, DType::kFloat64},
      {"X broadcast along dY's rows", true, true, false, DType::kFloat32, {5, 1}},
  };
  for (const ClipGradCase& t : cases) {
    SCOPED_TRACE(t.name);
    const Shape dy_shape = {5, 8};
    Runs r = RunBoth(ClipGradModel(t, dy_shape), ClipGradFeeds(t, dy_shape));
    EXPECT_EQ(r.fused_ops, std::vector<std::string>{"ai.ontrain::ClipGrad"});
    ASSERT_EQ(r.fused.size(), 1u);
    EXPECT_EQ(r.fused[0].shape(), dy_shape);
    ExpectSameBits(r);
  }
}

TEST(KernelFusionTest, ClipGradientNotFusedWhereItCouldDiffer) {
  const ClipGradCase both{"both"};
  const Shape dy_shape = {5, 8};
  {
    SCOPED_TRACE("the mask is a graph output");
    Model md = ClipGradModel(both, dy_shape);
    md.graph.outputs.push_back(TensorInfo("inside", DType::kBool, {}));
    Runs r = RunBoth(md, ClipGradFeeds(both, dy_shape));
    EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 0);
    ExpectSameBits(r);
  }
  {
    SCOPED_TRACE("a bound can be fed");
    Model md = ClipGradModel(both, dy_shape);
    md.graph.inputs.push_back(TensorInfo("hi", DType::kFloat32, {}));
    Runs r = RunBoth(md, ClipGradFeeds(both, dy_shape));
    EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 0);
    ExpectSameBits(r);
  }
  {
    SCOPED_TRACE("the fill has a dimension (it could broadcast)");
    Model md = ClipGradModel(both, dy_shape);
    md.graph.initializers["zero"] = Tensor::FromVector<float>({0.0f}, {1});
    Runs r = RunBoth(md, ClipGradFeeds(both, dy_shape));
    EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 0);
    ExpectSameBits(r);
  }
  {
    SCOPED_TRACE("the comparisons test different tensors");
    Model md = ClipGradModel(both, dy_shape);
    md.graph.nodes[1].inputs[0] = "dy";
    Runs r = RunBoth(md, ClipGradFeeds(both, dy_shape));
    EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 0);
    ExpectSameBits(r);
  }
}

// The pattern is the one autodiff writes: a training model made from a ReLU6 layer runs ClipGrad.
TEST(KernelFusionTest, ClipGradientOfAGeneratedTrainingModelIsFused) {
  Model fwd;
  fwd.opset_imports[""] = 17;
  fwd.graph.inputs = {TensorInfo("x", DType::kFloat32, {4, 6})};
  fwd.graph.AddInitializer("w", Tensor::FromVector(Values(6 * 5, 21, false), {6, 5}));
  fwd.graph.AddInitializer("lo", Tensor::FromVector<float>({0.0f}, {}));
  fwd.graph.AddInitializer("hi", Tensor::FromVector<float>({0.5f}, {}));
  fwd.graph.nodes = {MakeNode("MatMul", {"x", "w"}, {"h"}, {}, "mm"), MakeNode("Clip", {"h", "lo", "hi"}, {"y"}, {}, "relu6")};
  fwd.graph.outputs = {TensorInfo("y", DType::kFloat32, {4, 5})};
  Runs r;
  ASSERT_NO_FATAL_FAILURE(testing::RunGeneratedTraining(fwd, 30, false, &r));
  EXPECT_EQ(Count(r, "ai.ontrain::ClipGrad"), 1);
  EXPECT_EQ(Count(r, "::Where") + Count(r, "::And") + Count(r, "::GreaterOrEqual") + Count(r, "::LessOrEqual"), 0);
  ExpectSameBits(r);
}

// The fused ops are in the CPU kernel list, so a model may name them itself: inputs they cannot take are
// clear errors naming what is wrong, never reads outside a tensor.
TEST(KernelFusionTest, FusedOpsRefuseInputsTheyCannotTake) {
  auto run = [](const Node& node, const NamedTensors& feeds) {
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["ai.ontrain"] = 1;
    for (const auto& [name, t] : feeds) md.graph.inputs.push_back(TensorInfo(name, t.dtype(), t.shape()));
    md.graph.nodes = {node};
    md.graph.outputs = {TensorInfo(node.outputs[0], DType::kFloat32, {})};
    md.graph.value_infos = {TensorInfo(node.outputs[0], DType::kFloat32, {1, 1, 4, 4})};
    auto cpu = CpuExecutionProvider::Create({1}).value();
    ExecutorOptions options;
    options.providers = {cpu.get()};
    auto ex = Executor::Create(md, options);
    if (!ex.ok()) return ex.status().ToString();
    std::vector<Tensor> out;
    return ex.value()->Run(ToNamedValues(feeds), ex.value()->output_names(), &out).ToString();
  };
  const Tensor f4 = Tensor::FromVector(Values(4, 50), {4});
  std::string e = run(MakeNode("GeluSlopeGrad", {"dy", "d"}, {"dx"}, {}, "g", "ai.ontrain"), {{"dy", f4}, {"d", f4}});
  EXPECT_NE(e.find("float64 D"), std::string::npos) << e;
  e = run(MakeNode("GeluSlopeGrad", {"dy", "d"}, {"dx"}, {}, "g", "ai.ontrain"),
          {{"dy", f4}, {"d", Tensor::FromVector(std::vector<double>(3, 1.0), {3})}});
  EXPECT_NE(e.find("of one shape"), std::string::npos) << e;
  const Tensor dz = Tensor::FromVector(Values(4, 51), {1, 1, 2, 2});
  const NamedTensors pool_feeds = {{"dz", dz}, {"i", Tensor::FromVector<int64_t>({0, 2, 8, 10}, {1, 1, 2, 2})}, {"z", dz}};
  e = run(MakeNode("MaxPoolReluGrad", {"dz", "i", "z"}, {"dx"}, {AttrInt("compact_indices", 1)}, "p", "ai.ontrain"),
          pool_feeds);
  EXPECT_NE(e.find("compact Indices must be uint8"), std::string::npos) << e;
  e = run(MakeNode("MaxPoolReluGrad", {"dz", "i", "z"}, {"dx"}, {AttrInt("compact_indices", 1)}, "p", "ai.ontrain"),
          {{"dz", Tensor::FromVector(Values(9, 52), {1, 1, 3, 3})},
           {"i", Tensor::FromVector<uint8_t>(std::vector<uint8_t>(9, 7), {1, 1, 3, 3})},
           {"z", Tensor::FromVector(Values(9, 53), {1, 1, 3, 3})}});
  EXPECT_NE(e.find("2x2 windows"), std::string::npos) << e;  // 3x3 pooled from the declared 4x4
  const NamedTensors mm_feeds = {{"a", Tensor::FromVector(Values(6, 54), {2, 3})},
                                 {"w", Tensor::FromVector(Values(12, 55), {3, 4})},
                                 {"b", Tensor::FromVector(Values(5, 56), {5})}};
  e = run(MakeNode("MatMulBias", {"a", "w", "b"}, {"y"}, {}, "m", "ai.ontrain"), mm_feeds);
  EXPECT_NE(e.find("bias must be float32 [4]"), std::string::npos) << e;
  e = run(MakeNode("MatMulBias", {"a", "w"}, {"y"}, {}, "m", "ai.ontrain"), {mm_feeds[0], mm_feeds[1]});
  EXPECT_NE(e.find("bias"), std::string::npos) << e;
}

}  // namespace
}  // namespace ontrain
