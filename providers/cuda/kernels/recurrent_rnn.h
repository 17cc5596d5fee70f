// RNN and RNNGrad of the recurrent passes (see recurrent_math.h for the backend, the call and the shared
// helpers), in the CPU kernel's arithmetic (providers/cpu/kernels/rnn.cc), for recurrent.cu and the host tests.
#pragma once

#include "providers/cuda/kernels/recurrent_math.h"

namespace ontrain {
namespace cuda {
namespace rec {

// ---- RNN ----------------------------------------------------------------------------------------------

// H' = f(clip(Xt Wi' + Wbi + Rbi + H Ri')) for the rows that run at step s.
template <typename T>
struct RnnStep {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* xw;  // [S, B, H]
  const T* hr;  // [B, H]
  T* h;         // [B, H]
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) return;
    const int64_t t = c.TimeOf(d, s, len);
    double z = double(xw[(t * c.B + bb) * H + k]);
    if (c.b) z += double(c.b[d * 2 * H + k]) + c.b[d * 2 * H + H + k];
    z += double(hr[i]);
    const T pre = static_cast<T>(c.Clip(z));
    h[i] = static_cast<T>(RecActValue(c.act[d][0], double(pre)));
    if (c.y) c.y[((t * c.D + d) * c.B + bb) * H + k] = h[i];
  }
};

template <class Be, typename T>
bool RnnForward(Be& be, const RecurrentCall<T>& c) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.D;
  T* xw = c.work;
  T* h = xw + S * B * H;
  T* hr = h + B * H;
  if (c.y && !be.ForEach(S * D * B * H, Fill<T>{c.y, T(0)})) return false;
  for (int64_t d = 0; d < D; ++d) {
    const T* rd = c.r + d * H * H;
    if (!be.Gemm(false, true, S * B, H, I, T(1), c.x, I, c.w + d * H * I, I, T(0), xw, H)) return false;
    if (!be.ForEach(B * H, Copy<T>{h, c.h0 ? c.h0 + d * B * H : nullptr})) return false;
    for (int64_t s = 0; s < S; ++s) {
      if (!be.Gemm(false, true, B, H, H, T(1), h, H, rd, H, T(0), hr, H)) return false;
      if (!be.ForEach(B * H, RnnStep<T>{c, d, s, xw, hr, h})) return false;
    }
    if (c.yh && !be.ForEach(B * H, Copy<T>{c.yh + d * B * H, h})) return false;
  }
  return true;
}

// The step's pre-activation gradients of the rows that run (0 for the others): dh += dY_t, then
// dpre = dh f'(pre), recomputing pre from X W', the biases and H_prev R' (in `pre`).
template <typename T>
struct RnnGradStep {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* xw;
  const T* pre;  // [B, H]: H_prev R'
  T* dh;
  T* dpre;
  T* dg;  // [S, B, H]
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) {
      dpre[i] = T(0);
      return;
    }
    const int64_t t = c.TimeOf(d, s, len);
    double z = double(xw[(t * c.B + bb) * H + k]);
    if (c.b) z += double(c.b[d * 2 * H + k]) + c.b[d * 2 * H + H + k];
    z += double(pre[i]);
    const double zc = static_cast<T>(c.Clip(z));
    if (c.dy) dh[i] = static_cast<T>(dh[i] + c.dy[((t * c.D + d) * c.B + bb) * H + k]);
    const T g = static_cast<T>(c.Clipped(zc) ? 0.0 : double(dh[i]) * RecActSlope(c.act[d][0], zc));
    dpre[i] = g;
    dg[(t * c.B + bb) * H + k] = g;
  }
};

template <class Be, typename T>
bool RnnBackward(Be& be, const RecurrentCall<T>& c) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.D;
  T* xw = c.work;
  T* dg = xw + S * B * H;
  T* dh = dg + S * B * H;
  T* dpre = dh + B * H;
  T* back = dpre + B * H;
  T* hps = back + B * H;
  T* pre = hps + B * H;
  if (!ZeroGradients(be, c, H)) return false;
  for (int64_t d = 0; d < D; ++d) {
    const T* rd = c.r + d * H * H;
    if (!be.Gemm(false, true, S * B, H, I, T(1), c.x, I, c.w + d * H * I, I, T(0), xw, H)) return false;
    if (!be.ForEach(S * B * H, Fill<T>{dg, T(0)})) return false;
    if (!be.ForEach(B * H, Copy<T>{dh, c.dyh ? c.dyh + d * B * H : nullptr})) return false;
    for (int64_t s = S - 1; s >= 0; --s) {
      if (!be.ForEach(B * H, GatherPrev<T>{c, c.hall, c.h0, d, s, hps})) return false;
      if (!be.Gemm(false, true, B, H, H, T(1), hps, H, rd, H, T(0), pre, H)) return false;
      if (!be.ForEach(B * H, RnnGradStep<T>{c, d, s, xw, pre, dh, dpre, dg})) return false;
      if (c.dr && !be.Gemm(true, false, H, H, B, T(1), dpre, H, hps, H, T(1), c.dr + d * H * H, H)) return false;
      if (!be.Gemm(false, false, B, H, H, T(1), dpre, H, rd, H, T(0), back, H)) return false;
      if (!be.ForEach(B * H, CopyRunning<T>{c, s, dh, back, false})) return false;
    }
    if (c.dh0 && !be.ForEach(B * H, Copy<T>{c.dh0 + d * B * H, dh})) return false;
    if (!InputAndBiasGradients(be, c, dg, H, d, H)) return false;
  }
  return true;
}

}  // namespace rec
}  // namespace cuda
}  // namespace ontrain
