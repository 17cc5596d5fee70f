// The depthwise register kernels of depthwise_flat.h: stride-1 planes of up to four vectors (8x8 and
// smaller) with the output x's size; the backward pass channel by channel, the channel's weights broadcast
// once and its dW lanes in registers across the images (a pass over a block's channels per image set both
// up for every plane's few FMAs: Zen 4, 256 channels 4x4, dX and dW 0.359 -> 0.217 ms that way), and each
// image's planes held in registers: each tap's neighbours of vector k made from vectors k and k + 1 (k - 1 and k
// for taps reading before) by one permute, zeros where the mask says the neighbour is padding, instead of a
// masked load at an offset into the plane and its neighbours: the same values in the same order, so the
// same bits. The masked loads at offsets stalled (the MobileNet's 4x4 dX and dW took about 105 cycles a
// plane; reordering the loads and stores did not help). MobileNet, Zen 5, one thread, 32 images, ms:
// [128,4,4] ConvGrad (two) 0.24 -> 0.09, [256,4,4] 0.15-0.20 -> 0.08, [96,8,8] 0.25 -> 0.15; forward
// [96,8,8] (two) 0.23 -> 0.18. Taps must reach at most 16 floats away; wider windows on such planes (large
// dilations) take the flat kernels.
#include <immintrin.h>

#include <cstdint>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/depthwise_flat.h"

namespace ontrain {
namespace cpu {
namespace {

struct DwShifts {
  __m512i index[kDwMaxTaps];
  bool before[kDwMaxTaps];  // the tap reads before its vector: sources k - 1 and k
  explicit DwShifts(const DwFlat& f) __attribute__((target("avx512f"))) {
    for (int64_t t = 0; t < f.taps; ++t) {
      before[t] = f.shift[t] < 0;
      alignas(64) int32_t lane[16];
      for (int l = 0; l < 16; ++l) lane[l] = static_cast<int32_t>(l + f.shift[t] + (before[t] ? 16 : 0));
      index[t] = _mm512_load_si512(lane);
    }
  }
  // Whether the kernels take f: up to kDwRegVectors vectors, taps at most 16 floats away, and for 3x3
  // windows (unrolled, TAPS = 9) the first four taps reading before their vector and the rest not (pads of
  // 1: the row above, then the left neighbour), which the unrolled loops assume.
  static bool Fit(const DwFlat& f) {
    if (f.vectors < 1 || f.vectors > kDwRegVectors || f.rows_w > 0) return false;
    for (int64_t t = 0; t < f.taps; ++t) {
      if (f.shift[t] < -16 || f.shift[t] > 16) return false;
      if (f.taps == 9 && (f.shift[t] < 0) != (t < 4)) return false;
    }
    return true;
  }
};

// Tap t's neighbours for vector k of the plane v[0 .. V) (zero vectors past both ends), under mask m; for
// 3x3 windows (TAPS = 9, t a constant once unrolled) the sources are known at compile time.
template <int V, int TAPS>
__attribute__((target("avx512f"), always_inline)) inline __m512 DwNeighbours(const __m512* v, int k, const DwShifts& s,
                                                                            int64_t t, __mmask16 m) {
  const __m512 zero = _mm512_setzero_ps();
  const bool before = TAPS == 9 ? t < 4 : s.before[t];
  const __m512 lo = before ? (k > 0 ? v[k - 1] : zero) : v[k];
  const __m512 hi = before ? v[k] : (k + 1 < V ? v[k + 1] : zero);
  return _mm512_maskz_permutex2var_ps(m, lo, s.index[t], hi);
}

// Strided windows: dY (at most 16 floats a plane) spread into x's plane in registers, as Spread writes it
// into a zeroed plane: vector k's lane l takes dY's element index[k][l] where mask[k] has it, else +0.
struct DwSpread {
  bool on = false;
  __m512i index[kDwRegVectors];
  __mmask16 mask[kDwRegVectors] = {};
  __mmask16 lanes = 0;  // dY's plane
  DwSpread() = default;
  explicit DwSpread(const Geo2D& g) __attribute__((target("avx512f"))) : on(true), lanes(FirstLanes(g.oh * g.ow)) {
    for (int k = 0; k < kDwRegVectors; ++k) {
      alignas(64) int32_t lane[16] = {};
      for (int l = 0; l < 16; ++l) {
        const int64_t e = 16 * k + l, u = e / g.w, v = e % g.w;
        if (e >= g.h * g.w || u % g.sh != 0 || v % g.sw != 0 || u / g.sh >= g.oh || v / g.sw >= g.ow) continue;
        lane[l] = static_cast<int32_t>(u / g.sh * g.ow + v / g.sw);
        mask[k] = static_cast<__mmask16>(mask[k] | (1u << l));
      }
      index[k] = _mm512_load_si512(lane);
    }
  }
  // Where dY's plane fits one vector and x's the register kernels.
  static bool Fits(const Geo2D& g) { return g.oh * g.ow <= 16 && g.h * g.w <= 16 * kDwRegVectors; }
};

template <int V, int TAPS>
__attribute__((target("avx512f"))) void DwBackwardRegs(const float* dy, const float* x, const float* w, float* dx,
                                                       float* dw, int64_t n, int64_t c, int64_t c0, int64_t c1,
                                                       const Geo2D& g, const DwFlat& data, const DwFlat& weights,
                                                       const DwSpread& spread) {
  const int64_t taps = TAPS > 0 ? TAPS : data.taps, plane = g.h * g.w, dplane = g.oh * g.ow;
  const DwShifts ds(data), ws(weights);
  for (int64_t ch = c0; ch < c1; ++ch) {
    __m512 wv[kDwMaxTaps], acc[kDwMaxTaps];
    for (int64_t t = 0; t < taps; ++t) {
      wv[t] = _mm512_set1_ps(w[ch * taps + taps - 1 - t]);  // the window flipped
      acc[t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t q = i * c + ch;
      // The next channel's planes of this image into L1 while this one's are worked on: channel by channel,
      // each image's planes are c planes from the last, and their loads missed (perf put two thirds of the
      // 8x8 kernel's samples on one load of x). MobileNet, ms: [96,8,8] 0.26 -> 0.10, [96,8,8] -> [96,4,4]
      // 0.22 -> 0.10, [128,4,4] (two) 0.13 -> 0.07, [256,4,4] 0.09 -> 0.07. Prefetching the same channel's
      // planes some images ahead had changed nothing.
      if (ch + 1 < c1) {
        for (int k = 0; k < V; ++k) {
          _mm_prefetch(reinterpret_cast<const char*>(x + (q + 1) * plane + 16 * k), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(dx + (q + 1) * plane + 16 * k), _MM_HINT_T0);
          if (!spread.on) _mm_prefetch(reinterpret_cast<const char*>(dy + (q + 1) * plane + 16 * k), _MM_HINT_T0);
        }
        if (spread.on) _mm_prefetch(reinterpret_cast<const char*>(dy + (q + 1) * dplane), _MM_HINT_T0);
      }
      __m512 dv[V], xv[V];
      const __m512 d16 = spread.on ? _mm512_maskz_loadu_ps(spread.lanes, dy + q * dplane) : _mm512_setzero_ps();
      for (int k = 0; k < V; ++k) {
        const __mmask16 lanes = k + 1 == V ? data.tail : static_cast<__mmask16>(0xffff);
        dv[k] = spread.on ? _mm512_maskz_permutexvar_ps(spread.mask[k], spread.index[k], d16)
                          : _mm512_maskz_loadu_ps(lanes, dy + q * plane + 16 * k);
        xv[k] = _mm512_maskz_loadu_ps(lanes, x + q * plane + 16 * k);
      }
#pragma GCC unroll 4
      for (int k = 0; k < V; ++k) {
        const __mmask16* md = data.mask + k * taps;
        const __mmask16* mw = weights.mask + k * taps;
        __m512 s = _mm512_setzero_ps();
#pragma GCC unroll 9
        for (int64_t t = 0; t < taps; ++t) s = _mm512_fmadd_ps(wv[t], DwNeighbours<V, TAPS>(dv, k, ds, t, md[t]), s);
        _mm512_mask_storeu_ps(dx + q * plane + 16 * k, k + 1 == V ? data.tail : static_cast<__mmask16>(0xffff), s);
#pragma GCC unroll 9
        for (int64_t t = 0; t < taps; ++t) acc[t] = _mm512_fmadd_ps(dv[k], DwNeighbours<V, TAPS>(xv, k, ws, t, mw[t]), acc[t]);
      }
    }
    for (int64_t t = 0; t < taps; ++t) dw[ch * taps + t] = DwLaneTotal(acc[t]);
  }
}

template <int V, int TAPS>
__attribute__((target("avx512f"))) void DwForwardRegs(const float* x, const float* w, const float* bias, float* y,
                                                      int64_t n, int64_t c, int64_t c0, int64_t c1, const Geo2D& g,
                                                      const DwFlat& f) {
  const int64_t taps = TAPS > 0 ? TAPS : f.taps, plane = g.h * g.w;
  const DwShifts shifts(f);
  // Image by image, its planes of the thread's channels in order: contiguous reads and writes (channel by
  // channel, each image's plane lay c planes from the last: the MobileNet's depthwise forward passes,
  // these and the flat kernels' 16x16 ones, 0.55-0.60 -> 0.50-0.53 ms in all; its backward passes taken the
  // same way, their dW lanes through memory between planes, got slower: 1.07-1.14 -> 1.13-1.30). The
  // weights are broadcast again for each plane.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      __m512 wv[kDwMaxTaps];
      for (int64_t t = 0; t < taps; ++t) wv[t] = _mm512_set1_ps(w[ch * taps + t]);
      const __m512 b = _mm512_set1_ps(bias ? bias[ch] : 0.0f);
      const int64_t q = i * c + ch;
      __m512 xv[V];
      for (int k = 0; k < V; ++k) {
        xv[k] = _mm512_maskz_loadu_ps(k + 1 == V ? f.tail : static_cast<__mmask16>(0xffff), x + q * plane + 16 * k);
      }
#pragma GCC unroll 4
      for (int k = 0; k < V; ++k) {
        const __mmask16* m = f.mask + k * taps;
        __m512 s = b;
#pragma GCC unroll 9
        for (int64_t t = 0; t < taps; ++t) s = _mm512_fmadd_ps(wv[t], DwNeighbours<V, TAPS>(xv, k, shifts, t, m[t]), s);
        _mm512_mask_storeu_ps(y + q * plane + 16 * k, k + 1 == V ? f.tail : static_cast<__mmask16>(0xffff), s);
      }
    }
  }
}

// DwBackwardRegs and DwForwardRegs by the plane's vector count, 3x3 windows unrolled; false where they do
// not take the plane.

}  // namespace

// Strided windows (x's plane of up to four vectors, dY's of one) take dY spread in registers (DwSpread):
// the values and order of DwBackwardBlock's spread planes, so again the same bits.
bool DwBackwardInRegisters(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                           int64_t c0, int64_t c1, const Geo2D& g, const DwFlat& data, const DwFlat& weights) {
  if (!DwShifts::Fit(data) || !DwShifts::Fit(weights) || data.vectors != weights.vectors) return false;
  DwSpread spread;
  if (!DwSameSize(g)) {
    if (!DwSpread::Fits(g)) return false;
    spread = DwSpread(g);
  }
  using Fn = void (*)(const float*, const float*, const float*, float*, float*, int64_t, int64_t, int64_t, int64_t,
                      const Geo2D&, const DwFlat&, const DwFlat&, const DwSpread&);
  static constexpr Fn kNine[kDwRegVectors] = {&DwBackwardRegs<1, 9>, &DwBackwardRegs<2, 9>, &DwBackwardRegs<3, 9>,
                                              &DwBackwardRegs<4, 9>};
  static constexpr Fn kAny[kDwRegVectors] = {&DwBackwardRegs<1, 0>, &DwBackwardRegs<2, 0>, &DwBackwardRegs<3, 0>,
                                             &DwBackwardRegs<4, 0>};
  (data.taps == 9 ? kNine : kAny)[data.vectors - 1](dy, x, w, dx, dw, n, c, c0, c1, g, data, weights, spread);
  return true;
}

bool DwForwardInRegisters(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c,
                          const Geo2D& g, const DwFlat& f, ThreadPool* pool) {
  if (!DwSameSize(g) || !DwShifts::Fit(f)) return false;
  using Fn = void (*)(const float*, const float*, const float*, float*, int64_t, int64_t, int64_t, int64_t,
                      const Geo2D&, const DwFlat&);
  static constexpr Fn kNine[kDwRegVectors] = {&DwForwardRegs<1, 9>, &DwForwardRegs<2, 9>, &DwForwardRegs<3, 9>,
                                              &DwForwardRegs<4, 9>};
  static constexpr Fn kAny[kDwRegVectors] = {&DwForwardRegs<1, 0>, &DwForwardRegs<2, 0>, &DwForwardRegs<3, 0>,
                                             &DwForwardRegs<4, 0>};
  const Fn run = (f.taps == 9 ? kNine : kAny)[f.vectors - 1];
  ParallelFor(pool, c, 2.0 * static_cast<double>(n * g.h * g.w * g.kh * g.kw),
              [&](int64_t c0, int64_t c1) { run(x, w, bias, y, n, c, c0, c1, g, f); });
  return true;
}

}  // namespace cpu
}  // namespace ontrain
