// The gradient graph builder checked against central finite differences in float64, on small graphs that
// cover every gradient builder: for L = sum(w * f(inputs)), the built <x>_grad outputs must match
// (L(x + h) - L(x - h)) / 2h for every element of every input.
// Graphs whose shapes are known only at run time are in autodiff_shapes_test.cc.
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

TEST(AutodiffTest, MlpWithCrossEntropy) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {3, 4}), TensorInfo("w1", DType::kFloat64, {5, 4}),
              TensorInfo("b1", DType::kFloat64, {5}), TensorInfo("w2", DType::kFloat64, {5, 3}),
              TensorInfo("b2", DType::kFloat64, {3}), TensorInfo("labels", DType::kInt64, {3})};
  g.nodes = {MakeNode("Gemm", {"x", "w1", "b1"}, {"h"}, {AttrInt("transB", 1)}, "fc1"),
             MakeNode("Relu", {"h"}, {"r"}, {}, "relu"),
             MakeNode("MatMul", {"r", "w2"}, {"z0"}, {}, "fc2"),
             MakeNode("Add", {"z0", "b2"}, {"z"}, {}, "bias2"),
             MakeNode("SoftmaxCrossEntropyLoss", {"z", "labels"}, {"loss"}, {AttrString("reduction", "mean")}, "ce")};
  g.outputs = {TensorInfo("loss", DType::kFloat64, {})};
  c.feeds = {{"x", Random({3, 4}, 1)}, {"w1", Random({5, 4}, 2)}, {"b1", Random({5}, 3)},
             {"w2", Random({5, 3}, 4)}, {"b2", Random({3}, 5)}};
  c.fixed = {{"labels", Tensor::FromVector<int64_t>({2, 0, 1}, {3})}};
  c.xs = {"x", "w1", "b1", "w2", "b2"};
  CheckGradients(c);
}

TEST(AutodiffTest, ElementwiseWithBroadcastingAndSharedValues) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("a", DType::kFloat64, {2, 3}), TensorInfo("b", DType::kFloat64, {3}),
              TensorInfo("c", DType::kFloat64, {2, 1})};
  g.AddInitializer("two", Tensor::FromVector<double>({2.0}, {}));
  g.nodes = {MakeNode("Add", {"a", "b"}, {"t1"}, {}, "add"),     MakeNode("Mul", {"t1", "c"}, {"t2"}, {}, "mul"),
             MakeNode("Sub", {"t2", "a"}, {"t3"}, {}, "sub"),     MakeNode("Exp", {"t3"}, {"t4"}, {}, "exp"),
             MakeNode("Sqrt", {"t4"}, {"t5"}, {}, "sqrt"),        MakeNode("Log", {"t5"}, {"t6"}, {}, "log"),
             MakeNode("Tanh", {"t6"}, {"t7"}, {}, "tanh"),        MakeNode("Sigmoid", {"t7"}, {"t8"}, {}, "sigmoid"),
             MakeNode("Pow", {"t8", "two"}, {"t9"}, {}, "pow"),   MakeNode("Div", {"t9", "c"}, {"t10"}, {}, "div"),
             MakeNode("Neg", {"t10"}, {"t11"}, {}, "neg"),        MakeNode("Abs", {"t11"}, {"t12"}, {}, "abs"),
             MakeNode("Erf", {"t12"}, {"t13"}, {}, "erf"),        MakeNode("Reciprocal", {"c"}, {"rc"}, {}, "recip"),
             MakeNode("Add", {"t13", "rc"}, {"t14"}, {}, "add2"), MakeNode("Mul", {"t14", "t14"}, {"y"}, {}, "square")};
  AddWeightedLoss(&c.model, {2, 3}, 9);
  c.feeds = {{"a", Random({2, 3}, 6)}, {"b", Random({3}, 7)}, {"c", Random({2, 1}, 8, 0.5, 1.5)}};
  c.xs = {"a", "b", "c"};
  CheckGradients(c, 2e-6);
}

TEST(AutodiffTest, SymbolicBatchUsesRuntimeBroadcastAxes) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {-1, 3}, {"N", ""}), TensorInfo("b", DType::kFloat64, {3}),
              TensorInfo("s", DType::kFloat64, {-1, 1}, {"N", ""})};
  g.nodes = {MakeNode("Add", {"x", "b"}, {"t"}, {}, "add"), MakeNode("Div", {"t", "s"}, {"y"}, {}, "div")};
  AddWeightedLoss(&c.model, {4, 3}, 10);
  c.model.graph.inputs[0].dims[0] = Dim{-1, "N"};
  c.feeds = {{"x", Random({4, 3}, 11)}, {"b", Random({3}, 12)}, {"s", Random({4, 1}, 13, 0.5, 2)}};
  c.xs = {"x", "b", "s"};
  CheckGradients(c);
}

TEST(AutodiffTest, ConvPoolFlatten) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 2, 6, 6}), TensorInfo("w", DType::kFloat64, {3, 2, 3, 3}),
              TensorInfo("cb", DType::kFloat64, {3}), TensorInfo("fw", DType::kFloat64, {4, 27})};
  g.nodes = {MakeNode("Conv", {"x", "w", "cb"}, {"c1"}, {AttrInts("pads", {1, 1, 1, 1})}, "conv"),
             MakeNode("Relu", {"c1"}, {"r1"}, {}, "relu"),
             MakeNode("MaxPool", {"r1"}, {"p1"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, "pool"),
             MakeNode("AveragePool", {"p1"}, {"p2"}, {AttrInts("kernel_shape", {2, 2}), AttrInts("pads", {0, 0, 1, 1})}, "avg"),
             MakeNode("Flatten", {"p2"}, {"f"}, {}, "flatten"),
             MakeNode("Gemm", {"f", "fw"}, {"y0"}, {AttrInt("transB", 1)}, "fc"),
             MakeNode("GlobalAveragePool", {"c1"}, {"gap"}, {}, "gap"),
             MakeNode("Flatten", {"gap"}, {"gf"}, {}, "gflat"),
             MakeNode("ReduceMean", {"gf"}, {"gm"}, {AttrInts("axes", {1}), AttrInt("keepdims", 1)}, "gmean"),
             MakeNode("Add", {"y0", "gm"}, {"y"}, {}, "join")};
  AddWeightedLoss(&c.model, {2, 4}, 14);
  c.feeds = {{"x", Random({2, 2, 6, 6}, 15)}, {"w", Random({3, 2, 3, 3}, 16)}, {"cb", Random({3}, 17)},
             {"fw", Random({4, 27}, 18)}};
  c.xs = {"x", "w", "cb", "fw"};
  CheckGradients(c);
}

// The stride-1 convolutions that take the padded-rows path (shifted GEMMs forward and for dX, one copy per
// patch row for dW): asymmetric pads, dilation 2, two groups, a rectangular kernel, a padded 1x1 and a plain
// 1x1 (the image is its own patch matrix), with three images so dW sums over a batch.
TEST(AutodiffTest, StrideOneConvolutionsOfEveryShape) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {3, 4, 5, 6}), TensorInfo("w1", DType::kFloat64, {4, 2, 3, 2}),
              TensorInfo("w2", DType::kFloat64, {2, 4, 3, 3}), TensorInfo("w3", DType::kFloat64, {3, 2, 1, 1}),
              TensorInfo("w4", DType::kFloat64, {2, 3, 1, 1}), TensorInfo("b1", DType::kFloat64, {4})};
  g.nodes = {MakeNode("Conv", {"x", "w1", "b1"}, {"c1"}, {AttrInt("group", 2), AttrInts("pads", {2, 0, 1, 1})}, "grouped"),
             MakeNode("Conv", {"c1", "w2"}, {"c2"}, {AttrInts("dilations", {2, 2}), AttrInts("pads", {2, 2, 2, 2})}, "dilated"),
             MakeNode("Conv", {"c2", "w3"}, {"c3"}, {AttrInts("pads", {1, 0, 0, 1})}, "padded_1x1"),
             MakeNode("Conv", {"c3", "w4"}, {"y"}, {}, "plain_1x1")};
  // c1 [3, 4, 6, 6]; c2 [3, 2, 6, 6]; c3 [3, 3, 7, 7]; y [3, 2, 7, 7]
  AddWeightedLoss(&c.model, {3, 2, 7, 7}, 50);
  c.feeds = {{"x", Random({3, 4, 5, 6}, 51)}, {"w1", Random({4, 2, 3, 2}, 52)}, {"w2", Random({2, 4, 3, 3}, 53)},
             {"w3", Random({3, 2, 1, 1}, 54)}, {"w4", Random({2, 3, 1, 1}, 55)}, {"b1", Random({4}, 56)}};
  c.xs = {"x", "w1", "w2", "w3", "w4", "b1"};
  CheckGradients(c, 1e-5);
}

TEST(AutodiffTest, TransformerPieces) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3, 4}), TensorInfo("wq", DType::kFloat64, {4, 4}),
              TensorInfo("ln_s", DType::kFloat64, {4}), TensorInfo("ln_b", DType::kFloat64, {4}),
              TensorInfo("emb", DType::kFloat64, {5, 4})};
  g.AddInitializer("idx", Tensor::FromVector<int64_t>({1, 4, 1}, {3}));
  g.AddInitializer("shape", Tensor::FromVector<int64_t>({1, 12}, {2}));
  g.AddInitializer("axes0", Tensor::FromVector<int64_t>({0}, {1}));
  g.nodes = {MakeNode("LayerNormalization", {"x", "ln_s", "ln_b"}, {"ln"}, {AttrFloat("epsilon", 1e-3f)}, "ln"),
             MakeNode("MatMul", {"ln", "wq"}, {"q"}, {}, "q"),
             MakeNode("Transpose", {"q"}, {"qt"}, {AttrInts("perm", {0, 2, 1})}, "qt"),
             MakeNode("MatMul", {"q", "qt"}, {"s"}, {}, "scores"),
             MakeNode("Softmax", {"s"}, {"p"}, {AttrInt("axis", -1)}, "softmax"),
             MakeNode("MatMul", {"p", "q"}, {"o"}, {}, "attend"),
             MakeNode("Gather", {"emb", "idx"}, {"e"}, {AttrInt("axis", 0)}, "embed"),
             MakeNode("Unsqueeze", {"e", "axes0"}, {"eu"}, {}, "unsq"),
             MakeNode("Concat", {"o", "eu"}, {"oc"}, {AttrInt("axis", 0)}, "concat"),
             MakeNode("Gelu", {"oc"}, {"ge"}, {}, "gelu", "com.microsoft"),
             MakeNode("ReduceMean", {"ge"}, {"m"}, {AttrInts("axes", {0}), AttrInt("keepdims", 0)}, "mean"),
             MakeNode("Reshape", {"m", "shape"}, {"y0"}, {}, "reshape"),
             MakeNode("LogSoftmax", {"y0"}, {"y"}, {AttrInt("axis", 1)}, "logsoftmax")};
  c.model.opset_imports["com.microsoft"] = 1;
  AddWeightedLoss(&c.model, {1, 12}, 19);
  c.feeds = {{"x", Random({2, 3, 4}, 20)}, {"wq", Random({4, 4}, 21)}, {"ln_s", Random({4}, 22, 0.5, 1.5)},
             {"ln_b", Random({4}, 23)}, {"emb", Random({5, 4}, 24)}};
  c.xs = {"x", "wq", "ln_s", "ln_b", "emb"};
  CheckGradients(c, 1e-5);
}

// com.microsoft FastGelu, without and with its bias input (the bias gradient sums over the leading axes).
TEST(AutodiffTest, FastGeluWithAndWithoutBias) {
  Case c{Base()};
  Graph& g = c.model.graph;
  c.model.opset_imports["com.microsoft"] = 1;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3, 4}), TensorInfo("bias", DType::kFloat64, {4})};
  g.nodes = {MakeNode("FastGelu", {"x"}, {"a"}, {}, "fastgelu", "com.microsoft"),
             MakeNode("FastGelu", {"x", "bias"}, {"b"}, {}, "fastgelu_bias", "com.microsoft"),
             MakeNode("Mul", {"a", "b"}, {"y"}, {}, "mul")};
  AddWeightedLoss(&c.model, {2, 3, 4}, 33);
  c.feeds = {{"x", Random({2, 3, 4}, 34, -2.5, 2.5)}, {"bias", Random({4}, 35)}};
  c.xs = {"x", "bias"};
  CheckGradients(c, 1e-5);
}

TEST(AutodiffTest, BatchNormTrainingAndDropout) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {4, 2, 3}), TensorInfo("s", DType::kFloat64, {2}),
              TensorInfo("b", DType::kFloat64, {2})};
  g.AddInitializer("mean", Tensor::FromVector<double>({0, 0}, {2}));
  g.AddInitializer("var", Tensor::FromVector<double>({1, 1}, {2}));
  g.nodes = {MakeNode("BatchNormalization", {"x", "s", "b", "mean", "var"}, {"bn"}, {AttrFloat("epsilon", 1e-3f)}, "bn"),
             MakeNode("Dropout", {"bn"}, {"d"}, {}, "dropout"),
             MakeNode("Identity", {"d"}, {"y"}, {}, "id")};
  AddWeightedLoss(&c.model, {4, 2, 3}, 25);
  c.feeds = {{"x", Random({4, 2, 3}, 26)}, {"s", Random({2}, 27, 0.5, 1.5)}, {"b", Random({2}, 28)}};
  c.xs = {"x", "s", "b"};
  CheckGradients(c, 1e-5);
}

TEST(AutodiffTest, ComposedActivations) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 5})};
  g.nodes = {MakeNode("Softplus", {"x"}, {"a"}, {}, "softplus"),
             MakeNode("Softsign", {"x"}, {"b"}, {}, "softsign"),
             MakeNode("Elu", {"x"}, {"e"}, {AttrFloat("alpha", 0.7f)}, "elu"),
             MakeNode("Selu", {"x"}, {"f"}, {}, "selu"),
             MakeNode("HardSigmoid", {"x"}, {"h"}, {AttrFloat("alpha", 0.3f)}, "hardsigmoid"),
             MakeNode("Sin", {"x"}, {"s"}, {}, "sin"),
             MakeNode("Cos", {"x"}, {"k"}, {}, "cos"),
             MakeNode("ThresholdedRelu", {"x"}, {"tr"}, {AttrFloat("alpha", 0.3f)}, "thresholded"),
             MakeNode("HardSwish", {"x"}, {"hs"}, {}, "hardswish"),
             MakeNode("PRelu", {"x", "slope"}, {"pr"}, {}, "prelu"),
             MakeNode("Sum", {"a", "b", "e", "f", "h", "s", "k", "tr", "hs", "pr"}, {"y"}, {}, "sum")};
  g.inputs.push_back(TensorInfo("slope", DType::kFloat64, {5}));
  AddWeightedLoss(&c.model, {2, 5}, 30);
  c.feeds = {{"x", Tensor::FromVector<double>({-3.7, -2.1, -0.9, -0.2, 0.1, 0.25, 0.6, 1.3, 2.8, 3.6}, {2, 5})},
             {"slope", Random({5}, 32)}};
  c.xs = {"x", "slope"};
  CheckGradients(c, 1e-5);
}

// Celu is float32-only in ONNX: its built gradient is checked against the closed form instead.
TEST(AutodiffTest, CeluAgainstClosedForm) {
  Model m = Base();
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {6})};
  m.graph.nodes = {MakeNode("Celu", {"x"}, {"y"}, {AttrFloat("alpha", 0.8f)}, "celu"),
                   MakeNode("ReduceSum", {"y"}, {"loss"}, {AttrInt("keepdims", 0)}, "sum")};
  m.graph.outputs = {TensorInfo("loss", DType::kFloat32, {})};
  ASSERT_TRUE(BuildGradientGraph(&m, "loss", {"x"}).ok());
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get()).value();
  std::vector<float> x = {-2.0f, -0.7f, -0.1f, 0.2f, 1.0f, 3.0f};
  std::vector<Tensor> out;
  ASSERT_TRUE(ex->Run({{"x", Tensor::FromVector(x, {6})}}, {"x_grad"}, &out).ok());
  for (int i = 0; i < 6; ++i) {
    double expect = x[i] > 0 ? 1.0 : std::exp(x[i] / 0.8);
    EXPECT_NEAR(out[0].data<float>()[i], expect, 1e-6) << i;
  }
}

TEST(AutodiffTest, SelectionAndIndexOps) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("a", DType::kFloat64, {3, 4}), TensorInfo("b", DType::kFloat64, {3, 4}),
              TensorInfo("lo", DType::kFloat64, {}), TensorInfo("hi", DType::kFloat64, {})};
  g.AddInitializer("ax1", Tensor::FromVector<int64_t>({1}, {}));
  g.AddInitializer("gi", Tensor::FromVector<int64_t>({2, 0, 1, 3, 3, 1}, {3, 2}));
  g.AddInitializer("st", Tensor::FromVector<int64_t>({3, 0}, {2}));
  g.AddInitializer("en", Tensor::FromVector<int64_t>({0, 3}, {2}));
  g.AddInitializer("sa", Tensor::FromVector<int64_t>({1, 0}, {2}));
  g.AddInitializer("ss", Tensor::FromVector<int64_t>({-2, 1}, {2}));
  g.AddInitializer("sp", Tensor::FromVector<int64_t>({1, 3}, {2}));
  g.nodes = {MakeNode("Greater", {"a", "b"}, {"cond"}, {}, "gt"),
             MakeNode("Where", {"cond", "a", "b"}, {"w"}, {}, "where"),
             MakeNode("Clip", {"w", "lo", "hi"}, {"cl"}, {}, "clip"),
             MakeNode("Neg", {"b"}, {"nb"}, {}, "neg"),  // no ties below: a tie splits no gradient
             MakeNode("Max", {"cl", "nb"}, {"mx"}, {}, "max"),
             MakeNode("Exp", {"a"}, {"ea2"}, {}, "exp2"),
             MakeNode("Min", {"mx", "ea2"}, {"mn"}, {}, "min"),
             MakeNode("Mean", {"mn", "a", "b"}, {"me"}, {}, "mean"),
             MakeNode("CumSum", {"me", "ax1"}, {"cs"}, {AttrInt("reverse", 1)}, "cumsum"),
             MakeNode("Trilu", {"cs"}, {"tr"}, {AttrInt("upper", 0)}, "trilu"),
             MakeNode("GatherElements", {"tr", "gi"}, {"ge"}, {AttrInt("axis", 1)}, "gatherelements"),
             MakeNode("Slice", {"tr", "st", "en", "sa", "ss"}, {"sl"}, {}, "slice"),
             MakeNode("Split", {"a", "sp"}, {"s1", "s2"}, {AttrInt("axis", 1)}, "split"),
             MakeNode("ReduceMax", {"s2"}, {"r1"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, "rmax"),
             MakeNode("ReduceMin", {"b"}, {"r2"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, "rmin"),
             MakeNode("ReduceSumSquare", {"b"}, {"r3"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, "rss"),
             MakeNode("ReduceL2", {"a"}, {"r4"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, "rl2"),
             MakeNode("ReduceL1", {"a"}, {"r5"}, {AttrInts("axes", {1}), AttrInt("keepdims", 1)}, "rl1"),
             MakeNode("ReduceLogSumExp", {"b"}, {"r6"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, "rlse"),
             MakeNode("Exp", {"a"}, {"ea"}, {}, "exp"),
             MakeNode("ReduceLogSum", {"ea"}, {"r7"}, {AttrInts("axes", {1}), AttrInt("keepdims", 0)}, "rls"),
             MakeNode("Flatten", {"r5"}, {"r5f"}, {AttrInt("axis", 0)}, "flat"),
             MakeNode("Concat", {"r1", "r2", "r3", "r4", "r6", "r7"}, {"rc"}, {AttrInt("axis", 0)}, "concat"),
             MakeNode("ReduceSum", {"ge"}, {"t1"}, {AttrInt("keepdims", 0)}, "t1"),
             MakeNode("ReduceSum", {"sl"}, {"t2"}, {AttrInt("keepdims", 0)}, "t2"),
             MakeNode("ReduceSum", {"r5f"}, {"t3"}, {AttrInt("keepdims", 0)}, "t3"),
             MakeNode("Add", {"rc", "t1"}, {"u1"}, {}, "u1"),
             MakeNode("Add", {"u1", "t2"}, {"u2"}, {}, "u2"),
             MakeNode("Add", {"u2", "t3"}, {"y"}, {}, "u3")};
  AddWeightedLoss(&c.model, {18}, 32);
  c.feeds = {{"a", Random({3, 4}, 33)}, {"b", Random({3, 4}, 34)}, {"lo", Tensor::FromVector<double>({-0.6}, {})},
             {"hi", Tensor::FromVector<double>({0.7}, {})}};
  c.xs = {"a", "b"};
  CheckGradients(c, 1e-5);
}

TEST(AutodiffTest, ConvTransposePadTileNll) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3, 4}), TensorInfo("w", DType::kFloat64, {3, 2, 3}),
              TensorInfo("b", DType::kFloat64, {2}), TensorInfo("t", DType::kFloat64, {2, 3})};
  g.AddInitializer("pads", Tensor::FromVector<int64_t>({0, 1, -1, 0, 0, 2}, {6}));
  g.AddInitializer("reps", Tensor::FromVector<int64_t>({2, 3}, {2}));
  g.AddInitializer("target", Tensor::FromVector<int64_t>({1, 0, 2, 2, 1, 0}, {2, 3}));
  g.nodes = {MakeNode("ConvTranspose", {"x", "w", "b"}, {"ct"}, {AttrInts("strides", {2}), AttrInts("pads", {1, 0})}, "ct"),
             MakeNode("Pad", {"ct", "pads"}, {"pd"}, {}, "pad"),
             MakeNode("Tile", {"t", "reps"}, {"tl"}, {}, "tile"),
             MakeNode("LogSoftmax", {"x"}, {"ls"}, {AttrInt("axis", 1)}, "logsoftmax"),
             MakeNode("Slice", {"ls", "s0", "s1", "s2"}, {"lss"}, {}, "slice3"),
             MakeNode("NegativeLogLikelihoodLoss", {"lss", "target"}, {"nll"}, {AttrString("reduction", "mean")}, "nll"),
             MakeNode("ReduceSum", {"pd"}, {"r1"}, {AttrInt("keepdims", 0)}, "r1"),
             MakeNode("ReduceSumSquare", {"tl"}, {"r2"}, {AttrInt("keepdims", 0)}, "r2"),
             MakeNode("Mul", {"pd", "pd"}, {"pd2"}, {}, "pd2"),
             MakeNode("ReduceSum", {"pd2"}, {"r3"}, {AttrInt("keepdims", 0)}, "r3"),
             MakeNode("Sum", {"r1", "r2", "r3", "nll"}, {"y"}, {}, "total")};
  g.AddInitializer("s0", Tensor::FromVector<int64_t>({0}, {1}));
  g.AddInitializer("s1", Tensor::FromVector<int64_t>({3}, {1}));
  g.AddInitializer("s2", Tensor::FromVector<int64_t>({2}, {1}));
  AddWeightedLoss(&c.model, {}, 40);
  c.feeds = {{"x", Random({2, 3, 4}, 41)}, {"w", Random({3, 2, 3}, 42)}, {"b", Random({2}, 43)}, {"t", Random({2, 3}, 44)}};
  c.xs = {"x", "w", "b", "t"};
  CheckGradients(c, 1e-5);
}

TEST(AutodiffTest, InstanceNormProdAndPiecewiseConstantOps) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3, 4, 2}), TensorInfo("s", DType::kFloat64, {3}),
              TensorInfo("b", DType::kFloat64, {3})};
  g.nodes = {MakeNode("InstanceNormalization", {"x", "s", "b"}, {"in"}, {AttrFloat("epsilon", 1e-3f)}, "instnorm"),
             MakeNode("Floor", {"x"}, {"f"}, {}, "floor"), MakeNode("Ceil", {"x"}, {"cl"}, {}, "ceil"),
             MakeNode("Round", {"x"}, {"r"}, {}, "round"), MakeNode("Sign", {"x"}, {"sg"}, {}, "sign"),
             MakeNode("Hardmax", {"x"}, {"hm"}, {}, "hardmax"),
             MakeNode("Sum", {"in", "f", "cl", "r", "sg", "hm"}, {"t"}, {}, "sum"),
             MakeNode("ReduceProd", {"x"}, {"p"}, {AttrInts("axes", {3}), AttrInt("keepdims", 0)}, "prod"),
             MakeNode("ReduceSum", {"t"}, {"ts"}, {AttrInt("keepdims", 0)}, "tsum"),
             MakeNode("ReduceSum", {"p"}, {"ps"}, {AttrInt("keepdims", 0)}, "psum"),
             MakeNode("Mul", {"in", "in"}, {"in2"}, {}, "in2"),
             MakeNode("ReduceSum", {"in2"}, {"is"}, {AttrInt("keepdims", 0)}, "isum"),
             MakeNode("Sum", {"ts", "ps", "is"}, {"y"}, {}, "total")};
  AddWeightedLoss(&c.model, {}, 50);
  c.feeds = {{"x", Random({2, 3, 4, 2}, 51, 0.1, 1.9)}, {"s", Random({3}, 52, 0.5, 1.5)}, {"b", Random({3}, 53)}};
  c.xs = {"x", "s", "b"};
  CheckGradients(c, 1e-5);
}

// NegativeLogLikelihoodLoss with class weights and ignore_index over [N, C, d1] scores, in all three
// reductions; ignored positions (target -1) must get no gradient, and "mean" divides by the kept weights.
TEST(AutodiffTest, NllWithClassWeightsAndIgnoreIndex) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {3, 4, 2})};
  g.AddInitializer("target", Tensor::FromVector<int64_t>({1, -1, 3, 0, -1, 2}, {3, 2}));
  g.AddInitializer("cw", Tensor::FromVector<double>({0.5, 2.0, 1.5, 0.25}, {4}));
  g.nodes = {MakeNode("LogSoftmax", {"x"}, {"ls"}, {AttrInt("axis", 1)}, "logsoftmax"),
             MakeNode("NegativeLogLikelihoodLoss", {"ls", "target", "cw"}, {"mean"},
                      {AttrString("reduction", "mean"), AttrInt("ignore_index", -1)}, "nll_mean"),
             MakeNode("NegativeLogLikelihoodLoss", {"ls", "target"}, {"sum"},
                      {AttrString("reduction", "sum"), AttrInt("ignore_index", -1)}, "nll_sum"),
             MakeNode("NegativeLogLikelihoodLoss", {"x", "target", "cw"}, {"none"},
                      {AttrString("reduction", "none"), AttrInt("ignore_index", -1)}, "nll_none"),
             MakeNode("Mul", {"none", "none"}, {"none2"}, {}, "none2"),
             MakeNode("ReduceSum", {"none2"}, {"nsum"}, {AttrInt("keepdims", 0)}, "nsum"),
             MakeNode("Sum", {"mean", "sum", "nsum"}, {"y"}, {}, "total")};
  AddWeightedLoss(&c.model, {}, 70);
  c.feeds = {{"x", Random({3, 4, 2}, 71)}};
  c.xs = {"x"};
  CheckGradients(c, 1e-5);

  // Weights only (no ignore_index), reduction mean, against the closed form -w[t] / sum(w[t]) at the targets.
  Model m = Base();
  m.graph.inputs = {TensorInfo("x", DType::kFloat64, {3, 4})};
  m.graph.AddInitializer("target", Tensor::FromVector<int64_t>({1, 3, 1}, {3}));
  m.graph.AddInitializer("cw", Tensor::FromVector<double>({0.5, 2.0, 1.5, 0.25}, {4}));
  m.graph.nodes = {MakeNode("NegativeLogLikelihoodLoss", {"x", "target", "cw"}, {"loss"}, {}, "nll")};
  m.graph.outputs = {TensorInfo("loss", DType::kFloat64, {})};
  ASSERT_TRUE(PrepareForGradients(&m).ok());
  Status built = BuildGradientGraph(&m, "loss", {"x"});
  ASSERT_TRUE(built.ok()) << built.ToString();
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run({{"x", Random({3, 4}, 72)}}, {"x_grad"}, &out).ok());
  const double total = 2.0 + 0.25 + 2.0;
  const std::vector<double> expected = {0, -2.0 / total, 0, 0, 0, 0, 0, -0.25 / total, 0, -2.0 / total, 0, 0};
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(out[0].data<double>()[i], expected[i], 1e-15) << "element " << i;
}

// Pad in reflect and edge modes: the padded values are copies of input values, so their gradients fold back.
// Pads differ per side and per axis, one axis is left alone, and 3 of 4 reflects to the axis' far end.
TEST(AutodiffTest, PadReflectAndEdgeFoldGradientsBack) {
  for (const char* mode : {"reflect", "edge"}) {
    SCOPED_TRACE(mode);
    Case c{Base()};
    Graph& g = c.model.graph;
    g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3, 4})};
    g.AddInitializer("pads", Tensor::FromVector<int64_t>({0, 2, 3, 0, 1, 2}, {6}));
    g.nodes = {MakeNode("Pad", {"x", "pads"}, {"p"}, {AttrString("mode", mode)}, "pad"),
               MakeNode("Mul", {"p", "p"}, {"y"}, {}, "square")};
    AddWeightedLoss(&c.model, {2, 6, 9}, 80);
    c.feeds = {{"x", Random({2, 3, 4}, 81)}};
    c.xs = {"x"};
    CheckGradients(c, 1e-6);
  }
}

// ONNX Runtime's ConcatReplacement: Concat becomes com.microsoft ConcatTraining and its gradient one
// SplitTraining by the per_input_length output. The concatenated shape stays static (Tile needs it).
TEST(AutodiffTest, ConcatBecomesConcatTrainingWithSplitTrainingGradient) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("a", DType::kFloat64, {2, 3}), TensorInfo("b", DType::kFloat64, {2, 1})};
  g.AddInitializer("reps", Tensor::FromVector<int64_t>({2, 1}, {2}));
  g.nodes = {MakeNode("Concat", {"a", "b", "a"}, {"c"}, {AttrInt("axis", -1)}, "concat"),
             MakeNode("Tile", {"c", "reps"}, {"t"}, {}, "tile"), MakeNode("Mul", {"t", "t"}, {"y"}, {}, "square")};
  AddWeightedLoss(&c.model, {4, 7}, 110);
  c.feeds = {{"a", Random({2, 3}, 111)}, {"b", Random({2, 1}, 112)}};
  c.xs = {"a", "b"};
  CheckGradients(c);

  Model m = c.model;
  ASSERT_TRUE(PrepareForGradients(&m).ok());
  ASSERT_TRUE(BuildGradientGraph(&m, "loss", {"a", "b"}).ok());
  int concat_training = 0, split_training = 0, plain = 0;
  for (const Node& n : m.graph.nodes) {
    if (n.op_type == "ConcatTraining" && n.domain == "com.microsoft" && n.outputs.size() == 2) concat_training++;
    if (n.op_type == "SplitTraining" && n.domain == "com.microsoft" && n.outputs.size() == 3) split_training++;
    plain += n.op_type == "Concat" || n.op_type == "Split";
  }
  EXPECT_EQ(concat_training, 1);
  EXPECT_EQ(split_training, 1);
  EXPECT_EQ(plain, 0);
}

// Mod with fmod=1 (the only mode ONNX allows for floats): dA = dY, dB = -dY * trunc(A / B), B broadcast over
// rows. Dividends of both signs and quotients from 0 to 5 keep every point away from a jump by more than h.
TEST(AutodiffTest, ModWithBroadcastDivisor) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("a", DType::kFloat64, {4, 3}), TensorInfo("b", DType::kFloat64, {3})};
  g.nodes = {MakeNode("Mod", {"a", "b"}, {"m"}, {AttrInt("fmod", 1)}, "mod"),
             MakeNode("Mul", {"m", "m"}, {"y"}, {}, "square")};
  AddWeightedLoss(&c.model, {4, 3}, 60);
  c.feeds = {{"a", Random({4, 3}, 61, -4.0, 4.0)}, {"b", Random({3}, 62, 0.7, 1.3)}};
  c.xs = {"a", "b"};
  CheckGradients(c, 1e-5);
  // The same graph's dB against the closed form, so a wrong quotient cannot hide behind the finite differences.
  auto cpu = CpuExecutionProvider::Create({1}).value();
  Model grad = c.model;
  ASSERT_TRUE(PrepareForGradients(&grad).ok());
  ASSERT_TRUE(BuildGradientGraph(&grad, "loss", {"b"}).ok());
  auto ex = Executor::Create(grad, cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  ASSERT_TRUE(ex.value()->Run(ToNamedValues(c.feeds), {"b_grad"}, &out).ok());
  const Tensor w = Random({4, 3}, 60);
  const double* a = c.feeds[0].second.data<double>();
  const double* b = c.feeds[1].second.data<double>();
  for (int j = 0; j < 3; ++j) {
    double expected = 0;
    for (int i = 0; i < 4; ++i) {
      double m = std::fmod(a[i * 3 + j], b[j]);
      expected += -2 * m * w.data<double>()[i * 3 + j] * std::trunc(a[i * 3 + j] / b[j]);
    }
    EXPECT_NEAR(out[0].data<double>()[j], expected, 1e-12 * std::max(1.0, std::abs(expected))) << "column " << j;
  }
}

// com.microsoft FusedMatMul as graph/fusion writes it (B a matrix, transB either way), with A of rank 3 and 2.
TEST(AutodiffTest, FusedMatMulWithTransposedAndPlainMatrix) {
  Case c{Base()};
  Graph& g = c.model.graph;
  c.model.opset_imports["com.microsoft"] = 1;
  g.inputs = {TensorInfo("a", DType::kFloat64, {2, 3, 4}), TensorInfo("w", DType::kFloat64, {5, 4}),
              TensorInfo("v", DType::kFloat64, {5, 3}), TensorInfo("m", DType::kFloat64, {3, 5})};
  g.nodes = {MakeNode("FusedMatMul", {"a", "w"}, {"h"}, {AttrInt("transB", 1)}, "linear", "com.microsoft"),
             MakeNode("FusedMatMul", {"h", "v"}, {"o"}, {}, "plain", "com.microsoft"),
             MakeNode("FusedMatMul", {"m", "w"}, {"o2"}, {AttrInt("transB", 0)}, "matrix", "com.microsoft"),
             MakeNode("ReduceSum", {"o2"}, {"s"}, {AttrInt("keepdims", 0)}, "sum"),
             MakeNode("Mul", {"o", "s"}, {"y"}, {}, "mul")};
  AddWeightedLoss(&c.model, {2, 3, 3}, 41);
  c.feeds = {{"a", Random({2, 3, 4}, 42)}, {"w", Random({5, 4}, 43)}, {"v", Random({5, 3}, 44)},
             {"m", Random({3, 5}, 45)}};
  c.xs = {"a", "w", "v", "m"};
  CheckGradients(c, 1e-5);
}

// A value computed from a shape (Shape -> Cast -> Sqrt, as attention scales by sqrt(head_dim)) is a
// constant to the sweep: Div by it gets Div's gradient for the dividend only, not DivGrad.
TEST(AutodiffTest, ValuesComputedFromShapesGetNoGradient) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 4})};
  g.AddInitializer("idx", Tensor::FromVector<int64_t>({1}, {}));
  g.nodes = {MakeNode("Exp", {"x"}, {"e"}, {}, "exp"), MakeNode("Shape", {"e"}, {"sh"}, {}, "shape"),
             MakeNode("Gather", {"sh", "idx"}, {"d"}, {AttrInt("axis", 0)}, "dim"),
             MakeNode("Cast", {"d"}, {"df"}, {AttrInt("to", 11)}, "cast"), MakeNode("Sqrt", {"df"}, {"s"}, {}, "sqrt"),
             MakeNode("Div", {"e", "s"}, {"y"}, {}, "scale")};
  AddWeightedLoss(&c.model, {2, 4}, 46);
  c.feeds = {{"x", Random({2, 4}, 47)}};
  c.xs = {"x"};
  Model built = c.model;
  ASSERT_TRUE(BuildGradientGraph(&built, "loss", {"x"}).ok());
  for (const Node& n : built.graph.nodes) {
    EXPECT_NE(n.op_type, "DivGrad") << "the divisor comes from a shape";
    EXPECT_NE(n.op_type, "SqrtGrad");
  }
  CheckGradients(c);
}

TEST(AutodiffTest, ErrorsNameTheOpAndUnreachableInputs) {
  Model m = Base();
  m.graph.inputs = {TensorInfo("x", DType::kFloat64, {3}), TensorInfo("z", DType::kFloat64, {3})};
  m.graph.nodes = {MakeNode("LpNormalization", {"x"}, {"s"}, {}, "the_lpnorm"),
                   MakeNode("ReduceSum", {"s"}, {"loss"}, {AttrInt("keepdims", 0)}, "sum")};
  m.graph.outputs = {TensorInfo("loss", DType::kFloat64, {})};
  Model a = m;
  Status s = BuildGradientGraph(&a, "loss", {"x"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("LpNormalization"));
  EXPECT_THAT(s.message(), HasSubstr("the_lpnorm"));
  Model b = m;
  b.graph.nodes[0].op_type = "Relu";
  Status u = BuildGradientGraph(&b, "loss", {"x", "z"});
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.message(), HasSubstr("'z'"));
}

// A value read both by a differentiable op and, through a Transpose, by a Shape: the loss depends on the
// Transpose's output only through its shape, so the Transpose sends no gradient and must not be waited for
// (it was: the value never completed its partials and x was "unreachable").
TEST(AutodiffTest, ValueAlsoReadThroughAShape) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {2, 3})};
  g.nodes = {MakeNode("Tanh", {"x"}, {"a"}, {}, "tanh"),
             MakeNode("Transpose", {"a"}, {"t"}, {AttrInts("perm", {1, 0})}, "transpose"),
             MakeNode("Transpose", {"t"}, {"tt"}, {AttrInts("perm", {1, 0})}, "transpose_back"),
             MakeNode("Shape", {"tt"}, {"s"}, {}, "shape"),
             MakeNode("Reshape", {"a", "s"}, {"y"}, {}, "reshape")};
  AddWeightedLoss(&c.model, {2, 3}, 97);
  c.feeds = {{"x", Random({2, 3}, 98)}};
  c.xs = {"x"};
  CheckGradients(c, 1e-6);
}

}  // namespace
}  // namespace ontrain
