// The direct depthwise convolution of depthwise.h.
//
// Stride 1: the plane is copied into a zero-bordered buffer of width Wp = W + pads, and the output is
// computed in rows of that same width (the extra columns are dropped at the end), so that each window
// offset (a, b) is one long vector loop over the whole plane: y[i] += w[a, b] * xpad[i + a dh Wp + b dw].
// Strided: for each window offset, output row oh reads input row ih = oh * sh - ph + a * dh, and the columns
// ow whose input column ow * sw - pw + b * dw is inside the image form one range, so the inner loop has no
// bounds checks.
//
// Float32 on AVX-512 takes the kernels of depthwise_vector.cc instead, where they apply.
#include "providers/cpu/kernels/depthwise.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/depthwise_vector.h"

namespace ontrain {
namespace cpu {
namespace {

// xpad [hp, wp] = x [h, w] at offset (ph, pw), zeros around.
template <typename T>
void PadPlane(const T* x, const Geo2D& g, int64_t wp, int64_t hp, T* xpad) {
  std::fill(xpad, xpad + hp * wp, T(0));
  for (int64_t r = 0; r < g.h; ++r) CopyRow(x + r * g.w, g.w, xpad + (r + g.ph) * wp + g.pw);
}

}  // namespace

bool IsDepthwise2D(int64_t channels, int64_t out_channels, int64_t group, size_t spatial_rank) {
  return spatial_rank == 2 && group > 1 && group == channels && group == out_channels;
}

template <typename T>
void DepthwiseForward(const T* x, const T* w, const T* bias, T* y, int64_t n, int64_t c, const int64_t* in,
                      const int64_t* out, const WindowAttrs& geo, ThreadPool* pool) {
  const Geo2D g(in, out, geo);
  if constexpr (std::is_same_v<T, float>) {
    if (DwVectorForward(x, w, bias, y, n, c, g, pool)) return;
  }
  if (g.sh == 1 && g.sw == 1) {
    const int64_t wp = g.wp(), hp = g.hp(), len = g.oh * wp;
    ParallelFor(pool, n * c, 2.0 * static_cast<double>(len * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
      T* xpad = ThreadBuffer<T>(0, static_cast<size_t>(hp * wp + (g.kw - 1) * g.dw));
      T* ypad = ThreadBuffer<T>(1, static_cast<size_t>(len));
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t ch = p % c;
        PadPlane(x + p * g.h * g.w, g, wp, hp, xpad);
        std::fill(xpad + hp * wp, xpad + hp * wp + (g.kw - 1) * g.dw, T(0));  // read by the dropped columns
        std::fill(ypad, ypad + len, bias ? bias[ch] : T(0));
        for (int64_t a = 0; a < g.kh; ++a) {
          for (int64_t b = 0; b < g.kw; ++b) {
            const T wv = w[(ch * g.kh + a) * g.kw + b];
            const T* xs = xpad + a * g.dh * wp + b * g.dw;
            for (int64_t i = 0; i < len; ++i) ypad[i] += wv * xs[i];
          }
        }
        T* yp = y + p * g.oh * g.ow;
        for (int64_t r = 0; r < g.oh; ++r) CopyRow(ypad + r * wp, g.ow, yp + r * g.ow);
      }
    });
    return;
  }
  ParallelFor(pool, n * c, 2.0 * static_cast<double>(g.oh * g.ow * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ch = p % c;
      const T* xp = x + p * g.h * g.w;
      const T* wp = w + ch * g.kh * g.kw;
      T* yp = y + p * g.oh * g.ow;
      std::fill(yp, yp + g.oh * g.ow, bias ? bias[ch] : T(0));
      for (int64_t a = 0; a < g.kh; ++a) {
        for (int64_t b = 0; b < g.kw; ++b) {
          const T wv = wp[a * g.kw + b];
          int64_t lo, hi;
          g.Columns(b, &lo, &hi);
          const int64_t coff = b * g.dw - g.pw;
          for (int64_t r = 0; r < g.oh; ++r) {
            const int64_t ih = r * g.sh - g.ph + a * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            const T* xr = xp + ih * g.w + coff;
            T* yr = yp + r * g.ow;
            if (g.sw == 1) {
              for (int64_t o = lo; o < hi; ++o) yr[o] += wv * xr[o];
            } else {
              for (int64_t o = lo; o < hi; ++o) yr[o] += wv * xr[o * g.sw];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void DepthwiseBackwardData(const T* dy, const T* w, T* dx, int64_t n, int64_t c, const int64_t* in,
                           const int64_t* out, const WindowAttrs& geo, ThreadPool* pool) {
  const Geo2D g(in, out, geo);
  if constexpr (std::is_same_v<T, float>) {
    if (DwVectorBackwardData(dy, w, dx, n, c, g, pool)) return;
  }
  if (g.sh == 1 && g.sw == 1) {
    // The adjoint of the forward loop: dxpad[i + a dh Wp + b dw] += w[a, b] * dypad[i], dypad being dY in rows
    // of Wp with zeros in the extra columns; dX is dxpad's interior.
    const int64_t wp = g.wp(), hp = g.hp(), len = g.oh * wp;
    ParallelFor(pool, n * c, 2.0 * static_cast<double>(len * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
      T* dxpad = ThreadBuffer<T>(0, static_cast<size_t>(hp * wp + (g.kw - 1) * g.dw));
      T* dypad = ThreadBuffer<T>(1, static_cast<size_t>(len));
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t ch = p % c;
        std::fill(dypad, dypad + len, T(0));
        for (int64_t r = 0; r < g.oh; ++r) CopyRow(dy + p * g.oh * g.ow + r * g.ow, g.ow, dypad + r * wp);
        std::fill(dxpad, dxpad + hp * wp + (g.kw - 1) * g.dw, T(0));
        for (int64_t a = 0; a < g.kh; ++a) {
          for (int64_t b = 0; b < g.kw; ++b) {
            const T wv = w[(ch * g.kh + a) * g.kw + b];
            T* xs = dxpad + a * g.dh * wp + b * g.dw;
            for (int64_t i = 0; i < len; ++i) xs[i] += wv * dypad[i];
          }
        }
        T* dxp = dx + p * g.h * g.w;
        for (int64_t r = 0; r < g.h; ++r) CopyRow(dxpad + (r + g.ph) * wp + g.pw, g.w, dxp + r * g.w);
      }
    });
    return;
  }
  ParallelFor(pool, n * c, 2.0 * static_cast<double>(g.oh * g.ow * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ch = p % c;
      const T* dyp = dy + p * g.oh * g.ow;
      const T* wp = w + ch * g.kh * g.kw;
      T* dxp = dx + p * g.h * g.w;
      std::fill(dxp, dxp + g.h * g.w, T(0));
      for (int64_t a = 0; a < g.kh; ++a) {
        for (int64_t b = 0; b < g.kw; ++b) {
          const T wv = wp[a * g.kw + b];
          int64_t lo, hi;
          g.Columns(b, &lo, &hi);
          const int64_t coff = b * g.dw - g.pw;
          for (int64_t r = 0; r < g.oh; ++r) {
            const int64_t ih = r * g.sh - g.ph + a * g.dh;
            if (ih < 0 || ih >= g.h) continue;
            T* xr = dxp + ih * g.w + coff;
            const T* dr = dyp + r * g.ow;
            if (g.sw == 1) {
              for (int64_t o = lo; o < hi; ++o) xr[o] += wv * dr[o];
            } else {
              for (int64_t o = lo; o < hi; ++o) xr[o * g.sw] += wv * dr[o];
            }
          }
        }
      }
    }
  });
}

template <typename T>
void DepthwiseBackwardWeights(const T* dy, const T* x, T* dw, int64_t n, int64_t c, const int64_t* in,
                              const int64_t* out, const WindowAttrs& geo, ThreadPool* pool) {
  const Geo2D g(in, out, geo);
  if constexpr (std::is_same_v<T, float>) {
    if (DwVectorBackwardWeights(dy, x, dw, n, c, g, pool)) return;
  }
  if (g.sh == 1 && g.sw == 1) {
    // dW[a, b] = sum over images of dypad . xpad shifted by (a dh Wp + b dw): one long dot product each, the
    // images added in order.
    const int64_t wp = g.wp(), hp = g.hp(), len = g.oh * wp;
    ParallelFor(pool, c, 2.0 * static_cast<double>(n * len * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
      T* xpad = ThreadBuffer<T>(0, static_cast<size_t>(hp * wp + (g.kw - 1) * g.dw));
      T* dypad = ThreadBuffer<T>(1, static_cast<size_t>(len));
      for (int64_t ch = c0; ch < c1; ++ch) {
        T* dwp = dw + ch * g.kh * g.kw;
        std::fill(dwp, dwp + g.kh * g.kw, T(0));
        for (int64_t i = 0; i < n; ++i) {
          const int64_t p = i * c + ch;
          PadPlane(x + p * g.h * g.w, g, wp, hp, xpad);
          std::fill(xpad + hp * wp, xpad + hp * wp + (g.kw - 1) * g.dw, T(0));
          std::fill(dypad, dypad + len, T(0));
          for (int64_t r = 0; r < g.oh; ++r) CopyRow(dy + p * g.oh * g.ow + r * g.ow, g.ow, dypad + r * wp);
          for (int64_t a = 0; a < g.kh; ++a) {
            for (int64_t b = 0; b < g.kw; ++b) {
              const T* xs = xpad + a * g.dh * wp + b * g.dw;
              // Eight partial sums in a fixed pattern, so that the loop vectorizes and the order is fixed.
              T part[8] = {};
              int64_t k = 0;
              for (; k + 8 <= len; k += 8) {
                for (int j = 0; j < 8; ++j) part[j] += dypad[k + j] * xs[k + j];
              }
              T acc = 0;
              for (int j = 0; j < 8; ++j) acc += part[j];
              for (; k < len; ++k) acc += dypad[k] * xs[k];
              dwp[a * g.kw + b] += acc;
            }
          }
        }
      }
    });
    return;
  }
  ParallelFor(pool, c, 2.0 * static_cast<double>(n * g.oh * g.ow * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      T* dwp = dw + ch * g.kh * g.kw;
      for (int64_t a = 0; a < g.kh; ++a) {
        for (int64_t b = 0; b < g.kw; ++b) {
          int64_t lo, hi;
          g.Columns(b, &lo, &hi);
          const int64_t coff = b * g.dw - g.pw;
          T acc = 0;
          for (int64_t i = 0; i < n; ++i) {
            const T* xp = x + (i * c + ch) * g.h * g.w;
            const T* dyp = dy + (i * c + ch) * g.oh * g.ow;
            for (int64_t r = 0; r < g.oh; ++r) {
              const int64_t ih = r * g.sh - g.ph + a * g.dh;
              if (ih < 0 || ih >= g.h) continue;
              const T* xr = xp + ih * g.w + coff;
              const T* dr = dyp + r * g.ow;
              T row = 0;
              if (g.sw == 1) {
                for (int64_t o = lo; o < hi; ++o) row += dr[o] * xr[o];
              } else {
                for (int64_t o = lo; o < hi; ++o) row += dr[o] * xr[o * g.sw];
              }
              acc += row;
            }
          }
          dwp[a * g.kw + b] = acc;
        }
      }
    }
  });
}

template <typename T>
void DepthwiseBackward(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t n, int64_t c, const int64_t* in,
                       const int64_t* out, const WindowAttrs& geo, ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    if (dx != nullptr && dw != nullptr && DwVectorBackward(dy, x, w, dx, dw, n, c, Geo2D(in, out, geo), pool)) return;
  }
  if (dx != nullptr) DepthwiseBackwardData<T>(dy, w, dx, n, c, in, out, geo, pool);
  if (dw != nullptr) DepthwiseBackwardWeights<T>(dy, x, dw, n, c, in, out, geo, pool);
}

template void DepthwiseBackward<float>(const float*, const float*, const float*, float*, float*, int64_t, int64_t,
                                       const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseBackward<double>(const double*, const double*, const double*, double*, double*, int64_t,
                                        int64_t, const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseForward<float>(const float*, const float*, const float*, float*, int64_t, int64_t,
                                      const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseForward<double>(const double*, const double*, const double*, double*, int64_t, int64_t,
                                       const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseBackwardData<float>(const float*, const float*, float*, int64_t, int64_t, const int64_t*,
                                           const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseBackwardData<double>(const double*, const double*, double*, int64_t, int64_t,
                                            const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseBackwardWeights<float>(const float*, const float*, float*, int64_t, int64_t,
                                              const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);
template void DepthwiseBackwardWeights<double>(const double*, const double*, double*, int64_t, int64_t,
                                               const int64_t*, const int64_t*, const WindowAttrs&, ThreadPool*);

}  // namespace cpu
}  // namespace ontrain
