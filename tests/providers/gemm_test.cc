// The CPU provider's GEMM (providers/cpu/kernels/gemm.h) where it copies B^T out first: which products do,
// that the scratch they ask for holds the copy, and that the result is the untransposed product's (A B^T
// against a double loop; bits equal to Gemm on an explicit B^T; equal at one and two threads). And the
// split of short wide products into row halves: which products split, that they report their rows in
// two halves, and that their bits do not depend on the thread count.
#include "providers/cpu/kernels/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {
namespace {

bool CopiesHere() { return GemmScratchBytes<float>(false, true, 1024, 128, 128) > 0; }

TEST(GemmTest, OnlyTallFloatProductsWithBTransposedCopyB) {
  InitBlas();
  if (!CopiesHere()) GTEST_SKIP() << "oneDNN's sgemm is not loaded here: every product runs as asked";
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 512, 384, 128), size_t{384 * 128 * 4});
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 511, 384, 128), 0u);   // too few rows to pay for the copy
  EXPECT_EQ(GemmScratchBytes<float>(false, false, 1024, 384, 128), 0u);  // B not transposed
  EXPECT_EQ(GemmScratchBytes<float>(true, true, 1024, 384, 128), 0u);    // A transposed
  EXPECT_EQ(GemmScratchBytes<double>(false, true, 1024, 384, 128), 0u);  // float only
  EXPECT_EQ(GemmScratchBytes<float>(false, true, 1024, 0, 128), 0u);
}

TEST(GemmTest, CopyOfBTransposedGivesTheUntransposedProduct) {
  InitBlas();
  if (!CopiesHere()) GTEST_SKIP() << "oneDNN's sgemm is not loaded here: every product runs as asked";
  struct S {
    int64_t m, n, k;
  };
  ThreadPool two(2);
  for (const S& sh : {S{1024, 384, 128}, S{520, 40, 33}, S{600, 17, 784}}) {
    const int64_t m = sh.m, n = sh.n, k = sh.k;
    SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k));
    std::vector<float> a(m * k), b(n * k), bt(k * n), c0(m * n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i) + 0.2f);
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::sin(0.05f * static_cast<float>(i));
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t q = 0; q < k; ++q) bt[q * n + j] = b[j * k + q];
    }
    const size_t bytes = GemmScratchBytes<float>(false, true, m, n, k);
    ASSERT_EQ(bytes, static_cast<size_t>(n * k) * sizeof(float));
    for (float beta : {0.0f, 0.5f}) {
      const float alpha = beta == 0.0f ? 1.0f : -0.75f;
      // The scratch starts as NaNs: every element the product reads must have been written by the copy.
      std::vector<float> scratch(bytes / sizeof(float), std::nanf("")), scratch2 = scratch;
      std::vector<float> c1 = c0, c2 = c0, want = c0;
      Gemm<float>(false, true, m, n, k, alpha, a.data(), b.data(), beta, c1.data(), nullptr, scratch.data());
      Gemm<float>(false, true, m, n, k, alpha, a.data(), b.data(), beta, c2.data(), &two, scratch2.data());
      Gemm<float>(false, false, m, n, k, alpha, a.data(), bt.data(), beta, want.data(), nullptr);
      EXPECT_EQ(std::memcmp(c1.data(), want.data(), c1.size() * sizeof(float)), 0) << "beta " << beta;
      EXPECT_EQ(std::memcmp(c1.data(), c2.data(), c1.size() * sizeof(float)), 0) << "beta " << beta;
      EXPECT_EQ(std::memcmp(scratch.data(), bt.data(), bytes), 0) << "the scratch holds B^T";
      double worst = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double sum = 0;
          for (int64_t q = 0; q < k; ++q) sum += static_cast<double>(a[i * k + q]) * b[j * k + q];
          const double exact = alpha * sum + beta * static_cast<double>(c0[i * n + j]);
          worst = std::max(worst, std::fabs(c1[i * n + j] - exact) / (1 + std::fabs(exact)));
        }
      }
      EXPECT_LT(worst, 1e-5) << "beta " << beta;
    }
  }
}

// Products of 64 to 256 rows by at most 256 columns over a depth of at most 1024 and at least 4M
// multiply-adds run as two row halves (at a multiple of 32), whatever the pool: the rows come back in
// those two ranges, and the bits are the same at one and two threads and within float rounding of the
// product in double, for every transposition of A and B. The others keep their split: a product too
// small, too deep or too wide reports its rows as before (one range, or column chunks reported at the end).
TEST(GemmTest, ShortWideProductsSplitTheirRowsInHalvesWithTheSameBitsOnAnyPool) {
  InitBlas();
  struct S {
    int64_t m, n, k;
    std::vector<std::pair<int64_t, int64_t>> ranges;  // rows_done's ranges, sorted
  };
  const std::vector<S> shapes = {
      {64, 128, 784, {{0, 32}, {32, 64}}},    // mlp_small's forward layer
      {96, 128, 784, {{0, 64}, {64, 96}}},    // halves at a multiple of 32
      {256, 256, 128, {{0, 128}, {128, 256}}},
      {64, 128, 256, {{0, 64}}},              // 2.1M multiply-adds: one call
      {64, 128, 1200, {{0, 64}}},             // deeper: columns in two, rows reported whole at the end
      {64, 300, 784, {{0, 64}}},              // wider: columns in two
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
      std::mutex mu;
      std::vector<std::pair<int64_t, int64_t>> seen1, seen2;
      auto record1 = [&](int64_t r0, int64_t r1) { std::lock_guard<std::mutex> l(mu); seen1.emplace_back(r0, r1); };
      auto record2 = [&](int64_t r0, int64_t r1) { std::lock_guard<std::mutex> l(mu); seen2.emplace_back(r0, r1); };
      const RangeFn done1(record1), done2(record2);
      std::vector<float> scratch(GemmScratchBytes<float>(ta, tb, m, n, k) / sizeof(float) + 1);
      Gemm<float>(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 0.25f, c1.data(), nullptr, scratch.data(), &done1);
      Gemm<float>(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 0.25f, c2.data(), &two, scratch.data(), &done2);
      std::sort(seen1.begin(), seen1.end());
      std::sort(seen2.begin(), seen2.end());
      EXPECT_EQ(seen1, sh.ranges);
      EXPECT_EQ(seen2, sh.ranges);
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
