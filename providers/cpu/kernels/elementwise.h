// Loops shared by the elementwise kernels: unary maps and broadcasting binary maps, split across the pool.
#pragma once

#include <type_traits>

#include "providers/cpu/kernels/common.h"

namespace ontrain {
namespace cpu {

template <typename T>
constexpr bool kIsHalf = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// The type arithmetic is done in: float for the 16-bit floats, T otherwise.
template <typename T>
using ComputeType = std::conditional_t<kIsHalf<T>, float, T>;

template <typename In, typename Out, typename F>
void MapUnary(const In* in, Out* out, int64_t n, ThreadPool* pool, F f) {
  ParallelFor(pool, n, 8.0, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = f(in[i]);
  });
}

// out = f(a, b) with numpy broadcasting; out must already have the broadcast shape.
template <typename A, typename B, typename O, typename F>
void MapBinary(const Tensor& a, const Tensor& b, Tensor* out, ThreadPool* pool, F f) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  O* po = out->data<O>();
  const Shape& os = out->shape();
  int64_t n = out->NumElements();
  if (a.shape() == os && b.shape() == os) {
    ParallelFor(pool, n, 4.0, [&](int64_t s, int64_t e) { for (int64_t i = s; i < e; ++i) po[i] = f(pa[i], pb[i]); });
  } else if (b.NumElements() == 1 && a.NumElements() == n) {
    const B v = pb[0];
    ParallelFor(pool, n, 4.0, [&](int64_t s, int64_t e) { for (int64_t i = s; i < e; ++i) po[i] = f(pa[i], v); });
  } else if (a.NumElements() == 1 && b.NumElements() == n) {
    const A v = pa[0];
    ParallelFor(pool, n, 4.0, [&](int64_t s, int64_t e) { for (int64_t i = s; i < e; ++i) po[i] = f(v, pb[i]); });
  } else {
    BroadcastRows rows({a.shape(), b.shape()}, os);
    const int64_t len = rows.row_length(), sa = rows.inner_stride(0), sb = rows.inner_stride(1);
    ParallelFor(pool, rows.num_rows(), 4.0 * len, [&](int64_t s, int64_t e) {
      int64_t off[2];
      for (int64_t r = s; r < e; ++r) {
        rows.Offsets(r, off);
        O* dst = po + r * len;
        for (int64_t i = 0; i < len; ++i) dst[i] = f(pa[off[0] + i * sa], pb[off[1] + i * sb]);
      }
    });
  }
}

}  // namespace cpu
}  // namespace ontrain
