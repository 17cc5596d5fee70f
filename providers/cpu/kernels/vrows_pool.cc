// The max pooling loops of vrows.h (rows, narrow planes, and whole planes of 2x2 windows with their
// gradient), by AVX-512 intrinsics where the CPU has AVX-512F and a scalar loop elsewhere: exact either way.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

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

// The masks of a step of m <= 16 windows along a pooled row: the windows' lanes, and the lanes of the two
// vectors that hold their 2 m columns of each window row (columns 2 j .. 2 j + 2 m - 1).
struct WindowMasks {
  __mmask16 valid, lo, hi;
  explicit WindowMasks(int64_t m) {
    const int64_t span = 2 * m;
    valid = static_cast<__mmask16>((1u << m) - 1);
    lo = static_cast<__mmask16>(span >= 16 ? 0xffffu : (1u << span) - 1);
    hi = static_cast<__mmask16>(span > 16 ? (span >= 32 ? 0xffffu : (1u << (span - 16)) - 1) : 0u);
  }
};

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
        const int64_t m = std::min<int64_t>(16, ow - j);
        const WindowMasks wm(m);
        const __mmask16 valid = wm.valid, lo = wm.lo, hi = wm.hi;
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

// One step of the 2x2 unpooling: 16 windows' values v written into their two rows (r0 and r1 at the
// windows' first column), each to the element its mask names (at00 ... at11) and +0 to the other three; the
// even and odd columns interleaved by permutes, as PlanesMaxPool2x2Avx512 splits them.
__attribute__((target("avx512f"), always_inline)) inline void StoreWindows(__m512 v, __mmask16 at00, __mmask16 at01,
                                                                         __mmask16 at10, __mmask16 at11, __mmask16 lo,
                                                                         __mmask16 hi, float* r0, float* r1) {
  const __m512i lo_mix = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_mix = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  const __m512 e0 = _mm512_maskz_mov_ps(at00, v), o0 = _mm512_maskz_mov_ps(at01, v);
  const __m512 e1 = _mm512_maskz_mov_ps(at10, v), o1 = _mm512_maskz_mov_ps(at11, v);
  _mm512_mask_storeu_ps(r0, lo, _mm512_permutex2var_ps(e0, lo_mix, o0));
  _mm512_mask_storeu_ps(r0 + 16, hi, _mm512_permutex2var_ps(e0, hi_mix, o0));
  _mm512_mask_storeu_ps(r1, lo, _mm512_permutex2var_ps(e1, lo_mix, o1));
  _mm512_mask_storeu_ps(r1 + 16, hi, _mm512_permutex2var_ps(e1, hi_mix, o1));
}

// The columns of rows r0 and r1 (wd wide) that no window covers (an odd width).
inline void ZeroRowEnds(float* r0, float* r1, int64_t ow, int64_t wd) {
  for (int64_t c = 2 * ow; c < wd; ++c) r0[c] = r1[c] = 0.0f;
}

// VPlanesMaxUnpool2x2 on AVX-512: per pooled row, 16 windows a step. Each window's element of offset d
// from its top-left (0, 1, wd, wd + 1) takes the window's value, the other three +0; the even and odd
// columns of both output rows are interleaved by permutes, as PlanesMaxPool2x2Avx512 splits them.
__attribute__((target("avx512f"))) bool PlanesMaxUnpool2x2Avx512(const float* g, const float* z, const int64_t* ind,
                                                                 int64_t ind_base, int64_t h, int64_t wd, int64_t oh,
                                                                 int64_t ow, int64_t p0, int64_t p1, float* x) {
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
        const int64_t m = std::min<int64_t>(16, ow - j);
        const WindowMasks wm(m);
        const __mmask16 valid = wm.valid, lo = wm.lo, hi = wm.hi;
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
        StoreWindows(v, at00, at01, at10, at11, lo, hi, r0 + 2 * j, r1 + 2 * j);
      }
      ZeroRowEnds(r0, r1, ow, wd);
    }
    std::fill(px + 2 * oh * wd, px + isize, 0.0f);  // the rows no window covers (an odd height)
  }
  return true;
}


// VPlanesMaxUnpool2x2Codes on AVX-512: PlanesMaxUnpool2x2Avx512's stores, the window position and the
// positive bit read from each window's code (a code cannot leave its window, so there is nothing to check).
__attribute__((target("avx512f"))) void PlanesMaxUnpool2x2CodesAvx512(const float* g, const uint8_t* codes, int64_t h,
                                                                      int64_t wd, int64_t oh, int64_t ow, int64_t p0,
                                                                      int64_t p1, float* x) {
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
        const int64_t m = std::min<int64_t>(16, ow - j);
        const WindowMasks wm(m);
        const __mmask16 valid = wm.valid, lo = wm.lo, hi = wm.hi;
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
        StoreWindows(v, at00, at01, at10, at11, lo, hi, r0 + 2 * j, r1 + 2 * j);
      }
      ZeroRowEnds(r0, r1, ow, wd);
    }
    std::fill(px + 2 * oh * wd, px + isize, 0.0f);  // the rows no window covers (an odd height)
  }
}

// The first `count` of 16 lanes (none for count <= 0, all from 16 on).
__attribute__((target("avx512f"))) inline __mmask16 LanesUpTo(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

// VPlanesMaxUnpool2x2Codes by the lane tables: each plane a flat row of vectors, every lane's value the
// window's g where the window's code is the lane's wanted code (position and positive bit), else +0; then
// +0 + that, the scatter's addition. A plane's last vector spills into the planes after it (several when a
// plane has fewer than 16 elements), written after it, except where it would reach past the range's last
// plane: that store is masked to the plane.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void PlanesUnpool2x2LanesAvx512(
    const float* g, const uint8_t* codes, const Unpool2x2Lanes& lanes, int64_t isize, int64_t osize, int64_t p0,
    int64_t p1, float* x) {
  const __m512 zero = _mm512_setzero_ps();
  const __m512i seven = _mm512_set1_epi32(7);
  const int64_t nv = lanes.vectors();
  const int32_t* base = lanes.base();
  const Unpool2x2Lanes::Lanes* table = lanes.lanes();
  for (int64_t p = p0; p < p1; ++p) {
    const float* gp = g + p * osize;
    const uint8_t* cp = codes + p * osize;
    float* xp = x + p * isize;
    for (int64_t v = 0; v < nv; ++v) {
      const int64_t b = base[v];
      __m512 g0, g1;
      __m256i cb;
      if (p * osize + b + 32 <= p1 * osize) {  // inside the range's planes: whole loads
        g0 = _mm512_loadu_ps(gp + b);
        g1 = _mm512_loadu_ps(gp + b + 16);
        cb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + b));
      } else {  // at the range's end only: masked, so that nothing past the range is read
        const int64_t avail = (p1 - p) * osize - b;
        g0 = _mm512_maskz_loadu_ps(LanesUpTo(avail), gp + b);
        g1 = _mm512_maskz_loadu_ps(LanesUpTo(avail - 16), gp + b + 16);
        cb = _mm256_maskz_loadu_epi8(avail >= 32 ? 0xffffffffu : static_cast<__mmask32>((1u << avail) - 1u), cp + b);
      }
      const __m512i c0 = _mm512_cvtepu8_epi32(_mm256_castsi256_si128(cb));
      const __m512i c1 = _mm512_cvtepu8_epi32(_mm256_extracti128_si256(cb, 1));
      const __m512i idx = _mm512_load_si512(table[v].window);
      const __m512 gv = _mm512_permutex2var_ps(g0, idx, g1);
      const __m512i cv = _mm512_and_si512(_mm512_permutex2var_epi32(c0, idx, c1), seven);
      const __mmask16 hit = _mm512_cmpeq_epi32_mask(cv, _mm512_load_si512(table[v].want));
      const __m512 out = _mm512_add_ps(zero, _mm512_maskz_mov_ps(hit, gv));
      // Whole where the vector ends inside the range (a plane smaller than 16 spills over several planes),
      // else up to this plane's end.
      if ((p1 - p) * isize - 16 * v >= 16) {
        _mm512_storeu_ps(xp + 16 * v, out);
      } else {
        _mm512_mask_storeu_ps(xp + 16 * v, LanesUpTo(isize - 16 * v), out);
      }
    }
  }
}

}  // namespace

Unpool2x2Lanes::Unpool2x2Lanes(int64_t h, int64_t wd, int64_t oh, int64_t ow) : h_(h), wd_(wd), oh_(oh), ow_(ow) {
  const int64_t isize = h * wd;
  static const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl");
  // Only rows of fewer than 8 windows, which leave most of the pooled-rows kernel's vectors empty: from 8 on
  // it was as fast or faster (Zen 5, one core, per plane: 6x6 13.5 -> 6.4 ns, 11x11 31.8 -> 15.5, 14x14 28.5
  // -> 24.9, 26x26 53 -> 82).
  if (!avx512 || h <= 0 || wd <= 0 || oh < 0 || ow < 0 || ow >= 8 || 2 * oh > h || 2 * ow > wd ||
      isize > (int64_t{1} << 24)) {
    return;
  }
  const int64_t nv = (isize + 15) / 16;
  base_.assign(static_cast<size_t>(nv), 0);
  Lanes none;
  std::fill(none.window, none.window + 16, 0);
  std::fill(none.want, none.want + 16, -1);
  lanes_.assign(static_cast<size_t>(nv), none);
  for (int64_t v = 0; v < nv; ++v) {
    int64_t first = -1, last = -1;
    for (int64_t t = 0; t < 16; ++t) {
      const int64_t e = 16 * v + t, r = e / wd, c = e % wd;
      if (e >= isize || r >= 2 * oh || c >= 2 * ow) continue;
      const int64_t w = (r / 2) * ow + c / 2;
      first = first < 0 ? w : std::min(first, w);
      last = std::max(last, w);
    }
    if (first < 0) continue;  // no window: every lane +0
    if (last - first >= 32) return;
    base_[v] = static_cast<int32_t>(first);
    for (int64_t t = 0; t < 16; ++t) {
      const int64_t e = 16 * v + t, r = e / wd, c = e % wd;
      if (e >= isize || r >= 2 * oh || c >= 2 * ow) continue;
      lanes_[v].window[t] = static_cast<int32_t>((r / 2) * ow + c / 2 - first);
      lanes_[v].want[t] = static_cast<int32_t>(2 * (r % 2) + c % 2 + kWindowCodePositive);
    }
  }
  usable_ = true;
}

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
                              int64_t p0, int64_t p1, float* x, const Unpool2x2Lanes* lanes) {
  if (!VPlaneMaxPoolAvailable()) return false;
  if (lanes != nullptr && lanes->fits(h, wd, oh, ow)) {
    PlanesUnpool2x2LanesAvx512(g, codes, *lanes, h * wd, oh * ow, p0, p1, x);
    return true;
  }
  PlanesMaxUnpool2x2CodesAvx512(g, codes, h, wd, oh, ow, p0, p1, x);
  return true;
}

void VRowMaxPool(const float* x, int64_t wd, int64_t kh, int64_t kw, int64_t sw, int64_t n, int64_t readable,
                 float* y, int64_t* ind, int64_t ind_base) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512) MaxPoolRowAvx512(x, wd, kh, kw, sw, n, readable, y, ind, ind_base);
  else MaxPoolRowScalar(x, wd, kh, kw, sw, n, y, ind, ind_base);
}

}  // namespace cpu
}  // namespace ontrain
