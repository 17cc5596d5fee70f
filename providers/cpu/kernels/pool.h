// Pooling loops shared by MaxPool and the fused convolution that pools its own output (conv.cc), and the
// mask shared by the pooling gradients that ReLU's gradient was fused into.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/tensor.h"
#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/vrows.h"

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

// The window code (vrows.h) of a 2x2 window at stride 2 (pooled row i, column j of planes wd wide) whose
// maximum is element `at` of its plane and whose pooled value is y.
template <typename T>
inline uint8_t WindowCode(int64_t at, int64_t i, int64_t j, int64_t wd, T y) {
  const int64_t a = at / wd - 2 * i, b = at % wd - 2 * j;
  return static_cast<uint8_t>(2 * a + b + (y > T(0) ? kWindowCodePositive : 0));
}

// Planes p0 .. p1 of x (h rows of wd) from g through window codes (planes of oh rows of ow): every element
// +0, then the one each code names set to +0 + g where its positive bit is set, +0 + +0 where not (float
// arithmetic): MaxPoolReluGrad's zeroing and scatter, which add into +0 once per element (windows do not
// overlap). Where VPlanesMaxUnpool2x2Codes does not apply.
template <typename T>
void UnpoolWindowCodes(const T* g, const uint8_t* codes, int64_t h, int64_t wd, int64_t oh, int64_t ow, int64_t p0,
                       int64_t p1, T* x) {
  const int64_t isize = h * wd, osize = oh * ow;
  for (int64_t p = p0; p < p1; ++p) {
    T* plane = x + p * isize;
    std::fill(plane, plane + isize, static_cast<T>(0.0f));
    // Without branches (the codes are random): the gradient's bits masked by the positive bit.
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t o = p * osize + i * ow + j;
        const int code = codes[o];
        float add = static_cast<float>(g[o]);
        uint32_t b;
        std::memcpy(&b, &add, sizeof b);
        b &= 0u - static_cast<uint32_t>((code & kWindowCodePositive) != 0);
        std::memcpy(&add, &b, sizeof add);
        plane[(2 * i + ((code >> 1) & 1)) * wd + 2 * j + (code & 1)] = static_cast<T>(0.0f + add);
      }
    }
  }
}

template <typename T>
void MaxPool2D(const T* x, T* y, int64_t* ind, int64_t p0, int64_t p1, int64_t planes, const Shape& in,
               const Shape& out, const WindowAttrs& w, int64_t storage_order);

}  // namespace cpu
}  // namespace ontrain
