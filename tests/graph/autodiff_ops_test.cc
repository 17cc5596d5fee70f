// The gradient builders of the ops that recurrent, upsampling and einsum models bring (Resize, GatherND,
// ScatterND/ScatterElements, TopK, Pad wrap, LSTM, GRU, RNN, Einsum, the inverse trigonometric and
// hyperbolic functions) checked against central finite differences in float64, as autodiff_test.cc does
// for the rest: for L = sum(w * f(inputs)), the built <x>_grad outputs must match (L(x + h) - L(x - h)) / 2h.
#include "graph/autodiff.h"

#include <cmath>

#include "engine/executor.h"
#include "gmock/gmock.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/graph/gradient_check.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;
using gradcheck::AddWeightedLoss;
using gradcheck::Base;
using gradcheck::Case;
using gradcheck::CheckGradients;
using gradcheck::Random;

// Resize's gradient (com.microsoft ResizeGrad) through the builder, for each interpolation mode and the
// coordinate transformations PyTorch and TensorFlow export: linear half_pixel upsampling by scales, cubic
// align_corners by sizes, nearest asymmetric round_prefer_ceil (up along one axis, down along another),
// linear tf_crop_and_resize with a roi reaching outside the input (extrapolated elements get no gradient),
// and cubic half_pixel downsampling with exclude_outside and a = -0.5.
TEST(AutodiffTest, ResizeEveryMode) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {1, 2, 3, 4})};
  g.AddInitializer("s1", Tensor::FromVector<float>({1, 1, 2, 1.5f}, {4}));
  g.AddInitializer("z2", Tensor::FromVector<int64_t>({1, 2, 5, 3}, {4}));
  g.AddInitializer("s3", Tensor::FromVector<float>({1, 1, 1.5f, 0.5f}, {4}));
  g.AddInitializer("roi", Tensor::FromVector<float>({0, 0, 0.2f, -0.1f, 1, 1, 0.9f, 1.3f}, {8}));
  g.AddInitializer("z4", Tensor::FromVector<int64_t>({1, 2, 4, 5}, {4}));
  g.AddInitializer("s5", Tensor::FromVector<float>({1, 1, 0.6f, 0.8f}, {4}));
  using A = std::vector<onnx::AttributeProto>;
  g.nodes = {
      MakeNode("Resize", {"x", "", "s1"}, {"r1"}, A{AttrString("mode", "linear")}, "linear"),
      MakeNode("Resize", {"x", "", "", "z2"}, {"r2"},
               A{AttrString("mode", "cubic"), AttrString("coordinate_transformation_mode", "align_corners")}, "cubic"),
      MakeNode("Resize", {"x", "", "s3"}, {"r3"},
               A{AttrString("mode", "nearest"), AttrString("coordinate_transformation_mode", "asymmetric"),
                 AttrString("nearest_mode", "round_prefer_ceil")},
               "nearest"),
      MakeNode("Resize", {"x", "roi", "", "z4"}, {"r4"},
               A{AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "tf_crop_and_resize"),
                 AttrFloat("extrapolation_value", 0.5f)},
               "crop"),
      MakeNode("Resize", {"x", "", "s5"}, {"r5"},
               A{AttrString("mode", "cubic"), AttrInt("exclude_outside", 1), AttrFloat("cubic_coeff_a", -0.5f)},
               "cubic_exclude"),
      MakeNode("Flatten", {"r1"}, {"f1"}, {AttrInt("axis", 0)}, "f1"),
      MakeNode("Flatten", {"r2"}, {"f2"}, {AttrInt("axis", 0)}, "f2"),
      MakeNode("Flatten", {"r3"}, {"f3"}, {AttrInt("axis", 0)}, "f3"),
      MakeNode("Flatten", {"r4"}, {"f4"}, {AttrInt("axis", 0)}, "f4"),
      MakeNode("Flatten", {"r5"}, {"f5"}, {AttrInt("axis", 0)}, "f5"),
      MakeNode("Concat", {"f1", "f2", "f3", "f4", "f5"}, {"y"}, {AttrInt("axis", 1)}, "concat")};
  AddWeightedLoss(&c.model, {1, 72 + 30 + 16 + 40 + 6}, 41);
  c.feeds = {{"x", Random({1, 2, 3, 4}, 42)}};
  c.xs = {"x"};
  CheckGradients(c, 1e-6);
}

// GatherND (with batch_dims and a repeated index tuple), ScatterND and ScatterElements with reductions none
// and add (data and updates both differentiated; indices without duplicates for reduction none), and TopK
// (largest along the last axis, smallest along axis 0) through the gradient builder.
TEST(AutodiffTest, GatherScatterTopK) {
  Case c{Base()};
  c.model.opset_imports[""] = 18;
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("a", DType::kFloat64, {2, 3, 4}), TensorInfo("u", DType::kFloat64, {2, 4}),
              TensorInfo("v", DType::kFloat64, {2, 2, 2})};
  g.AddInitializer("ind", Tensor::FromVector<int64_t>({1, 2, 1, 2, 0, -1}, {3, 2}));       // GatherND, repeated
  g.AddInitializer("bind", Tensor::FromVector<int64_t>({2, 0, 1, 1}, {2, 2, 1}));         // batch_dims 1
  g.AddInitializer("snd", Tensor::FromVector<int64_t>({1, 0, 0, 2}, {2, 2}));             // ScatterND rows
  g.AddInitializer("sel", Tensor::FromVector<int64_t>({1, 0, 2, 1, 0, 2, 1, 0}, {2, 2, 2}));  // axis 1
  g.AddInitializer("k", Tensor::FromVector<int64_t>({2}, {1}));
  using A = std::vector<onnx::AttributeProto>;
  g.nodes = {
      MakeNode("GatherND", {"a", "ind"}, {"g1"}, {}, "gnd"),
      MakeNode("GatherND", {"a", "bind"}, {"g2"}, A{AttrInt("batch_dims", 1)}, "gnd_batch"),
      MakeNode("ScatterND", {"a", "snd", "u"}, {"s1"}, {}, "snd_none"),
      MakeNode("ScatterND", {"a", "snd", "u"}, {"s2"}, A{AttrString("reduction", "add")}, "snd_add"),
      MakeNode("ScatterElements", {"a", "sel", "v"}, {"s3"}, A{AttrInt("axis", 1)}, "se_none"),
      MakeNode("ScatterElements", {"a", "sel", "v"}, {"s4"}, A{AttrInt("axis", 1), AttrString("reduction", "add")},
               "se_add"),
      MakeNode("TopK", {"a", "k"}, {"t1", "i1"}, {}, "topk_last"),
      MakeNode("TopK", {"a", "k"}, {"t2", "i2"}, A{AttrInt("axis", 0), AttrInt("largest", 0)}, "topk_first"),
      MakeNode("Flatten", {"g1"}, {"f1"}, {AttrInt("axis", 0)}, "f1"),
      MakeNode("Flatten", {"g2"}, {"f2"}, {AttrInt("axis", 0)}, "f2"),
      MakeNode("Flatten", {"s1"}, {"f3"}, {AttrInt("axis", 0)}, "f3"),
      MakeNode("Flatten", {"s2"}, {"f4"}, {AttrInt("axis", 0)}, "f4"),
      MakeNode("Flatten", {"s3"}, {"f5"}, {AttrInt("axis", 0)}, "f5"),
      MakeNode("Flatten", {"s4"}, {"f6"}, {AttrInt("axis", 0)}, "f6"),
      MakeNode("Flatten", {"t1"}, {"f7"}, {AttrInt("axis", 0)}, "f7"),
      MakeNode("Flatten", {"t2"}, {"f8"}, {AttrInt("axis", 0)}, "f8"),
      MakeNode("Concat", {"f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8"}, {"y"}, {AttrInt("axis", 1)}, "concat")};
  AddWeightedLoss(&c.model, {1, 12 + 16 + 24 * 4 + 12 + 24}, 51);
  c.feeds = {{"a", Random({2, 3, 4}, 52)}, {"u", Random({2, 4}, 53)}, {"v", Random({2, 2, 2}, 54)}};
  c.xs = {"a", "u", "v"};
  CheckGradients(c, 1e-6);
}

// Pad in wrap mode (opset 19) through the gradient builder, with a negative pad cropping one side. (Opset
// 18's axes input is not testable here: libonnx 1.12's shape inference knows only Pad-13 and rejects it.)
TEST(AutodiffTest, PadWrap) {
  Case c{Base()};
  c.model.opset_imports[""] = 19;
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3, 4})};
  g.AddInitializer("pads", Tensor::FromVector<int64_t>({0, 2, 1, 0, 1, 2}, {6}));
  g.nodes = {MakeNode("Pad", {"x", "pads"}, {"y"}, {AttrString("mode", "wrap")}, "pad")};
  AddWeightedLoss(&c.model, {2, 6, 7}, 61);
  c.feeds = {{"x", Random({2, 3, 4}, 62)}};
  c.xs = {"x"};
  CheckGradients(c, 1e-6);
}

// LSTM through the rewrite to LSTMTraining and its LSTMGrad, every input differentiated: forward with bias,
// initial states and sequence lengths (one row shorter, one empty), all three outputs in the loss;
// bidirectional with peepholes, clip and smooth non-default activations; reverse with input_forget; and
// layout 1 (batch first).
TEST(AutodiffTest, LstmEveryOption) {
  struct C {
    std::string direction;
    int64_t layout;
    bool peepholes, input_forget, lens;
    float clip;
    std::vector<std::string> activations;
  };
  const C cases[] = {{"forward", 0, false, false, true, 0, {}},
                     {"bidirectional", 0, true, false, false, 0.9f, {"Sigmoid", "Softsign", "ScaledTanh", "Sigmoid", "Tanh", "Softplus"}},
                     {"reverse", 0, false, true, true, 0, {}},
                     {"forward", 1, true, false, false, 0, {}}};
  const int64_t S = 4, B = 3, I = 2, H = 3;
  for (const C& t : cases) {
    SCOPED_TRACE(t.direction + " layout " + std::to_string(t.layout));
    const int64_t D = t.direction == "bidirectional" ? 2 : 1;
    Case c{Base()};
    Graph& g = c.model.graph;
    const Shape xs = t.layout ? Shape{B, S, I} : Shape{S, B, I};
    const Shape ss = t.layout ? Shape{B, D, H} : Shape{D, B, H};
    g.inputs = {TensorInfo("x", DType::kFloat64, xs), TensorInfo("w", DType::kFloat64, {D, 4 * H, I}),
                TensorInfo("r", DType::kFloat64, {D, 4 * H, H}), TensorInfo("b", DType::kFloat64, {D, 8 * H}),
                TensorInfo("h0", DType::kFloat64, ss), TensorInfo("c0", DType::kFloat64, ss)};
    std::vector<std::string> ins = {"x", "w", "r", "b", t.lens ? "sl" : "", "h0", "c0"};
    if (t.lens) g.AddInitializer("sl", Tensor::FromVector<int32_t>({4, 2, 0}, {3}));
    if (t.peepholes) {
      g.inputs.push_back(TensorInfo("p", DType::kFloat64, {D, 3 * H}));
      ins.push_back("p");
    }
    std::vector<onnx::AttributeProto> attrs = {AttrInt("hidden_size", H), AttrString("direction", t.direction),
                                               AttrInt("layout", t.layout), AttrInt("input_forget", t.input_forget)};
    if (t.clip > 0) attrs.push_back(AttrFloat("clip", t.clip));
    if (!t.activations.empty()) attrs.push_back(AttrStrings("activations", t.activations));
    g.nodes = {MakeNode("LSTM", ins, {"ys", "yh", "yc"}, attrs, "lstm"),
               MakeNode("Flatten", {"ys"}, {"f1"}, {AttrInt("axis", 0)}, "f1"),
               MakeNode("Flatten", {"yh"}, {"f2"}, {AttrInt("axis", 0)}, "f2"),
               MakeNode("Flatten", {"yc"}, {"f3"}, {AttrInt("axis", 0)}, "f3"),
               MakeNode("Concat", {"f1", "f2", "f3"}, {"y"}, {AttrInt("axis", 1)}, "concat")};
    AddWeightedLoss(&c.model, {1, S * D * B * H + 2 * D * B * H}, 71);
    c.feeds = {{"x", Random(xs, 72, -1, 1)}, {"w", Random({D, 4 * H, I}, 73, -0.8, 0.8)},
               {"r", Random({D, 4 * H, H}, 74, -0.8, 0.8)}, {"b", Random({D, 8 * H}, 75, -0.5, 0.5)},
               {"h0", Random(ss, 76)}, {"c0", Random(ss, 77)}};
    c.xs = {"x", "w", "r", "b", "h0", "c0"};
    if (t.peepholes) {
      c.feeds.push_back({"p", Random({D, 3 * H}, 78, -0.5, 0.5)});
      c.xs.push_back("p");
    }
    CheckGradients(c, 1e-6);
  }
}

// LSTMGrad's float32 path for the default activations (vectorized sigmoid and tanh, derivatives from the
// activations) against the float64 path checked above, on the same values: forward with sequence lengths,
// bidirectional, reverse with input_forget, and a clip that some pre-activations reach.
TEST(AutodiffTest, LstmFloatGradientsMatchDouble) {
  struct C {
    std::string direction;
    bool input_forget, lens;
    float clip;
  };
  const C cases[] = {{"forward", false, true, 0}, {"bidirectional", false, false, 0},
                     {"reverse", true, true, 0}, {"forward", false, false, 0.7f}};
  const int64_t S = 5, B = 4, I = 3, H = 16;
  for (const C& t : cases) {
    SCOPED_TRACE(t.direction + (t.input_forget ? " input_forget" : "") + (t.clip > 0 ? " clip" : ""));
    const int64_t D = t.direction == "bidirectional" ? 2 : 1;
    Case c{Base()};
    Graph& g = c.model.graph;
    const Shape ss = {D, B, H};
    g.inputs = {TensorInfo("x", DType::kFloat64, {S, B, I}), TensorInfo("w", DType::kFloat64, {D, 4 * H, I}),
                TensorInfo("r", DType::kFloat64, {D, 4 * H, H}), TensorInfo("b", DType::kFloat64, {D, 8 * H}),
                TensorInfo("h0", DType::kFloat64, ss), TensorInfo("c0", DType::kFloat64, ss)};
    if (t.lens) g.AddInitializer("sl", Tensor::FromVector<int32_t>({5, 3, 0, 1}, {4}));
    std::vector<onnx::AttributeProto> attrs = {AttrInt("hidden_size", H), AttrString("direction", t.direction),
                                               AttrInt("input_forget", t.input_forget)};
    if (t.clip > 0) attrs.push_back(AttrFloat("clip", t.clip));
    g.nodes = {MakeNode("LSTM", {"x", "w", "r", "b", t.lens ? "sl" : "", "h0", "c0"}, {"ys", "yh", "yc"}, attrs, "lstm"),
               MakeNode("Flatten", {"ys"}, {"f1"}, {AttrInt("axis", 0)}, "f1"),
               MakeNode("Flatten", {"yc"}, {"f2"}, {AttrInt("axis", 0)}, "f2"),
               MakeNode("Concat", {"f1", "f2"}, {"y"}, {AttrInt("axis", 1)}, "concat")};
    AddWeightedLoss(&c.model, {1, S * D * B * H + D * B * H}, 81);
    c.feeds = {{"x", Random({S, B, I}, 82)}, {"w", Random({D, 4 * H, I}, 83, -0.6, 0.6)},
               {"r", Random({D, 4 * H, H}, 84, -0.4, 0.4)}, {"b", Random({D, 8 * H}, 85, -0.5, 0.5)},
               {"h0", Random(ss, 86)}, {"c0", Random(ss, 87)}};
    c.xs = {"x", "w", "r", "b", "h0", "c0"};
    gradcheck::CheckFloat32AgainstFloat64(c, 2e-5);
  }
}

// GRU's float32 path for the default activations (vectorized sigmoid and tanh in GRUTraining and GRUGrad)
// against the float64 path checked below: linear_before_reset 0 and 1, sequence lengths, bidirectional, clip.
TEST(AutodiffTest, GruFloatGradientsMatchDouble) {
  struct C {
    std::string direction;
    int64_t linear_before_reset;
    bool lens;
    float clip;
  };
  const C cases[] = {{"forward", 1, true, 0}, {"bidirectional", 0, false, 0}, {"reverse", 1, true, 0},
                     {"forward", 0, false, 0.6f}};
  const int64_t S = 5, B = 4, I = 3, H = 16;
  for (const C& t : cases) {
    SCOPED_TRACE(t.direction + " linear_before_reset " + std::to_string(t.linear_before_reset) +
                 (t.clip > 0 ? " clip" : ""));
    const int64_t D = t.direction == "bidirectional" ? 2 : 1;
    Case c{Base()};
    Graph& g = c.model.graph;
    const Shape ss = {D, B, H};
    g.inputs = {TensorInfo("x", DType::kFloat64, {S, B, I}), TensorInfo("w", DType::kFloat64, {D, 3 * H, I}),
                TensorInfo("r", DType::kFloat64, {D, 3 * H, H}), TensorInfo("b", DType::kFloat64, {D, 6 * H}),
                TensorInfo("h0", DType::kFloat64, ss)};
    if (t.lens) g.AddInitializer("sl", Tensor::FromVector<int32_t>({5, 3, 0, 1}, {4}));
    std::vector<onnx::AttributeProto> attrs = {AttrInt("hidden_size", H), AttrString("direction", t.direction),
                                               AttrInt("linear_before_reset", t.linear_before_reset)};
    if (t.clip > 0) attrs.push_back(AttrFloat("clip", t.clip));
    g.nodes = {MakeNode("GRU", {"x", "w", "r", "b", t.lens ? "sl" : "", "h0"}, {"ys", "yh"}, attrs, "gru"),
               MakeNode("Flatten", {"ys"}, {"y"}, {AttrInt("axis", 0)}, "f1")};
    AddWeightedLoss(&c.model, {1, S * D * B * H}, 91);
    c.feeds = {{"x", Random({S, B, I}, 92)}, {"w", Random({D, 3 * H, I}, 93, -0.6, 0.6)},
               {"r", Random({D, 3 * H, H}, 94, -0.4, 0.4)}, {"b", Random({D, 6 * H}, 95, -0.5, 0.5)},
               {"h0", Random(ss, 96)}};
    c.xs = {"x", "w", "r", "b", "h0"};
    gradcheck::CheckFloat32AgainstFloat64(c, 2e-5);
  }
}

// GRU through the rewrite to GRUTraining and its GRUGrad: linear_before_reset 0 and 1 (PyTorch exports 1),
// forward with sequence lengths, bidirectional with clip and non-default activations, reverse, layout 1.
TEST(AutodiffTest, GruEveryOption) {
  struct C {
    std::string direction;
    int64_t layout, lbr;
    bool lens;
    float clip;
    std::vector<std::string> activations;
  };
  const C cases[] = {{"forward", 0, 0, true, 0, {}},
                     {"forward", 0, 1, true, 0, {}},
                     {"bidirectional", 0, 1, false, 0.9f, {"Sigmoid", "Softsign", "Sigmoid", "Tanh"}},
                     {"reverse", 0, 0, true, 0, {}},
                     {"bidirectional", 1, 0, false, 0, {}}};
  const int64_t S = 4, B = 3, I = 2, H = 3;
  for (const C& t : cases) {
    SCOPED_TRACE(t.direction + " layout " + std::to_string(t.layout) + " linear_before_reset " + std::to_string(t.lbr));
    const int64_t D = t.direction == "bidirectional" ? 2 : 1;
    Case c{Base()};
    Graph& g = c.model.graph;
    const Shape xs = t.layout ? Shape{B, S, I} : Shape{S, B, I};
    const Shape ss = t.layout ? Shape{B, D, H} : Shape{D, B, H};
    g.inputs = {TensorInfo("x", DType::kFloat64, xs), TensorInfo("w", DType::kFloat64, {D, 3 * H, I}),
                TensorInfo("r", DType::kFloat64, {D, 3 * H, H}), TensorInfo("b", DType::kFloat64, {D, 6 * H}),
                TensorInfo("h0", DType::kFloat64, ss)};
    if (t.lens) g.AddInitializer("sl", Tensor::FromVector<int32_t>({4, 2, 0}, {3}));
    std::vector<onnx::AttributeProto> attrs = {AttrInt("hidden_size", H), AttrString("direction", t.direction),
                                               AttrInt("layout", t.layout), AttrInt("linear_before_reset", t.lbr)};
    if (t.clip > 0) attrs.push_back(AttrFloat("clip", t.clip));
    if (!t.activations.empty()) attrs.push_back(AttrStrings("activations", t.activations));
    g.nodes = {MakeNode("GRU", {"x", "w", "r", "b", t.lens ? "sl" : "", "h0"}, {"ys", "yh"}, attrs, "gru"),
               MakeNode("Flatten", {"ys"}, {"f1"}, {AttrInt("axis", 0)}, "f1"),
               MakeNode("Flatten", {"yh"}, {"f2"}, {AttrInt("axis", 0)}, "f2"),
               MakeNode("Concat", {"f1", "f2"}, {"y"}, {AttrInt("axis", 1)}, "concat")};
    AddWeightedLoss(&c.model, {1, S * D * B * H + D * B * H}, 81);
    c.feeds = {{"x", Random(xs, 82)}, {"w", Random({D, 3 * H, I}, 83, -0.8, 0.8)},
               {"r", Random({D, 3 * H, H}, 84, -0.8, 0.8)}, {"b", Random({D, 6 * H}, 85, -0.5, 0.5)},
               {"h0", Random(ss, 86)}};
    c.xs = {"x", "w", "r", "b", "h0"};
    CheckGradients(c, 1e-6);
  }
}

// RNN with its RNNGrad: forward with sequence lengths, bidirectional with clip and non-default activations,
// reverse, and layout 1.
TEST(AutodiffTest, RnnEveryOption) {
  struct C {
    std::string direction;
    int64_t layout;
    bool lens;
    float clip;
    std::vector<std::string> activations;
  };
  const C cases[] = {{"forward", 0, true, 0, {}},
                     {"bidirectional", 0, false, 0.9f, {"Softsign", "Tanh"}},
                     {"reverse", 0, true, 0, {"Sigmoid"}},
                     {"bidirectional", 1, false, 0, {}}};
  const int64_t S = 4, B = 3, I = 2, H = 3;
  for (const C& t : cases) {
    SCOPED_TRACE(t.direction + " layout " + std::to_string(t.layout));
    const int64_t D = t.direction == "bidirectional" ? 2 : 1;
    Case c{Base()};
    Graph& g = c.model.graph;
    const Shape xs = t.layout ? Shape{B, S, I} : Shape{S, B, I};
    const Shape ss = t.layout ? Shape{B, D, H} : Shape{D, B, H};
    g.inputs = {TensorInfo("x", DType::kFloat64, xs), TensorInfo("w", DType::kFloat64, {D, H, I}),
                TensorInfo("r", DType::kFloat64, {D, H, H}), TensorInfo("b", DType::kFloat64, {D, 2 * H}),
                TensorInfo("h0", DType::kFloat64, ss)};
    if (t.lens) g.AddInitializer("sl", Tensor::FromVector<int32_t>({4, 2, 0}, {3}));
    std::vector<onnx::AttributeProto> attrs = {AttrInt("hidden_size", H), AttrString("direction", t.direction),
                                               AttrInt("layout", t.layout)};
    if (t.clip > 0) attrs.push_back(AttrFloat("clip", t.clip));
    if (!t.activations.empty()) attrs.push_back(AttrStrings("activations", t.activations));
    g.nodes = {MakeNode("RNN", {"x", "w", "r", "b", t.lens ? "sl" : "", "h0"}, {"ys", "yh"}, attrs, "rnn"),
               MakeNode("Flatten", {"ys"}, {"f1"}, {AttrInt("axis", 0)}, "f1"),
               MakeNode("Flatten", {"yh"}, {"f2"}, {AttrInt("axis", 0)}, "f2"),
               MakeNode("Concat", {"f1", "f2"}, {"y"}, {AttrInt("axis", 1)}, "concat")};
    AddWeightedLoss(&c.model, {1, S * D * B * H + D * B * H}, 91);
    c.feeds = {{"x", Random(xs, 92)}, {"w", Random({D, H, I}, 93, -0.8, 0.8)}, {"r", Random({D, H, H}, 94, -0.8, 0.8)},
               {"b", Random({D, 2 * H}, 95, -0.5, 0.5)}, {"h0", Random(ss, 96)}};
    c.xs = {"x", "w", "r", "b", "h0"};
    CheckGradients(c, 1e-6);
  }
}

// Einsum through its gradient builder: batched matrix product, attention scores, transpose, a full sum and a
// letter summed away within one operand (restored by Expand), an inner product, an implicit output, an
// ellipsis (also broadcast through size-1 dims), three operands (the kernel's direct loop), and diagonals
// (a letter repeated within an operand, with and without letters summed away, three times, twice over, and
// under an ellipsis, broadcast or not).
TEST(AutodiffTest, EinsumEquations) {
  struct C {
    std::string eq;
    std::vector<Shape> shapes;
    Shape out;
  };
  const C cases[] = {{"bij,bjk->bik", {{2, 3, 4}, {2, 4, 2}}, {2, 3, 2}},
                     {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}, {2, 2, 3, 5}},
                     {"ij->ji", {{3, 4}}, {4, 3}},
                     {"ij,j->", {{3, 4}, {4}}, {}},
                     {"ij,jk->i", {{3, 4}, {4, 2}}, {3}},
                     {"i,i->", {{5}, {5}}, {}},
                     {"ij,jk", {{3, 4}, {4, 2}}, {3, 2}},
                     {"...ij,...jk->...ik", {{2, 3, 4}, {2, 4, 2}}, {2, 3, 2}},
                     // broadcast under the ellipsis: size-1 dims on one side and on both (libonnx 1.12's
                     // shape inference refuses ellipses of different ranks)
                     {"...ij,...jk->...ik", {{1, 3, 4}, {2, 4, 2}}, {2, 3, 2}},
                     {"...ij,...jk->...ik", {{3, 1, 3, 4}, {1, 5, 4, 2}}, {3, 5, 3, 2}},
                     {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}, {2, 2}},
                     // diagonals: a letter repeated within an operand
                     {"ii->i", {{4, 4}}, {4}},
                     {"ii->", {{3, 3}}, {}},
                     {"bii->bi", {{2, 3, 3}}, {2, 3}},
                     {"iij,jk->ik", {{3, 3, 4}, {4, 2}}, {3, 2}},
                     {"ijij->", {{2, 3, 2, 3}}, {}},
                     {"iji,k->jk", {{3, 2, 3}, {4}}, {2, 4}},
                     {"iijk,i->k", {{2, 2, 3, 4}, {2}}, {4}},
                     {"iii->i", {{3, 3, 3}}, {3}},
                     // diagonals under an ellipsis, also broadcast through a size-1 dim
                     {"...ii->...i", {{2, 3, 3}}, {2, 3}},
                     {"b...ii->b...", {{2, 3, 4, 4}}, {2, 3}},
                     {"...ii,...j->...ij", {{1, 3, 3}, {2, 4}}, {2, 3, 4}},
                     {"...ii,...i->...", {{2, 1, 3, 3}, {2, 5, 3}}, {2, 5}}};
  uint32_t seed = 100;
  for (const C& t : cases) {
    SCOPED_TRACE(t.eq);
    Case c{Base()};
    Graph& g = c.model.graph;
    std::vector<std::string> ins;
    for (size_t k = 0; k < t.shapes.size(); ++k) {
      const std::string name = "x" + std::to_string(k);
      g.inputs.push_back(TensorInfo(name, DType::kFloat64, t.shapes[k]));
      c.feeds.push_back({name, Random(t.shapes[k], seed++)});
      c.xs.push_back(name);
      ins.push_back(name);
    }
    g.nodes = {MakeNode("Einsum", ins, {"y"}, {AttrString("equation", t.eq)}, "einsum")};
    AddWeightedLoss(&c.model, t.out, seed++);
    CheckGradients(c, 1e-6);
  }
}

// The inverse trigonometric and hyperbolic functions, Tan and CastLike, each inside its domain.
TEST(AutodiffTest, TrigonometricAndHyperbolic) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("a", DType::kFloat64, {5}), TensorInfo("b", DType::kFloat64, {5})};
  g.AddInitializer("like", Tensor::FromVector<double>({0.0}, {1}));
  g.nodes = {MakeNode("Asin", {"a"}, {"t1"}, {}, "asin"),       MakeNode("Acos", {"a"}, {"t2"}, {}, "acos"),
             MakeNode("Atan", {"b"}, {"t3"}, {}, "atan"),       MakeNode("Tan", {"a"}, {"t4"}, {}, "tan"),
             MakeNode("Sinh", {"b"}, {"t5"}, {}, "sinh"),       MakeNode("Cosh", {"b"}, {"t6"}, {}, "cosh"),
             MakeNode("Asinh", {"b"}, {"t7"}, {}, "asinh"),     MakeNode("Acosh", {"b"}, {"t8"}, {}, "acosh"),
             MakeNode("Atanh", {"a"}, {"t9"}, {}, "atanh"),     MakeNode("CastLike", {"a", "like"}, {"t10"}, {}, "castlike"),
             MakeNode("Concat", {"t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10"}, {"y"}, {AttrInt("axis", 0)},
                      "concat")};
  AddWeightedLoss(&c.model, {50}, 111);
  c.feeds = {{"a", Random({5}, 112, -0.8, 0.8)}, {"b", Random({5}, 113, 1.2, 2.0)}};
  c.xs = {"a", "b"};
  CheckGradients(c, 1e-6);
}

// DepthToSpace (both modes) and SpaceToDepth: their gradients are the inverse permutations.
TEST(AutodiffTest, DepthToSpaceAndSpaceToDepth) {
  struct C {
    std::string op, mode;
    Shape in, out;
  };
  const C cases[] = {{"DepthToSpace", "DCR", {2, 8, 3, 2}, {2, 2, 6, 4}},
                     {"DepthToSpace", "CRD", {2, 8, 3, 2}, {2, 2, 6, 4}},
                     {"DepthToSpace", "CRD", {1, 18, 2, 2}, {1, 2, 6, 6}},
                     {"SpaceToDepth", "", {2, 3, 4, 6}, {2, 12, 2, 3}}};
  uint32_t seed = 300;
  for (const C& t : cases) {
    SCOPED_TRACE(t.op + " " + t.mode);
    Case c{Base()};
    Graph& g = c.model.graph;
    g.inputs.push_back(TensorInfo("x", DType::kFloat64, t.in));
    c.feeds.push_back({"x", Random(t.in, seed++)});
    c.xs.push_back("x");
    std::vector<onnx::AttributeProto> attrs = {AttrInt("blocksize", t.op == "DepthToSpace" && t.in[1] == 18 ? 3 : 2)};
    if (!t.mode.empty()) attrs.push_back(AttrString("mode", t.mode));
    g.nodes = {MakeNode(t.op, {"x"}, {"y"}, attrs, "shuffle")};
    AddWeightedLoss(&c.model, t.out, seed++);
    CheckGradients(c, 1e-6);
  }
}

}  // namespace
}  // namespace ontrain
