// Pooling loops shared by MaxPool and the fused convolution that pools its own output (conv.cc), and the
// mask shared by the pooling gradients that ReLU's gradient was fused into.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/tensor.h"
#include "providers/cpu/kernels/conv_geometry.h"

namespace ontrain {
namespace cpu {

// MaxPool over two spatial dims of planes p0 .. p1 of x (planes `in` apart, `planes` in all), into y and,
// when not null, ind (each plane's offset of its first maximum plus p * in[0] * in[1]; storage_order 1
// transposes the offset).
// g where z > 0, else +0 (NaN z included), by masking g's bits rather than by a branch: MaxPoolReluGrad's
// mask (grad_pool.cc, and grad_conv.cc's MaxPoolReluConvGrad).
inline float KeepIfPositive(float g, float z) {
  uint32_t b;
  std::memcpy(&b, &g, sizeof b);
  b &= 0u - static_cast<uint32_t>(z > 0.0f);
  std::memcpy(&g, &b, sizeof g);
  return g;
}

template <typename T>
void MaxPool2D(const T* x, T* y, int64_t* ind, int64_t p0, int64_t p1, int64_t planes, const Shape& in,
               const Shape& out, const WindowAttrs& w, int64_t storage_order);

}  // namespace cpu
}  // namespace ontrain
