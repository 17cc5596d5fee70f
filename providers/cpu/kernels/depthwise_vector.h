// The AVX-512 kernels of the depthwise convolution (depthwise.h) on float32, and the plane geometry and
// per-thread buffers that they and depthwise.cc's loops share. Each entry point returns false, having done
// nothing, where its kernels do not apply (no AVX-512, strides other than 1 and 2, windows of more than 25
// taps, planes larger than 512 x 512, a strided grid reaching outside the plane); the caller then runs its
// loops.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {

struct Geo2D {
  int64_t h, w, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
  Geo2D(const int64_t* in, const int64_t* out, const WindowAttrs& g)
      : h(in[0]), w(in[1]), oh(out[0]), ow(out[1]), kh(g.kernel[0]), kw(g.kernel[1]), sh(g.strides[0]),
        sw(g.strides[1]), ph(g.pads[0]), pw(g.pads[1]), dh(g.dilations[0]), dw(g.dilations[1]) {}
  // Output columns [*lo, *hi) whose input column for window column b is inside the image.
  void Columns(int64_t b, int64_t* lo, int64_t* hi) const {
    int64_t off = b * dw - pw;  // iw = ow * sw + off
    *lo = off >= 0 ? 0 : (-off + sw - 1) / sw;
    *hi = off >= w ? 0 : std::min(ow, (w - 1 - off) / sw + 1);
    if (*hi < *lo) *hi = *lo;
  }
  // Stride-1 padded layout: plane width and height with the pads, and the output computed in rows of Wp.
  int64_t wp() const { return w + pw + (ow - 1 + (kw - 1) * dw + 1 - w - pw > 0 ? ow - 1 + (kw - 1) * dw + 1 - w - pw : 0); }
  int64_t hp() const { return std::max(h + ph, oh - 1 + (kh - 1) * dh + 1); }
};

// A per-thread buffer that grows to the largest size asked for and is then reused (no allocation per step).
template <typename T>
T* ThreadBuffer(int which, size_t n) {
  thread_local std::vector<T> buffers[2];
  std::vector<T>& b = buffers[which];
  if (b.size() < n) b.resize(n);
  return b.data();
}

// y [N, C, OH, OW] from x [N, C, H, W], w [C, 1, KH, KW] and an optional bias.
bool DwVectorForward(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, const Geo2D& g,
                     ThreadPool* pool);
// dX from dY and w.
bool DwVectorBackwardData(const float* dy, const float* w, float* dx, int64_t n, int64_t c, const Geo2D& g,
                          ThreadPool* pool);
// dW from dY and x.
bool DwVectorBackwardWeights(const float* dy, const float* x, float* dw, int64_t n, int64_t c, const Geo2D& g,
                             ThreadPool* pool);
// dX and dW in one pass, with the bits of the two above.
bool DwVectorBackward(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                      const Geo2D& g, ThreadPool* pool);

}  // namespace cpu
}  // namespace ontrain
