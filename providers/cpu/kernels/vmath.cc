// The vectorized float math of vmath.h. The element functions are inline double arithmetic that GCC
// vectorizes: exp by range reduction to r in [-ln2/2, ln2/2] (x = n ln2 + r, 2^n built in the exponent
// bits) and its Taylor series to r^10 (error < 3e-13); erf and erfc from the fits of vmath_tables.inc.
// No table lookups: GCC 12 does not emit gathers for the generic tuning, and a loop with one stays scalar.
#include "providers/cpu/kernels/vmath.h"

#include <cmath>
#include <cstring>

namespace ontrain {
namespace cpu {
namespace {

#include "providers/cpu/kernels/vmath_tables.inc"

#define ONT_VMATH_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

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

// exp(x) for |x| <= 700 (callers clamp); NaN stays NaN.
inline double ExpD(double x) {
  const double kLog2e = 1.4426950408889634, kLn2Hi = 0.693147180369123816490, kLn2Lo = 1.90821492927058770002e-10;
  const double kShifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer kept in the low bits
  double t = x * kLog2e + kShifter;
  double n = t - kShifter;
  double r = (x - n * kLn2Hi) - n * kLn2Lo;
  double p = 1.0 / 3628800;
  p = p * r + 1.0 / 362880;
  p = p * r + 1.0 / 40320;
  p = p * r + 1.0 / 5040;
  p = p * r + 1.0 / 720;
  p = p * r + 1.0 / 120;
  p = p * r + 1.0 / 24;
  p = p * r + 1.0 / 6;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  // The low 11 bits of t's mantissa are n (two's complement); n + 1023 shifted into the exponent is 2^n.
  return p * Bits2Double((Double2Bits(t) + 1023) << 52);
}

inline double Clamp(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

constexpr double kSqrtHalf = 0.70710678118654752440, kInvSqrt2Pi = 0.39894228040143267794;

// exp of a float argument: below -104 the float result is 0, above 89 it is inf.
inline double ExpF(double x) { return ExpD(Clamp(x, -104.0, 89.0)); }

// erf(a) and erfc(a) of a >= 0 (or NaN), both accurate to ~1e-13 relative: the Maclaurin series below
// kErfSmallEnd, t exp(-a^2 + h(t)) above (erfc then, erf = 1 - erfc).
struct ErfPair {
  double erf, erfc;
};
inline ErfPair ErfErfc(double a) {
  double as = a < kErfSmallEnd ? a : kErfSmallEnd;
  double x2 = as * as;
  double s = kErfSmall[kErfSmallTerms - 1];
#pragma GCC unroll 16
  for (int k = kErfSmallTerms - 2; k >= 0; --k) s = s * x2 + kErfSmall[k];
  s *= as;
  double z = Clamp(a, kErfSmallEnd, kErfcZMax);
  double t = 1.0 / (1.0 + 0.5 * z);
  double u = (t - kErfcMid) * (1.0 / kErfcHalf);
  double h = kErfcH[kErfcDegree];
#pragma GCC unroll 24
  for (int k = kErfcDegree - 1; k >= 0; --k) h = h * u + kErfcH[k];
  double c = t * ExpD(h - z * z);
  bool small = a < kErfSmallEnd;
  return {small ? s : 1.0 - c, small ? 1.0 - s : c};
}

inline double ErfD(double x) {
  double r = std::copysign(ErfErfc(std::fabs(x)).erf, x);
  return x == x ? r : x;
}

// 2 Phi(x) = 1 + erf(x / sqrt 2), from erfc where erf would cancel against 1.
inline double TwoPhi(double x) {
  ErfPair e = ErfErfc(std::fabs(x * kSqrtHalf));
  return x >= 0 ? 1.0 + e.erf : e.erfc;
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
    double r = 0.5 * v * TwoPhi(v);
    y[i] = static_cast<float>(v == v ? r : v);
  }
}

ONT_VMATH_CLONES void GeluGradLoop(const float* dy, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = x[i];
    double cdf = 0.5 * TwoPhi(v);
    double pdf = kInvSqrt2Pi * ExpD(-0.5 * Clamp(v * v, 0.0, 1000.0));
    dx[i] = static_cast<float>(static_cast<double>(dy[i]) * (cdf + v * pdf));
  }
}

}  // namespace

void VExp(const float* x, float* y, int64_t n) { ExpLoop(x, y, n); }
float VExpShiftSum(const float* x, float shift, float* y, int64_t n) { return ExpShiftSumLoop(x, shift, y, n); }
void VErf(const float* x, float* y, int64_t n) { ErfLoop(x, y, n); }
void VTanh(const float* x, float* y, int64_t n) { TanhLoop(x, y, n); }
void VSigmoid(const float* x, float* y, int64_t n) { SigmoidLoop(x, y, n); }
void VGelu(const float* x, float* y, int64_t n) { GeluLoop(x, y, n); }
void VGeluGrad(const float* dy, const float* x, float* dx, int64_t n) { GeluGradLoop(dy, x, dx, n); }

}  // namespace cpu
}  // namespace ontrain
