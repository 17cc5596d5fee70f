// Pooling loops shared by MaxPool and the fused convolution that pools its own output (conv.cc).
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "providers/cpu/kernels/conv_geometry.h"

namespace ontrain {
namespace cpu {

// MaxPool over two spatial dims of planes p0 .. p1 of x (planes `in` apart, `planes` in all), into y and,
// when not null, ind (each plane's offset of its first maximum plus p * in[0] * in[1]; storage_order 1
// transposes the offset).
template <typename T>
void MaxPool2D(const T* x, T* y, int64_t* ind, int64_t p0, int64_t p1, int64_t planes, const Shape& in,
               const Shape& out, const WindowAttrs& w, int64_t storage_order);

}  // namespace cpu
}  // namespace ontrain
