// ConvGrad's shortcuts for MobileNet's layers:
// - the depthwise kernels' one-pass backward (DepthwiseBackward: dX and dW together where the AVX-512 vector
//   kernels run) gives the bits of the separate dX and dW passes, at 1 and 2 threads (those are checked
//   against the definition in cpu_kernels_test.cc, ConvFloat32MatchesDefinition);
// - the weight gradient of 1x1 windows without pads (one GEMM per image, the batch's halves in parallel;
//   at strides above 1, a ResNet's downsampling shortcut, over the image's gathered samples) matches the
//   definition, with the same bits at 1 and 2 threads.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/cpu/kernels/depthwise.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {
namespace {

std::vector<float> Uniform(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& f : v) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return v;
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

// dW of 1x1 convolutions without pads: an odd batch (halves of 5 and 4 images), one below 8 (no split), two
// groups, and float64, at stride 1 and at strides (2, 2) (a ResNet's shortcut; odd sizes, so the last row
// and column are never read), (3, 2) and (1, 2); against sums in double, and bit for bit across thread
// counts.
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
                        {10, 8, 4, 9, 8, 1, DType::kFloat32, 1, 2},  {16, 32, 16, 16, 64, 1, DType::kFloat32, 2, 2}};
  for (const Case& t : cases) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " m " + std::to_string(t.m) + " group " +
                 std::to_string(t.group) + " strides " + std::to_string(t.sh) + "," + std::to_string(t.sw));
    const int64_t cg = t.c / t.group, mg = t.m / t.group, oh = (t.h - 1) / t.sh + 1, ow = (t.w - 1) / t.sw + 1;
    const int64_t o = oh * ow, isize = t.h * t.w;
    const Shape xs = {t.n, t.c, t.h, t.w}, ws = {t.m, cg, 1, 1}, ys = {t.n, t.m, oh, ow};
    const std::vector<float> x = Uniform(t.n * t.c * isize, 4), w = Uniform(t.m * cg, 5), dy = Uniform(t.n * t.m * o, 6);
    auto tensor = [&](const std::vector<float>& v, const Shape& s) {
      if (t.dtype == DType::kFloat32) return Tensor::FromVector(v, s);
      return Tensor::FromVector(std::vector<double>(v.begin(), v.end()), s);
    };
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("dy", t.dtype, ys), TensorInfo("x", t.dtype, xs), TensorInfo("w", t.dtype, ws)};
    md.graph.outputs = {TensorInfo("dw", t.dtype, ws)};
    md.graph.nodes.push_back(MakeNode("ConvGrad", {"dy", "x", "w"}, {"", "dw"},
                                      {AttrInts("kernel_shape", {1, 1}), AttrInt("group", t.group),
                                       AttrInts("strides", {t.sh, t.sw})},
                                      "grad", "com.microsoft"));
    std::vector<std::vector<double>> got;
    for (int threads : {1, 2}) {
      auto cpu = CpuExecutionProvider::Create({threads}).value();
      auto ex = Executor::Create(md, cpu.get()).value();
      std::vector<Tensor> out;
      for (int run = 0; run < 2; ++run) {
        Status st = ex->Run({{"dy", tensor(dy, ys)}, {"x", tensor(x, xs)}, {"w", tensor(w, ws)}}, {"dw"}, &out);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
      std::vector<double> v(out[0].NumElements());
      for (size_t e = 0; e < v.size(); ++e) {
        v[e] = t.dtype == DType::kFloat32 ? out[0].data<float>()[e] : out[0].data<double>()[e];
      }
      got.push_back(v);
    }
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

}  // namespace
}  // namespace cpu
}  // namespace ontrain
