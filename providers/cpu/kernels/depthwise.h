// Depthwise 2-D convolution (group == input channels == output channels) computed directly: one small
// window per channel does not suit im2col + GEMM, whose per-channel calls cost more than the arithmetic.
// Each output or gradient element is summed over the window positions in a fixed order, whatever the
// thread count. Planes (image, channel) run in parallel; dW, and dX with dW, run channels in parallel.
#pragma once

#include <cstdint>

#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {

// Whether Conv/ConvGrad with these shapes take the direct path: 2-D, one input and one output channel per
// group.
bool IsDepthwise2D(int64_t channels, int64_t out_channels, int64_t group, size_t spatial_rank);

// x [N, C, H, W], w [C, 1, KH, KW], optional bias [C] -> y [N, C, OH, OW].
template <typename T>
void DepthwiseForward(const T* x, const T* w, const T* bias, T* y, int64_t n, int64_t c, const int64_t* in,
                      const int64_t* out, const WindowAttrs& geo, ThreadPool* pool);
// dX [N, C, H, W] from dY and w.
template <typename T>
void DepthwiseBackwardData(const T* dy, const T* w, T* dx, int64_t n, int64_t c, const int64_t* in,
                           const int64_t* out, const WindowAttrs& geo, ThreadPool* pool);
// dW [C, 1, KH, KW] from dY and x.
template <typename T>
void DepthwiseBackwardWeights(const T* dy, const T* x, T* dw, int64_t n, int64_t c, const int64_t* in,
                              const int64_t* out, const WindowAttrs& geo, ThreadPool* pool);
// dX and dW, either of them null when not wanted: one pass over dY where the vector kernels run both, with
// the results of the two functions above.
template <typename T>
void DepthwiseBackward(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t n, int64_t c, const int64_t* in,
                       const int64_t* out, const WindowAttrs& geo, ThreadPool* pool);

}  // namespace cpu
}  // namespace ontrain
