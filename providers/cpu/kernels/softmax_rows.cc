// SoftmaxGradRows (softmax_rows.h), instantiated here once per float type.
#include "providers/cpu/kernels/softmax_rows.h"

#include <cmath>

#include "providers/cpu/kernels/elementwise.h"

namespace ontrain {
namespace cpu {

template <typename T>
void SoftmaxGradRows(bool log, const T* pd, const T* py, T* out, int64_t rows, int64_t len) {
  using C = ComputeType<T>;
  int64_t r = 0;
  for (; r + kSoftmaxGradRowGroup <= rows; r += kSoftmaxGradRowGroup) {
    const T *gd = pd + r * len, *gy = py + r * len;
    C sum[kSoftmaxGradRowGroup] = {};
    for (int64_t i = 0; i < len; ++i) {
      for (int64_t q = 0; q < kSoftmaxGradRowGroup; ++q) {
        const int64_t at = q * len + i;
        sum[q] += log ? static_cast<C>(gd[at]) : static_cast<C>(gd[at]) * static_cast<C>(gy[at]);
      }
    }
    for (int64_t q = 0; q < kSoftmaxGradRowGroup; ++q) {
      const C sq = sum[q];
      const T *rd = gd + q * len, *ry = gy + q * len;
      T* ro = out + (r + q) * len;
      for (int64_t i = 0; i < len; ++i) {
        C g = static_cast<C>(rd[i]), v = static_cast<C>(ry[i]);
        ro[i] = static_cast<T>(log ? g - std::exp(v) * sq : v * (g - sq));
      }
    }
  }
  for (; r < rows; ++r) {
    const T *rd = pd + r * len, *ry = py + r * len;
    T* ro = out + r * len;
    C sum = 0;
    for (int64_t i = 0; i < len; ++i) sum += log ? static_cast<C>(rd[i]) : static_cast<C>(rd[i]) * static_cast<C>(ry[i]);
    for (int64_t i = 0; i < len; ++i) {
      C g = static_cast<C>(rd[i]), v = static_cast<C>(ry[i]);
      ro[i] = static_cast<T>(log ? g - std::exp(v) * sum : v * (g - sum));
    }
  }
}


template void SoftmaxGradRows<float>(bool, const float*, const float*, float*, int64_t, int64_t);
template void SoftmaxGradRows<double>(bool, const double*, const double*, double*, int64_t, int64_t);
template void SoftmaxGradRows<Float16>(bool, const Float16*, const Float16*, Float16*, int64_t, int64_t);
template void SoftmaxGradRows<BFloat16>(bool, const BFloat16*, const BFloat16*, BFloat16*, int64_t, int64_t);

}  // namespace cpu
}  // namespace ontrain
