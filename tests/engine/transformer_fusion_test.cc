// The executor's fusions for linear and transformer layers (engine/kernel_fusion.h): Gelu with its GeluGrad,
// a linear layer's FusedMatMul with the Add of its bias, and Gemm with its Relu (FusedGemm), each with the
// same bits as the nodes it replaces; values read elsewhere, and biases that broadcast otherwise, keep the
// nodes apart; FusedGemm with an activation the CPU lacks is a clear error.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "providers/cpu/cpu_provider.h"
#include "gtest/gtest.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::Count;
using testing::ExpectSameBits;
using testing::RunBoth;
using testing::Values;
using Runs = testing::FusionRuns;

// Gelu and its GeluGrad become GeluAndSlope and GeluSlopeGrad with the same bits, for com.microsoft's Gelu
// and ONNX's (opset 20) without the tanh approximation, over every kind of float (NaN, infinities, signed
// zeros, denormals, values where erfc underflows), a length that leaves a tail after the vector blocks, at 1
// and 2 threads; not where X is read elsewhere, nor for the tanh approximation.
TEST(KernelFusionTest, GeluAndItsGradientShareTheDerivative) {
  const int64_t n = 1003;
  std::vector<float> x = Values(n, 41, true);
  for (int64_t i = 0; i < n; ++i) x[i] *= 12.0f;  // [-12, 12): both of erfc's ranges and Phi near 0 and 1
  const float special[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), 0.0f, -0.0f, 1e-40f, -1e-40f, -13.0f,
                           -27.5f, -40.0f, 40.0f, 1e-7f, -5.5f, 3.25f, std::numeric_limits<float>::max(),
                           -std::numeric_limits<float>::max()};
  for (size_t i = 0; i < sizeof special / sizeof special[0]; ++i) x[7 * i + 3] = special[i];
  std::vector<float> dy = Values(n, 42, true);
  dy[5] = std::numeric_limits<float>::quiet_NaN();
  dy[6] = -0.0f;
  struct Case {
    const char* name;
    const char* domain;
    std::vector<onnx::AttributeProto> attrs;
    bool x_read_elsewhere;
    bool fused;
  };
  const Case cases[] = {{"com.microsoft Gelu", "com.microsoft", {}, false, true},
                        {"ONNX Gelu", "", {AttrString("approximate", "none")}, false, true},
                        {"ONNX Gelu, tanh", "", {AttrString("approximate", "tanh")}, false, false},
                        {"X also a graph output", "com.microsoft", {}, true, false}};
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(c.name) + ", threads " + std::to_string(threads));
      Model md;
      md.opset_imports[""] = 20;
      md.opset_imports["com.microsoft"] = 1;
      md.graph.inputs = {TensorInfo("x0", DType::kFloat32, {n}), TensorInfo("dy", DType::kFloat32, {n})};
      // X made inside the graph (as a bias Add makes it), so that it can be dead after the forward pass.
      md.graph.nodes.push_back(MakeNode("Identity", {"x0"}, {"x"}, {}, "id"));
      md.graph.nodes.push_back(MakeNode("Gelu", {"x"}, {"y"}, c.attrs, "gelu", c.domain));
      md.graph.nodes.push_back(MakeNode("GeluGrad", {"dy", "x"}, {"dx"}, {}, "gelu_grad", "com.microsoft"));
      md.graph.outputs = {TensorInfo("y", DType::kFloat32, {n}), TensorInfo("dx", DType::kFloat32, {n})};
      if (c.x_read_elsewhere) md.graph.outputs.push_back(TensorInfo("x", DType::kFloat32, {n}));
      Runs r = RunBoth(md, {{"x0", Tensor::FromVector(x, {n})}, {"dy", Tensor::FromVector(dy, {n})}}, threads);
      EXPECT_EQ(Count(r, "ai.ontrain::GeluAndSlope"), c.fused ? 1 : 0);
      EXPECT_EQ(Count(r, "ai.ontrain::GeluSlopeGrad"), c.fused ? 1 : 0);
      ExpectSameBits(r);
    }
  }
}

// A linear layer's FusedMatMul + Add of its bias becomes MatMulBias with the same bits, on every path of
// the product: rows split into chunks (A [4, 64, 128] x W^T), the copy of W^T for 512 rows and more, the
// small-product kernel (all rows at once), a 2-D A (one product, not batched), float64, alpha; the bias on
// either side of the Add, NaN and -0 among the values, a Shape node reading the product (it reads the sum,
// of the same shape), at 1 and 2 threads. Not fused: a bias that broadcasts otherwise ([1], [1, N], [M, N]),
// a product read elsewhere, a bias whose shape is not declared.
TEST(KernelFusionTest, LinearLayerBiasAddFusesWithTheSameBits) {
  struct Case {
    const char* name;
    Shape a, w, bias;
    bool trans_b, bias_first, product_output, fused;
    float alpha = 1.0f;
    DType dtype = DType::kFloat32;
  };
  const Case cases[] = {
      {"row chunks", {4, 64, 128}, {384, 128}, {384}, true, false, false, true},
      {"copy of W^T", {16, 64, 128}, {512, 128}, {512}, true, true, false, true},
      {"small product, alpha", {3, 5, 7, 12}, {12, 20}, {20}, false, false, false, true, 0.5f},
      {"2-D A", {24, 40}, {40, 33}, {33}, false, true, false, true},
      {"float64", {2, 10, 6}, {9, 6}, {9}, true, false, false, true, 1.0f, DType::kFloat64},
      {"bias [1]", {4, 8, 16}, {16, 8}, {1}, false, false, false, false},
      {"bias [1, N]", {4, 8, 16}, {16, 8}, {1, 8}, false, false, false, false},
      {"bias [M, N]", {4, 8, 16}, {16, 8}, {8, 8}, false, false, false, false},
      {"product also an output", {4, 8, 16}, {16, 8}, {8}, false, false, true, false},
      {"bias shape not declared", {4, 8, 16}, {16, 8}, {}, false, false, false, false},
  };
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(c.name) + ", threads " + std::to_string(threads));
      const Shape bias = c.bias.empty() ? Shape{c.trans_b ? c.w[0] : c.w[1]} : c.bias;  // fed; declared: c.bias
      Model md;
      md.opset_imports[""] = 17;
      md.opset_imports["com.microsoft"] = 1;
      md.graph.inputs = {TensorInfo("a", c.dtype, c.a), TensorInfo("w", c.dtype, c.w), TensorInfo("b", c.dtype, c.bias)};
      if (c.bias.empty()) md.graph.inputs[2].has_shape = false;
      std::vector<onnx::AttributeProto> attrs = {AttrInt("transB", c.trans_b ? 1 : 0)};
      if (c.alpha != 1.0f) attrs.push_back(AttrFloat("alpha", c.alpha));
      md.graph.nodes.push_back(MakeNode("FusedMatMul", {"a", "w"}, {"t"}, attrs, "mm", "com.microsoft"));
      md.graph.nodes.push_back(MakeNode("Shape", {"t"}, {"shape"}, {}, "shape"));
      md.graph.nodes.push_back(MakeNode("Add", c.bias_first ? std::vector<std::string>{"b", "t"} : std::vector<std::string>{"t", "b"},
                                        {"y"}, {}, "add"));
      md.graph.outputs = {TensorInfo("y", c.dtype, {}), TensorInfo("shape", DType::kInt64, {})};
      if (c.product_output) md.graph.outputs.push_back(TensorInfo("t", c.dtype, {}));
      NamedTensors feeds;
      uint32_t seed = 60;
      for (const auto& [name, shape] : {std::pair<const char*, Shape>{"a", c.a}, {"w", c.w}, {"b", bias}}) {
        std::vector<float> v = Values(ShapeNumElements(shape), seed++);
        if (v.size() > 7) {
          v[3] = std::numeric_limits<float>::quiet_NaN();
          v[5] = -0.0f;
        }
        Tensor t = Tensor::FromVector(v, shape);
        if (c.dtype == DType::kFloat64) t = Tensor::FromVector(std::vector<double>(v.begin(), v.end()), shape);
        feeds.push_back({name, t});
      }
      Runs r = RunBoth(md, feeds, threads);
      EXPECT_EQ(Count(r, "ai.ontrain::MatMulBias"), c.fused ? 1 : 0);
      EXPECT_EQ(Count(r, "::Add"), c.fused ? 0 : 1);
      ExpectSameBits(r);
    }
  }
}

// FusedGemm (Gemm + Relu) against the two nodes on every path of the Gemm kernel: a bias row in the
// product ([N] and [1, N]), a full C, no C, alpha and beta other than 1, transposed operands, float64; NaN
// inputs, whose outputs ReLU makes 0.
TEST(KernelFusionTest, FusedGemmMatchesGemmThenRelu) {
  struct Case {
    int64_t m, k, n;
    bool ta, tb;
    Shape c;  // {}: no C
    float alpha, beta;
    DType dtype;
  };
  const Case cases[] = {
      {64, 784, 128, false, true, {128}, 1.0f, 1.0f, DType::kFloat32},
      {33, 17, 65, false, false, {1, 65}, 1.0f, 1.0f, DType::kFloat32},
      {9, 12, 7, true, true, {9, 7}, 0.5f, 2.0f, DType::kFloat32},
      {5, 6, 8, false, true, {}, 1.5f, 1.0f, DType::kFloat32},
      {6, 5, 4, true, false, {4}, 1.0f, 1.0f, DType::kFloat64},
  };
  for (const Case& t : cases) {
    SCOPED_TRACE(std::to_string(t.m) + "x" + std::to_string(t.k) + "x" + std::to_string(t.n) + " C rank " +
                 std::to_string(t.c.size()));
    Model md;
    md.opset_imports[""] = 17;
    const Shape as = t.ta ? Shape{t.k, t.m} : Shape{t.m, t.k}, bs = t.tb ? Shape{t.n, t.k} : Shape{t.k, t.n};
    md.graph.inputs = {TensorInfo("a", t.dtype, as), TensorInfo("b", t.dtype, bs)};
    std::vector<std::string> in = {"a", "b"};
    if (!t.c.empty()) {
      md.graph.inputs.push_back(TensorInfo("c", t.dtype, t.c));
      in.push_back("c");
    }
    md.graph.nodes.push_back(MakeNode("Gemm", in, {"h"},
                                      {AttrInt("transA", t.ta), AttrInt("transB", t.tb), AttrFloat("alpha", t.alpha),
                                       AttrFloat("beta", t.beta)},
                                      "fc"));
    md.graph.nodes.push_back(MakeNode("Relu", {"h"}, {"y"}, {}, "relu"));
    md.graph.outputs = {TensorInfo("y", t.dtype, {})};
    auto tensor = [&](std::vector<float> v, const Shape& s) {
      if (t.dtype == DType::kFloat32) return Tensor::FromVector(v, s);
      return Tensor::FromVector(std::vector<double>(v.begin(), v.end()), s);
    };
    std::vector<float> a = Values(ShapeNumElements(as), 1);
    a[1] = std::numeric_limits<float>::quiet_NaN();  // a row (or column) of NaN outputs
    NamedTensors feeds = {{"a", tensor(a, as)}, {"b", tensor(Values(ShapeNumElements(bs), 2), bs)}};
    if (!t.c.empty()) feeds.push_back({"c", tensor(Values(ShapeNumElements(t.c), 3), t.c)});
    Runs r = RunBoth(md, feeds);
    EXPECT_EQ(r.fused_ops, std::vector<std::string>{"com.microsoft::FusedGemm"});
    ExpectSameBits(r);
  }
}

// A linear layer with ReLU in a training model made by autodiff: the Gemm and Relu fuse, its ReluGrad reads
// the Relu's output instead of the Gemm's, and every output (the gradients included) keeps its bits.
TEST(KernelFusionTest, LinearReluOfAGeneratedTrainingModelIsFused) {
  Model fwd;
  fwd.opset_imports[""] = 17;
  fwd.graph.inputs = {TensorInfo("x", DType::kFloat32, {4, 6})};
  fwd.graph.AddInitializer("w1", Tensor::FromVector(Values(5 * 6, 21, false), {5, 6}));
  fwd.graph.AddInitializer("b1", Tensor::FromVector(Values(5, 22, false), {5}));
  fwd.graph.AddInitializer("w2", Tensor::FromVector(Values(3 * 5, 23, false), {3, 5}));
  fwd.graph.nodes = {MakeNode("Gemm", {"x", "w1", "b1"}, {"h"}, {AttrInt("transB", 1)}, "fc1"),
                     MakeNode("Relu", {"h"}, {"r"}, {}, "relu"),
                     MakeNode("Gemm", {"r", "w2"}, {"y"}, {AttrInt("transB", 1)}, "fc2")};
  fwd.graph.outputs = {TensorInfo("y", DType::kFloat32, {4, 3})};
  Runs r;
  ASSERT_NO_FATAL_FAILURE(testing::RunGeneratedTraining(fwd, 40, true, &r));
  EXPECT_EQ(Count(r, "com.microsoft::FusedGemm"), 1);
  EXPECT_EQ(Count(r, "::Relu"), 0);
  EXPECT_EQ(Count(r, "com.microsoft::ReluGrad"), 1);
  ExpectSameBits(r);
}

// ONNX Runtime writes FusedGemm with other activations too; the CPU provider runs only Relu and says so.
TEST(KernelFusionTest, FusedGemmWithAnotherActivationIsAClearError) {
  Model md;
  md.opset_imports[""] = 17;
  md.opset_imports["com.microsoft"] = 1;
  md.graph.inputs = {TensorInfo("a", DType::kFloat32, {2, 3}), TensorInfo("b", DType::kFloat32, {3, 4})};
  md.graph.outputs = {TensorInfo("y", DType::kFloat32, {})};
  md.graph.nodes.push_back(MakeNode("FusedGemm", {"a", "b"}, {"y"}, {AttrString("activation", "LeakyRelu")}, "fg",
                                    "com.microsoft"));
  auto cpu = CpuExecutionProvider::Create({}).value();
  auto ex = Executor::Create(md, cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  Status s = ex.value()->Run({{"a", Tensor::FromVector(Values(6, 1), {2, 3})}, {"b", Tensor::FromVector(Values(12, 2), {3, 4})}},
                             {"y"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("activation \"LeakyRelu\" is not supported"), std::string::npos) << s.ToString();
  EXPECT_NE(s.ToString().find("fg"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace ontrain
