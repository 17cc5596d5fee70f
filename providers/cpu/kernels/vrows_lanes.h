// What the vrows files (vrows.cc, vrows_channels.cc) share: the per-ISA clone attribute, the scalar terms
// whose expressions the compiled loops and the intrinsics must both follow, and the AVX-512 lane steps.
// Internal to the vmath library.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace vrows_detail {

// Under ThreadSanitizer one baseline version: the clones' ifunc resolvers run during relocation, before
// its runtime starts, and crash there.
#if defined(__SANITIZE_THREAD__)
#define ONT_VROWS_CLONES
#else
#define ONT_VROWS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

// Whether the AVX-512 intrinsics versions run: the CPU has AVX-512F and VRowsUseIntrinsics has not turned
// them off (never under ThreadSanitizer).
bool VRowsIntrinsics();

// The gradient through ReLU and Clip of rows y = x * a + b (ReluGrad's and ClipGrad's), and one term of
// the dot sum g (x - mean) added into its lane (one fused multiply-add: the channel's inv multiplies the
// total once), as every loop and vector version computes them.
__attribute__((always_inline)) inline float ReluGradOf(float y, float g) { return y > 0.0f ? g : 0.0f; }
__attribute__((always_inline)) inline float ClipGradOf(float y, float g, float lo, float hi, float fill) {
  return (y >= lo) & (y <= hi) ? g : fill;
}
__attribute__((always_inline)) inline double DotDevAdd(double lane, float g, float x, double mean) {
  return __builtin_fma(static_cast<double>(g), static_cast<double>(x) - mean, lane);
}
// One element's terms of the moments about a shift (VRowMoments): d = x - shift into the sum's lane, d * d
// fused into the squares' lane.
__attribute__((always_inline)) inline void MomentsAdd(double& sum, double& sq, float x, double shift) {
  const double d = static_cast<double>(x) - shift;
  sum += d;
  sq = __builtin_fma(d, d, sq);
}

// The AVX-512 steps of batch normalization's gradient sums (SumAndDotDevOf's lanes and expressions), with
// the lanes' partial sums in registers: GCC kept the 32 lanes of the compiled loop in memory, and with the
// activation's gradient made on the way the pass cost 1.8 cycles per element (0.48 ms for the MobileNet's
// [32, 128, 16, 16] from L3). Kind kNone reads the gradient row, kRelu and kClip make it from x, a and b as
// AffineReluGradSumsLoop and AffineClipGradSumsLoop do and store it to out. L lanes (8 or kSumLanes): lane j
// takes elements i with i % L == j in order, masked adds for the row's last elements, then LaneTotal.
enum class SumsKind { kNone, kRelu, kClip };

// Half h of v's sixteen floats as eight doubles.
__attribute__((target("avx512f"), always_inline)) inline __m512d WidenHalf(__m512 v, int h) {
  return _mm512_cvtps_pd(h == 0 ? _mm512_castps512_ps256(v)
                                : _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

struct GradSumsArgs {
  __m512 a, b, lo, hi, fill;
  __m512d mean;
};

// Walks a row of n floats in steps of sixteen for L double lanes (8 or kSumLanes): step(i, m, k0, k1) takes
// the elements from i under mask m, the first eight into lane vector k0 and the next eight into k1, so that
// lane j gets the elements with i % L == j in order, as ForLanes gives them; the row's last elements go
// under masks to lanes 0 .. r - 1.
template <int L, typename F>
__attribute__((target("avx512f"), always_inline)) inline void LaneSteps(int64_t n, F step) {
  static_assert(L == 8 || L == kSumLanes, "8 or 32 lanes");
  int64_t i = 0;
  if constexpr (L == kSumLanes) {
    for (; i + 32 <= n; i += 32) {
      step(i, 0xffff, 0, 1);
      step(i + 16, 0xffff, 2, 3);
    }
    const int64_t r = n - i;  // 0 .. 31 elements left
    if (r > 0) step(i, static_cast<__mmask16>(r >= 16 ? 0xffffu : (1u << r) - 1), 0, 1);
    if (r > 16) step(i + 16, static_cast<__mmask16>((1u << (r - 16)) - 1), 2, 3);
  } else {
    // Both halves of sixteen into lanes 0 .. 7, the first half first.
    for (; i + 16 <= n; i += 16) step(i, 0xffff, 0, 0);
    if (i < n) step(i, static_cast<__mmask16>((1u << (n - i)) - 1), 0, 0);
  }
}

// LaneTotal<kSumLanes> of lanes held as four vectors of eight (lanes 8 k .. 8 k + 7 in a[k]), in registers:
// each step adds the same pairs as the tree (lane j + w into lane j, w = 16, 8, 4, 2, 1), so the same bits.
// Through memory, the vector stores and scalar reloads of the tree cost about 40% of a 256-float row's sum.
__attribute__((target("avx512f"), always_inline)) inline double LaneTotal32(const __m512d* a) {
  const __m512d h8 = _mm512_add_pd(_mm512_add_pd(a[0], a[2]), _mm512_add_pd(a[1], a[3]));  // w = 16, then 8
  const __m256d h4 = _mm256_add_pd(_mm512_castpd512_pd256(h8), _mm512_extractf64x4_pd(h8, 1));
  const __m128d h2 = _mm_add_pd(_mm256_castpd256_pd128(h4), _mm256_extractf128_pd(h4, 1));
  return _mm_cvtsd_f64(_mm_add_sd(h2, _mm_unpackhi_pd(h2, h2)));
}

// LaneTotal of two sets of L / 8 lane vectors.
template <int L>
__attribute__((target("avx512f"), always_inline)) inline void LaneTotals(const __m512d* a, const __m512d* b, double* ta,
                                                                        double* tb) {
  if constexpr (L == kSumLanes) {
    *ta = LaneTotal32(a);
    *tb = LaneTotal32(b);
    return;
  }
  double pa[L], pb[L];
  for (int k = 0; k < L / 8; ++k) {
    _mm512_storeu_pd(pa + 8 * k, a[k]);
    _mm512_storeu_pd(pb + 8 * k, b[k]);
  }
  *ta = LaneTotal<L>(pa);
  *tb = LaneTotal<L>(pb);
}

// Sixteen elements from i (those under m) into lane vectors s[k0], d[k0] (the first eight) and s[k1], d[k1].
template <SumsKind K>
__attribute__((target("avx512f"), always_inline)) inline void GradSumsStep(const float* x, const float* g, float* out,
                                                                          int64_t i, __mmask16 m, int k0, int k1,
                                                                          const GradSumsArgs& c, __m512d* s,
                                                                          __m512d* d) {
  const __m512 xv = _mm512_maskz_loadu_ps(m, x + i), gv = _mm512_maskz_loadu_ps(m, g + i);
  __m512 v = gv;
  if constexpr (K != SumsKind::kNone) {
    const __m512 y = _mm512_add_ps(_mm512_mul_ps(xv, c.a), c.b);
    const __mmask16 keep = K == SumsKind::kRelu
                               ? _mm512_cmp_ps_mask(y, _mm512_setzero_ps(), _CMP_GT_OQ)
                               : _mm512_cmp_ps_mask(y, c.lo, _CMP_GE_OQ) & _mm512_cmp_ps_mask(y, c.hi, _CMP_LE_OQ);
    v = _mm512_mask_blend_ps(keep, c.fill, gv);
    _mm512_mask_storeu_ps(out + i, m, v);
  }
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const int k = h == 0 ? k0 : k1;
    const __mmask8 mh = static_cast<__mmask8>(h == 0 ? m : m >> 8);
    const __m512d dv = WidenHalf(v, h);
    s[k] = _mm512_mask_add_pd(s[k], mh, s[k], dv);
    d[k] = _mm512_mask3_fmadd_pd(dv, _mm512_sub_pd(WidenHalf(xv, h), c.mean), d[k], mh);
  }
}

}  // namespace vrows_detail
}  // namespace cpu
}  // namespace ontrain
