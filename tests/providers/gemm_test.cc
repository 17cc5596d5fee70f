// The CPU provider's GEMM (providers/cpu/kernels/gemm.h): which products run on the AVX-512 panels and the
// scratch they ask for; that on the panels every element is the in-order FMA sum (bit for bit, on one
// thread and two, by rows and by columns); the bias row and the ReLU on every path; and the library's splits (short
// wide products in row halves) giving the same bits at one and two threads.
#include "providers/cpu/kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {
namespace {

bool PanelsHere() { return GemmScratchBytes<float>(false, true, 1024, 128, 128) > 0; }

TEST(GemmTest, FloatProductsWithBTransposedAskForPanels) {
  InitBlas();
  if (!PanelsHere()) GTEST_SKIP() << "this CPU has no AVX-512F: every product runs on the library";
  // B packed in panels of 32 columns (384 = 12 panels, 40 rounds up to 64), plus 64 bytes to align it.
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 512, 384, 128), size_t{384 * 128 * 4 + 64});
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 3, 40, 784), size_t{64 * 784 * 4 + 64});
  EXPECT_EQ(GemmScratchBytes<float>(false, false, 1024, 384, 128), 0u);  // B not transposed
  EXPECT_EQ(GemmScratchBytes<float>(true, true, 1024, 384, 128), 0u);    // A transposed
  EXPECT_EQ(GemmScratchBytes<double>(false, true, 1024, 384, 128), 0u);  // float only
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 1024, 0, 128), 0u);
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 64, 64, 64), 0u);  // SmallSgemm's, packed on its stack
}

// A B^T on the panels through Gemm, on one and on two threads (split by panels of columns: 384, 512 and 40
// columns; a single panel's rows in halves: 1000 x 32), against the in-order float sum bit for bit and the
// double product, with the scratch unaligned and full of NaNs, and with a bias row.
TEST(GemmTest, PanelProductsAreTheInOrderSumOnAnyPool) {
  InitBlas();
  if (!PanelsHere()) GTEST_SKIP() << "this CPU has no AVX-512F: every product runs on the library";
  struct S {
    int64_t m, n, k;
  };
  ThreadPool two(2);
  for (const S& sh : {S{1024, 384, 128}, S{520, 40, 33}, S{128, 512, 784}, S{600, 17 + 32, 784}, S{1000, 32, 200},
                      S{64, 128, 784}}) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    std::vector<float> a(m * k), b(n * k), c0(m * n), bias(n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i) + 0.2f);
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::sin(0.05f * static_cast<float>(i));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = 0.5f * std::sin(0.7f * static_cast<float>(j));
    const size_t bytes = GemmScratchBytes<float>(false, true, m, n, k);
    ASSERT_GT(bytes, 0u);
    for (float beta : {0.0f, 0.5f}) {
      for (const float* bp : {static_cast<const float*>(nullptr), static_cast<const float*>(bias.data())}) {
        const float alpha = beta == 0.0f ? 1.0f : -0.75f;
        // One float past an aligned start: Gemm aligns the panels itself.
        std::vector<float> scratch(bytes / sizeof(float) + 1, std::nanf("")), scratch2 = scratch;
        std::vector<float> c1 = c0, c2 = c0;
        Gemm<float>(false, true, m, n, k, alpha, a.data(), b.data(), beta, c1.data(), nullptr, scratch.data() + 1, bp);
        Gemm<float>(false, true, m, n, k, alpha, a.data(), b.data(), beta, c2.data(), &two, scratch2.data() + 1, bp);
        EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0) << "one thread against two";
        double worst = 0;
        int64_t differ = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            float acc = 0;
            double sum = 0;
            for (int64_t q = 0; q < k; ++q) {
              acc = std::fma(a[i * k + q], b[j * k + q], acc);
              sum += static_cast<double>(a[i * k + q]) * b[j * k + q];
            }
            const float old = c0[i * n + j];
            float want = beta != 0.0f ? std::fma(beta, old, acc * alpha) : acc * alpha;
            if (bp) want = want + bp[j];
            differ += std::memcmp(&want, &c1[i * n + j], sizeof want) != 0;
            const double exact = alpha * sum + beta * static_cast<double>(old) + (bp ? bp[j] : 0.0);
            worst = std::max(worst, std::fabs(c1[i * n + j] - exact) / (1 + std::fabs(exact)));
          }
        }
        EXPECT_EQ(differ, 0) << "beta " << beta << (bp ? " bias" : "");
        EXPECT_LT(worst, 1e-5) << "beta " << beta;
      }
    }
  }
}

// Gemm's epilogue on every path (the library's chunks by rows and by columns, SmallSgemm, Eigen's integers, a
// product without scratch): the product with beta 0, then + bias element by element, then (relu) Relu's
// expression, bit for bit.
TEST(GemmTest, BiasAndReluFollowTheProductOnEveryPath) {
  InitBlas();
  struct S {
    bool ta, tb;
    int64_t m, n, k;
  };
  ThreadPool two(2);
  for (const S& sh : {S{false, false, 1024, 384, 128}, S{true, false, 128, 512, 256}, S{false, true, 64, 64, 64},
                      S{false, true, 300, 200, 100}, S{false, false, 16, 600, 700}}) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (sh.ta ? " A^T" : "") +
                 (sh.tb ? " B^T" : ""));
    std::vector<float> a(m * k), b(n * k), bias(n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i) + 0.2f);
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = 0.5f * std::sin(0.7f * static_cast<float>(j));
    a[sh.ta ? 1 : k] = std::nanf("");  // A's row 1, stored either way: C's row 1 NaN, which the ReLU makes +0
    for (ThreadPool* pool : {static_cast<ThreadPool*>(nullptr), &two}) {
      for (bool relu : {false, true}) {
        SCOPED_TRACE(std::string(pool ? "two threads" : "one thread") + (relu ? ", relu" : ""));
        std::vector<float> want(m * n), got(m * n);
        Gemm<float>(sh.ta, sh.tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, want.data(), pool);
        int nans = 0, zeros = 0;
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            float& w = want[i * n + j];
            w = w + bias[j];
            nans += std::isnan(w);
            if (relu) w = w > 0.0f ? w : 0.0f;
            zeros += w == 0.0f;
          }
        }
        ASSERT_EQ(nans, n);  // the NaN row reached C
        if (relu) {
          ASSERT_GT(zeros, n);  // and so did negative sums
        }
        Gemm<float>(sh.ta, sh.tb, m, n, k, 1.0f, a.data(), b.data(), 0.0f, got.data(), pool, nullptr, bias.data(),
                    relu);
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
      }
    }
  }
  std::vector<int32_t> a{1, 2, 3, 4, 5, 6}, b{1, 0, 2, 1, 0, 1}, bias{10, 20}, c(4);
  Gemm<int32_t>(false, false, 2, 2, 3, 1, a.data(), b.data(), 0, c.data(), nullptr, nullptr, bias.data());
  EXPECT_EQ(c, (std::vector<int32_t>{1 + 4 + 0 + 10, 0 + 2 + 3 + 20, 4 + 10 + 0 + 10, 0 + 5 + 6 + 20}));
  const std::vector<int32_t> neg_bias{-20, -10};  // C is {5, 5, 14, 11} before it
  Gemm<int32_t>(false, false, 2, 2, 3, 1, a.data(), b.data(), 0, c.data(), nullptr, nullptr, neg_bias.data(), true);
  EXPECT_EQ(c, (std::vector<int32_t>{0, 0, 0, 1}));
}

// Products of 64 to 256 rows by at most 256 columns over a depth of at most 1024 and at least 4M
// multiply-adds run as two row halves (at a multiple of 32), whatever the pool; the others keep their split
// (one call, or column chunks). Either way the bits are the same at one and two threads and within float
// rounding of the product in double, for every transposition of A and B.
TEST(GemmTest, ShortWideProductsHaveTheSameBitsOnAnyPool) {
  InitBlas();
  struct S {
    int64_t m, n, k;
  };
  const std::vector<S> shapes = {
      {64, 128, 784},   // mlp_small's forward layer: row halves
      {96, 128, 784},   // halves at a multiple of 32
      {256, 256, 128},  // row halves
      {64, 128, 256},   // 2.1M multiply-adds: one call
      {64, 128, 1200},  // deeper: columns in two
      {64, 300, 784},   // wider: columns in two
  };
  ThreadPool two(2);
  for (const S& sh : shapes) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    for (int t = 0; t < 4; ++t) {
      const bool ta = (t & 1) != 0, tb = (t & 2) != 0;
      SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (ta ? " A^T" : "") +
                   (tb ? " B^T" : ""));
      std::vector<float> a(m * k), b(n * k), c0(m * n);
      for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
      for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i) + 0.2f);
      for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::sin(0.05f * static_cast<float>(i));
      auto A = [&](int64_t i, int64_t q) { return static_cast<double>(ta ? a[q * m + i] : a[i * k + q]); };
      auto B = [&](int64_t q, int64_t j) { return static_cast<double>(tb ? b[j * k + q] : b[q * n + j]); };
      std::vector<float> c1 = c0, c2 = c0;
      std::vector<float> scratch(GemmScratchBytes<float>(ta, tb, m, n, k) / sizeof(float) + 1);
      Gemm<float>(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 0.25f, c1.data(), nullptr, scratch.data());
      Gemm<float>(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 0.25f, c2.data(), &two, scratch.data());
      EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0) << "one thread against two";
      double worst = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t q = 0; q < k; ++q) sum += A(i, q) * B(q, j);
          const double exact = 0.5 * sum + 0.25 * static_cast<double>(c0[i * n + j]);
          worst = std::max(worst, std::fabs(c1[i * n + j] - exact) / (1 + std::fabs(exact)));
        }
      }
      EXPECT_LT(worst, 1e-5);
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
