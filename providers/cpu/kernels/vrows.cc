// The per-ISA row loops of vrows.h.
#include "providers/cpu/kernels/vrows.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
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

// The short-row channel sums of VChannelSums and friends (rows under kLongRow): eight lanes per channel
// that run over all its rows (ForLanes<8> of each row into the channel's lanes, images in order), totalled
// once per channel by LaneTotal<8>. f(row, i) gives the term of element i of a row (a channel's term
// functions get the channel index through `row`).
template <typename F>
__attribute__((always_inline)) inline void ShortChannelLanes(const ChannelRows& r, F f, double* out) {
  double lanes[kNormMaxBlock][8] = {};
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      double* l = lanes[j];
      ForLanes<8>(r.inner, [&](int64_t i, int k) { l[k] += f(b, j, i); });
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) out[j] = LaneTotal<8>(lanes[j]);
}

ONT_VROWS_CLONES void ShortChannelSumsLoop(const float* x, const ChannelRows& r, double* sum) {
  ShortChannelLanes(r, [&](int64_t b, int64_t j, int64_t i) { return static_cast<double>(x[b * r.ld + j * r.inner + i]); },
                    sum);
}

ONT_VROWS_CLONES void ShortChannelSumSqDevsLoop(const float* x, const ChannelRows& r, const double* mean, double* sum) {
  ShortChannelLanes(r, [&](int64_t b, int64_t j, int64_t i) {
    const double d = static_cast<double>(x[b * r.ld + j * r.inner + i]) - mean[j];
    return d * d;
  }, sum);
}

// The two gradient sums (SumAndDotDevLanes's terms), g read or made by the activation's gradient (the
// expressions of AffineReluGradSumsLoop and AffineClipGradSumsLoop).
ONT_VROWS_CLONES void ShortChannelGradSumsLoop(const float* g, const float* x, const ChannelRows& r,
                                               const ChannelAct* act, const double* mean, const double* inv,
                                               double* sum, double* dot) {
  double ls[kNormMaxBlock][8] = {}, ld[kNormMaxBlock][8] = {};
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      const int64_t base = b * r.ld + j * r.inner;
      const float *gr = g + base, *xr = x + base;
      float* out = act != nullptr ? act->out + b * act->out_ld + j * r.inner : nullptr;
      const double mj = mean[j], ij = inv[j];
      ForLanes<8>(r.inner, [&](int64_t i, int k) {
        float v = gr[i];
        if (act != nullptr) {
          const float y = xr[i] * act->a[j] + act->b[j];
          if (act->act == RowAct::kRelu) v = y > 0.0f ? gr[i] : 0.0f;
          else v = (y >= act->lo) & (y <= act->hi) ? gr[i] : act->fill;
          out[i] = v;
        }
        ls[j][k] += static_cast<double>(v);
        ld[j][k] += static_cast<double>(v) * (xr[i] - mj) * ij;
      });
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) {
    sum[j] = LaneTotal<8>(ls[j]);
    dot[j] = LaneTotal<8>(ld[j]);
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

// Batch normalization's gradient sums (SumAndDotDevOf's lanes and expressions) in AVX-512 intrinsics, with
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
  __m512d mean, inv;
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

// LaneTotal of two sets of L / 8 lane vectors.
template <int L>
__attribute__((target("avx512f"), always_inline)) inline void LaneTotals(const __m512d* a, const __m512d* b, double* ta,
                                                                        double* tb) {
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
    const __m512d t = _mm512_mul_pd(_mm512_mul_pd(dv, _mm512_sub_pd(WidenHalf(xv, h), c.mean)), c.inv);
    s[k] = _mm512_mask_add_pd(s[k], mh, s[k], dv);
    d[k] = _mm512_mask_add_pd(d[k], mh, d[k], t);
  }
}

template <SumsKind K, int L>
__attribute__((target("avx512f"))) void GradSumsAvx512(const float* x, const float* g, float* out, int64_t n, float a,
                                                       float b, float lo, float hi, float fill, double mean,
                                                       double inv, double* sum, double* dot) {
  constexpr int kAcc = L / 8;  // double vectors of lanes
  __m512d s[kAcc], d[kAcc];
  for (int k = 0; k < kAcc; ++k) s[k] = d[k] = _mm512_setzero_pd();
  const GradSumsArgs c{_mm512_set1_ps(a),  _mm512_set1_ps(b),     _mm512_set1_ps(lo),   _mm512_set1_ps(hi),
                       _mm512_set1_ps(K == SumsKind::kClip ? fill : 0.0f), _mm512_set1_pd(mean), _mm512_set1_pd(inv)};
  LaneSteps<L>(n, [&](int64_t i, __mmask16 m, int k0, int k1) __attribute__((target("avx512f"))) {
    GradSumsStep<K>(x, g, out, i, m, k0, k1, c, s, d);
  });
  LaneTotals<L>(s, d, sum, dot);
}

// LayerNormGradSumsLanes in AVX-512 intrinsics, its lanes in registers (GCC's loop kept them on the stack
// and checked ds and db against the inputs for overlap on every row): the same float expressions for xh, b,
// ds and db, and the same double lanes and order for mb and mbx.
template <int L>
__attribute__((target("avx512f"))) void LayerNormGradSumsAvx512(const float* g, const float* x, const float* s,
                                                                int64_t n, float mu, float is, float* ds, float* db,
                                                                double* mb, double* mbx) {
  constexpr int kAcc = L / 8;
  __m512d pb[kAcc], pbx[kAcc];
  for (int k = 0; k < kAcc; ++k) pb[k] = pbx[k] = _mm512_setzero_pd();
  const __m512 vmu = _mm512_set1_ps(mu), vis = _mm512_set1_ps(is);
  // Sixteen elements from i (those under m) into lane vectors k0 (the first eight) and k1.
  auto step = [&](int64_t i, __mmask16 m, int k0, int k1) __attribute__((target("avx512f"))) {
    const __m512 gv = _mm512_maskz_loadu_ps(m, g + i), xv = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 sv = _mm512_maskz_loadu_ps(m, s + i);
    const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(xv, vmu), vis);
    const __m512 b = _mm512_mul_ps(_mm512_mul_ps(gv, sv), vis);
    _mm512_mask_storeu_ps(ds + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, ds + i), _mm512_mul_ps(gv, xh)));
    _mm512_mask_storeu_ps(db + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, db + i), gv));
    for (int h = 0; h < 2; ++h) {
      const int k = h == 0 ? k0 : k1;
      const __mmask8 mh = static_cast<__mmask8>(h == 0 ? m : m >> 8);
      const __m512d bd = WidenHalf(b, h);
      pb[k] = _mm512_mask_add_pd(pb[k], mh, pb[k], bd);
      pbx[k] = _mm512_mask_add_pd(pbx[k], mh, pbx[k], _mm512_mul_pd(bd, WidenHalf(xh, h)));
    }
  };
  LaneSteps<L>(n, step);
  LaneTotals<L>(pb, pbx, mb, mbx);
}

// The short-row channel sums in AVX-512 intrinsics: each channel's eight lanes in one double vector (in
// memory between rows: a block has up to kNormMaxBlock channels), each row walked as LaneSteps<8> walks it,
// so the lanes get ShortChannelLanes's terms in its order.
__attribute__((target("avx512f"))) void ShortChannelSumsAvx512(const float* x, const ChannelRows& r,
                                                               const double* mean, double* sum) {
  __m512d acc[kNormMaxBlock];
  for (int64_t j = 0; j < r.nb; ++j) acc[j] = _mm512_setzero_pd();
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      const float* row = x + b * r.ld + j * r.inner;
      __m512d a = acc[j];
      const __m512d mj = _mm512_set1_pd(mean != nullptr ? mean[j] : 0.0);
      LaneSteps<8>(r.inner, [&](int64_t i, __mmask16 m, int, int) __attribute__((target("avx512f"))) {
        const __m512 v = _mm512_maskz_loadu_ps(m, row + i);
        for (int h = 0; h < 2; ++h) {
          const __mmask8 mh = static_cast<__mmask8>(h == 0 ? m : m >> 8);
          __m512d t = WidenHalf(v, h);
          if (mean != nullptr) {
            t = _mm512_sub_pd(t, mj);
            t = _mm512_mul_pd(t, t);
          }
          a = _mm512_mask_add_pd(a, mh, a, t);
        }
      });
      acc[j] = a;
    }
  }
  alignas(64) double lanes[8];
  for (int64_t j = 0; j < r.nb; ++j) {
    _mm512_store_pd(lanes, acc[j]);
    sum[j] = LaneTotal<8>(lanes);
  }
}

template <SumsKind K>
__attribute__((target("avx512f"))) void ShortChannelGradSumsAvx512(const float* g, const float* x, const ChannelRows& r,
                                                                   const ChannelAct* act, const double* mean,
                                                                   const double* inv, double* sum, double* dot) {
  __m512d s[kNormMaxBlock], d[kNormMaxBlock];
  for (int64_t j = 0; j < r.nb; ++j) s[j] = d[j] = _mm512_setzero_pd();
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      const int64_t base = b * r.ld + j * r.inner;
      const float *gr = g + base, *xr = x + base;
      float* out = K != SumsKind::kNone ? act->out + b * act->out_ld + j * r.inner : nullptr;
      GradSumsArgs c;
      if constexpr (K != SumsKind::kNone) {
        c.a = _mm512_set1_ps(act->a[j]);
        c.b = _mm512_set1_ps(act->b[j]);
        c.lo = _mm512_set1_ps(act->lo);
        c.hi = _mm512_set1_ps(act->hi);
        c.fill = _mm512_set1_ps(K == SumsKind::kClip ? act->fill : 0.0f);
      }
      c.mean = _mm512_set1_pd(mean[j]);
      c.inv = _mm512_set1_pd(inv[j]);
      __m512d sj[1] = {s[j]}, dj[1] = {d[j]};
      LaneSteps<8>(r.inner, [&](int64_t i, __mmask16 m, int k0, int k1) __attribute__((target("avx512f"))) {
        GradSumsStep<K>(xr, gr, out, i, m, k0, k1, c, sj, dj);
      });
      s[j] = sj[0];
      d[j] = dj[0];
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) LaneTotals<8>(&s[j], &d[j], &sum[j], &dot[j]);
}

// VRowsUseIntrinsics: whether the normalization sums below may take their intrinsics versions.
std::atomic<bool> g_use_intrinsics{true};

bool ShortChannelAvx512() {
#if defined(__SANITIZE_THREAD__)
  return false;  // the baseline loops only, as for the clones
#else
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && g_use_intrinsics.load(std::memory_order_relaxed);
#endif
}

template <SumsKind K>
bool GradSumsFast(const float* x, const float* g, float* out, int64_t n, float a, float b, float lo, float hi,
                  float fill, double mean, double inv, double* sum, double* dot) {
#if defined(__SANITIZE_THREAD__)
  return false;  // the baseline loops only, as for the clones
#else
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 || !g_use_intrinsics.load(std::memory_order_relaxed)) return false;
  if (n >= kLongRow) GradSumsAvx512<K, kSumLanes>(x, g, out, n, a, b, lo, hi, fill, mean, inv, sum, dot);
  else GradSumsAvx512<K, 8>(x, g, out, n, a, b, lo, hi, fill, mean, inv, sum, dot);
  return true;
#endif
}

}  // namespace

double VRowSum(const float* x, int64_t n) { return SumLoop(x, n); }
double VRowSumSqDev(const float* x, int64_t n, double mean) { return SumSqDevLoop(x, n, mean); }
double VRowSumDotDev(const float* g, const float* x, int64_t n, double mean, double inv) {
  return SumDotDevLoop(g, x, n, mean, inv);
}
void VRowSumAndDotDev(const float* g, const float* x, int64_t n, double mean, double inv, double* sum, double* dot) {
  if (GradSumsFast<SumsKind::kNone>(x, g, nullptr, n, 0, 0, 0, 0, 0, mean, inv, sum, dot)) return;
  SumAndDotDevLoop(g, x, n, mean, inv, sum, dot);
}
void VRowAffine(const float* x, float* y, int64_t n, float a, float b) { AffineLoop(x, y, n, a, b); }
void VRowAffineAct(const float* x, float* y, int64_t n, float a, float b, RowAct act, float lo, float hi) {
  if (act == RowAct::kRelu) AffineReluLoop(x, y, n, a, b);
  else AffineClipLoop(x, y, n, a, b, lo, hi);
}
void VRowAffineActGradSums(const float* x, const float* g, float* out, int64_t n, float a, float b, RowAct act,
                           float lo, float hi, float fill, double mean, double inv, double* sum, double* dot) {
  if (act == RowAct::kRelu) {
    if (!GradSumsFast<SumsKind::kRelu>(x, g, out, n, a, b, 0, 0, 0, mean, inv, sum, dot)) {
      AffineReluGradSumsLoop(x, g, out, n, a, b, mean, inv, sum, dot);
    }
  } else if (!GradSumsFast<SumsKind::kClip>(x, g, out, n, a, b, lo, hi, fill, mean, inv, sum, dot)) {
    AffineClipGradSumsLoop(x, g, out, n, a, b, lo, hi, fill, mean, inv, sum, dot);
  }
}
void VRowLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t n, float mean, float inv) {
  LayerNormAffineLoop(x, scale, bias, y, n, mean, inv);
}
void VRowLayerNormGradSums(const float* g, const float* x, const float* scale, int64_t n, float mean, float inv,
                           float* ds, float* db, double* mb, double* mbx) {
#if !defined(__SANITIZE_THREAD__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (avx512 && g_use_intrinsics.load(std::memory_order_relaxed)) {
    if (n >= kLongRow) LayerNormGradSumsAvx512<kSumLanes>(g, x, scale, n, mean, inv, ds, db, mb, mbx);
    else LayerNormGradSumsAvx512<8>(g, x, scale, n, mean, inv, ds, db, mb, mbx);
    return;
  }
#endif
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
void VRowsUseIntrinsics(bool use) { g_use_intrinsics.store(use, std::memory_order_relaxed); }

void VChannelSums(const float* x, const ChannelRows& r, double* sum) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      for (int64_t j = 0; j < r.nb; ++j) sum[j] += VRowSum(x + b * r.ld + j * r.inner, r.inner);
    }
  } else if (ShortChannelAvx512()) {
    ShortChannelSumsAvx512(x, r, nullptr, sum);
  } else {
    ShortChannelSumsLoop(x, r, sum);
  }
}

void VChannelSumSqDevs(const float* x, const ChannelRows& r, const double* mean, double* sum) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      for (int64_t j = 0; j < r.nb; ++j) sum[j] += VRowSumSqDev(x + b * r.ld + j * r.inner, r.inner, mean[j]);
    }
  } else if (ShortChannelAvx512()) {
    ShortChannelSumsAvx512(x, r, mean, sum);
  } else {
    ShortChannelSumSqDevsLoop(x, r, mean, sum);
  }
}

void VChannelGradSums(const float* g, const float* x, const ChannelRows& r, const ChannelAct* act, const double* mean,
                      const double* inv, double* sum, double* dot) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = dot[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      for (int64_t j = 0; j < r.nb; ++j) {
        const int64_t base = b * r.ld + j * r.inner;
        double rs, rd;
        if (act != nullptr) {
          VRowAffineActGradSums(x + base, g + base, act->out + b * act->out_ld + j * r.inner, r.inner, act->a[j],
                                act->b[j], act->act, act->lo, act->hi, act->fill, mean[j], inv[j], &rs, &rd);
        } else {
          VRowSumAndDotDev(g + base, x + base, r.inner, mean[j], inv[j], &rs, &rd);
        }
        sum[j] += rs;
        dot[j] += rd;
      }
    }
  } else if (!ShortChannelAvx512()) {
    ShortChannelGradSumsLoop(g, x, r, act, mean, inv, sum, dot);
  } else if (act == nullptr) {
    ShortChannelGradSumsAvx512<SumsKind::kNone>(g, x, r, act, mean, inv, sum, dot);
  } else if (act->act == RowAct::kRelu) {
    ShortChannelGradSumsAvx512<SumsKind::kRelu>(g, x, r, act, mean, inv, sum, dot);
  } else {
    ShortChannelGradSumsAvx512<SumsKind::kClip>(g, x, r, act, mean, inv, sum, dot);
  }
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
