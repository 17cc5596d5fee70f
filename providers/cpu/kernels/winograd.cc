// The transforms and register tiles of winograd.h. B^T, G and A^T are F(2x2, 3x3)'s (Lavin and Gray):
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1], G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1],
// with transformed position xi = 4 * (row of B^T d) + (column of d B).
#include "providers/cpu/kernels/winograd.h"

#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/direct_conv.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

constexpr int64_t RoundUp16(int64_t n) { return (n + 15) / 16 * 16; }

// One transformed position's products over `count` tiles (a multiple of 16), m [8][count] = u [cin][8]^T
// v [cin][count] (rows ld apart), by the direct kernel's register tiles (one window position, shift 0): 48
// tiles at a time, then the rest; each sum over the input channels in order from zero.
void Products(const float* u, const float* v, int64_t cin, int64_t ld, int64_t count, float* m) {
  static constexpr int64_t kNoShift[1] = {0};
  int64_t p = 0;
  for (; p + 48 <= count; p += 48) Tile8<3>(v + p, ld, kNoShift, 1, cin, u, m + p, ld);
  if (count - p == 32) Tile8<2>(v + p, ld, kNoShift, 1, cin, u, m + p, ld);
  if (count - p == 16) Tile8<1>(v + p, ld, kNoShift, 1, cin, u, m + p, ld);
}

// d B for one row of B^T d, over 16 tiles: a, b are the row's columns 2 j0 .. 2 j0 + 31, c its columns
// 2 j0 + 32 and 33 (lanes 0 and 1). h[n] lane t is column n of tile j0 + t.
__attribute__((target("avx512f"))) inline void RowTransform(__m512 a, __m512 b, __m512 c, __m512 h[4]) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512i next0 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
  const __m512i next1 = _mm512_setr_epi32(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 17);
  const __m512 e = _mm512_permutex2var_ps(a, even, b);    // columns 2t
  const __m512 o = _mm512_permutex2var_ps(a, odd, b);     // 2t + 1
  const __m512 e2 = _mm512_permutex2var_ps(e, next0, c);  // 2t + 2
  const __m512 o2 = _mm512_permutex2var_ps(o, next1, c);  // 2t + 3
  h[0] = _mm512_sub_ps(e, e2);
  h[1] = _mm512_add_ps(o, e2);
  h[2] = _mm512_sub_ps(e2, o);
  h[3] = _mm512_sub_ps(o, o2);
}

// B^T d B of the 4x4 blocks of one tile row (rows r, wp apart) for 16 tiles from column 2 j0 (r points
// there), stored to v (xi planes `stride` apart), all 16 lanes: lanes past the row's tiles are written
// over by the next row's, or land in the slack after the plane's row (masked stores are slow on Zen 4).
__attribute__((target("avx512f"))) void InputTiles(const float* r, int64_t wp, float* v, int64_t stride) {
  __m512 d[4][3];
  for (int k = 0; k < 4; ++k) {
    for (int s = 0; s < 3; ++s) d[k][s] = _mm512_loadu_ps(r + k * wp + 16 * s);
  }
  __m512 t[4][3];
  for (int s = 0; s < 3; ++s) {
    t[0][s] = _mm512_sub_ps(d[0][s], d[2][s]);
    t[1][s] = _mm512_add_ps(d[1][s], d[2][s]);
    t[2][s] = _mm512_sub_ps(d[2][s], d[1][s]);
    t[3][s] = _mm512_sub_ps(d[1][s], d[3][s]);
  }
  for (int k = 0; k < 4; ++k) {
    __m512 h[4];
    RowTransform(t[k][0], t[k][1], t[k][2], h);
    for (int n = 0; n < 4; ++n) _mm512_storeu_ps(v + (4 * k + n) * stride, h[n]);
  }
}

// A^T M A of 16 tiles of one output channel (m: its 16 products, xi planes `stride` apart), plus the bias
// when given, then max(y, 0) where `relu` (Relu's x > 0 ? x : 0: NaN and -0 give +0): y[a][b] lane t is
// row a, column b of tile t.
__attribute__((target("avx512f"), always_inline)) inline void OutputValues(const float* m, int64_t stride,
                                                                         const float* bias, bool relu,
                                                                         __m512 y[2][2]) {
  __m512 q[16];
  for (int k = 0; k < 16; ++k) q[k] = _mm512_loadu_ps(m + k * stride);
  __m512 s0[4], s1[4];
  for (int n = 0; n < 4; ++n) {
    s0[n] = _mm512_add_ps(_mm512_add_ps(q[n], q[4 + n]), q[8 + n]);
    s1[n] = _mm512_sub_ps(_mm512_sub_ps(q[4 + n], q[8 + n]), q[12 + n]);
  }
  const __m512* s[2] = {s0, s1};
  for (int a = 0; a < 2; ++a) {
    y[a][0] = _mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]), s[a][2]);
    y[a][1] = _mm512_sub_ps(_mm512_sub_ps(s[a][1], s[a][2]), s[a][3]);
    if (bias) {
      const __m512 b = _mm512_set1_ps(*bias);
      y[a][0] = _mm512_add_ps(y[a][0], b);
      y[a][1] = _mm512_add_ps(y[a][1], b);
    }
    if (relu) {  // vmaxps returns its second operand where either is NaN
      y[a][0] = _mm512_max_ps(y[a][0], _mm512_setzero_ps());
      y[a][1] = _mm512_max_ps(y[a][1], _mm512_setzero_ps());
    }
  }
}

// OutputValues with each tile's two output rows interleaved: rows[0] and rows[1] get 32 columns each.
__attribute__((target("avx512f"))) void OutputTiles(const float* m, int64_t stride, const float* bias, bool relu,
                                                    __m512 rows[2][2]) {
  __m512 y[2][2];
  OutputValues(m, stride, bias, relu, y);
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  for (int a = 0; a < 2; ++a) {
    rows[a][0] = _mm512_permutex2var_ps(y[a][0], lo, y[a][1]);
    rows[a][1] = _mm512_permutex2var_ps(y[a][0], hi, y[a][1]);
  }
}

}  // namespace

bool Winograd3x3::Available() { return CpuHasAvx512(); }

bool Winograd3x3::Applies(const PaddedRows& rows, int64_t cin, int64_t cout) {
  if (!Available() || rows.kh != 3 || rows.kw != 3 || rows.dh != 1 || rows.dw != 1 || rows.oh < 1 || rows.ow < 1) {
    return false;
  }
  if (cin < 8 || cout < 8) return false;
  // Pads of 2 (the input gradient of an unpadded convolution) put zeros in a third of the tiles' products,
  // which the direct kernel skips: the CNN's dX ran 1.33 -> 1.67 ms.
  if (rows.pt > 1 || rows.pl > 1 || rows.hp - rows.h - rows.pt > 1 || rows.wp - rows.w - rows.pl > 1) return false;
  // One image's transforms within 1 MB (an L2): larger planes keep the direct kernel.
  const int64_t tiles = ((rows.oh + 1) / 2) * ((rows.ow + 1) / 2);
  return 16 * cin * RoundUp16(tiles) * 4 <= (int64_t{1} << 20);
}

Winograd3x3::Winograd3x3(const PaddedRows& rows, int64_t cin, int64_t cout)
    : rows_(rows), cin_(cin), cout_(cout), cout_pad_((cout + kBlock - 1) / kBlock * kBlock) {
  th_ = (rows.oh + 1) / 2;
  tw_ = (rows.ow + 1) / 2;
  tiles_ = th_ * tw_;
  hp_ = 2 * th_ + 2;
  wp_ = 2 * tw_ + 2;
  plane_ = hp_ * wp_;
  // Images per block: the fewest that waste least in their register tiles (48 tiles, then 32 or 16, which
  // run slower: counted a little more), their transforms within 512 KB.
  images_ = 1;
  double best = 0;
  for (int64_t b = 1; b <= 8; ++b) {
    const int64_t t = b * tiles_, count = RoundUp16(t), rest = count % 48;
    if (b > 1 && 16 * cin * (count + 16) * 4 > (int64_t{512} << 10)) break;
    const double cost = static_cast<double>(count + (rest == 16 ? 12 : rest == 32 ? 6 : 0)) / static_cast<double>(t);
    if (b == 1 || cost < best - 1e-9) {
      best = cost;
      images_ = b;
    }
  }
  ld_ = RoundUp16(images_ * tiles_) + 16;
  auto odd_lines = [](int64_t floats) { return (floats / 16) % 2 ? floats : floats + 16; };
  vplane_ = odd_lines(cin_ * ld_);
  mplane_ = odd_lines(kBlock * ld_);
}

__attribute__((target("avx2,avx512f,avx512vl"))) void Winograd3x3::PackWeights(const float* w, int64_t so,
                                                                               int64_t si, bool flipped,
                                                                               float* packed) const {
  // Vectors over the 8 output channels of a block, in double: t = G g [4][3], then U = t G^T [4][4], each
  // rounded once to float.
  const int64_t nkb = cout_pad_ / kBlock;
  const __m512d half = _mm512_set1_pd(0.5);
  for (int64_t kb = 0; kb < nkb; ++kb) {
    const int64_t valid = std::min<int64_t>(kBlock, cout_ - kb * kBlock);
    const __mmask8 mask = static_cast<__mmask8>((1u << valid) - 1);
    const __m256i offsets =
        _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(so)));
    for (int64_t i = 0; i < cin_; ++i) {
      const float* base = w + kb * kBlock * so + i * si;
      __m512d g[9];
      for (int k = 0; k < 9; ++k) {
        const __m256 f = _mm256_mmask_i32gather_ps(_mm256_setzero_ps(), mask, offsets, base + (flipped ? 8 - k : k), 4);
        g[k] = _mm512_cvtps_pd(f);
      }
      __m512d t[4][3];
      for (int b = 0; b < 3; ++b) {
        t[0][b] = g[b];
        t[1][b] = _mm512_mul_pd(half, _mm512_add_pd(_mm512_add_pd(g[b], g[3 + b]), g[6 + b]));
        t[2][b] = _mm512_mul_pd(half, _mm512_add_pd(_mm512_sub_pd(g[b], g[3 + b]), g[6 + b]));
        t[3][b] = g[6 + b];
      }
      for (int a = 0; a < 4; ++a) {
        const __m512d u[4] = {t[a][0], _mm512_mul_pd(half, _mm512_add_pd(_mm512_add_pd(t[a][0], t[a][1]), t[a][2])),
                              _mm512_mul_pd(half, _mm512_add_pd(_mm512_sub_pd(t[a][0], t[a][1]), t[a][2])), t[a][2]};
        for (int n = 0; n < 4; ++n) {
          _mm256_storeu_ps(packed + (((4 * a + n) * nkb + kb) * cin_ + i) * kBlock, _mm512_cvtpd_ps(u[n]));
        }
      }
    }
  }
}

// The buffers are __restrict__: otherwise the compiler reloads the members after every store through them.
__attribute__((target("avx512f"))) void Winograd3x3::TransformInput(const float* x, int64_t images,
                                                                    float* __restrict__ xp,
                                                                    float* __restrict__ v) const {
  const PaddedRows& pr = rows_;
  const int64_t planes = images * cin_;
  std::fill(xp, xp + planes * plane_ + kSlack, 0.0f);
  // Rows and columns past the tiles' reach are left out (outputs computed only up to rows_.oh, rows_.ow).
  const int64_t rows = std::min(pr.h, hp_ - pr.pt), cols = std::min(pr.w, wp_ - pr.pl);
  for (int64_t p = 0; p < planes; ++p) {
    for (int64_t r = 0; r < rows; ++r) {
      const float* src = x + (p * pr.h + r) * pr.w;
      std::copy(src, src + cols, xp + p * plane_ + (r + pr.pt) * wp_ + pr.pl);
    }
  }
  // Each row of V in increasing tile order, so that a store's lanes past its tiles are written over by the
  // next store or land in the row's slack.
  for (int64_t c = 0; c < cin_; ++c) {
    for (int64_t b = 0; b < images; ++b) {
      const float* plane = xp + (b * cin_ + c) * plane_;
      float* vc = v + c * ld_ + b * tiles_;
      for (int64_t i = 0; i < th_; ++i) {
        for (int64_t j0 = 0; j0 < tw_; j0 += 16) {
          InputTiles(plane + 2 * i * wp_ + 2 * j0, wp_, vc + i * tw_ + j0, vplane_);
        }
      }
    }
  }
  // Zeros after the tiles up to the register tiles' end: finite values in lanes whose products are dropped.
  const int64_t used = images * tiles_, count = RoundUp16(used);
  for (int64_t xi = 0; xi < 16; ++xi) {
    for (int64_t c = 0; c < cin_; ++c) {
      float* row = v + xi * vplane_ + c * ld_;
      std::fill(row + used, row + count, 0.0f);
    }
  }
}

__attribute__((target("avx512f"))) void Winograd3x3::TransformOutput(const float* m, int64_t kb, int64_t images,
                                                                     const float* bias, float* __restrict__ y) const {
  const int64_t oh = rows_.oh, ow = rows_.ow, osize = oh * ow;
  for (int64_t r = 0; r < kBlock && kb * kBlock + r < cout_; ++r) {
    const int64_t o = kb * kBlock + r;
    for (int64_t b = 0; b < images; ++b) {
      float* yo = y + (b * cout_ + o) * osize;
      const float* mo = m + r * ld_ + b * tiles_;
      for (int64_t i = 0; i < th_; ++i) {
        for (int64_t j0 = 0; j0 < tw_; j0 += 16) {
          __m512 rows[2][2];
          OutputTiles(mo + i * tw_ + j0, mplane_, bias ? bias + o : nullptr, relu_, rows);
          const int64_t cols = std::min<int64_t>(ow - 2 * j0, 32);
          for (int a = 0; a < 2 && 2 * i + a < oh; ++a) {
            float* dst = yo + (2 * i + a) * ow + 2 * j0;
            // With one segment per row, rows are written in order, so whole vectors may spill into the rows
            // after, within the plane.
            if (tw_ <= 16 && (2 * i + a) * ow + 2 * j0 + (cols > 16 ? 32 : 16) <= osize) {
              _mm512_storeu_ps(dst, rows[a][0]);
              if (cols > 16) _mm512_storeu_ps(dst + 16, rows[a][1]);
            } else {
              _mm512_mask_storeu_ps(dst, FirstLanes(cols), rows[a][0]);
              if (cols > 16) _mm512_mask_storeu_ps(dst + 16, FirstLanes(cols - 16), rows[a][1]);
            }
          }
        }
      }
    }
  }
}

// Each tile is one 2x2 pooling window (tiles and windows both start at (0, 0), stride 2), so the tiles of a
// channel, 16 at a time in their flat order, give 16 pooled outputs of the flat pooled plane: the window's
// first maximum in the order (0, 0), (0, 1), (1, 0), (1, 1) from the lowest float, strict comparisons, as
// VPlanesMaxPool2x2Codes finds it in the stored activations, and its code. A store's lanes past the channel's
// tiles land in the next channels' planes of the same image, which are written after; only where they would
// reach past this image's last channel are the stores masked.
__attribute__((target("avx512f"))) void Winograd3x3::TransformOutputPooled(const float* m, int64_t kb, int64_t images,
                                                                           const float* bias, float* __restrict__ z,
                                                                           uint8_t* __restrict__ codes) const {
  const int64_t tiles = tiles_, cout = cout_, ld = ld_, mplane = mplane_;
  const bool relu = relu_;
  const __m512 lowest = _mm512_set1_ps(std::numeric_limits<float>::lowest());
  for (int64_t r = 0; r < kBlock && kb * kBlock + r < cout; ++r) {
    const int64_t o = kb * kBlock + r;
    for (int64_t b = 0; b < images; ++b) {
      const float* mo = m + r * ld + b * tiles;
      float* zo = z + (b * cout + o) * tiles;
      uint8_t* co = codes ? codes + (b * cout + o) * tiles : nullptr;
      for (int64_t t0 = 0; t0 < tiles; t0 += 16) {
        __m512 y[2][2];
        OutputValues(mo + t0, mplane, bias ? bias + o : nullptr, relu, y);
        const __m512 v[4] = {y[0][0], y[0][1], y[1][0], y[1][1]};
        __m512 best = lowest;
        __m512i slot = _mm512_setzero_si512();
        for (int k = 0; k < 4; ++k) {
          const __mmask16 gt = _mm512_cmp_ps_mask(v[k], best, _CMP_GT_OQ);
          best = _mm512_mask_mov_ps(best, gt, v[k]);
          slot = _mm512_mask_mov_epi32(slot, gt, _mm512_set1_epi32(k));
        }
        const __mmask16 lanes = t0 + 16 <= (cout - o) * tiles ? 0xffff : FirstLanes(tiles - t0);
        _mm512_mask_storeu_ps(zo + t0, lanes, best);
        if (co != nullptr) {
          const __mmask16 pos = _mm512_cmp_ps_mask(best, _mm512_setzero_ps(), _CMP_GT_OQ);
          slot = _mm512_mask_or_epi32(slot, pos, slot, _mm512_set1_epi32(kWindowCodePositive));
          _mm512_mask_cvtepi32_storeu_epi8(co + t0, lanes, slot);
        }
      }
    }
  }
}

Winograd3x3 Winograd3x3::InputGrad(const PaddedRows& rows, int64_t cin, int64_t cout) {
  Winograd3x3 k(rows, cout, cin);
  k.input_grad_ = true;
  return k;
}

void Winograd3x3::Run(const float* x, int64_t images, const float* packed, const float* bias, float* y,
                      float* work, uint8_t* codes) const {
  float* xp = work;  // the padded images, or (input_grad_) one plane of dX
  float* v = xp + images_ * cin_ * plane_ + kSlack;
  float* m = v + 16 * vplane_;
  const int64_t nkb = cout_pad_ / kBlock;
  const int64_t in_plane = input_grad_ ? rows_.oh * rows_.ow : rows_.h * rows_.w;
  const int64_t out_plane = input_grad_ ? rows_.h * rows_.w : rows_.oh * rows_.ow;
  for (int64_t b0 = 0; b0 < images; b0 += images_) {
    const int64_t nb = std::min(images_, images - b0), count = RoundUp16(nb * tiles_);
    if (input_grad_) {
      TransformOutputGrad(x + b0 * cin_ * in_plane, nb, v);
    } else {
      TransformInput(x + b0 * cin_ * in_plane, nb, xp, v);
    }
    for (int64_t kb = 0; kb < nkb; ++kb) {
      for (int64_t xi = 0; xi < 16; ++xi) {
        Products(packed + (xi * nkb + kb) * cin_ * kBlock, v + xi * vplane_, cin_, ld_, count, m + xi * mplane_);
      }
      if (input_grad_) {
        ScatterInputGrad(m, kb, nb, xp, y + b0 * cout_ * out_plane);
      } else if (pool_) {
        TransformOutputPooled(m, kb, nb, bias, y + b0 * cout_ * tiles_, codes ? codes + b0 * cout_ * tiles_ : nullptr);
      } else {
        TransformOutput(m, kb, nb, bias, y + b0 * cout_ * out_plane);
      }
    }
  }
}

}  // namespace cpu
}  // namespace ontrain
