// The AVX-512 GEMMs (providers/cpu/kernels/sgemm_avx512.h) against a double-precision reference and
// against a float reference that sums in the same order (FMA from zero over k, then alpha and beta, then the
// bias, then the ReLU): SmallSgemm for every transpose, the panels for A B^T; ragged sizes (tails of rows, of the 16-column
// vectors, of the 32-column panels and of k's 16-row blocks), leading dimensions wider than the matrices,
// alpha and beta, C past ldc's columns left untouched, and the panels computed in any split of rows and
// column ranges giving the same bits.
#include "providers/cpu/kernels/sgemm_avx512.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "gtest/gtest.h"

namespace ontrain {
namespace cpu {
namespace {

// The in-order float reference: want[i, j] = alpha * (FMA chain over k from 0) (+ beta * old by one FMA)
// (+ bias[j]) (then v > 0 ? v : 0 with relu), and the double product beside it for the accuracy check.
struct Reference {
  int64_t m, n, k, lda, ldb, ldc;
  bool ta, tb;
  const float *a, *b;
  float alpha, beta;
  const float* bias;
  bool relu;
  void Fill(std::vector<float>* want) const {
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
        float& w = (*want)[i * ldc + j];
        const float old = w;
        w = beta != 0.0f ? std::fma(beta, old, acc * alpha) : acc * alpha;
        if (bias != nullptr) w = w + bias[j];
        if (relu) w = w > 0.0f ? w : 0.0f;
        double exact_all = alpha * exact + beta * old + (bias ? bias[j] : 0.0);
        if (relu) exact_all = exact_all > 0.0 ? exact_all : 0.0;
        ASSERT_NEAR(w, exact_all, 2e-5 * (1 + std::fabs(exact_all)));
      }
    }
  }
};

struct AlignedFloats {
  explicit AlignedFloats(int64_t count)
      : p(static_cast<float*>(std::aligned_alloc(64, (static_cast<size_t>(count) * 4 + 63) / 64 * 64))) {}
  ~AlignedFloats() { std::free(p); }
  float* p;
};

// A panel product's operands, stored with leading dimensions wider than the matrices, and C's old values
// and a bias row: deterministic values of either sign.
struct Operands {
  Operands(int64_t m, int64_t n, int64_t k)
      : lda(k + 3), ldb(k + 5), ldc(n + 7), a(m * lda), b(n * ldb), c0(m * ldc), bias(n) {
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i) + 0.1f);
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.11f * static_cast<float>(i) + 0.2f);
    for (size_t i = 0; i < c0.size(); ++i) c0[i] = std::sin(0.05f * static_cast<float>(i));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25f * std::cos(0.3f * static_cast<float>(j));
  }
  int64_t lda, ldb, ldc;
  std::vector<float> a, b, c0, bias;
};

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
        const Reference ref{m, n, k, lda, ldb, ldc, ta, tb, a.data(), b.data(), alpha, beta, nullptr, false};
        ref.Fill(&want);
        SmallSgemm(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
        ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * sizeof(float)), 0)
            << m << "x" << n << "x" << k << " ta " << ta << " tb " << tb << " beta " << beta;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 40);
}

// One case of the panel tests: the operands, the packed panels (of A's rows or of B's), alpha, beta, the
// epilogue, and C as the in-order reference leaves it.
struct PanelCase {
  const Operands& op;
  int64_t m, n, k;
  const float* packed;
  float alpha, beta;
  TileEpilogue ep;
  std::vector<float> want;
};

struct Dims {
  int64_t m, n, k;
};

// Calls check(c) for every shape, beta (0, 0.5) and epilogue (none, bias, ReLU, both) and returns how many
// cases ran. The packed operand (A with pack_a, else B) starts as NaNs, so every float the tiles read must
// have been packed, and is packed in two halves of its panels.
template <typename F>
int ForEachPanelCase(std::initializer_list<Dims> shapes, bool pack_a, F check) {
  int cases = 0;
  for (const Dims& sh : shapes) {
    const Operands op(sh.m, sh.n, sh.k);
    const int64_t rows = pack_a ? sh.m : sh.n, floats = PanelFloats(rows, sh.k), panels = (rows + 31) / 32;
    EXPECT_EQ(floats, sh.k * panels * 32);
    AlignedFloats packed(floats);
    std::fill(packed.p, packed.p + floats, std::nanf(""));
    const float* src = pack_a ? op.a.data() : op.b.data();
    const int64_t ld = pack_a ? op.lda : op.ldb;
    PackPanels(rows, sh.k, src, ld, packed.p, 0, panels / 2);
    PackPanels(rows, sh.k, src, ld, packed.p, panels / 2, panels);
    for (float beta : {0.0f, 0.5f}) {
      for (int epilogue = 0; epilogue < 4; ++epilogue) {
        const bool with_bias = epilogue & 1, relu = epilogue & 2;
        SCOPED_TRACE(std::to_string(sh.m) + "x" + std::to_string(sh.n) + "x" + std::to_string(sh.k) + " beta " +
                     std::to_string(beta) + (with_bias ? " bias" : "") + (relu ? " relu" : ""));
        PanelCase c{op,   sh.m, sh.n, sh.k, packed.p, beta == 0.0f ? 1.0f : -0.75f, beta,
                    TileEpilogue{with_bias ? op.bias.data() : nullptr, relu}, op.c0};
        const Reference ref{c.m,         c.n,         c.k,     op.lda, op.ldb,  op.ldc,    false,
                            true,        op.a.data(), op.b.data(), c.alpha, c.beta, c.ep.bias, relu};
        ref.Fill(&c.want);
        check(c);
        ++cases;
        if (::testing::Test::HasFatalFailure()) return cases;
      }
    }
  }
  return cases;
}

// Ragged panels (33, 100, 517 columns), k not a multiple of 16 (17, 129, 784), row tails of 1 to 7 (the
// small ones are SmallSgemm's in Gemm, but the panels compute them as well), a long k (1030) with a row tail
// of 3; the whole product, and rows in two parts with columns in ranges of whole panels.
TEST(PanelGemmTest, MatchesTheSameSumInOrderInAnySplit) {
  if (!PanelGemmFits(false, true, 256, 256, 256)) GTEST_SKIP() << "this CPU has no AVX-512F: the panels are never used here";
  const int cases = ForEachPanelCase(
      {{128, 512, 784}, {9, 33, 17}, {1000, 100, 129}, {7, 517, 64}, {70, 64, 300}, {200, 40, 1}, {43, 70, 1030}},
      false, [](const PanelCase& c) {
        const Operands& op = c.op;
        std::vector<float> whole = op.c0, split = op.c0;
        PanelTiles(c.m, 0, c.n, c.k, c.alpha, op.a.data(), op.lda, c.packed, c.beta, c.ep, whole.data(), op.ldc);
        const int64_t mh = c.m / 3, jh = ((c.n + 31) / 32 / 2) * 32;
        for (int64_t r0 : {int64_t{0}, mh}) {
          const int64_t r1 = r0 == 0 ? mh : c.m;
          const float* a = op.a.data() + r0 * op.lda;
          float* out = split.data() + r0 * op.ldc;
          PanelTiles(r1 - r0, 0, jh, c.k, c.alpha, a, op.lda, c.packed, c.beta, c.ep, out, op.ldc);
          PanelTiles(r1 - r0, jh, c.n, c.k, c.alpha, a, op.lda, c.packed, c.beta, c.ep, out, op.ldc);
        }
        ASSERT_EQ(std::memcmp(whole.data(), c.want.data(), c.want.size() * sizeof(float)), 0);
        ASSERT_EQ(std::memcmp(split.data(), c.want.data(), c.want.size() * sizeof(float)), 0);
      });
  EXPECT_EQ(cases, 56);
}

// The swapped form (A's rows in panels, B's rows read as stored, C stored transposed from the tiles) gives
// the in-order reference's bits too: ragged panels of A (9, 33, 70 rows), column ranges that end inside an
// 8-row tile of B, k tails, beta, bias and the ReLU; C's columns outside a range and past n stay as they were.
TEST(PanelGemmTest, SwappedFormMatchesTheSameSumInOrder) {
  if (!PanelGemmFits(false, true, 256, 256, 256) || !__builtin_cpu_supports("avx512vl")) {
    GTEST_SKIP() << "this CPU has no AVX-512F/VL: the swapped panels are never used here";
  }
  const int cases = ForEachPanelCase(
      {{128, 512, 784}, {9, 33, 17}, {70, 517, 129}, {33, 40, 1}, {64, 130, 300}}, true, [](const PanelCase& c) {
        const Operands& op = c.op;
        std::vector<float> whole = op.c0, split = op.c0, part = op.c0;
        SwappedPanelTiles(c.m, 0, c.n, c.k, c.alpha, c.packed, op.b.data(), op.ldb, c.beta, c.ep, whole.data(), op.ldc);
        const int64_t jh = c.n / 3 + 5;  // not a multiple of 8
        SwappedPanelTiles(c.m, 0, jh, c.k, c.alpha, c.packed, op.b.data(), op.ldb, c.beta, c.ep, split.data(), op.ldc);
        SwappedPanelTiles(c.m, jh, c.n, c.k, c.alpha, c.packed, op.b.data(), op.ldb, c.beta, c.ep, split.data(), op.ldc);
        ASSERT_EQ(std::memcmp(whole.data(), c.want.data(), c.want.size() * sizeof(float)), 0);
        ASSERT_EQ(std::memcmp(split.data(), c.want.data(), c.want.size() * sizeof(float)), 0);
        // One range alone writes only its own columns.
        SwappedPanelTiles(c.m, jh, c.n, c.k, c.alpha, c.packed, op.b.data(), op.ldb, c.beta, c.ep, part.data(), op.ldc);
        for (int64_t i = 0; i < c.m; ++i) {
          for (int64_t j = 0; j < op.ldc; ++j) {
            const float expect = j >= jh && j < c.n ? c.want[i * op.ldc + j] : op.c0[i * op.ldc + j];
            ASSERT_EQ(std::memcmp(&part[i * op.ldc + j], &expect, sizeof(float)), 0) << "row " << i << " column " << j;
          }
        }
      });
  EXPECT_EQ(cases, 40);
}

// The ReLU in the tiles' epilogue turns NaN and -0 into +0, as Relu does, in both forms: A's row 0 holds a
// NaN (a row of NaN sums), its row 1 is zeros, whose sums are +0 and, times alpha -1, -0.
TEST(PanelGemmTest, ReluInTheTilesMakesNaNAndMinusZeroPlusZero) {
  if (!PanelGemmFits(false, true, 256, 256, 256) || !__builtin_cpu_supports("avx512vl")) {
    GTEST_SKIP() << "this CPU has no AVX-512F/VL: the panels are never used here";
  }
  const int64_t m = 32, n = 64, k = 20;
  Operands op(m, n, k);
  op.a[3] = std::nanf("");
  std::fill(op.a.begin() + op.lda, op.a.begin() + 2 * op.lda, 0.0f);
  AlignedFloats bp(PanelFloats(n, k)), ap(PanelFloats(m, k));
  PackPanels(n, k, op.b.data(), op.ldb, bp.p, 0, n / 32);
  PackPanels(m, k, op.a.data(), op.lda, ap.p, 0, m / 32);
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "relu" : "no relu");
    std::vector<float> tiles = op.c0, swapped = op.c0;
    PanelTiles(m, 0, n, k, -1.0f, op.a.data(), op.lda, bp.p, 0.0f, TileEpilogue{nullptr, relu}, tiles.data(), op.ldc);
    SwappedPanelTiles(m, 0, n, k, -1.0f, ap.p, op.b.data(), op.ldb, 0.0f, TileEpilogue{nullptr, relu}, swapped.data(),
                      op.ldc);
    for (const std::vector<float>* c : {&tiles, &swapped}) {
      for (int64_t j = 0; j < n; ++j) {
        const float nan_row = (*c)[j], zero_row = (*c)[op.ldc + j];
        if (relu) {
          EXPECT_TRUE(nan_row == 0.0f && !std::signbit(nan_row)) << "column " << j << ": " << nan_row;
          EXPECT_TRUE(zero_row == 0.0f && !std::signbit(zero_row)) << "column " << j << ": " << zero_row;
        } else {
          EXPECT_TRUE(std::isnan(nan_row)) << "column " << j;
          EXPECT_TRUE(zero_row == 0.0f && std::signbit(zero_row)) << "column " << j << ": " << zero_row;
        }
      }
      for (int64_t i = 2; i < m; ++i) {  // the other rows: kept when positive, else +0
        for (int64_t j = 0; j < n; ++j) {
          const float v = (*c)[i * op.ldc + j];
          if (relu) EXPECT_TRUE(v > 0.0f || (v == 0.0f && !std::signbit(v))) << i << ", " << j << ": " << v;
        }
      }
    }
    EXPECT_EQ(std::memcmp(tiles.data(), swapped.data(), tiles.size() * sizeof(float)), 0);
  }
}

TEST(PanelGemmTest, SwapsOnlyWhenAHasFewerWholePanelsOfRows) {
  if (!__builtin_cpu_supports("avx512vl")) GTEST_SKIP() << "this CPU has no AVX-512VL";
  EXPECT_TRUE(PanelGemmSwaps(128, 512));   // mlp_large's layers
  EXPECT_TRUE(PanelGemmSwaps(64, 128));
  EXPECT_FALSE(PanelGemmSwaps(100, 512));  // a padded panel would waste its lanes
  EXPECT_FALSE(PanelGemmSwaps(512, 512));
  EXPECT_FALSE(PanelGemmSwaps(1024, 512));  // the transformer's rows: B's panels are the smaller
}

TEST(PanelGemmTest, TakesOnlyATimesBTransposed) {
  if (!PanelGemmFits(false, true, 256, 256, 256)) GTEST_SKIP() << "this CPU has no AVX-512F";
  EXPECT_FALSE(PanelGemmFits(false, false, 256, 256, 256));  // B as stored: the library is faster
  EXPECT_FALSE(PanelGemmFits(true, true, 256, 256, 256));
  EXPECT_FALSE(PanelGemmFits(false, true, 256, 31, 256));  // under one panel of columns
  EXPECT_TRUE(PanelGemmFits(false, true, 1, 32, 1000));
  EXPECT_FALSE(PanelGemmFits(false, true, 64, 64, 64));  // SmallSgemm's
  EXPECT_FALSE(PanelGemmFits(false, true, 0, 64, 64));
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
