// The executor's fusions for transformer layers (engine/kernel_fusion.h): Gelu with its GeluGrad, and a
// linear layer's FusedMatMul with the Add of its bias, each with the same bits as the nodes it replaces, at
// one and two threads; values read elsewhere, and biases that broadcast otherwise, keep the nodes apart.
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
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

}  // namespace
}  // namespace ontrain
