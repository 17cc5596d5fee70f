// The recurrent passes of recurrent_math.h on the device: GEMMs through cuBLAS on the caller's handle
// (bound to the provider's stream), per-element steps as one-thread-per-element launches.
#include <cublas_v2.h>

#include <climits>
#include <type_traits>

#include "providers/cuda/kernels/common.cuh"
#include "providers/cuda/kernels/recurrent_passes.h"

namespace ontrain {
namespace cuda {
namespace {

template <class F>
__global__ void ForEachKernel(F f, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) f(i);
}

template <typename T>
struct ZeroRows {
  T* c;
  int64_t n, ldc;
  __device__ void operator()(int64_t i) const { c[(i / n) * ldc + i % n] = T(0); }
};

template <typename T>
class CudaBackend {
 public:
  CudaBackend(cublasHandle_t h, cudaStream_t s) : handle_(h), stream_(s) {}
  const char* failed() const { return failed_; }

  // Row-major C (m x n, leading dim ldc) = alpha op(A) op(B) + beta C, as C' = op(B)' op(A)' column-major.
  bool Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc) {
    if (m == 0 || n == 0) return true;
    if (k == 0) return beta != T(0) || ForEach(m * n, ZeroRows<T>{c, n, ldc});
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX || ldc > INT_MAX) {
      failed_ = "GEMM dims beyond 2^31";
      return false;
    }
    const cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st;
    if constexpr (std::is_same_v<T, float>) {
      st = cublasSgemm(handle_, ob, oa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                       static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c, static_cast<int>(ldc));
    } else {
      st = cublasDgemm(handle_, ob, oa, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b,
                       static_cast<int>(ldb), a, static_cast<int>(lda), &beta, c, static_cast<int>(ldc));
    }
    if (st != CUBLAS_STATUS_SUCCESS) {
      failed_ = std::is_same_v<T, float> ? "cublasSgemm" : "cublasDgemm";
      return false;
    }
    return true;
  }

  template <class F>
  bool ForEach(int64_t n, const F& f) {
    if (n <= 0) return true;
    ForEachKernel<F><<<Blocks(n), kThreads, 0, stream_>>>(f, n);
    if (cudaGetLastError() != cudaSuccess) {
      failed_ = "a recurrent step's kernel launch";
      return false;
    }
    return true;
  }

 private:
  cublasHandle_t handle_;
  cudaStream_t stream_;
  const char* failed_ = nullptr;
};

template <typename T>
const char* Run(RecurrentPass p, const RecurrentCall<T>& c, cublasHandle_t cublas, cudaStream_t stream) {
  CudaBackend<T> be(cublas, stream);
  if (RunRecurrentPass(be, p, c)) return nullptr;
  return be.failed() ? be.failed() : "a recurrent pass";
}

}  // namespace

const char* Recurrent(RecurrentPass p, const RecurrentCall<float>& c, cublasHandle_t cublas, cudaStream_t stream) {
  return Run<float>(p, c, cublas, stream);
}
const char* Recurrent(RecurrentPass p, const RecurrentCall<double>& c, cublasHandle_t cublas, cudaStream_t stream) {
  return Run<double>(p, c, cublas, stream);
}

}  // namespace cuda
}  // namespace ontrain
