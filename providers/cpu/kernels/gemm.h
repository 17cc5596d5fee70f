// Row-major matrix products: float32 on oneDNN and on our AVX-512 panels (sgemm_avx512.h), float64 on
// OpenBLAS (both libraries loaded at run time, their kernels chosen for the CPU it runs on), the integer
// types on Eigen; split across the intra-op pool. Used by MatMul, Gemm,
// FusedMatMul, Conv and ConvTranspose.
#pragma once

#include <cstddef>
#include <cstdint>

#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {

// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is [M,K]: A is [M,K] or, transposed,
// [K,M]; likewise op(B) is [K,N]. beta = 0 ignores C's old contents (it may be uninitialised).
// Loads OpenBLAS (see gemm.cc) now rather than at the first product; the CPU provider calls it when
// created, before any thread of its pool could.
void InitBlas();

// `scratch`, where a kernel's Prepare asked for GemmScratchBytes of the same product, holds B packed for a
// float product A B^T on AVX-512 (sgemm_avx512.h: each element one FMA chain over k, so its bits do not
// depend on the pool); without it the product runs on the library. Either way C is A B^T to the float,
// though the last bits may differ between the two (the library sums K in its own blocks).
//
// `bias`, when given, is a row of n added to every row of C after the product, element by element as Add
// (c + bias, rounded once more), and `relu` then applies Relu's expression v > 0 ? v : 0 (NaN and -0 become
// +0: FusedGemm), both while the rows are in cache: in the register tiles on the panels, after each chunk on
// the library.
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
          ThreadPool* pool, void* scratch = nullptr, const T* bias = nullptr, bool relu = false);
template <typename T>
size_t GemmScratchBytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);

// The same for float and double with explicit row strides (leading dimensions) of A, B and C, in one call
// on the calling thread: a block of a wider matrix, or a matrix read at an offset of another.
template <typename T>
void GemmLd(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace cpu
}  // namespace ontrain
