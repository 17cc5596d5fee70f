// The float32 AVX-512 kernels of the depthwise convolution (depthwise_vector.h), which depthwise.cc takes
// instead of its loops for strides 1 and 2, windows of up to 25 taps and planes of up to 512 x 512 with the
// strided grid inside them: FMAs and masked loads over the plane as one flat array (lanes outside the image
// read as zero, so there is no padded copy). Against the loops
// (one Zen 5 core, hot, forward / dX / dW ms): 32 images of 128 channels 16x16 1.38 / 1.37 / 1.52 -> 0.48 /
// 0.48 / 0.61; 64 channels 16x16 at stride 2 0.74 / 0.73 / 0.63 -> 0.27 / 0.23 / 0.33; 256 channels 4x4
// 0.44 / 0.56 / 0.44 -> 0.10 / 0.09 / 0.18. When both gradients are wanted they come from one pass
// (DwBackwardVector): MobileNet's depthwise ConvGrads in its training step, one thread, 5.2 -> 3.6 ms.
// At stride 2 in both dims on rows of 16 or more, they run over x's four phase planes (depthwise_phases.cc)
// and skip the three outputs in four that the strided window drops. Zen 4, one core, 32 images, 3x3, pads
// 1, dX and dW: 64 channels 16x16 0.61 -> 0.41 ms, 192 at 28x28 6.2 -> 4.2, 144 at 56x56 21.7 -> 18.2, 96
// at 112x112 58.2 -> 45.4 (these from memory); the forward pass of the first 0.26 -> 0.15 ms. Planes of up
// to four vectors at stride 1 (and strided gradients into them) run in registers instead
// (depthwise_registers.cc), with the same sums.
#include "providers/cpu/kernels/depthwise_vector.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/depthwise_flat.h"

namespace ontrain {
namespace cpu {

// The vector kernels (float32, AVX-512). Every case is reduced to one "same" window at stride 1 over a
// plane of x's size, h x w, computed by the flat kernel:
//   Y1[r, o] = bias + sum over taps (a, b) in order of w[a, b] x[r - ph + a dh, o - pw + b dw]
// (zero outside x). The forward pass takes Y[r, o] = Y1[r sh, o sw] (directly when sh = sw = 1 and the
// output is x's size, else through a buffer). dX is the same form over dY spread into a zero plane of x's
// size, Z[r sh, o sw] = dY[r, o], with the window flipped and pads (k - 1) d - p; dW[a, b] = sum of
// Z[u, v] x[u - ph + a dh, v - pw + b dw]. That needs (oh - 1) sh < h and (ow - 1) sw < w (the strided
// grid inside x's plane), which other geometries (pads wider than the grid) do not meet: they keep
// depthwise.cc's loops.
//
// The flat kernel: the plane as one flat array; tap t reads at the fixed flat offset
// shift[t] = (a dh - ph) w + b dw - pw from the output, with a precomputed mask per 16-element output
// vector and tap for the lanes whose input lies outside the plane or wraps around a row end. A 4x4 plane is
// one vector: nine masked loads and nine FMAs.

bool DwVectorApplies(const Geo2D& g) {
  return CpuHasAvx512() && (g.sh == 1 || g.sh == 2) && (g.sw == 1 || g.sw == 2) && g.kh * g.kw <= kDwMaxTaps &&
         g.oh > 0 && g.ow > 0 && (g.oh - 1) * g.sh < g.h && (g.ow - 1) * g.sw < g.w &&
         g.h * g.w <= kDwFlatMaxElements;
}

bool DwSameSize(const Geo2D& g) { return g.sh == 1 && g.sw == 1 && g.oh == g.h && g.ow == g.w; }


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
  if (kh == 3 && kw == 3 && ph == 1 && pw == 1 && dh == 1 && dw == 1 && w >= 16) {
    f.rows_h = h;
    f.rows_w = w;
  }
  return f;
}

// The row kernels: a 3x3 window at dilation 1 with pads of 1 on a plane of rows of at least 16 floats.
// The flat kernel loads every tap of every output vector under a mask that it also loads (nine of each per
// nine FMAs); here each input row's 16 columns are loaded once per column chunk (the last chunk of a row
// under a mask when the width is not a multiple of 16), their left and right neighbours made in registers
// (valignd against zero at the row's ends, else loads one column over), and kept for the three output
// rows they feed. Each output sums the same operands in the same order as the flat kernel (zeros where it
// masks, so every FMA is still done), hence the same bits. Rows outside the plane are zero vectors.
struct DwRow {
  __m512 l, c, r;  // columns o - 1, o, o + 1 of one input row, over a chunk's 16 outputs o
};

// Row `row` of the plane over the chunk of columns c0 .. c0 + 15 (those under `valid`, the others zero).
// A whole chunk (kFull) loads without masks: masked loads and stores in these loops made the 16x16 layer's
// forward 0.18 -> 0.34 ms on Zen 5.
template <bool kFull>
__attribute__((target("avx512f"), always_inline)) inline DwRow LoadDwRow(const float* x, int64_t h, int64_t w,
                                                                        int64_t row, int64_t c0, __mmask16 valid) {
  const __m512 zero = _mm512_setzero_ps();
  if (row < 0 || row >= h) return {zero, zero, zero};
  const float* p = x + row * w + c0;
  const __m512i zi = _mm512_setzero_si512();
  DwRow v;
  v.c = kFull ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(valid, p);
  const __m512i ci = _mm512_castps_si512(v.c);
  // Left: lane i is column c0 + i - 1 (zero at column 0); right: column c0 + i + 1 (zero past the row).
  if (c0 == 0) v.l = _mm512_castsi512_ps(_mm512_alignr_epi32(ci, zi, 15));
  else v.l = kFull ? _mm512_loadu_ps(p - 1) : _mm512_maskz_loadu_ps(valid, p - 1);
  if (c0 + 16 < w) v.r = _mm512_loadu_ps(p + 1);
  else if (kFull) v.r = _mm512_castsi512_ps(_mm512_alignr_epi32(zi, ci, 1));
  else v.r = _mm512_castsi512_ps(_mm512_maskz_alignr_epi32(static_cast<__mmask16>(valid >> 1), zi, ci, 1));
  return v;
}

// The forward form over one chunk of columns: y = bias + the nine taps in order, row by row.
template <bool kFull>
__attribute__((target("avx512f"), always_inline)) inline void DwForwardChunk(const float* x, const __m512* wv,
                                                                            __m512 vb, float* y, int64_t h,
                                                                            int64_t wd, int64_t c0, __mmask16 valid) {
  DwRow a = LoadDwRow<kFull>(x, h, wd, -1, c0, valid), b = LoadDwRow<kFull>(x, h, wd, 0, c0, valid);
  for (int64_t r = 0; r < h; ++r) {
    const DwRow c = LoadDwRow<kFull>(x, h, wd, r + 1, c0, valid);
    __m512 acc = vb;
    acc = _mm512_fmadd_ps(wv[0], a.l, acc);
    acc = _mm512_fmadd_ps(wv[1], a.c, acc);
    acc = _mm512_fmadd_ps(wv[2], a.r, acc);
    acc = _mm512_fmadd_ps(wv[3], b.l, acc);
    acc = _mm512_fmadd_ps(wv[4], b.c, acc);
    acc = _mm512_fmadd_ps(wv[5], b.r, acc);
    acc = _mm512_fmadd_ps(wv[6], c.l, acc);
    acc = _mm512_fmadd_ps(wv[7], c.c, acc);
    acc = _mm512_fmadd_ps(wv[8], c.r, acc);
    if (kFull) _mm512_storeu_ps(y + r * wd + c0, acc);
    else _mm512_mask_storeu_ps(y + r * wd + c0, valid, acc);
    a = b;
    b = c;
  }
}

// DwForwardFlat<9> over the rows, chunk by chunk.
__attribute__((target("avx512f"))) void DwForwardRows(const float* x, const float* w, float bias, float* y,
                                                      const DwFlat& f) {
  const int64_t h = f.rows_h, wd = f.rows_w;
  __m512 wv[9];
  for (int t = 0; t < 9; ++t) wv[t] = _mm512_set1_ps(w[t]);
  const __m512 vb = _mm512_set1_ps(bias);
  int64_t c0 = 0;
  for (; c0 + 16 <= wd; c0 += 16) DwForwardChunk<true>(x, wv, vb, y, h, wd, c0, 0xffff);
  if (c0 < wd) DwForwardChunk<false>(x, wv, vb, y, h, wd, c0, static_cast<__mmask16>((1u << (wd - c0)) - 1));
}

// DwWeightGradFlat<9>'s sums over the rows: acc[t] += z . (x shifted by tap t), chunk by chunk and row by
// row within a chunk. Lane i of a chunk takes its column c0 + i, so each lane adds its terms in another
// order than the flat kernel's vectors (which run row by row across the chunks) except on 16-wide planes,
// one chunk, where both orders are the rows in order: the same bits there.
template <bool kFull>
__attribute__((target("avx512f"), always_inline)) inline void DwWeightGradChunk(const float* z, const float* x,
                                                                               __m512* acc, int64_t h, int64_t wd,
                                                                               int64_t c0, __mmask16 valid) {
  DwRow a = LoadDwRow<kFull>(x, h, wd, -1, c0, valid), b = LoadDwRow<kFull>(x, h, wd, 0, c0, valid);
  for (int64_t r = 0; r < h; ++r) {
    const DwRow c = LoadDwRow<kFull>(x, h, wd, r + 1, c0, valid);
    const __m512 dv = kFull ? _mm512_loadu_ps(z + r * wd + c0) : _mm512_maskz_loadu_ps(valid, z + r * wd + c0);
    acc[0] = _mm512_fmadd_ps(dv, a.l, acc[0]);
    acc[1] = _mm512_fmadd_ps(dv, a.c, acc[1]);
    acc[2] = _mm512_fmadd_ps(dv, a.r, acc[2]);
    acc[3] = _mm512_fmadd_ps(dv, b.l, acc[3]);
    acc[4] = _mm512_fmadd_ps(dv, b.c, acc[4]);
    acc[5] = _mm512_fmadd_ps(dv, b.r, acc[5]);
    acc[6] = _mm512_fmadd_ps(dv, c.l, acc[6]);
    acc[7] = _mm512_fmadd_ps(dv, c.c, acc[7]);
    acc[8] = _mm512_fmadd_ps(dv, c.r, acc[8]);
    a = b;
    b = c;
  }
}

__attribute__((target("avx512f"))) void DwWeightGradRows(const float* z, const float* x, __m512* acc_io,
                                                         const DwFlat& f) {
  const int64_t h = f.rows_h, wd = f.rows_w;
  __m512 acc[9];
  for (int t = 0; t < 9; ++t) acc[t] = acc_io[t];
  int64_t c0 = 0;
  for (; c0 + 16 <= wd; c0 += 16) DwWeightGradChunk<true>(z, x, acc, h, wd, c0, 0xffff);
  if (c0 < wd) DwWeightGradChunk<false>(z, x, acc, h, wd, c0, static_cast<__mmask16>((1u << (wd - c0)) - 1));
  for (int t = 0; t < 9; ++t) acc_io[t] = acc[t];
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
    if (k + 2 == f.vectors && f.tail != 0xffff) _mm512_mask_storeu_ps(y + 16 * k + 16, f.tail, acc1);
    else _mm512_storeu_ps(y + 16 * k + 16, acc1);
  }
  if (k < f.vectors) {
    __m512 acc = _mm512_set1_ps(bias);
    const __mmask16* m = f.mask + k * taps;
    for (int64_t t = 0; t < taps; ++t) {
      acc = _mm512_fmadd_ps(wv[t], _mm512_maskz_loadu_ps(m[t], x + 16 * k + f.shift[t]), acc);
    }
    if (f.tail != 0xffff) _mm512_mask_storeu_ps(y + 16 * k, f.tail, acc);
    else _mm512_storeu_ps(y + 16 * k, acc);
  }
}

void DwForwardFlat(const float* x, const float* w, float bias, float* y, const DwFlat& f) {
  if (f.rows_w > 0) DwForwardRows(x, w, bias, y, f);
  else if (f.taps == 9) DwForwardFlat<9>(x, w, bias, y, f);
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
  if (f.rows_w > 0) DwWeightGradRows(z, x, acc, f);
  else if (f.taps == 9) DwWeightGradFlat<9>(z, x, acc, f);
  else DwWeightGradFlat<0>(z, x, acc, f);
}

// The 16 lanes added in a fixed order.
float DwLaneTotal(__m512 v) {
  alignas(64) float lane[16];
  _mm512_store_ps(lane, v);
  float sum = 0;
  for (float l : lane) sum += l;
  return sum;
}

namespace {

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
  for (int64_t t = 0; t < f.taps; ++t) dw[t] = DwLaneTotal(acc[t]);
}


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
    for (int64_t t = 0; t < taps; ++t) dw[ch * taps + t] = DwLaneTotal(acc[(ch - c0) * taps + t]);
  }
}

void DwBackwardVector(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                      const Geo2D& g, ThreadPool* pool) {
  const DwFlat data = BuildFlat(g.h, g.w, g.kh, g.kw, (g.kh - 1) * g.dh - g.ph, (g.kw - 1) * g.dw - g.pw, g.dh, g.dw, 0);
  const DwFlat weights = BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw, 1);
  ParallelFor(pool, c, 4.0 * static_cast<double>(n * g.h * g.w * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
    if (DwBackwardInRegisters(dy, x, w, dx, dw, n, c, c0, c1, g, data, weights)) return;
    DwBackwardBlock(dy, x, w, dx, dw, n, c, c0, c1, g, data, weights);
  });
}

}  // namespace

bool DwVectorForward(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, const Geo2D& g,
                     ThreadPool* pool) {
  if (!DwVectorApplies(g)) return false;
  if (DwPhasesApply(g)) {
    DwPhaseForward(x, w, bias, y, n, c, g, pool);
    return true;
  }
  if (DwSameSize(g) && g.h * g.w <= 16 * kDwRegVectors &&
      DwForwardInRegisters(x, w, bias, y, n, c, g, BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw), pool)) {
    return true;
  }
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
  return true;
}

bool DwVectorBackwardData(const float* dy, const float* w, float* dx, int64_t n, int64_t c, const Geo2D& g,
                          ThreadPool* pool) {
  if (!DwVectorApplies(g)) return false;
  if (DwPhasesApply(g)) {
    DwPhaseBackwardData(dy, w, dx, n, c, g, pool);
    return true;
  }

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
  return true;
}

bool DwVectorBackwardWeights(const float* dy, const float* x, float* dw, int64_t n, int64_t c, const Geo2D& g,
                             ThreadPool* pool) {
  if (!DwVectorApplies(g)) return false;
  if (DwPhasesApply(g)) {
    DwPhaseBackward(dy, x, nullptr, nullptr, dw, n, c, g, pool);
    return true;
  }

  const bool spread = !DwSameSize(g);
  const DwFlat flat = BuildFlat(g.h, g.w, g.kh, g.kw, g.ph, g.pw, g.dh, g.dw);
  ParallelFor(pool, c, 2.0 * static_cast<double>(n * g.h * g.w * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
    float* z = spread ? ThreadBuffer<float>(0, static_cast<size_t>(g.h * g.w)) : nullptr;
    if (z) std::fill(z, z + g.h * g.w, 0.0f);
    for (int64_t ch = c0; ch < c1; ++ch) {
      DwWeightGradChannel(dy + ch * g.oh * g.ow, x + ch * g.h * g.w, dw + ch * g.kh * g.kw, n, c, g, flat, z);
    }
  });
  return true;
}

bool DwVectorBackward(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                      const Geo2D& g, ThreadPool* pool) {
  if (!DwVectorApplies(g)) return false;
  if (DwPhasesApply(g)) DwPhaseBackward(dy, x, w, dx, dw, n, c, g, pool);
  else DwBackwardVector(dy, x, w, dx, dw, n, c, g, pool);
  return true;
}

}  // namespace cpu
}  // namespace ontrain
