// Float32 GEMMs on AVX-512 over packed panels of B (see sgemm_avx512.h).
#include "providers/cpu/kernels/sgemm_avx512.h"

#include "providers/cpu/kernels/common.h"

#include <immintrin.h>

#include <algorithm>

namespace ontrain {
namespace cpu {
namespace {

constexpr int64_t kP = kPanelColumns;
constexpr int64_t kSmallPanels = kSmallGemmMax * kSmallGemmMax;  // SmallSgemm's packed B: k <= 128 rows, n <= 128

bool HasAvx512() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

// The sums of a tile: acc0[r], acc1[r] = sum over k of a's row r (column r when TA) times the panel's
// two halves, by FMAs from zero in k's order.
template <int R, bool TA>
__attribute__((target("avx512f"), always_inline)) inline void Sums(const float* a, int64_t lda, const float* panel,
                                                                 int64_t k, __m512* acc0, __m512* acc1) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m512 b0 = _mm512_load_ps(panel + kk * kP);
    const __m512 b1 = _mm512_load_ps(panel + kk * kP + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_set1_ps(TA ? a[kk * lda + r] : a[r * lda + kk]);
      acc0[r] = _mm512_fmadd_ps(v, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(v, b1, acc1[r]);
    }
  }
}

// Rows 0 .. R of C (A's rows from `a`), the 32 columns of `panel` (masked by m0, m1 past n): R x 2
// accumulators over k.
template <int R, bool TA>
__attribute__((target("avx512f"), always_inline)) inline void Tile(const float* a, int64_t lda, const float* panel,
                                                                 int64_t k, float alpha, float beta,
                                                                 const float* bias, bool relu, float* c, int64_t ldc,
                                                                 __mmask16 m0, __mmask16 m1) {
  __m512 acc0[R], acc1[R];
  Sums<R, TA>(a, lda, panel, k, acc0, acc1);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta), zero = _mm512_setzero_ps();
  const __m512 bias0 = bias ? _mm512_maskz_loadu_ps(m0, bias) : zero;
  const __m512 bias1 = bias ? _mm512_maskz_loadu_ps(m1, bias + 16) : zero;
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    __m512 y0 = _mm512_mul_ps(acc0[r], va), y1 = _mm512_mul_ps(acc1[r], va);
    if (beta != 0.0f) {
      y0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), y0);
      y1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), y1);
    }
    if (bias) {
      y0 = _mm512_add_ps(y0, bias0);
      y1 = _mm512_add_ps(y1, bias1);
    }
    if (relu) {  // max(v, +0) gives its second operand for NaN and for zeros of either sign: Relu's bits
      y0 = _mm512_max_ps(y0, zero);
      y1 = _mm512_max_ps(y1, zero);
    }
    _mm512_mask_storeu_ps(row, m0, y0);
    if (m1) _mm512_mask_storeu_ps(row + 16, m1, y1);
  }
}

// Rows 0 .. m of C at columns j0 .. j1 (j0 a multiple of 32): for each panel, every row tile, so that the
// panel is read from L1 or L2 by all of them.
template <bool TA>
__attribute__((target("avx512f"))) void Tiles(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha,
                                              const float* a, int64_t lda, const float* bp, float beta,
                                              const TileEpilogue& ep, float* c, int64_t ldc) {
  const bool relu = ep.relu;
  auto rows = [&](int64_t i) { return TA ? a + i : a + i * lda; };
  for (int64_t j = j0; j < j1; j += kP) {
    const float* panel = bp + j * k;
    const __mmask16 m0 = FirstLanes(j1 - j), m1 = FirstLanes(j1 - j - 16);
    float* cj = c + j;
    const float* bj = ep.bias ? ep.bias + j : nullptr;
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) Tile<8, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, cj + i * ldc, ldc, m0, m1);
    float* ci = cj + i * ldc;
    switch (m - i) {
      case 7: Tile<7, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      case 6: Tile<6, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      case 5: Tile<5, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      case 4: Tile<4, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      case 3: Tile<3, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      case 2: Tile<2, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      case 1: Tile<1, TA>(rows(i), lda, panel, k, alpha, beta, bj, relu, ci, ldc, m0, m1); break;
      default: break;
    }
  }
}

// The same sums with the operands' roles swapped: rows 0 .. R of `b` (B's rows j .. j + R, which are C's
// columns) against A's packed panel (C's rows i .. i + rows, rows <= 32), each element
// sum_k b[r, kk] a[i, kk] by FMAs from zero in k's order; the multiplication commutes, so every sum is
// Tile's bit for bit. The R x 32 sums go through a stack block and are stored transposed, R floats of each
// of C's rows, with Tile's epilogue (alpha, beta C, bias[j .. j + R], the ReLU) in its order.
template <int R>
__attribute__((target("avx512f,avx512vl,fma"), always_inline)) inline void SwappedTile(
    const float* b, int64_t ldb, const float* panel, int64_t k, float alpha, float beta, const float* bias, bool relu,
    float* c, int64_t ldc, int64_t rows) {
  __m512 acc0[R], acc1[R];
  Sums<R, false>(b, ldb, panel, k, acc0, acc1);  // b's rows in a's place: the same products, commuted
  alignas(64) float block[8 * kP];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_store_ps(block + r * kP, acc0[r]);
    _mm512_store_ps(block + r * kP + 16, acc1[r]);
  }
  const __mmask8 cols = static_cast<__mmask8>((1u << R) - 1);
  const __m256i stride = _mm256_setr_epi32(0, kP, 2 * kP, 3 * kP, 4 * kP, 5 * kP, 6 * kP, 7 * kP);
  const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
  const __m256 vbias = bias ? _mm256_maskz_loadu_ps(cols, bias) : _mm256_setzero_ps();
  for (int64_t i = 0; i < rows; ++i) {
    float* row = c + i * ldc;
    __m256 y = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), cols, stride, block + i, 4);
    y = _mm256_mul_ps(y, va);
    if (beta != 0.0f) y = _mm256_fmadd_ps(vb, _mm256_maskz_loadu_ps(cols, row), y);
    if (bias) y = _mm256_add_ps(y, vbias);
    if (relu) y = _mm256_max_ps(y, _mm256_setzero_ps());
    _mm256_mask_storeu_ps(row, cols, y);
  }
}

// Panels p0 .. p1 of op(B) [k, n] into bp: panel p at bp + 32 p k, its row kk the 32 floats of columns
// 32 p .. 32 p + 31 (zeros past n). A transposed B by 16 x 16 blocks in registers, its edges element by
// element.
__attribute__((target("avx512f"))) void Pack(bool tb, int64_t n, int64_t k, const float* b, int64_t ldb, float* bp,
                                             int64_t p0, int64_t p1) {
  const int64_t k16 = k / 16 * 16;
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j = p * kP, w = std::min(kP, n - j);
    float* panel = bp + j * k;
    if (!tb) {
      const __mmask16 m0 = FirstLanes(w), m1 = FirstLanes(w - 16);
      for (int64_t kk = 0; kk < k; ++kk) {
        const float* src = b + kk * ldb + j;
        _mm512_store_ps(panel + kk * kP, _mm512_maskz_loadu_ps(m0, src));
        _mm512_store_ps(panel + kk * kP + 16, _mm512_maskz_loadu_ps(m1, src + 16));
      }
      continue;
    }
    const int64_t w16 = w / 16 * 16;
    for (int64_t q = 0; q < w16; q += 16) {
      for (int64_t kk = 0; kk < k16; kk += 16) Transpose16x16(b + (j + q) * ldb + kk, ldb, panel + kk * kP + q, kP);
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = panel + kk * kP;
      for (int64_t q = kk < k16 ? w16 : 0; q < w; ++q) row[q] = b[(j + q) * ldb + kk];
      std::fill(row + w, row + kP, 0.0f);
    }
  }
}

}  // namespace

bool SmallGemmFits(bool trans_b, int64_t m, int64_t n, int64_t k) {
  if (!HasAvx512() || m <= 0 || n <= 0 || k <= 0 || m > kSmallGemmMax || n > kSmallGemmMax || k > kSmallGemmMax) {
    return false;
  }
  // Past these sizes the library's kernels win (a transposed B is packed element by element here).
  return m * n * k <= (trans_b ? 64 * 64 * 64 : 128 * 128 * 64);
}

void SmallSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // A whole, before the tiles: transposed, their loads would take one line per k step, each a miss.
  if (trans_a) PrefetchRows(a, k, m, lda);
  else PrefetchRows(a, m, k, lda);
  alignas(64) float bp[kSmallPanels];
  Pack(trans_b, n, k, b, ldb, bp, 0, (n + kP - 1) / kP);
  if (trans_a) Tiles<true>(m, 0, n, k, alpha, a, lda, bp, beta, TileEpilogue{}, c, ldc);
  else Tiles<false>(m, 0, n, k, alpha, a, lda, bp, beta, TileEpilogue{}, c, ldc);
}

bool PanelGemmFits(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return HasAvx512() && !trans_a && trans_b && m > 0 && n >= kPanelColumns && k > 0 && !SmallGemmFits(trans_b, m, n, k);
}

int64_t PanelFloats(int64_t n, int64_t k) { return k * ((n + kP - 1) / kP * kP); }

void PackPanels(int64_t n, int64_t k, const float* b, int64_t ldb, float* bp, int64_t p0, int64_t p1) {
  Pack(true, n, k, b, ldb, bp, p0, p1);
}

void PanelTiles(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha, const float* a, int64_t lda,
                const float* bp, float beta, const TileEpilogue& ep, float* c, int64_t ldc) {
  Tiles<false>(m, j0, j1, k, alpha, a, lda, bp, beta, ep, c, ldc);
}

bool PanelGemmSwaps(int64_t m, int64_t n) {
  static const bool vl = __builtin_cpu_supports("avx512vl");
  return vl && m % kP == 0 && m < n;
}

// For each 8 rows of B, every panel of A: B's rows are read as stored, from memory once; the panels stay in
// L2.
__attribute__((target("avx512f,avx512vl,fma"))) void SwappedPanelTiles(int64_t m, int64_t j0, int64_t j1, int64_t k,
                                                                  float alpha, const float* ap, const float* b,
                                                                  int64_t ldb, float beta, const TileEpilogue& ep,
                                                                  float* c, int64_t ldc) {
  const bool relu = ep.relu;
  for (int64_t j = j0; j < j1; j += 8) {
    const float* bj = b + j * ldb;
    const float* biasj = ep.bias ? ep.bias + j : nullptr;
    for (int64_t i = 0; i < m; i += kP) {
      const float* panel = ap + i * k;
      const int64_t rows = std::min(kP, m - i);
      float* ci = c + i * ldc + j;
      switch (std::min<int64_t>(8, j1 - j)) {
        case 8: SwappedTile<8>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        case 7: SwappedTile<7>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        case 6: SwappedTile<6>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        case 5: SwappedTile<5>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        case 4: SwappedTile<4>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        case 3: SwappedTile<3>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        case 2: SwappedTile<2>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
        default: SwappedTile<1>(bj, ldb, panel, k, alpha, beta, biasj, relu, ci, ldc, rows); break;
      }
    }
  }
}

}  // namespace cpu
}  // namespace ontrain
