// LSTM (and LSTMTraining) and LSTMGrad of the recurrent passes (see recurrent_math.h for the backend, the call and the shared
// helpers), in the CPU kernel's arithmetic (providers/cpu/kernels/lstm.cc), for recurrent.cu and the host tests.
#pragma once

#include "providers/cuda/kernels/recurrent_math.h"

namespace ontrain {
namespace cuda {
namespace rec {

// ---- LSTM ---------------------------------------------------------------------------------------------

// Unit k of a running row: the four clipped pre-activations (i, o, f, c~), the new cell and hidden state.
template <typename T>
struct LstmStep {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* xw;   // [S, B, 4H]
  const T* pre;  // [B, 4H]: H R'
  T* h;
  T* cs;
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 4 * H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) return;
    const int64_t t = c.TimeOf(d, s, len);
    const T* xr = xw + (t * c.B + bb) * G;
    const T* pr = pre + bb * G;
    const T* wb = c.b ? c.b + d * 8 * H : nullptr;
    double zi = double(xr[k]) + pr[k], zo = double(xr[H + k]) + pr[H + k], zf = double(xr[2 * H + k]) + pr[2 * H + k],
           zc = double(xr[3 * H + k]) + pr[3 * H + k];
    if (wb) {
      zi += double(wb[k]) + wb[4 * H + k];
      zo += double(wb[H + k]) + wb[5 * H + k];
      zf += double(wb[2 * H + k]) + wb[6 * H + k];
      zc += double(wb[3 * H + k]) + wb[7 * H + k];
    }
    const RecAct &f = c.act[d][0], &g = c.act[d][1], &ha = c.act[d][2];
    const double cprev = cs[i];
    zi = c.Clip(zi);
    zf = c.Clip(zf);
    zc = c.Clip(zc);
    const double gi = RecActValue(f, zi), gf = c.input_forget ? 1 - gi : RecActValue(f, zf), gc = RecActValue(g, zc);
    const double cn = gf * cprev + gi * gc;
    zo = c.Clip(zo);
    const double go = RecActValue(f, zo);
    const double hn = go * RecActValue(ha, cn);
    cs[i] = static_cast<T>(cn);
    h[i] = static_cast<T>(hn);
    const int64_t at = ((t * c.D + d) * c.B + bb) * H + k;
    if (c.gates) {
      T* gr = c.gates + ((t * c.D + d) * c.B + bb) * G;
      gr[k] = static_cast<T>(zi);
      gr[H + k] = static_cast<T>(zo);
      gr[2 * H + k] = static_cast<T>(zf);
      gr[3 * H + k] = static_cast<T>(zc);
    }
    if (c.y) c.y[at] = h[i];
    if (c.call) c.call[at] = cs[i];
  }
};

template <class Be, typename T>
bool LstmForward(Be& be, const RecurrentCall<T>& c) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.D, G = 4 * H;
  T* xw = c.work;
  T* pre = xw + S * B * G;
  T* h = pre + B * G;
  T* cs = h + B * H;
  if (c.y && !be.ForEach(S * D * B * H, Fill<T>{c.y, T(0)})) return false;
  if (c.call && !be.ForEach(S * D * B * H, Fill<T>{c.call, T(0)})) return false;
  if (c.gates && !be.ForEach(S * D * B * G, Fill<T>{c.gates, T(0)})) return false;
  for (int64_t d = 0; d < D; ++d) {
    if (!be.Gemm(false, true, S * B, G, I, T(1), c.x, I, c.w + d * G * I, I, T(0), xw, G)) return false;
    if (!be.ForEach(B * H, Copy<T>{h, c.h0 ? c.h0 + d * B * H : nullptr})) return false;
    if (!be.ForEach(B * H, Copy<T>{cs, c.c0 ? c.c0 + d * B * H : nullptr})) return false;
    for (int64_t s = 0; s < S; ++s) {
      if (!be.Gemm(false, true, B, G, H, T(1), h, H, c.r + d * G * H, H, T(0), pre, G)) return false;
      if (!be.ForEach(B * H, LstmStep<T>{c, d, s, xw, pre, h, cs})) return false;
    }
    if (c.yh && !be.ForEach(B * H, Copy<T>{c.yh + d * B * H, h})) return false;
    if (c.yc && !be.ForEach(B * H, Copy<T>{c.yc + d * B * H, cs})) return false;
  }
  return true;
}

// Unit k of a running row at step s: dh += dY_t, then the four pre-activation gradients and the cell
// gradient carried to the previous step (rows that do not run: dpre 0, dc kept).
template <typename T>
struct LstmGradStep {
  RecurrentCall<T> c;
  int64_t d, s;
  T* dh;
  T* dc;
  T* dpre;  // [B, 4H]
  T* dg;    // [S, B, 4H]
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 4 * H, bb = i / H, k = i % H, len = c.Len(bb);
    T* dz = dpre + bb * G;
    if (s >= len) {
      dz[k] = dz[H + k] = dz[2 * H + k] = dz[3 * H + k] = T(0);
      return;
    }
    const int64_t t = c.TimeOf(d, s, len);
    const T* z = c.gates_in + ((t * c.D + d) * c.B + bb) * G;
    const T* cn = c.call_in + ((t * c.D + d) * c.B + bb) * H;
    const T* cprev = c.Prev(c.call_in, c.c0, d, s, bb, len);
    if (c.dy) dh[i] = static_cast<T>(dh[i] + c.dy[((t * c.D + d) * c.B + bb) * H + k]);
    const RecAct &f = c.act[d][0], &g = c.act[d][1], &ha = c.act[d][2];
    const double zi = z[k], zo = z[H + k], zf = z[2 * H + k], zc = z[3 * H + k];
    const double cc = cn[k], cp = cprev ? double(cprev[k]) : 0.0;
    const double gi = RecActValue(f, zi), gf = c.input_forget ? 1 - gi : RecActValue(f, zf), gc = RecActValue(g, zc),
                 go = RecActValue(f, zo), hc = RecActValue(ha, cc);
    const double dfi = RecActSlope(f, zi), dfo = RecActSlope(f, zo), dgz = RecActSlope(g, zc), dhc = RecActSlope(ha, cc);
    const double dff = c.input_forget ? 0.0 : RecActSlope(f, zf);
    const double dho = double(dh[i]);
    const double dzo = c.Clipped(zo) ? 0.0 : dho * hc * dfo;
    const double dcell = double(dc[i]) + dho * go * dhc;
    double dgi = dcell * gc;
    const double dgf = dcell * cp, dgc = dcell * gi, dcp = dcell * gf;
    double dzf = 0;
    if (c.input_forget) {
      dgi -= dgf;
    } else {
      dzf = c.Clipped(zf) ? 0.0 : dgf * dff;
    }
    const double dzi = c.Clipped(zi) ? 0.0 : dgi * dfi;
    const double dzc = c.Clipped(zc) ? 0.0 : dgc * dgz;
    dz[k] = static_cast<T>(dzi);
    dz[H + k] = static_cast<T>(dzo);
    dz[2 * H + k] = static_cast<T>(dzf);
    dz[3 * H + k] = static_cast<T>(dzc);
    dc[i] = static_cast<T>(dcp);
    T* row = dg + (t * c.B + bb) * G;
    row[k] = dz[k];
    row[H + k] = dz[H + k];
    row[2 * H + k] = dz[2 * H + k];
    row[3 * H + k] = dz[3 * H + k];
  }
};

template <class Be, typename T>
bool LstmBackward(Be& be, const RecurrentCall<T>& c) {
  const int64_t S = c.S, B = c.B, H = c.H, D = c.D, G = 4 * H;
  T* dg = c.work;
  T* dpre = dg + S * B * G;
  T* dh = dpre + B * G;
  T* dc = dh + B * H;
  T* back = dc + B * H;
  T* hps = back + B * H;
  if (!ZeroGradients(be, c, G)) return false;
  for (int64_t d = 0; d < D; ++d) {
    const T* rd = c.r + d * G * H;
    if (!be.ForEach(S * B * G, Fill<T>{dg, T(0)})) return false;
    if (!be.ForEach(B * H, Copy<T>{dh, c.dyh ? c.dyh + d * B * H : nullptr})) return false;
    if (!be.ForEach(B * H, Copy<T>{dc, c.dyc ? c.dyc + d * B * H : nullptr})) return false;
    for (int64_t s = S - 1; s >= 0; --s) {
      if (!be.ForEach(B * H, LstmGradStep<T>{c, d, s, dh, dc, dpre, dg})) return false;
      if (c.dr) {
        if (!be.ForEach(B * H, GatherPrev<T>{c, c.hall, c.h0, d, s, hps})) return false;
        if (!be.Gemm(true, false, G, H, B, T(1), dpre, G, hps, H, T(1), c.dr + d * G * H, H)) return false;
      }
      if (!be.Gemm(false, false, B, H, G, T(1), dpre, G, rd, H, T(0), back, H)) return false;
      if (!be.ForEach(B * H, CopyRunning<T>{c, s, dh, back, false})) return false;
    }
    if (c.dh0 && !be.ForEach(B * H, Copy<T>{c.dh0 + d * B * H, dh})) return false;
    if (c.dc0 && !be.ForEach(B * H, Copy<T>{c.dc0 + d * B * H, dc})) return false;
    if (!InputAndBiasGradients(be, c, dg, G, d, G)) return false;
  }
  return true;
}

}  // namespace rec
}  // namespace cuda
}  // namespace ontrain
