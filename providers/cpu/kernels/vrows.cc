// The per-ISA row loops of vrows.h.
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

#define ONT_VROWS_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))

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

ONT_VROWS_CLONES void AffineLoop(const float* x, float* y, int64_t n, float a, float b) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * a + b;
}

ONT_VROWS_CLONES void BatchNormGradLoop(const float* g, const float* x, float* dx, int64_t n, double mean, double inv,
                                        double coef, double m, double db, double ds) {
  for (int64_t i = 0; i < n; ++i) {
    double xh = (x[i] - mean) * inv;
    double gi = g[i];
    dx[i] = static_cast<float>(coef * (m * gi - db - xh * ds));
  }
}

}  // namespace

double VRowSum(const float* x, int64_t n) { return SumLoop(x, n); }
double VRowSumSqDev(const float* x, int64_t n, double mean) { return SumSqDevLoop(x, n, mean); }
double VRowSumDotDev(const float* g, const float* x, int64_t n, double mean, double inv) {
  return SumDotDevLoop(g, x, n, mean, inv);
}
void VRowAffine(const float* x, float* y, int64_t n, float a, float b) { AffineLoop(x, y, n, a, b); }
void VRowBatchNormGrad(const float* g, const float* x, float* dx, int64_t n, double mean, double inv, double coef,
                       double m, double db, double ds) {
  BatchNormGradLoop(g, x, dx, n, mean, inv, coef, m, db, ds);
}

}  // namespace cpu
}  // namespace ontrain
