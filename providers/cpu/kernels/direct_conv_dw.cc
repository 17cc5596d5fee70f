// DirectWeightGrad3x3 (direct_conv.h): the weight gradient of 3x3 convolutions in AVX-512 register tiles
// (a chunk's padded images or the images in place, times their transposed dY or, for MaxPoolReluConvGrad,
// the dY unpooled in registers from dZ and window codes), dB's per-image sums, and dY's transposes.
#include <immintrin.h>

#include <algorithm>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/direct_conv.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

// acc[0..1] += f's lower and upper 8 floats, converted to double.
__attribute__((target("avx512f"), always_inline)) inline void AddAsDoubles(__m512 f, __m512d* acc) {
  acc[0] = _mm512_add_pd(acc[0], _mm512_cvtps_pd(_mm512_castps512_ps256(f)));
  acc[1] = _mm512_add_pd(acc[1], _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(f), 1))));
}

// MaxPoolReluGrad's dY at one window position for 16 output channels, from the window's transposed dZ g
// and codes c (TransposePooled): +0 + g where the lane's code is `want` (the position, positive), else +0.
__attribute__((target("avx512f"), always_inline)) inline __m512 UnpooledLanes(__m512i c, __m512 g, __m512i want) {
  return _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(c, want), g));
}

// out rows r = cb * 9 + a * 3 + b (CB input channels, the 9 taps; stride S), OV vectors of 16 output
// channels, ld_out apart: = the products of `images` images' padded planes xq (CB planes, `plane` apart;
// images image_x apart) and their transposed dY (rows of ldt floats, output channels from column 0; images
// image_dy apart), over images, rows, then columns, the accumulators staying in registers across images.
// GCC's predictive commoning would carry x[j + 1] and x[j + 2] into the next column's iteration through the
// stack (the accumulators leave it no registers): measured 115 against 173 GFLOP/s, hence its option off.
template <int S, int CB, int OV>
__attribute__((target("avx512f"), optimize("no-predictive-commoning"))) void WeightGradTile(
    const float* xq, int64_t plane, int64_t wp, int64_t oh, int64_t ow, const float* dyt, int64_t ldt, int64_t images,
    int64_t image_x, int64_t image_dy, float* out, int64_t ld_out) {
  __m512 acc[CB * 9][OV];
  for (int r = 0; r < CB * 9; ++r) {
    for (int v = 0; v < OV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t im = 0; im < images; ++im, xq += image_x, dyt += image_dy) {
    for (int64_t i = 0; i < oh; ++i) {
      const float* xr = xq + S * i * wp;
      const float* gr = dyt + i * ow * ldt;
      for (int64_t j = 0; j < ow; ++j) {
        __m512 g[OV];
        for (int v = 0; v < OV; ++v) g[v] = _mm512_loadu_ps(gr + j * ldt + 16 * v);
        for (int cb = 0; cb < CB; ++cb) {
          for (int a = 0; a < 3; ++a) {
            const float* x = xr + cb * plane + a * wp + S * j;
            for (int b = 0; b < 3; ++b) {
              const __m512 xb = _mm512_set1_ps(x[b]);
              for (int v = 0; v < OV; ++v) acc[cb * 9 + a * 3 + b][v] = _mm512_fmadd_ps(xb, g[v], acc[cb * 9 + a * 3 + b][v]);
            }
          }
        }
      }
    }
  }
  for (int r = 0; r < CB * 9; ++r) {
    for (int v = 0; v < OV; ++v) _mm512_storeu_ps(out + r * ld_out + 16 * v, acc[r][v]);
  }
}

// One output position of WeightGradTileInPlace: acc[a * 3 + b] += x[a, S j + b] * (g0, g1) (32 output channels),
// where xr is the position's window row 0 at column 0 of the padded plane (rows `w` apart). Guard: only
// the taps inside the image (window rows [a0, a1), columns S j + b - pl in [0, w)); the others, padding,
// are skipped and read nothing.
template <int S, bool Guard>
__attribute__((target("avx512f"), always_inline)) inline void WeightGradStep(const float* xr, int64_t w, int64_t j,
                                                                            int64_t pl, int a0, int a1, __m512 g0,
                                                                            __m512 g1, __m512 (&acc)[9][2]) {
  for (int a = 0; a < 3; ++a) {
    if (Guard && (a < a0 || a >= a1)) continue;
    const float* x = xr + a * w + S * j;
    for (int b = 0; b < 3; ++b) {
      if (Guard && static_cast<uint64_t>(S * j + b - pl) >= static_cast<uint64_t>(w)) continue;
      const __m512 xb = _mm512_set1_ps(x[b]);
      acc[a * 3 + b][0] = _mm512_fmadd_ps(xb, g0, acc[a * 3 + b][0]);
      acc[a * 3 + b][1] = _mm512_fmadd_ps(xb, g1, acc[a * 3 + b][1]);
    }
  }
}

// WeightGradTile<S, 1, 2> over the images where they lie (planes of h rows of w, pads pt on top and pl on
// the left; images image_x apart), without a padded copy: the positions whose window reaches the padding
// (border rows and columns) take the guarded step, which skips the products with it. Skipping a product
// with zero leaves the sums' bits as they were, except the sign of an all-zero sum and a dY that is
// infinite or NaN (whose product with a padding zero is NaN).
template <int S>
__attribute__((target("avx512f"), optimize("no-predictive-commoning"))) void WeightGradTileInPlace(
    const float* x, int64_t w, int64_t h, int64_t pt, int64_t pl, int64_t oh, int64_t ow, const float* dyt,
    int64_t ldt, int64_t images, int64_t image_x, int64_t image_dy, float* out, int64_t ld_out) {
  __m512 acc[9][2];
  for (int r = 0; r < 9; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  // Columns whose three taps are all inside the image: jlo <= j < jhi.
  const int64_t jlo = std::min(ow, (pl + S - 1) / S);
  const int64_t jhi = w - 3 + pl < 0 ? jlo : std::max(jlo, std::min(ow, (w - 3 + pl) / S + 1));
  for (int64_t im = 0; im < images; ++im, x += image_x, dyt += image_dy) {
    for (int64_t i = 0; i < oh; ++i) {
      const int64_t r = S * i - pt;  // the image row of window row 0
      const int a0 = static_cast<int>(std::clamp<int64_t>(-r, 0, 3));
      const int a1 = static_cast<int>(std::clamp<int64_t>(h - r, a0, 3));
      const float* xr = x + r * w - pl;  // padded column 0 of window row 0 (may lie outside the image)
      const float* gr = dyt + i * ow * ldt;
      int64_t j = 0;
      auto g = [&](int64_t jj, int v) __attribute__((target("avx512f"), always_inline)) {
        return _mm512_loadu_ps(gr + jj * ldt + 16 * v);
      };
      if (a0 == 0 && a1 == 3) {
        for (; j < jlo; ++j) WeightGradStep<S, true>(xr, w, j, pl, a0, a1, g(j, 0), g(j, 1), acc);
        for (; j < jhi; ++j) WeightGradStep<S, false>(xr, w, j, pl, a0, a1, g(j, 0), g(j, 1), acc);
      }
      for (; j < ow; ++j) WeightGradStep<S, true>(xr, w, j, pl, a0, a1, g(j, 0), g(j, 1), acc);
    }
  }
  for (int r = 0; r < 9; ++r) {
    _mm512_storeu_ps(out + r * ld_out, acc[r][0]);
    _mm512_storeu_ps(out + r * ld_out + 16, acc[r][1]);
  }
}

// MaxPoolReluGrad's dY at 32 output channels of one window (2x2 at stride 2), from the window's transposed
// dZ g0, g1 and codes c0, c1 (TransposePooled): at the window position whose code is `want`, +0 + g where
// the lane's code is it, else +0: the values UnpoolOutputGrad writes there.
__attribute__((target("avx512f"), always_inline)) inline void PooledGrad(__m512i c0, __m512i c1, __m512 g0, __m512 g1,
                                                                         __m512i want, __m512* d0, __m512* d1) {
  *d0 = UnpooledLanes(c0, g0, want);
  *d1 = UnpooledLanes(c1, g1, want);
}

// WeightGradTileInPlace<1> over images without pads whose dY is MaxPoolReluGrad's, made per window from
// TransposePooled's work (gt [ph * pw, ldt] floats then ct as many int32 codes, images image_dy floats
// apart) as UnpoolOutputGrad would store it: the same products in the same order, so the same sums, with
// the dY of the positions no window covers (an odd last row or column) +0.
__attribute__((target("avx512f"), optimize("no-predictive-commoning"))) void PooledWeightGradTile(
    const float* x, int64_t w, int64_t oh, int64_t ow, const float* work, int64_t ldt, int64_t ph, int64_t pw,
    int64_t images, int64_t image_x, int64_t image_dy, float* out, int64_t ld_out) {
  __m512 acc[9][2];
  for (int r = 0; r < 9; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t im = 0; im < images; ++im, x += image_x, work += image_dy) {
    const int32_t* codes = reinterpret_cast<const int32_t*>(work + ph * pw * ldt);
    for (int64_t i = 0; i < oh; ++i) {
      const float* xr = x + i * w;
      int64_t j = 0;
      if (i < 2 * ph) {
        const __m512i want0 = _mm512_set1_epi32(static_cast<int32_t>(2 * (i % 2) + kWindowCodePositive));
        const __m512i want1 = _mm512_add_epi32(want0, _mm512_set1_epi32(1));
        const float* gr = work + (i / 2) * pw * ldt;
        const int32_t* cr = codes + (i / 2) * pw * ldt;
        for (int64_t b = 0; b < pw; ++b, j += 2) {
          const __m512i c0 = _mm512_loadu_si512(cr + b * ldt), c1 = _mm512_loadu_si512(cr + b * ldt + 16);
          const __m512 g0 = _mm512_loadu_ps(gr + b * ldt), g1 = _mm512_loadu_ps(gr + b * ldt + 16);
          __m512 d0, d1;
          PooledGrad(c0, c1, g0, g1, want0, &d0, &d1);
          WeightGradStep<1, false>(xr, w, j, 0, 0, 3, d0, d1, acc);
          PooledGrad(c0, c1, g0, g1, want1, &d0, &d1);
          WeightGradStep<1, false>(xr, w, j + 1, 0, 0, 3, d0, d1, acc);
        }
      }
      for (; j < ow; ++j) WeightGradStep<1, false>(xr, w, j, 0, 0, 3, zero, zero, acc);
    }
  }
  for (int r = 0; r < 9; ++r) {
    _mm512_storeu_ps(out + r * ld_out, acc[r][0]);
    _mm512_storeu_ps(out + r * ld_out + 16, acc[r][1]);
  }
}

// PooledChannelSums for one pooled row's windows (16 channels from gt, codes): output row i's even columns
// into set `e` (the parity of the row's first position) and odd ones into the other; positions no window
// covers add +0 to a sum that is never -0, and are left out.
template <int E>
__attribute__((target("avx512f"), always_inline)) inline void PooledRowSums(const float* gt, const int32_t* ct,
                                                                            int64_t pw, int64_t ldt, __m512i want0,
                                                                            __m512d (&acc)[2][2]) {
  const __m512i want1 = _mm512_add_epi32(want0, _mm512_set1_epi32(1));
  for (int64_t b = 0; b < pw; ++b) {
    const __m512i c = _mm512_loadu_si512(ct + b * ldt);
    const __m512 g = _mm512_loadu_ps(gt + b * ldt);
    AddAsDoubles(UnpooledLanes(c, g, want0), acc[E]);
    AddAsDoubles(UnpooledLanes(c, g, want1), acc[1 - E]);
  }
}

// ChannelSums for the NV 16-channel vectors from channel o0: two sets of 2 NV double accumulators (even and
// odd positions), positions two at a time.
template <int NV>
__attribute__((target("avx512f"))) void ChannelSumsBlock(const float* dyt, int64_t positions, int64_t ld, double* out) {
  __m512d acc[2][2 * NV];
  for (int e = 0; e < 2; ++e) {
    for (int k = 0; k < 2 * NV; ++k) acc[e][k] = _mm512_setzero_pd();
  }
  auto add = [&](const float* row, int e) __attribute__((target("avx512f"), always_inline)) {
    for (int v = 0; v < NV; ++v) AddAsDoubles(_mm512_loadu_ps(row + 16 * v), acc[e] + 2 * v);
  };
  int64_t p = 0;
  for (; p + 2 <= positions; p += 2) {
    add(dyt + p * ld, 0);
    add(dyt + (p + 1) * ld, 1);
  }
  if (p < positions) add(dyt + p * ld, 0);
  for (int k = 0; k < 2 * NV; ++k) _mm512_storeu_pd(out + 8 * k, _mm512_add_pd(acc[0][k], acc[1][k]));
}

}  // namespace

bool DirectWeightGrad3x3::Applies(const Shape& in, const WindowAttrs& a) {
  if (!DirectConv2D::Available() || in.size() != 2 || a.kernel.size() != 2 || a.strides.size() != 2 ||
      a.dilations.size() != 2 || a.pads.size() != 4) {
    return false;
  }
  for (int64_t p : a.pads) if (p < 0) return false;
  return a.kernel[0] == 3 && a.kernel[1] == 3 && a.dilations[0] == 1 && a.dilations[1] == 1 &&
         a.strides[0] == a.strides[1] && (a.strides[0] == 1 || a.strides[0] == 2);
}

DirectWeightGrad3x3::DirectWeightGrad3x3(const Shape& in, const Shape& out, const WindowAttrs& a, int64_t cin,
                                         int64_t cout)
    : rows_(in, out, a), stride_(a.strides[0]), cin_(cin), cout_(cout), cout_pad_((cout + 15) / 16 * 16) {}

void DirectWeightGrad3x3::TransposeOutputGrad(const float* dy, float* dyt) const {
  // 16 x 16 blocks in registers where they are whole, the edges (and the zero columns) element by element.
  const int64_t positions = rows_.oh * rows_.ow, q16 = positions / 16 * 16, o16 = cout_ / 16 * 16;
  for (int64_t q0 = 0; q0 < q16; q0 += 16) {
    for (int64_t o0 = 0; o0 < o16; o0 += 16) Transpose16x16(dy + o0 * positions + q0, positions, dyt + q0 * cout_pad_ + o0, cout_pad_);
  }
  auto edge = [&](int64_t q0, int64_t q1, int64_t o0) {
    for (int64_t q = q0; q < q1; ++q) {
      for (int64_t o = o0; o < cout_pad_; ++o) dyt[q * cout_pad_ + o] = o < cout_ ? dy[o * positions + q] : 0.0f;
    }
  };
  if (o16 < cout_pad_) edge(0, q16, o16);
  edge(q16, positions, 0);
}

__attribute__((target("avx512f"))) void DirectWeightGrad3x3::ChannelSums(const float* dyt, double* out) const {
  const int64_t positions = rows_.oh * rows_.ow;
  alignas(64) double block[64];
  for (int64_t o0 = 0; o0 < cout_; o0 += 64) {
    switch (std::min<int64_t>(4, (cout_pad_ - o0) / 16)) {
      case 4: ChannelSumsBlock<4>(dyt + o0, positions, cout_pad_, block); break;
      case 3: ChannelSumsBlock<3>(dyt + o0, positions, cout_pad_, block); break;
      case 2: ChannelSumsBlock<2>(dyt + o0, positions, cout_pad_, block); break;
      default: ChannelSumsBlock<1>(dyt + o0, positions, cout_pad_, block); break;
    }
    for (int64_t o = o0; o < std::min(cout_, o0 + 64); ++o) out[o] = block[o - o0];
  }
}

__attribute__((target("avx512f"))) void DirectWeightGrad3x3::TransposePooled(const float* g, const uint8_t* codes,
                                                                             int64_t ph, int64_t pw,
                                                                             float* work) const {
  // 16 x 16 blocks in registers (the codes widened to int32, their position and positive bit kept), the
  // edges and the zero channels after cout element by element.
  const int64_t m = cout_, cp = cout_pad_, windows = ph * pw;
  float* gt = work;
  int32_t* ct = reinterpret_cast<int32_t*>(work + windows * cp);
  const __m512i seven = _mm512_set1_epi32(7);
  alignas(64) int32_t wide[256];
  for (int64_t o0 = 0; o0 < cp; o0 += 16) {
    for (int64_t w0 = 0; w0 < windows; w0 += 16) {
      if (o0 + 16 <= m && w0 + 16 <= windows) {
        Transpose16x16(g + o0 * windows + w0, windows, gt + w0 * cp + o0, cp);
        for (int r = 0; r < 16; ++r) {
          const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + (o0 + r) * windows + w0));
          _mm512_store_si512(wide + 16 * r, _mm512_and_si512(_mm512_cvtepu8_epi32(b), seven));
        }
        Transpose16x16(reinterpret_cast<const float*>(wide), 16, reinterpret_cast<float*>(ct + w0 * cp + o0), cp);
        continue;
      }
      for (int64_t w = w0; w < std::min(windows, w0 + 16); ++w) {
        for (int64_t o = o0; o < o0 + 16; ++o) {
          gt[w * cp + o] = o < m ? g[o * windows + w] : 0.0f;
          ct[w * cp + o] = o < m ? codes[o * windows + w] & 7 : 0;
        }
      }
    }
  }
}

__attribute__((target("avx512f"))) void DirectWeightGrad3x3::UnpoolOutputGrad(const float* g, const uint8_t* codes,
                                                                              int64_t ph, int64_t pw, float* work,
                                                                              float* dyt) const {
  // g and the codes transposed into `work`; then each output position 16 channels a vector: its window's
  // codes against the code that names the position.
  TransposePooled(g, codes, ph, pw, work);
  const int64_t cp = cout_pad_, oh = rows_.oh, ow = rows_.ow;
  const float* gt = work;
  const int32_t* ct = reinterpret_cast<const int32_t*>(work + ph * pw * cp);
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t r = 0; r < oh; ++r) {
    for (int64_t c = 0; c < ow; ++c) {
      float* out = dyt + (r * ow + c) * cp;
      if (r >= 2 * ph || c >= 2 * pw) {  // no window covers it
        for (int64_t o = 0; o < cp; o += 16) _mm512_storeu_ps(out + o, zero);
        continue;
      }
      const int64_t w = (r / 2) * pw + c / 2;
      const __m512i want = _mm512_set1_epi32(static_cast<int32_t>(2 * (r % 2) + c % 2 + kWindowCodePositive));
      for (int64_t o = 0; o < cp; o += 16) {
        const __m512i code = _mm512_loadu_si512(ct + w * cp + o);
        _mm512_storeu_ps(out + o, UnpooledLanes(code, _mm512_loadu_ps(gt + w * cp + o), want));
      }
    }
  }
}

__attribute__((target("avx512f"))) void DirectWeightGrad3x3::PooledChannelSums(const float* work, int64_t ph,
                                                                               int64_t pw, double* out) const {
  // ChannelSumsBlock's sets, 16 channels at a time: output position p's vector into set p % 2, in order.
  const int64_t ow = rows_.ow, cp = cout_pad_;
  const int32_t* ct = reinterpret_cast<const int32_t*>(work + ph * pw * cp);
  alignas(64) double block[16];
  for (int64_t o0 = 0; o0 < cout_; o0 += 16) {
    __m512d acc[2][2] = {{_mm512_setzero_pd(), _mm512_setzero_pd()}, {_mm512_setzero_pd(), _mm512_setzero_pd()}};
    for (int64_t r = 0; r < 2 * ph; ++r) {
      const __m512i want = _mm512_set1_epi32(static_cast<int32_t>(2 * (r % 2) + kWindowCodePositive));
      const int64_t at = (r / 2) * pw * cp + o0;
      if ((r * ow) % 2 == 0) PooledRowSums<0>(work + at, ct + at, pw, cp, want, acc);
      else PooledRowSums<1>(work + at, ct + at, pw, cp, want, acc);
    }
    _mm512_store_pd(block, _mm512_add_pd(acc[0][0], acc[1][0]));
    _mm512_store_pd(block + 8, _mm512_add_pd(acc[0][1], acc[1][1]));
    for (int64_t o = o0; o < std::min(cout_, o0 + 16); ++o) out[o] = block[o - o0];
  }
}

void DirectWeightGrad3x3::RunPooledInPlace(const float* x, int64_t image_x, const float* work, int64_t ph,
                                           int64_t pw, int64_t images, float* out) const {
  const int64_t plane = rows_.h * rows_.w, ld = cout_pad_;
  for (int64_t c = 0; c < cin_; ++c) {
    for (int64_t o = 0; o < cout_pad_; o += 32) {
      PooledWeightGradTile(x + c * plane, rows_.w, rows_.oh, rows_.ow, work + o, ld, ph, pw, images, image_x,
                           transposed_size(), out + c * 9 * ld + o, ld);
    }
  }
}

void DirectWeightGrad3x3::Run(const float* xp, const float* dyt, int64_t images, float* out) const {
  if (stride_ == 2) RunStride<2>(xp, dyt, images, out);
  else RunStride<1>(xp, dyt, images, out);
}

void DirectWeightGrad3x3::RunInPlace(const float* x, int64_t image_x, const float* dyt, int64_t images,
                                     float* out) const {
  const int64_t plane = rows_.h * rows_.w, ld = cout_pad_, image_dy = transposed_size();
  const auto tile = stride_ == 2 ? &WeightGradTileInPlace<2> : &WeightGradTileInPlace<1>;
  for (int64_t c = 0; c < cin_; ++c) {
    for (int64_t o = 0; o < cout_pad_; o += 32) {
      tile(x + c * plane, rows_.w, rows_.h, rows_.pt, rows_.pl, rows_.oh, rows_.ow, dyt + o, ld, images, image_x,
           image_dy, out + c * 9 * ld + o, ld);
    }
  }
}

template <int S>
void DirectWeightGrad3x3::RunStride(const float* xp, const float* dyt, int64_t images, float* out) const {
  const int64_t plane = rows_.plane(), wp = rows_.wp, oh = rows_.oh, ow = rows_.ow, ld = cout_pad_;
  const int64_t image_x = image_size(), image_dy = transposed_size();
  const int64_t pairs = cout_pad_ / 32 * 32;  // output channels in tiles of 32; an odd 16 after them
  for (int64_t c = 0; c < cin_; ++c) {
    for (int64_t o = 0; o < pairs; o += 32) {
      WeightGradTile<S, 1, 2>(xp + c * plane, plane, wp, oh, ow, dyt + o, ld, images, image_x, image_dy,
                              out + c * 9 * ld + o, ld);
    }
  }
  if (pairs == cout_pad_) return;
  for (int64_t c = 0; c < cin_; c += 3) {
    const int64_t cb = std::min<int64_t>(3, cin_ - c);
    const float* xq = xp + c * plane;
    const float* g = dyt + pairs;
    float* o = out + c * 9 * ld + pairs;
    if (cb == 3) WeightGradTile<S, 3, 1>(xq, plane, wp, oh, ow, g, ld, images, image_x, image_dy, o, ld);
    else if (cb == 2) WeightGradTile<S, 2, 1>(xq, plane, wp, oh, ow, g, ld, images, image_x, image_dy, o, ld);
    else WeightGradTile<S, 1, 1>(xq, plane, wp, oh, ow, g, ld, images, image_x, image_dy, o, ld);
  }
}

}  // namespace cpu
}  // namespace ontrain
