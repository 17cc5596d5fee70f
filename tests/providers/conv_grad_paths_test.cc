// ConvGrad's shortcuts for MobileNet's layers:
// - the depthwise kernels' one-pass backward (DepthwiseBackward: dX and dW together where the AVX-512 vector
//   kernels run) gives the bits of the separate dX and dW passes, at 1 and 2 threads (those are checked
//   against the definition in cpu_kernels_test.cc, ConvFloat32MatchesDefinition);
// - stride-2 depthwise convolutions, on phase planes, keep each output's and dX entry's tap order (the
//   same bits as the taps written out with std::fma);
// - the weight gradient of 1x1 windows without pads (one GEMM per image, the batch's halves in parallel, or
//   register tiles over the batch;
//   at strides above 1, a ResNet's downsampling shortcut, over the image's gathered samples) matches the
//   definition, with the same bits at 1 and 2 threads;
// - the weight gradient of 3x3 windows over chunks of images matches the definition, with the same bits at
//   1 and 2 threads;
// - dB where the direct weight gradient runs sums each image's transposed dY in its stated order.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/providers/kernel_test_util.h"
#include "providers/cpu/kernels/depthwise.h"
#include "providers/cpu/kernels/direct_conv.h"
#include "providers/cpu/kernels/pointwise.h"
#include "providers/cpu/kernels/vrows.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {
namespace {

using kernel_test::Uniform;

// The index of the first element whose bits differ, or -1.
int64_t FirstDifference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t k = 0; k < a.size(); ++k) {
    if (std::memcmp(&a[k], &b[k], sizeof(float)) != 0) return static_cast<int64_t>(k);
  }
  return -1;
}

TEST(ConvGradPathsTest, DepthwiseOnePassBackwardGivesTheBitsOfTheSeparatePasses) {
  struct Case {
    int64_t n, c, h, w, k, stride, pad, dil, pad_end = -1;  // pad_end -1: pad on both sides
  };
  // MobileNet's layers (same windows, stride 2), a 4x4 plane (one vector), odd rows, a dilated 5x5 window,
  // uneven pads (dX's window geometry then differs from dW's), and pads wider than the stride-2 grid (the
  // plane loops, for both paths).
  const Case cases[] = {{4, 32, 16, 16, 3, 1, 1, 1},   {3, 24, 16, 16, 3, 2, 1, 1},   {5, 40, 4, 4, 3, 1, 1, 1},
                        {2, 7, 9, 37, 3, 1, 1, 1},     {2, 6, 11, 10, 5, 1, 4, 2},    {2, 8, 12, 12, 3, 1, 0, 1, 2},
                        {2, 8, 12, 12, 3, 2, 0, 1, 1}, {2, 3, 4, 4, 3, 2, 2, 1}};
  for (const Case& t : cases) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " " + std::to_string(t.h) + "x" +
                 std::to_string(t.w) + " k " + std::to_string(t.k) + " stride " + std::to_string(t.stride));
    WindowAttrs geo;
    geo.kernel = {t.k, t.k};
    geo.strides = {t.stride, t.stride};
    geo.dilations = {t.dil, t.dil};
    const int64_t end = t.pad_end < 0 ? t.pad : t.pad_end;
    geo.pads = {t.pad, t.pad, end, end};
    const int64_t in[2] = {t.h, t.w};
    const int64_t out[2] = {(t.h + t.pad + end - (t.k - 1) * t.dil - 1) / t.stride + 1,
                            (t.w + t.pad + end - (t.k - 1) * t.dil - 1) / t.stride + 1};
    const std::vector<float> x = Uniform(t.n * t.c * t.h * t.w, 1), w = Uniform(t.c * t.k * t.k, 2),
                             dy = Uniform(t.n * t.c * out[0] * out[1], 3);
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      ThreadPool pool(threads, false);
      std::vector<float> dx1(x.size()), dw1(w.size()), dx2(x.size(), 7.0f), dw2(w.size(), 7.0f);
      DepthwiseBackwardData<float>(dy.data(), w.data(), dx1.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackwardWeights<float>(dy.data(), x.data(), dw1.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), dx2.data(), dw2.data(), t.n, t.c, in, out, geo, &pool);
      EXPECT_EQ(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float)), 0) << "dX differs";
      EXPECT_EQ(std::memcmp(dw1.data(), dw2.data(), dw1.size() * sizeof(float)), 0) << "dW differs";
      // Either output alone.
      std::vector<float> dx3(x.size(), 7.0f), dw3(w.size(), 7.0f);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), dx3.data(), nullptr, t.n, t.c, in, out, geo, &pool);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), nullptr, dw3.data(), t.n, t.c, in, out, geo, &pool);
      EXPECT_EQ(dx3, dx1);
      EXPECT_EQ(dw3, dw1);
    }
  }
}

// Stride-2 depthwise convolutions run on the four phase planes of x, and planes of one vector channel by
// channel (depthwise.cc): every output is still bias + the window's taps in order, one FMA each (a tap
// outside the image adding w * 0), and every dX entry 0 + the flipped window's taps that meet a dY entry, in
// order; written out here with std::fma, bit for bit. dW, whose lanes add in another order at stride 2,
// against sums in double. Stride-2 geometries: MobileNet's (3x3, pads 1, even planes: the output plane is a
// phase plane's size), odd planes, no pads (a phase plane a row and a column larger than the output), a 5x5
// window with pads 2 (offsets of +1 in the phase planes), a dilated 3x2 window with uneven pads, rows of 40
// and 33 (the vector split and join, then their tails). Stride 1: 4x4 and 3x3 planes (one vector), a 5x5
// window on 4x4 (25 taps), and 8x8 (the per-image pass); 3x3 windows with pads 1 on rows of 16 and 32 (the
// row kernels: 16x16, two 16-column chunks, a single row; rows of 28, 20, 17 and 33, whose last chunk is
// partial), and rows of 8, 4 and 2 ending in a partial vector (7x8, 5x4, 9x2: the flat kernel).
TEST(ConvGradPathsTest, DepthwiseKeepsTheTapOrder) {
  struct Case {
    int64_t n, c, h, w, kh, kw, dil, pt, pl, pb, pr, stride = 2;
  };
  const Case cases[] = {{2, 3, 16, 16, 3, 3, 1, 1, 1, 1, 1},    {2, 3, 9, 11, 3, 3, 1, 1, 1, 1, 1},
                        {2, 2, 16, 16, 3, 3, 1, 0, 0, 0, 0},    {1, 2, 13, 12, 5, 5, 1, 2, 2, 2, 2},
                        {2, 2, 11, 14, 3, 2, 2, 1, 0, 2, 1},    {1, 2, 6, 40, 3, 3, 1, 1, 1, 1, 1},
                        {1, 2, 7, 33, 3, 3, 1, 0, 1, 1, 0},     {3, 4, 4, 4, 3, 3, 1, 1, 1, 1, 1},
                        {5, 6, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1},   {3, 5, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1},
                        {2, 3, 4, 4, 5, 5, 1, 2, 2, 2, 2, 1},   {3, 4, 8, 8, 3, 3, 1, 1, 1, 1, 1, 1},
                        {2, 3, 16, 16, 3, 3, 1, 1, 1, 1, 1, 1}, {1, 2, 5, 32, 3, 3, 1, 1, 1, 1, 1, 1},
                        {2, 2, 1, 16, 3, 3, 1, 1, 1, 1, 1, 1},  {2, 2, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1},
                        {2, 2, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1},   {1, 2, 9, 2, 3, 3, 1, 1, 1, 1, 1, 1},
                        {2, 2, 5, 28, 3, 3, 1, 1, 1, 1, 1, 1},  {1, 2, 3, 20, 3, 3, 1, 1, 1, 1, 1, 1},
                        {1, 3, 4, 17, 3, 3, 1, 1, 1, 1, 1, 1},  {1, 2, 4, 33, 3, 3, 1, 1, 1, 1, 1, 1}};
  for (const Case& t : cases) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " " + std::to_string(t.h) + "x" + std::to_string(t.w) + " k " +
                 std::to_string(t.kh) + "x" + std::to_string(t.kw) + " pads " + std::to_string(t.pt) + "," +
                 std::to_string(t.pl) + "," + std::to_string(t.pb) + "," + std::to_string(t.pr) + " stride " +
                 std::to_string(t.stride));
    const int64_t st = t.stride;
    WindowAttrs geo;
    geo.kernel = {t.kh, t.kw};
    geo.strides = {st, st};
    geo.dilations = {t.dil, t.dil};
    geo.pads = {t.pt, t.pl, t.pb, t.pr};
    const int64_t in[2] = {t.h, t.w};
    const int64_t oh = (t.h + t.pt + t.pb - (t.kh - 1) * t.dil - 1) / st + 1;
    const int64_t ow = (t.w + t.pl + t.pr - (t.kw - 1) * t.dil - 1) / st + 1;
    const int64_t out[2] = {oh, ow}, taps = t.kh * t.kw, planes = t.n * t.c;
    const std::vector<float> x = Uniform(planes * t.h * t.w, 7), w = Uniform(t.c * taps, 8),
                             b = Uniform(t.c, 9), dy = Uniform(planes * oh * ow, 10);
    // The references: position (r, o) of plane p reads x at (st r - pt + a dil, st o - pl + e dil).
    std::vector<float> want_y(planes * oh * ow), want_dx(x.size(), 0.0f);
    std::vector<double> want_dw(w.size(), 0.0), mag_dw(w.size(), 0.0);
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t ch = p % t.c;
      for (int64_t r = 0; r < oh; ++r) {
        for (int64_t o = 0; o < ow; ++o) {
          float acc = b[ch];
          for (int64_t k = 0; k < taps; ++k) {
            const int64_t u = st * r - t.pt + k / t.kw * t.dil, v = st * o - t.pl + k % t.kw * t.dil;
            const bool inside = u >= 0 && u < t.h && v >= 0 && v < t.w;
            const float xv = inside ? x[(p * t.h + u) * t.w + v] : 0.0f;
            acc = std::fma(w[ch * taps + k], xv, acc);
            if (inside) {
              const double term = static_cast<double>(dy[(p * oh + r) * ow + o]) * xv;
              want_dw[ch * taps + k] += term;
              mag_dw[ch * taps + k] += std::fabs(term);
            }
          }
          want_y[(p * oh + r) * ow + o] = acc;
        }
      }
      // dX (u, v): the flipped taps in order; tap k meets dY (r, o) where u = st r - pt + a dil.
      for (int64_t u = 0; u < t.h; ++u) {
        for (int64_t v = 0; v < t.w; ++v) {
          float acc = 0.0f;
          for (int64_t f = 0; f < taps; ++f) {
            const int64_t k = taps - 1 - f, ru = u + t.pt - k / t.kw * t.dil, rv = v + t.pl - k % t.kw * t.dil;
            if (ru < 0 || rv < 0 || ru % st || rv % st || ru / st >= oh || rv / st >= ow) continue;
            acc = std::fma(w[ch * taps + k], dy[(p * oh + ru / st) * ow + rv / st], acc);
          }
          want_dx[(p * t.h + u) * t.w + v] = acc;
        }
      }
    }
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      ThreadPool pool(threads, false);
      std::vector<float> y(want_y.size(), 7.0f), dx(x.size(), 7.0f), dw(w.size(), 7.0f), dx2(x.size(), 7.0f),
          dw2(w.size(), 7.0f);
      DepthwiseForward<float>(x.data(), w.data(), b.data(), y.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackwardData<float>(dy.data(), w.data(), dx.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackwardWeights<float>(dy.data(), x.data(), dw.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), dx2.data(), dw2.data(), t.n, t.c, in, out, geo, &pool);
      EXPECT_EQ(FirstDifference(y, want_y), -1) << "Y differs";
      EXPECT_EQ(FirstDifference(dx, want_dx), -1) << "dX differs";
      EXPECT_EQ(FirstDifference(dx2, want_dx), -1) << "one-pass dX differs";
      EXPECT_EQ(FirstDifference(dw2, dw), -1) << "one-pass dW differs";
      for (size_t k = 0; k < w.size(); ++k) EXPECT_NEAR(dw[k], want_dw[k], 1e-6 * mag_dw[k] + 1e-30) << "dW " << k;
    }
  }
}

// The phase planes live in per-thread buffers that other calls used before: a plane whose dY rows are
// copied into a wider buffer must not pick up what was left there (NaN from an earlier forward pass over
// NaN here), even in the entries that only masked, zero, lanes of x meet.
TEST(ConvGradPathsTest, StrideTwoDepthwiseIgnoresWhatItsBuffersHeld) {
  ThreadPool pool(1, false);
  WindowAttrs geo;
  geo.kernel = {3, 3};
  geo.strides = {2, 2};
  geo.dilations = {1, 1};
  geo.pads = {1, 1, 1, 1};
  const int64_t big_in[2] = {64, 64}, big_out[2] = {32, 32};
  std::vector<float> nan_x(64 * 64, std::numeric_limits<float>::quiet_NaN()), w9(9, 0.5f), big_y(32 * 32);
  DepthwiseForward<float>(nan_x.data(), w9.data(), nullptr, big_y.data(), 1, 1, big_in, big_out, geo, &pool);
  // No pads: 16x16 gives a 7x7 output, phase planes of 8x8.
  geo.pads = {0, 0, 0, 0};
  const int64_t in[2] = {16, 16}, out[2] = {7, 7};
  const std::vector<float> x = Uniform(16 * 16, 11), dy = Uniform(7 * 7, 12);
  std::vector<float> dw(9), dw2(9), dx(16 * 16);
  DepthwiseBackwardWeights<float>(dy.data(), x.data(), dw.data(), 1, 1, in, out, geo, &pool);
  DepthwiseForward<float>(nan_x.data(), w9.data(), nullptr, big_y.data(), 1, 1, big_in, big_out, geo, &pool);
  DepthwiseBackward<float>(dy.data(), x.data(), w9.data(), dx.data(), dw2.data(), 1, 1, in, out, geo, &pool);
  for (int64_t k = 0; k < 9; ++k) {
    double want = 0;
    for (int64_t r = 0; r < 7; ++r) {
      for (int64_t o = 0; o < 7; ++o) want += static_cast<double>(dy[r * 7 + o]) * x[(2 * r + k / 3) * 16 + 2 * o + k % 3];
    }
    EXPECT_NEAR(dw[k], want, 1e-5) << "tap " << k;
    EXPECT_NEAR(dw2[k], want, 1e-5) << "tap " << k << ", one pass";
  }
}

// dW of 1x1 convolutions without pads: an odd batch (halves of 5 and 4 images), one below 8 (no split), two
// groups, float64, planes for the register tiles (PointwiseWeightGrad), at stride 1 and at strides (2, 2) (a ResNet's shortcut; odd sizes, so the last row
// and column are never read), (3, 2) and (1, 2); against sums in double, and bit for bit across thread
// counts.
// ConvGrad's dW of (dy, x, w), float32 or float64 (the values given as floats), with the node's window
// attributes `attrs`, run twice by one executor at 1 and then at 2 threads: the two results, as doubles.
struct WeightGradCase {
  DType dtype;
  std::vector<float> dy, x, w;
  Shape ys, xs, ws;
};
std::vector<std::vector<double>> WeightGradAtOneAndTwoThreads(const WeightGradCase& t,
                                                              const std::vector<onnx::AttributeProto>& attrs) {
  auto tensor = [&](const std::vector<float>& v, const Shape& s) {
    if (t.dtype == DType::kFloat32) return Tensor::FromVector(v, s);
    return Tensor::FromVector(std::vector<double>(v.begin(), v.end()), s);
  };
  Model md;
  md.opset_imports[""] = 17;
  md.opset_imports["com.microsoft"] = 1;
  md.graph.inputs = {TensorInfo("dy", t.dtype, t.ys), TensorInfo("x", t.dtype, t.xs), TensorInfo("w", t.dtype, t.ws)};
  md.graph.outputs = {TensorInfo("dw", t.dtype, t.ws)};
  md.graph.nodes.push_back(MakeNode("ConvGrad", {"dy", "x", "w"}, {"", "dw"}, attrs, "grad", "com.microsoft"));
  std::vector<std::vector<double>> got;
  for (int threads : {1, 2}) {
    auto cpu = CpuExecutionProvider::Create({threads}).value();
    auto ex = Executor::Create(md, cpu.get()).value();
    std::vector<Tensor> out;
    for (int run = 0; run < 2; ++run) {
      Status st = ex->Run({{"dy", tensor(t.dy, t.ys)}, {"x", tensor(t.x, t.xs)}, {"w", tensor(t.w, t.ws)}}, {"dw"}, &out);
      EXPECT_TRUE(st.ok()) << st.ToString();
      if (!st.ok()) return {};
    }
    std::vector<double> v(out[0].NumElements());
    for (size_t e = 0; e < v.size(); ++e) {
      v[e] = t.dtype == DType::kFloat32 ? out[0].data<float>()[e] : out[0].data<double>()[e];
    }
    got.push_back(v);
  }
  return got;
}

TEST(ConvGradPathsTest, PointwiseWeightGradient) {
  struct Case {
    int64_t n, c, h, w, m, group;
    DType dtype;
    int64_t sh = 1, sw = 1;
  };
  const Case cases[] = {{9, 16, 5, 7, 24, 1, DType::kFloat32},       {5, 8, 4, 4, 12, 1, DType::kFloat32},
                        {8, 12, 6, 6, 20, 2, DType::kFloat32},       {9, 6, 3, 5, 10, 1, DType::kFloat64},
                        {9, 16, 9, 11, 32, 1, DType::kFloat32, 2, 2}, {4, 8, 8, 8, 16, 1, DType::kFloat32, 2, 2},
                        {8, 12, 7, 9, 20, 2, DType::kFloat32, 3, 2}, {9, 6, 5, 8, 10, 1, DType::kFloat64, 2, 2},
                        {10, 8, 4, 9, 8, 1, DType::kFloat32, 1, 2},  {16, 32, 16, 16, 64, 1, DType::kFloat32, 2, 2},
                        // The register tiles of 4 x 6 channels and their last 2 or 4 input channels (AVX-512,
                        // planes of whole vectors from 64): the input channels outer (x the larger; 32 input
                        // channels end in a tile of 2), the output channels outer (16 end in one of 4), two
                        // groups (8 each: 6 + 2).
                        {3, 32, 16, 16, 8, 1, DType::kFloat32},      {5, 16, 8, 8, 24, 1, DType::kFloat32},
                        {4, 16, 8, 8, 16, 2, DType::kFloat32}};
  for (const Case& t : cases) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " m " + std::to_string(t.m) + " group " +
                 std::to_string(t.group) + " strides " + std::to_string(t.sh) + "," + std::to_string(t.sw));
    const int64_t cg = t.c / t.group, mg = t.m / t.group, oh = (t.h - 1) / t.sh + 1, ow = (t.w - 1) / t.sw + 1;
    const int64_t o = oh * ow, isize = t.h * t.w;
    const Shape xs = {t.n, t.c, t.h, t.w}, ws = {t.m, cg, 1, 1}, ys = {t.n, t.m, oh, ow};
    const std::vector<float> x = Uniform(t.n * t.c * isize, 4), w = Uniform(t.m * cg, 5), dy = Uniform(t.n * t.m * o, 6);
    const std::vector<std::vector<double>> got = WeightGradAtOneAndTwoThreads(
        {t.dtype, dy, x, w, ys, xs, ws},
        {AttrInts("kernel_shape", {1, 1}), AttrInt("group", t.group), AttrInts("strides", {t.sh, t.sw})});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], got[1]) << "1 and 2 threads differ";
    for (int64_t r = 0; r < t.m; ++r) {
      const int64_t g = r / mg;
      for (int64_t q = 0; q < cg; ++q) {
        double want = 0, mag = 0;
        for (int64_t i = 0; i < t.n; ++i) {
          for (int64_t p = 0; p < o; ++p) {
            const int64_t at = (p / ow) * t.sh * t.w + (p % ow) * t.sw;  // the input position output p reads
            const double term = static_cast<double>(dy[(i * t.m + r) * o + p]) * x[(i * t.c + g * cg + q) * isize + at];
            want += term;
            mag += std::fabs(term);
          }
        }
        EXPECT_NEAR(got[0][r * cg + q], want, (t.dtype == DType::kFloat32 ? 1e-6 : 1e-14) * mag) << r << "," << q;
      }
    }
  }
}

// The weight gradient of 3x3 windows over chunks of images (partials added in chunk order; chunk sizes
// from the shapes alone, an even count of nearly equal chunks): the benchmark CNN's second layer (64 images
// of 32 channels at 13x13 -> 64, which went in 13 chunks of 5 and now in 16 of 4), 32 images of 64
// channels at 8x8 with pads (chunks of 5 -> 8 of 4), and float64, against sums in double, with the same bits
// at 1 and 2 threads.
TEST(ConvGradPathsTest, ThreeByThreeWeightGradientInChunks) {
  struct Case {
    int64_t n, c, h, m, pad;
    DType dtype;
  };
  for (const Case& t : {Case{64, 32, 13, 64, 0, DType::kFloat32}, Case{32, 64, 8, 64, 1, DType::kFloat32},
                        Case{12, 8, 7, 16, 1, DType::kFloat64}}) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " h " + std::to_string(t.h));
    const int64_t oh = t.h + 2 * t.pad - 2, o = oh * oh, isize = t.h * t.h;
    const Shape xs = {t.n, t.c, t.h, t.h}, ws = {t.m, t.c, 3, 3}, ys = {t.n, t.m, oh, oh};
    const std::vector<float> x = Uniform(t.n * t.c * isize, 7), w = Uniform(t.m * t.c * 9, 8),
                             dy = Uniform(t.n * t.m * o, 9);
    const std::vector<std::vector<double>> got = WeightGradAtOneAndTwoThreads(
        {t.dtype, dy, x, w, ys, xs, ws}, {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {t.pad, t.pad, t.pad, t.pad})});
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], got[1]) << "1 and 2 threads differ";
    for (int64_t r = 0; r < t.m; ++r) {
      for (int64_t q = 0; q < t.c * 9; ++q) {
        const int64_t ci = q / 9, ky = q % 9 / 3, kx = q % 3;
        double want = 0, mag = 0;
        for (int64_t i = 0; i < t.n; ++i) {
          for (int64_t p = 0; p < o; ++p) {
            const int64_t iy = p / oh + ky - t.pad, ix = p % oh + kx - t.pad;
            if (iy < 0 || ix < 0 || iy >= t.h || ix >= t.h) continue;
            const double term = static_cast<double>(dy[(i * t.m + r) * o + p]) * x[(i * t.c + ci) * isize + iy * t.h + ix];
            want += term;
            mag += std::fabs(term);
          }
        }
        ASSERT_NEAR(got[0][r * t.c * 9 + q], want, (t.dtype == DType::kFloat32 ? 1e-6 : 1e-14) * mag) << r << "," << q;
      }
    }
  }
}

// ConvGrad's dB per image where the direct weight gradient runs: DirectWeightGrad3x3::ChannelSums against
// its order written out (even positions and odd ones, each in order from zero in double, then added), bit
// for bit, on channel counts that fill one, two, three and four vectors and past one block of 64, and an
// odd number of positions.
TEST(CpuKernelsTest, DirectWeightGradChannelSumsFollowTheirOrder) {
  if (!DirectConv2D::Available()) GTEST_SKIP() << "no AVX-512F on this CPU: ConvGrad sums dB by rows";
  for (int64_t cout : {5, 16, 24, 48, 64, 70, 130}) {
    WindowAttrs a;
    a.kernel = {3, 3};
    a.strides = {1, 1};
    a.dilations = {1, 1};
    a.pads = {0, 0, 0, 0};
    const Shape in = {9, 7}, out = {7, 5};  // 35 positions
    const DirectWeightGrad3x3 k(in, out, a, 2, cout);
    const int64_t positions = 35, cp = k.cout_padded();
    std::vector<float> dyt(positions * cp);
    // Full 24-bit significands over exponents 60 apart, so that the double sums round and their order shows.
    for (size_t e = 0; e < dyt.size(); ++e) {
      const float sig = 1.0f + static_cast<float>((e * 2654435761u) % 8388608u) / 8388608.0f;
      dyt[e] = std::ldexp(e % 3 ? sig : -sig, static_cast<int>((e * 37) % 61) - 30);
    }
    std::vector<double> got(cout, -1.0);
    k.ChannelSums(dyt.data(), got.data());
    for (int64_t o = 0; o < cout; ++o) {
      double even = 0, odd = 0;
      for (int64_t p = 0; p < positions; ++p) (p % 2 ? odd : even) += static_cast<double>(dyt[p * cp + o]);
      const double want = even + odd;
      EXPECT_EQ(std::memcmp(&got[o], &want, sizeof want), 0) << "cout " << cout << " channel " << o << ": " << got[o]
                                                             << " against " << want;
    }
  }
}

// MaxPoolReluConvGrad's dY made inside the weight gradient's tiles (TransposePooled, PooledChannelSums,
// RunPooledInPlace) against the same dY unpooled into memory first (UnpoolOutputGrad, ChannelSums,
// RunInPlace), bit for bit: every code (each window position, positive or not), a NaN, a -0 and an infinite
// dZ, an infinite x (whose products with the zeros of dY are NaN on both paths), dB's double sums with
// significands that make their order show, even and odd activations (rows and columns no window covers),
// one to three input channels, 32 and 64 output channels, chunks of one to three images.
TEST(CpuKernelsTest, DirectWeightGradWithPooledOutputGradInTiles) {
  if (!DirectConv2D::Available()) GTEST_SKIP() << "no AVX-512F on this CPU: the direct weight gradient is not built";
  struct Case {
    int64_t images, cin, h, w, cout;
  };
  for (const Case& t : {Case{1, 1, 28, 28, 32}, Case{3, 2, 17, 15, 32}, Case{2, 3, 12, 19, 64}, Case{2, 1, 8, 9, 64}}) {
    SCOPED_TRACE("images " + std::to_string(t.images) + " cin " + std::to_string(t.cin) + " " + std::to_string(t.h) +
                 "x" + std::to_string(t.w) + " cout " + std::to_string(t.cout));
    WindowAttrs a;
    a.kernel = {3, 3};
    a.strides = {1, 1};
    a.dilations = {1, 1};
    a.pads = {0, 0, 0, 0};
    const int64_t oh = t.h - 2, ow = t.w - 2, ph = oh / 2, pw = ow / 2, windows = ph * pw;
    const DirectWeightGrad3x3 k({t.h, t.w}, {oh, ow}, a, t.cin, t.cout);
    ASSERT_TRUE(k.pooled_in_place());
    const int64_t cp = k.cout_padded(), image_x = t.cin * t.h * t.w, slot = k.transposed_size();
    std::vector<float> x = Uniform(t.images * image_x, 21);
    x[t.w + 1] = std::numeric_limits<float>::infinity();
    x[t.h * t.w - 1] = std::numeric_limits<float>::infinity();  // read by the last position only
    std::vector<float> g(t.images * t.cout * windows);
    std::vector<uint8_t> codes(g.size());
    for (size_t e = 0; e < g.size(); ++e) {
      const float sig = 1.0f + static_cast<float>((e * 2654435761u) % 8388608u) / 8388608.0f;
      g[e] = std::ldexp(e % 3 ? sig : -sig, static_cast<int>((e * 37) % 41) - 20);
      codes[e] = static_cast<uint8_t>((e * 7 + e / 5) % 8);
    }
    g[1] = std::numeric_limits<float>::quiet_NaN();
    g[2] = -0.0f;
    g[3] = -std::numeric_limits<float>::infinity();
    codes[1] = codes[2] = codes[3] = kWindowCodePositive;
    std::vector<float> dense(t.images * slot), work(k.unpool_work_size(ph, pw)), pooled(t.images * slot);
    std::vector<double> want_sums(t.images * t.cout), got_sums(t.images * t.cout, -1.0);
    for (int64_t i = 0; i < t.images; ++i) {
      const float* gi = g.data() + i * t.cout * windows;
      const uint8_t* ci = codes.data() + i * t.cout * windows;
      k.UnpoolOutputGrad(gi, ci, ph, pw, work.data(), dense.data() + i * slot);
      k.ChannelSums(dense.data() + i * slot, want_sums.data() + i * t.cout);
      k.TransposePooled(gi, ci, ph, pw, pooled.data() + i * slot);
      k.PooledChannelSums(pooled.data() + i * slot, ph, pw, got_sums.data() + i * t.cout);
    }
    EXPECT_EQ(std::memcmp(got_sums.data(), want_sums.data(), want_sums.size() * sizeof(double)), 0) << "dB's sums";
    std::vector<float> want(t.cin * 9 * cp), got(t.cin * 9 * cp, -1.0f);
    k.RunInPlace(x.data(), image_x, dense.data(), t.images, want.data());
    k.RunPooledInPlace(x.data(), image_x, pooled.data(), ph, pw, t.images, got.data());
    int64_t nans = 0;
    for (size_t e = 0; e < want.size(); ++e) {
      nans += std::isnan(want[e]);
      ASSERT_EQ(std::memcmp(&got[e], &want[e], sizeof(float)), 0) << "dW^T element " << e << ": " << got[e]
                                                                  << " against " << want[e];
    }
    EXPECT_GT(nans, 0) << "the infinite x made no NaN: the test lost its zero products";
  }
}

// Runs md's one float32 output at 1 and 2 threads (ASSERTs inside: check HasFatalFailure after).
void RunAtOneAndTwoThreads(const Model& md, const NamedTensors& feeds, const std::string& output,
                           std::vector<std::vector<float>>* got) {
  for (int threads : {1, 2}) {
    auto cpu = CpuExecutionProvider::Create({threads}).value();
    auto ex = Executor::Create(md, cpu.get());
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    std::vector<Tensor> out;
    Status st = ex.value()->Run(ToNamedValues(feeds), {output}, &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    got->emplace_back(out[0].data<float>(), out[0].data<float>() + out[0].NumElements());
  }
}

// 1x1 convolutions at stride 1 over the batch (PointwiseConv, where the CPU has AVX-512F): Conv and
// FusedConv (Relu) with and without a bias, on 4x4, 8x8 and 16x16 planes (one image's 16 positions, several
// images in one tile of 6 vectors, the last tile narrower), output channel counts that leave 1, 2 and 3
// rows past the tiles of 4, against sums in double, and with the same bits at 1 and 2 threads; ConvGrad's
// input gradient (W transposed) likewise; and the kernel itself against its order written out (k in order
// by FMAs from zero, then the bias, then Relu).
TEST(ConvGradPathsTest, PointwiseConvOverTheBatch) {
  struct Case {
    int64_t n, c, h, m;
    bool bias, relu;
  };
  const Case cases[] = {{5, 64, 4, 7, true, false}, {3, 96, 8, 6, false, true}, {2, 128, 16, 5, true, true},
                        {7, 70, 4, 12, false, false}, {1, 64, 4, 3, true, false}};
  for (const Case& t : cases) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " plane " + std::to_string(t.h) +
                 " m " + std::to_string(t.m));
    const int64_t hw = t.h * t.h;
    const Shape xs = {t.n, t.c, t.h, t.h}, ws = {t.m, t.c, 1, 1}, ys = {t.n, t.m, t.h, t.h};
    const std::vector<float> x = Uniform(t.n * t.c * hw, 11), w = Uniform(t.m * t.c, 12), bias = Uniform(t.m, 13);
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, xs), TensorInfo("w", DType::kFloat32, ws)};
    std::vector<std::string> ins = {"x", "w"};
    if (t.bias) {
      md.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, {t.m}));
      ins.push_back("b");
    }
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {1, 1})};
    if (t.relu) attrs.push_back(AttrString("activation", "Relu"));
    md.graph.nodes.push_back(MakeNode(t.relu ? "FusedConv" : "Conv", ins, {"y"}, attrs, "conv", t.relu ? "com.microsoft" : ""));
    NamedTensors feeds = {{"x", Tensor::FromVector(x, xs)}, {"w", Tensor::FromVector(w, ws)}};
    if (t.bias) feeds.push_back({"b", Tensor::FromVector(bias, {t.m})});
    std::vector<std::vector<float>> got;
    RunAtOneAndTwoThreads(md, feeds, "y", &got);
    if (HasFatalFailure()) return;
    EXPECT_EQ(FirstDifference(got[0], got[1]), -1) << "1 and 2 threads differ";
    for (int64_t i = 0; i < t.n; ++i) {
      for (int64_t r = 0; r < t.m; ++r) {
        for (int64_t p = 0; p < hw; ++p) {
          double want = t.bias ? bias[r] : 0.0, mag = std::fabs(want);
          for (int64_t k = 0; k < t.c; ++k) {
            const double term = static_cast<double>(w[r * t.c + k]) * x[(i * t.c + k) * hw + p];
            want += term;
            mag += std::fabs(term);
          }
          if (t.relu) want = std::max(want, 0.0);
          EXPECT_NEAR(got[0][(i * t.m + r) * hw + p], want, 1e-6 * mag) << i << "," << r << "," << p;
        }
      }
    }
  }
  // ConvGrad's input gradient on the same planes (W read transposed).
  for (const Case& t : cases) {
    SCOPED_TRACE("dX: n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " plane " + std::to_string(t.h) +
                 " m " + std::to_string(t.m));
    const int64_t hw = t.h * t.h;
    const Shape xs = {t.n, t.c, t.h, t.h}, ws = {t.m, t.c, 1, 1}, ys = {t.n, t.m, t.h, t.h};
    const std::vector<float> x = Uniform(t.n * t.c * hw, 14), w = Uniform(t.m * t.c, 15), dy = Uniform(t.n * t.m * hw, 16);
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("dy", DType::kFloat32, ys), TensorInfo("x", DType::kFloat32, xs),
                       TensorInfo("w", DType::kFloat32, ws)};
    md.graph.outputs = {TensorInfo("dx", DType::kFloat32, xs)};
    md.graph.nodes.push_back(MakeNode("ConvGrad", {"dy", "x", "w"}, {"dx"}, {AttrInts("kernel_shape", {1, 1})}, "grad",
                                      "com.microsoft"));
    std::vector<std::vector<float>> got;
    RunAtOneAndTwoThreads(md, {{"dy", Tensor::FromVector(dy, ys)}, {"x", Tensor::FromVector(x, xs)},
                               {"w", Tensor::FromVector(w, ws)}}, "dx", &got);
    if (HasFatalFailure()) return;
    EXPECT_EQ(FirstDifference(got[0], got[1]), -1) << "1 and 2 threads differ";
    for (int64_t i = 0; i < t.n; ++i) {
      for (int64_t ci = 0; ci < t.c; ++ci) {
        for (int64_t p = 0; p < hw; ++p) {
          double want = 0, mag = 0;
          for (int64_t co = 0; co < t.m; ++co) {
            const double term = static_cast<double>(w[co * t.c + ci]) * dy[(i * t.m + co) * hw + p];
            want += term;
            mag += std::fabs(term);
          }
          EXPECT_NEAR(got[0][(i * t.c + ci) * hw + p], want, 1e-6 * mag + 1e-30) << i << "," << ci << "," << p;
        }
      }
    }
  }
  if (!DirectConv2D::Available()) GTEST_SKIP() << "no AVX-512F on this CPU: 1x1 convolutions keep their GEMMs";
  // The kernel's order, bit for bit: 3 images of 16 positions (3 vectors: one tile), 5 rows, 9 k; W read
  // transposed (wr 1, wk 5) as ConvGrad's input gradient reads it.
  const int64_t n = 3, hw = 16, rows = 5, kc = 9;
  const std::vector<float> x = Uniform(n * kc * hw, 21), w = Uniform(rows * kc, 22), bias = Uniform(rows, 23);
  for (bool transposed : {false, true}) {
    std::vector<float> y(n * rows * hw, 99.0f), want(n * rows * hw);
    const int64_t wr = transposed ? 1 : kc, wk = transposed ? rows : 1;
    PointwiseConv(x.data(), kc * hw, w.data(), wr, wk, bias.data(), true, y.data(), rows * hw, hw, rows, kc, 0, n);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t p = 0; p < hw; ++p) {
          float acc = 0.0f;
          for (int64_t k = 0; k < kc; ++k) acc = std::fma(w[r * wr + k * wk], x[(i * kc + k) * hw + p], acc);
          acc += bias[r];
          want[(i * rows + r) * hw + p] = acc > 0.0f ? acc : 0.0f;
        }
      }
    }
    EXPECT_EQ(FirstDifference(y, want), -1) << (transposed ? "W transposed" : "W as it is");
  }
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
