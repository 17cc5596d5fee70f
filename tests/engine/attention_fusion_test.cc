// The attention softmax's fusions (engine/kernel_fusion.h): a scaling by one value and a mask before a Softmax
// become ScaledMaskedSoftmax, and the same ops after SoftmaxGrad_13 become ScaledMaskedSoftmaxGrad, with the
// bits of the nodes they replace: Div and Mul, the fill on either side of the Where, masks that are blocks of
// the scores' last dims (the fast rows), that broadcast along a row or widen the scores (the general rows),
// rows whose length leaves a tail after the 16-float vectors, NaN, infinities, -0 and rows masked whole;
// Shape nodes that read the values the fusion removes; 1 and 2 threads. Not fused: a scale whose rank is
// unknown, a divisor on the wrong side, an intermediate value that is a graph output, another axis. The
// fused ops are in the CPU's kernel list, so a model may name them: bad inputs there are clear errors.
#include <cmath>
#include <limits>
#include <string>
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

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Case {
  const char* name;
  Shape scores, mask;  // mask empty: none
  const char* scale_op = "Div";  // "Div", "Mul" or "" (none)
  bool fill_first = true;        // Where(C, F, V) rather than Where(C, V, F)
  bool scale_known = true;       // S from Shape -> Gather -> Cast -> Sqrt (rank 0 for sure), else a graph input
  bool divisor_first = false;    // Div(S, X)
  bool scaled_is_output = false;
  int64_t axis = -1;
  int fused_forward = 1, fused_backward = 1;
};

// Scores x (made in the graph by an Identity), the forward ops and Softmax, and the backward pass as
// autodiff writes it: SoftmaxGrad_13, the mask's Where with 0, the scaling again; Shape nodes read the scaled
// and masked values and the gradient, as the generated transformer's do.
Model AttentionGraph(const Case& c) {
  Model md;
  md.opset_imports[""] = 17;
  md.opset_imports["com.microsoft"] = 1;
  const bool masked = !c.mask.empty();
  const bool scaled = std::string(c.scale_op) != "";
  md.graph.inputs = {TensorInfo("x0", DType::kFloat32, c.scores), TensorInfo("dy", DType::kFloat32, {})};
  md.graph.inputs[1].has_shape = false;
  if (masked) md.graph.inputs.push_back(TensorInfo("mask", DType::kBool, c.mask));
  if (!c.scale_known) md.graph.inputs.push_back(TensorInfo("s_in", DType::kFloat32, {}));
  md.graph.initializers["index"] = Tensor::FromVector<int64_t>({-1}, {});
  md.graph.initializers["fill"] = Tensor::FromVector<float>({-kInf}, {});
  md.graph.initializers["zero"] = Tensor::FromVector<float>({0.0f}, {});
  auto add = [&md](const char* op, std::vector<std::string> in, std::vector<std::string> out,
                   std::vector<onnx::AttributeProto> attrs = {}, const char* domain = "") {
    md.graph.nodes.push_back(MakeNode(op, in, out, attrs, std::string(op) + "_" + out[0], domain));
  };
  add("Identity", {"x0"}, {"x"});
  std::string s = "s_in";
  if (c.scale_known) {
    add("Shape", {"x"}, {"x_shape"});
    add("Gather", {"x_shape", "index"}, {"x_len"}, {AttrInt("axis", 0)});
    add("Cast", {"x_len"}, {"x_len_f"}, {AttrInt("to", 1)});
    add("Sqrt", {"x_len_f"}, {"s"});
    s = "s";
  }
  std::string v = "x";
  if (scaled) {
    add(c.scale_op, c.divisor_first ? std::vector<std::string>{s, "x"} : std::vector<std::string>{"x", s}, {"scaled"});
    add("Shape", {"scaled"}, {"scaled_shape"});
    v = "scaled";
  }
  if (masked) {
    add("Where", c.fill_first ? std::vector<std::string>{"mask", "fill", v} : std::vector<std::string>{"mask", v, "fill"},
        {"masked"});
    add("Shape", {"masked"}, {"masked_shape"});
    v = "masked";
  }
  add("Softmax", {v}, {"y"}, {AttrInt("axis", c.axis)});
  add("SoftmaxGrad_13", {"dy", "y"}, {"g"}, {AttrInt("axis", c.axis)}, "com.microsoft");
  add("Shape", {"g"}, {"g_shape"});
  std::string dv = "g";
  if (masked) {
    add("Where", c.fill_first ? std::vector<std::string>{"mask", "zero", dv} : std::vector<std::string>{"mask", dv, "zero"},
        {"g_masked"});
    dv = "g_masked";
  }
  if (scaled) {
    add(c.scale_op, c.divisor_first ? std::vector<std::string>{s, dv} : std::vector<std::string>{dv, s}, {"g_scaled"});
    add("Shape", {"g_scaled"}, {"g_scaled_shape"});
    dv = "g_scaled";
  }
  add("Identity", {dv}, {"dx"});
  md.graph.outputs = {TensorInfo("y", DType::kFloat32, {}), TensorInfo("dx", DType::kFloat32, {}),
                      TensorInfo("g_shape", DType::kInt64, {})};
  if (scaled) {
    md.graph.outputs.push_back(TensorInfo("scaled_shape", DType::kInt64, {}));
    md.graph.outputs.push_back(TensorInfo("g_scaled_shape", DType::kInt64, {}));
  }
  if (masked) md.graph.outputs.push_back(TensorInfo("masked_shape", DType::kInt64, {}));
  if (c.scaled_is_output) md.graph.outputs.push_back(TensorInfo("scaled", DType::kFloat32, {}));
  return md;
}

TEST(AttentionFusionTest, ScaledMaskedSoftmaxAndItsGradientKeepTheBits) {
  const Case cases[] = {
      {"transformer: Div, no mask", {2, 3, 16, 16}, {}},
      {"GPT: Div, causal mask [S, S]", {2, 3, 16, 16}, {16, 16}},
      {"Mul, fill second, rows with a tail", {2, 2, 7, 37}, {7, 37}, "Mul", false},
      {"mask [1, 1, S, S], 5 rows", {1, 1, 5, 20}, {1, 1, 5, 20}},
      {"mask along rows only [B, 1, 1, S]", {2, 3, 8, 24}, {2, 1, 1, 24}},
      {"padding mask [B, 1, S, 1]", {2, 3, 8, 24}, {2, 1, 8, 1}},
      {"mask widens the scores", {3, 8, 24}, {2, 1, 8, 24}},
      {"mask widens a row of one", {2, 6, 1}, {2, 6, 5}},
      {"mask only", {2, 4, 9, 9}, {9, 9}, ""},
      {"scale of unknown rank", {2, 3, 16, 16}, {16, 16}, "Div", true, false, false, false, -1, 1, 1},
      {"Div(S, X)", {2, 3, 16, 16}, {}, "Div", true, true, true, false, -1, 0, 0},
      {"scaled value an output", {2, 3, 16, 16}, {}, "Div", true, true, false, true, -1, 0, 1},
      {"axis 1", {2, 3, 16, 16}, {}, "Div", true, true, false, false, 1, 0, 0},
  };
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(c.name) + ", threads " + std::to_string(threads));
      Model md = AttentionGraph(c);
      NamedTensors feeds;
      std::vector<float> x = Values(ShapeNumElements(c.scores), 71, true);
      for (float& v : x) v *= 20.0f;
      const float special[] = {std::numeric_limits<float>::quiet_NaN(), kInf, -kInf, -0.0f, 1e-40f, 88.0f, -100.0f};
      for (size_t i = 0; i < sizeof special / sizeof special[0] && 11 * i + 2 < x.size(); ++i) x[11 * i + 2] = special[i];
      feeds.push_back({"x0", Tensor::FromVector(x, c.scores)});
      // dY has the forward output's shape: the scores broadcast with the mask.
      Shape out = c.scores;
      if (!c.mask.empty()) {
        const size_t rank = std::max(c.scores.size(), c.mask.size());
        out = Shape(rank, 1);
        for (size_t i = 0; i < rank; ++i) {
          const int64_t a = i + c.scores.size() >= rank ? c.scores[i + c.scores.size() - rank] : 1;
          const int64_t b = i + c.mask.size() >= rank ? c.mask[i + c.mask.size() - rank] : 1;
          out[i] = std::max(a, b);
        }
      }
      std::vector<float> dy = Values(ShapeNumElements(out), 72, true);
      if (dy.size() > 9) dy[9] = std::numeric_limits<float>::quiet_NaN();
      feeds.push_back({"dy", Tensor::FromVector(dy, out)});
      if (!c.mask.empty()) {
        std::vector<bool> m(ShapeNumElements(c.mask));
        for (size_t i = 0; i < m.size(); ++i) m[i] = (i * 7 + i / 5) % 3 == 0;
        // A row masked whole (fill -inf: a NaN row, as the unfused Softmax gives it) where the mask has rows.
        const int64_t len = c.mask.back();
        if (m.size() >= static_cast<size_t>(2 * len)) {
          for (int64_t i = 0; i < len; ++i) m[len + i] = c.fill_first;
        }
        feeds.push_back({"mask", Tensor::FromVector<bool>(m, c.mask)});
      }
      if (!c.scale_known) feeds.push_back({"s_in", Tensor::FromVector<float>({-2.5f}, {})});
      Runs r = RunBoth(md, feeds, threads);
      EXPECT_EQ(Count(r, "ai.ontrain::ScaledMaskedSoftmax"), c.fused_forward);
      EXPECT_EQ(Count(r, "ai.ontrain::ScaledMaskedSoftmaxGrad"), c.fused_backward);
      if (c.fused_forward != 0) {
        EXPECT_EQ(Count(r, "::Softmax"), 0);
      }
      ExpectSameBits(r);
    }
  }
}

// A backward mask wider than the gradient (dY and Y [2, 6, 1] under a [2, 6, 5] mask: no forward pass makes
// this, but a graph may): each output row recomputes the gradient's single value and spreads it; Where and
// Mul fused, the same bits.
TEST(AttentionFusionTest, GradientMaskWiderThanTheGradient) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("dy", DType::kFloat32, {2, 6, 1}), TensorInfo("y0", DType::kFloat32, {2, 6, 1}),
                       TensorInfo("mask", DType::kBool, {2, 6, 5})};
    md.graph.initializers["zero"] = Tensor::FromVector<float>({0.0f}, {});
    md.graph.initializers["half"] = Tensor::FromVector<float>({-0.5f}, {});
    md.graph.nodes.push_back(MakeNode("Identity", {"y0"}, {"y"}, {}, "id"));
    md.graph.nodes.push_back(MakeNode("SoftmaxGrad_13", {"dy", "y"}, {"g"}, {}, "sg", "com.microsoft"));
    md.graph.nodes.push_back(MakeNode("Where", {"mask", "g", "zero"}, {"w"}, {}, "where"));
    md.graph.nodes.push_back(MakeNode("Mul", {"half", "w"}, {"dx"}, {}, "mul"));
    md.graph.outputs = {TensorInfo("dx", DType::kFloat32, {})};
    std::vector<bool> m(60);
    for (size_t i = 0; i < m.size(); ++i) m[i] = i % 4 != 1;
    NamedTensors feeds = {{"dy", Tensor::FromVector(Values(12, 81, false), {2, 6, 1})},
                          {"y0", Tensor::FromVector(Values(12, 82, false), {2, 6, 1})},
                          {"mask", Tensor::FromVector<bool>(m, {2, 6, 5})}};
    Runs r = RunBoth(md, feeds, threads);
    EXPECT_EQ(Count(r, "ai.ontrain::ScaledMaskedSoftmaxGrad"), 1);
    EXPECT_EQ(Count(r, "::Mul"), 0);
    ExpectSameBits(r);
  }
}

// A model that names the fused ops itself: a scale of two values, a scale_op without S, a mask without its
// fill, and dY and Y of different shapes are errors naming the op and what is wrong, never a crash.
TEST(AttentionFusionTest, FusedOpsNamedByAModelCheckTheirInputs) {
  struct Bad {
    const char* name;
    const char* op;
    std::vector<std::string> inputs;
    int64_t scale_op;
    const char* message;
  };
  const Bad cases[] = {
      {"S of two values", "ScaledMaskedSoftmax", {"x", "s2"}, 1, "S and F must be single float32 values"},
      {"scale_op without S", "ScaledMaskedSoftmax", {"x"}, 2, "scale_op 2 and input S disagree"},
      {"a mask without its fill", "ScaledMaskedSoftmax", {"x", "", "mask"}, 0, "the mask C and its fill F come together"},
      {"dY and Y differ", "ScaledMaskedSoftmaxGrad", {"x", "y5"}, 0, "dY float32[2,4] and Y float32[2,5] differ"},
  };
  for (const Bad& c : cases) {
    SCOPED_TRACE(c.name);
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["ai.ontrain"] = 1;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 4}), TensorInfo("y5", DType::kFloat32, {2, 5}),
                       TensorInfo("s2", DType::kFloat32, {2}), TensorInfo("mask", DType::kBool, {2, 4})};
    md.graph.outputs = {TensorInfo("out", DType::kFloat32, {})};
    md.graph.nodes.push_back(MakeNode(c.op, c.inputs, {"out"}, {AttrInt("scale_op", c.scale_op)}, "fused", "ai.ontrain"));
    auto cpu = CpuExecutionProvider::Create({}).value();
    auto ex = Executor::Create(md, cpu.get());
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    std::vector<Tensor> out;
    Status s = ex.value()->Run({{"x", Tensor::FromVector(Values(8, 1), {2, 4})},
                                {"y5", Tensor::FromVector(Values(10, 2), {2, 5})},
                                {"s2", Tensor::FromVector<float>({2.0f, 3.0f}, {2})},
                                {"mask", Tensor::FromVector<bool>(std::vector<bool>(8, true), {2, 4})}},
                               {"out"}, &out);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find(c.message), std::string::npos) << s.ToString();
    EXPECT_NE(s.ToString().find("fused"), std::string::npos) << s.ToString();
  }
}

}  // namespace
}  // namespace ontrain
