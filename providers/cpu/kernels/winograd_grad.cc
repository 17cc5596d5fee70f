// Winograd3x3::InputGrad's transforms (winograd.h): the adjoints of the forward pass's. The forward tile
// is y = A^T [sum over c of U .* (B^T d B)] A, so dX's 4x4 block of a tile gets B [sum over o of
// U .* (A f A^T)] B^T, f the tile's 2x2 of dY (zeros past dY's edge), and the blocks of neighbouring tiles
// overlap by two rows or columns, where their values are added:
//   A f = [f0, f0 + f1, f0 - f1, -f1],  B w = [w0, w1 - w2 + w3, w1 + w2 - w0, -w3].
// Each dX entry sums its tiles' values in a fixed order (tile rows, then tiles along the row), so the
// results do not depend on blocks or threads. A weight gradient by the same transforms (F(3x3, 2x2)) was
// measured faster and dropped: see docs/notes.md.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/winograd.h"

namespace ontrain {
namespace cpu {
namespace {

__attribute__((target("avx512f"))) inline __m512 Negate(__m512 x) {
  return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)));
}

// A applied to (x0, x1): the four transformed values.
__attribute__((target("avx512f"))) inline void ApplyA(__m512 x0, __m512 x1, __m512 out[4]) {
  out[0] = x0;
  out[1] = _mm512_add_ps(x0, x1);
  out[2] = _mm512_sub_ps(x0, x1);
  out[3] = Negate(x1);
}

// B applied to w[0], w[s], w[2 s], w[3 s].
__attribute__((target("avx512f"))) inline void ApplyB(const __m512* w, int s, __m512 out[4]) {
  out[0] = w[0];
  out[1] = _mm512_add_ps(_mm512_sub_ps(w[s], w[2 * s]), w[3 * s]);
  out[2] = _mm512_sub_ps(_mm512_add_ps(w[s], w[2 * s]), w[0]);
  out[3] = Negate(w[3 * s]);
}

// row[0 .. n) = (or, adding, +=) the first n of the 32 values (lo, hi).
__attribute__((target("avx512f"))) inline void PutRow(float* row, int64_t n, bool adding, __m512 lo, __m512 hi) {
  const __mmask16 m0 = FirstLanes(n), m1 = FirstLanes(n - 16);
  if (adding) {
    lo = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), lo);
    hi = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), hi);
  }
  _mm512_mask_storeu_ps(row, m0, lo);
  if (n > 16) _mm512_mask_storeu_ps(row + 16, m1, hi);
}

// A f A^T of 16 tiles (f[u][t]: row u, column t of each tile, lanes the tiles) stored at `at` in the 16
// transformed positions' rows of V, `vplane` apart: A along each row, then down the rows (z[m] is position
// 4 m + n).
__attribute__((target("avx512f"), always_inline)) inline void PutTileTransforms(const __m512 f[2][2], float* at,
                                                                              int64_t vplane) {
  __m512 g[2][4];
  for (int u = 0; u < 2; ++u) ApplyA(f[u][0], f[u][1], g[u]);
  for (int n = 0; n < 4; ++n) {
    __m512 z[4];
    ApplyA(g[0][n], g[1][n], z);
    for (int m = 0; m < 4; ++m) _mm512_storeu_ps(at + (4 * m + n) * vplane, z[m]);
  }
}

}  // namespace

__attribute__((target("avx512f"))) void Winograd3x3::TransformOutputGrad(const float* dy, int64_t images,
                                                                         float* v) const {
  // Members copied to locals: the stores through v could alias them, and the compiler reloaded them after
  // each store.
  const int64_t oh = rows_.oh, ow = rows_.ow, osize = oh * ow, cin = cin_, ld = ld_, tiles = tiles_;
  const int64_t th = th_, tw = tw_, vplane = vplane_;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 zero = _mm512_setzero_ps();
  // Each row of V in increasing tile order: a store's lanes past its tiles are written over by the next
  // store or land in the row's slack, as in TransformInput.
  // Rows of up to 8 tiles (dY rows of up to 16): two tile rows per vector, lanes 0 .. tw - 1 the first's
  // tiles and tw .. 2 tw - 1 the second's, picked from the two dY rows of each by one permute (the CNN's
  // 6-tile rows had filled 6 of 16 lanes).
  if (tw <= 8) {
    alignas(64) int32_t pick[2][16];
    for (int t = 0; t < 16; ++t) {
      const int64_t col = t < tw ? 2 * t : t < 2 * tw ? 16 + 2 * (t - tw) : 0;
      pick[0][t] = static_cast<int32_t>(col);
      pick[1][t] = static_cast<int32_t>(col + 1);
    }
    const __m512i pick0 = _mm512_load_si512(pick[0]), pick1 = _mm512_load_si512(pick[1]);
    const __mmask16 cols = FirstLanes(ow);
    for (int64_t c = 0; c < cin; ++c) {
      for (int64_t b = 0; b < images; ++b) {
        const float* d = dy + (b * cin + c) * osize;
        float* vc = v + c * ld + b * tiles;
        for (int64_t i = 0; i < th; i += 2) {
          // dY rows 2 i + u (the first tile row) and 2 i + 2 + u (the second), zeros past dY's last row.
          __m512 f[2][2];
          for (int u = 0; u < 2; ++u) {
            const int64_t r0 = 2 * i + u, r1 = 2 * i + 2 + u;
            const __m512 a = r0 < oh ? _mm512_maskz_loadu_ps(cols, d + r0 * ow) : zero;
            const __m512 e = r1 < oh ? _mm512_maskz_loadu_ps(cols, d + r1 * ow) : zero;
            f[u][0] = _mm512_permutex2var_ps(a, pick0, e);
            f[u][1] = _mm512_permutex2var_ps(a, pick1, e);
          }
          PutTileTransforms(f, vc + i * tw, vplane);
        }
      }
    }
  }
  for (int64_t c = 0; c < cin && tw > 8; ++c) {  // longer rows: 16 tiles of one row a step
    for (int64_t b = 0; b < images; ++b) {
      const float* d = dy + (b * cin + c) * osize;
      float* vc = v + c * ld + b * tiles;
      for (int64_t i = 0; i < th; ++i) {
        const float* r0 = d + 2 * i * ow;
        const bool second = 2 * i + 1 < oh;
        for (int64_t j0 = 0; j0 < tw; j0 += 16) {
          const int64_t cols = ow - 2 * j0;
          const __mmask16 m0 = FirstLanes(cols), m1 = FirstLanes(cols - 16);
          const __m512 a0 = _mm512_maskz_loadu_ps(m0, r0 + 2 * j0), a1 = _mm512_maskz_loadu_ps(m1, r0 + 2 * j0 + 16);
          const __m512 b0 = second ? _mm512_maskz_loadu_ps(m0, r0 + ow + 2 * j0) : zero;
          const __m512 b1 = second ? _mm512_maskz_loadu_ps(m1, r0 + ow + 2 * j0 + 16) : zero;
          // f[u][t]: row u, column t of each tile (lanes: tiles j0 ..).
          const __m512 f[2][2] = {{_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1)},
                                  {_mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)}};
          PutTileTransforms(f, vc + i * tw + j0, vplane);
        }
      }
    }
  }
  const int64_t used = images * tiles, count = (used + 15) / 16 * 16;
  for (int64_t xi = 0; xi < 16; ++xi) {
    for (int64_t c = 0; c < cin; ++c) {
      float* row = v + xi * vplane + c * ld;
      std::fill(row + used, row + count, 0.0f);
    }
  }
}

__attribute__((target("avx512f"))) void Winograd3x3::ScatterInputGrad(const float* m, int64_t kb, int64_t images,
                                                                      float* plane, float* dx) const {
  const PaddedRows pr = rows_;  // locals, as in TransformOutputGrad: the stores could alias the members
  const int64_t isize = pr.h * pr.w, cout = cout_, ld = ld_, tiles = tiles_, th = th_, tw = tw_, wp = wp_;
  const int64_t mplane = mplane_;
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  // (carry, e) -> carry's last lane, then e's first 15: each lane gets its left neighbour's value.
  const __m512i right = _mm512_setr_epi32(15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
  // Rows of up to 7 tiles (padded planes up to 16 wide): two tile rows per vector, the first's tiles in lanes
  // 0 .. tw - 1, an empty lane for its last tile's columns 2 and 3, the second's in tw + 1 .. 2 tw; each
  // plane row is then one vector. The sums are the one-row loop's: each block row combined with its left
  // neighbour's first (the left of each row's first tile +0), then the two tile rows' overlapping plane rows
  // added, the second's after the first's.
  if (tw <= 7) {
    alignas(64) int32_t tables[4][16];
    for (int t = 0; t < 16; ++t) {
      tables[0][t] = t <= tw ? t : t - 1;                                // lane t's tile from the row's first
      tables[1][t] = (t + 15) % 16;                                      // the lane to the left
      tables[2][t] = (t % 2 ? 16 : 0) + t / 2;                           // the first row's columns
      tables[3][t] = (t % 2 ? 16 : 0) + static_cast<int>(tw) + 1 + t / 2;  // the second's
    }
    const __m512i spread = _mm512_load_si512(tables[0]), left = _mm512_load_si512(tables[1]);
    const __m512i first = _mm512_load_si512(tables[2]), second = _mm512_load_si512(tables[3]);
    const __mmask16 one_row = FirstLanes(tw);
    const __mmask16 two_rows = static_cast<__mmask16>(one_row | (FirstLanes(2 * tw + 1) & ~FirstLanes(tw + 1)));
    const __mmask16 has_left = static_cast<__mmask16>(0xffff & ~1u & ~(1u << (tw + 1)));
    for (int64_t r = 0; r < kBlock && kb * kBlock + r < cout; ++r) {
      const int64_t o = kb * kBlock + r;
      for (int64_t b = 0; b < images; ++b) {
        const float* mo = m + r * ld + b * tiles;
        for (int64_t i = 0; i < th; i += 2) {
          const bool pair = i + 1 < th;
          const __mmask16 tiles_in = pair ? two_rows : one_row;
          __m512 q[16];
          for (int k = 0; k < 16; ++k) {
            q[k] = _mm512_maskz_permutexvar_ps(tiles_in, spread, _mm512_loadu_ps(mo + k * mplane + i * tw));
          }
          __m512 s[4][4];
          for (int n = 0; n < 4; ++n) {
            __m512 t[4];
            ApplyB(q + n, 4, t);
            for (int p = 0; p < 4; ++p) s[p][n] = t[p];
          }
          __m512 row_a[4], row_b[4];
          for (int p = 0; p < 4; ++p) {
            __m512 e[4];
            ApplyB(s[p], 1, e);
            const __m512 even = _mm512_add_ps(e[0], _mm512_maskz_permutexvar_ps(has_left, left, e[2]));
            const __m512 odd = _mm512_add_ps(e[1], _mm512_maskz_permutexvar_ps(has_left, left, e[3]));
            row_a[p] = _mm512_permutex2var_ps(even, first, odd);
            row_b[p] = _mm512_permutex2var_ps(even, second, odd);
          }
          float* row = plane + 2 * i * wp;
          const __m512 zero = _mm512_setzero_ps();
          PutRow(row, wp, i > 0, row_a[0], zero);
          PutRow(row + wp, wp, i > 0, row_a[1], zero);
          if (pair) {
            PutRow(row + 2 * wp, wp, false, _mm512_add_ps(row_a[2], row_b[0]), zero);
            PutRow(row + 3 * wp, wp, false, _mm512_add_ps(row_a[3], row_b[1]), zero);
            PutRow(row + 4 * wp, wp, false, row_b[2], zero);
            PutRow(row + 5 * wp, wp, false, row_b[3], zero);
          } else {
            PutRow(row + 2 * wp, wp, false, row_a[2], zero);
            PutRow(row + 3 * wp, wp, false, row_a[3], zero);
          }
        }
        float* out = dx + (b * cout + o) * isize;
        for (int64_t y = 0; y < pr.h; ++y) {
          std::memcpy(out + y * pr.w, plane + (y + pr.pt) * wp + pr.pl, pr.w * sizeof(float));
        }
      }
    }
    return;
  }
  for (int64_t r = 0; r < kBlock && kb * kBlock + r < cout; ++r) {
    const int64_t o = kb * kBlock + r;
    for (int64_t b = 0; b < images; ++b) {
      // Each 4x4 block's rows go into the plane's rows 2 i .. 2 i + 3: rows 2 and 3 are stored (their first
      // values), rows 0 and 1 added to the previous tile row's. Along a row, columns 2 j and 2 j + 1 take
      // the block's columns 0 and 1 plus the left neighbour's 2 and 3 (a lane to the right; across
      // segments, carried). Each plane entry is stored before it is added to, so the plane needs no zeros.
      const float* mo = m + r * ld + b * tiles;
      for (int64_t i = 0; i < th; ++i) {
        __m512 carry[4][2];
        for (int p = 0; p < 4; ++p) carry[p][0] = carry[p][1] = _mm512_setzero_ps();
        for (int64_t j0 = 0; j0 < tw; j0 += 16) {
          const int64_t lanes = std::min<int64_t>(16, tw - j0);
          __m512 q[16];
          for (int k = 0; k < 16; ++k) q[k] = _mm512_maskz_loadu_ps(FirstLanes(lanes), mo + k * mplane + i * tw + j0);
          __m512 s[4][4];  // s[p][n]: B down the transformed rows
          for (int n = 0; n < 4; ++n) {
            __m512 t[4];
            ApplyB(q + n, 4, t);
            for (int p = 0; p < 4; ++p) s[p][n] = t[p];
          }
          // The segment's columns: whole vectors, or up to the last tile's columns 2 and 3.
          const int64_t n = lanes == 16 ? 32 : 2 * lanes + 2;
          for (int p = 0; p < 4; ++p) {
            __m512 e[4];  // e[k]: column 2 j + k of the block's row p
            ApplyB(s[p], 1, e);
            const __m512 left2 = _mm512_permutex2var_ps(carry[p][0], right, e[2]);
            const __m512 left3 = _mm512_permutex2var_ps(carry[p][1], right, e[3]);
            const __m512 even = _mm512_add_ps(e[0], left2), odd = _mm512_add_ps(e[1], left3);
            float* row = plane + (2 * i + p) * wp + 2 * j0;
            const bool adding = p < 2 && i > 0;
            PutRow(row, n, adding, _mm512_permutex2var_ps(even, lo, odd), _mm512_permutex2var_ps(even, hi, odd));
            carry[p][0] = e[2];
            carry[p][1] = e[3];
            if (lanes == 16 && j0 + 16 == tw) {  // the last tile's columns 2 and 3 past the segment
              const __m512 tail = _mm512_permutex2var_ps(e[2], _mm512_setr_epi32(15, 31, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                                                 0, 0, 0, 0, 0), e[3]);
              PutRow(row + 32, 2, adding, tail, _mm512_setzero_ps());
            }
          }
        }
      }
      float* out = dx + (b * cout + o) * isize;
      for (int64_t y = 0; y < pr.h; ++y) {
        std::memcpy(out + y * pr.w, plane + (y + pr.pt) * wp + pr.pl, pr.w * sizeof(float));
      }
    }
  }
}

}  // namespace cpu
}  // namespace ontrain
