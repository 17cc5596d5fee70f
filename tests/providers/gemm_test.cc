// The CPU provider's GEMM (providers/cpu/kernels/gemm.h) where it copies B^T out first: which products do,
// that the scratch they ask for holds the copy, and that the result is the untransposed product's (A B^T
// against a double loop; bits equal to Gemm on an explicit B^T; equal at one and two threads).
#include "providers/cpu/kernels/gemm.h"

#include <cmath>
#include <cstring>
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

}  // namespace
}  // namespace cpu
}  // namespace ontrain
