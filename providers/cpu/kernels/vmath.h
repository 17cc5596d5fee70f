// Float exp, erf, tanh, sigmoid and GELU over arrays, for the elementwise, activation and softmax kernels.
// Each element is computed in double and rounded once to float, so a result is the correctly rounded value
// except within about 1e-12 (relative) of a rounding boundary, where it may be 1 ulp off; the same on every
// CPU. The loops are compiled for AVX-512, AVX2 and the x86-64 baseline and chosen at load time from the CPU
// (GCC's target_clones), with no contraction into FMAs, so which one runs does not change a bit.
// Every function accepts y == x (in place).
#pragma once

#include <cstdint>

namespace ontrain {
namespace cpu {

void VExp(const float* x, float* y, int64_t n);
// y = exp(x - shift), the subtraction in float; returns the sum of the float results, added in a fixed
// order that depends only on n.
float VExpShiftSum(const float* x, float shift, float* y, int64_t n);
// Softmax of one row: exp(x - max(x)) / sum, the sum as VExpShiftSum's; a NaN anywhere gives a NaN row.
void VSoftmaxRow(const float* x, float* y, int64_t n);
void VErf(const float* x, float* y, int64_t n);
void VTanh(const float* x, float* y, int64_t n);
void VSigmoid(const float* x, float* y, int64_t n);
// GELU, exact: x Phi(x) = x (1 + erf(x / sqrt 2)) / 2; and its gradient dx = dy (Phi(x) + x phi(x)). Phi of
// negative x comes from erfc, so GELU keeps its relative accuracy where 1 + erf would cancel.
void VGelu(const float* x, float* y, int64_t n);
void VGeluGrad(const float* dy, const float* x, float* dx, int64_t n);
// VGelu, and beside it the derivative VGeluGrad multiplies dy by, Phi(x) + x phi(x), in double as VGeluGrad
// computes it (the same operations); and dx = dy * d in double, rounded to float. VGeluMulSlope(dy, d) of
// VGeluAndSlope's d is VGeluGrad(dy, x) bit for bit.
void VGeluAndSlope(const float* x, float* y, double* d, int64_t n);
void VGeluMulSlope(const float* dy, const double* d, float* dx, int64_t n);

}  // namespace cpu
}  // namespace ontrain
