// The matrix FLOPs that `ontrain bench --profile` counts per op run (engine/op_flops.h), against counts
// worked out by hand from each shape: 2 FLOPs per multiply-add, output positions x reduction length.
#include "engine/op_flops.h"

#include <map>
#include <string>

#include "engine/executor.h"
#include "engine/op_profile.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

Tensor Filled(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  return Tensor::FromVector(v, shape);
}

// One node over float inputs of the given shapes (named in0, in1, ...), its outputs the graph's outputs
// (an empty name leaves that output off); returns the profile's FLOPs per op key for one run.
std::map<std::string, int64_t> FlopsOf(const Model& m, const NamedTensors& feeds, bool fuse = false) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  ExecutorOptions options;
  options.providers = {cpu.get()};
  options.fuse_kernels = fuse;
  auto ex = Executor::Create(m, options);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  std::map<std::string, int64_t> flops;
  if (!ex.ok()) return flops;
  ResetOpProfile();
  EnableOpProfile(true);
  std::vector<Tensor> out;
  Status s = ex.value()->Run(ToNamedValues(feeds), ex.value()->output_names(), &out);
  EnableOpProfile(false);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (const OpTime& t : OpProfile()) {
    EXPECT_EQ(t.calls, 1) << t.op;
    flops[t.op] = t.flops;
  }
  return flops;
}

int64_t OneNode(const std::string& op, const std::string& domain, const std::vector<Shape>& in_shapes,
                const std::vector<std::string>& outputs, const std::vector<onnx::AttributeProto>& attrs) {
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports["com.microsoft"] = 1;
  m.opset_imports["ai.ontrain"] = 1;
  NamedTensors feeds;
  std::vector<std::string> inputs;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    inputs.push_back(name);
    std::vector<int64_t> dims(in_shapes[i].begin(), in_shapes[i].end());
    m.graph.inputs.push_back(TensorInfo(name, DType::kFloat32, dims));
    feeds.push_back({name, Filled(in_shapes[i])});
  }
  m.graph.nodes.push_back(MakeNode(op, inputs, outputs, attrs, "node", domain));
  for (const std::string& o : outputs) {
    if (!o.empty()) m.graph.outputs.push_back(TensorInfo(o, DType::kFloat32, {}));
  }
  std::map<std::string, int64_t> f = FlopsOf(m, feeds);
  const std::string key = domain.empty() ? op : domain + "::" + op;
  EXPECT_EQ(f.size(), 1u);
  return f.count(key) ? f[key] : -1;
}

TEST(OpFlopsTest, MatrixProducts) {
  // [2,3,4] x [4,5]: 2*3*5 outputs of length-4 dot products.
  EXPECT_EQ(OneNode("MatMul", "", {{2, 3, 4}, {4, 5}}, {"y"}, {}), 2 * 2 * 3 * 5 * 4);
  // A vector times a matrix: 5 outputs of length 4.
  EXPECT_EQ(OneNode("MatMul", "", {{4}, {4, 5}}, {"y"}, {}), 2 * 5 * 4);
  // FusedMatMul with A transposed: A [4,3] is read as [3,4], so K is 4, not 3.
  EXPECT_EQ(OneNode("FusedMatMul", "com.microsoft", {{4, 3}, {4, 5}}, {"y"}, {AttrInt("transA", 1)}), 2 * 3 * 5 * 4);
  EXPECT_EQ(OneNode("FusedMatMul", "com.microsoft", {{2, 3, 4}, {2, 5, 4}}, {"y"}, {AttrInt("transB", 1)}),
            2 * 2 * 3 * 5 * 4);
  // MatMulBias (the fused FusedMatMul + Add): the same, the bias adding nothing.
  EXPECT_EQ(OneNode("MatMulBias", "ai.ontrain", {{4, 3}, {4, 5}, {5}}, {"y"}, {AttrInt("transA", 1)}), 2 * 3 * 5 * 4);
  // Gemm: transA [4,3] -> M 3, K 4; transB [5,4] -> N 5. The bias adds nothing.
  EXPECT_EQ(OneNode("Gemm", "", {{4, 3}, {5, 4}, {5}}, {"y"}, {AttrInt("transA", 1), AttrInt("transB", 1)}),
            2 * 3 * 5 * 4);
  EXPECT_EQ(OneNode("Gemm", "", {{6, 7}, {7, 2}}, {"y"}, {}), 2 * 6 * 2 * 7);
  // FusedGemm (the fused Gemm + Relu): Gemm's, the ReLU adding nothing.
  EXPECT_EQ(OneNode("FusedGemm", "com.microsoft", {{6, 7}, {2, 7}, {2}}, {"y"},
                    {AttrInt("transB", 1), AttrString("activation", "Relu")}),
            2 * 6 * 2 * 7);
}

TEST(OpFlopsTest, Convolutions) {
  // 7x7, 3x3 kernel, stride 2, pads 1: (7 + 2 - 3) / 2 + 1 = 4 per side; taps 3 channels x 9.
  EXPECT_EQ(OneNode("Conv", "", {{2, 3, 7, 7}, {4, 3, 3, 3}}, {"y"},
                    {AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1})}),
            2 * 2 * 4 * 16 * 27);
  // SAME_UPPER at stride 2: ceil(7 / 2) = 4 per side; groups of one input channel each.
  EXPECT_EQ(OneNode("Conv", "", {{1, 3, 7, 7}, {6, 1, 3, 3}}, {"y"},
                    {AttrString("auto_pad", "SAME_UPPER"), AttrInts("strides", {2, 2}), AttrInt("group", 3)}),
            2 * 1 * 6 * 16 * 9);
  // Dilation 2 widens the 3x3 kernel to 5x5: 7 - 5 + 1 = 3 per side.
  EXPECT_EQ(OneNode("Conv", "", {{1, 2, 7, 7}, {2, 2, 3, 3}}, {"y"}, {AttrInts("dilations", {2, 2})}),
            2 * 1 * 2 * 9 * 18);
  // One spatial axis, asymmetric pads: 10 + 1 + 2 - 4 + 1 = 10 positions.
  EXPECT_EQ(OneNode("Conv", "", {{3, 2, 10}, {5, 2, 4}}, {"y"}, {AttrInts("pads", {1, 2})}), 2 * 3 * 5 * 10 * 8);
  // ConvTranspose: each of the 2*3*3 input positions spreads over 4 output channels x 9 taps.
  EXPECT_EQ(OneNode("ConvTranspose", "", {{1, 2, 3, 3}, {2, 4, 3, 3}}, {"y"}, {}), 2 * 18 * 36);
}

TEST(OpFlopsTest, ConvGradCountsTheGradientsItMakes) {
  // dY [2,4,5,5] of X [2,3,7,7] and W [4,3,3,3]: one pass is 2*2*4*25*27; dX and dW are one pass each,
  // dB none.
  const int64_t pass = 2 * 2 * 4 * 25 * 27;
  const std::vector<Shape> shapes = {{2, 4, 5, 5}, {2, 3, 7, 7}, {4, 3, 3, 3}};
  EXPECT_EQ(OneNode("ConvGrad", "com.microsoft", shapes, {"dx", "dw", "db"}, {}), 2 * pass);
  EXPECT_EQ(OneNode("ConvGrad", "com.microsoft", shapes, {"", "dw", "db"}, {}), pass);
}

TEST(OpFlopsTest, OtherOpsCountNothing) {
  EXPECT_EQ(OneNode("Relu", "", {{3, 4}}, {"y"}, {}), 0);
  EXPECT_EQ(OneNode("Add", "", {{3, 4}, {4}}, {"y"}, {}), 0);
}

// A first layer's Conv + Relu + MaxPool and its gradient, fused into FusedConvMaxPool and
// MaxPoolReluConvGrad: the fused ops count the convolution they contain, as the unfused ones do.
TEST(OpFlopsTest, FusedConvolutionsCountTheirConvolution) {
  const int64_t n = 2, c = 3, h = 9, m = 4, oh = 7, ph = 3;
  testing::ConvPoolSpec spec{n, c, h, h, m};
  spec.first_layer = true;
  const Model md = testing::ConvPoolLayer(spec);
  const NamedTensors feeds = {{"x", Filled({n, c, h, h})}, {"w", Filled({m, c, 3, 3})}, {"b", Filled({m})},
                              {"dz", Filled({n, m, ph, ph})}};
  const int64_t pass = 2 * n * m * oh * oh * c * 9;
  std::map<std::string, int64_t> plain = FlopsOf(md, feeds, false), fused = FlopsOf(md, feeds, true);
  EXPECT_EQ(plain["Conv"], pass);
  EXPECT_EQ(plain["com.microsoft::ConvGrad"], pass);
  ASSERT_TRUE(fused.count("ai.ontrain::FusedConvMaxPool")) << "the forward did not fuse";
  ASSERT_TRUE(fused.count("ai.ontrain::MaxPoolReluConvGrad")) << "the gradient did not fuse";
  EXPECT_EQ(fused["ai.ontrain::FusedConvMaxPool"], pass);
  EXPECT_EQ(fused["ai.ontrain::MaxPoolReluConvGrad"], pass);
}

}  // namespace
}  // namespace ontrain
