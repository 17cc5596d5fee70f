// The AVX-512 register tiles of direct_conv.h, and the loops around them.
#include "providers/cpu/kernels/direct_conv.h"

#include <immintrin.h>

#include <algorithm>

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

}  // namespace

bool DirectConv2D::Available() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

DirectConv2D::DirectConv2D(const PaddedRows& rows, int64_t cin, int64_t cout)
    : rows_(rows), cin_(cin), cout_(cout), cout_round_((cout + kChannelBlock - 1) / kChannelBlock * kChannelBlock),
      kk_(rows.kh * rows.kw), n_round_((rows.n + kVector - 1) / kVector * kVector) {
  for (int64_t k = 0; k < kk_ && k < 64; ++k) shifts_[k] = rows_.shift(k);
}

void DirectConv2D::Run(const float* x, const float* packed, const float* bias, float* y, float* work) const {
  float* xp = work;
  float* yp = xp + cin_ * rows_.plane() + kSlack;
  rows_.Pad(x, cin_, xp);
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
