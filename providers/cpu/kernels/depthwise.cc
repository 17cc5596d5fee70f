// The direct depthwise convolution of depthwise.h.
//
// Stride 1: the plane is copied into a zero-bordered buffer of width Wp = W + pads, and the output is
// computed in rows of that same width (the extra columns are dropped at the end), so that each window
// offset (a, b) is one long vector loop over the whole plane: y[i] += w[a, b] * xpad[i + a dh Wp + b dw].
// Strided: for each window offset, output row oh reads input row ih = oh * sh - ph + a * dh, and the columns
// ow whose input column ow * sw - pw + b * dw is inside the image form one range, so the inner loop has no
// bounds checks.
//
// Float32 on AVX-512 (strides 1 and 2, windows of up to 25 taps) takes the vector kernels below instead,
// with FMAs and masked loads (lanes outside the image read as zero, so there is no padded copy):
// - the flat kernel, for a window whose output is the input's size at stride 1 and planes of up to 1024
//   elements: the plane as one flat array, a fixed flat offset and a precomputed lane mask per tap;
// - strided cases through it: the forward pass computes the stride-1 output and keeps every sh-th row and
//   sw-th column; dX and dW spread dY into a zero plane of x's size (Z[r sh, o sw] = dY[r, o]);
// - the row kernel for the rest: 16 output columns of one row per vector, stride 2 by taking the even
//   lanes of 32 loaded columns.
// Against the loops above (one Zen 5 core, batch 32): 128 channels 16x16 forward 1.38 -> 0.48 ms, dX 1.37 ->
// 0.48, dW 1.52 -> 0.61; 64 channels 16x16 at stride 2 0.74 / 0.73 / 0.63 -> 0.27 / 0.23 / 0.33; 256
// channels 4x4 0.44 / 0.56 / 0.44 -> 0.10 / 0.09 / 0.18.
#include "providers/cpu/kernels/depthwise.h"

#include <immintrin.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernels/common.h"

namespace ontrain {
namespace cpu {
namespace {

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

// xpad [hp, wp] = x [h, w] at offset (ph, pw), zeros around.
template <typename T>
void PadPlane(const T* x, const Geo2D& g, int64_t wp, int64_t hp, T* xpad) {
  std::fill(xpad, xpad + hp * wp, T(0));
  for (int64_t r = 0; r < g.h; ++r) CopyRow(x + r * g.w, g.w, xpad + (r + g.ph) * wp + g.pw);
}

// One plane's geometry for the vector kernels: input ih x iw, output oh x ow, window kh x kw at stride
// (sh, sw) in {1, 2}, pads (ph, pw) before, dilations (dh, dw).
struct DwPlane {
  int64_t ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, dh, dw;
};

constexpr int64_t kDwMaxTaps = 25;

bool DwVectorApplies(const Geo2D& g) {
  return CpuHasAvx512() && (g.sh == 1 || g.sh == 2) && (g.sw == 1 || g.sw == 2) && g.kh * g.kw <= kDwMaxTaps;
}

// Lanes i < 16 with 0 <= start + i < width, and i < limit.
inline __mmask16 RangeMask(int64_t start, int64_t width, int64_t limit) {
  int64_t lo = std::max<int64_t>(0, -start), hi = std::min<int64_t>({16, width - start, limit});
  if (hi <= lo) return 0;
  return static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Columns start + s j, j < 16, of row `row` (width `width`), zero outside it; `limit` lanes wanted.
__attribute__((target("avx512f"), always_inline)) inline __m512 LoadColumns(const float* row, int64_t start,
                                                                            int64_t s, int64_t width,
                                                                            int64_t limit) {
  if (s == 1) return _mm512_maskz_loadu_ps(RangeMask(start, width, limit), row + start);
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  __m512 lo = _mm512_maskz_loadu_ps(RangeMask(start, width, 2 * limit), row + start);
  __m512 hi = _mm512_maskz_loadu_ps(RangeMask(start + 16, width, 2 * limit - 16), row + start + 16);
  return _mm512_permutex2var_ps(lo, even, hi);
}

// y[r, o] = bias + sum over taps (a, b) in order of w[a, b] x[r sh - ph + a dh, o sw - pw + b dw] (rows
// outside the image skipped, columns outside it read as zero), one FMA per tap.
__attribute__((target("avx512f"))) void DwForwardPlane(const float* x, const float* w, float bias, float* y,
                                                       const DwPlane& p) {
  __m512 wv[kDwMaxTaps];
  for (int64_t t = 0; t < p.kh * p.kw; ++t) wv[t] = _mm512_set1_ps(w[t]);
  for (int64_t r = 0; r < p.oh; ++r) {
    float* yr = y + r * p.ow;
    for (int64_t o0 = 0; o0 < p.ow; o0 += 16) {
      const int64_t lanes = std::min<int64_t>(16, p.ow - o0);
      __m512 acc = _mm512_set1_ps(bias);
      for (int64_t a = 0; a < p.kh; ++a) {
        const int64_t row = r * p.sh - p.ph + a * p.dh;
        if (row < 0 || row >= p.ih) continue;
        const float* xr = x + row * p.iw;
        for (int64_t b = 0; b < p.kw; ++b) {
          __m512 xv = LoadColumns(xr, o0 * p.sw - p.pw + b * p.dw, p.sw, p.iw, lanes);
          acc = _mm512_fmadd_ps(wv[a * p.kw + b], xv, acc);
        }
      }
      _mm512_mask_storeu_ps(yr + o0, RangeMask(0, lanes, 16), acc);
    }
  }
}

// Stride 1 with the output the input's size (a "same" window): the plane is one flat array, and window
// tap t reads the input at a fixed flat offset from the output, shift[t] = (a dh - ph) iw + b dw - pw, with
// a mask per 16-element output vector and tap for the lanes whose input lies outside the plane or wraps
// around a row end. No per-row or per-tap arithmetic is left in the loops: a small plane (4x4) is one
// vector, nine masked loads and nine FMAs.
constexpr int64_t kDwFlatMaxVectors = 64;  // planes of up to 1024 elements

struct DwFlat {
  int64_t vectors = 0, taps = 0, len = 0;
  int64_t shift[kDwMaxTaps];
  __mmask16 mask[kDwFlatMaxVectors * kDwMaxTaps];
  __mmask16 tail = 0;  // the last vector's output lanes
};

bool DwFlatApplies(const DwPlane& p) {
  return p.sh == 1 && p.sw == 1 && p.oh == p.ih && p.ow == p.iw && p.oh * p.ow <= 16 * kDwFlatMaxVectors;
}

void BuildFlat(const DwPlane& p, DwFlat* f) {
  f->len = p.oh * p.ow;
  f->vectors = (f->len + 15) / 16;
  f->taps = p.kh * p.kw;
  f->tail = static_cast<__mmask16>(f->len % 16 == 0 ? 0xffff : (1u << (f->len % 16)) - 1);
  for (int64_t a = 0; a < p.kh; ++a) {
    for (int64_t b = 0; b < p.kw; ++b) {
      const int64_t t = a * p.kw + b;
      f->shift[t] = (a * p.dh - p.ph) * p.iw + b * p.dw - p.pw;
      for (int64_t k = 0; k < f->vectors; ++k) {
        unsigned m = 0;
        for (int64_t j = 0; j < 16; ++j) {
          const int64_t i = 16 * k + j;
          if (i >= f->len) break;
          const int64_t row = i / p.ow + a * p.dh - p.ph, col = i % p.ow + b * p.dw - p.pw;
          if (row >= 0 && row < p.ih && col >= 0 && col < p.iw) m |= 1u << j;
        }
        f->mask[k * f->taps + t] = static_cast<__mmask16>(m);
      }
    }
  }
}

// TAPS: the window's tap count when known at compile time (3x3: registers and unrolled loops), else 0.
template <int TAPS>
__attribute__((target("avx512f"))) void DwForwardFlat(const float* x, const float* w, float bias, float* y,
                                                      const DwFlat& f) {
  const int64_t taps = TAPS > 0 ? TAPS : f.taps;
  __m512 wv[kDwMaxTaps];
  for (int64_t t = 0; t < taps; ++t) wv[t] = _mm512_set1_ps(w[t]);
  int64_t k = 0;
  for (; k + 2 <= f.vectors; k += 2) {  // two vectors at a time: two FMA chains in flight
    __m512 acc0 = _mm512_set1_ps(bias), acc1 = acc0;
    const __mmask16* m0 = f.mask + k * taps;
    const __mmask16* m1 = m0 + taps;
    for (int64_t t = 0; t < taps; ++t) {
      const float* src = x + 16 * k + f.shift[t];
      acc0 = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps(m0[t], src), acc0);
      acc1 = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps(m1[t], src + 16), acc1);
    }
    _mm512_storeu_ps(y + 16 * k, acc0);
    _mm512_mask_storeu_ps(y + 16 * k + 16, k + 2 == f.vectors ? f.tail : 0xffff, acc1);
  }
  if (k < f.vectors) {
    __m512 acc = _mm512_set1_ps(bias);
    const __mmask16* m = f.mask + k * taps;
    for (int64_t t = 0; t < taps; ++t) {
      acc = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps(m[t], x + 16 * k + f.shift[t]), acc);
    }
    _mm512_mask_storeu_ps(y + 16 * k, f.tail, acc);
  }
}

void DwForwardFlat(const float* x, const float* w, float bias, float* y, const DwFlat& f) {
  if (f.taps == 9) DwForwardFlat<9>(x, w, bias, y, f);
  else DwForwardFlat<0>(x, w, bias, y, f);
}

// dW lanes: acc[t] += dy . (x shifted by tap t), over the plane's vectors.
template <int TAPS>
__attribute__((target("avx512f"))) void DwWeightGradFlat(const float* dy, const float* x, __m512* acc_io,
                                                         const DwFlat& f) {
  const int64_t taps = TAPS > 0 ? TAPS : f.taps;
  __m512 acc[kDwMaxTaps];
  for (int64_t t = 0; t < taps; ++t) acc[t] = acc_io[t];
  for (int64_t k = 0; k < f.vectors; ++k) {
    __m512 dv = _mm512_maskz_loadu_ps(k + 1 == f.vectors ? f.tail : 0xffff, dy + 16 * k);
    const __mmask16* m = f.mask + k * taps;
    for (int64_t t = 0; t < taps; ++t) {
      acc[t] = _mm512_fmadd_ps(dv, _mm512_maskz_loadu_ps(m[t], x + 16 * k + f.shift[t]), acc[t]);
    }
  }
  for (int64_t t = 0; t < taps; ++t) acc_io[t] = acc[t];
}

void DwWeightGradFlat(const float* dy, const float* x, __m512* acc, const DwFlat& f) {
  if (f.taps == 9) DwWeightGradFlat<9>(dy, x, acc, f);
  else DwWeightGradFlat<0>(dy, x, acc, f);
}

// dW[a, b] += sum over rows and columns of dy[r, o] x[r sh - ph + a dh, o sw - pw + b dw], in 16 lanes per
// tap (acc), which the caller adds up once per channel.
__attribute__((target("avx512f"))) void DwWeightGradPlane(const float* dy, const float* x, __m512* acc,
                                                          const DwPlane& p) {
  for (int64_t r = 0; r < p.oh; ++r) {
    const float* dyr = dy + r * p.ow;
    for (int64_t o0 = 0; o0 < p.ow; o0 += 16) {
      const int64_t lanes = std::min<int64_t>(16, p.ow - o0);
      __m512 dv = _mm512_maskz_loadu_ps(RangeMask(0, lanes, 16), dyr + o0);
      for (int64_t a = 0; a < p.kh; ++a) {
        const int64_t row = r * p.sh - p.ph + a * p.dh;
        if (row < 0 || row >= p.ih) continue;
        const float* xr = x + row * p.iw;
        for (int64_t b = 0; b < p.kw; ++b) {
          __m512 xv = LoadColumns(xr, o0 * p.sw - p.pw + b * p.dw, p.sw, p.iw, lanes);
          acc[a * p.kw + b] = _mm512_fmadd_ps(dv, xv, acc[a * p.kw + b]);
        }
      }
    }
  }
}

// The 16 lanes added in a fixed order.
__attribute__((target("avx512f"))) float LaneTotal(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  float sum = 0;
  for (float l : lane) sum += l;
  return sum;
}

// flat: the flat layout's masks where DwFlatApplies, else null.
__attribute__((target("avx512f"))) void DwWeightGradChannel(const float* dy, const float* x, float* dw, int64_t n,
                                                            int64_t c, const DwPlane& p, const DwFlat* flat) {
  __m512 acc[kDwMaxTaps];
  for (int64_t t = 0; t < p.kh * p.kw; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    if (flat) DwWeightGradFlat(dy + i * c * p.oh * p.ow, x + i * c * p.ih * p.iw, acc, *flat);
    else DwWeightGradPlane(dy + i * c * p.oh * p.ow, x + i * c * p.ih * p.iw, acc, p);
  }
  for (int64_t t = 0; t < p.kh * p.kw; ++t) dw[t] = LaneTotal(acc[t]);
}

// dW of one channel, strided: each image's dY plane spread into z (whose other entries stay zero), then the
// flat kernel of the stride-1 geometry over z and x.
__attribute__((target("avx512f"))) void DwWeightGradSpread(const float* dy, const float* x, float* dw, int64_t n,
                                                           int64_t c, const Geo2D& g, float* z, const DwFlat& flat) {
  __m512 acc[kDwMaxTaps];
  for (int64_t t = 0; t < flat.taps; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const float* src = dy + i * c * g.oh * g.ow;
    for (int64_t r = 0; r < g.oh; ++r) {
      for (int64_t o = 0; o < g.ow; ++o) z[r * g.sh * g.w + o * g.sw] = src[r * g.ow + o];
    }
    DwWeightGradFlat(z, x + i * c * g.h * g.w, acc, flat);
  }
  for (int64_t t = 0; t < flat.taps; ++t) dw[t] = LaneTotal(acc[t]);
}

DwPlane ForwardPlane(const Geo2D& g) { return {g.h, g.w, g.oh, g.ow, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw}; }

}  // namespace

bool IsDepthwise2D(int64_t channels, int64_t out_channels, int64_t group, size_t spatial_rank) {
  return spatial_rank == 2 && group > 1 && group == channels && group == out_channels;
}

template <typename T>
void DepthwiseForward(const T* x, const T* w, const T* bias, T* y, int64_t n, int64_t c, const int64_t* in,
                      const int64_t* out, const WindowAttrs& geo, ThreadPool* pool) {
  const Geo2D g(in, out, geo);
  if constexpr (std::is_same_v<T, float>) {
    if (DwVectorApplies(g)) {
      const DwPlane p = ForwardPlane(g);
      // Strided: the stride-1 output at x's size (flat kernel) into a buffer, then every sh-th row and
      // sw-th column of it: four times the products at stride 2, still faster than the strided loads.
      const bool dense = (g.sh != 1 || g.sw != 1) && (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w;
      const DwPlane pd = {g.h, g.w, g.h, g.w, g.kh, g.kw, 1, 1, g.ph, g.pw, g.dh, g.dw};
      DwFlat flat;
      const bool use_flat = DwFlatApplies(dense ? pd : p);
      if (use_flat) BuildFlat(dense ? pd : p, &flat);
      ParallelFor(pool, n * c, 2.0 * static_cast<double>(g.oh * g.ow * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
        float* full = dense && use_flat ? ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w)) : nullptr;
        for (int64_t q = p0; q < p1; ++q) {
          const int64_t ch = q % c;
          const float* xq = x + q * g.h * g.w;
          float* yq = y + q * g.oh * g.ow;
          const float bq = bias ? bias[ch] : 0.0f;
          if (full) {
            DwForwardFlat(xq, w + ch * g.kh * g.kw, bq, full, flat);
            for (int64_t r = 0; r < g.oh; ++r) {
              for (int64_t o = 0; o < g.ow; ++o) yq[r * g.ow + o] = full[r * g.sh * g.w + o * g.sw];
            }
          } else if (use_flat) {
            DwForwardFlat(xq, w + ch * g.kh * g.kw, bq, yq, flat);
          } else {
            DwForwardPlane(xq, w + ch * g.kh * g.kw, bq, yq, p);
          }
        }
      });
      return;
    }
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
    if (DwVectorApplies(g)) {
      // dX is the stride-1 convolution of dY, spread out by the strides (zeros between), with the window
      // flipped: dX[r, o] = sum over (a, b) of w[kh-1-a, kw-1-b] dYs[r - ph' + a dh, o - pw' + b dw], where
      // ph' = (kh - 1) dh - ph and dYs[r sh, o sw] = dY[r, o]. dYs is made at least dX's size (the extra
      // rows and columns are zeros), so that a strided case is a "same" window too and takes the flat kernel.
      const bool spread = g.sh != 1 || g.sw != 1;
      const int64_t uh = spread ? std::max((g.oh - 1) * g.sh + 1, g.h) : g.oh;
      const int64_t uw = spread ? std::max((g.ow - 1) * g.sw + 1, g.w) : g.ow;
      const DwPlane p = {uh, uw, g.h, g.w, g.kh, g.kw, 1, 1, (g.kh - 1) * g.dh - g.ph, (g.kw - 1) * g.dw - g.pw,
                         g.dh, g.dw};
      const int64_t taps = g.kh * g.kw;
      DwFlat flat;
      const bool use_flat = DwFlatApplies(p);
      if (use_flat) BuildFlat(p, &flat);
      ParallelFor(pool, n * c, 2.0 * static_cast<double>(g.h * g.w * taps), [&](int64_t p0, int64_t p1) {
        float* up = spread ? ThreadBuffer<float>(0, static_cast<size_t>(uh * uw)) : nullptr;
        float flipped[kDwMaxTaps];
        if (spread) std::fill(up, up + uh * uw, 0.0f);
        for (int64_t q = p0; q < p1; ++q) {
          const int64_t ch = q % c;
          for (int64_t t = 0; t < taps; ++t) flipped[t] = w[ch * taps + taps - 1 - t];
          const float* src = dy + q * g.oh * g.ow;
          if (spread) {  // the zeros stay in place from plane to plane; only these positions change
            for (int64_t r = 0; r < g.oh; ++r) {
              for (int64_t o = 0; o < g.ow; ++o) up[r * g.sh * uw + o * g.sw] = src[r * g.ow + o];
            }
            src = up;
          }
          if (use_flat) DwForwardFlat(src, flipped, 0.0f, dx + q * g.h * g.w, flat);
          else DwForwardPlane(src, flipped, 0.0f, dx + q * g.h * g.w, p);
        }
      });
      return;
    }
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
    if (DwVectorApplies(g)) {
      const DwPlane p = ForwardPlane(g);
      // Strided: dY spread into a zero plane of x's size, Z[r sh, o sw] = dY[r, o], makes dW the stride-1
      // "same" correlation of Z with x, for the flat kernel (a quarter of its products are with zeros).
      const bool spread = (g.sh != 1 || g.sw != 1) && (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w;
      const DwPlane pz = {g.h, g.w, g.h, g.w, g.kh, g.kw, 1, 1, g.ph, g.pw, g.dh, g.dw};
      DwFlat flat;
      const bool use_flat = DwFlatApplies(spread ? pz : p);
      if (use_flat) BuildFlat(spread ? pz : p, &flat);
      ParallelFor(pool, c, 2.0 * static_cast<double>(n * g.oh * g.ow * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
        float* z = spread && use_flat ? ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w)) : nullptr;
        if (z) std::fill(z, z + g.h * g.w, 0.0f);
        for (int64_t ch = c0; ch < c1; ++ch) {
          if (z) {
            DwWeightGradSpread(dy + ch * g.oh * g.ow, x + ch * g.h * g.w, dw + ch * g.kh * g.kw, n, c, g, z, flat);
          } else {
            DwWeightGradChannel(dy + ch * g.oh * g.ow, x + ch * g.h * g.w, dw + ch * g.kh * g.kw, n, c, p,
                                use_flat ? &flat : nullptr);
          }
        }
      });
      return;
    }
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
