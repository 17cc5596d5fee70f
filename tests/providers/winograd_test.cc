// Winograd's F(2x2, 3x3) convolution (providers/cpu/kernels/winograd.h):
// - Winograd3x3::Run against the definition summed in double, within a bound on its rounding, on output
//   sizes odd and even, rows of one, two and three 16-tile segments, asymmetric pads, channel counts that do
//   not fill a register tile, blocks of images left partial, with and without a bias;
// - Winograd3x3::InputGrad (ConvGrad's dX by the adjoint transforms) against the definition on the same
//   shapes and on rows of exactly one and two whole segments (the last tile's columns past the segment);
// - each image's outputs have the same bits whatever the images beside it (alone or in a block), and Conv
//   and ConvGrad's dX through it the same bits at 1 and 2 threads;
// - a NaN input makes exactly the outputs whose windows read it NaN, as the direct sums do;
// - where Conv and ConvGrad take it: pads of at most 1, at least 8 channels each side, one image's
//   transforms within 1 MB.
#include "providers/cpu/kernels/winograd.h"

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

namespace ontrain {
namespace cpu {
namespace {

using kernel_test::Uniform;

struct Geometry {
  int64_t n, cin, cout, h, w;
  std::vector<int64_t> pads;  // top, left, bottom, right
};

PaddedRows RowsOf(const Geometry& g) {
  WindowAttrs a;
  a.kernel = {3, 3};
  a.strides = {1, 1};
  a.dilations = {1, 1};
  a.pads = g.pads;
  const Shape in = {g.h, g.w};
  return PaddedRows(in, a.OutputDims(in).value(), a);
}

std::string Name(const Geometry& g) {
  return "x [" + std::to_string(g.n) + "," + std::to_string(g.cin) + "," + std::to_string(g.h) + "," +
         std::to_string(g.w) + "] -> " + std::to_string(g.cout) + " pads " + std::to_string(g.pads[0]) +
         std::to_string(g.pads[1]) + std::to_string(g.pads[2]) + std::to_string(g.pads[3]);
}

// Runs the kernel on images [first, first + count) of x.
std::vector<float> RunKernel(const Winograd3x3& k, const Geometry& g, const PaddedRows& pr, const std::vector<float>& x,
                             const std::vector<float>& w, const float* bias, int64_t first, int64_t count) {
  std::vector<float> packed(k.packed_size()), work(k.work_size());
  k.PackWeights(w.data(), g.cin * 9, 9, false, packed.data());
  std::vector<float> y(count * g.cout * pr.oh * pr.ow, -7.0f);
  k.Run(x.data() + first * g.cin * g.h * g.w, count, packed.data(), bias, y.data(), work.data());
  return y;
}

TEST(WinogradTest, MatchesTheDefinition) {
  if (!Winograd3x3::Available()) GTEST_SKIP() << "no AVX-512 on this CPU: convolutions run on GEMMs";
  const Geometry cases[] = {
      {5, 32, 64, 13, 13, {0, 0, 0, 0}},  // the benchmark CNN's second layer: 11x11, blocks of 4 images
      {3, 8, 8, 7, 7, {1, 1, 1, 1}},      // odd planes: the last row's stores stay in the plane
      {2, 16, 16, 32, 32, {1, 1, 1, 1}},  // the ResNet's first stage: rows of one whole segment
      {2, 8, 13, 20, 40, {1, 1, 1, 1}},   // two segments per row, 13 output channels (a partial tile)
      {3, 9, 10, 5, 6, {1, 0, 0, 1}},     // asymmetric pads
      {4, 8, 8, 3, 3, {0, 0, 0, 0}},      // one output per image
      {1, 8, 17, 4, 70, {0, 1, 1, 1}},    // three segments per row
  };
  for (const Geometry& g : cases) {
    SCOPED_TRACE(Name(g));
    const PaddedRows pr = RowsOf(g);
    ASSERT_TRUE(Winograd3x3::Applies(pr, g.cin, g.cout));
    const Winograd3x3 k(pr, g.cin, g.cout);
    const std::vector<float> x = Uniform(g.n * g.cin * g.h * g.w, 3), w = Uniform(g.cout * g.cin * 9, 4),
                             b = Uniform(g.cout, 5);
    for (bool with_bias : {true, false}) {
      const std::vector<float> y = RunKernel(k, g, pr, x, w, with_bias ? b.data() : nullptr, 0, g.n);
      for (int64_t i = 0; i < g.n; ++i) {
        for (int64_t o = 0; o < g.cout; ++o) {
          for (int64_t p = 0; p < pr.oh; ++p) {
            for (int64_t q = 0; q < pr.ow; ++q) {
              double want = with_bias ? b[o] : 0.0, mag = std::fabs(want);
              for (int64_t c = 0; c < g.cin; ++c) {
                for (int64_t a = 0; a < 3; ++a) {
                  for (int64_t e = 0; e < 3; ++e) {
                    const int64_t r = p - g.pads[0] + a, s = q - g.pads[1] + e;
                    if (r < 0 || r >= g.h || s < 0 || s >= g.w) continue;
                    const double term = static_cast<double>(w[(o * g.cin + c) * 9 + a * 3 + e]) *
                                        x[((i * g.cin + c) * g.h + r) * g.w + s];
                    want += term;
                    mag += std::fabs(term);
                  }
                }
              }
              // The transforms add up to 4 inputs and 9 weights before each product, and the outputs sum 9
              // products: a few units of rounding on the terms' magnitude (measured: at most 1.5e-7).
              const float got = y[((i * g.cout + o) * pr.oh + p) * pr.ow + q];
              ASSERT_NEAR(got, want, 1e-6 * mag) << "image " << i << " channel " << o << " at " << p << "," << q;
            }
          }
        }
      }
    }
  }
}

TEST(WinogradTest, InputGradientMatchesTheDefinition) {
  if (!Winograd3x3::Available()) GTEST_SKIP() << "no AVX-512 on this CPU: convolutions run on GEMMs";
  const Geometry cases[] = {
      {5, 32, 64, 13, 13, {0, 0, 0, 0}}, {3, 8, 8, 7, 7, {1, 1, 1, 1}},  {2, 16, 16, 32, 32, {1, 1, 1, 1}},
      {2, 8, 13, 20, 40, {1, 1, 1, 1}},  {3, 9, 10, 5, 6, {1, 0, 0, 1}}, {4, 8, 8, 3, 3, {0, 0, 0, 0}},
      {1, 8, 17, 4, 70, {0, 1, 1, 1}},   {1, 8, 8, 4, 64, {1, 1, 1, 1}}, {2, 12, 9, 6, 34, {0, 0, 0, 0}},
      {3, 8, 9, 9, 9, {1, 1, 1, 1}},  // 5 rows of 5 tiles: dY's rows in pairs, the last pair half empty
  };
  for (const Geometry& g : cases) {
    SCOPED_TRACE(Name(g));
    const PaddedRows pr = RowsOf(g);
    ASSERT_TRUE(Winograd3x3::Applies(pr, g.cin, g.cout));
    const Winograd3x3 k = Winograd3x3::InputGrad(pr, g.cin, g.cout);
    const int64_t osize = pr.oh * pr.ow, isize = g.h * g.w;
    const std::vector<float> dy = Uniform(g.n * g.cout * osize, 16), w = Uniform(g.cout * g.cin * 9, 17);
    std::vector<float> packed(k.packed_size()), work(k.work_size()), dx(g.n * g.cin * isize, -7.0f);
    k.PackWeights(w.data(), 9, g.cin * 9, false, packed.data());
    k.Run(dy.data(), g.n, packed.data(), nullptr, dx.data(), work.data());
    std::vector<double> want(dx.size(), 0.0), mag(dx.size(), 0.0);
    for (int64_t i = 0; i < g.n; ++i) {
      for (int64_t o = 0; o < g.cout; ++o) {
        for (int64_t p = 0; p < pr.oh; ++p) {
          for (int64_t q = 0; q < pr.ow; ++q) {
            for (int64_t c = 0; c < g.cin; ++c) {
              for (int64_t a = 0; a < 3; ++a) {
                for (int64_t e = 0; e < 3; ++e) {
                  const int64_t r = p - g.pads[0] + a, s = q - g.pads[1] + e;
                  if (r < 0 || r >= g.h || s < 0 || s >= g.w) continue;
                  const double term = static_cast<double>(dy[((i * g.cout + o) * pr.oh + p) * pr.ow + q]) *
                                      w[(o * g.cin + c) * 9 + a * 3 + e];
                  want[(i * g.cin + c) * isize + r * g.w + s] += term;
                  mag[(i * g.cin + c) * isize + r * g.w + s] += std::fabs(term);
                }
              }
            }
          }
        }
      }
    }
    for (size_t e = 0; e < dx.size(); ++e) {
      // The tiles' values summed where their blocks overlap (measured: at most 2.5e-7 of the magnitude).
      ASSERT_NEAR(dx[e], want[e], 1e-6 * mag[e]) << "at " << e;
    }
  }
}

TEST(WinogradTest, AnImageGetsTheSameBitsAloneOrInABlock) {
  if (!Winograd3x3::Available()) GTEST_SKIP() << "no AVX-512 on this CPU: convolutions run on GEMMs";
  const Geometry g = {7, 32, 24, 13, 13, {0, 0, 0, 0}};
  const PaddedRows pr = RowsOf(g);
  const Winograd3x3 k(pr, g.cin, g.cout);
  ASSERT_GT(k.block(), 1);
  const std::vector<float> x = Uniform(g.n * g.cin * g.h * g.w, 6), w = Uniform(g.cout * g.cin * 9, 7),
                           b = Uniform(g.cout, 8);
  const std::vector<float> all = RunKernel(k, g, pr, x, w, b.data(), 0, g.n);
  const int64_t image = g.cout * pr.oh * pr.ow;
  for (int64_t i = 0; i < g.n; ++i) {
    const std::vector<float> one = RunKernel(k, g, pr, x, w, b.data(), i, 1);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + i * image, image * sizeof(float)), 0) << "image " << i;
  }
}

TEST(WinogradTest, NaNReachesExactlyTheOutputsThatReadIt) {
  if (!Winograd3x3::Available()) GTEST_SKIP() << "no AVX-512 on this CPU: convolutions run on GEMMs";
  const Geometry g = {1, 8, 8, 9, 9, {1, 1, 1, 1}};
  const PaddedRows pr = RowsOf(g);
  const Winograd3x3 k(pr, g.cin, g.cout);
  for (const auto& at : std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {3, 4}, {4, 3}, {8, 8}, {5, 0}}) {
    std::vector<float> x = Uniform(g.cin * g.h * g.w, 9);
    x[(2 * g.h + at.first) * g.w + at.second] = std::numeric_limits<float>::quiet_NaN();  // channel 2
    const std::vector<float> y = RunKernel(k, g, pr, x, Uniform(g.cout * g.cin * 9, 10), nullptr, 0, 1);
    for (int64_t o = 0; o < g.cout; ++o) {
      for (int64_t p = 0; p < pr.oh; ++p) {
        for (int64_t q = 0; q < pr.ow; ++q) {
          const bool reads = std::abs(p - at.first) <= 1 && std::abs(q - at.second) <= 1;  // pads of 1
          EXPECT_EQ(std::isnan(y[(o * pr.oh + p) * pr.ow + q]), reads)
              << "NaN at " << at.first << "," << at.second << ": output " << o << " at " << p << "," << q;
        }
      }
    }
  }
}

TEST(WinogradTest, WhereItApplies) {
  if (!Winograd3x3::Available()) GTEST_SKIP() << "no AVX-512 on this CPU: convolutions run on GEMMs";
  struct Case {
    Geometry g;
    bool applies;
  };
  const Case cases[] = {
      {{1, 32, 64, 13, 13, {0, 0, 0, 0}}, true},   // the CNN's forward pass
      {{1, 64, 32, 11, 11, {2, 2, 2, 2}}, false},  // its dX: pads of 2
      {{1, 8, 8, 8, 8, {1, 1, 2, 1}}, false},
      {{1, 7, 64, 16, 16, {1, 1, 1, 1}}, false},   // too few input channels (a stem)
      {{1, 64, 4, 16, 16, {1, 1, 1, 1}}, false},   // too few output channels
      {{1, 64, 64, 8, 8, {1, 1, 1, 1}}, true},     // the ResNet's last stage
      {{1, 64, 64, 56, 56, {1, 1, 1, 1}}, false},  // 3.2 MB of transforms per image
  };
  for (const Case& t : cases) {
    EXPECT_EQ(Winograd3x3::Applies(RowsOf(t.g), t.g.cin, t.g.cout), t.applies) << Name(t.g);
  }
}

// Conv (forward) and ConvGrad (dX, by the transposed convolution with flipped weights) through the kernel
// give the same bits at 1 and 2 threads (ConvFloat32MatchesDefinition in cpu_kernels_test.cc and the tests
// above cover the values).
TEST(WinogradTest, ConvAndConvGradGiveTheSameBitsAtOneAndTwoThreads) {
  if (!Winograd3x3::Available()) GTEST_SKIP() << "no AVX-512 on this CPU: convolutions run on GEMMs";
  const int64_t n = 9, c = 16, m = 24, h = 10, wd = 10;
  for (int64_t pad : {1, 0}) {  // dX as the convolution of dY with the flipped weights, then by the adjoint
    SCOPED_TRACE("pads " + std::to_string(pad));
    const int64_t oh = h + 2 * pad - 2, ow = wd + 2 * pad - 2;
    const Shape xs = {n, c, h, wd}, ws = {m, c, 3, 3}, ys = {n, m, oh, ow};
    const std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {3, 3}),
                                                     AttrInts("pads", {pad, pad, pad, pad})};
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, xs), TensorInfo("w", DType::kFloat32, ws),
                       TensorInfo("dy", DType::kFloat32, ys)};
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys), TensorInfo("dx", DType::kFloat32, xs)};
    md.graph.nodes.push_back(MakeNode("Conv", {"x", "w"}, {"y"}, attrs, "conv"));
    md.graph.nodes.push_back(MakeNode("ConvGrad", {"dy", "x", "w"}, {"dx"}, attrs, "grad", "com.microsoft"));
    const Tensor x = Tensor::FromVector(Uniform(n * c * h * wd, 11), xs);
    const Tensor w = Tensor::FromVector(Uniform(m * c * 9, 12), ws),
                 dy = Tensor::FromVector(Uniform(n * m * oh * ow, 13), ys);
    std::vector<std::vector<Tensor>> got;
    for (int threads : {1, 2}) {
      auto cpu = CpuExecutionProvider::Create({threads}).value();
      auto ex = Executor::Create(md, cpu.get()).value();
      std::vector<Tensor> out;
      for (int run = 0; run < 2; ++run) {
        Status st = ex->Run({{"x", x}, {"w", w}, {"dy", dy}}, {"y", "dx"}, &out);
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
      got.push_back(out);
    }
    const char* names[] = {"Y", "dX"};
    for (int k = 0; k < 2; ++k) {
      ASSERT_EQ(got[0][k].NumElements(), got[1][k].NumElements());
      EXPECT_EQ(std::memcmp(got[0][k].raw_data(), got[1][k].raw_data(), got[0][k].NumElements() * sizeof(float)), 0)
          << names[k] << ": 1 and 2 threads differ";
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
