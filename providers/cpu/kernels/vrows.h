// Row loops of the normalization kernels over float data, compiled per ISA like vmath.h
// (AVX-512, AVX2, baseline; chosen at load time, no FMA contraction), so each gives the same bits on every
// CPU. The sums are LaneSum's (common.h): double partial sums over eight interleaved lanes, added in order at
// the end, which is the order the generic kernels use for float64 data.
#pragma once

#include <cstdint>

namespace ontrain {
namespace cpu {

// sum x[i]
double VRowSum(const float* x, int64_t n);
// sum (x[i] - mean)^2
double VRowSumSqDev(const float* x, int64_t n, double mean);
// sum g[i] * (x[i] - mean) * inv
double VRowSumDotDev(const float* g, const float* x, int64_t n, double mean, double inv);
// y[i] = x[i] * a + b (float arithmetic)
void VRowAffine(const float* x, float* y, int64_t n, float a, float b);
// Batch normalization's input gradient: dx[i] = float(coef * (m * g[i] - db - (x[i] - mean) * inv * ds)).
void VRowBatchNormGrad(const float* g, const float* x, float* dx, int64_t n, double mean, double inv, double coef,
                       double m, double db, double ds);

}  // namespace cpu
}  // namespace ontrain
