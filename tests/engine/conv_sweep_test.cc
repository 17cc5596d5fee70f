// Random shapes through the CPU's convolution and pooling paths, where fixed-shape tests leave corners:
// convolutions (direct, Winograd, depthwise, grouped, 1x1, strided, dilated, padded on one side, with and
// without a fused Relu), their gradients, MaxPool and AveragePool (ceil_mode, count_include_pad) and their
// gradients, each against its definition computed here in double, at 1 and 2 threads with the same bits (no
// result depends on the thread count). Under tools/test.sh --config=asan the same cases check every access
// (ten times these counts ran clean there once). Seeds are fixed, so a failure names a case that reproduces.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/engine/sweep_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::ExpectNear;
using testing::Rng;
using testing::RunBothThreadCounts;
using testing::Values;

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

TEST(ConvSweepTest, ConvolutionsMatchTheirDefinition) {
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

TEST(ConvSweepTest, ConvolutionGradientsMatchTheirDefinition) {
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
TEST(ConvSweepTest, PoolsMatchTheirDefinition) {
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

// MaxPool's indices into MaxPoolGrad, and AveragePoolGrad, over random windows, strides and pads: each
// window's gradient goes to its maximum (MaxPool's first, in window order) or spreads over the window.
TEST(ConvSweepTest, PoolGradientsMatchTheirDefinition) {
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

}  // namespace
}  // namespace ontrain
