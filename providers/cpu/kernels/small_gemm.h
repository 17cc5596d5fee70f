// Small float32 matrix products on AVX-512 (attention's per-head products: 64 x 64 x 32 and the like),
// where a library call's fixed cost is a large part of the work: dnnl_sgemm reached 121-130 GFLOP/s on
// 64 x 64 x 32 in a hot loop on Zen 5 (one core's FMA peak is 221-224). B is packed into a 16-aligned
// panel once per call and C is computed in register tiles of up to 8 rows by 32 columns, each element's
// products summed over k in order by FMAs from zero, then alpha * sum (+ beta * C).
#pragma once

#include <cstdint>

namespace ontrain {
namespace cpu {

// Whether SmallSgemm takes an m x n x k product on this CPU: AVX-512F, every dim at most kSmallGemmMax, and
// at most 128 x 128 x 64 multiply-adds (64^3 with B transposed). Measured on Zen 5, one core, against
// dnnl_sgemm: 64 x 64 x 32 187 against 161 GFLOP/s (140 against 117 with B transposed), 64^3 194 against
// 181; at 128^3 the library is as fast or faster.
constexpr int64_t kSmallGemmMax = 128;
bool SmallGemmFits(bool trans_b, int64_t m, int64_t n, int64_t k);

// C[M,N] (row stride ldc) = alpha op(A) op(B) + beta C, row-major, as cblas_sgemm; beta 0 never reads C.
void SmallSgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace cpu
}  // namespace ontrain
