// Gradient kernels checked against central finite differences of their forward ops, in float64:
// for a random weighting w, d(sum(w * f(x)))/dx from the gradient kernel (fed dY = w) must match
// (L(x + h) - L(x - h)) / 2h element by element.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/providers/kernel_test_util.h"

namespace ontrain {
namespace {

using kernel_test::Io;
using kernel_test::kMs;
using kernel_test::Random;
using kernel_test::RunNode;

// Compares `analytic` with central differences of L(x) = sum(w * f(x)).
void CheckGradient(const std::function<Tensor(const Tensor&)>& f, const Tensor& x, const Tensor& w,
                   const Tensor& analytic, double h = 1e-6, double tol = 1e-6) {
  ASSERT_EQ(analytic.shape(), x.shape());
  auto loss = [&](const Tensor& xx) {
    Tensor y = f(xx);
    double s = 0;
    for (int64_t i = 0; i < y.NumElements(); ++i) s += w.data<double>()[i] * y.data<double>()[i];
    return s;
  };
  for (int64_t i = 0; i < x.NumElements(); ++i) {
    Tensor xp = x.Clone(), xm = x.Clone();
    xp.data<double>()[i] += h;
    xm.data<double>()[i] -= h;
    double fd = (loss(xp) - loss(xm)) / (2 * h);
    double an = analytic.data<double>()[i];
    EXPECT_NEAR(an, fd, tol * std::max(1.0, std::abs(fd))) << "element " << i;
  }
}

struct ActCase {
  const char* forward;
  const char* grad;
  bool grad_takes_output;  // second input is Y (Sigmoid, Tanh, LeakyRelu) rather than X
  const char* fwd_domain;
};

TEST(GradKernelsTest, Activations) {
  const ActCase cases[] = {{"Relu", "ReluGrad", false, ""},           {"Sigmoid", "SigmoidGrad", true, ""},
                           {"Tanh", "TanhGrad", true, ""},            {"Gelu", "GeluGrad", false, kMs},
                           {"FastGelu", "FastGeluGrad", false, kMs},  {"LeakyRelu", "LeakyReluGrad", true, ""}};
  for (const ActCase& c : cases) {
    SCOPED_TRACE(c.grad);
    Tensor x = Random({3, 5}, 1, -2, 2);
    Tensor w = Random({3, 5}, 2);
    std::vector<onnx::AttributeProto> attrs;
    if (std::string(c.forward) == "LeakyRelu") attrs.push_back(AttrFloat("alpha", 0.1f));
    auto f = [&](const Tensor& xx) { return RunNode(c.forward, c.fwd_domain, {{"x", xx}}, 1, attrs)[0]; };
    Tensor y = f(x);
    Tensor dx = RunNode(c.grad, kMs, {{"dy", w}, {"x", c.grad_takes_output ? y : x}}, 1, attrs)[0];
    CheckGradient(f, x, w, dx);
  }
}

TEST(GradKernelsTest, SoftmaxAndLogSoftmax) {
  struct C { const char* fwd; const char* grad; int64_t opset; int64_t axis; };
  for (C c : {C{"Softmax", "SoftmaxGrad_13", 13, 1}, C{"Softmax", "SoftmaxGrad_13", 13, -1},
              C{"Softmax", "SoftmaxGrad", 11, 1}, C{"LogSoftmax", "LogSoftmaxGrad_13", 13, 0},
              C{"LogSoftmax", "LogSoftmaxGrad", 11, 1}}) {
    SCOPED_TRACE(std::string(c.grad) + " axis " + std::to_string(c.axis));
    Tensor x = Random({2, 3, 4}, 3, -2, 2);
    Tensor w = Random({2, 3, 4}, 4);
    std::vector<onnx::AttributeProto> attrs = {AttrInt("axis", c.axis)};
    auto f = [&](const Tensor& xx) { return RunNode(c.fwd, "", {{"x", xx}}, 1, attrs, c.opset)[0]; };
    Tensor dx = RunNode(c.grad, kMs, {{"dy", w}, {"y", f(x)}}, 1, attrs)[0];
    CheckGradient(f, x, w, dx);
  }
}

TEST(GradKernelsTest, SoftmaxCrossEntropyLoss) {
  Tensor labels = Tensor::FromVector<int64_t>({2, 0, 3, 1, 2, 0}, {3, 2});  // [N=3, d=2]
  Tensor weight = Tensor::FromVector<double>({0.5, 2.0, 1.0, 1.5}, {4});
  struct C { const char* reduction; bool weighted; bool ignore; };
  for (C c : {C{"mean", false, false}, C{"sum", false, false}, C{"none", false, false}, C{"mean", true, false},
              C{"mean", false, true}, C{"sum", true, true}, C{"none", true, true}}) {
    SCOPED_TRACE(std::string(c.reduction) + (c.weighted ? " weighted" : "") + (c.ignore ? " ignore" : ""));
    std::vector<onnx::AttributeProto> attrs = {AttrString("reduction", c.reduction)};
    if (c.ignore) attrs.push_back(AttrInt("ignore_index", 0));
    Tensor x = Random({3, 4, 2}, 5, -2, 2);
    Tensor w = std::string(c.reduction) == "none" ? Random({3, 2}, 6) : Tensor::FromVector<double>({0.7}, {});
    std::vector<Io> ins = {{"x", x}, {"labels", labels}};
    if (c.weighted) ins.push_back({"weight", weight});
    auto f = [&](const Tensor& xx) {
      std::vector<Io> in2 = ins;
      in2[0].value = xx;
      return RunNode("SoftmaxCrossEntropyLoss", "", in2, 2, attrs, 13)[0];
    };
    std::vector<Tensor> fwd = RunNode("SoftmaxCrossEntropyLoss", "", ins, 2, attrs, 13);
    std::vector<Io> g = {{"dy", w}, {"log_prob", fwd[1]}, {"labels", labels}};
    if (c.weighted) g.push_back({"weight", weight});
    Tensor dx = RunNode("SoftmaxCrossEntropyLossGrad", kMs, g, 1, attrs)[0];
    CheckGradient(f, x, w, dx);
  }
}

// Inputs that share a type parameter but not a dtype, and weights of the wrong length, are errors naming
// them. (SoftmaxGrad with a float16 Y under a float32 dY read past Y's end: found by the session fuzzer.)
TEST(GradKernelsTest, MismatchedDTypesAndWeightsAreErrors) {
  using kernel_test::AsFloat;
  using kernel_test::TryRunNode;
  const Tensor dy = Random({2, 5}, 1), y32 = AsFloat(Random({2, 5}, 2));
  auto expect_error = [](const Status& st, const std::string& words) {
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.ToString().find(words), std::string::npos) << st.ToString();
  };
  expect_error(TryRunNode("SoftmaxGrad_13", kMs, {{"dy", dy}, {"y", y32}}, 1), "Y is float32 but dY is float64");
  expect_error(TryRunNode("LogSoftmaxGrad", kMs, {{"dy", AsFloat(dy)}, {"y", Random({2, 5}, 3)}}, 1),
               "Y is float64 but dY is float32");
  const Tensor labels = Tensor::FromVector<int64_t>({4, 1}, {2});
  const Tensor lp = AsFloat(Random({2, 5}, 4, -3, -0.1));
  const Tensor dloss = Tensor::FromVector<float>({1.0f}, {});
  expect_error(TryRunNode("SoftmaxCrossEntropyLossGrad", kMs,
                          {{"dl", Tensor::FromVector<double>({1.0}, {})}, {"lp", lp}, {"t", labels}}, 1),
               "dY is float64 but log_prob is float32");
  expect_error(TryRunNode("SoftmaxCrossEntropyLossGrad", kMs,
                          {{"dl", dloss}, {"lp", lp}, {"t", labels}, {"w", Tensor::FromVector<float>({1, 1, 1}, {3})}}, 1),
               "weights have shape [3], expected [5]");
  expect_error(TryRunNode("SoftmaxCrossEntropyLossGrad", kMs,
                          {{"dl", dloss}, {"lp", lp}, {"t", labels}, {"w", Random({5}, 5)}}, 1),
               "weights is float64 but log_prob is float32");
  expect_error(TryRunNode("NegativeLogLikelihoodLoss", "", {{"x", lp}, {"t", labels}, {"w", Random({5}, 6)}}, 1),
               "weights is float64 but scores is float32");
  // The same inputs with matching dtypes run.
  EXPECT_TRUE(TryRunNode("SoftmaxGrad_13", kMs, {{"dy", dy}, {"y", Random({2, 5}, 2)}}, 1).ok());
  EXPECT_TRUE(TryRunNode("NegativeLogLikelihoodLoss", "", {{"x", lp}, {"t", labels}, {"w", AsFloat(Random({5}, 6))}}, 1)
                  .ok());
}

TEST(GradKernelsTest, ConvGradAllOutputs) {
  struct C { Shape x, w; std::vector<onnx::AttributeProto> attrs; };
  std::vector<C> cases = {
      {{2, 2, 5}, {3, 2, 3}, {AttrInts("pads", {1, 1})}},
      {{1, 4, 5, 4}, {4, 2, 3, 2}, {AttrInt("group", 2), AttrInts("strides", {2, 1}), AttrInts("pads", {1, 0, 0, 1})}},
      {{1, 2, 6, 6}, {2, 2, 3, 3}, {AttrInts("dilations", {2, 1}), AttrString("auto_pad", "SAME_UPPER")}},
      // depthwise (group = channels): the direct kernels of depthwise.h
      {{2, 3, 6, 5}, {3, 1, 3, 3}, {AttrInt("group", 3), AttrInts("pads", {1, 1, 1, 1})}},
      {{1, 4, 7, 6}, {4, 1, 3, 2},
       {AttrInt("group", 4), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 0, 1, 1}), AttrInts("dilations", {1, 2})}},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(k);
    const C& c = cases[k];
    Tensor x = Random(c.x, 10 + k), wt = Random(c.w, 20 + k), b = Random({c.w[0]}, 30 + k);
    Tensor y = RunNode("Conv", "", {{"x", x}, {"w", wt}, {"b", b}}, 1, c.attrs)[0];
    Tensor dy = Random(y.shape(), 40 + k);
    std::vector<Tensor> g = RunNode("ConvGrad", kMs, {{"dy", dy}, {"x", x}, {"w", wt}}, 3, c.attrs);
    CheckGradient([&](const Tensor& xx) { return RunNode("Conv", "", {{"x", xx}, {"w", wt}, {"b", b}}, 1, c.attrs)[0]; },
                  x, dy, g[0]);
    CheckGradient([&](const Tensor& ww) { return RunNode("Conv", "", {{"x", x}, {"w", ww}, {"b", b}}, 1, c.attrs)[0]; },
                  wt, dy, g[1]);
    CheckGradient([&](const Tensor& bb) { return RunNode("Conv", "", {{"x", x}, {"w", wt}, {"b", bb}}, 1, c.attrs)[0]; },
                  b, dy, g[2]);
  }
}

// The depthwise kernels against the im2col path: a depthwise convolution equals a dense one (group 1) whose
// weight is block-diagonal over the channels.
TEST(GradKernelsTest, DepthwiseConvMatchesDenseConvolution) {
  std::vector<onnx::AttributeProto> attrs = {AttrInts("strides", {2, 1}), AttrInts("pads", {1, 2, 0, 1}),
                                             AttrInts("dilations", {1, 2})};
  const int64_t c = 3, kh = 3, kw = 2;
  Tensor x = Random({2, c, 7, 8}, 70), w = Random({c, 1, kh, kw}, 71), b = Random({c}, 72);
  Tensor dense = Tensor::FromVector(std::vector<double>(c * c * kh * kw, 0.0), {c, c, kh, kw});
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t k = 0; k < kh * kw; ++k) dense.data<double>()[(ch * c + ch) * kh * kw + k] = w.data<double>()[ch * kh * kw + k];
  }
  std::vector<onnx::AttributeProto> grouped = attrs;
  grouped.push_back(AttrInt("group", c));
  Tensor y = RunNode("Conv", "", {{"x", x}, {"w", w}, {"b", b}}, 1, grouped)[0];
  Tensor want = RunNode("Conv", "", {{"x", x}, {"w", dense}, {"b", b}}, 1, attrs)[0];
  ASSERT_EQ(y.shape(), want.shape());
  for (int64_t i = 0; i < y.NumElements(); ++i) EXPECT_NEAR(y.data<double>()[i], want.data<double>()[i], 1e-12) << i;
  Tensor dy = Random(y.shape(), 73);
  std::vector<Tensor> g = RunNode("ConvGrad", kMs, {{"dy", dy}, {"x", x}, {"w", w}}, 3, grouped);
  std::vector<Tensor> gd = RunNode("ConvGrad", kMs, {{"dy", dy}, {"x", x}, {"w", dense}}, 3, attrs);
  for (int64_t i = 0; i < x.NumElements(); ++i) EXPECT_NEAR(g[0].data<double>()[i], gd[0].data<double>()[i], 1e-12) << i;
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t k = 0; k < kh * kw; ++k) {
      EXPECT_NEAR(g[1].data<double>()[ch * kh * kw + k], gd[1].data<double>()[(ch * c + ch) * kh * kw + k], 1e-12);
    }
  }
}

TEST(GradKernelsTest, PoolGrads) {
  std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {2, 3}), AttrInts("strides", {2, 2}),
                                             AttrInts("pads", {1, 1, 0, 1})};
  Tensor x = Random({2, 2, 5, 6}, 50);
  ValueInfo dx_info;
  dx_info.name = "o0";
  dx_info.dtype = DType::kFloat64;
  dx_info.has_shape = true;
  for (int64_t d : x.shape()) dx_info.dims.push_back(Dim{d, ""});
  // MaxPool: the gradient flows to each window's maximum.
  std::vector<Tensor> mp = RunNode("MaxPool", "", {{"x", x}}, 2, attrs);
  Tensor dy = Random(mp[0].shape(), 51);
  Tensor dx = RunNode("MaxPoolGrad", "", {{"dy", dy}, {"idx", mp[1]}}, 1, attrs, 17, {dx_info})[0];
  CheckGradient([&](const Tensor& xx) { return RunNode("MaxPool", "", {{"x", xx}}, 1, attrs)[0]; }, x, dy, dx);
  for (int include_pad : {0, 1}) {
    std::vector<onnx::AttributeProto> a2 = attrs;
    a2.push_back(AttrInt("count_include_pad", include_pad));
    Tensor ap = RunNode("AveragePool", "", {{"x", x}}, 1, a2)[0];
    Tensor dya = Random(ap.shape(), 52);
    Tensor dxa = RunNode("AveragePoolGrad", "", {{"dy", dya}}, 1, a2, 17, {dx_info})[0];
    CheckGradient([&](const Tensor& xx) { return RunNode("AveragePool", "", {{"x", xx}}, 1, a2)[0]; }, x, dya, dxa);
  }
}

// MaxPoolGrad scatters dY to dX at the indices, adding where an index repeats. MaxPool's indices stay in
// their own [N, C] plane and are scattered plane by plane (in parallel at 2 threads); indices that point
// into another plane take the serial loop; an index outside dX is an error naming it. Against a naive
// scatter, exactly.
TEST(GradKernelsTest, MaxPoolGradScattersAtIndices) {
  // Planes large enough for the pool to split them at 2 threads.
  const Shape xs = {2, 3, 320, 320}, ys = {2, 3, 4, 4};
  const int64_t isize = 320 * 320, osize = 16, n = 6 * isize;
  ValueInfo dx_info;
  dx_info.name = "o0";
  dx_info.dtype = DType::kFloat32;
  dx_info.has_shape = true;
  for (int64_t d : xs) dx_info.dims.push_back(Dim{d, ""});
  const std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})};
  std::vector<float> g(6 * osize);
  for (size_t i = 0; i < g.size(); ++i) g[i] = 0.25f * static_cast<float>(i) - 2.0f;
  auto check = [&](const std::vector<int64_t>& idx, int threads) {
    std::vector<float> want(n, 0.0f);
    for (size_t i = 0; i < idx.size(); ++i) want[idx[i]] += g[i];
    Tensor dx = RunNode("MaxPoolGrad", "", {{"dy", Tensor::FromVector(g, ys)}, {"idx", Tensor::FromVector(idx, ys)}}, 1,
                        attrs, 17, {dx_info}, threads)[0];
    ASSERT_EQ(dx.NumElements(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(dx.data<float>()[i], want[i]) << "threads " << threads << " at " << i;
  };
  std::vector<int64_t> own(6 * osize), crossing(6 * osize);
  for (int64_t q = 0; q < 6; ++q) {
    for (int64_t o = 0; o < osize; ++o) {
      own[q * osize + o] = q * isize + (o * 7 + q) % 9 * 1000;  // repeats within the plane
      crossing[q * osize + o] = ((q + 1) % 6) * isize + o * 3;   // the next plane's elements
    }
  }
  own[5] = own[4];
  for (int threads : {1, 2}) {
    check(own, threads);
    check(crossing, threads);
  }
  std::vector<int64_t> bad = own;
  bad[9] = n;
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("dy", DType::kFloat32, ys));
  m.graph.inputs.push_back(TensorInfo("idx", DType::kInt64, ys));
  m.graph.outputs.push_back(dx_info);
  m.graph.nodes.push_back(MakeNode("MaxPoolGrad", {"dy", "idx"}, {"o0"}, attrs, "grad"));
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  Status st = ex.value()->Run(ToNamedValues({{"dy", Tensor::FromVector(g, ys)}, {"idx", Tensor::FromVector(bad, ys)}}),
                              {"o0"}, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.ToString().find("index 614400 at position 9"), std::string::npos) << st.ToString();
}

TEST(GradKernelsTest, BatchNormInternalAndGrad) {
  Tensor x = Random({3, 2, 4}, 60), scale = Random({2}, 61, 0.5, 1.5), bias = Random({2}, 62);
  Tensor mean = Tensor::FromVector<double>({0, 0}, {2}), var = Tensor::FromVector<double>({1, 1}, {2});
  std::vector<onnx::AttributeProto> attrs = {AttrFloat("epsilon", 1e-3f)};
  auto run = [&](const Tensor& xx, const Tensor& ss, const Tensor& bb) {
    return RunNode("BatchNormInternal", kMs, {{"x", xx}, {"s", ss}, {"b", bb}, {"m", mean}, {"v", var}}, 5, attrs);
  };
  std::vector<Tensor> fwd = run(x, scale, bias);
  Tensor dy = Random(x.shape(), 63);
  std::vector<Tensor> g = RunNode("BatchNormalizationGrad", kMs,
                                  {{"dy", dy}, {"x", x}, {"s", scale}, {"sm", fwd[3]}, {"si", fwd[4]}}, 3, attrs);
  CheckGradient([&](const Tensor& xx) { return run(xx, scale, bias)[0]; }, x, dy, g[0]);
  CheckGradient([&](const Tensor& ss) { return run(x, ss, bias)[0]; }, scale, dy, g[1]);
  CheckGradient([&](const Tensor& bb) { return run(x, scale, bb)[0]; }, bias, dy, g[2]);
}

TEST(GradKernelsTest, LayerNormalizationGrad) {
  for (int64_t axis : {-1, 1}) {
    SCOPED_TRACE(axis);
    Tensor x = Random({2, 3, 4}, 70);
    Shape ps = axis == -1 ? Shape{4} : Shape{3, 4};
    Tensor scale = Random(ps, 71, 0.5, 1.5), bias = Random(ps, 72);
    std::vector<onnx::AttributeProto> attrs = {AttrInt("axis", axis), AttrFloat("epsilon", 1e-4f)};
    auto run = [&](const Tensor& xx, const Tensor& ss, const Tensor& bb) {
      return RunNode("LayerNormalization", "", {{"x", xx}, {"s", ss}, {"b", bb}}, 3, attrs);
    };
    std::vector<Tensor> fwd = run(x, scale, bias);
    Tensor dy = Random(x.shape(), 73);
    std::vector<Tensor> g = RunNode("LayerNormalizationGrad", kMs,
                                    {{"dy", dy}, {"x", x}, {"s", scale}, {"m", fwd[1]}, {"i", fwd[2]}}, 3, attrs);
    CheckGradient([&](const Tensor& xx) { return run(xx, scale, bias)[0]; }, x, dy, g[0], 1e-6, 2e-5);
    CheckGradient([&](const Tensor& ss) { return run(x, ss, bias)[0]; }, scale, dy, g[1], 1e-6, 2e-5);
    CheckGradient([&](const Tensor& bb) { return run(x, scale, bb)[0]; }, bias, dy, g[2], 1e-6, 2e-5);
  }
}

TEST(GradKernelsTest, DivGradWithBroadcast) {
  Tensor a = Random({2, 3}, 80), b = Random({3}, 81, 0.5, 2.0), dy = Random({2, 3}, 82);
  std::vector<Tensor> g = RunNode("DivGrad", kMs, {{"dy", dy}, {"a", a}, {"b", b}}, 2);
  CheckGradient([&](const Tensor& aa) { return RunNode("Div", "", {{"a", aa}, {"b", b}}, 1)[0]; }, a, dy, g[0]);
  CheckGradient([&](const Tensor& bb) { return RunNode("Div", "", {{"a", a}, {"b", bb}}, 1)[0]; }, b, dy, g[1]);
}

TEST(GradKernelsTest, GatherGradAccumulatesDuplicates) {
  Tensor x = Random({4, 3}, 90);
  Tensor idx = Tensor::FromVector<int64_t>({1, 3, 1, -1}, {2, 2});  // row 1 twice, row 3 twice
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE(axis);
    Tensor ix = axis == 0 ? idx : Tensor::FromVector<int64_t>({0, 2, 2}, {3});
    std::vector<onnx::AttributeProto> attrs = {AttrInt("axis", axis)};
    Tensor y = RunNode("Gather", "", {{"x", x}, {"i", ix}}, 1, attrs)[0];
    Tensor dy = Random(y.shape(), 91);
    Tensor shape = Tensor::FromVector<int64_t>({4, 3}, {2});
    Tensor dx = RunNode("GatherGrad", kMs, {{"s", shape}, {"i", ix}, {"dy", dy}}, 1, attrs)[0];
    CheckGradient([&](const Tensor& xx) { return RunNode("Gather", "", {{"x", xx}, {"i", ix}}, 1, attrs)[0]; }, x, dy, dx);
  }
  Tensor ei = Tensor::FromVector<int64_t>({0, 2, 2, 1, 1, 0}, {2, 3});
  std::vector<onnx::AttributeProto> a1 = {AttrInt("axis", 0)};
  Tensor xe = Random({3, 3}, 92);
  Tensor dye = Random({2, 3}, 93);
  Tensor dxe = RunNode("GatherElementsGrad", kMs, {{"dy", dye}, {"s", Tensor::FromVector<int64_t>({3, 3}, {2})}, {"i", ei}}, 1, a1)[0];
  CheckGradient([&](const Tensor& xx) { return RunNode("GatherElements", "", {{"x", xx}, {"i", ei}}, 1, a1)[0]; }, xe, dye, dxe);
}

TEST(GradKernelsTest, DropoutGradUsesMaskAndScale) {
  Tensor x = Random({1000}, 100);
  std::vector<Tensor> fwd = RunNode("Dropout", "", {{"x", x}, {"r", Tensor::FromVector<double>({0.3}, {})},
                                                    {"t", Tensor::FromVector<bool>({true}, {})}},
                                    2, {AttrInt("seed", 3)}, 13);
  Tensor dy = Random({1000}, 101);
  Tensor dx = RunNode("DropoutGrad", kMs, {{"dy", dy}, {"mask", fwd[1]}, {"r", Tensor::FromVector<double>({0.3}, {})},
                                          {"t", Tensor::FromVector<bool>({true}, {})}}, 1)[0];
  for (int i = 0; i < 1000; ++i) {
    double expect = fwd[1].data<bool>()[i] ? dy.data<double>()[i] / 0.7 : 0.0;
    EXPECT_NEAR(dx.data<double>()[i], expect, 1e-12);
    // The forward pass scaled the kept values the same way, so y = x * dx/dy where kept.
    if (fwd[1].data<bool>()[i]) {
      EXPECT_NEAR(fwd[0].data<double>()[i], x.data<double>()[i] / 0.7, 1e-12);
    }
  }
}

TEST(GradKernelsTest, FusedMatMulMatchesTransposedMatMul) {
  Tensor a = Random({2, 4, 3}, 110), b = Random({5, 4}, 111);
  // alpha * A^T(last two dims) @ B^T = [2, 3, 5]
  Tensor y = RunNode("FusedMatMul", kMs, {{"a", a}, {"b", b}}, 1,
                     {AttrInt("transA", 1), AttrInt("transB", 1), AttrFloat("alpha", 0.5f)})[0];
  ASSERT_EQ(y.shape(), (Shape{2, 3, 5}));
  for (int bt = 0; bt < 2; ++bt)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        double s = 0;
        for (int k = 0; k < 4; ++k) s += a.data<double>()[(bt * 4 + k) * 3 + i] * b.data<double>()[j * 4 + k];
        EXPECT_NEAR(y.data<double>()[(bt * 3 + i) * 5 + j], 0.5 * s, 1e-12);
      }
}

TEST(GradKernelsTest, BroadcastGradientArgsAndScale) {
  std::vector<Tensor> r = RunNode("BroadcastGradientArgs", kMs,
                                  {{"a", Tensor::FromVector<int64_t>({2, 1, 4}, {3})},
                                   {"b", Tensor::FromVector<int64_t>({3, 1}, {2})}}, 2);
  EXPECT_EQ(std::vector<int64_t>(r[0].data<int64_t>(), r[0].data<int64_t>() + r[0].NumElements()), std::vector<int64_t>{1});
  EXPECT_EQ(std::vector<int64_t>(r[1].data<int64_t>(), r[1].data<int64_t>() + r[1].NumElements()),
            (std::vector<int64_t>{2, 0}));
  Tensor s = RunNode("Scale", kMs, {{"x", Tensor::FromVector<double>({2, 4}, {2})}, {"s", Tensor::FromVector<double>({4}, {})}},
                     1, {AttrInt("scale_down", 1)})[0];
  EXPECT_EQ(s.data<double>()[1], 1.0);
}

TEST(GradKernelsTest, InPlaceAccumulatorOverwritesOrAccumulates) {
  Tensor buffer = Tensor::FromVector<double>({1, 2, 3}, {3});
  Tensor value = Tensor::FromVector<double>({10, 20, 30}, {3});
  std::vector<Tensor> r = RunNode("InPlaceAccumulatorV2", kMs,
                                  {{"buf", buffer}, {"v", value}, {"reset", Tensor::FromVector<bool>({false}, {1})}}, 2);
  EXPECT_EQ(buffer.data<double>()[2], 33.0) << "accumulates into the caller's buffer";
  EXPECT_TRUE(r[0].data<bool>()[0]);
  EXPECT_EQ(r[1].data<double>()[0], 11.0);
  RunNode("InPlaceAccumulatorV2", kMs, {{"buf", buffer}, {"v", value}, {"reset", Tensor::FromVector<bool>({true}, {1})}}, 1);
  EXPECT_EQ(buffer.data<double>()[2], 30.0) << "overwrites when reset";
}

TEST(GradKernelsTest, ConcatAndSplitTraining) {
  Tensor a = Random({2, 1}, 120), b = Random({2, 3}, 121);
  std::vector<Tensor> c = RunNode("ConcatTraining", kMs, {{"a", a}, {"b", b}}, 2, {AttrInt("axis", 1)});
  ASSERT_EQ(c[0].shape(), (Shape{2, 4}));
  EXPECT_EQ(c[1].data<int64_t>()[0], 1);
  EXPECT_EQ(c[1].data<int64_t>()[1], 3);
  std::vector<Tensor> s = RunNode("SplitTraining", kMs, {{"x", c[0]}, {"split", c[1]}}, 2, {AttrInt("axis", 1)});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(s[1].data<double>()[i], b.data<double>()[i]);
}

}  // namespace
}  // namespace ontrain
