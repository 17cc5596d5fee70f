// The AVX-512 register tiles of direct_conv.h, and the loops around them.
#include "providers/cpu/kernels/direct_conv.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "providers/cpu/kernels/common.h"

namespace ontrain {
namespace cpu {
namespace {

// yp[j, 0..16V-1] (rows ld apart) = sum over input channels c and patch positions k of w[c, k, j] times
// xp[c * plane + shift[k] + 0..16V-1], for the 8 output channels j of one block: 8V accumulators, V input
// vectors and a broadcast weight in registers; per (c, k) V loads and 8 broadcasts feed 8V FMAs. Full tiles
// take V = 3; the last tile of a row of tiles as few vectors as it needs (8x8 planes: 80 positions, not 96).
template <int V>
__attribute__((target("avx512f"))) void Tile8(const float* xp, int64_t plane, const int64_t* shift, int64_t kk,
                                              int64_t cin, const float* w, float* yp, int64_t ld) {
  __m512 acc[8][V];
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < V; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < cin; ++c) {
    const float* xc = xp + c * plane;
    for (int64_t k = 0; k < kk; ++k, w += 8) {
      const float* s = xc + shift[k];
      __m512 x[V];
      for (int v = 0; v < V; ++v) x[v] = _mm512_loadu_ps(s + 16 * v);
      for (int j = 0; j < 8; ++j) {
        const __m512 b = _mm512_set1_ps(w[j]);
        for (int v = 0; v < V; ++v) acc[j][v] = _mm512_fmadd_ps(b, x[v], acc[j][v]);
      }
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(yp + j * ld + 16 * v, acc[j][v]);
  }
}

// y[o, j] (o < nvo, rows osize apart; j < P) = the sum over input channels c and window positions (a, b)
// of w[c, a, b, o] * xr[c * plane + a * wp + S * j + b] (stride S), for 32 output channels and P positions
// of one output row: 2P accumulators, per (c, a, b) two weight vectors and P broadcasts; then bias[o] when
// given. The accumulators go through a stack block, transposed into the output rows.
template <int S, int P>
__attribute__((target("avx512f"), optimize("no-predictive-commoning"))) void RowTile(
    const float* xr, int64_t plane, int64_t wp, int64_t cin, const float* w, const float* bias, float* y,
    int64_t osize, int64_t nvo) {
  __m512 acc[P][2];
  for (int p = 0; p < P; ++p) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
  for (int64_t c = 0; c < cin; ++c) {
    for (int a = 0; a < 3; ++a) {
      const float* r = xr + c * plane + a * wp;
      for (int b = 0; b < 3; ++b, w += 32) {
        const __m512 w0 = _mm512_loadu_ps(w), w1 = _mm512_loadu_ps(w + 16);
        for (int p = 0; p < P; ++p) {
          const __m512 xb = _mm512_set1_ps(r[S * p + b]);
          acc[p][0] = _mm512_fmadd_ps(xb, w0, acc[p][0]);
          acc[p][1] = _mm512_fmadd_ps(xb, w1, acc[p][1]);
        }
      }
    }
  }
  alignas(64) float block[P][32];
  for (int p = 0; p < P; ++p) {
    _mm512_store_ps(block[p], acc[p][0]);
    _mm512_store_ps(block[p] + 16, acc[p][1]);
  }
  for (int64_t o = 0; o < nvo; ++o) {
    float* yo = y + o * osize;
    if (bias) {
      const float bv = bias[o];
      for (int p = 0; p < P; ++p) yo[p] = block[p][o] + bv;
    } else {
      for (int p = 0; p < P; ++p) yo[p] = block[p][o];
    }
  }
}

using RowTileFn = void (*)(const float*, int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t, int64_t);
template <int S, size_t... P>
constexpr std::array<RowTileFn, sizeof...(P) + 1> RowTiles(std::index_sequence<P...>) {
  return {nullptr, &RowTile<S, static_cast<int>(P) + 1>...};
}
constexpr std::array<RowTileFn, DirectConv2D::kRowPositions + 1> kRowTiles[2] = {
    RowTiles<1>(std::make_index_sequence<DirectConv2D::kRowPositions>()),
    RowTiles<2>(std::make_index_sequence<DirectConv2D::kRowPositions>())};

// out rows r = cb * 9 + a * 3 + b (CB input channels, the 9 taps; stride S), OV vectors of 16 output
// channels, ld_out apart: += (or = when `first`) the products of one image's padded planes xq (CB planes,
// `plane` apart) and its transposed dY (rows of ldt floats, output channels from column 0), over rows, then
// columns. GCC's predictive commoning would carry x[j + 1] and x[j + 2] into the next column's iteration
// through the stack (the accumulators leave it no registers): measured 115 against 173 GFLOP/s, hence its
// option off.
template <int S, int CB, int OV>
__attribute__((target("avx512f"), optimize("no-predictive-commoning"))) void WeightGradTile(
    const float* xq, int64_t plane, int64_t wp, int64_t oh, int64_t ow, const float* dyt, int64_t ldt, float* out,
    int64_t ld_out, bool first) {
  __m512 acc[CB * 9][OV];
  for (int r = 0; r < CB * 9; ++r) {
    for (int v = 0; v < OV; ++v) acc[r][v] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(out + r * ld_out + 16 * v);
  }
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
  for (int r = 0; r < CB * 9; ++r) {
    for (int v = 0; v < OV; ++v) _mm512_storeu_ps(out + r * ld_out + 16 * v, acc[r][v]);
  }
}

}  // namespace

bool DirectConv2D::Available() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

DirectConv2D::DirectConv2D(const PaddedRows& rows, int64_t cin, int64_t cout, int64_t stride)
    : rows_(rows), stride_(stride), cin_(cin), cout_(cout), cout_round_((cout + kChannelBlock - 1) / kChannelBlock * kChannelBlock),
      kk_(rows.kh * rows.kw), n_round_((rows.n + kVector - 1) / kVector * kVector) {
  for (int64_t k = 0; k < kk_ && k < 64; ++k) shifts_[k] = rows_.shift(k);
  // Row tiles where they were measured faster: 3x3, dilation 1, rows of at most 16, at least 32 output
  // channels of which at most a quarter are padding in the last block.
  row_cout_ = (cout + kRowBlock - 1) / kRowBlock * kRowBlock;
  row_tiles_ = rows.kh == 3 && rows.kw == 3 && rows.dh == 1 && rows.dw == 1 && rows.ow >= 1 && rows.ow <= 16 &&
               cout >= kRowBlock && 4 * row_cout_ <= 5 * cout && (stride == 1 || stride == 2);
}

void DirectConv2D::RunRows(const float* xp, const float* packed, const float* bias, float* y) const {
  const int64_t ow = rows_.ow, osize = rows_.oh * ow, plane = rows_.plane();
  // Rows of up to kRowPositions are one tile; wider ones tiles of 8 and a last one of the rest.
  const int64_t seg = ow <= kRowPositions ? ow : 8;
  for (int64_t ob = 0; ob < cout_; ob += kRowBlock) {
    const float* w = packed + ob * cin_ * kk_;
    const float* b = bias ? bias + ob : nullptr;
    const int64_t nvo = std::min(kRowBlock, cout_ - ob);
    for (int64_t i = 0; i < rows_.oh; ++i) {
      for (int64_t j = 0; j < ow; j += seg) {
        const int64_t p = std::min(seg, ow - j);
        kRowTiles[stride_ - 1][p](xp + stride_ * (i * rows_.wp + j), plane, rows_.wp, cin_, w, b,
                                  y + ob * osize + i * ow + j, osize, nvo);
      }
    }
  }
}

void DirectConv2D::Run(const float* x, const float* packed, const float* bias, float* y, float* work) const {
  float* xp = work;
  float* yp = xp + cin_ * rows_.plane() + kSlack;
  rows_.Pad(x, cin_, xp);
  if (row_tiles_) {
    RunRows(xp, packed, bias, y);
    return;
  }
  std::fill(xp + cin_ * rows_.plane(), yp, 0.0f);
  for (int64_t p = 0; p < n_round_; p += kPositions) {
    const int64_t vectors = std::min<int64_t>(3, (n_round_ - p) / 16);
    for (int64_t ob = 0; ob < cout_round_; ob += kChannelBlock) {
      const float* w = packed + ob * cin_ * kk_;
      float* y0 = yp + ob * n_round_ + p;
      switch (vectors) {
        case 3: Tile8<3>(xp + p, rows_.plane(), shifts_, kk_, cin_, w, y0, n_round_); break;
        case 2: Tile8<2>(xp + p, rows_.plane(), shifts_, kk_, cin_, w, y0, n_round_); break;
        default: Tile8<1>(xp + p, rows_.plane(), shifts_, kk_, cin_, w, y0, n_round_); break;
      }
    }
  }
  rows_.Gather(yp, cout_, n_round_, y, bias);
}

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

void DirectWeightGrad3x3::Run(const float* xp, const float* dyt, int64_t images, float* out) const {
  if (stride_ == 2) RunStride<2>(xp, dyt, images, out);
  else RunStride<1>(xp, dyt, images, out);
}

template <int S>
void DirectWeightGrad3x3::RunStride(const float* xp, const float* dyt, int64_t images, float* out) const {
  const int64_t plane = rows_.plane(), wp = rows_.wp, oh = rows_.oh, ow = rows_.ow, ld = cout_pad_;
  const int64_t image_x = image_size(), image_dy = transposed_size();
  const int64_t pairs = cout_pad_ / 32 * 32;  // output channels in tiles of 32; an odd 16 after them
  for (int64_t c = 0; c < cin_; ++c) {
    for (int64_t o = 0; o < pairs; o += 32) {
      for (int64_t i = 0; i < images; ++i) {
        WeightGradTile<S, 1, 2>(xp + i * image_x + c * plane, plane, wp, oh, ow, dyt + i * image_dy + o, ld,
                                out + c * 9 * ld + o, ld, i == 0);
      }
    }
  }
  if (pairs == cout_pad_) return;
  for (int64_t c = 0; c < cin_; c += 3) {
    const int64_t cb = std::min<int64_t>(3, cin_ - c);
    for (int64_t i = 0; i < images; ++i) {
      const float* xq = xp + i * image_x + c * plane;
      const float* g = dyt + i * image_dy + pairs;
      float* o = out + c * 9 * ld + pairs;
      if (cb == 3) WeightGradTile<S, 3, 1>(xq, plane, wp, oh, ow, g, ld, o, ld, i == 0);
      else if (cb == 2) WeightGradTile<S, 2, 1>(xq, plane, wp, oh, ow, g, ld, o, ld, i == 0);
      else WeightGradTile<S, 1, 1>(xq, plane, wp, oh, ow, g, ld, o, ld, i == 0);
    }
  }
}

}  // namespace cpu
}  // namespace ontrain
