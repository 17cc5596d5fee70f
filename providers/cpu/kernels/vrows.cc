// The per-ISA row loops of vrows.h.
#include "providers/cpu/kernels/vrows.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>

#include "providers/cpu/kernels/vrows_lanes.h"

namespace ontrain {
namespace cpu {
namespace {

using namespace vrows_detail;  // NOLINT: the shared lane helpers of vrows_lanes.h

// The sum of g and the dot sum of g (x - mean) in one pass, LaneSum's lanes for rows of n (the dot's lanes
// by DotDevAdd). g(i) gives element i of the gradient row (read, or made on the way:
// AffineClipGradSumsLoop), so every caller sums with these expressions.
template <int L, typename G>
__attribute__((always_inline)) inline void SumAndDotDevLanes(G g, const float* x, int64_t n, double mean, double* sum,
                                                             double* dot) {
  double ps[L] = {}, pd[L] = {};
  ForLanes<L>(n, [&](int64_t i, int j) {
    const float v = g(i);
    ps[j] += static_cast<double>(v);
    pd[j] = DotDevAdd(pd[j], v, x[i], mean);
  });
  *sum = LaneTotal<L>(ps);
  *dot = LaneTotal<L>(pd);
}

template <typename G>
__attribute__((always_inline)) inline void SumAndDotDevOf(G g, const float* x, int64_t n, double mean, double* sum,
                                                          double* dot) {
  if (n >= kLongRow) SumAndDotDevLanes<kSumLanes>(g, x, n, mean, sum, dot);
  else SumAndDotDevLanes<8>(g, x, n, mean, sum, dot);
}

ONT_VROWS_CLONES void SumAndDotDevLoop(const float* g, const float* x, int64_t n, double mean, double* sum,
                                       double* dot) {
  SumAndDotDevOf([g](int64_t i) { return g[i]; }, x, n, mean, sum, dot);
}

// The moments about a shift (VRowMoments) in LaneSum's lanes, MomentsAdd's terms.
template <int L>
__attribute__((always_inline)) inline void MomentsLanes(const float* x, int64_t n, double shift, double* sum,
                                                        double* sq) {
  double ps[L] = {}, pq[L] = {};
  ForLanes<L>(n, [&](int64_t i, int j) { MomentsAdd(ps[j], pq[j], x[i], shift); });
  *sum = LaneTotal<L>(ps);
  *sq = LaneTotal<L>(pq);
}

ONT_VROWS_CLONES void MomentsLoop(const float* x, int64_t n, double shift, double* sum, double* sq) {
  if (n >= kLongRow) MomentsLanes<kSumLanes>(x, n, shift, sum, sq);
  else MomentsLanes<8>(x, n, shift, sum, sq);
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
                                             double mean, double* sum, double* dot) {
  auto grad = [&](int64_t i) {
    const float y = x[i] * a + b;
    return out[i] = ReluGradOf(y, g[i]);
  };
  SumAndDotDevOf(grad, x, n, mean, sum, dot);
}

ONT_VROWS_CLONES void AffineClipGradSumsLoop(const float* x, const float* g, float* out, int64_t n, float a, float b,
                                             float lo, float hi, float fill, double mean, double* sum,
                                             double* dot) {
  auto grad = [&](int64_t i) {
    const float y = x[i] * a + b;
    return out[i] = ClipGradOf(y, g[i], lo, hi, fill);
  };
  SumAndDotDevOf(grad, x, n, mean, sum, dot);
}

ONT_VROWS_CLONES void BatchNormGradLoop(const float* g, const float* x, float* dx, int64_t n, double mean, double a,
                                        double b, double c) {
  for (int64_t i = 0; i < n; ++i) {
    const double t = __builtin_fma(b, static_cast<double>(x[i]) - mean, c);
    dx[i] = static_cast<float>(__builtin_fma(a, static_cast<double>(g[i]), t));
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

template <SumsKind K, int L>
__attribute__((target("avx512f"))) void GradSumsAvx512(const float* x, const float* g, float* out, int64_t n, float a,
                                                       float b, float lo, float hi, float fill, double mean,
                                                       double* sum, double* dot) {
  constexpr int kAcc = L / 8;  // double vectors of lanes
  __m512d s[kAcc], d[kAcc];
  for (int k = 0; k < kAcc; ++k) s[k] = d[k] = _mm512_setzero_pd();
  const GradSumsArgs c{_mm512_set1_ps(a),  _mm512_set1_ps(b),     _mm512_set1_ps(lo),   _mm512_set1_ps(hi),
                       _mm512_set1_ps(K == SumsKind::kClip ? fill : 0.0f), _mm512_set1_pd(mean)};
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

// MomentsLoop in AVX-512 intrinsics: MomentsAdd's terms into the same lanes (LaneSteps), totalled as
// LaneTotal does.
template <int L>
__attribute__((target("avx512f"))) void RowMomentsAvx512(const float* x, int64_t n, double shift, double* sum,
                                                         double* sq) {
  __m512d s[L / 8], q[L / 8];
  for (int k = 0; k < L / 8; ++k) s[k] = q[k] = _mm512_setzero_pd();
  const __m512d sv = _mm512_set1_pd(shift);
  LaneSteps<L>(n, [&](int64_t i, __mmask16 m, int k0, int k1) __attribute__((target("avx512f"))) {
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const int k = h == 0 ? k0 : k1;
      const __mmask8 mh = static_cast<__mmask8>(h == 0 ? m : m >> 8);
      const __m512d d = _mm512_sub_pd(WidenHalf(v, h), sv);
      s[k] = _mm512_mask_add_pd(s[k], mh, s[k], d);
      q[k] = _mm512_mask3_fmadd_pd(d, d, q[k], mh);
    }
  });
  LaneTotals<L>(s, q, sum, sq);
}

template <SumsKind K>
bool GradSumsFast(const float* x, const float* g, float* out, int64_t n, float a, float b, float lo, float hi,
                  float fill, double mean, double* sum, double* dot) {
  if (!VRowsIntrinsics()) return false;  // (always so under ThreadSanitizer)
  if (n >= kLongRow) GradSumsAvx512<K, kSumLanes>(x, g, out, n, a, b, lo, hi, fill, mean, sum, dot);
  else GradSumsAvx512<K, 8>(x, g, out, n, a, b, lo, hi, fill, mean, sum, dot);
  return true;
}

}  // namespace

namespace vrows_detail {
namespace {
std::atomic<bool> g_use_intrinsics{true};  // VRowsUseIntrinsics
}  // namespace

bool VRowsIntrinsics() {
#if defined(__SANITIZE_THREAD__)
  return false;  // the baseline loops only, as for the clones
#else
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512 && g_use_intrinsics.load(std::memory_order_relaxed);
#endif
}
}  // namespace vrows_detail

void VRowsUseIntrinsics(bool use) { vrows_detail::g_use_intrinsics.store(use, std::memory_order_relaxed); }

double VRowSum(const float* x, int64_t n) {
  double sum, sq;
  VRowMoments(x, n, 0.0, &sum, &sq);  // about 0: each term x itself
  return sum;
}
void VRowMoments(const float* x, int64_t n, double shift, double* sum, double* sq) {
  if (!VRowsIntrinsics()) return MomentsLoop(x, n, shift, sum, sq);
  if (n >= kLongRow) RowMomentsAvx512<kSumLanes>(x, n, shift, sum, sq);
  else RowMomentsAvx512<8>(x, n, shift, sum, sq);
}
void VRowSumAndDotDev(const float* g, const float* x, int64_t n, double mean, double* sum, double* dot) {
  if (GradSumsFast<SumsKind::kNone>(x, g, nullptr, n, 0, 0, 0, 0, 0, mean, sum, dot)) return;
  SumAndDotDevLoop(g, x, n, mean, sum, dot);
}
void VRowAffine(const float* x, float* y, int64_t n, float a, float b) { AffineLoop(x, y, n, a, b); }
void VRowAffineAct(const float* x, float* y, int64_t n, float a, float b, RowAct act, float lo, float hi) {
  if (act == RowAct::kRelu) AffineReluLoop(x, y, n, a, b);
  else AffineClipLoop(x, y, n, a, b, lo, hi);
}
void VRowAffineActGradSums(const float* x, const float* g, float* out, int64_t n, float a, float b, RowAct act,
                           float lo, float hi, float fill, double mean, double* sum, double* dot) {
  if (act == RowAct::kRelu) {
    if (!GradSumsFast<SumsKind::kRelu>(x, g, out, n, a, b, 0, 0, 0, mean, sum, dot)) {
      AffineReluGradSumsLoop(x, g, out, n, a, b, mean, sum, dot);
    }
  } else if (!GradSumsFast<SumsKind::kClip>(x, g, out, n, a, b, lo, hi, fill, mean, sum, dot)) {
    AffineClipGradSumsLoop(x, g, out, n, a, b, lo, hi, fill, mean, sum, dot);
  }
}
void VRowLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t n, float mean, float inv) {
  LayerNormAffineLoop(x, scale, bias, y, n, mean, inv);
}
void VRowLayerNormGradSums(const float* g, const float* x, const float* scale, int64_t n, float mean, float inv,
                           float* ds, float* db, double* mb, double* mbx) {
  if (VRowsIntrinsics()) {
    if (n >= kLongRow) LayerNormGradSumsAvx512<kSumLanes>(g, x, scale, n, mean, inv, ds, db, mb, mbx);
    else LayerNormGradSumsAvx512<8>(g, x, scale, n, mean, inv, ds, db, mb, mbx);
    return;
  }
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

void VRowBatchNormGrad(const float* g, const float* x, float* dx, int64_t n, double mean, double a, double b,
                       double c) {
  BatchNormGradLoop(g, x, dx, n, mean, a, b, c);
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
