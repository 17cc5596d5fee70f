// Row-major matrix products on Eigen, split by rows across the intra-op pool. Used by MatMul, Gemm, Conv
// and ConvTranspose.
#pragma once

#include <cstdint>

#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {

// C[M,N] = alpha * op(A) * op(B) + beta * C, all row-major. op(A) is [M,K]: A is [M,K] or, transposed,
// [K,M]; likewise op(B) is [K,N]. beta = 0 ignores C's old contents (it may be uninitialised).
template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
          ThreadPool* pool);

}  // namespace cpu
}  // namespace ontrain
