// The direct depthwise convolution of depthwise.h.
//
// Stride 1: the plane is copied into a zero-bordered buffer of width Wp = W + pads, and the output is
// computed in rows of that same width (the extra columns are dropped at the end), so that each window
// offset (a, b) is one long vector loop over the whole plane: y[i] += w[a, b] * xpad[i + a dh Wp + b dw].
// Strided: for each window offset, output row oh reads input row ih = oh * sh - ph + a * dh, and the columns
// ow whose input column ow * sw - pw + b * dw is inside the image form one range, so the inner loop has no
// bounds checks.
//
// Float32 on AVX-512 (strides 1 and 2, windows of up to 25 taps, planes of up to 512 x 512 with the
// strided grid inside them) takes the vector kernels below instead: FMAs and masked loads over the plane as
// one flat array (lanes outside the image read as zero, so there is no padded copy). Against the loops
// (one Zen 5 core, hot, forward / dX / dW ms): 32 images of 128 channels 16x16 1.38 / 1.37 / 1.52 -> 0.48 /
// 0.48 / 0.61; 64 channels 16x16 at stride 2 0.74 / 0.73 / 0.63 -> 0.27 / 0.23 / 0.33; 256 channels 4x4
// 0.44 / 0.56 / 0.44 -> 0.10 / 0.09 / 0.18. When both gradients are wanted they come from one pass
// (DwBackwardVector): MobileNet's depthwise ConvGrads in its training step, one thread, 5.2 -> 3.6 ms.
// At stride 2 in both dims on rows of 16 or more, they run over x's four phase planes (DwPhases) and skip
// the three outputs in four that the strided window drops. Zen 4, one core, 32 images, 3x3, pads 1, dX and
// dW: 64 channels 16x16 0.61 -> 0.41 ms, 192 at 28x28 6.2 -> 4.2, 144 at 56x56 21.7 -> 18.2, 96 at 112x112
// 58.2 -> 45.4 (these from memory); the forward pass of the first 0.26 -> 0.15 ms.
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

// The vector kernels (float32, AVX-512). Every case is reduced to one "same" window at stride 1 over a
// plane of x's size, h x w, computed by the flat kernel:
//   Y1[r, o] = bias + sum over taps (a, b) in order of w[a, b] x[r - ph + a dh, o - pw + b dw]
// (zero outside x). The forward pass takes Y[r, o] = Y1[r sh, o sw] (directly when sh = sw = 1 and the
// output is x's size, else through a buffer). dX is the same form over dY spread into a zero plane of x's
// size, Z[r sh, o sw] = dY[r, o], with the window flipped and pads (k - 1) d - p; dW[a, b] = sum of
// Z[u, v] x[u - ph + a dh, v - pw + b dw]. That needs (oh - 1) sh < h and (ow - 1) sw < w (the strided
// grid inside x's plane), which other geometries (pads wider than the grid) do not meet: they keep the
// loops above.
//
// The flat kernel: the plane as one flat array; tap t reads at the fixed flat offset
// shift[t] = (a dh - ph) w + b dw - pw from the output, with a precomputed mask per 16-element output
// vector and tap for the lanes whose input lies outside the plane or wraps around a row end. A 4x4 plane is
// one vector: nine masked loads and nine FMAs.
constexpr int64_t kDwMaxTaps = 25;
constexpr int64_t kDwFlatMaxElements = int64_t{1} << 18;  // planes of up to 512 x 512

bool DwVectorApplies(const Geo2D& g) {
  return CpuHasAvx512() && (g.sh == 1 || g.sh == 2) && (g.sw == 1 || g.sw == 2) && g.kh * g.kw <= kDwMaxTaps &&
         g.oh > 0 && g.ow > 0 && (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w &&
         g.h * g.w <= kDwFlatMaxElements;
}

// Whether the forward pass's output is Y1 itself (stride 1, output the size of x).
bool DwSameSize(const Geo2D& g) { return g.sh == 1 && g.sw == 1 && g.oh == g.h && g.ow == g.w; }

struct DwFlat {
  int64_t vectors = 0, taps = 0;
  int64_t shift[kDwMaxTaps];
  const __mmask16* mask = nullptr;  // [vectors, taps], in the building thread's buffer
  __mmask16 tail = 0;               // the last vector's output lanes
};

// Sets the masks of a flat kernel over an hd x wd output plane (`vectors` 16-element vectors, [vectors,
// taps] masks, cleared first): tap t reads inside its source at the outputs (r, o) with r in [rlo[t],
// rhi[t]) and o in [olo[t], ohi[t]) (ranges clipped to the plane), set 16 bits at a time (this runs on every
// call: element by element it took 0.2 ms for a 112x112 plane).
void FillMasks(int64_t hd, int64_t wd, int64_t taps, const int64_t* rlo, const int64_t* rhi, const int64_t* olo,
               const int64_t* ohi, __mmask16* mask) {
  const int64_t vectors = (hd * wd + 15) / 16;
  std::fill(mask, mask + vectors * taps, __mmask16{0});
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t lo = std::clamp<int64_t>(olo[t], 0, wd), hi = std::clamp<int64_t>(ohi[t], lo, wd);
    for (int64_t r = std::max<int64_t>(rlo[t], 0); r < std::min(rhi[t], hd); ++r) {
      for (int64_t i = r * wd + lo, end = r * wd + hi; i < end;) {
        const int64_t word = i / 16, upto = std::min(end, 16 * word + 16);
        const unsigned bits = (upto - i == 16 ? 0xffffu : ((1u << (upto - i)) - 1)) << (i % 16);
        mask[word * taps + t] |= static_cast<__mmask16>(bits);
        i = upto;
      }
    }
  }
}

// The flat geometry of an h x w plane with a kh x kw window, pads (ph, pw) before and dilations (dh, dw);
// the masks go to buffer `which` of the calling thread (grown once, reused).
DwFlat BuildFlat(int64_t h, int64_t w, int64_t kh, int64_t kw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                 int which = 0) {
  DwFlat f;
  const int64_t len = h * w;
  f.vectors = (len + 15) / 16;
  f.taps = kh * kw;
  f.tail = static_cast<__mmask16>(len % 16 == 0 ? 0xffff : (1u << (len % 16)) - 1);
  int64_t rlo[kDwMaxTaps], rhi[kDwMaxTaps], olo[kDwMaxTaps], ohi[kDwMaxTaps];
  for (int64_t a = 0; a < kh; ++a) {
    for (int64_t b = 0; b < kw; ++b) {
      // Output element r w + o reads row r + a dh - ph, column o + b dw - pw.
      const int64_t t = a * kw + b;
      f.shift[t] = (a * dh - ph) * w + b * dw - pw;
      rlo[t] = ph - a * dh;
      rhi[t] = h + ph - a * dh;
      olo[t] = pw - b * dw;
      ohi[t] = w + pw - b * dw;
    }
  }
  __mmask16* mask = ThreadBuffer<__mmask16>(which, static_cast<size_t>(f.vectors * f.taps));
  FillMasks(h, w, f.taps, rlo, rhi, olo, ohi, mask);
  f.mask = mask;
  return f;
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

// dW lanes: acc[t] += z . (x shifted by tap t), over the plane's vectors.
template <int TAPS>
__attribute__((target("avx512f"))) void DwWeightGradFlat(const float* z, const float* x, __m512* acc_io,
                                                         const DwFlat& f) {
  const int64_t taps = TAPS > 0 ? TAPS : f.taps;
  __m512 acc[kDwMaxTaps];
  for (int64_t t = 0; t < taps; ++t) acc[t] = acc_io[t];
  for (int64_t k = 0; k < f.vectors; ++k) {
    __m512 dv = _mm512_maskz_loadu_ps(k + 1 == f.vectors ? f.tail : 0xffff, z + 16 * k);
    const __mmask16* m = f.mask + k * taps;
    for (int64_t t = 0; t < taps; ++t) {
      acc[t] = _mm512_fmadd_ps(dv, _mm512_maskz_loadu_ps(m[t], x + 16 * k + f.shift[t]), acc[t]);
    }
  }
  for (int64_t t = 0; t < taps; ++t) acc_io[t] = acc[t];
}

void DwWeightGradFlat(const float* z, const float* x, __m512* acc, const DwFlat& f) {
  if (f.taps == 9) DwWeightGradFlat<9>(z, x, acc, f);
  else DwWeightGradFlat<0>(z, x, acc, f);
}

// The 16 lanes added in a fixed order.
__attribute__((target("avx512f"))) float LaneTotal(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  float sum = 0;
  for (float l : lane) sum += l;
  return sum;
}

// z = dY spread into x's plane: z[r sh, o sw] = dy[r, o]; the other entries are left as they are (zero:
// the caller clears z once and every plane writes the same positions).
void Spread(const float* dy, const Geo2D& g, float* z) {
  for (int64_t r = 0; r < g.oh; ++r) {
    for (int64_t o = 0; o < g.ow; ++o) z[r * g.sh * g.w + o * g.sw] = dy[r * g.ow + o];
  }
}

// dW of one channel: sums in 16 lanes per tap over images (in order), then the lanes.
__attribute__((target("avx512f"))) void DwWeightGradChannel(const float* dy, const float* x, float* dw, int64_t n,
                                                            int64_t c, const Geo2D& g, const DwFlat& f,
                                                            float* z) {
  __m512 acc[kDwMaxTaps];
  for (int64_t t = 0; t < f.taps; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    const float* dyi = dy + i * c * g.oh * g.ow;
    if (z) Spread(dyi, g, z);
    DwWeightGradFlat(z ? z : dyi, x + i * c * g.h * g.w, acc, f);
  }
  for (int64_t t = 0; t < f.taps; ++t) dw[t] = LaneTotal(acc[t]);
}

// 16 lanes of a dW sum, as memory (a vector type cannot be a std::vector's element without a warning).
struct alignas(64) DwLanes {
  float lane[16];
};

// dX and dW of the vector kernels in one pass: channel blocks in parallel; in each, the images in order and
// for each image the block's planes, so that x, dY and dX stream through memory in address order (one
// channel at a time jumped a whole image between planes of 1 KB) and each dY plane, spread once when
// strided, serves both. Each channel's dW lanes still add its images in order: the bits of the two
// separate passes.
__attribute__((target("avx512f"))) void DwBackwardBlock(const float* dy, const float* x, const float* w, float* dx,
                                                        float* dw, int64_t n, int64_t c, int64_t c0, int64_t c1,
                                                        const Geo2D& g, const DwFlat& data, const DwFlat& weights) {
  const int64_t taps = g.kh * g.kw;
  float* z = DwSameSize(g) ? nullptr : ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w));
  if (z) std::fill(z, z + g.h * g.w, 0.0f);
  __m512* acc = reinterpret_cast<__m512*>(ThreadBuffer<DwLanes>(0, static_cast<size_t>((c1 - c0) * taps)));
  for (int64_t k = 0; k < (c1 - c0) * taps; ++k) acc[k] = _mm512_setzero_ps();
  float flipped[kDwMaxTaps];
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t q = i * c + ch;
      const float* src = dy + q * g.oh * g.ow;
      if (z) {
        Spread(src, g, z);
        src = z;
      }
      for (int64_t t = 0; t < taps; ++t) flipped[t] = w[ch * taps + taps - 1 - t];
      DwForwardFlat(src, flipped, 0.0f, dx + q * g.h * g.w, data);
      DwWeightGradFlat(src, x + q * g.h * g.w, acc + (ch - c0) * taps, weights);
    }
  }
  for (int64_t ch = c0; ch < c1; ++ch) {
    for (int64_t t = 0; t < taps; ++t) dw[ch * taps + t] = LaneTotal(acc[(ch - c0) * taps + t]);
  }
}

// Planes of one vector at stride 1 with the output x's size (MobileNet's 4x4 layers): channel by channel,
// the channel's weights broadcast once and its dW lanes in registers across the images, instead of a pass
// over the block's channels per image that sets both up for every plane's 18 FMAs. The expressions and
// orders of DwForwardFlat and DwWeightGradFlat: the same bits. Zen 4, one core, 32 images, 3x3: 256
// channels 4x4, dX and dW 0.359 -> 0.217 ms, forward 0.093 -> 0.070. (Planes of four vectors, 8x8: the
// same for dX and dW, forward 0.094 -> 0.127 ms.)
bool DwSmallPlanes(const Geo2D& g) { return DwSameSize(g) && g.h * g.w <= 16; }

template <int TAPS>
__attribute__((target("avx512f"))) void DwBackwardSmall(const float* dy, const float* x, const float* w, float* dx,
                                                        float* dw, int64_t n, int64_t c, int64_t c0, int64_t c1,
                                                        const Geo2D& g, const DwFlat& data, const DwFlat& weights) {
  const int64_t taps = TAPS > 0 ? TAPS : data.taps, plane = g.h * g.w;
  for (int64_t ch = c0; ch < c1; ++ch) {
    __m512 wv[kDwMaxTaps], acc[kDwMaxTaps];
    for (int64_t t = 0; t < taps; ++t) {
      wv[t] = _mm512_set1_ps(w[ch * taps + taps - 1 - t]);  // the window flipped
      acc[t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t q = i * c + ch;
      const float* d = dy + q * plane;
      const float* xq = x + q * plane;
      for (int64_t k = 0; k < data.vectors; ++k) {
        const __mmask16 tail = k + 1 == data.vectors ? data.tail : static_cast<__mmask16>(0xffff);
        const __mmask16* md = data.mask + k * taps;
        const __mmask16* mw = weights.mask + k * taps;
        __m512 s = _mm512_setzero_ps();
        for (int64_t t = 0; t < taps; ++t) {
          s = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps(md[t], d + 16 * k + data.shift[t]), s);
        }
        _mm512_mask_storeu_ps(dx + q * plane + 16 * k, tail, s);
        const __m512 dv = _mm512_maskz_loadu_ps(tail, d + 16 * k);
        for (int64_t t = 0; t < taps; ++t) {
          acc[t] = _mm512_fmadd_ps(dv, _mm512_maskz_loadu_ps(mw[t], xq + 16 * k + weights.shift[t]), acc[t]);
        }
      }
    }
    for (int64_t t = 0; t < taps; ++t) dw[ch * taps + t] = LaneTotal(acc[t]);
  }
}

// The forward pass of such planes, channel by channel.
template <int TAPS>
__attribute__((target("avx512f"))) void DwForwardSmall(const float* x, const float* w, const float* bias, float* y,
                                                       int64_t n, int64_t c, int64_t c0, int64_t c1, const Geo2D& g,
                                                       const DwFlat& f) {
  const int64_t taps = TAPS > 0 ? TAPS : f.taps, plane = g.h * g.w;
  for (int64_t ch = c0; ch < c1; ++ch) {
    __m512 wv[kDwMaxTaps];
    for (int64_t t = 0; t < taps; ++t) wv[t] = _mm512_set1_ps(w[ch * taps + t]);
    const __m512 b = _mm512_set1_ps(bias ? bias[ch] : 0.0f);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t q = i * c + ch;
      for (int64_t k = 0; k < f.vectors; ++k) {
        const __mmask16* m = f.mask + k * taps;
        __m512 s = b;
        for (int64_t t = 0; t < taps; ++t) {
          s = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps(m[t], x + q * plane + 16 * k + f.shift[t]), s);
        }
        _mm512_mask_storeu_ps(y + q * plane + 16 * k, k + 1 == f.vectors ? f.tail : static_cast<__mmask16>(0xffff), s);
      }
    }
  }
}

void DwBackwardVector(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                      const Geo2D& g, ThreadPool* pool) {
  const DwFlat data = BuildFlat(g.h, g.w, g.kh, g.kw, (g.kh - 1) * g.dh - g.ph, (g.kw - 1) * g.dw - g.pw, g.dh, g.dw, 0);
  const DwFlat weights = BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw, 1);
  const bool small = DwSmallPlanes(g), nine = data.taps == 9;
  ParallelFor(pool, c, 4.0 * static_cast<double>(n * g.h * g.w * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
    if (small && nine) DwBackwardSmall<9>(dy, x, w, dx, dw, n, c, c0, c1, g, data, weights);
    else if (small) DwBackwardSmall<0>(dy, x, w, dx, dw, n, c, c0, c1, g, data, weights);
    else DwBackwardBlock(dy, x, w, dx, dw, n, c, c0, c1, g, data, weights);
  });
}

// Stride 2 (both dims) by phase planes. The flat kernels above run a strided window over x's whole plane
// and keep one output in four (dX: over dY spread into x's plane, three entries in four zero). Instead x
// is split into its four phase planes P[pr, pc][i, j] = x[2i + pr, 2j + pc]: output (r, o) reads through
// tap (a, b), at x's row 2r + er (er = a dh - ph), the phase plane of row parity er mod 2 at row r +
// floor(er / 2), and likewise for columns. So the forward pass is one flat kernel over the output plane
// whose tap t reads a fixed offset into the buffer of the four planes, with the same taps in the same
// order, each either read or masked to zero as before: the same bits, a quarter of the work. dX splits
// the other way: its phase plane (qu, qv) gets only the taps whose window offset has that parity, as a
// flat kernel over dY, the flipped taps in the same order (the ones left out multiplied the zeros between
// the spread dY's entries, so the sums keep their bits, unless a weight is infinite or NaN, where the old
// products 0 * w added NaN to entries no window of dY reaches), and the four planes are interleaved into
// dX. dW is the forward flat kernel's geometry with dY as the other operand: the same sums, the lanes in
// another order. Every plane, output and phase alike, is computed as hd x wd (at least the output's and
// each phase's size), so one row offset serves all of them; the rows and columns past a plane's own size
// are masked, computed and dropped.
struct DwPhases {
  int64_t hd = 0, wd = 0;
  bool direct = false;  // the output plane is hd x wd: the forward pass writes y and dW reads dY in place
  DwFlat fwd;           // over the four planes of x: forward and dW
  DwFlat dx[4];         // over dY, phase plane 2 qu + qv of dX; its taps' weights index the flipped window
  int64_t dx_taps[4][kDwMaxTaps];
  int64_t size() const { return hd * wd; }
};

// Rows of fewer than 16 elements keep the spread planes: there the per-row splits and joins cost more than
// the products they save (MobileNet's 96 channels 8x8 -> 4x4, 32 images, dX and dW: 0.306 -> 0.327 ms).
bool DwPhasesApply(const Geo2D& g) { return DwVectorApplies(g) && g.sh == 2 && g.sw == 2 && g.w >= 16; }

int64_t FloorHalf(int64_t v) { return v >= 0 ? v / 2 : -((1 - v) / 2); }

// Built by the calling thread, the masks in its buffers 0 (forward) and 1 (the four dX planes).
DwPhases BuildPhases(const Geo2D& g) {
  DwPhases p;
  p.hd = std::max(g.oh, (g.h + 1) / 2);
  p.wd = std::max(g.ow, (g.w + 1) / 2);
  p.direct = p.hd == g.oh && p.wd == g.ow;
  const int64_t size = p.size(), vectors = (size + 15) / 16, taps = g.kh * g.kw;
  const __mmask16 tail = static_cast<__mmask16>(size % 16 == 0 ? 0xffff : (1u << (size % 16)) - 1);
  int64_t rlo[kDwMaxTaps], rhi[kDwMaxTaps], olo[kDwMaxTaps], ohi[kDwMaxTaps];
  p.fwd.vectors = vectors;
  p.fwd.taps = taps;
  p.fwd.tail = tail;
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t er = t / g.kw * g.dh - g.ph, ec = t % g.kw * g.dw - g.pw;
    const int64_t da = FloorHalf(er), db = FloorHalf(ec), pr = er - 2 * da, pc = ec - 2 * db;
    p.fwd.shift[t] = (2 * pr + pc) * size + da * p.wd + db;
    // Outputs inside the output plane whose row 2 (r + da) + pr and column 2 (o + db) + pc are inside x.
    rlo[t] = -da;
    rhi[t] = std::min(g.oh, (g.h - pr + 1) / 2 - da);
    olo[t] = -db;
    ohi[t] = std::min(g.ow, (g.w - pc + 1) / 2 - db);
  }
  __mmask16* fmask = ThreadBuffer<__mmask16>(0, static_cast<size_t>(vectors * taps));
  FillMasks(p.hd, p.wd, taps, rlo, rhi, olo, ohi, fmask);
  p.fwd.mask = fmask;
  // dX at (u, v) = (2 i + qu, 2 j + qv) takes tap (a, b) from dY (r, o) where u = 2 r - ph + a dh: where
  // qu + ph - a dh is even, at r = i + (qu + ph - a dh) / 2; the flipped window's order is t' = taps - 1 - t.
  __mmask16* dmask = ThreadBuffer<__mmask16>(1, static_cast<size_t>(vectors * taps));
  for (int64_t q = 0; q < 4; ++q) {
    const int64_t qu = q / 2, qv = q % 2;
    DwFlat& f = p.dx[q];
    f.vectors = vectors;
    f.tail = tail;
    f.taps = 0;
    for (int64_t tf = 0; tf < taps; ++tf) {
      const int64_t t = taps - 1 - tf, eu = qu + g.ph - t / g.kw * g.dh, ev = qv + g.pw - t % g.kw * g.dw;
      if (eu % 2 != 0 || ev % 2 != 0) continue;
      const int64_t k = f.taps++, da = eu / 2, db = ev / 2;
      p.dx_taps[q][k] = tf;
      f.shift[k] = da * p.wd + db;
      rlo[k] = -da;
      rhi[k] = std::min((g.h - qu + 1) / 2, g.oh - da);
      olo[k] = -db;
      ohi[k] = std::min((g.w - qv + 1) / 2, g.ow - db);
    }
    FillMasks(p.hd, p.wd, f.taps, rlo, rhi, olo, ohi, dmask);
    f.mask = dmask;
    dmask += vectors * f.taps;
  }
  return p;
}

// The first `count` lanes (none for count <= 0, all 16 from 16).
__attribute__((target("avx512f"))) inline __mmask16 MaskOfCount(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

// The four phase planes of an h x w plane, each hd x wd at `size` floats apart (entries past a phase's own
// size are left as they are: every read of them is masked). Rows go 32 elements at a time, then the last 1
// to 31 with masks fixed for the plane.
__attribute__((target("avx512f"))) void SplitPhases(const float* x, const Geo2D& g, const DwPhases& p, float* x4) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const int64_t whole = g.w / 32 * 32, rest = g.w - whole;
  const __mmask16 in_lo = MaskOfCount(rest), in_hi = MaskOfCount(rest - 16), out_e = MaskOfCount((rest + 1) / 2),
                  out_o = MaskOfCount(rest / 2);
  const int64_t size = p.size();
  for (int64_t u = 0; u < g.h; ++u) {
    const float* row = x + u * g.w;
    float* e = x4 + (2 * (u % 2)) * size + (u / 2) * p.wd;
    float* o = e + size;
    for (int64_t v = 0; v < whole; v += 32) {
      const __m512 lo = _mm512_loadu_ps(row + v), hi = _mm512_loadu_ps(row + v + 16);
      _mm512_storeu_ps(e + v / 2, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_storeu_ps(o + v / 2, _mm512_permutex2var_ps(lo, odd, hi));
    }
    if (rest > 0) {  // ceil(rest / 2) to the even plane, the others to the odd one
      const __m512 lo = _mm512_maskz_loadu_ps(in_lo, row + whole), hi = _mm512_maskz_loadu_ps(in_hi, row + whole + 16);
      _mm512_mask_storeu_ps(e + whole / 2, out_e, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_mask_storeu_ps(o + whole / 2, out_o, _mm512_permutex2var_ps(lo, odd, hi));
    }
  }
}

// dX's h x w plane from its four phase planes (hd x wd, `size` floats apart).
__attribute__((target("avx512f"))) void JoinPhases(const float* d4, const Geo2D& g, const DwPhases& p, float* dx) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8));
  const int64_t whole = g.w / 32 * 32, rest = g.w - whole;
  const __mmask16 in_e = MaskOfCount((rest + 1) / 2), in_o = MaskOfCount(rest / 2), out_lo = MaskOfCount(rest),
                  out_hi = MaskOfCount(rest - 16);
  const int64_t size = p.size();
  for (int64_t u = 0; u < g.h; ++u) {
    float* row = dx + u * g.w;
    const float* e = d4 + (2 * (u % 2)) * size + (u / 2) * p.wd;
    const float* o = e + size;
    for (int64_t v = 0; v < whole; v += 32) {
      const __m512 ev = _mm512_loadu_ps(e + v / 2), ov = _mm512_loadu_ps(o + v / 2);
      _mm512_storeu_ps(row + v, _mm512_permutex2var_ps(ev, lo_idx, ov));
      _mm512_storeu_ps(row + v + 16, _mm512_permutex2var_ps(ev, hi_idx, ov));
    }
    if (rest > 0) {
      const __m512 ev = _mm512_maskz_loadu_ps(in_e, e + whole / 2), ov = _mm512_maskz_loadu_ps(in_o, o + whole / 2);
      _mm512_mask_storeu_ps(row + whole, out_lo, _mm512_permutex2var_ps(ev, lo_idx, ov));
      if (out_hi) _mm512_mask_storeu_ps(row + whole + 16, out_hi, _mm512_permutex2var_ps(ev, hi_idx, ov));
    }
  }
}

// dY's oh x ow plane in rows of wd: itself when the output plane is hd x wd, else copied into `buf`, whose
// other entries the caller zeroed (dW multiplies them by masked, zero, lanes of x: they must be finite).
const float* PhaseRows(const float* dy, const Geo2D& g, const DwPhases& p, float* buf) {
  if (p.direct) return dy;
  for (int64_t r = 0; r < g.oh; ++r) std::copy_n(dy + r * g.ow, g.ow, buf + r * p.wd);
  return buf;
}

// One plane's dX from dY in rows of wd (`d`), through `d4` (four hd x wd planes).
void PhaseBackwardData(const float* d, const float* w, const Geo2D& g, const DwPhases& p, float* d4, float* dx) {
  const int64_t taps = g.kh * g.kw;
  float sub[kDwMaxTaps];
  for (int64_t q = 0; q < 4; ++q) {
    for (int64_t k = 0; k < p.dx[q].taps; ++k) sub[k] = w[taps - 1 - p.dx_taps[q][k]];
    DwForwardFlat(d, sub, 0.0f, d4 + q * p.size(), p.dx[q]);
  }
  JoinPhases(d4, g, p, dx);
}

void DwPhaseForward(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, const Geo2D& g,
                    ThreadPool* pool) {
  const DwPhases p = BuildPhases(g);
  ParallelFor(pool, n * c, 2.0 * static_cast<double>(p.size() * g.kh * g.kw), [&](int64_t q0, int64_t q1) {
    float* x4 = ThreadBuffer<float>(0, static_cast<size_t>(4 * p.size()));
    float* full = p.direct ? nullptr : ThreadBuffer<float>(1, static_cast<size_t>(p.size()));
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t ch = q % c;
      float* yq = y + q * g.oh * g.ow;
      SplitPhases(x + q * g.h * g.w, g, p, x4);
      DwForwardFlat(x4, w + ch * g.kh * g.kw, bias ? bias[ch] : 0.0f, p.direct ? yq : full, p.fwd);
      if (!p.direct) {
        for (int64_t r = 0; r < g.oh; ++r) std::copy_n(full + r * p.wd, g.ow, yq + r * g.ow);
      }
    }
  });
}

void DwPhaseBackwardData(const float* dy, const float* w, float* dx, int64_t n, int64_t c, const Geo2D& g,
                         ThreadPool* pool) {
  const DwPhases p = BuildPhases(g);
  ParallelFor(pool, n * c, 2.0 * static_cast<double>(p.size() * g.kh * g.kw), [&](int64_t q0, int64_t q1) {
    float* buf = ThreadBuffer<float>(0, static_cast<size_t>(5 * p.size()));
    float* rows = buf + 4 * p.size();  // read only where dY has entries: no need to clear it
    for (int64_t q = q0; q < q1; ++q) {
      const float* d = PhaseRows(dy + q * g.oh * g.ow, g, p, rows);
      PhaseBackwardData(d, w + (q % c) * g.kh * g.kw, g, p, buf, dx + q * g.h * g.w);
    }
  });
}

// dW lanes of channels [c0, c1) (the images in order for each), and with dx non-null their dX, in one pass:
// the images in order and for each image the block's planes, as DwBackwardBlock.
__attribute__((target("avx512f"))) void DwPhaseBackwardBlock(const float* dy, const float* x, const float* w,
                                                             float* dx, float* dw, int64_t n, int64_t c, int64_t c0,
                                                             int64_t c1, const Geo2D& g, const DwPhases& p) {
  const int64_t taps = g.kh * g.kw;
  float* buf = ThreadBuffer<float>(0, static_cast<size_t>(5 * p.size()));  // the phases of x, dY's rows
  float* rows = buf + 4 * p.size();
  float* d4 = dx ? ThreadBuffer<float>(1, static_cast<size_t>(4 * p.size())) : nullptr;
  if (!p.direct) std::fill(rows, rows + p.size(), 0.0f);
  __m512* acc = reinterpret_cast<__m512*>(ThreadBuffer<DwLanes>(0, static_cast<size_t>((c1 - c0) * taps)));
  for (int64_t k = 0; k < (c1 - c0) * taps; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t q = i * c + ch;
      const float* d = PhaseRows(dy + q * g.oh * g.ow, g, p, rows);
      if (dx) PhaseBackwardData(d, w + ch * taps, g, p, d4, dx + q * g.h * g.w);
      SplitPhases(x + q * g.h * g.w, g, p, buf);
      DwWeightGradFlat(d, buf, acc + (ch - c0) * taps, p.fwd);
    }
  }
  for (int64_t ch = c0; ch < c1; ++ch) {
    for (int64_t t = 0; t < taps; ++t) dw[ch * taps + t] = LaneTotal(acc[(ch - c0) * taps + t]);
  }
}

void DwPhaseBackward(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                     const Geo2D& g, ThreadPool* pool) {
  const DwPhases p = BuildPhases(g);
  ParallelFor(pool, c, (dx ? 4.0 : 2.0) * static_cast<double>(n * p.size() * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
    DwPhaseBackwardBlock(dy, x, w, dx, dw, n, c, c0, c1, g, p);
  });
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
    if (DwPhasesApply(g)) {
      DwPhaseForward(x, w, bias, y, n, c, g, pool);
      return;
    }
    if (DwVectorApplies(g) && DwSmallPlanes(g)) {
      const DwFlat flat = BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw);
      ParallelFor(pool, c, 2.0 * static_cast<double>(n * g.h * g.w * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
        if (flat.taps == 9) DwForwardSmall<9>(x, w, bias, y, n, c, c0, c1, g, flat);
        else DwForwardSmall<0>(x, w, bias, y, n, c, c0, c1, g, flat);
      });
      return;
    }
    if (DwVectorApplies(g)) {
      const bool direct = DwSameSize(g);
      const DwFlat flat = BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw);
      ParallelFor(pool, n * c, 2.0 * static_cast<double>(g.h * g.w * g.kh * g.kw), [&](int64_t p0, int64_t p1) {
        float* full = direct ? nullptr : ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w));
        for (int64_t q = p0; q < p1; ++q) {
          const int64_t ch = q % c;
          float* yq = y + q * g.oh * g.ow;
          DwForwardFlat(x + q * g.h * g.w, w + ch * g.kh * g.kw, bias ? bias[ch] : 0.0f, direct ? yq : full, flat);
          if (direct) continue;
          for (int64_t r = 0; r < g.oh; ++r) {
            for (int64_t o = 0; o < g.ow; ++o) yq[r * g.ow + o] = full[r * g.sh * g.w + o * g.sw];
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
    if (DwPhasesApply(g)) {
      DwPhaseBackwardData(dy, w, dx, n, c, g, pool);
      return;
    }
    if (DwVectorApplies(g)) {
      // The flat kernel over dY itself when the output is x's size at stride 1, else over dY spread into
      // x's plane; the window flipped.
      const bool spread = !DwSameSize(g);
      const int64_t taps = g.kh * g.kw;
      const DwFlat flat = BuildFlat(g.h, g.w, g.kh, g.kw, (g.kh - 1) * g.dh - g.ph, (g.kw - 1) * g.dw - g.pw, g.dh, g.dw);
      ParallelFor(pool, n * c, 2.0 * static_cast<double>(g.h * g.w * taps), [&](int64_t p0, int64_t p1) {
        float* z = spread ? ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w)) : nullptr;
        if (z) std::fill(z, z + g.h * g.w, 0.0f);
        float flipped[kDwMaxTaps];
        for (int64_t q = p0; q < p1; ++q) {
          const int64_t ch = q % c;
          for (int64_t t = 0; t < taps; ++t) flipped[t] = w[ch * taps + taps - 1 - t];
          const float* src = dy + q * g.oh * g.ow;
          if (z) {
            Spread(src, g, z);
            src = z;
          }
          DwForwardFlat(src, flipped, 0.0f, dx + q * g.h * g.w, flat);
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
    if (DwPhasesApply(g)) {
      DwPhaseBackward(dy, x, nullptr, nullptr, dw, n, c, g, pool);
      return;
    }
    if (DwVectorApplies(g)) {
      const bool spread = !DwSameSize(g);
      const DwFlat flat = BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw);
      ParallelFor(pool, c, 2.0 * static_cast<double>(n * g.h * g.w * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
        float* z = spread ? ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w)) : nullptr;
        if (z) std::fill(z, z + g.h * g.w, 0.0f);
        for (int64_t ch = c0; ch < c1; ++ch) {
          DwWeightGradChannel(dy + ch * g.oh * g.ow, x + ch * g.h * g.w, dw + ch * g.kh * g.kw, n, c, g, flat, z);
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

template <typename T>
void DepthwiseBackward(const T* dy, const T* x, const T* w, T* dx, T* dw, int64_t n, int64_t c, const int64_t* in,
                       const int64_t* out, const WindowAttrs& geo, ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    const Geo2D g(in, out, geo);
    if (dx != nullptr && dw != nullptr && DwPhasesApply(g)) {
      DwPhaseBackward(dy, x, w, dx, dw, n, c, g, pool);
      return;
    }
    if (dx != nullptr && dw != nullptr && DwVectorApplies(g)) {
      DwBackwardVector(dy, x, w, dx, dw, n, c, g, pool);
      return;
    }
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
