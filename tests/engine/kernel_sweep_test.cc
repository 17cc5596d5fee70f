// Random shapes through the CPU kernels' fast paths, where fixed-shape tests leave corners: convolutions
// (direct, Winograd, depthwise, 1x1, strided, dilated, padded on one side), their gradients, pooling and
// matrix products, each against its definition computed here in double, and at 1 and 2 threads with the
// same bits (no result depends on the thread count); likewise layer norm, softmax, batch normalization's
// training pass and gradient, pooling gradients, broadcast arithmetic and data movement (Transpose, Slice,
// Pad, Concat, Gather, Expand, Tile; bit for bit) and reductions; then random small CNNs and token models
// as training models, with the executor's fusions against without. Under tools/test.sh --config=asan the
// same cases check every access (500 random CNNs, 500 token models and ten times these counts ran clean
// there once). Seeds are fixed, so a failure names a case that reproduces.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/artifacts.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::Values;

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  int64_t In(int64_t lo, int64_t hi) {
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + static_cast<int64_t>((s_ >> 33) % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t s_;
};

// Runs the one-node model at `threads` threads (twice: the second run from the planned arenas).
std::vector<Tensor> RunAt(const Model& m, const NamedTensors& feeds, int threads) {
  auto cpu = CpuExecutionProvider::Create({threads}).value();
  auto ex = Executor::Create(m, {{cpu.get()}, {}});
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  if (!ex.ok()) return out;
  for (int run = 0; run < 2; ++run) {
    Status s = ex.value()->Run(ToNamedValues(feeds), ex.value()->output_names(), &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<Tensor> copies;
  for (const Tensor& t : out) copies.push_back(t.Clone());
  return copies;
}

// Runs at 1 and 2 threads, expects the same bits, and returns the first run's outputs.
std::vector<Tensor> RunBothThreadCounts(const Model& m, const NamedTensors& feeds) {
  std::vector<Tensor> one = RunAt(m, feeds, 1), two = RunAt(m, feeds, 2);
  EXPECT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size() && i < two.size(); ++i) {
    EXPECT_EQ(one[i].shape(), two[i].shape());
    EXPECT_EQ(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].SizeInBytes()), 0)
        << "output " << i << " differs between 1 and 2 threads";
  }
  return one;
}

// |got - want| within 1e-5 of the sum of the terms' magnitudes (float32 sums in any order).
void ExpectNear(const Tensor& got, const std::vector<double>& want, const std::vector<double>& scale,
                const char* what) {
  ASSERT_EQ(got.NumElements(), static_cast<int64_t>(want.size())) << what;
  const float* g = got.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::fabs(g[i] - want[i]), 1e-5 * scale[i] + 1e-30)
        << what << " element " << i << ": " << g[i] << " against " << want[i];
  }
}

struct ConvCase {
  int64_t n, c, h, w, m, kh, kw, sh, sw, dh, dw, group;
  int64_t pads[4];  // top, left, bottom, right
  int64_t oh() const { return (h + pads[0] + pads[2] - dh * (kh - 1) - 1) / sh + 1; }
  int64_t ow() const { return (w + pads[1] + pads[3] - dw * (kw - 1) - 1) / sw + 1; }
  std::string Name() const {
    return StrCat("n ", n, " c ", c, " ", h, "x", w, " m ", m, " k ", kh, "x", kw, " stride ", sh, ",", sw,
                  " dilation ", dh, ",", dw, " group ", group, " pads ", pads[0], ",", pads[1], ",", pads[2], ",",
                  pads[3]);
  }
  std::vector<onnx::AttributeProto> Attrs() const {
    return {AttrInts("kernel_shape", {kh, kw}), AttrInts("strides", {sh, sw}), AttrInts("dilations", {dh, dw}),
            AttrInts("pads", {pads[0], pads[1], pads[2], pads[3]}), AttrInt("group", group)};
  }
};

ConvCase RandomConv(Rng& r) {
  for (;;) {
    ConvCase t;
    t.n = r.In(1, 3);
    t.c = r.In(1, 12);
    t.h = r.In(1, 24);
    t.w = r.In(1, 24);
    t.m = r.In(1, 40);
    t.kh = r.In(1, 5);
    t.kw = r.In(0, 3) == 0 ? r.In(1, 5) : t.kh;
    t.sh = r.In(1, 3);
    t.sw = r.In(0, 3) == 0 ? r.In(1, 3) : t.sh;
    t.dh = r.In(0, 4) == 0 ? 2 : 1;
    t.dw = t.dh;
    t.group = 1;
    const int64_t kind = r.In(0, 5);
    if (kind == 0) {  // depthwise
      t.group = t.c;
      t.m = t.c * r.In(1, 2);
    } else if (kind == 1 && t.c % 2 == 0) {  // two groups
      t.group = 2;
      t.m = 2 * r.In(1, 12);
    } else if (kind == 2) {  // the 3x3 shapes Winograd and the direct tiles take
      t.kh = t.kw = 3;
      t.sh = t.sw = t.dh = t.dw = 1;
      t.c = r.In(8, 20);
      t.m = 8 * r.In(1, 5);
    }
    for (int64_t& p : t.pads) p = r.In(0, 3) == 0 ? r.In(0, 2) : 0;
    if (r.In(0, 1) == 0) t.pads[2] = t.pads[0], t.pads[3] = t.pads[1];
    for (int d = 0; d < 2; ++d) {  // ONNX allows pads of at most the window
      t.pads[d] = std::min(t.pads[d], (d ? t.kw : t.kh) - 1);
      t.pads[d + 2] = std::min(t.pads[d + 2], (d ? t.kw : t.kh) - 1);
    }
    if (t.oh() >= 1 && t.ow() >= 1 && t.h + t.pads[0] + t.pads[2] >= t.dh * (t.kh - 1) + 1 &&
        t.w + t.pads[1] + t.pads[3] >= t.dw * (t.kw - 1) + 1) {
      return t;
    }
  }
}

// Visits every (image, output channel, output position, input channel of its group, tap) of the
// convolution whose input element is inside the image: f(y index, x index, w index).
template <typename F>
void ForEachProduct(const ConvCase& t, F f) {
  const int64_t oh = t.oh(), ow = t.ow(), cg = t.c / t.group, mg = t.m / t.group;
  for (int64_t b = 0; b < t.n; ++b) {
    for (int64_t o = 0; o < t.m; ++o) {
      const int64_t g = o / mg;
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const int64_t yi = ((b * t.m + o) * oh + i) * ow + j;
          for (int64_t ci = 0; ci < cg; ++ci) {
            const int64_t c = g * cg + ci;
            for (int64_t u = 0; u < t.kh; ++u) {
              const int64_t y = i * t.sh - t.pads[0] + u * t.dh;
              if (y < 0 || y >= t.h) continue;
              for (int64_t v = 0; v < t.kw; ++v) {
                const int64_t x = j * t.sw - t.pads[1] + v * t.dw;
                if (x < 0 || x >= t.w) continue;
                f(yi, ((b * t.c + c) * t.h + y) * t.w + x, ((o * cg + ci) * t.kh + u) * t.kw + v);
              }
            }
          }
        }
      }
    }
  }
}

TEST(KernelSweepTest, ConvolutionsMatchTheirDefinition) {
  Rng r(101);
  for (int it = 0; it < 120; ++it) {
    const ConvCase t = RandomConv(r);
    SCOPED_TRACE(StrCat("case ", it, ": ", t.Name()));
    const int64_t cg = t.c / t.group, oh = t.oh(), ow = t.ow();
    const bool relu = r.In(0, 1) == 1;  // Conv + Relu: the executor fuses them into FusedConv
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, {t.n, t.c, t.h, t.w}),
                       TensorInfo("w", DType::kFloat32, {t.m, cg, t.kh, t.kw}),
                       TensorInfo("b", DType::kFloat32, {t.m})};
    md.graph.nodes.push_back(MakeNode("Conv", {"x", "w", "b"}, {relu ? "c" : "y"}, t.Attrs(), "conv"));
    if (relu) md.graph.nodes.push_back(MakeNode("Relu", {"c"}, {"y"}, {}, "relu"));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, {t.n, t.m, oh, ow})};
    const std::vector<float> x = Values(t.n * t.c * t.h * t.w, 7 + it), w = Values(t.m * cg * t.kh * t.kw, 8 + it),
                             b = Values(t.m, 9 + it);
    std::vector<double> want(t.n * t.m * oh * ow, 0.0), scale(want.size(), 0.0);
    ForEachProduct(t, [&](int64_t yi, int64_t xi, int64_t wi) {
      want[yi] += static_cast<double>(x[xi]) * w[wi];
      scale[yi] += std::fabs(static_cast<double>(x[xi]) * w[wi]);
    });
    for (size_t i = 0; i < want.size(); ++i) {
      const double bias = b[(i / (oh * ow)) % t.m];
      want[i] += bias;
      scale[i] += std::fabs(bias);
      if (relu) want[i] = std::max(want[i], 0.0);
    }
    std::vector<Tensor> out = RunBothThreadCounts(md, {{"x", Tensor::FromVector(x, {t.n, t.c, t.h, t.w})},
                                                       {"w", Tensor::FromVector(w, {t.m, cg, t.kh, t.kw})},
                                                       {"b", Tensor::FromVector(b, {t.m})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, scale, "Y");
    if (HasFailure()) return;
  }
}

TEST(KernelSweepTest, ConvolutionGradientsMatchTheirDefinition) {
  Rng r(202);
  for (int it = 0; it < 120; ++it) {
    const ConvCase t = RandomConv(r);
    SCOPED_TRACE(StrCat("case ", it, ": ", t.Name()));
    const int64_t cg = t.c / t.group, oh = t.oh(), ow = t.ow();
    const bool dx_too = r.In(0, 3) != 0;
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("dy", DType::kFloat32, {t.n, t.m, oh, ow}),
                       TensorInfo("x", DType::kFloat32, {t.n, t.c, t.h, t.w}),
                       TensorInfo("w", DType::kFloat32, {t.m, cg, t.kh, t.kw})};
    md.graph.nodes.push_back(
        MakeNode("ConvGrad", {"dy", "x", "w"}, {dx_too ? "dx" : "", "dw", "db"}, t.Attrs(), "grad", "com.microsoft"));
    md.graph.outputs = {TensorInfo("dw", DType::kFloat32, {t.m, cg, t.kh, t.kw}),
                        TensorInfo("db", DType::kFloat32, {t.m})};
    if (dx_too) md.graph.outputs.push_back(TensorInfo("dx", DType::kFloat32, {t.n, t.c, t.h, t.w}));
    const std::vector<float> dy = Values(t.n * t.m * oh * ow, 17 + it), x = Values(t.n * t.c * t.h * t.w, 18 + it),
                             w = Values(t.m * cg * t.kh * t.kw, 19 + it);
    std::vector<double> dw(w.size(), 0.0), dw_scale(w.size(), 0.0), dx(x.size(), 0.0), dx_scale(x.size(), 0.0);
    std::vector<double> db(t.m, 0.0), db_scale(t.m, 0.0);
    ForEachProduct(t, [&](int64_t yi, int64_t xi, int64_t wi) {
      dw[wi] += static_cast<double>(dy[yi]) * x[xi];
      dw_scale[wi] += std::fabs(static_cast<double>(dy[yi]) * x[xi]);
      dx[xi] += static_cast<double>(dy[yi]) * w[wi];
      dx_scale[xi] += std::fabs(static_cast<double>(dy[yi]) * w[wi]);
    });
    for (size_t i = 0; i < dy.size(); ++i) {
      db[(i / (oh * ow)) % t.m] += dy[i];
      db_scale[(i / (oh * ow)) % t.m] += std::fabs(dy[i]);
    }
    std::vector<Tensor> out = RunBothThreadCounts(md, {{"dy", Tensor::FromVector(dy, {t.n, t.m, oh, ow})},
                                                       {"x", Tensor::FromVector(x, {t.n, t.c, t.h, t.w})},
                                                       {"w", Tensor::FromVector(w, {t.m, cg, t.kh, t.kw})}});
    ASSERT_EQ(out.size(), dx_too ? 3u : 2u);
    ExpectNear(out[0], dw, dw_scale, "dW");
    ExpectNear(out[1], db, db_scale, "dB");
    if (dx_too) ExpectNear(out[2], dx, dx_scale, "dX");
    if (HasFailure()) return;
  }
}

// MaxPool (with indices) and AveragePool over random windows, strides, pads and ceil_mode.
TEST(KernelSweepTest, PoolsMatchTheirDefinition) {
  Rng r(303);
  for (int it = 0; it < 200; ++it) {
    const int64_t n = r.In(1, 3), c = r.In(1, 20), h = r.In(1, 30), w = r.In(1, 30);
    const int64_t kh = r.In(1, 4), kw = r.In(0, 2) == 0 ? r.In(1, 4) : kh, sh = r.In(1, 3),
                  sw = r.In(0, 2) ? sh : r.In(1, 3);
    const int64_t ph = r.In(0, 3) == 0 ? r.In(0, kh - 1) : 0, pw = r.In(0, 3) == 0 ? r.In(0, kw - 1) : 0;
    const bool ceil = r.In(0, 3) == 0, max = r.In(0, 1) == 0, count_pad = r.In(0, 1) == 0;
    auto out_dim = [&](int64_t in, int64_t k, int64_t s, int64_t p) {
      const int64_t span = in + 2 * p - k;
      int64_t o = (ceil ? (span + s - 1) / s : span / s) + 1;
      if (ceil && (o - 1) * s >= in + p) --o;  // the last window must start inside the input or its left pad
      return o;
    };
    if (h + 2 * ph < kh || w + 2 * pw < kw) continue;
    const int64_t oh = out_dim(h, kh, sh, ph), ow = out_dim(w, kw, sw, pw);
    SCOPED_TRACE(StrCat("case ", it, ": ", max ? "MaxPool" : "AveragePool", " n ", n, " c ", c, " ", h, "x", w, " k ",
                        kh, "x", kw, " stride ", sh, ",", sw, " pads ", ph, ",", pw, ceil ? " ceil" : "",
                        count_pad ? " count_include_pad" : ""));
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, {n, c, h, w})};
    std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {kh, kw}), AttrInts("strides", {sh, sw}),
                                               AttrInts("pads", {ph, pw, ph, pw}), AttrInt("ceil_mode", ceil)};
    if (!max) attrs.push_back(AttrInt("count_include_pad", count_pad));
    md.graph.nodes.push_back(MakeNode(max ? "MaxPool" : "AveragePool", {"x"}, {"y"}, attrs, "pool"));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, {n, c, oh, ow})};
    const std::vector<float> x = Values(n * c * h * w, 31 + it);
    std::vector<double> want(n * c * oh * ow), scale(want.size(), 1.0);
    for (int64_t p = 0; p < n * c; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t count = 0, padded = 0;
          for (int64_t u = 0; u < kh; ++u) {
            for (int64_t v = 0; v < kw; ++v) {
              const int64_t y = i * sh - ph + u, xx = j * sw - pw + v;
              if (y >= h + ph || xx >= w + pw) continue;  // past the end pad (ceil_mode's last window)
              ++padded;
              if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
              const double e = x[(p * h + y) * w + xx];
              best = std::max(best, e);
              sum += e;
              ++count;
            }
          }
          want[(p * oh + i) * ow + j] = max ? best : sum / static_cast<double>(count_pad ? padded : count);
        }
      }
    }
    std::vector<Tensor> out = RunBothThreadCounts(md, {{"x", Tensor::FromVector(x, {n, c, h, w})}});
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, scale, "Y");
    if (HasFailure()) return;
  }
}

// MatMul, Gemm and FusedMatMul over random sizes (the panels, the small products and the library),
// transposes and batches.
TEST(KernelSweepTest, MatrixProductsMatchTheirDefinition) {
  Rng r(404);
  for (int it = 0; it < 150; ++it) {
    const int64_t sizes[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 130, 257};
    const int64_t m = sizes[r.In(0, 17)], n = sizes[r.In(0, 17)], k = sizes[r.In(0, 17)];
    const int64_t batch = r.In(0, 2) == 0 ? r.In(2, 4) : 1;
    const int64_t op = r.In(0, 2);  // MatMul, Gemm, FusedMatMul
    const bool ta = op != 0 && r.In(0, 1), tb = op != 0 && r.In(0, 1);
    const bool gemm = op == 1;
    const int64_t b = gemm ? 1 : batch;
    const bool bias = gemm && r.In(0, 1);
    SCOPED_TRACE(StrCat("case ", it, ": ",
                        gemm      ? "Gemm"
                        : op == 0 ? "MatMul"
                                  : "FusedMatMul",
                        " batch ", b, " m ", m, " n ", n, " k ", k, ta ? " transA" : "", tb ? " transB" : "",
                        bias ? " bias" : ""));
    Shape as = ta ? Shape{k, m} : Shape{m, k}, bs = tb ? Shape{n, k} : Shape{k, n};
    if (b > 1) {
      as.insert(as.begin(), b);
      if (r.In(0, 1)) bs.insert(bs.begin(), b);  // else B shared by every batch
    }
    const bool b_batched = bs.size() == 3;
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("a", DType::kFloat32, as), TensorInfo("b", DType::kFloat32, bs)};
    std::vector<std::string> ins = {"a", "b"};
    std::vector<onnx::AttributeProto> attrs;
    if (op != 0) attrs = {AttrInt("transA", ta), AttrInt("transB", tb), AttrFloat("alpha", 0.5f)};
    if (bias) {
      md.graph.inputs.push_back(TensorInfo("c", DType::kFloat32, {n}));
      ins.push_back("c");
    }
    md.graph.nodes.push_back(MakeNode(op == 0 ? "MatMul"
                                      : gemm  ? "Gemm"
                                              : "FusedMatMul",
                                      ins, {"y"}, attrs, "mm", op == 2 ? "com.microsoft" : ""));
    Shape ys = b > 1 ? Shape{b, m, n} : Shape{m, n};
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    const std::vector<float> av = Values(ShapeNumElements(as), 41 + it), bv = Values(ShapeNumElements(bs), 42 + it),
                             cv = Values(n, 43 + it);
    const double alpha = op == 0 ? 1.0 : 0.5;
    std::vector<double> want(b * m * n), scale(want.size());
    for (int64_t q = 0; q < b; ++q) {
      const float* pa = av.data() + q * m * k;
      const float* pb = bv.data() + (b_batched ? q * k * n : 0);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0, mag = 0;
          for (int64_t l = 0; l < k; ++l) {
            const double p =
                static_cast<double>(ta ? pa[l * m + i] : pa[i * k + l]) * (tb ? pb[j * k + l] : pb[l * n + j]);
            s += p;
            mag += std::fabs(p);
          }
          want[(q * m + i) * n + j] = alpha * s + (bias ? cv[j] : 0.0);
          scale[(q * m + i) * n + j] = alpha * mag + (bias ? std::fabs(cv[j]) : 0.0);
        }
      }
    }
    NamedTensors feeds = {{"a", Tensor::FromVector(av, as)}, {"b", Tensor::FromVector(bv, bs)}};
    if (bias) feeds.push_back({"c", Tensor::FromVector(cv, {n})});
    std::vector<Tensor> out = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, scale, "Y");
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ontrain

namespace ontrain {
namespace {

// `fwd` made into a training model (cross-entropy) and run on its own parameters, seeded inputs and `label`
// as every class: every gradient and output the same bits with the executor's fusions and without, at 1 and
// 2 threads, and the same at 1 as at 2 threads.
void ExpectTrainingStepsMatch(const Model& fwd, uint32_t seed, int64_t label) {
  auto a = GenerateArtifacts(fwd, ArtifactOptions{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Model training = a.value().training;
  testing::ExposeAccumulatedGradients(&training);
  NamedTensors feeds;
  for (const ValueInfo& v : training.graph.inputs) {
    if (training.graph.initializers.count(v.name)) continue;
    if (auto f = fwd.graph.initializers.find(v.name); f != fwd.graph.initializers.end()) {
      feeds.push_back({v.name, f->second.Clone()});
      continue;
    }
    Shape s;
    for (const Dim& d : v.dims) s.push_back(d.known() ? d.value : 1);
    if (v.dtype == DType::kBool) {
      feeds.push_back({v.name, Tensor::FromVector<bool>({true}, s)});
    } else if (v.dtype == DType::kInt64) {
      feeds.push_back({v.name, Tensor::FromVector(std::vector<int64_t>(ShapeNumElements(s), label), s)});
    } else {
      feeds.push_back({v.name, Tensor::FromVector(Values(ShapeNumElements(s), ++seed), s)});
    }
  }
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
TEST(KernelSweepTest, RandomCnnTrainingStepsMatchWithAndWithoutFusionsAtAnyThreadCount) {
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

}  // namespace
}  // namespace ontrain

namespace ontrain {
namespace {

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
TEST(KernelSweepTest, RandomTokenModelTrainingStepsMatchWithAndWithoutFusionsAtAnyThreadCount) {
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

namespace ontrain {
namespace {

// LayerNormalization, Softmax and LogSoftmax over random shapes (rank 1-4) and axes, against their
// definitions in double.
TEST(KernelSweepTest, NormalizationsAndSoftmaxMatchTheirDefinition) {
  Rng r(707);
  for (int it = 0; it < 200; ++it) {
    const int64_t rank = r.In(1, 4);
    Shape shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(r.In(0, 5) == 0 ? 1 : r.In(1, d + 1 == rank ? 70 : 12));
    const int64_t axis = r.In(-rank, rank - 1), a = axis < 0 ? axis + rank : axis;
    const int64_t op = r.In(0, 2);  // LayerNormalization, Softmax, LogSoftmax
    const char* ops[] = {"LayerNormalization", "Softmax", "LogSoftmax"};
    SCOPED_TRACE(StrCat("case ", it, ": ", ops[op], " ", ShapeToString(shape), " axis ", axis));
    int64_t outer = 1, inner = 1;  // LayerNormalization: [outer, inner] from the axis on; softmax: one axis
    for (int64_t d = 0; d < rank; ++d) (d < a ? outer : inner) *= shape[d];
    const int64_t len = shape[a], after = inner / len;
    const std::vector<float> x = Values(ShapeNumElements(shape), 71 + it, false);
    Shape norm_shape(shape.begin() + a, shape.end());
    const std::vector<float> scale = Values(inner, 72 + it, false), bias = Values(inner, 73 + it, false);
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, shape)};
    NamedTensors feeds = {{"x", Tensor::FromVector(x, shape)}};
    std::vector<double> want(x.size()), mag(x.size(), 1.0);
    if (op == 0) {
      md.graph.inputs.push_back(TensorInfo("s", DType::kFloat32, norm_shape));
      md.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, norm_shape));
      feeds.push_back({"s", Tensor::FromVector(scale, norm_shape)});
      feeds.push_back({"b", Tensor::FromVector(bias, norm_shape)});
      md.graph.nodes.push_back(MakeNode("LayerNormalization", {"x", "s", "b"}, {"y"},
                                        {AttrInt("axis", axis), AttrFloat("epsilon", 1e-3f)}, "ln"));
      for (int64_t o = 0; o < outer; ++o) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; ++i) mean += x[o * inner + i];
        mean /= static_cast<double>(inner);
        for (int64_t i = 0; i < inner; ++i) var += (x[o * inner + i] - mean) * (x[o * inner + i] - mean);
        var /= static_cast<double>(inner);
        const double inv = 1.0 / std::sqrt(var + static_cast<double>(1e-3f));
        for (int64_t i = 0; i < inner; ++i) {
          const double nrm = (x[o * inner + i] - mean) * inv;
          want[o * inner + i] = nrm * scale[i] + bias[i];
          mag[o * inner + i] = 10.0 * (std::fabs(nrm * scale[i]) + std::fabs(bias[i]) + 1.0);
        }
      }
    } else {
      md.graph.nodes.push_back(MakeNode(ops[op], {"x"}, {"y"}, {AttrInt("axis", axis)}, "softmax"));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < after; ++j) {
          auto at = [&](int64_t i) { return (o * len + i) * after + j; };
          double mx = -1e300, sum = 0;
          for (int64_t i = 0; i < len; ++i) mx = std::max(mx, static_cast<double>(x[at(i)]));
          for (int64_t i = 0; i < len; ++i) sum += std::exp(x[at(i)] - mx);
          for (int64_t i = 0; i < len; ++i) {
            want[at(i)] = op == 1 ? std::exp(x[at(i)] - mx) / sum : x[at(i)] - mx - std::log(sum);
            mag[at(i)] = op == 1 ? 10.0 * std::max(want[at(i)], 1e-30) : 10.0 * (std::fabs(x[at(i)] - mx) + 1.0);
          }
        }
      }
    }
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, shape)};
    std::vector<Tensor> out = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, mag, "Y");
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ontrain

namespace ontrain {
namespace {

// BatchNormalization in training mode (batch statistics, running statistics) and com.microsoft's
// BatchNormalizationGrad over random [N, C, ...] shapes, against their definitions in double.
TEST(KernelSweepTest, BatchNormalizationTrainingAndGradientMatchTheirDefinition) {
  Rng r(808);
  for (int it = 0; it < 120; ++it) {
    const int64_t n = r.In(1, 6), c = r.In(1, 40), rank = r.In(2, 4);
    Shape shape = {n, c};
    for (int64_t d = 2; d < rank; ++d) shape.push_back(r.In(1, 17));
    const int64_t inner = ShapeNumElements(shape) / (n * c);
    const double m = static_cast<double>(n * inner);
    SCOPED_TRACE(StrCat("case ", it, ": ", ShapeToString(shape)));
    const std::vector<float> x = Values(ShapeNumElements(shape), 81 + it, false), dy = Values(x.size(), 82 + it),
                             scale = Values(c, 83 + it, false), bias = Values(c, 84 + it, false),
                             rmean = Values(c, 85 + it, false);
    std::vector<float> rvar = Values(c, 86 + it, false);
    for (float& v : rvar) v = v * v + 0.5f;
    const float eps = 1e-5f, momentum = 0.9f;
    std::vector<double> mean(c, 0.0), var(c, 0.0);
    auto at = [&](int64_t b, int64_t ch, int64_t i) { return (b * c + ch) * inner + i; };
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) mean[ch] += x[at(b, ch, i)];
      mean[ch] /= m;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) var[ch] += (x[at(b, ch, i)] - mean[ch]) * (x[at(b, ch, i)] - mean[ch]);
      var[ch] /= m;
    }
    // Forward.
    Model fwd;
    fwd.opset_imports[""] = 15;
    fwd.graph.inputs = {TensorInfo("x", DType::kFloat32, shape), TensorInfo("s", DType::kFloat32, {c}),
                        TensorInfo("b", DType::kFloat32, {c}), TensorInfo("m", DType::kFloat32, {c}),
                        TensorInfo("v", DType::kFloat32, {c})};
    fwd.graph.nodes.push_back(
        MakeNode("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"},
                 {AttrInt("training_mode", 1), AttrFloat("epsilon", eps), AttrFloat("momentum", momentum)}, "bn"));
    fwd.graph.outputs = {TensorInfo("y", DType::kFloat32, shape), TensorInfo("rm", DType::kFloat32, {c}),
                         TensorInfo("rv", DType::kFloat32, {c})};
    std::vector<double> y(x.size()), y_mag(x.size()), rm(c), rv(c), stat_mag(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      const double inv = 1.0 / std::sqrt(var[ch] + eps);
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double h = (x[at(b, ch, i)] - mean[ch]) * inv;
          y[at(b, ch, i)] = h * scale[ch] + bias[ch];
          y_mag[at(b, ch, i)] = 10.0 * (std::fabs(h * scale[ch]) + std::fabs(bias[ch]) + 1.0);
        }
      }
      rm[ch] = rmean[ch] * momentum + mean[ch] * (1 - momentum);
      rv[ch] = rvar[ch] * momentum + var[ch] * (1 - momentum);
      stat_mag[ch] = 10.0 * (std::fabs(rm[ch]) + std::fabs(rv[ch]) + 1.0);
    }
    std::vector<Tensor> out = RunBothThreadCounts(fwd, {{"x", Tensor::FromVector(x, shape)},
                                                        {"s", Tensor::FromVector(scale, {c})},
                                                        {"b", Tensor::FromVector(bias, {c})},
                                                        {"m", Tensor::FromVector(rmean, {c})},
                                                        {"v", Tensor::FromVector(rvar, {c})}});
    ASSERT_EQ(out.size(), 3u);
    ExpectNear(out[0], y, y_mag, "Y");
    ExpectNear(out[1], rm, stat_mag, "running_mean");
    ExpectNear(out[2], rv, stat_mag, "running_var");
    // Gradient, from the batch statistics as float (what the forward pass saves).
    std::vector<float> saved_mean(c), saved_inv(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      saved_mean[ch] = static_cast<float>(mean[ch]);
      saved_inv[ch] = static_cast<float>(1.0 / std::sqrt(var[ch] + eps));
    }
    Model grad;
    grad.opset_imports[""] = 17;
    grad.opset_imports["com.microsoft"] = 1;
    grad.graph.inputs = {TensorInfo("dy", DType::kFloat32, shape), TensorInfo("x", DType::kFloat32, shape),
                         TensorInfo("s", DType::kFloat32, {c}), TensorInfo("m", DType::kFloat32, {c}),
                         TensorInfo("i", DType::kFloat32, {c})};
    grad.graph.nodes.push_back(MakeNode("BatchNormalizationGrad", {"dy", "x", "s", "m", "i"}, {"dx", "ds", "db"},
                                        {AttrFloat("epsilon", eps)}, "bng", "com.microsoft"));
    grad.graph.outputs = {TensorInfo("dx", DType::kFloat32, shape), TensorInfo("ds", DType::kFloat32, {c}),
                          TensorInfo("db", DType::kFloat32, {c})};
    std::vector<double> dx(x.size()), dx_mag(x.size()), ds(c, 0.0), db(c, 0.0), ds_mag(c, 0.0), db_mag(c, 0.0);
    for (int64_t ch = 0; ch < c; ++ch) {
      double dy_abs = 0;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double h = (x[at(b, ch, i)] - static_cast<double>(saved_mean[ch])) * saved_inv[ch];
          db[ch] += dy[at(b, ch, i)];
          ds[ch] += dy[at(b, ch, i)] * h;
          db_mag[ch] += std::fabs(dy[at(b, ch, i)]);
          ds_mag[ch] += std::fabs(dy[at(b, ch, i)] * h);
          dy_abs += std::fabs(dy[at(b, ch, i)]);
        }
      }
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double h = (x[at(b, ch, i)] - static_cast<double>(saved_mean[ch])) * saved_inv[ch];
          dx[at(b, ch, i)] = scale[ch] * saved_inv[ch] / m * (m * dy[at(b, ch, i)] - db[ch] - h * ds[ch]);
          dx_mag[at(b, ch, i)] = 10.0 * std::fabs(scale[ch] * saved_inv[ch]) / m *
                                 (m * std::fabs(dy[at(b, ch, i)]) + db_mag[ch] + std::fabs(h) * ds_mag[ch]);
        }
      }
      (void)dy_abs;
    }
    out = RunBothThreadCounts(grad, {{"dy", Tensor::FromVector(dy, shape)},
                                     {"x", Tensor::FromVector(x, shape)},
                                     {"s", Tensor::FromVector(scale, {c})},
                                     {"m", Tensor::FromVector(saved_mean, {c})},
                                     {"i", Tensor::FromVector(saved_inv, {c})}});
    ASSERT_EQ(out.size(), 3u);
    ExpectNear(out[0], dx, dx_mag, "dX");
    ExpectNear(out[1], ds, ds_mag, "dScale");
    ExpectNear(out[2], db, db_mag, "dBias");
    if (HasFailure()) return;
  }
}

// Add, Sub, Mul and Div with NumPy broadcasting over random shapes: each element is one float operation,
// so the result must be that operation's bits.
TEST(KernelSweepTest, BroadcastArithmeticIsTheElementwiseFloatOperation) {
  Rng r(909);
  const char* ops[] = {"Add", "Sub", "Mul", "Div"};
  for (int it = 0; it < 300; ++it) {
    const int64_t rank = r.In(1, 4);
    Shape out;
    for (int64_t d = 0; d < rank; ++d) out.push_back(r.In(1, d + 1 == rank ? 70 : 9));
    auto operand = [&]() {
      Shape s;
      const int64_t skip = r.In(0, rank - 1) == 0 ? r.In(0, rank - 1) : 0;  // fewer dims at times
      for (int64_t d = skip; d < rank; ++d) s.push_back(r.In(0, 2) == 0 ? 1 : out[d]);
      return s;
    };
    const Shape as = operand(), bs = operand();
    const int64_t op = r.In(0, 3);
    Shape ys;
    {
      const size_t yr = std::max(as.size(), bs.size());
      for (size_t d = 0; d < yr; ++d) {
        const int64_t a = d + as.size() >= yr ? as[d + as.size() - yr] : 1,
                      b = d + bs.size() >= yr ? bs[d + bs.size() - yr] : 1;
        ys.push_back(std::max(a, b));
      }
    }
    SCOPED_TRACE(StrCat("case ", it, ": ", ops[op], " ", ShapeToString(as), " ", ShapeToString(bs)));
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("a", DType::kFloat32, as), TensorInfo("b", DType::kFloat32, bs)};
    md.graph.nodes.push_back(MakeNode(ops[op], {"a", "b"}, {"y"}, {}, "op"));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    const std::vector<float> a = Values(ShapeNumElements(as), 91 + it), b = Values(ShapeNumElements(bs), 92 + it);
    std::vector<Tensor> got =
        RunBothThreadCounts(md, {{"a", Tensor::FromVector(a, as)}, {"b", Tensor::FromVector(b, bs)}});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), ys);
    const float* g = got[0].data<float>();
    const int64_t total = ShapeNumElements(ys);
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e, ia = 0, ib = 0, sa = 1, sb = 1;
      for (int64_t d = static_cast<int64_t>(ys.size()) - 1; d >= 0; --d) {
        const int64_t k = rem % ys[d];
        rem /= ys[d];
        const int64_t da = d - (static_cast<int64_t>(ys.size()) - static_cast<int64_t>(as.size()));
        const int64_t db = d - (static_cast<int64_t>(ys.size()) - static_cast<int64_t>(bs.size()));
        if (da >= 0) {
          if (as[da] != 1) ia += k * sa;
          sa *= as[da];
        }
        if (db >= 0) {
          if (bs[db] != 1) ib += k * sb;
          sb *= bs[db];
        }
      }
      const float x = a[ia], y = b[ib];
      const float want = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
      if (std::memcmp(&want, &g[e], sizeof want) != 0) {
        ADD_FAILURE() << "element " << e << ": " << g[e] << " against " << want;
        return;
      }
    }
  }
}

// ReduceSum, ReduceMean, ReduceMax and ReduceSumSquare over random axes, with and without keepdims.
TEST(KernelSweepTest, ReductionsMatchTheirDefinition) {
  Rng r(1010);
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceSumSquare"};
  for (int it = 0; it < 250; ++it) {
    const int64_t rank = r.In(1, 4);
    Shape shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(r.In(1, d + 1 == rank ? 80 : 10));
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      if (r.In(0, 1)) axes.push_back(r.In(0, 1) ? d : d - rank);
    const int64_t op = r.In(0, 3), keep = r.In(0, 1);
    SCOPED_TRACE(StrCat("case ", it, ": ", ops[op], " ", ShapeToString(shape), " axes ",
                        ShapeToString(Shape(axes.begin(), axes.end())), keep ? " keepdims" : ""));
    std::vector<bool> red(rank, axes.empty());
    for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
    Shape ys, kept;
    for (int64_t d = 0; d < rank; ++d) {
      if (!red[d])
        ys.push_back(shape[d]), kept.push_back(shape[d]);
      else if (keep)
        ys.push_back(1);
    }
    Model md;
    md.opset_imports[""] = 18;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, shape)};
    std::vector<std::string> ins = {"x"};
    NamedTensors feeds;
    const std::vector<float> x = Values(ShapeNumElements(shape), 101 + it, false);
    feeds.push_back({"x", Tensor::FromVector(x, shape)});
    if (!axes.empty()) {
      md.graph.inputs.push_back(TensorInfo("axes", DType::kInt64, {static_cast<int64_t>(axes.size())}));
      ins.push_back("axes");
      feeds.push_back({"axes", Tensor::FromVector(axes, {static_cast<int64_t>(axes.size())})});
    }
    md.graph.nodes.push_back(MakeNode(ops[op], ins, {"y"}, {AttrInt("keepdims", keep)}, "reduce"));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    const int64_t outs = ShapeNumElements(kept);
    std::vector<double> want(outs, op == 2 ? -1e300 : 0.0), mag(outs, 0.0);
    std::vector<int64_t> count(outs, 0);
    for (int64_t e = 0; e < static_cast<int64_t>(x.size()); ++e) {
      int64_t rem = e, o = 0, so = 1;
      for (int64_t d = rank - 1; d >= 0; --d) {
        const int64_t k = rem % shape[d];
        rem /= shape[d];
        if (!red[d]) {
          o += k * so;
          so *= shape[d];
        }
      }
      const double v = x[e];
      if (op == 2)
        want[o] = std::max(want[o], v);
      else
        want[o] += op == 3 ? v * v : v;
      mag[o] += op == 3 ? v * v : std::fabs(v);
      ++count[o];
    }
    for (int64_t o = 0; o < outs; ++o) {
      if (op == 1) {
        want[o] /= static_cast<double>(count[o]);
        mag[o] /= static_cast<double>(count[o]);
      }
      if (op == 2) mag[o] = 1.0;
    }
    std::vector<Tensor> got = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), ys);
    ExpectNear(got[0], want, mag, "Y");
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ontrain

namespace ontrain {
namespace {

// Row-major element strides of `shape`.
Shape RowMajorStrides(const Shape& shape) {
  Shape st(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

// MaxPool's indices into MaxPoolGrad, and AveragePoolGrad, over random windows, strides and pads: each
// window's gradient goes to its maximum (MaxPool's first, in window order) or spreads over the window.
TEST(KernelSweepTest, PoolGradientsMatchTheirDefinition) {
  Rng r(1111);
  for (int it = 0; it < 200; ++it) {
    const int64_t n = r.In(1, 3), c = r.In(1, 20), h = r.In(1, 26), w = r.In(1, 26);
    const int64_t kh = r.In(1, 4), kw = r.In(0, 2) ? kh : r.In(1, 4), sh = r.In(1, 3),
                  sw = r.In(0, 2) ? sh : r.In(1, 3);
    const int64_t ph = r.In(0, 3) == 0 ? r.In(0, kh - 1) : 0, pw = r.In(0, 3) == 0 ? r.In(0, kw - 1) : 0;
    const bool max = r.In(0, 1) == 0, count_pad = r.In(0, 1) == 0;
    if (h + 2 * ph < kh || w + 2 * pw < kw) continue;
    const int64_t oh = (h + 2 * ph - kh) / sh + 1, ow = (w + 2 * pw - kw) / sw + 1;
    SCOPED_TRACE(StrCat("case ", it, ": ", max ? "MaxPoolGrad" : "AveragePoolGrad", " n ", n, " c ", c, " ", h, "x", w,
                        " k ", kh, "x", kw, " stride ", sh, ",", sw, " pads ", ph, ",", pw,
                        count_pad ? " count_include_pad" : ""));
    std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {kh, kw}), AttrInts("strides", {sh, sw}),
                                               AttrInts("pads", {ph, pw, ph, pw})};
    if (!max) attrs.push_back(AttrInt("count_include_pad", count_pad));
    const Shape xs = {n, c, h, w}, ys = {n, c, oh, ow};
    const std::vector<float> x = Values(ShapeNumElements(xs), 111 + it, false),
                             dy = Values(ShapeNumElements(ys), 112 + it);
    Model md;
    md.opset_imports[""] = 17;
    NamedTensors feeds = {{"dy", Tensor::FromVector(dy, ys)}};
    md.graph.inputs = {TensorInfo("dy", DType::kFloat32, ys)};
    if (max) {
      md.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, xs));
      feeds.push_back({"x", Tensor::FromVector(x, xs)});
      md.graph.nodes.push_back(MakeNode("MaxPool", {"x"}, {"y", "i"}, attrs, "pool"));
      md.graph.nodes.push_back(MakeNode("MaxPoolGrad", {"dy", "i"}, {"dx"}, attrs, "pool_grad"));
    } else {
      md.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, xs));  // ontrain's extension: X, for its shape
      feeds.push_back({"x", Tensor::FromVector(x, xs)});
      md.graph.nodes.push_back(MakeNode("AveragePoolGrad", {"dy", "x"}, {"dx"}, attrs, "pool_grad"));
    }
    md.graph.outputs = {TensorInfo("dx", DType::kFloat32, xs)};
    std::vector<double> dx(x.size(), 0.0), mag(x.size(), 1e-30);
    for (int64_t p = 0; p < n * c; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          const double g = dy[(p * oh + i) * ow + j];
          int64_t best = -1, count = 0;
          for (int64_t u = 0; u < kh; ++u) {
            for (int64_t v = 0; v < kw; ++v) {
              const int64_t y = i * sh - ph + u, xx = j * sw - pw + v;
              if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
              const int64_t e = (p * h + y) * w + xx;
              if (best < 0 || x[e] > x[best]) best = e;
              ++count;
            }
          }
          if (max) {
            if (best >= 0) dx[best] += g, mag[best] += std::fabs(g);
            continue;
          }
          const double share = g / static_cast<double>(count_pad ? kh * kw : count);
          for (int64_t u = 0; u < kh; ++u) {
            for (int64_t v = 0; v < kw; ++v) {
              const int64_t y = i * sh - ph + u, xx = j * sw - pw + v;
              if (y < 0 || y >= h || xx < 0 || xx >= w) continue;
              dx[(p * h + y) * w + xx] += share;
              mag[(p * h + y) * w + xx] += std::fabs(share);
            }
          }
        }
      }
    }
    for (double& m : mag) m *= 10.0;
    std::vector<Tensor> out = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], dx, mag, "dX");
    if (HasFailure()) return;
  }
}

// Transpose, Slice (negative steps too), Pad (constant, edge, reflect), Concat, Gather (negative indices),
// Expand and Tile over random shapes: pure data movement, so every element is compared bit for bit with the
// element its definition picks.
TEST(KernelSweepTest, DataMovementPicksTheElementsItsDefinitionNames) {
  Rng r(1212);
  for (int it = 0; it < 400; ++it) {
    const int64_t rank = r.In(1, 5);
    Shape s;
    for (int64_t d = 0; d < rank; ++d) s.push_back(r.In(1, d + 1 == rank ? 40 : 7));
    const std::vector<float> x = Values(ShapeNumElements(s), 121 + it);
    const int64_t op = r.In(0, 6);
    const char* names[] = {"Transpose", "Slice", "Pad", "Concat", "Gather", "Expand", "Tile"};
    Model md;
    md.opset_imports[""] = 18;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, s)};
    NamedTensors feeds = {{"x", Tensor::FromVector(x, s)}};
    Shape ys;
    // want(i): the flat index of x that output element i copies, or -1 for a constant 0 (Pad).
    std::function<int64_t(const Shape&)> want;
    Shape xstr = RowMajorStrides(s);
    auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
      md.graph.inputs.push_back(TensorInfo(name, DType::kInt64, {static_cast<int64_t>(v.size())}));
      feeds.push_back({name, Tensor::FromVector(v, {static_cast<int64_t>(v.size())})});
      return name;
    };
    std::string detail;
    if (op == 0) {  // Transpose
      std::vector<int64_t> perm(rank);
      for (int64_t d = 0; d < rank; ++d) perm[d] = d;
      for (int64_t d = rank - 1; d > 0; --d) std::swap(perm[d], perm[r.In(0, d)]);
      for (int64_t d = 0; d < rank; ++d) ys.push_back(s[perm[d]]);
      md.graph.nodes.push_back(MakeNode("Transpose", {"x"}, {"y"}, {AttrInts("perm", perm)}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += o[d] * xstr[perm[d]];
        return e;
      };
      detail = "perm " + ShapeToString(Shape(perm.begin(), perm.end()));
    } else if (op == 1) {  // Slice on every axis
      std::vector<int64_t> starts, ends, axes, steps;
      std::vector<int64_t> first(rank), step(rank);
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t st = r.In(0, 2) ? r.In(1, 3) : -r.In(1, 3);
        int64_t b = r.In(-s[d] - 2, s[d] + 1), e = r.In(-s[d] - 2, s[d] + 1);
        starts.push_back(b), ends.push_back(e), axes.push_back(d), steps.push_back(st);
        // ONNX's clamping: negative + dim, then [0, dim] for positive steps, [-1, dim - 1] for negative.
        auto norm = [&](int64_t v, bool start) {
          if (v < 0) v += s[d];
          if (st > 0) return std::clamp<int64_t>(v, 0, s[d]);
          return std::clamp<int64_t>(v, -1, s[d] - 1) + (start ? 0 : 0);
        };
        const int64_t b0 = norm(b, true), e0 = norm(e, false);
        const int64_t len = st > 0 ? std::max<int64_t>(0, (e0 - b0 + st - 1) / st)
                                   : std::max<int64_t>(0, (b0 - e0 + (-st) - 1) / (-st));
        ys.push_back(len);
        first[d] = b0;
        step[d] = st;
      }
      md.graph.nodes.push_back(
          MakeNode("Slice", {"x", ints("starts", starts), ints("ends", ends), ints("axes", axes), ints("steps", steps)},
                   {"y"}, {}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (first[d] + o[d] * step[d]) * xstr[d];
        return e;
      };
      detail = "starts " + ShapeToString(Shape(starts.begin(), starts.end())) + " ends " +
               ShapeToString(Shape(ends.begin(), ends.end())) + " steps " +
               ShapeToString(Shape(steps.begin(), steps.end()));
    } else if (op == 2) {               // Pad
      const int64_t mode = r.In(0, 2);  // constant, edge, reflect
      std::vector<int64_t> pads(2 * rank);
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t lim = mode == 2 ? s[d] - 1 : 3;
        pads[d] = r.In(0, std::max<int64_t>(lim, 0));
        pads[d + rank] = r.In(0, std::max<int64_t>(lim, 0));
        ys.push_back(s[d] + pads[d] + pads[d + rank]);
      }
      const char* modes[] = {"constant", "edge", "reflect"};
      md.graph.nodes.push_back(
          MakeNode("Pad", {"x", ints("pads", pads)}, {"y"}, {AttrString("mode", modes[mode])}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) {
          int64_t k = o[d] - pads[d];
          if (k < 0 || k >= s[d]) {
            if (mode == 0) return int64_t{-1};
            if (mode == 1)
              k = k < 0 ? 0 : s[d] - 1;
            else
              k = k < 0 ? -k : 2 * (s[d] - 1) - k;
          }
          e += k * xstr[d];
        }
        return e;
      };
      detail = std::string(modes[mode]) + " pads " + ShapeToString(Shape(pads.begin(), pads.end()));
    } else if (op == 3) {  // Concat of x with itself and a slice of it along an axis: x, x
      const int64_t axis = r.In(0, rank - 1);
      ys = s;
      ys[axis] *= 2;
      md.graph.nodes.push_back(MakeNode("Concat", {"x", "x"}, {"y"}, {AttrInt("axis", axis)}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (d == axis ? o[d] % s[d] : o[d]) * xstr[d];
        return e;
      };
      detail = StrCat("axis ", axis);
    } else if (op == 4) {  // Gather
      const int64_t axis = r.In(0, rank - 1), k = r.In(1, 9);
      std::vector<int64_t> idx(k);
      for (int64_t& v : idx) v = r.In(-s[axis], s[axis] - 1);
      for (int64_t d = 0; d < rank; ++d) {
        if (d == axis)
          ys.push_back(k);
        else
          ys.push_back(s[d]);
      }
      md.graph.nodes.push_back(MakeNode("Gather", {"x", ints("idx", idx)}, {"y"}, {AttrInt("axis", axis)}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) {
          int64_t v = d == axis ? idx[o[d]] : o[d];
          if (v < 0) v += s[d];
          e += v * xstr[d];
        }
        return e;
      };
      detail = StrCat("axis ", axis, " indices ", ShapeToString(Shape(idx.begin(), idx.end())));
    } else if (op == 5) {  // Expand: x with some dims 1, broadcast to a shape with an extra leading dim
      Shape xs1 = s;
      for (int64_t& d : xs1)
        if (r.In(0, 1)) d = 1;
      const std::vector<float> x1 = Values(ShapeNumElements(xs1), 131 + it);
      feeds[0] = {"x", Tensor::FromVector(x1, xs1)};
      md.graph.inputs[0] = TensorInfo("x", DType::kFloat32, xs1);
      const int64_t lead = r.In(1, 3);
      std::vector<int64_t> target = {lead};
      for (int64_t d : s) target.push_back(d);
      ys = Shape(target.begin(), target.end());
      md.graph.nodes.push_back(MakeNode("Expand", {"x", ints("shape", target)}, {"y"}, {}, "op"));
      Shape str1 = RowMajorStrides(xs1);
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (xs1[d] == 1 ? 0 : o[d + 1]) * str1[d];
        return e;
      };
      detail = "from " + ShapeToString(xs1);
      s = xs1;  // for the element lookup below
    } else {    // Tile
      std::vector<int64_t> reps(rank);
      for (int64_t d = 0; d < rank; ++d) {
        reps[d] = r.In(1, 3);
        ys.push_back(s[d] * reps[d]);
      }
      md.graph.nodes.push_back(MakeNode("Tile", {"x", ints("reps", reps)}, {"y"}, {}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (o[d] % s[d]) * xstr[d];
        return e;
      };
      detail = "repeats " + ShapeToString(Shape(reps.begin(), reps.end()));
    }
    SCOPED_TRACE(StrCat("case ", it, ": ", names[op], " ", ShapeToString(s), " ", detail));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    std::vector<Tensor> got = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), ys);
    const float* src = feeds[0].second.data<float>();
    const float* g = got[0].data<float>();
    const int64_t total = ShapeNumElements(ys);
    Shape o(ys.size(), 0);
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e;
      for (int64_t d = static_cast<int64_t>(ys.size()) - 1; d >= 0; --d) {
        o[d] = rem % ys[d];
        rem /= ys[d];
      }
      const int64_t from = want(o);
      const float expect = from < 0 ? 0.0f : src[from];
      if (std::memcmp(&expect, &g[e], sizeof expect) != 0) {
        ADD_FAILURE() << "element " << e << " " << ShapeToString(o) << ": " << g[e] << " against " << expect;
        return;
      }
    }
  }
}

}  // namespace
}  // namespace ontrain
