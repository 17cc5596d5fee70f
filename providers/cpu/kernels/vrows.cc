// The per-ISA row loops of vrows.h.
#include "providers/cpu/kernels/vrows.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace ontrain {
namespace cpu {
namespace {

// Under ThreadSanitizer one baseline version: the clones' ifunc resolvers run during relocation, before
// its runtime starts, and crash there.
#if defined(__SANITIZE_THREAD__)
#define ONT_VROWS_CLONES
#else
#define ONT_VROWS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

ONT_VROWS_CLONES double SumLoop(const float* x, int64_t n) {
  return LaneSum(n, [x](int64_t i) { return static_cast<double>(x[i]); });
}

ONT_VROWS_CLONES double SumSqDevLoop(const float* x, int64_t n, double mean) {
  return LaneSum(n, [x, mean](int64_t i) {
    double d = static_cast<double>(x[i]) - mean;
    return d * d;
  });
}

ONT_VROWS_CLONES double SumDotDevLoop(const float* g, const float* x, int64_t n, double mean, double inv) {
  return LaneSum(n, [g, x, mean, inv](int64_t i) { return static_cast<double>(g[i]) * (x[i] - mean) * inv; });
}

// SumLoop(g) and SumDotDevLoop(g, x) in one pass: the same lanes, expressions and final order, so the same
// two results (LaneSum's lanes for rows of n). g(i) gives element i of the gradient row (read, or made on
// the way: AffineClipGradSumsLoop), so every caller sums with these expressions.
template <int L, typename G>
__attribute__((always_inline)) inline void SumAndDotDevLanes(G g, const float* x, int64_t n, double mean, double inv,
                                                             double* sum, double* dot) {
  double ps[L] = {}, pd[L] = {};
  ForLanes<L>(n, [&](int64_t i, int j) {
    const float v = g(i);
    ps[j] += static_cast<double>(v);
    pd[j] += static_cast<double>(v) * (x[i] - mean) * inv;
  });
  *sum = LaneTotal<L>(ps);
  *dot = LaneTotal<L>(pd);
}

template <typename G>
__attribute__((always_inline)) inline void SumAndDotDevOf(G g, const float* x, int64_t n, double mean, double inv,
                                                          double* sum, double* dot) {
  if (n >= kLongRow) SumAndDotDevLanes<kSumLanes>(g, x, n, mean, inv, sum, dot);
  else SumAndDotDevLanes<8>(g, x, n, mean, inv, sum, dot);
}

ONT_VROWS_CLONES void SumAndDotDevLoop(const float* g, const float* x, int64_t n, double mean, double inv, double* sum,
                                       double* dot) {
  SumAndDotDevOf([g](int64_t i) { return g[i]; }, x, n, mean, inv, sum, dot);
}

// LayerNormalization's rows: the same float expressions as the generic kernels, vectorized per ISA.
ONT_VROWS_CLONES void LayerNormAffineLoop(const float* x, const float* s, const float* b, float* y, int64_t n,
                                          float mean, float inv) {
  if (b == nullptr) {
    for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * s[i];
    return;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv * s[i] + b[i];
}

template <int L>
__attribute__((always_inline)) inline void LayerNormGradSumsLanes(const float* g, const float* x, const float* s,
                                                                  int64_t n, float mu, float is, float* ds, float* db,
                                                                  double* mb, double* mbx) {
  double pb[L] = {}, pbx[L] = {};
  ForLanes<L>(n, [&](int64_t i, int j) {
    const float xh = (x[i] - mu) * is, b = g[i] * s[i] * is;
    ds[i] += g[i] * xh;
    db[i] += g[i];
    pb[j] += static_cast<double>(b);
    pbx[j] += static_cast<double>(b) * xh;
  });
  *mb = LaneTotal<L>(pb);
  *mbx = LaneTotal<L>(pbx);
}

ONT_VROWS_CLONES void LayerNormGradSumsLoop(const float* g, const float* x, const float* s, int64_t n, float mu,
                                            float is, float* ds, float* db, double* mb, double* mbx) {
  if (n >= kLongRow) LayerNormGradSumsLanes<kSumLanes>(g, x, s, n, mu, is, ds, db, mb, mbx);
  else LayerNormGradSumsLanes<8>(g, x, s, n, mu, is, ds, db, mb, mbx);
}

ONT_VROWS_CLONES void LayerNormGradDxLoop(const float* g, const float* x, const float* s, float* dx, int64_t n,
                                          float mu, float is, float mb, float mbx) {
  for (int64_t i = 0; i < n; ++i) {
    const float xh = (x[i] - mu) * is, b = g[i] * s[i] * is;
    dx[i] = b - mb - xh * mbx;
  }
}

ONT_VROWS_CLONES void AffineLoop(const float* x, float* y, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

ONT_VROWS_CLONES void AffineReluLoop(const float* x, float* y, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * a + b;
    y[i] = v > 0.0f ? v : 0.0f;
  }
}

ONT_VROWS_CLONES void AffineClipLoop(const float* x, float* y, int64_t n, float a, float b, float lo, float hi) {
  for (int64_t i = 0; i < n; ++i) {
    float v = x[i] * a + b;
    v = v < lo ? lo : v;
    y[i] = v > hi ? hi : v;
  }
}

// The activation's gradient of rows y = x * a + b (AffineLoop's values) written to out, and
// SumAndDotDevLoop's two sums of it in the same pass.
ONT_VROWS_CLONES void AffineReluGradSumsLoop(const float* x, const float* g, float* out, int64_t n, float a, float b,
                                             double mean, double inv, double* sum, double* dot) {
  auto grad = [&](int64_t i) {
    const float y = x[i] * a + b;
    return out[i] = y > 0.0f ? g[i] : 0.0f;
  };
  SumAndDotDevOf(grad, x, n, mean, inv, sum, dot);
}

ONT_VROWS_CLONES void AffineClipGradSumsLoop(const float* x, const float* g, float* out, int64_t n, float a, float b,
                                             float lo, float hi, float fill, double mean, double inv, double* sum,
                                             double* dot) {
  auto grad = [&](int64_t i) {
    const float y = x[i] * a + b;
    return out[i] = (y >= lo) & (y <= hi) ? g[i] : fill;
  };
  SumAndDotDevOf(grad, x, n, mean, inv, sum, dot);
}

ONT_VROWS_CLONES void BatchNormGradLoop(const float* g, const float* x, float* dx, int64_t n, double mean, double inv,
                                        double coef, double m, double db, double ds) {
  for (int64_t i = 0; i < n; ++i) {
    double xh = (x[i] - mean) * inv;
    double gi = g[i];
    dx[i] = static_cast<float>(coef * (m * gi - db - xh * ds));
  }
}

// o[i] = c[i] ? x[i * sx] : y[i * sy] as a mask blend: both values are loaded, no branch (a random mask
// made the branchy loop mispredict about every other element: 4.4 ns per element on the MobileNet's ReLU6
// gradients).
template <int64_t SX, int64_t SY>
__attribute__((always_inline)) inline void SelectLoop(const uint8_t* c, const uint32_t* x, const uint32_t* y,
                                                      uint32_t* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t m = 0u - static_cast<uint32_t>(c[i] != 0);
    o[i] = (x[i * SX] & m) | (y[i * SY] & ~m);
  }
}

ONT_VROWS_CLONES void Select32Loop(const uint8_t* c, const uint32_t* x, bool x_whole, const uint32_t* y,
                                   bool y_whole, uint32_t* o, int64_t n) {
  if (x_whole && y_whole) return SelectLoop<1, 1>(c, x, y, o, n);
  if (x_whole) return SelectLoop<1, 0>(c, x, y, o, n);
  if (y_whole) return SelectLoop<0, 1>(c, x, y, o, n);
  SelectLoop<0, 0>(c, x, y, o, n);
}

// Max pooling of one output row, scalar: the visiting order and first-maximum rule of VRowMaxPool.
void MaxPoolRowScalar(const float* x, int64_t wd, int64_t kh, int64_t kw, int64_t sw, int64_t n, float* y,
                      int64_t* ind, int64_t ind_base) {
  for (int64_t j = 0; j < n; ++j) {
    float best = std::numeric_limits<float>::lowest();
    int32_t at = static_cast<int32_t>(j * sw);
    for (int64_t a = 0; a < kh; ++a) {
      for (int64_t b = 0; b < kw; ++b) {
        const int64_t off = a * wd + j * sw + b;
        if (x[off] > best) {
          best = x[off];
          at = static_cast<int32_t>(off);
        }
      }
    }
    y[j] = best;
    if (ind) ind[j] = ind_base + at;
  }
}

// ind[0 .. 16) = base + the int32 offsets in `at`, widened in registers, 8 per store; lanes outside `valid`
// are not written.
__attribute__((target("avx512f"), always_inline)) inline void StoreIndices(__m512i at, __m512i base, __mmask16 valid,
                                                                         int64_t* ind) {
  const __m512i lo = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(at)), base);
  const __m512i hi = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1)), base);
  _mm512_mask_storeu_epi64(ind, static_cast<__mmask8>(valid & 0xff), lo);
  if (valid >> 8) _mm512_mask_storeu_epi64(ind + 8, static_cast<__mmask8>(valid >> 8), hi);
}

// The same, 16 windows per AVX-512 vector: loads for stride 1, two loads and a permute for stride 2,
// masked gathers otherwise. Loads are masked (masked-off lanes touch no memory) only where a full vector
// would read past the `readable` floats from x; unmasked loads were measured 2x faster on Zen 5, and most
// rows have whole planes after them. GCC's own vectorization of the select loop left its remainder as
// scalar branches, which dominate on short rows; gathers were measured slower than the permute.
__attribute__((target("avx512f"))) void MaxPoolRowAvx512(const float* x, int64_t wd, int64_t kh, int64_t kw,
                                                         int64_t sw, int64_t n, int64_t readable, float* y,
                                                         int64_t* ind, int64_t ind_base) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i lane_off = _mm512_mullo_epi32(lane, _mm512_set1_epi32(static_cast<int32_t>(sw)));
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  const __m512i even = _mm512_add_epi32(lane, lane);
  const __m512i base64 = _mm512_set1_epi64(ind_base);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int64_t m = std::min<int64_t>(16, n - j0);
    const __mmask16 valid = static_cast<__mmask16>((1u << m) - 1);
    const int64_t span = 2 * m - 1;  // stride 2: the elements from a window's column to the last one read
    // Whole vectors when the last window row's reads stay inside the readable floats.
    const bool whole = j0 * sw + (kh - 1) * wd + (kw - 1) + 32 <= readable;
    const __mmask16 load_mask = whole ? static_cast<__mmask16>(0xffffu) : valid;
    const __mmask16 lo_mask = whole || span >= 16 ? static_cast<__mmask16>(0xffffu) : static_cast<__mmask16>((1u << span) - 1);
    const __mmask16 hi_mask = whole ? static_cast<__mmask16>(0xffffu)
                                    : static_cast<__mmask16>(span > 16 ? (1u << (span - 16)) - 1 : 0u);
    const int32_t base = static_cast<int32_t>(j0 * sw);
    __m512 best = lowest;
    __m512i at = _mm512_add_epi32(lane_off, _mm512_set1_epi32(base));
    for (int64_t a = 0; a < kh; ++a) {
      for (int64_t b = 0; b < kw; ++b) {
        const int32_t off = static_cast<int32_t>(a * wd + b) + base;
        __m512 v;
        if (sw == 1) {
          v = _mm512_maskz_loadu_ps(load_mask, x + off);
        } else if (sw == 2) {
          v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(lo_mask, x + off), even,
                                     _mm512_maskz_loadu_ps(hi_mask, x + off + 16));
        } else {
          v = _mm512_mask_i32gather_ps(lowest, valid, lane_off, x + off, 4);
        }
        const __mmask16 gt = _mm512_mask_cmp_ps_mask(valid, v, best, _CMP_GT_OQ);
        best = _mm512_mask_mov_ps(best, gt, v);
        at = _mm512_mask_mov_epi32(at, gt, _mm512_add_epi32(lane_off, _mm512_set1_epi32(off)));
      }
    }
    _mm512_mask_storeu_ps(y + j0, valid, best);
    if (ind) StoreIndices(at, base64, valid, ind + j0);
  }
}

// VPlaneMaxPool on AVX-512: per plane, 16 outputs at a time, each window element a masked gather (lanes
// past the plane's end read nothing).
__attribute__((target("avx512f"))) void PlaneMaxPoolAvx512(const float* x, int64_t isize, const int32_t* corner,
                                                           int64_t osize, int64_t kh, int64_t kw, int64_t wd,
                                                           int64_t p0, int64_t p1, float* y, int64_t* ind) {
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  for (int64_t p = p0; p < p1; ++p) {
    const float* px = x + p * isize;
    const __m512i base64 = _mm512_set1_epi64(p * isize);
    for (int64_t o = 0; o < osize; o += 16) {
      const int64_t m = std::min<int64_t>(16, osize - o);
      const __mmask16 valid = static_cast<__mmask16>((1u << m) - 1);
      const __m512i c = _mm512_maskz_loadu_epi32(valid, corner + o);
      __m512 best = lowest;
      __m512i at = c;
      for (int64_t a = 0; a < kh; ++a) {
        for (int64_t b = 0; b < kw; ++b) {
          const __m512i off = _mm512_add_epi32(c, _mm512_set1_epi32(static_cast<int32_t>(a * wd + b)));
          const __m512 v = _mm512_mask_i32gather_ps(lowest, valid, off, px, 4);
          const __mmask16 gt = _mm512_mask_cmp_ps_mask(valid, v, best, _CMP_GT_OQ);
          best = _mm512_mask_mov_ps(best, gt, v);
          at = _mm512_mask_mov_epi32(at, gt, off);
        }
      }
      const int64_t q = p * osize + o;
      _mm512_mask_storeu_ps(y + q, valid, best);
      if (ind) StoreIndices(at, base64, valid, ind + q);
    }
  }
}

// VRowsGather2 and VRowsScatterAdd2 on AVX-512, 16 elements of the short row a step: the 32 floats of the
// long row under them loaded (masked to the last element touched), the even lanes picked by a permute, or
// the short row's values spread to the even lanes and added under an even-lane mask. The masks of a row's
// last step are the same for every row.
struct Stride2Tail {
  int64_t whole;  // elements in whole steps of 16
  __mmask16 valid, lo, hi;  // the last step: short-row lanes, long-row lanes in its two vectors
  explicit Stride2Tail(int64_t n) : whole(n / 16 * 16) {
    const int64_t m = n - whole, span = 2 * m - 1;
    valid = static_cast<__mmask16>((1u << m) - 1);
    lo = static_cast<__mmask16>(m == 0 ? 0u : span >= 16 ? 0xffffu : (1u << span) - 1);
    hi = static_cast<__mmask16>(span > 16 ? (1u << (span - 16)) - 1 : 0u);
  }
};

__attribute__((target("avx512f"))) void Gather2Avx512(const float* x, int64_t x_ld, float* d, int64_t d_ld,
                                                      int64_t rows, int64_t n) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const Stride2Tail t(n);
  for (int64_t r = 0; r < rows; ++r, x += x_ld, d += d_ld) {
    for (int64_t j = 0; j < t.whole; j += 16) {
      // The last element read is x[2 j + 30]: a full second vector would read one past it.
      const __m512 v = _mm512_permutex2var_ps(_mm512_loadu_ps(x + 2 * j), even,
                                              _mm512_maskz_loadu_ps(0x7fff, x + 2 * j + 16));
      _mm512_storeu_ps(d + j, v);
    }
    if (t.valid) {
      const int64_t j = t.whole;
      const __m512 v = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(t.lo, x + 2 * j), even,
                                              _mm512_maskz_loadu_ps(t.hi, x + 2 * j + 16));
      _mm512_mask_storeu_ps(d + j, t.valid, v);
    }
  }
}

// One step of ScatterAdd2Avx512: the 16 floats of s under `valid` spread to the even lanes of p's two
// vectors (long-row lanes lo and hi) and added there.
__attribute__((target("avx512f"), always_inline)) inline void ScatterAdd2Step(const float* s, float* p, __mmask16 valid,
                                                                             __mmask16 lo, __mmask16 hi) {
  const __m512i spread_lo = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  const __m512i spread_hi = _mm512_setr_epi32(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
  const __mmask16 even = 0x5555;
  const __m512 v = _mm512_maskz_loadu_ps(valid, s);
  _mm512_mask_storeu_ps(p, lo & even, _mm512_add_ps(_mm512_maskz_loadu_ps(lo, p), _mm512_permutexvar_ps(spread_lo, v)));
  if (hi) {
    _mm512_mask_storeu_ps(p + 16, hi & even,
                          _mm512_add_ps(_mm512_maskz_loadu_ps(hi, p + 16), _mm512_permutexvar_ps(spread_hi, v)));
  }
}

__attribute__((target("avx512f"))) void ScatterAdd2Avx512(const float* s, int64_t s_ld, float* d, int64_t d_ld,
                                                          int64_t rows, int64_t n) {
  const Stride2Tail t(n);
  for (int64_t r = 0; r < rows; ++r, s += s_ld, d += d_ld) {
    for (int64_t j = 0; j < t.whole; j += 16) ScatterAdd2Step(s + j, d + 2 * j, 0xffff, 0xffff, 0x7fff);
    if (t.valid) ScatterAdd2Step(s + t.whole, d + 2 * t.whole, t.valid, t.lo, t.hi);
  }
}

// VPlanesMaxPool2x2 on AVX-512: per output row, 16 outputs a step; the window's four elements in visiting
// order are the even and odd columns of its two rows. kCodes: window codes (WindowCode) instead of indices.
template <bool kCodes>
__attribute__((target("avx512f"))) void PlanesMaxPool2x2Avx512(const float* x, int64_t h, int64_t wd, int64_t oh,
                                                               int64_t ow, int64_t p0, int64_t p1, float* y,
                                                               int64_t* ind, int64_t ind_base, uint8_t* codes) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  const int64_t isize = h * wd;
  for (int64_t p = p0; p < p1; ++p) {
    const float* px = x + p * isize;
    const __m512i base64 = _mm512_set1_epi64(ind_base + p * isize);
    for (int64_t i = 0; i < oh; ++i) {
      const float* r0 = px + 2 * i * wd;
      const float* r1 = r0 + wd;
      const int64_t o = (p * oh + i) * ow;
      for (int64_t j = 0; j < ow; j += 16) {
        const int64_t m = std::min<int64_t>(16, ow - j), span = 2 * m;  // columns read: 2 j .. 2 j + span - 1
        const __mmask16 valid = static_cast<__mmask16>((1u << m) - 1);
        const __mmask16 lo = static_cast<__mmask16>(span >= 16 ? 0xffffu : (1u << span) - 1);
        const __mmask16 hi = static_cast<__mmask16>(span > 16 ? (span >= 32 ? 0xffffu : (1u << (span - 16)) - 1) : 0u);
        const __m512 a0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * j), a1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * j + 16);
        const __m512 b0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * j), b1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * j + 16);
        const __m512 v[4] = {_mm512_permutex2var_ps(a0, even, a1), _mm512_permutex2var_ps(a0, odd, a1),
                             _mm512_permutex2var_ps(b0, even, b1), _mm512_permutex2var_ps(b0, odd, b1)};
        __m512 best = lowest;
        if constexpr (kCodes) {
          // The window position k = 2 a + b of the first maximum, then 4 added where that maximum is positive.
          __m512i slot = _mm512_setzero_si512();
          for (int k = 0; k < 4; ++k) {
            const __mmask16 gt = _mm512_mask_cmp_ps_mask(valid, v[k], best, _CMP_GT_OQ);
            best = _mm512_mask_mov_ps(best, gt, v[k]);
            slot = _mm512_mask_mov_epi32(slot, gt, _mm512_set1_epi32(k));
          }
          const __mmask16 pos = _mm512_mask_cmp_ps_mask(valid, best, _mm512_setzero_ps(), _CMP_GT_OQ);
          slot = _mm512_mask_or_epi32(slot, pos, slot, _mm512_set1_epi32(kWindowCodePositive));
          _mm512_mask_storeu_ps(y + o + j, valid, best);
          _mm512_mask_cvtepi32_storeu_epi8(codes + o + j, valid, slot);
        } else {
          // Offset of (window row a, column b) for lane t: (2 i + a) * wd + 2 (j + t) + b.
          const __m512i col = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * i * wd + 2 * j)),
                                               _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1));
          const int32_t step[4] = {0, 1, static_cast<int32_t>(wd), static_cast<int32_t>(wd + 1)};
          __m512i at = col;
          for (int k = 0; k < 4; ++k) {
            const __mmask16 gt = _mm512_mask_cmp_ps_mask(valid, v[k], best, _CMP_GT_OQ);
            best = _mm512_mask_mov_ps(best, gt, v[k]);
            at = _mm512_mask_mov_epi32(at, gt, _mm512_add_epi32(col, _mm512_set1_epi32(step[k])));
          }
          _mm512_mask_storeu_ps(y + o + j, valid, best);
          if (ind) StoreIndices(at, base64, valid, ind + o + j);
        }
      }
    }
  }
}

// VPlanesMaxUnpool2x2 on AVX-512: per pooled row, 16 windows a step. Each window's element of offset d
// from its top-left (0, 1, wd, wd + 1) takes the window's value, the other three +0; the even and odd
// columns of both output rows are interleaved by permutes, as PlanesMaxPool2x2Avx512 splits them.
__attribute__((target("avx512f"))) bool PlanesMaxUnpool2x2Avx512(const float* g, const float* z, const int64_t* ind,
                                                                 int64_t ind_base, int64_t h, int64_t wd, int64_t oh,
                                                                 int64_t ow, int64_t p0, int64_t p1, float* x) {
  const __m512i lo_mix = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_mix = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512i lanes2 = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i one = _mm512_set1_epi32(1), row = _mm512_set1_epi32(static_cast<int32_t>(wd)),
                row1 = _mm512_set1_epi32(static_cast<int32_t>(wd + 1));
  const __m512i lim = _mm512_set1_epi64(std::numeric_limits<int32_t>::max());
  const int64_t isize = h * wd, osize = oh * ow;
  for (int64_t p = p0; p < p1; ++p) {
    float* px = x + p * isize;
    const __m512i base64 = _mm512_set1_epi64(ind_base + p * isize);
    for (int64_t i = 0; i < oh; ++i) {
      float* r0 = px + 2 * i * wd;
      float* r1 = r0 + wd;
      const int64_t o = p * osize + i * ow;
      for (int64_t j = 0; j < ow; j += 16) {
        const int64_t m = std::min<int64_t>(16, ow - j), span = 2 * m;
        const __mmask16 valid = static_cast<__mmask16>((1u << m) - 1);
        const __mmask16 lo = static_cast<__mmask16>(span >= 16 ? 0xffffu : (1u << span) - 1);
        const __mmask16 hi = static_cast<__mmask16>(span > 16 ? (span >= 32 ? 0xffffu : (1u << (span - 16)) - 1) : 0u);
        // The indices as offsets from the windows' top-left corners, in int32 (a lane outside `valid`
        // reads nothing and is never tested).
        const __m512i i0 = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(valid & 0xff), ind + o + j), base64);
        const __m512i i1 = _mm512_sub_epi64(_mm512_maskz_loadu_epi64(static_cast<__mmask8>(valid >> 8), ind + o + j + 8), base64);
        // Offsets outside 0 .. INT32_MAX (unsigned compare: negatives too) cannot lie in their window; the
        // truncation below would hide them.
        const __mmask8 v0 = static_cast<__mmask8>(valid & 0xff), v1 = static_cast<__mmask8>(valid >> 8);
        if (_mm512_mask_cmpgt_epu64_mask(v0, i0, lim) | _mm512_mask_cmpgt_epu64_mask(v1, i1, lim)) return false;
        const __m512i off = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi64_epi32(i0)), _mm512_cvtepi64_epi32(i1), 1);
        const __m512i d = _mm512_sub_epi32(off, _mm512_add_epi32(_mm512_set1_epi32(static_cast<int32_t>(2 * i * wd + 2 * j)), lanes2));
        const __mmask16 at00 = _mm512_mask_cmpeq_epi32_mask(valid, d, _mm512_setzero_si512());
        const __mmask16 at01 = _mm512_mask_cmpeq_epi32_mask(valid, d, one);
        const __mmask16 at10 = _mm512_mask_cmpeq_epi32_mask(valid, d, row);
        const __mmask16 at11 = _mm512_mask_cmpeq_epi32_mask(valid, d, row1);
        if (static_cast<__mmask16>(at00 | at01 | at10 | at11) != valid) return false;
        // The window's value: dY, shut (+0) where the pooled value is not positive; then +0 + value, the
        // scatter's addition into a zeroed plane (-0 becomes +0, NaN stays NaN).
        __m512 v = _mm512_maskz_loadu_ps(valid, g + o + j);
        if (z != nullptr) v = _mm512_maskz_mov_ps(_mm512_mask_cmp_ps_mask(valid, _mm512_maskz_loadu_ps(valid, z + o + j), zero, _CMP_GT_OQ), v);
        v = _mm512_add_ps(zero, v);
        const __m512 e0 = _mm512_maskz_mov_ps(at00, v), o0 = _mm512_maskz_mov_ps(at01, v);
        const __m512 e1 = _mm512_maskz_mov_ps(at10, v), o1 = _mm512_maskz_mov_ps(at11, v);
        _mm512_mask_storeu_ps(r0 + 2 * j, lo, _mm512_permutex2var_ps(e0, lo_mix, o0));
        _mm512_mask_storeu_ps(r0 + 2 * j + 16, hi, _mm512_permutex2var_ps(e0, hi_mix, o0));
        _mm512_mask_storeu_ps(r1 + 2 * j, lo, _mm512_permutex2var_ps(e1, lo_mix, o1));
        _mm512_mask_storeu_ps(r1 + 2 * j + 16, hi, _mm512_permutex2var_ps(e1, hi_mix, o1));
      }
      // The columns no window covers (an odd width).
      for (int64_t c = 2 * ow; c < wd; ++c) r0[c] = r1[c] = 0.0f;
    }
    // The rows no window covers (an odd height).
    std::fill(px + 2 * oh * wd, px + isize, 0.0f);
  }
  return true;
}


// VPlanesMaxUnpool2x2Codes on AVX-512: PlanesMaxUnpool2x2Avx512's stores, the window position and the
// positive bit read from each window's code (a code cannot leave its window, so there is nothing to check).
__attribute__((target("avx512f"))) void PlanesMaxUnpool2x2CodesAvx512(const float* g, const uint8_t* codes, int64_t h,
                                                                      int64_t wd, int64_t oh, int64_t ow, int64_t p0,
                                                                      int64_t p1, float* x) {
  const __m512i lo_mix = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_mix = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 zero = _mm512_setzero_ps();
  const __m512i three = _mm512_set1_epi32(3), positive = _mm512_set1_epi32(kWindowCodePositive);
  const int64_t isize = h * wd, osize = oh * ow;
  for (int64_t p = p0; p < p1; ++p) {
    float* px = x + p * isize;
    for (int64_t i = 0; i < oh; ++i) {
      float* r0 = px + 2 * i * wd;
      float* r1 = r0 + wd;
      const int64_t o = p * osize + i * ow;
      for (int64_t j = 0; j < ow; j += 16) {
        const int64_t m = std::min<int64_t>(16, ow - j), span = 2 * m;
        const __mmask16 valid = static_cast<__mmask16>((1u << m) - 1);
        const __mmask16 lo = static_cast<__mmask16>(span >= 16 ? 0xffffu : (1u << span) - 1);
        const __mmask16 hi = static_cast<__mmask16>(span > 16 ? (span >= 32 ? 0xffffu : (1u << (span - 16)) - 1) : 0u);
        // 16 codes: past a short step's codes lie the next row's, except at the end of the last plane, where
        // the step's codes are copied so that nothing past them is read.
        __m128i bytes;
        if (o + j + 16 <= p1 * osize) {
          bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + o + j));
        } else {
          alignas(16) uint8_t tail[16] = {};
          std::memcpy(tail, codes + o + j, static_cast<size_t>(m));
          bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
        }
        const __m512i code = _mm512_cvtepu8_epi32(bytes);
        const __m512i slot = _mm512_and_si512(code, three);
        const __mmask16 open = _mm512_mask_test_epi32_mask(valid, code, positive);
        const __mmask16 at00 = _mm512_mask_cmpeq_epi32_mask(valid, slot, _mm512_setzero_si512());
        const __mmask16 at01 = _mm512_mask_cmpeq_epi32_mask(valid, slot, _mm512_set1_epi32(1));
        const __mmask16 at10 = _mm512_mask_cmpeq_epi32_mask(valid, slot, _mm512_set1_epi32(2));
        const __mmask16 at11 = _mm512_mask_cmpeq_epi32_mask(valid, slot, three);
        // +0 + the gradient where the window is open, +0 where it is shut (the scatter's addition).
        const __m512 v = _mm512_add_ps(zero, _mm512_maskz_loadu_ps(open, g + o + j));
        const __m512 e0 = _mm512_maskz_mov_ps(at00, v), o0 = _mm512_maskz_mov_ps(at01, v);
        const __m512 e1 = _mm512_maskz_mov_ps(at10, v), o1 = _mm512_maskz_mov_ps(at11, v);
        _mm512_mask_storeu_ps(r0 + 2 * j, lo, _mm512_permutex2var_ps(e0, lo_mix, o0));
        _mm512_mask_storeu_ps(r0 + 2 * j + 16, hi, _mm512_permutex2var_ps(e0, hi_mix, o0));
        _mm512_mask_storeu_ps(r1 + 2 * j, lo, _mm512_permutex2var_ps(e1, lo_mix, o1));
        _mm512_mask_storeu_ps(r1 + 2 * j + 16, hi, _mm512_permutex2var_ps(e1, hi_mix, o1));
      }
      for (int64_t c = 2 * ow; c < wd; ++c) r0[c] = r1[c] = 0.0f;
    }
    std::fill(px + 2 * oh * wd, px + isize, 0.0f);
  }
}

}  // namespace

bool VPlaneMaxPoolAvailable() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

void VPlaneMaxPool(const float* x, int64_t isize, const int32_t* corner, int64_t osize, int64_t kh, int64_t kw,
                   int64_t wd, int64_t p0, int64_t p1, float* y, int64_t* ind) {
  PlaneMaxPoolAvx512(x, isize, corner, osize, kh, kw, wd, p0, p1, y, ind);
}

void VPlanesMaxPool2x2(const float* x, int64_t h, int64_t wd, int64_t oh, int64_t ow, int64_t p0, int64_t p1, float* y,
                       int64_t* ind, int64_t ind_base) {
  PlanesMaxPool2x2Avx512<false>(x, h, wd, oh, ow, p0, p1, y, ind, ind_base, nullptr);
}

void VPlanesMaxPool2x2Codes(const float* x, int64_t h, int64_t wd, int64_t oh, int64_t ow, int64_t p0, int64_t p1,
                            float* y, uint8_t* codes) {
  PlanesMaxPool2x2Avx512<true>(x, h, wd, oh, ow, p0, p1, y, nullptr, 0, codes);
}

bool VPlanesMaxUnpool2x2(const float* g, const float* z, const int64_t* ind, int64_t ind_base, int64_t h, int64_t wd,
                         int64_t oh, int64_t ow, int64_t p0, int64_t p1, float* x) {
  // Rows of fewer than 8 windows leave most of each vector empty: the scatter was faster there (CNN, pooled
  // rows of 5: 0.23 against 0.32 ms).
  if (ow < 8 || !VPlaneMaxPoolAvailable()) return false;
  return PlanesMaxUnpool2x2Avx512(g, z, ind, ind_base, h, wd, oh, ow, p0, p1, x);
}

bool VPlanesMaxUnpool2x2Codes(const float* g, const uint8_t* codes, int64_t h, int64_t wd, int64_t oh, int64_t ow,
                              int64_t p0, int64_t p1, float* x) {
  if (!VPlaneMaxPoolAvailable()) return false;
  PlanesMaxUnpool2x2CodesAvx512(g, codes, h, wd, oh, ow, p0, p1, x);
  return true;
}

void VRowMaxPool(const float* x, int64_t wd, int64_t kh, int64_t kw, int64_t sw, int64_t n, int64_t readable,
                 float* y, int64_t* ind, int64_t ind_base) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) MaxPoolRowAvx512(x, wd, kh, kw, sw, n, readable, y, ind, ind_base);
  else MaxPoolRowScalar(x, wd, kh, kw, sw, n, y, ind, ind_base);
}
double VRowSum(const float* x, int64_t n) { return SumLoop(x, n); }
double VRowSumSqDev(const float* x, int64_t n, double mean) { return SumSqDevLoop(x, n, mean); }
double VRowSumDotDev(const float* g, const float* x, int64_t n, double mean, double inv) {
  return SumDotDevLoop(g, x, n, mean, inv);
}
void VRowSumAndDotDev(const float* g, const float* x, int64_t n, double mean, double inv, double* sum, double* dot) {
  SumAndDotDevLoop(g, x, n, mean, inv, sum, dot);
}
void VRowAffine(const float* x, float* y, int64_t n, float a, float b) { AffineLoop(x, y, n, a, b); }
void VRowAffineAct(const float* x, float* y, int64_t n, float a, float b, RowAct act, float lo, float hi) {
  if (act == RowAct::kRelu) AffineReluLoop(x, y, n, a, b);
  else AffineClipLoop(x, y, n, a, b, lo, hi);
}
void VRowAffineActGradSums(const float* x, const float* g, float* out, int64_t n, float a, float b, RowAct act,
                           float lo, float hi, float fill, double mean, double inv, double* sum, double* dot) {
  if (act == RowAct::kRelu) AffineReluGradSumsLoop(x, g, out, n, a, b, mean, inv, sum, dot);
  else AffineClipGradSumsLoop(x, g, out, n, a, b, lo, hi, fill, mean, inv, sum, dot);
}
void VRowLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t n, float mean, float inv) {
  LayerNormAffineLoop(x, scale, bias, y, n, mean, inv);
}
void VRowLayerNormGradSums(const float* g, const float* x, const float* scale, int64_t n, float mean, float inv,
                           float* ds, float* db, double* mb, double* mbx) {
  LayerNormGradSumsLoop(g, x, scale, n, mean, inv, ds, db, mb, mbx);
}
void VRowLayerNormGradDx(const float* g, const float* x, const float* scale, float* dx, int64_t n, float mean, float inv,
                         float mb, float mbx) {
  LayerNormGradDxLoop(g, x, scale, dx, n, mean, inv, mb, mbx);
}

void VRowSelect32(const uint8_t* c, const uint32_t* x, bool x_whole, const uint32_t* y, bool y_whole, uint32_t* o,
                  int64_t n) {
  Select32Loop(c, x, x_whole, y, y_whole, o, n);
}
void VRowBatchNormGrad(const float* g, const float* x, float* dx, int64_t n, double mean, double inv, double coef,
                       double m, double db, double ds) {
  BatchNormGradLoop(g, x, dx, n, mean, inv, coef, m, db, ds);
}

void VRowsGather2(const float* x, int64_t x_ld, float* d, int64_t d_ld, int64_t rows, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return Gather2Avx512(x, x_ld, d, d_ld, rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) d[r * d_ld + j] = x[r * x_ld + 2 * j];
  }
}

void VRowsScatterAdd2(const float* s, int64_t s_ld, float* d, int64_t d_ld, int64_t rows, int64_t n) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) return ScatterAdd2Avx512(s, s_ld, d, d_ld, rows, n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < n; ++j) d[r * d_ld + 2 * j] += s[r * s_ld + j];
  }
}

}  // namespace cpu
}  // namespace ontrain
