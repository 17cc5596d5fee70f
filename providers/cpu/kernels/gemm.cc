// Gemm on Eigen maps. Each worker computes a band of rows of C.
#include "providers/cpu/kernels/gemm.h"

#include <Eigen/Core>

namespace ontrain {
namespace cpu {

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
          ThreadPool* pool) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat>;
  Eigen::Map<Mat> C(c, m, n);
  if (k == 0) {
    if (beta == T(0)) C.setZero();
    else C *= beta;
    return;
  }
  CMap A(a, trans_a ? k : m, trans_a ? m : k);
  CMap B(b, trans_b ? n : k, trans_b ? k : n);
  auto band = [&](int64_t r0, int64_t r1) {
    int64_t rows = r1 - r0;
    auto Cb = C.middleRows(r0, rows);
    if (beta == T(0)) {
      if (!trans_a && !trans_b) Cb.noalias() = alpha * (A.middleRows(r0, rows) * B);
      else if (!trans_a) Cb.noalias() = alpha * (A.middleRows(r0, rows) * B.transpose());
      else if (!trans_b) Cb.noalias() = alpha * (A.middleCols(r0, rows).transpose() * B);
      else Cb.noalias() = alpha * (A.middleCols(r0, rows).transpose() * B.transpose());
    } else {
      Cb *= beta;
      if (!trans_a && !trans_b) Cb.noalias() += alpha * (A.middleRows(r0, rows) * B);
      else if (!trans_a) Cb.noalias() += alpha * (A.middleRows(r0, rows) * B.transpose());
      else if (!trans_b) Cb.noalias() += alpha * (A.middleCols(r0, rows).transpose() * B);
      else Cb.noalias() += alpha * (A.middleCols(r0, rows).transpose() * B.transpose());
    }
  };
  ParallelFor(pool, m, 2.0 * static_cast<double>(n) * static_cast<double>(k), band);
}

template void Gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*,
                          ThreadPool*);
template void Gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, const double*, double,
                           double*, ThreadPool*);
template void Gemm<int32_t>(bool, bool, int64_t, int64_t, int64_t, int32_t, const int32_t*, const int32_t*, int32_t,
                            int32_t*, ThreadPool*);
template void Gemm<int64_t>(bool, bool, int64_t, int64_t, int64_t, int64_t, const int64_t*, const int64_t*, int64_t,
                            int64_t*, ThreadPool*);
template void Gemm<uint32_t>(bool, bool, int64_t, int64_t, int64_t, uint32_t, const uint32_t*, const uint32_t*,
                             uint32_t, uint32_t*, ThreadPool*);
template void Gemm<uint64_t>(bool, bool, int64_t, int64_t, int64_t, uint64_t, const uint64_t*, const uint64_t*,
                             uint64_t, uint64_t*, ThreadPool*);

}  // namespace cpu
}  // namespace ontrain
