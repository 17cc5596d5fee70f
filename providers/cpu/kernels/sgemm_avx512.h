// Float32 matrix products on AVX-512 with B packed into panels of 32 columns (k rows of 32 floats, zeros
// past n, 64-byte aligned) and C computed in register tiles of up to 8 rows by 32 columns: each element's
// products summed over k in order by FMAs from zero, then alpha * sum (+ beta * C). Every element is its own
// chain, so the bits depend on neither the tiling nor how a caller splits the rows and panels.
// - SmallSgemm: small products whole (attention's per-head 64 x 64 x 32 and the like), B packed on the
//   stack, where a library call's fixed cost is a large part of the work: dnnl_sgemm reached 121-130
//   GFLOP/s on 64 x 64 x 32 in a hot loop on Zen 5 (one core's FMA peak is 221-224).
// - PackPanels + PanelTiles: larger products with B transposed (a layer's X W^T), B packed by the caller
//   into memory it owns and the rows and panels split by it (gemm.cc). oneDNN packs a transposed B more
//   slowly than an untransposed one; on Zen 5, one thread, caches flushed between calls, these panels ran
//   [128, 784] x [512, 784]^T at 246-250 GFLOP/s against oneDNN's 234-248, [128, 512] x [512, 512]^T 241
//   against 232-234, [1024, 128] x [512, 128]^T 263 against 245, [64, 1600] x [128, 1600]^T 223 against 161.
//   Untransposed B (oneDNN 246-251 against 221-235 here on [128, 512] x [512, 784]) stays with the library.
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

// Panel products: whether an m x n x k product runs on panels here (AVX-512F, A as stored, B transposed, at
// least 32 columns and not SmallSgemm's), and the floats its packed B takes (k times n rounded up to 32).
constexpr int64_t kPanelColumns = 32;
bool PanelGemmFits(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);
int64_t PanelFloats(int64_t n, int64_t k);

// Packs panels p0 .. p1 (columns 32 p0 .. 32 p1, the last one ragged) of op(B) [k, n] into `bp` (PanelFloats
// floats, 64-byte aligned); B is stored transposed, [n, k] with row stride ldb.
void PackPanels(int64_t n, int64_t k, const float* b, int64_t ldb, float* bp, int64_t p0, int64_t p1);

// What the panel tiles do to each element of C after alpha A op(B) + beta C, while it is in a register: + bias[j]
// where `bias` (a row of n floats) is given, rounded once more as a separate Add would; then, with `relu`,
// Relu's expression v > 0 ? v : +0 (NaN and -0 become +0), the bits of a separate Relu (FusedGemm).
struct TileEpilogue {
  const float* bias = nullptr;
  bool relu = false;
};

// Rows 0 .. m of C (A's rows, row stride lda) at columns j0 .. j1 (j0 a multiple of 32, j1 at most the
// product's n) from PackPanels' B: alpha A op(B) + beta C, as SmallSgemm, then the epilogue.
void PanelTiles(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha, const float* a, int64_t lda,
                const float* bp, float beta, const TileEpilogue& ep, float* c, int64_t ldc);

// The same products with the operands' roles swapped, for a layer's X W^T with fewer rows than columns (a
// batch of 128 against 512 units): A's rows are packed into panels instead of B's (128 x 784 floats where
// B's panels would be 512 x 784, which take 13% of such a product's time on Zen 4, read from L3 and
// written again each step) and B's rows are read as stored, 8 at a time. The sums are PanelTiles', bit for
// bit. PanelGemmSwaps: whether Gemm takes this form (AVX-512VL as well, m a multiple of 32 so that no
// panel is padded, m < n); A [m, k] is stored as PackPanels' B is, so PackPanels(m, k, a, lda, ap, ...) packs
// it, into PanelFloats(m, k) floats; SwappedPanelTiles computes C's columns j0 .. j1 at all m rows.
bool PanelGemmSwaps(int64_t m, int64_t n);
void SwappedPanelTiles(int64_t m, int64_t j0, int64_t j1, int64_t k, float alpha, const float* ap, const float* b,
                       int64_t ldb, float beta, const TileEpilogue& ep, float* c, int64_t ldc);

}  // namespace cpu
}  // namespace ontrain
