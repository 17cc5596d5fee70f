// Random models as training graphs, run with the executor's fusions and without, bit for bit, at 1 and 2
// threads, and the same at 1 as at 2 threads: convolution layers with their gradients (Conv + Relu +
// MaxPool), small CNNs (BatchNormalization, ReLU6, depthwise blocks, residual Adds) and token models (linear
// layers both ways, GELU and other activations, layer norm, softmax attention): the fused kernels' edge
// cases (tiles past a plane, planes smaller than a vector, ranges split between threads) that hand-picked
// cases miss. Under tools/test.sh --config=asan the same cases check every access (500 random CNNs and 500
// token models ran clean there once, every fusion among them). Seeds are fixed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/artifacts.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/engine/sweep_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::ConvPoolLayer;
using testing::ConvPoolSpec;
using testing::ExpectSameBits;
using testing::Rng;
using testing::RunBoth;
using testing::Values;

// Random convolution layers (1-12 input channels, 1-96 outputs, depthwise ones, windows 1-5, strides 1-2,
// pads, planes from 2x2 to 30x30, not square) through Conv + Relu + MaxPool and their gradients, fused
// against unfused, bit for bit, at 1 and 2 threads: the fused kernels' edge cases (tiles past a plane,
// planes smaller than a vector, ranges split between threads) that the hand-picked cases above miss. A
// 3x3 activation pooled to 1x1 once made the window-code unpooling store past its range of planes.
TEST(ModelSweepTest, RandomConvPoolLayersMatchTheUnfusedGraphBitForBit) {
  Rng r(12345);
  const int64_t outs[] = {1, 3, 8, 16, 24, 32, 40, 48, 64, 72, 96};
  int run = 0;
  for (int it = 0; run < 400; ++it) {
    int64_t n = r.In(1, 4), c = r.In(1, 12), h = r.In(2, 30), w = r.In(2, 30), m = outs[r.In(0, 10)];
    const int64_t k = r.In(1, 5), st = r.In(1, 2), pad = r.In(0, k / 2);
    int64_t group = 1;
    if (r.In(0, 4) == 0) {  // depthwise
      group = c;
      m = c * r.In(1, 2);
    }
    const bool first = r.In(0, 1) == 1;
    const int threads = static_cast<int>(r.In(1, 2));
    ConvPoolSpec spec{n, c, h, w, m, k, st, pad, group};
    spec.first_layer = first;
    if (h + 2 * pad < k || w + 2 * pad < k || spec.oh() < 2 || spec.ow() < 2) continue;
    ++run;
    const int64_t ph = spec.oh() / 2, pw = spec.ow() / 2, cg = c / group;
    SCOPED_TRACE(StrCat("case ", it, ": n ", n, " c ", c, " ", h, "x", w, " m ", m, " k ", k, " stride ", st, " pad ",
                        pad, " group ", group, first ? " first layer" : "", " threads ", threads));
    const Model md = ConvPoolLayer(spec);
    std::vector<float> bias = Values(m, 3, false), x = Values(n * c * h * w, 1);
    bias[0] = 0.0f;
    std::fill(x.begin(), x.begin() + c * h * w / 2, 0.0f);  // half of image 0: exact zeros and ties
    NamedTensors feeds = {{"x", Tensor::FromVector(x, {n, c, h, w})},
                          {"w", Tensor::FromVector(Values(m * cg * k * k, 2), {m, cg, k, k})},
                          {"b", Tensor::FromVector(bias, {m})},
                          {"dz", Tensor::FromVector(Values(n * m * ph * pw, 4), {n, m, ph, pw})}};
    ExpectSameBits(RunBoth(md, feeds, threads));
    if (HasFailure()) return;
  }
}


// `fwd` made into a training model (cross-entropy) and run on its own parameters, seeded inputs and `label`
// as every class: every gradient and output the same bits with the executor's fusions and without, at 1 and
// 2 threads, and the same at 1 as at 2 threads.
void ExpectTrainingStepsMatch(const Model& fwd, uint32_t seed, int64_t label) {
  auto a = GenerateArtifacts(fwd, ArtifactOptions{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Model training = a.value().training;
  testing::ExposeAccumulatedGradients(&training);
  const NamedTensors feeds = testing::TrainingFeeds(training, fwd, seed, 1, label);
  testing::FusionRuns one = testing::RunBoth(training, feeds, 1), two = testing::RunBoth(training, feeds, 2);
  testing::ExpectSameBits(one);
  testing::ExpectSameBits(two);
  ASSERT_EQ(one.fused.size(), two.fused.size());
  for (size_t i = 0; i < one.fused.size(); ++i) {
    EXPECT_EQ(std::memcmp(one.fused[i].raw_data(), two.fused[i].raw_data(), one.fused[i].SizeInBytes()), 0)
        << "output " << i << " differs between 1 and 2 threads";
  }
}

// A random small CNN: 1-3 blocks of Conv (window 1-5, stride 1-2, pads; or depthwise 3x3) -> optional
// BatchNormalization -> Relu or Clip(0, 6) -> optional residual Add (where the shapes allow) -> optional 2x2
// MaxPool, then GlobalAveragePool or Flatten, then Gemm to 5 classes. Returns false where the shapes shrink
// to nothing.
bool RandomCnn(Rng& r, Model* fwd, std::string* name) {
  Model m;
  m.opset_imports[""] = 17;
  Graph& g = m.graph;
  int64_t n = r.In(1, 4), c = r.In(1, 8), h = r.In(4, 28), w = r.In(0, 1) ? h : r.In(4, 28);
  g.inputs = {TensorInfo("x", DType::kFloat32, {n, c, h, w})};
  *name = StrCat("x [", n, ",", c, ",", h, ",", w, "]");
  std::string cur = "x";
  uint32_t seed = 500;
  const int blocks = static_cast<int>(r.In(1, 3));
  for (int bi = 0; bi < blocks; ++bi) {
    const std::string p = "b" + std::to_string(bi);
    const std::string block_in = cur;
    const int64_t c_in = c, h_in = h, w_in = w;
    const bool depthwise = r.In(0, 3) == 0;  // MobileNet's: one group per channel, 3x3, pads 1
    int64_t m_out = r.In(0, 1) ? 8 * r.In(1, 4) : r.In(1, 12), k = r.In(1, 5), group = 1;
    const int64_t st = r.In(0, 2) ? 1 : 2;
    if (depthwise) {
      m_out = c * r.In(1, 2);
      k = 3;
      group = c;
    }
    const int64_t pad = depthwise ? 1 : r.In(0, k / 2);
    const int64_t oh = (h + 2 * pad - k) / st + 1, ow = (w + 2 * pad - k) / st + 1;
    if (h + 2 * pad < k || w + 2 * pad < k) return false;
    g.AddInitializer(p + "_w",
                     Tensor::FromVector(Values(m_out * (c / group) * k * k, ++seed, false), {m_out, c / group, k, k}));
    g.AddInitializer(p + "_b", Tensor::FromVector(Values(m_out, ++seed, false), {m_out}));
    g.nodes.push_back(MakeNode("Conv", {cur, p + "_w", p + "_b"}, {p + "_c"},
                               {AttrInts("kernel_shape", {k, k}), AttrInts("strides", {st, st}),
                                AttrInts("pads", {pad, pad, pad, pad}), AttrInt("group", group)},
                               p + "_conv"));
    cur = p + "_c";
    *name += StrCat(" | conv ", m_out, " k", k, " s", st, " p", pad, depthwise ? " depthwise" : "");
    if (r.In(0, 1)) {
      std::vector<float> scale = Values(m_out, ++seed, false);
      for (float& s : scale) s += 1.5f;
      g.AddInitializer(p + "_scale", Tensor::FromVector(scale, {m_out}));
      g.AddInitializer(p + "_bias", Tensor::FromVector(Values(m_out, ++seed, false), {m_out}));
      g.AddInitializer(p + "_mean", Tensor::FromVector(std::vector<float>(m_out, 0.0f), {m_out}));
      g.AddInitializer(p + "_var", Tensor::FromVector(std::vector<float>(m_out, 1.0f), {m_out}));
      g.nodes.push_back(MakeNode("BatchNormalization", {cur, p + "_scale", p + "_bias", p + "_mean", p + "_var"},
                                 {p + "_n"}, {}, p + "_bn"));
      cur = p + "_n";
      *name += " bn";
    }
    if (r.In(0, 2) == 0) {
      g.AddInitializer(p + "_lo", Tensor::FromVector<float>({0.0f}, {}));
      g.AddInitializer(p + "_hi", Tensor::FromVector<float>({6.0f}, {}));
      g.nodes.push_back(MakeNode("Clip", {cur, p + "_lo", p + "_hi"}, {p + "_a"}, {}, p + "_relu6"));
      *name += " relu6";
    } else {
      g.nodes.push_back(MakeNode("Relu", {cur}, {p + "_a"}, {}, p + "_relu"));
      *name += " relu";
    }
    cur = p + "_a";
    h = oh, w = ow, c = m_out;
    if (h == h_in && w == w_in && c == c_in && r.In(0, 1)) {  // a residual connection, as a ResNet block has
      g.nodes.push_back(MakeNode("Add", {cur, block_in}, {p + "_res"}, {}, p + "_residual"));
      cur = p + "_res";
      *name += " +residual";
    }
    if (h >= 2 && w >= 2 && r.In(0, 1)) {
      g.nodes.push_back(MakeNode("MaxPool", {cur}, {p + "_p"},
                                 {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, p + "_pool"));
      cur = p + "_p";
      h /= 2, w /= 2;
      *name += " pool";
    }
  }
  int64_t features = c;
  if (r.In(0, 1)) {
    g.nodes.push_back(MakeNode("GlobalAveragePool", {cur}, {"gap"}, {}, "gap"));
    cur = "gap";
  } else {
    features = c * h * w;
  }
  g.nodes.push_back(MakeNode("Flatten", {cur}, {"flat"}, {}, "flatten"));
  g.AddInitializer("fc_w", Tensor::FromVector(Values(5 * features, ++seed, false), {5, features}));
  g.AddInitializer("fc_b", Tensor::FromVector(Values(5, ++seed, false), {5}));
  g.nodes.push_back(MakeNode("Gemm", {"flat", "fc_w", "fc_b"}, {"y"}, {AttrInt("transB", 1)}, "fc"));
  g.outputs = {TensorInfo("y", DType::kFloat32, {n, 5})};
  *fwd = std::move(m);
  return true;
}

// Random CNNs made into training models (cross-entropy): every gradient and output the same bits with the
// executor's fusions and without, at 1 and 2 threads, and the same at 1 as at 2 threads.
TEST(ModelSweepTest, RandomCnnTrainingStepsMatchWithAndWithoutFusionsAtAnyThreadCount) {
  Rng r(505);
  int built = 0;
  for (int it = 0; built < 40; ++it) {
    Model fwd;
    std::string name;
    if (!RandomCnn(r, &fwd, &name)) continue;
    ++built;
    SCOPED_TRACE(StrCat("case ", it, ": ", name));
    ExpectTrainingStepsMatch(fwd, 900 + it, it % 5);
    if (HasFailure()) return;
  }
}

// A random token model: x [B, S, D] through 1-3 layers of a linear map (MatMul by W [D, E] or by W^T of
// [E, D], plus a bias) -> Gelu (exact, ONNX's or com.microsoft's), Relu, Tanh or Sigmoid -> optional
// LayerNormalization, an optional attention-like Softmax over x x^T, then the mean over tokens and Gemm to
// 5 classes.
Model RandomTokenModel(Rng& r, std::string* name) {
  Model m;
  m.opset_imports[""] = 20;
  m.opset_imports["com.microsoft"] = 1;
  Graph& g = m.graph;
  const int64_t b = r.In(1, 4), s = r.In(1, 20);
  int64_t d = r.In(1, 40);
  g.inputs = {TensorInfo("x", DType::kFloat32, {b, s, d})};
  *name = StrCat("x [", b, ",", s, ",", d, "]");
  std::string cur = "x";
  uint32_t seed = 700;
  const int layers = static_cast<int>(r.In(1, 3));
  for (int li = 0; li < layers; ++li) {
    const std::string p = "l" + std::to_string(li);
    const int64_t e = r.In(0, 1) ? 16 * r.In(1, 4) : r.In(1, 50);
    if (r.In(0, 1)) {  // a PyTorch Linear as exported: MatMul by the transposed weight
      g.AddInitializer(p + "_w", Tensor::FromVector(Values(e * d, ++seed, false), {e, d}));
      g.nodes.push_back(MakeNode("Transpose", {p + "_w"}, {p + "_wt"}, {AttrInts("perm", {1, 0})}, p + "_t"));
      g.nodes.push_back(MakeNode("MatMul", {cur, p + "_wt"}, {p + "_mm"}, {}, p + "_matmul"));
      *name += StrCat(" | linear^T ", e);
    } else {
      g.AddInitializer(p + "_w", Tensor::FromVector(Values(d * e, ++seed, false), {d, e}));
      g.nodes.push_back(MakeNode("MatMul", {cur, p + "_w"}, {p + "_mm"}, {}, p + "_matmul"));
      *name += StrCat(" | linear ", e);
    }
    g.AddInitializer(p + "_b", Tensor::FromVector(Values(e, ++seed, false), {e}));
    g.nodes.push_back(MakeNode("Add", {p + "_mm", p + "_b"}, {p + "_z"}, {}, p + "_bias"));
    const int64_t act = r.In(0, 4);
    const char* acts[] = {"Gelu", "Gelu", "Relu", "Tanh", "Sigmoid"};
    g.nodes.push_back(MakeNode(acts[act], {p + "_z"}, {p + "_a"}, {}, p + "_act", act == 1 ? "com.microsoft" : ""));
    *name += StrCat(" ", acts[act], act == 1 ? "(ms)" : "");
    cur = p + "_a";
    d = e;
    if (r.In(0, 1)) {
      g.AddInitializer(p + "_g", Tensor::FromVector(Values(d, ++seed, false), {d}));
      g.AddInitializer(p + "_beta", Tensor::FromVector(Values(d, ++seed, false), {d}));
      g.nodes.push_back(MakeNode("LayerNormalization", {cur, p + "_g", p + "_beta"}, {p + "_ln"}, {AttrInt("axis", -1)},
                                 p + "_layernorm"));
      cur = p + "_ln";
      *name += " ln";
    }
  }
  if (r.In(0, 1)) {  // softmax(x x^T) x, one head
    g.nodes.push_back(MakeNode("Transpose", {cur}, {"xt"}, {AttrInts("perm", {0, 2, 1})}, "att_t"));
    g.nodes.push_back(MakeNode("MatMul", {cur, "xt"}, {"scores"}, {}, "att_scores"));
    g.nodes.push_back(MakeNode("Softmax", {"scores"}, {"probs"}, {AttrInt("axis", -1)}, "att_softmax"));
    g.nodes.push_back(MakeNode("MatMul", {"probs", cur}, {"att"}, {}, "att_out"));
    cur = "att";
    *name += " | attention";
  }
  g.AddInitializer("axes", Tensor::FromVector<int64_t>({1}, {1}));
  g.nodes.push_back(MakeNode("ReduceMean", {cur, "axes"}, {"pooled"}, {AttrInt("keepdims", 0)}, "mean"));
  g.AddInitializer("fc_w", Tensor::FromVector(Values(5 * d, ++seed, false), {5, d}));
  g.AddInitializer("fc_b", Tensor::FromVector(Values(5, ++seed, false), {5}));
  g.nodes.push_back(MakeNode("Gemm", {"pooled", "fc_w", "fc_b"}, {"y"}, {AttrInt("transB", 1)}, "fc"));
  g.outputs = {TensorInfo("y", DType::kFloat32, {b, 5})};
  return m;
}

// Random token models as training models: the same bits with the executor's fusions (MatMulBias,
// GeluAndSlope) and without, at 1 and 2 threads, and the same at 1 as at 2 threads.
TEST(ModelSweepTest, RandomTokenModelTrainingStepsMatchWithAndWithoutFusionsAtAnyThreadCount) {
  Rng r(606);
  for (int it = 0; it < 40; ++it) {
    std::string name;
    const Model fwd = RandomTokenModel(r, &name);
    SCOPED_TRACE(StrCat("case ", it, ": ", name));
    ExpectTrainingStepsMatch(fwd, 1900 + it, it % 5);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ontrain
