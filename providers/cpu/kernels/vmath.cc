// The vectorized float math of vmath.h. The element functions are inline double arithmetic that GCC
// vectorizes: exp by range reduction to r in [-ln2/2, ln2/2] (x = n ln2 + r, 2^n built in the exponent
// bits) and its Taylor series to r^10 (error < 3e-13); erf and erfc from the fits of vmath_tables.inc.
// Polynomials are evaluated with explicit fused multiply-adds: std::fma rounds once on every machine (an FMA
// instruction in the AVX2 and AVX-512 clones, glibc's exact software fma in the baseline one), so the clones
// still agree to the bit while the vector clones do half the instructions.
// No table lookups: GCC 12 does not emit gathers for the generic tuning, and a loop with one stays scalar.
#include "providers/cpu/kernels/vmath.h"

#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <limits>

namespace ontrain {
namespace cpu {
namespace {

#include "providers/cpu/kernels/vmath_tables.inc"

// Under ThreadSanitizer one baseline version: the clones' ifunc resolvers run during relocation, before
// its runtime starts, and crash there.
#if defined(__SANITIZE_THREAD__)
#define ONT_VMATH_CLONES
#else
#define ONT_VMATH_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif

inline double Bits2Double(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}
inline uint64_t Double2Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

// exp's constants, shared with the AVX-512 version below: ln 2 in two parts, the shifter 1.5 * 2^52 (adding
// it rounds to an integer kept in the low bits), and the Taylor coefficients from r^10 down to r^0.
constexpr double kLog2e = 1.4426950408889634, kLn2Hi = 0.693147180369123816490, kLn2Lo = 1.90821492927058770002e-10;
constexpr double kShifter = 6755399441055744.0;
constexpr double kExpTerms[] = {1.0 / 3628800, 1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120,
                                1.0 / 24,      1.0 / 6,      0.5,          1.0,         1.0};

// exp(x) for |x| <= 700 (callers clamp); NaN stays NaN.
inline double ExpD(double x) {
  double t = std::fma(x, kLog2e, kShifter);
  double n = t - kShifter;
  double r = std::fma(-n, kLn2Lo, std::fma(-n, kLn2Hi, x));
  double p = kExpTerms[0];
#pragma GCC unroll 16
  for (size_t k = 1; k < sizeof kExpTerms / sizeof kExpTerms[0]; ++k) p = std::fma(p, r, kExpTerms[k]);
  // The low 11 bits of t's mantissa are n (two's complement); n + 1023 shifted into the exponent is 2^n.
  return p * Bits2Double((Double2Bits(t) + 1023) << 52);
}

inline double Clamp(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;

// exp of a float argument: below -104 the float result is 0, above 89 it is inf.
inline double ExpF(double x) { return ExpD(Clamp(x, -104.0, 89.0)); }

// erfc(z) exp(z^2) for z >= 0 (or NaN), ~1e-13 relative: t g(u) (vmath_tables.inc); z is clamped to the
// fit's end, past which every caller's result is 0 or 1 in float anyway.
inline double ErfcScaled(double z) {
  double zc = Clamp(z, 0.0, kErfcZMax);
  double t = 1.0 / std::fma(0.5, zc, 1.0);
  double u = (t - kErfcMid) * (1.0 / kErfcHalf);
  double g = kErfcG[kErfcDegree];
#pragma GCC unroll 24
  for (int k = kErfcDegree - 1; k >= 0; --k) g = std::fma(g, u, kErfcG[k]);
  return t * g;
}

// exp(-z^2) with the argument clamped where double underflows; z2 = z^2 passed in, exact where possible.
inline double ExpNeg(double z2) { return ExpD(-Clamp(z2, 0.0, 700.0)); }

// erf(a) of a >= 0 (or NaN): the Maclaurin series below kErfSmallEnd, 1 - erfc above.
inline double ErfPos(double a) {
  double as = a < kErfSmallEnd ? a : kErfSmallEnd;
  double x2 = as * as;
  double s = kErfSmall[kErfSmallTerms - 1];
#pragma GCC unroll 16
  for (int k = kErfSmallTerms - 2; k >= 0; --k) s = std::fma(s, x2, kErfSmall[k]);
  s *= as;
  double c = ErfcScaled(a) * ExpNeg(a * a);
  return a < kErfSmallEnd ? s : 1.0 - c;
}

inline double ErfD(double x) {
  double r = std::copysign(ErfPos(std::fabs(x)), x);
  return x == x ? r : x;
}

// 2 Phi(x) = 1 + erf(x / sqrt 2) = erfc(-x / sqrt 2), from erfc(|x| / sqrt 2) so that neither side cancels;
// e = exp(-x^2 / 2), which the GELU gradient reuses for the normal density. x^2 / 2 of a float is exact.
inline double TwoPhi(double x, double e) {
  double c = ErfcScaled(std::fabs(x) * kSqrtHalf) * e;
  return x >= 0 ? 2.0 - c : c;
}

inline double TanhD(double x) {
  double a = std::fabs(x);
  double e = ExpD(2.0 * Clamp(a, 0.0, 20.0));
  double r = (e - 1.0) / (e + 1.0);
  r = a < 0x1p-12 ? a : r;  // tanh(a) rounds to a in float there; the formula would cancel
  r = std::copysign(r, x);
  return x == x ? r : x;
}

inline double SigmoidD(double x) { return 1.0 / (1.0 + ExpD(-Clamp(x, -200.0, 200.0))); }

ONT_VMATH_CLONES void ExpLoop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(ExpF(x[i]));
}

ONT_VMATH_CLONES float ExpShiftSumLoop(const float* x, float shift, float* y, int64_t n) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      float v = static_cast<float>(ExpF(x[i + j] - shift));
      y[i + j] = v;
      acc[j] += v;
    }
  }
  float sum = 0;
  for (int j = 0; j < kLanes; ++j) sum += acc[j];
  for (; i < n; ++i) {
    float v = static_cast<float>(ExpF(x[i] - shift));
    y[i] = v;
    sum += v;
  }
  return sum;
}

// y = ExpF(x - shift) for the last, partial block of the AVX-512 ExpShiftSum.
ONT_VMATH_CLONES void ExpShiftTail(const float* x, float shift, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(ExpF(x[i] - shift));
}

ONT_VMATH_CLONES void SoftmaxRowLoop(const float* x, float* y, int64_t n) {
  // The max in 16 lanes (it does not depend on the order; NaNs are passed over as by one running max and
  // reach the result through exp).
  constexpr int kLanes = 16;
  float lane[kLanes];
  for (int j = 0; j < kLanes; ++j) lane[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
  }
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = 0; j < kLanes; ++j) mx = lane[j] > mx ? lane[j] : mx;
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = ExpShiftSumLoop(x, mx, y, n);
  for (i = 0; i < n; ++i) y[i] /= sum;
}

ONT_VMATH_CLONES void ErfLoop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(ErfD(x[i]));
}

ONT_VMATH_CLONES void TanhLoop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(TanhD(x[i]));
}

ONT_VMATH_CLONES void SigmoidLoop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(SigmoidD(x[i]));
}

ONT_VMATH_CLONES void GeluLoop(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i];
    double r = 0.5 * v * TwoPhi(v, ExpNeg(0.5 * (v * v)));
    y[i] = v == v ? static_cast<float>(r) : x[i];  // x itself: its bits, as StoreKeepingNaNs
  }
}

// x's bits with the quiet bit set: a float NaN as converting it to double and back gives it (written with the
// bits, since GCC folds that round trip away).
inline float QuietNaN(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  b |= 0x00400000u;
  std::memcpy(&x, &b, sizeof b);
  return x;
}

// GELU's gradient dy * s, s = Phi(x) + x phi(x), and which NaN it gives, pinned: a multiplication or an add
// of two NaNs passes on one of them by the operand order the compiler picks (IEEE leaves it open; at -O1
// GCC picked the other one than the AVX-512 blocks). So: where x is NaN, x quieted; else where s is NaN (x
// infinite: inf * 0), s; else dy * s, whose only possible NaN is dy's. The slope kept by GeluAndSlope is x
// itself (widened) where x is NaN, so that GeluMulSlope gives the same.
ONT_VMATH_CLONES void GeluGradLoop(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i];
    double e = ExpNeg(0.5 * (v * v));
    double cdf = 0.5 * TwoPhi(v, e);
    double pdf = kInvSqrt2Pi * e;
    double s = cdf + v * pdf;
    dx[i] = v != v ? QuietNaN(x[i]) : s != s ? static_cast<float>(s) : static_cast<float>(static_cast<double>(dy[i]) * s);
  }
}

ONT_VMATH_CLONES void GeluAndSlopeLoop(const float* x, float* y, double* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i];
    double e = ExpNeg(0.5 * (v * v));
    double two_phi = TwoPhi(v, e);
    double r = 0.5 * v * two_phi;
    y[i] = v == v ? static_cast<float>(r) : x[i];  // x itself: its bits, as StoreKeepingNaNs
    d[i] = v == v ? 0.5 * two_phi + v * (kInvSqrt2Pi * e) : v;
  }
}

ONT_VMATH_CLONES void GeluMulSlopeLoop(const float* dy, const double* d, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(dy[i]) * d[i];
    dx[i] = static_cast<float>(d[i] != d[i] ? d[i] : p);
  }
}

// GELU, its gradient, softmax's exp, sigmoid and tanh by hand in AVX-512, 8 doubles per vector, several
// vectors interleaved.
// The compiler's vectorized loop keeps one block of 16 in flight, and each block is a chain of ~35
// dependent operations (exp's and erfc's polynomials): latency-bound, ~1.3 instructions per cycle. With six
// independent chains in each step the loop is throughput-bound (0.85 -> 0.57 ms per 512K elements, one Zen 5
// core). Every operation is the one the compiled loop performs, in the same order (IEEE mul, sub, fma, div,
// min/max clamps, one rounding to float), so the results are the clones' to the bit; the tail goes through
// the clones.
constexpr int kGeluVectors = 6;
#define ONT_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl"), always_inline)) inline

ONT_AVX512 __m512d Bcast(double d) { return _mm512_set1_pd(d); }

// 8 floats widened to doubles.
ONT_AVX512 __m512d LoadD(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }

// y[0..8) = r rounded to float, except where v (x[0..8) widened) is NaN: there x's own bits. The compiled
// loops return such an input unchanged: GELU's as x itself, tanh's because GCC folds its float -> double ->
// float away at -O1 and above (at -O0 a signaling NaN would come back quieted there).
ONT_AVX512 void StoreKeepingNaNs(float* y, __m512d r, __m512d v, const float* x) {
  __mmask8 nan = _mm512_cmp_pd_mask(v, v, _CMP_UNORD_Q);
  _mm256_storeu_ps(y, _mm256_mask_mov_ps(_mm512_cvtpd_ps(r), nan, _mm256_loadu_ps(x)));
}

// Clamp(x, lo, hi) with its NaN behaviour: max(lo, x) and min(hi, x) return x when x is NaN.
ONT_AVX512 __m512d ClampV(__m512d x, double lo, double hi) {
  return _mm512_min_pd(Bcast(hi), _mm512_max_pd(Bcast(lo), x));
}

// ExpD of U vectors of arguments a (already clamped), interleaved: the same operations as ExpD.
template <int U>
ONT_AVX512 void ExpV(const __m512d* a, __m512d* out) {
  const __m512d shifter = Bcast(kShifter);
  __m512d p[U], r[U], t[U];
  for (int k = 0; k < U; ++k) {
    t[k] = _mm512_fmadd_pd(a[k], Bcast(kLog2e), shifter);
    __m512d n = _mm512_sub_pd(t[k], shifter);
    r[k] = _mm512_fnmadd_pd(n, Bcast(kLn2Lo), _mm512_fnmadd_pd(n, Bcast(kLn2Hi), a[k]));
    p[k] = Bcast(kExpTerms[0]);
  }
  for (size_t j = 1; j < sizeof kExpTerms / sizeof kExpTerms[0]; ++j) {
    for (int k = 0; k < U; ++k) p[k] = _mm512_fmadd_pd(p[k], r[k], Bcast(kExpTerms[j]));
  }
  for (int k = 0; k < U; ++k) {
    __m512i bits = _mm512_slli_epi64(_mm512_add_epi64(_mm512_castpd_si512(t[k]), _mm512_set1_epi64(1023)), 52);
    out[k] = _mm512_mul_pd(p[k], _mm512_castsi512_pd(bits));
  }
}

// For kGeluVectors vectors v: e = ExpNeg(0.5 v^2) and two_phi = TwoPhi(v, e). The erfc polynomial's chain
// and exp's are independent, so they are issued together.
ONT_AVX512 void TwoPhiV(const __m512d* v, __m512d* e, __m512d* two_phi) {
  constexpr int U = kGeluVectors;
  __m512d a[U], t[U], u[U], g[U];
  for (int k = 0; k < U; ++k) {
    a[k] = _mm512_xor_pd(ClampV(_mm512_mul_pd(Bcast(0.5), _mm512_mul_pd(v[k], v[k])), 0.0, 700.0), Bcast(-0.0));
    __m512d zc = ClampV(_mm512_mul_pd(_mm512_abs_pd(v[k]), Bcast(kSqrtHalf)), 0.0, kErfcZMax);
    t[k] = _mm512_div_pd(Bcast(1.0), _mm512_fmadd_pd(Bcast(0.5), zc, Bcast(1.0)));
    u[k] = _mm512_mul_pd(_mm512_sub_pd(t[k], Bcast(kErfcMid)), Bcast(1.0 / kErfcHalf));
    g[k] = Bcast(kErfcG[kErfcDegree]);
  }
  ExpV<U>(a, e);
  for (int j = kErfcDegree - 1; j >= 0; --j) {
    for (int k = 0; k < U; ++k) g[k] = _mm512_fmadd_pd(g[k], u[k], Bcast(kErfcG[j]));
  }
  for (int k = 0; k < U; ++k) {
    __m512d c = _mm512_mul_pd(_mm512_mul_pd(t[k], g[k]), e[k]);
    __mmask8 nonneg = _mm512_cmp_pd_mask(v[k], _mm512_setzero_pd(), _CMP_GE_OQ);
    two_phi[k] = _mm512_mask_sub_pd(c, nonneg, Bcast(2.0), c);
  }
}

// ExpShiftSumLoop for `blocks` whole blocks of 16 (n = 16 blocks), U / 2 blocks at a time: the float lane
// sums are added block by block in the loop's order. Returns the 16 lane sums in acc.
template <int U>
ONT_AVX512 void ExpShiftBlocks(const float* x, float shift, float* y, int64_t blocks, __m512* acc) {
  static_assert(U % 2 == 0, "whole blocks of 16");
  const __m512 sh = _mm512_set1_ps(shift);
  for (int64_t b = 0; b < blocks; b += U / 2) {
    const float* xb = x + 16 * b;
    __m512d a[U], e[U];
    for (int k = 0; k < U / 2; ++k) {
      __m512 d = _mm512_sub_ps(_mm512_loadu_ps(xb + 16 * k), sh);
      a[2 * k] = ClampV(_mm512_cvtps_pd(_mm512_castps512_ps256(d)), -104.0, 89.0);
      a[2 * k + 1] = ClampV(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(d), 1))),
                            -104.0, 89.0);
    }
    ExpV<U>(a, e);
    for (int k = 0; k < U / 2; ++k) {
      __m512 v = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(e[2 * k])), _mm512_cvtpd_ps(e[2 * k + 1]), 1);
      _mm512_storeu_ps(y + 16 * (b + k), v);
      *acc = _mm512_add_ps(*acc, v);
    }
  }
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) float ExpShiftSumAvx512(const float* x, float shift, float* y,
                                                                            int64_t n) {
  int64_t blocks = n / 16, wide = blocks / 4 * 4;
  __m512 acc = _mm512_setzero_ps();
  ExpShiftBlocks<8>(x, shift, y, wide, &acc);
  ExpShiftBlocks<2>(x + 16 * wide, shift, y + 16 * wide, blocks - wide, &acc);
  alignas(64) float lane[16];
  _mm512_store_ps(lane, acc);
  float sum = 0;
  for (int j = 0; j < 16; ++j) sum += lane[j];
  int64_t i = 16 * blocks;
  ExpShiftTail(x + i, shift, y + i, n - i);
  for (; i < n; ++i) sum += y[i];
  return sum;
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) void SoftmaxRowAvx512(const float* x, float* y, int64_t n) {
  // The max as SoftmaxRowLoop takes it: x > lane ? x : lane in 16 lanes, so NaNs are passed over; the lanes
  // (never NaN) folded by a shuffle tree rather than one compare chain (the order of a max does not matter,
  // and a tie between -0 and +0 shifts by a zero either way).
  __m512 lanes = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) lanes = _mm512_max_ps(_mm512_loadu_ps(x + i), lanes);
  float mx = _mm512_reduce_max_ps(lanes);
  for (; i < n; ++i) mx = x[i] > mx ? x[i] : mx;
  float sum = ExpShiftSumAvx512(x, mx, y, n);
  const __m512 s = _mm512_set1_ps(sum);
  for (i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_div_ps(_mm512_loadu_ps(y + i), s));
  for (; i < n; ++i) y[i] /= sum;
}

// GELU of the leading multiple of 8 kGeluVectors elements, returning how many; with kSlope also d, the
// derivative as GeluGradAvx512 computes it before the multiply by dy (the same operations).
template <bool kSlope>
__attribute__((target("avx512f,avx512dq,avx512vl"), always_inline)) inline int64_t GeluBlocks(const float* x, float* y,
                                                                                            double* d, int64_t n) {
  constexpr int U = kGeluVectors;
  int64_t i = 0;
  for (; i + 8 * U <= n; i += 8 * U) {
    __m512d v[U], e[U], two_phi[U];
    for (int k = 0; k < U; ++k) v[k] = LoadD(x + i + 8 * k);
    TwoPhiV(v, e, two_phi);
    for (int k = 0; k < U; ++k) {
      __m512d r = _mm512_mul_pd(_mm512_mul_pd(Bcast(0.5), v[k]), two_phi[k]);
      StoreKeepingNaNs(y + i + 8 * k, r, v[k], x + i + 8 * k);
      if constexpr (kSlope) {  // x itself where it is NaN, as GeluAndSlopeLoop
        __m512d cdf = _mm512_mul_pd(Bcast(0.5), two_phi[k]);
        __m512d pdf = _mm512_mul_pd(Bcast(kInvSqrt2Pi), e[k]);
        __m512d s = _mm512_add_pd(cdf, _mm512_mul_pd(v[k], pdf));
        _mm512_storeu_pd(d + i + 8 * k, _mm512_mask_mov_pd(s, _mm512_cmp_pd_mask(v[k], v[k], _CMP_UNORD_Q), v[k]));
      }
    }
  }
  return i;
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) int64_t GeluAvx512(const float* x, float* y, int64_t n) {
  return GeluBlocks<false>(x, y, nullptr, n);
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) int64_t GeluAndSlopeAvx512(const float* x, float* y, double* d,
                                                                       int64_t n) {
  return GeluBlocks<true>(x, y, d, n);
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) int64_t GeluGradAvx512(const float* dy, const float* x, float* dx,
                                                                   int64_t n) {
  constexpr int U = kGeluVectors;
  int64_t i = 0;
  for (; i + 8 * U <= n; i += 8 * U) {
    __m512d v[U], e[U], two_phi[U];
    for (int k = 0; k < U; ++k) v[k] = LoadD(x + i + 8 * k);
    TwoPhiV(v, e, two_phi);
    for (int k = 0; k < U; ++k) {
      __m512d cdf = _mm512_mul_pd(Bcast(0.5), two_phi[k]);
      __m512d pdf = _mm512_mul_pd(Bcast(kInvSqrt2Pi), e[k]);
      __m512d s = _mm512_add_pd(cdf, _mm512_mul_pd(v[k], pdf));
      __m512d g = _mm512_mul_pd(LoadD(dy + i + 8 * k), s);
      // GeluGradLoop's NaNs: s where s is NaN, then x quieted where x is NaN (its widening quiets it).
      g = _mm512_mask_mov_pd(g, _mm512_cmp_pd_mask(s, s, _CMP_UNORD_Q), s);
      g = _mm512_mask_mov_pd(g, _mm512_cmp_pd_mask(v[k], v[k], _CMP_UNORD_Q), v[k]);
      _mm256_storeu_ps(dx + i + 8 * k, _mm512_cvtpd_ps(g));
    }
  }
  return i;
}

// Sigmoid and tanh (the recurrent layers' gates) the same way: kGeluVectors vectors per step.
__attribute__((target("avx512f,avx512dq,avx512vl"))) int64_t SigmoidAvx512(const float* x, float* y, int64_t n) {
  constexpr int U = kGeluVectors;
  int64_t i = 0;
  for (; i + 8 * U <= n; i += 8 * U) {
    __m512d a[U], e[U];
    for (int k = 0; k < U; ++k) {
      a[k] = _mm512_xor_pd(ClampV(LoadD(x + i + 8 * k), -200.0, 200.0), Bcast(-0.0));
    }
    ExpV<U>(a, e);
    for (int k = 0; k < U; ++k) {
      __m512d r = _mm512_div_pd(Bcast(1.0), _mm512_add_pd(Bcast(1.0), e[k]));
      _mm256_storeu_ps(y + i + 8 * k, _mm512_cvtpd_ps(r));
    }
  }
  return i;
}

__attribute__((target("avx512f,avx512dq,avx512vl"))) int64_t TanhAvx512(const float* x, float* y, int64_t n) {
  constexpr int U = kGeluVectors;
  int64_t i = 0;
  for (; i + 8 * U <= n; i += 8 * U) {
    __m512d v[U], a[U], e[U];
    for (int k = 0; k < U; ++k) {
      v[k] = LoadD(x + i + 8 * k);
      a[k] = _mm512_mul_pd(Bcast(2.0), ClampV(_mm512_abs_pd(v[k]), 0.0, 20.0));
    }
    ExpV<U>(a, e);
    for (int k = 0; k < U; ++k) {
      const __m512d abs_v = _mm512_abs_pd(v[k]);
      __m512d r = _mm512_div_pd(_mm512_sub_pd(e[k], Bcast(1.0)), _mm512_add_pd(e[k], Bcast(1.0)));
      r = _mm512_mask_mov_pd(r, _mm512_cmp_pd_mask(abs_v, Bcast(0x1p-12), _CMP_LT_OQ), abs_v);
      // copysign(r, v): r's magnitude (r >= 0 or NaN) with v's sign bit.
      r = _mm512_or_pd(_mm512_abs_pd(r), _mm512_and_pd(v[k], Bcast(-0.0)));
      StoreKeepingNaNs(y + i + 8 * k, r, v[k], x + i + 8 * k);
    }
  }
  return i;
}

bool UseAvx512() {
#if defined(__SANITIZE_THREAD__)
  return false;  // the baseline version only, as for the clones
#else
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl");
  return has;
#endif
}

}  // namespace

void VExp(const float* x, float* y, int64_t n) { ExpLoop(x, y, n); }
float VExpShiftSum(const float* x, float shift, float* y, int64_t n) {
  return UseAvx512() ? ExpShiftSumAvx512(x, shift, y, n) : ExpShiftSumLoop(x, shift, y, n);
}
void VSoftmaxRow(const float* x, float* y, int64_t n) {
  if (UseAvx512()) SoftmaxRowAvx512(x, y, n);
  else SoftmaxRowLoop(x, y, n);
}
void VErf(const float* x, float* y, int64_t n) { ErfLoop(x, y, n); }
void VTanh(const float* x, float* y, int64_t n) {
  int64_t done = UseAvx512() ? TanhAvx512(x, y, n) : 0;
  TanhLoop(x + done, y + done, n - done);
}
void VSigmoid(const float* x, float* y, int64_t n) {
  int64_t done = UseAvx512() ? SigmoidAvx512(x, y, n) : 0;
  SigmoidLoop(x + done, y + done, n - done);
}
void VGelu(const float* x, float* y, int64_t n) {
  int64_t done = UseAvx512() ? GeluAvx512(x, y, n) : 0;
  GeluLoop(x + done, y + done, n - done);
}
void VGeluGrad(const float* dy, const float* x, float* dx, int64_t n) {
  int64_t done = UseAvx512() ? GeluGradAvx512(dy, x, dx, n) : 0;
  GeluGradLoop(dy + done, x + done, dx + done, n - done);
}
void VGeluAndSlope(const float* x, float* y, double* d, int64_t n) {
  int64_t done = UseAvx512() ? GeluAndSlopeAvx512(x, y, d, n) : 0;
  GeluAndSlopeLoop(x + done, y + done, d + done, n - done);
}
void VGeluMulSlope(const float* dy, const double* d, float* dx, int64_t n) { GeluMulSlopeLoop(dy, d, dx, n); }

}  // namespace cpu
}  // namespace ontrain
