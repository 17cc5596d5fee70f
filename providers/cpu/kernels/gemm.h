// Row-major matrix products: float32 and float64 on OpenBLAS (loaded at run time, its kernels chosen for
// the CPU it runs on), the integer types on Eigen; split across the intra-op pool. Used by MatMul, Gemm,
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

// `scratch`, where a kernel's Prepare asked for GemmScratchBytes of the same product, lets a float product
// A B^T of many rows run as A (B^T) with B^T copied out first (see gemm.cc); without it, or where that
// does not pay, the product runs as asked. Either way C is A B^T to the float, though its rounding may
// differ in the last bits between the two forms (the library sums K in different blocks).
//
// `rows_done`, when given, is called with [r0, r1) once rows r0 .. r1 - 1 of C are final, on the thread that
// computed them while they are still in its cache, each row exactly once (a product split by columns, or not
// split, reports all its rows at the end): MatMulBias adds its bias there.
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
          ThreadPool* pool, void* scratch = nullptr, const RangeFn* rows_done = nullptr);
template <typename T>
size_t GemmScratchBytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k);

// The same for float and double with explicit row strides (leading dimensions) of A, B and C, in one call
// on the calling thread: a block of a wider matrix, or a matrix read at an offset of another.
template <typename T>
void GemmLd(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc);

}  // namespace cpu
}  // namespace ontrain
