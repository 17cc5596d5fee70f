// DirectConv2D (direct_conv.h): the AVX-512 register tiles of the forward convolution, and the loops around
// them. DirectWeightGrad3x3 is in direct_conv_dw.cc.
#include "providers/cpu/kernels/direct_conv.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "providers/cpu/kernels/common.h"

namespace ontrain {
namespace cpu {
namespace {

// The vector-row tiles: y[j, r * ow + 16 v + 0..15] (output channel j of the 8 of one block, rows osize
// apart; output row r of R, vector v of V) = the sum over input channels c and patch positions k of
// w[c, k, j] times xr[c * plane + r * wp + shift[k] + 16 v + 0..15], then bias[j] when given: Tile8's sums
// in Tile8's order, over whole output rows instead of padded-rows positions, stored straight into y (no
// gaps computed, no gather pass). The last vector of a row keeps the lanes of `tail`: its loads are
// masked, so a tile may read the image itself up to the end of its last row.
template <int R, int V>
__attribute__((target("avx512f"))) void VecRowTile(const float* xr, int64_t plane, int64_t wp, const int64_t* shift,
                                                   int64_t kk, int64_t cin, const float* w, const float* bias,
                                                   float* y, int64_t ow, int64_t osize, int64_t nvo, __mmask16 tail) {
  constexpr int Q = R * V;
  __m512 acc[8][Q];
  for (int j = 0; j < 8; ++j) {
    for (int q = 0; q < Q; ++q) acc[j][q] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < cin; ++c) {
    const float* xc = xr + c * plane;
    for (int64_t k = 0; k < kk; ++k, w += 8) {
      const float* s = xc + shift[k];
      __m512 x[Q];
      for (int r = 0; r < R; ++r) {
        for (int v = 0; v < V - 1; ++v) x[r * V + v] = _mm512_loadu_ps(s + r * wp + 16 * v);
        x[r * V + V - 1] = _mm512_maskz_loadu_ps(tail, s + r * wp + 16 * (V - 1));
      }
      for (int j = 0; j < 8; ++j) {
        const __m512 b = _mm512_set1_ps(w[j]);
        for (int q = 0; q < Q; ++q) acc[j][q] = _mm512_fmadd_ps(b, x[q], acc[j][q]);
      }
    }
  }
  // Unrolled, every index a constant: otherwise the accumulators live on the stack, stored every tap.
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    const __mmask16 last = j < nvo ? tail : 0, full = j < nvo ? 0xffff : 0;
    float* yj = y + j * osize;
    const __m512 bv = _mm512_set1_ps(bias != nullptr && j < nvo ? bias[j] : 0.0f);
#pragma GCC unroll 3
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 3
      for (int v = 0; v < V; ++v) {
        const __m512 a = bias ? _mm512_add_ps(acc[j][r * V + v], bv) : acc[j][r * V + v];
        _mm512_mask_storeu_ps(yj + r * ow + 16 * v, v < V - 1 ? full : last, a);
      }
    }
  }
}

using VecRowTileFn = void (*)(const float*, int64_t, int64_t, const int64_t*, int64_t, int64_t, const float*,
                              const float*, float*, int64_t, int64_t, int64_t, __mmask16);
// By [rows - 1][vectors - 1]: rows of one vector take up to 3 rows per tile, longer ones one.
constexpr VecRowTileFn kVecRowTiles[3][3] = {{&VecRowTile<1, 1>, &VecRowTile<1, 2>, &VecRowTile<1, 3>},
                                             {&VecRowTile<2, 1>, nullptr, nullptr},
                                             {&VecRowTile<3, 1>, nullptr, nullptr}};

// The positions p < P of a row tile whose tap b (stride S) reads a column of the padded row that is not
// padding: S * p + b at least L (the zero columns at the tile's left) and below S * (P - 1) + 3 - R (R zero
// columns at the right end of what the tile reads).
template <int S, int P, int L, int R>
constexpr int TapFirst(int b) {
  return L - b <= 0 ? 0 : (L - b + S - 1) / S;
}
template <int S, int P, int L, int R>
constexpr int TapEnd(int b) {
  const int last = S * (P - 1) + 3 - R - 1 - b;  // the last column this tap may read
  return last < 0 ? 0 : std::min(P, last / S + 1);
}

// Tap b of one window row: acc[p] += r[S * p + b] * (w0, w1) for the positions whose column is not padding.
// `r` is the row already offset by b, passed through an empty asm so that GCC cannot see that r[S * p] of
// tap b + 1 is r[S * p + 1] of tap b: keeping such broadcasts live across taps spilled the accumulators
// (P = 13: 172 against 205 GFLOP/s in a hot loop without the sharing).
template <int S, int P, int L, int R, int B>
__attribute__((target("avx512f"), always_inline)) inline void RowTap(const float* r, const float* w,
                                                                    __m512 (&acc)[P][2]) {
  constexpr int first = TapFirst<S, P, L, R>(B), end = TapEnd<S, P, L, R>(B);
  if constexpr (first < end) {
    asm("" : "+r"(r));
    const __m512 w0 = _mm512_loadu_ps(w + 32 * B), w1 = _mm512_loadu_ps(w + 32 * B + 16);
    for (int p = first; p < end; ++p) {
      const __m512 xb = _mm512_set1_ps(r[S * p]);
      acc[p][0] = _mm512_fmadd_ps(xb, w0, acc[p][0]);
      acc[p][1] = _mm512_fmadd_ps(xb, w1, acc[p][1]);
    }
  }
}

// y[o, j] (o < nvo, rows osize apart; j < P) = the sum over input channels c and window positions (a, b)
// of w[c, a, b, o] * xr[c * plane + a * wp + S * j + b] (stride S), for 32 output channels and P positions
// of one output row: 2P accumulators, per (c, a, b) two weight vectors and P broadcasts; then bias[o] when
// given. The accumulators go through a stack block, transposed into the output rows. Products with the
// padding are skipped: window rows a outside [a0, a1), and the L left and R right zero columns of what the
// tile reads (RowTap). Skipping a product with zero leaves the sum's bits as they were, except for the sign
// of an all-zero sum and a weight that is infinite or NaN (whose product with a padding zero is NaN).
template <int S, int P, int L, int R>
__attribute__((target("avx512f"), optimize("no-predictive-commoning"))) void RowTile(
    const float* xr, int64_t plane, int64_t wp, int64_t cin, const float* w, const float* bias, float* y,
    int64_t osize, int64_t nvo, int a0, int a1) {
  __m512 acc[P][2];
  for (int p = 0; p < P; ++p) acc[p][0] = acc[p][1] = _mm512_setzero_ps();
  for (int64_t c = 0; c < cin; ++c, w += 9 * 32) {
    for (int a = a0; a < a1; ++a) {
      const float* r = xr + c * plane + a * wp;
      const float* wa = w + a * 3 * 32;
      RowTap<S, P, L, R, 0>(r, wa, acc);
      RowTap<S, P, L, R, 1>(r + 1, wa, acc);
      RowTap<S, P, L, R, 2>(r + 2, wa, acc);
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

// The row tiles by stride, zero columns skipped at the left and right (up to kMaxTrim each) and positions.
constexpr int kMaxTrim = 2;
using RowTileFn = void (*)(const float*, int64_t, int64_t, int64_t, const float*, const float*, float*, int64_t,
                           int64_t, int, int);
using RowTileRow = std::array<RowTileFn, DirectConv2D::kRowPositions + 1>;
template <int S, int L, int R, size_t... P>
constexpr RowTileRow RowTilesLR(std::index_sequence<P...>) {
  return {nullptr, &RowTile<S, static_cast<int>(P) + 1, L, R>...};
}
template <int S, int L, size_t... R>
constexpr std::array<RowTileRow, kMaxTrim + 1> RowTilesL(std::index_sequence<R...>) {
  return {RowTilesLR<S, L, static_cast<int>(R)>(std::make_index_sequence<DirectConv2D::kRowPositions>())...};
}
template <int S, size_t... L>
constexpr std::array<std::array<RowTileRow, kMaxTrim + 1>, kMaxTrim + 1> RowTilesS(std::index_sequence<L...>) {
  return {RowTilesL<S, static_cast<int>(L)>(std::make_index_sequence<kMaxTrim + 1>())...};
}
constexpr std::array<std::array<RowTileRow, kMaxTrim + 1>, kMaxTrim + 1> kRowTiles[2] = {
    RowTilesS<1>(std::make_index_sequence<kMaxTrim + 1>()), RowTilesS<2>(std::make_index_sequence<kMaxTrim + 1>())};

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
  // The row tiles skip every padding column where the pads left and right are at most kMaxTrim (and every
  // padding row whatever the pads): they then read the image itself, without the padded copy.
  unpadded_ = rows.pl <= kMaxTrim && rows.wp - rows.pl - rows.w <= kMaxTrim;
  // Vector rows elsewhere (stride 1), unless whole vectors per output row compute a fifth more positions
  // than the padded rows' tiles: rows of 26 compute 832 positions against 736 (and save the gather pass);
  // rows of 8 would compute 128 against 80.
  const int64_t row_vectors = (rows.ow + kVector - 1) / kVector;
  vec_rows_ = !row_tiles_ && stride == 1 && 5 * rows.oh * row_vectors * kVector <= 6 * n_round_;
}

void DirectConv2D::RunRows(const float* x, int64_t plane, int64_t ld, int64_t top, int64_t left,
                           const float* packed, const float* bias, float* y) const {
  const int64_t ow = rows_.ow, osize = rows_.oh * ow, s = stride_;
  // Rows of up to kRowPositions are one tile; wider ones tiles of 8 and a last one of the rest.
  const int64_t seg = ow <= kRowPositions ? ow : 8;
  for (int64_t ob = 0; ob < cout_; ob += kRowBlock) {
    const float* w = packed + ob * cin_ * kk_;
    const float* b = bias ? bias + ob : nullptr;
    const int64_t nvo = std::min(kRowBlock, cout_ - ob);
    for (int64_t i = 0; i < rows_.oh; ++i) {
      // Window rows that read padded rows inside the image.
      const int a0 = static_cast<int>(std::clamp<int64_t>(rows_.pt - s * i, 0, 3));
      const int a1 = static_cast<int>(std::clamp<int64_t>(rows_.pt + rows_.h - s * i, a0, 3));
      for (int64_t j = 0; j < ow; j += seg) {
        const int64_t p = std::min(seg, ow - j);
        // Zero columns at either end of the padded columns [s * j, s * (j + p - 1) + 3) the tile reads.
        const int64_t l = std::clamp<int64_t>(rows_.pl - s * j, 0, kMaxTrim);
        const int64_t r = std::clamp<int64_t>(s * (j + p - 1) + 3 - (rows_.pl + rows_.w), 0, kMaxTrim);
        // The tile's first padded row and column, s i and s j, in x's coordinates (which may lie before the
        // image: the tile reads none of the padding there).
        const float* xr = x + (s * i - top) * ld + (s * j - left);
        kRowTiles[s - 1][l][r][p](xr, plane, ld, cin_, w, b, y + ob * osize + i * ow + j, osize, nvo, a0, a1);
      }
    }
  }
}

void DirectConv2D::RunVectorRows(const float* xp, const float* packed, const float* bias, float* y) const {
  const int64_t ow = rows_.ow, oh = rows_.oh, osize = oh * ow, wp = rows_.wp, plane = rows_.plane();
  // Column chunks of at most 3 vectors; rows of one vector go 3 rows to a tile.
  const int64_t row_vectors = (ow + kVector - 1) / kVector;
  const int64_t rows_per_tile = row_vectors == 1 ? 3 : 1;
  for (int64_t ob = 0; ob < cout_; ob += kChannelBlock) {
    const float* w = packed + ob * cin_ * kk_;
    const float* b = bias ? bias + ob : nullptr;
    const int64_t nvo = std::min(kChannelBlock, cout_ - ob);
    for (int64_t i = 0; i < oh; i += rows_per_tile) {
      const int64_t r = std::min(rows_per_tile, oh - i);
      for (int64_t j = 0; j < ow; j += 3 * kVector) {
        const int64_t p = std::min(3 * kVector, ow - j), v = (p + kVector - 1) / kVector;
        const __mmask16 tail = static_cast<__mmask16>((1u << (p - (v - 1) * kVector)) - 1u);
        kVecRowTiles[r - 1][v - 1](xp + i * wp + j, plane, wp, shifts_, kk_, cin_, w, b, y + ob * osize + i * ow + j,
                                   ow, osize, nvo, tail);
      }
    }
  }
}

void DirectConv2D::Run(const float* x, const float* packed, const float* bias, float* y, float* work) const {
  const bool no_pads = rows_.hp == rows_.h && rows_.wp == rows_.w;
  if (row_tiles_ && unpadded_) {  // the tiles read no padding: straight from the image
    RunRows(x, rows_.h * rows_.w, rows_.w, rows_.pt, rows_.pl, packed, bias, y);
    return;
  }
  if (vec_rows_ && no_pads) {  // the image is its padded copy
    RunVectorRows(x, packed, bias, y);
    return;
  }
  float* xp = work;
  float* yp = xp + cin_ * rows_.plane() + kSlack;
  rows_.Pad(x, cin_, xp);
  if (row_tiles_) {
    RunRows(xp, rows_.plane(), rows_.wp, 0, 0, packed, bias, y);
    return;
  }
  if (vec_rows_) {
    RunVectorRows(xp, packed, bias, y);
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

}  // namespace cpu
}  // namespace ontrain
