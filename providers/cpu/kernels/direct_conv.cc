// The AVX-512 register tiles of direct_conv.h, and the loops around them.
#include "providers/cpu/kernels/direct_conv.h"

#include <immintrin.h>

#include <algorithm>

namespace ontrain {
namespace cpu {
namespace {

// yp[j, 0..47] (rows ld apart) = sum over input channels c and patch positions k of w[c, k, j] times
// xp[c * plane + shift[k] + 0..47], for the 8 output channels j of one block: 24 accumulators, 3 input
// vectors and a broadcast weight in registers; per (c, k) 3 loads and 8 broadcasts feed 24 FMAs.
__attribute__((target("avx512f"))) void Tile8x48(const float* xp, int64_t plane, const int64_t* shift, int64_t kk,
                                                 int64_t cin, const float* w, float* yp, int64_t ld) {
  __m512 acc[8][3];
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < 3; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < cin; ++c) {
    const float* xc = xp + c * plane;
    for (int64_t k = 0; k < kk; ++k, w += 8) {
      const float* s = xc + shift[k];
      const __m512 x0 = _mm512_loadu_ps(s), x1 = _mm512_loadu_ps(s + 16), x2 = _mm512_loadu_ps(s + 32);
      for (int j = 0; j < 8; ++j) {
        const __m512 b = _mm512_set1_ps(w[j]);
        acc[j][0] = _mm512_fmadd_ps(b, x0, acc[j][0]);
        acc[j][1] = _mm512_fmadd_ps(b, x1, acc[j][1]);
        acc[j][2] = _mm512_fmadd_ps(b, x2, acc[j][2]);
      }
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < 3; ++v) _mm512_storeu_ps(yp + j * ld + 16 * v, acc[j][v]);
  }
}

}  // namespace

bool DirectConv2D::Available() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

DirectConv2D::DirectConv2D(const PaddedRows& rows, int64_t cin, int64_t cout)
    : rows_(rows), cin_(cin), cout_(cout), cout_round_((cout + kChannelBlock - 1) / kChannelBlock * kChannelBlock),
      kk_(rows.kh * rows.kw), n_round_((rows.n + kPositions - 1) / kPositions * kPositions) {
  for (int64_t k = 0; k < kk_ && k < 64; ++k) shifts_[k] = rows_.shift(k);
}

void DirectConv2D::Run(const float* x, const float* packed, const float* bias, float* y, float* work) const {
  float* xp = work;
  float* yp = xp + cin_ * rows_.plane() + kSlack;
  rows_.Pad(x, cin_, xp);
  std::fill(xp + cin_ * rows_.plane(), yp, 0.0f);
  for (int64_t p = 0; p < n_round_; p += kPositions) {
    for (int64_t ob = 0; ob < cout_round_; ob += kChannelBlock) {
      const float* w = packed + ob * cin_ * kk_;
      Tile8x48(xp + p, rows_.plane(), shifts_, kk_, cin_, w, yp + ob * n_round_ + p, n_round_);
    }
  }
  rows_.Gather(yp, cout_, n_round_, y, bias);
}

}  // namespace cpu
}  // namespace ontrain
