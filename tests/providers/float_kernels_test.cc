// The CPU kernels' float32 paths against their definitions and their float64 results: the normalizations
// in channel blocks, batched and tall products (B^T copied), and row sums taken several rows at a time, each
// to the bits of the plain loop where the path promises them, and the same at one and two threads.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/providers/kernel_test_util.h"

namespace ontrain {
namespace {

using kernel_test::AsDouble;
using kernel_test::AsFloat;
using kernel_test::Io;
using kernel_test::kMs;
using kernel_test::Random;
using kernel_test::RunNode;

// float32 batch normalization reads channels in blocks, image by image (about 512 KB of data per block):
// [4, 5, 128, 128] makes five blocks of one channel for the gradient and three for the forward pass. The
// results must be those of the float64 kernel on the same values (to float rounding) and the same bits
// with two threads as with one.
TEST(FloatKernelsTest, BatchNormFloat32InChannelBlocks) {
  const Shape shape = {4, 5, 128, 128};
  Tensor xf = AsFloat(Random(shape, 64, -2.0, 3.0)), dyf = AsFloat(Random(shape, 65));
  Tensor sf = AsFloat(Random({5}, 66, 0.5, 1.5)), bf = AsFloat(Random({5}, 67));
  Tensor mf = AsFloat(Random({5}, 68)), vf = AsFloat(Random({5}, 69, 0.5, 1.5));
  std::vector<onnx::AttributeProto> attrs = {AttrFloat("epsilon", 1e-3f)};
  auto forward = [&](const Tensor& x, const Tensor& s, const Tensor& b, const Tensor& m, const Tensor& v, int threads) {
    return RunNode("BatchNormInternal", kMs, {{"x", x}, {"s", s}, {"b", b}, {"m", m}, {"v", v}}, 5, attrs, 17, {},
                   threads);
  };
  auto grad = [&](const Tensor& dy, const Tensor& x, const Tensor& s, const Tensor& sm, const Tensor& si, int threads) {
    return RunNode("BatchNormalizationGrad", kMs, {{"dy", dy}, {"x", x}, {"s", s}, {"sm", sm}, {"si", si}}, 3, attrs,
                   17, {}, threads);
  };
  std::vector<Tensor> f1 = forward(xf, sf, bf, mf, vf, 1), f2 = forward(xf, sf, bf, mf, vf, 2);
  std::vector<Tensor> fd = forward(AsDouble(xf), AsDouble(sf), AsDouble(bf), AsDouble(mf), AsDouble(vf), 1);
  ASSERT_EQ(f1.size(), 5u);
  ASSERT_EQ(f2.size(), 5u);
  ASSERT_EQ(fd.size(), 5u);
  for (size_t k = 0; k < f1.size(); ++k) {
    SCOPED_TRACE("forward output " + std::to_string(k));
    ASSERT_EQ(f1[k].NumElements(), fd[k].NumElements());
    EXPECT_EQ(std::memcmp(f1[k].raw_data(), f2[k].raw_data(), f1[k].SizeInBytes()), 0) << "1 vs 2 threads";
    double worst = 0;
    for (int64_t i = 0; i < f1[k].NumElements(); ++i) {
      double want = fd[k].data<double>()[i];
      worst = std::max(worst, std::fabs(f1[k].data<float>()[i] - want) / std::max(1.0, std::fabs(want)));
    }
    EXPECT_LT(worst, 2e-6);
  }
  std::vector<Tensor> g1 = grad(dyf, xf, sf, f1[3], f1[4], 1), g2 = grad(dyf, xf, sf, f1[3], f1[4], 2);
  std::vector<Tensor> gd = grad(AsDouble(dyf), AsDouble(xf), AsDouble(sf), AsDouble(f1[3]), AsDouble(f1[4]), 1);
  ASSERT_EQ(g1.size(), 3u);
  ASSERT_EQ(g2.size(), 3u);
  ASSERT_EQ(gd.size(), 3u);
  for (size_t k = 0; k < g1.size(); ++k) {
    SCOPED_TRACE("gradient output " + std::to_string(k));
    EXPECT_EQ(std::memcmp(g1[k].raw_data(), g2[k].raw_data(), g1[k].SizeInBytes()), 0) << "1 vs 2 threads";
    double worst = 0, scale = 0;
    for (int64_t i = 0; i < g1[k].NumElements(); ++i) scale = std::max(scale, std::fabs(gd[k].data<double>()[i]));
    for (int64_t i = 0; i < g1[k].NumElements(); ++i) {
      worst = std::max(worst, std::fabs(g1[k].data<float>()[i] - gd[k].data<double>()[i]) / scale);
    }
    EXPECT_LT(worst, 1e-6);
  }
}

// Batched products run their batches in parallel, each on one thread: MatMul and FusedMatMul (transB, a
// broadcast batch dim) give the same bits at one and two threads, and the products a naive loop gives.
TEST(FloatKernelsTest, BatchedMatMulsInParallel) {
  Tensor a = AsFloat(Random({6, 4, 48, 32}, 90)), b = AsFloat(Random({6, 4, 32, 40}, 91));
  Tensor bt = AsFloat(Random({1, 4, 40, 32}, 92));  // FusedMatMul's B, transposed, broadcast over dim 0
  std::vector<onnx::AttributeProto> attrs = {AttrInt("transB", 1), AttrFloat("alpha", 0.5f)};
  std::vector<Tensor> m1 = RunNode("MatMul", "", {{"a", a}, {"b", b}}, 1, {}, 17, {}, 1);
  std::vector<Tensor> m2 = RunNode("MatMul", "", {{"a", a}, {"b", b}}, 1, {}, 17, {}, 2);
  std::vector<Tensor> f1 = RunNode("FusedMatMul", kMs, {{"a", a}, {"b", bt}}, 1, attrs, 17, {}, 1);
  std::vector<Tensor> f2 = RunNode("FusedMatMul", kMs, {{"a", a}, {"b", bt}}, 1, attrs, 17, {}, 2);
  ASSERT_EQ(m1.size(), 1u);
  ASSERT_EQ(m2.size(), 1u);
  ASSERT_EQ(f1.size(), 1u);
  ASSERT_EQ(f2.size(), 1u);
  ASSERT_EQ(m1[0].shape(), (Shape{6, 4, 48, 40}));
  ASSERT_EQ(f1[0].shape(), (Shape{6, 4, 48, 40}));
  EXPECT_EQ(std::memcmp(m1[0].raw_data(), m2[0].raw_data(), m1[0].SizeInBytes()), 0);
  EXPECT_EQ(std::memcmp(f1[0].raw_data(), f2[0].raw_data(), f1[0].SizeInBytes()), 0);
  const float *pa = a.data<float>(), *pb = b.data<float>(), *pt = bt.data<float>();
  double worst_m = 0, worst_f = 0;
  for (int64_t p = 0; p < 24; ++p) {
    for (int64_t i = 0; i < 48; ++i) {
      for (int64_t j = 0; j < 40; ++j) {
        double sm = 0, sf = 0;
        for (int64_t k = 0; k < 32; ++k) {
          sm += static_cast<double>(pa[(p * 48 + i) * 32 + k]) * pb[(p * 32 + k) * 40 + j];
          sf += static_cast<double>(pa[(p * 48 + i) * 32 + k]) * pt[((p % 4) * 40 + j) * 32 + k];
        }
        worst_m = std::max(worst_m, std::fabs(m1[0].data<float>()[(p * 48 + i) * 40 + j] - sm));
        worst_f = std::max(worst_f, std::fabs(f1[0].data<float>()[(p * 48 + i) * 40 + j] - 0.5 * sf));
      }
    }
  }
  EXPECT_LT(worst_m, 1e-5);
  EXPECT_LT(worst_f, 1e-5);
}

// Products X W^T of many rows (1024 here, a transformer's [16, 64] tokens) run from a copy of W^T
// (providers/cpu/kernels/gemm.cc): FusedMatMul with transB over a shared B, and Gemm with transB and a bias,
// give the products of a double loop, the same bits at one and two threads, and FusedMatMul the bits of
// MatMul(A, B^T) with the transpose materialized (the same untransposed product). Ragged [40, 33] weights
// take the transpose's partial tiles.
TEST(FloatKernelsTest, ProductsWithTransposedWeightsOfManyRows) {
  for (Shape wshape : {Shape{384, 128}, Shape{40, 33}}) {
    const int64_t n = wshape[0], k = wshape[1];
    SCOPED_TRACE(ShapeToString(wshape));
    Tensor a = AsFloat(Random({16, 64, k}, 120)), w = AsFloat(Random(wshape, 121));
    std::vector<float> wt(static_cast<size_t>(n * k));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t q = 0; q < k; ++q) wt[q * n + j] = w.data<float>()[j * k + q];
    }
    Tensor wt_t = Tensor::FromVector(wt, {k, n});
    std::vector<Tensor> f1 = RunNode("FusedMatMul", kMs, {{"a", a}, {"b", w}}, 1, {AttrInt("transB", 1)}, 17, {}, 1);
    std::vector<Tensor> f2 = RunNode("FusedMatMul", kMs, {{"a", a}, {"b", w}}, 1, {AttrInt("transB", 1)}, 17, {}, 2);
    std::vector<Tensor> mm = RunNode("MatMul", "", {{"a", a}, {"b", wt_t}}, 1, {}, 17, {}, 1);
    Tensor a2 = a.Reshaped({1024, k}).value();
    Tensor bias = AsFloat(Random({n}, 122));
    std::vector<onnx::AttributeProto> gattrs = {AttrInt("transB", 1), AttrFloat("alpha", 0.5f), AttrFloat("beta", 2.0f)};
    std::vector<Tensor> g1 = RunNode("Gemm", "", {{"a", a2}, {"b", w}, {"c", bias}}, 1, gattrs, 17, {}, 1);
    std::vector<Tensor> g2 = RunNode("Gemm", "", {{"a", a2}, {"b", w}, {"c", bias}}, 1, gattrs, 17, {}, 2);
    ASSERT_EQ(f1.size(), 1u);
    ASSERT_EQ(f2.size(), 1u);
    ASSERT_EQ(mm.size(), 1u);
    ASSERT_EQ(g1.size(), 1u);
    ASSERT_EQ(g2.size(), 1u);
    ASSERT_EQ(f1[0].shape(), (Shape{16, 64, n}));
    ASSERT_EQ(g1[0].shape(), (Shape{1024, n}));
    EXPECT_EQ(std::memcmp(f1[0].raw_data(), f2[0].raw_data(), f1[0].SizeInBytes()), 0);
    EXPECT_EQ(std::memcmp(f1[0].raw_data(), mm[0].raw_data(), f1[0].SizeInBytes()), 0);
    EXPECT_EQ(std::memcmp(g1[0].raw_data(), g2[0].raw_data(), g1[0].SizeInBytes()), 0);
    const float *pa = a.data<float>(), *pw = w.data<float>(), *pc = bias.data<float>();
    double worst_f = 0, worst_g = 0;
    for (int64_t i = 0; i < 1024; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < k; ++q) sum += static_cast<double>(pa[i * k + q]) * pw[j * k + q];
        worst_f = std::max(worst_f, std::fabs(f1[0].data<float>()[i * n + j] - sum));
        worst_g = std::max(worst_g, std::fabs(g1[0].data<float>()[i * n + j] - (0.5 * sum + 2.0 * pc[j])));
      }
    }
    EXPECT_LT(worst_f, 2e-5);
    EXPECT_LT(worst_g, 2e-5);
  }
}

// SoftmaxGrad and LogSoftmaxGrad over contiguous float rows take them eight at a time, each row's sum still
// one float sum in element order: the bits of that definition, written out here, for row counts that leave
// a remainder (the rows after the last group of eight), rows of 1, 5 and 64, at one and two threads.
TEST(FloatKernelsTest, SoftmaxGradRowsInGroupsKeepTheirSums) {
  for (bool log : {false, true}) {
    for (Shape shape : {Shape{3, 7, 64}, Shape{21, 5}, Shape{16, 4, 1}, Shape{4, 64}}) {
      SCOPED_TRACE(std::string(log ? "LogSoftmaxGrad_13 " : "SoftmaxGrad_13 ") + ShapeToString(shape));
      Tensor dy = AsFloat(Random(shape, 130)), y = AsFloat(Random(shape, 131, 0.0, 1.0));
      const int64_t len = shape.back(), rows = dy.NumElements() / len;
      std::vector<float> want(static_cast<size_t>(dy.NumElements()));
      const float *pd = dy.data<float>(), *py = y.data<float>();
      for (int64_t r = 0; r < rows; ++r) {
        float sum = 0;
        for (int64_t i = 0; i < len; ++i) sum += log ? pd[r * len + i] : pd[r * len + i] * py[r * len + i];
        for (int64_t i = 0; i < len; ++i) {
          const float g = pd[r * len + i], v = py[r * len + i];
          want[r * len + i] = log ? g - std::exp(v) * sum : v * (g - sum);
        }
      }
      for (int threads : {1, 2}) {
        std::vector<Tensor> dx = RunNode(log ? "LogSoftmaxGrad_13" : "SoftmaxGrad_13", kMs, {{"dy", dy}, {"y", y}}, 1,
                                         {AttrInt("axis", -1)}, 17, {}, threads);
        ASSERT_EQ(dx.size(), 1u);
        EXPECT_EQ(std::memcmp(dx[0].raw_data(), want.data(), want.size() * sizeof(float)), 0) << threads << " threads";
      }
    }
  }
}

// float32 layer normalization runs per-ISA row loops (vrows.h); its results must be those of the float64
// kernel on the same values to float rounding, on rows of 8 lanes (37, 128) and of 32 (300), with and
// without a bias.
TEST(FloatKernelsTest, LayerNormFloat32MatchesFloat64) {
  auto worst = [](const Tensor& got, const Tensor& want) {
    double scale = 0, w = 0;
    for (int64_t i = 0; i < want.NumElements(); ++i) scale = std::max(scale, std::fabs(want.data<double>()[i]));
    for (int64_t i = 0; i < want.NumElements(); ++i) {
      w = std::max(w, std::fabs(got.data<float>()[i] - want.data<double>()[i]) / std::max(scale, 1e-30));
    }
    return w;
  };
  for (int64_t cols : {37, 128, 300}) {
    for (bool bias : {true, false}) {
      SCOPED_TRACE(std::to_string(cols) + (bias ? " with bias" : " without bias"));
      Tensor x = AsFloat(Random({6, cols}, 74, -2.0, 3.0)), dy = AsFloat(Random({6, cols}, 75));
      Tensor s = AsFloat(Random({cols}, 76, 0.5, 1.5)), b = AsFloat(Random({cols}, 77));
      std::vector<onnx::AttributeProto> attrs = {AttrInt("axis", -1), AttrFloat("epsilon", 1e-4f)};
      std::vector<Io> in = {{"x", x}, {"s", s}}, in_d = {{"x", AsDouble(x)}, {"s", AsDouble(s)}};
      if (bias) {
        in.push_back({"b", b});
        in_d.push_back({"b", AsDouble(b)});
      }
      std::vector<Tensor> f = RunNode("LayerNormalization", "", in, 3, attrs);
      std::vector<Tensor> fd = RunNode("LayerNormalization", "", in_d, 3, attrs);
      ASSERT_EQ(f.size(), 3u);
      ASSERT_EQ(fd.size(), 3u);
      EXPECT_LT(worst(f[0], fd[0]), 1e-6);
      std::vector<Tensor> g = RunNode("LayerNormalizationGrad", kMs,
                                      {{"dy", dy}, {"x", x}, {"s", s}, {"m", f[1]}, {"i", f[2]}}, 3, attrs);
      std::vector<Tensor> gd = RunNode("LayerNormalizationGrad", kMs,
                                       {{"dy", AsDouble(dy)}, {"x", AsDouble(x)}, {"s", AsDouble(s)},
                                        {"m", f[1]}, {"i", f[2]}}, 3, attrs);
      ASSERT_EQ(g.size(), 3u);
      ASSERT_EQ(gd.size(), 3u);
      for (size_t k = 0; k < 3; ++k) EXPECT_LT(worst(g[k], gd[k]), 1e-5) << "gradient output " << k;
    }
  }
}

// The float32 gradient's dScale and dBias come from chunks of rows summed in parallel and added in chunk
// order: 300 rows (chunks of 128, the last one partial) give the same bits on 1 and 2 threads, and agree
// with the float64 kernel to float rounding.
TEST(FloatKernelsTest, LayerNormGradientChunksGiveTheSameBitsOnAnyThreadCount) {
  const int64_t rows = 300, cols = 48;
  Tensor x = AsFloat(Random({rows, cols}, 81, -2.0, 3.0)), dy = AsFloat(Random({rows, cols}, 82));
  Tensor s = AsFloat(Random({cols}, 83, 0.5, 1.5));
  std::vector<onnx::AttributeProto> attrs = {AttrInt("axis", -1), AttrFloat("epsilon", 1e-4f)};
  std::vector<Tensor> f = RunNode("LayerNormalization", "", {{"x", x}, {"s", s}}, 3, attrs);
  ASSERT_EQ(f.size(), 3u);
  std::vector<Io> in = {{"dy", dy}, {"x", x}, {"s", s}, {"m", f[1]}, {"i", f[2]}};
  std::vector<Tensor> one = RunNode("LayerNormalizationGrad", kMs, in, 3, attrs, 17, {}, 1);
  std::vector<Tensor> two = RunNode("LayerNormalizationGrad", kMs, in, 3, attrs, 17, {}, 2);
  std::vector<Tensor> dbl = RunNode("LayerNormalizationGrad", kMs,
                                    {{"dy", AsDouble(dy)}, {"x", AsDouble(x)}, {"s", AsDouble(s)}, {"m", f[1]}, {"i", f[2]}},
                                    3, attrs);
  ASSERT_EQ(one.size(), 3u);
  ASSERT_EQ(two.size(), 3u);
  ASSERT_EQ(dbl.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(one[k].NumElements(), two[k].NumElements());
    EXPECT_EQ(std::memcmp(one[k].raw_data(), two[k].raw_data(), one[k].NumElements() * sizeof(float)), 0) << "output " << k;
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < dbl[k].NumElements(); ++i) scale = std::max(scale, std::fabs(dbl[k].data<double>()[i]));
    for (int64_t i = 0; i < dbl[k].NumElements(); ++i) {
      worst = std::max(worst, std::fabs(one[k].data<float>()[i] - dbl[k].data<double>()[i]) / scale);
    }
    EXPECT_LT(worst, 1e-5) << "output " << k;
  }
}

}  // namespace
}  // namespace ontrain
