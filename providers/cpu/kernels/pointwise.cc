// The register tiles of pointwise.h and the loops around them.
#include "providers/cpu/kernels/pointwise.h"

#include <immintrin.h>

#include <algorithm>

namespace ontrain {
namespace cpu {
namespace {

// One tile over images [i0, i1): A output channels (dY rows) by B input channels (X rows), A x B
// accumulators of 16 position lanes taken from `lanes` and put back (acc[a][b] at lanes[a * 6 + b]); each
// image's A dY vectors held while its B X vectors stream past (A + B loads per A B FMAs). Each accumulator
// takes its products in the same order whatever the tile's shape and the image blocks.
template <int A, int B>
__attribute__((target("avx512f"), always_inline)) inline void PointwiseTile(const float* dy, int64_t dy_image,
                                                                           const float* x, int64_t x_image, int64_t i0,
                                                                           int64_t i1, int64_t hw, int64_t o, int64_t ch,
                                                                           __m512* lanes) {
  __m512 acc[A][B];
  for (int a = 0; a < A; ++a) {
    for (int b = 0; b < B; ++b) acc[a][b] = lanes[a * 6 + b];
  }
  for (int64_t i = i0; i < i1; ++i) {
    const float* d = dy + i * dy_image + o * hw;
    const float* xr = x + i * x_image + ch * hw;
    for (int64_t p = 0; p < hw; p += 16) {
      __m512 dv[A];
      for (int a = 0; a < A; ++a) dv[a] = _mm512_loadu_ps(d + a * hw + p);
      for (int b = 0; b < B; ++b) {
        const __m512 xv = _mm512_loadu_ps(xr + b * hw + p);
        for (int a = 0; a < A; ++a) acc[a][b] = _mm512_fmadd_ps(dv[a], xv, acc[a][b]);
      }
    }
  }
  for (int a = 0; a < A; ++a) {
    for (int b = 0; b < B; ++b) lanes[a * 6 + b] = acc[a][b];
  }
}

constexpr int64_t kPointwiseTiles = 32;  // tiles whose lanes a blocked pass keeps in memory (48 KB)

// Tiles of 4 output channels by 6 input channels (24 accumulators, 10 loads per 24 FMAs; 4 x 4 tiles took
// 8 per 16 and ran the MobileNet's [16 <- 128] dW at 129 GFLOP/s from L2), the input channels' last 2 or 4
// in a narrower tile. The images in blocks (at least 512 positions each): for each block, every tile of the
// inner operand's range runs against the outer tile's rows, which stay in L1 (its lanes wait in memory
// between blocks), so only the inner operand streams from L2.
template <bool kInputOuter>
__attribute__((target("avx512f"))) void PointwiseWeightGradTiles(const float* dy, int64_t dy_image, const float* x,
                                                            int64_t x_image, int64_t n, int64_t hw, int64_t o0,
                                                            int64_t o1, int64_t c0, int64_t c1, float* dw, int64_t ld) {
  auto width = [&](int64_t ch) { return std::min<int64_t>(6, c1 - ch); };  // 6, then 4 or 2 (c1 - c0 % 4 == 0)
  auto tile = [&](int64_t i0, int64_t i1, int64_t o, int64_t ch, __m512* lanes) __attribute__((target("avx512f"))) {
    const int64_t w = width(ch);
    if (w == 6) PointwiseTile<4, 6>(dy, dy_image, x, x_image, i0, i1, hw, o, ch, lanes);
    else if (w == 4) PointwiseTile<4, 4>(dy, dy_image, x, x_image, i0, i1, hw, o, ch, lanes);
    else PointwiseTile<4, 2>(dy, dy_image, x, x_image, i0, i1, hw, o, ch, lanes);
  };
  auto finish = [&](int64_t o, int64_t ch, const __m512* lanes) __attribute__((target("avx512f"))) {
    for (int a = 0; a < 4; ++a) {
      for (int64_t b = 0; b < width(ch); ++b) {
        alignas(64) float lane[16];
        _mm512_store_ps(lane, lanes[a * 6 + b]);
        float sum = 0;
        for (float l : lane) sum += l;
        dw[(o + a) * ld + ch + b] = sum;
      }
    }
  };
  const int64_t block = std::max<int64_t>(1, 512 / hw);
  int64_t inner_tiles = 0;  // of the inner operand's range
  if constexpr (kInputOuter) {
    inner_tiles = (o1 - o0) / 4;
  } else {
    for (int64_t ch = c0; ch < c1; ch += width(ch)) ++inner_tiles;
  }
  __m512 lanes[kPointwiseTiles][24];
  if (inner_tiles > kPointwiseTiles) {  // each tile over all the images, its lanes in registers
    for (int64_t o = o0; o < o1; o += 4) {
      for (int64_t ch = c0; ch < c1; ch += width(ch)) {
        for (int k = 0; k < 24; ++k) lanes[0][k] = _mm512_setzero_ps();
        tile(0, n, o, ch, lanes[0]);
        finish(o, ch, lanes[0]);
      }
    }
    return;
  }
  if constexpr (kInputOuter) {
    for (int64_t ch = c0; ch < c1; ch += width(ch)) {
      for (int64_t t = 0; t < inner_tiles; ++t) {
        for (int k = 0; k < 24; ++k) lanes[t][k] = _mm512_setzero_ps();
      }
      for (int64_t i0 = 0; i0 < n; i0 += block) {
        for (int64_t t = 0; t < inner_tiles; ++t) tile(i0, std::min(n, i0 + block), o0 + 4 * t, ch, lanes[t]);
      }
      for (int64_t t = 0; t < inner_tiles; ++t) finish(o0 + 4 * t, ch, lanes[t]);
    }
  } else {
    for (int64_t o = o0; o < o1; o += 4) {
      for (int64_t t = 0; t < inner_tiles; ++t) {
        for (int k = 0; k < 24; ++k) lanes[t][k] = _mm512_setzero_ps();
      }
      for (int64_t i0 = 0; i0 < n; i0 += block) {
        int64_t t = 0;
        for (int64_t ch = c0; ch < c1; ch += width(ch), ++t) tile(i0, std::min(n, i0 + block), o, ch, lanes[t]);
      }
      int64_t t = 0;
      for (int64_t ch = c0; ch < c1; ch += width(ch), ++t) finish(o, ch, lanes[t]);
    }
  }
}

// PointwiseConv's tile: A rows r0 .. r0 + A of Y by P vectors of 16 positions (x[q] and y[q] the vectors'
// starts at k = 0 and r = 0), A x P accumulators over k in order: each k step P loads of X and A
// broadcasts of W for A P FMAs (4 x 6: 10 loads per 24 FMAs).
template <int A, int P>
__attribute__((target("avx512f"))) void PointwiseConvTile(const float* const* x, int64_t hw, const float* w, int64_t wr,
                                                          int64_t wk, int64_t k_count, int64_t r0, const float* bias,
                                                          bool relu, float* const* y) {
  __m512 acc[A][P];
  for (int a = 0; a < A; ++a) {
    for (int q = 0; q < P; ++q) acc[a][q] = _mm512_setzero_ps();
  }
  const float* wa = w + r0 * wr;
  for (int64_t k = 0; k < k_count; ++k) {
    __m512 xv[P];
    for (int q = 0; q < P; ++q) xv[q] = _mm512_loadu_ps(x[q] + k * hw);
    for (int a = 0; a < A; ++a) {
      const __m512 wv = _mm512_set1_ps(wa[a * wr + k * wk]);
      for (int q = 0; q < P; ++q) acc[a][q] = _mm512_fmadd_ps(wv, xv[q], acc[a][q]);
    }
  }
  for (int a = 0; a < A; ++a) {
    const __m512 b = _mm512_set1_ps(bias != nullptr ? bias[r0 + a] : 0.0f);
    for (int q = 0; q < P; ++q) {
      __m512 v = bias != nullptr ? _mm512_add_ps(acc[a][q], b) : acc[a][q];
      if (relu) v = _mm512_max_ps(v, _mm512_setzero_ps());
      _mm512_storeu_ps(y[q] + (r0 + a) * hw, v);
    }
  }
}

using PointwiseConvFn = void (*)(const float* const*, int64_t, const float*, int64_t, int64_t, int64_t, int64_t,
                                 const float*, bool, float* const*);
template <int A>
constexpr PointwiseConvFn kPointwiseConvRow[6] = {&PointwiseConvTile<A, 1>, &PointwiseConvTile<A, 2>,
                                                  &PointwiseConvTile<A, 3>, &PointwiseConvTile<A, 4>,
                                                  &PointwiseConvTile<A, 5>, &PointwiseConvTile<A, 6>};
constexpr const PointwiseConvFn* kPointwiseConv[4] = {kPointwiseConvRow<1>, kPointwiseConvRow<2>, kPointwiseConvRow<3>,
                                                      kPointwiseConvRow<4>};

}  // namespace

void PointwiseWeightGrad(const float* dy, int64_t dy_image, const float* x, int64_t x_image, int64_t n, int64_t hw,
                         int64_t o0, int64_t o1, int64_t c0, int64_t c1, bool input_outer, float* dw, int64_t ld) {
  if (input_outer) PointwiseWeightGradTiles<true>(dy, dy_image, x, x_image, n, hw, o0, o1, c0, c1, dw, ld);
  else PointwiseWeightGradTiles<false>(dy, dy_image, x, x_image, n, hw, o0, o1, c0, c1, dw, ld);
}

void PointwiseConv(const float* x, int64_t x_image, const float* w, int64_t wr, int64_t wk, const float* bias, bool relu,
                   float* y, int64_t y_image, int64_t hw, int64_t rows, int64_t k_count, int64_t v0, int64_t v1) {
  const int64_t per = hw / 16;  // vectors per image
  for (int64_t v = v0; v < v1; v += 6) {
    const int64_t p = std::min<int64_t>(6, v1 - v);
    const float* xs[6];
    float* ys[6];
    for (int64_t q = 0; q < p; ++q) {
      const int64_t image = (v + q) / per, off = (v + q) % per * 16;
      xs[q] = x + image * x_image + off;
      ys[q] = y + image * y_image + off;
    }
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      kPointwiseConv[std::min<int64_t>(4, rows - r0) - 1][p - 1](xs, hw, w, wr, wk, k_count, r0, bias, relu, ys);
    }
  }
}

}  // namespace cpu
}  // namespace ontrain
