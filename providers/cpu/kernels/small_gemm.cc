// Small float32 GEMMs on AVX-512 (see small_gemm.h).
#include "providers/cpu/kernels/small_gemm.h"

#include "providers/cpu/kernels/common.h"

#include <immintrin.h>

#include <algorithm>

namespace ontrain {
namespace cpu {
namespace {

constexpr int64_t kPanel = kSmallGemmMax * kSmallGemmMax;  // floats of the packed B (k rows of <= 128 columns)

// Rows i0 .. i0 + R of C, columns j .. j + 32 (masked by m0, m1 past n): R x 2 accumulators over k.
template <int R, bool TA>
__attribute__((target("avx512f"), always_inline)) inline void Tile(const float* a, int64_t lda, const float* bp,
                                                                 int64_t np, int64_t k, int64_t i0, int64_t j,
                                                                 float alpha, float beta, float* c, int64_t ldc,
                                                                 __mmask16 m0, __mmask16 m1) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const float* ar = TA ? a + i0 : a + i0 * lda;
  for (int64_t kk = 0; kk < k; ++kk) {
    const __m512 b0 = _mm512_load_ps(bp + kk * np + j);
    const __m512 b1 = _mm512_load_ps(bp + kk * np + j + 16);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_set1_ps(TA ? ar[kk * lda + r] : ar[r * lda + kk]);
      acc0[r] = _mm512_fmadd_ps(v, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(v, b1, acc1[r]);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* row = c + (i0 + r) * ldc + j;
    __m512 y0 = _mm512_mul_ps(acc0[r], va), y1 = _mm512_mul_ps(acc1[r], va);
    if (beta != 0.0f) {
      y0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, row), y0);
      y1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, row + 16), y1);
    }
    _mm512_mask_storeu_ps(row, m0, y0);
    if (m1) _mm512_mask_storeu_ps(row + 16, m1, y1);
  }
}

template <bool TA>
__attribute__((target("avx512f"))) void Tiles(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                                              const float* bp, int64_t np, float beta, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; j += 32) {
    const __mmask16 m0 = FirstLanes(n - j), m1 = FirstLanes(n - j - 16);
    int64_t i = 0;
    for (; i + 8 <= m; i += 8) Tile<8, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1);
    switch (m - i) {
      case 7: Tile<7, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      case 6: Tile<6, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      case 5: Tile<5, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      case 4: Tile<4, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      case 3: Tile<3, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      case 2: Tile<2, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      case 1: Tile<1, TA>(a, lda, bp, np, k, i, j, alpha, beta, c, ldc, m0, m1); break;
      default: break;
    }
  }
}

void Run(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
         int64_t ldb, float beta, float* c, int64_t ldc) {
  // A whole, before the tiles: transposed, their loads would take one line per k step, each a miss.
  if (ta) PrefetchRows(a, k, m, lda);
  else PrefetchRows(a, m, k, lda);
  // B as k rows of np (n rounded up to 32) floats, zeros past n, 64-byte aligned; a transposed B by 16 x 16
  // blocks in registers, its edges element by element.
  alignas(64) float bp[kPanel];
  const int64_t np = (n + 31) / 32 * 32;
  if (tb) {
    const int64_t n16 = n / 16 * 16, k16 = k / 16 * 16;
    for (int64_t j = 0; j < n16; j += 16) {
      for (int64_t kk = 0; kk < k16; kk += 16) Transpose16x16(b + j * ldb + kk, ldb, bp + kk * np + j, np);
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = bp + kk * np;
      for (int64_t j = kk < k16 ? n16 : 0; j < n; ++j) row[j] = b[j * ldb + kk];
      std::fill(row + n, row + np, 0.0f);
    }
  } else {
    for (int64_t kk = 0; kk < k; ++kk) {
      float* row = bp + kk * np;
      std::copy_n(b + kk * ldb, n, row);
      std::fill(row + n, row + np, 0.0f);
    }
  }
  if (ta) Tiles<true>(m, n, k, alpha, a, lda, bp, np, beta, c, ldc);
  else Tiles<false>(m, n, k, alpha, a, lda, bp, np, beta, c, ldc);
}

}  // namespace

bool SmallGemmFits(bool trans_b, int64_t m, int64_t n, int64_t k) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 || m <= 0 || n <= 0 || k <= 0 || m > kSmallGemmMax || n > kSmallGemmMax || k > kSmallGemmMax) return false;
  // Past these sizes the library's kernels win (a transposed B is packed element by element here).
  return m * n * k <= (trans_b ? 64 * 64 * 64 : 128 * 128 * 64);
}

void SmallSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  Run(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace cpu
}  // namespace ontrain
