// The AVX-512 small GEMM (providers/cpu/kernels/small_gemm.h) against a double-precision reference and
// against a float reference that sums in the same order (FMA from zero over k, then alpha and beta): every
// transpose, ragged sizes (tails of rows and of the 16-column vectors), leading dimensions wider than the
// matrices, alpha and beta, and C past ldc's columns left untouched.
#include "providers/cpu/kernels/small_gemm.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace ontrain {
namespace cpu {
namespace {

TEST(SmallGemmTest, MatchesTheSameSumInOrder) {
  if (!SmallGemmFits(false, 8, 8, 8)) GTEST_SKIP() << "this CPU has no AVX-512F: SmallSgemm is never used here";
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{64, 64, 32}, {64, 32, 64}, {1, 1, 1}, {7, 33, 5}, {9, 17, 64}, {128, 128, 64}, {13, 100, 3}, {64, 64, 64},
                     {20, 50, 40}, {33, 16, 48}};
  int checked = 0;
  for (const S& sh : shapes) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      if (!SmallGemmFits(tb, sh.m, sh.n, sh.k)) continue;
      for (float beta : {0.0f, 0.5f}) {
        const float alpha = beta == 0.0f ? 1.0f : -0.75f;
        const int64_t m = sh.m, n = sh.n, k = sh.k;
        const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 7;
        std::vector<float> a((ta ? k : m) * lda), b((tb ? n : k) * ldb), c(m * ldc), want(m * ldc);
        for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
        for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i) + 0.2f);
        for (size_t i = 0; i < c.size(); ++i) c[i] = want[i] = std::sin(0.05f * static_cast<float>(i));
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            float acc = 0;
            double exact = 0;
            for (int64_t kk = 0; kk < k; ++kk) {
              const float av = ta ? a[kk * lda + i] : a[i * lda + kk];
              const float bv = tb ? b[j * ldb + kk] : b[kk * ldb + j];
              acc = std::fma(av, bv, acc);
              exact += static_cast<double>(av) * bv;
            }
            float& w = want[i * ldc + j];
            const float old = w;
            w = beta != 0.0f ? std::fma(beta, old, acc * alpha) : acc * alpha;
            ASSERT_NEAR(w, alpha * exact + beta * old, 1e-5 * (1 + std::fabs(exact)));
          }
        }
        SmallSgemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)), 0)
            << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " beta " << beta;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

TEST(SmallGemmTest, TakesOnlySmallProducts) {
  if (!SmallGemmFits(false, 8, 8, 8)) GTEST_SKIP() << "this CPU has no AVX-512F";
  EXPECT_TRUE(SmallGemmFits(false, 128, 128, 64));
  EXPECT_FALSE(SmallGemmFits(false, 128, 128, 128));
  EXPECT_FALSE(SmallGemmFits(true, 128, 128, 64));
  EXPECT_TRUE(SmallGemmFits(true, 64, 64, 64));
  EXPECT_FALSE(SmallGemmFits(false, 129, 1, 1));
  EXPECT_FALSE(SmallGemmFits(false, 0, 8, 8));
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
