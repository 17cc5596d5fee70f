// GRU (and GRUTraining) and GRUGrad of the recurrent passes (see recurrent_math.h for the backend, the call and the shared
// helpers), in the CPU kernel's arithmetic (providers/cpu/kernels/gru.cc), for recurrent.cu and the host tests.
#pragma once

#include "providers/cuda/kernels/recurrent_math.h"

namespace ontrain {
namespace cuda {
namespace rec {

// ---- GRU ----------------------------------------------------------------------------------------------

// z and r of unit k (clipped pre-activations into zrh), and r H for the h gate's product.
template <typename T>
struct GruZr {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* xw;  // [S, B, 3H]
  const T* hr;  // [B, 3H]: H R'
  const T* h;
  T* zrh;  // [S, D, B, 3H]
  T* rh;   // [B, H]
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 3 * H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) {  // a finished sequence: its row of r H_prev still enters the next product (whose row is unused)
      rh[i] = T(0);
      return;
    }
    const int64_t t = c.TimeOf(d, s, len);
    const T* xr = xw + (t * c.B + bb) * G;
    const T* pr = hr + bb * G;
    const T* wb = c.b ? c.b + d * 6 * H : nullptr;
    T* out = zrh + ((t * c.D + d) * c.B + bb) * G;
    for (int64_t q = k; q < 2 * H; q += H) {
      double z = double(xr[q]) + pr[q];
      if (wb) z += double(wb[q]) + wb[3 * H + q];
      out[q] = static_cast<T>(c.Clip(z));
    }
    rh[i] = static_cast<T>(RecActValue(c.act[d][0], double(out[H + k])) * double(h[i]));
  }
};

// h~ and the new state of unit k.
template <typename T>
struct GruH {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* xw;
  const T* hr;  // [B, 3H]: H R', its h third replaced by (r H) Rh' without linear_before_reset
  T* zrh;
  T* h;
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 3 * H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) return;
    const int64_t t = c.TimeOf(d, s, len);
    const T* xr = xw + (t * c.B + bb) * G;
    const T* pr = hr + bb * G;
    const T* wb = c.b ? c.b + d * 6 * H : nullptr;
    T* out = zrh + ((t * c.D + d) * c.B + bb) * G;
    const RecAct &f = c.act[d][0], &g = c.act[d][1];
    const double gr = RecActValue(f, double(out[H + k]));
    double zh = double(xr[2 * H + k]);
    if (wb) zh += double(wb[2 * H + k]);
    if (c.linear_before_reset) {
      zh += gr * (double(pr[2 * H + k]) + (wb ? double(wb[5 * H + k]) : 0.0));
    } else {
      zh += double(pr[2 * H + k]) + (wb ? double(wb[5 * H + k]) : 0.0);
    }
    out[2 * H + k] = static_cast<T>(c.Clip(zh));
    const double gz = RecActValue(f, double(out[k])), hh = RecActValue(g, double(out[2 * H + k]));
    h[i] = static_cast<T>((1 - gz) * hh + gz * double(h[i]));
    if (c.y) c.y[((t * c.D + d) * c.B + bb) * H + k] = h[i];
  }
};

template <class Be, typename T>
bool GruForward(Be& be, const RecurrentCall<T>& c) {
  const int64_t S = c.S, B = c.B, I = c.I, H = c.H, D = c.D, G = 3 * H;
  T* xw = c.work;
  T* hr = xw + S * B * G;
  T* rh = hr + B * G;
  T* h = rh + B * H;
  T* zrh = c.gates ? c.gates : h + B * H;
  if (c.y && !be.ForEach(S * D * B * H, Fill<T>{c.y, T(0)})) return false;
  if (!be.ForEach(S * D * B * G, Fill<T>{zrh, T(0)})) return false;
  for (int64_t d = 0; d < D; ++d) {
    const T* rd = c.r + d * G * H;
    if (!be.Gemm(false, true, S * B, G, I, T(1), c.x, I, c.w + d * G * I, I, T(0), xw, G)) return false;
    if (!be.ForEach(B * H, Copy<T>{h, c.h0 ? c.h0 + d * B * H : nullptr})) return false;
    for (int64_t s = 0; s < S; ++s) {
      if (!be.Gemm(false, true, B, G, H, T(1), h, H, rd, H, T(0), hr, G)) return false;
      if (!be.ForEach(B * H, GruZr<T>{c, d, s, xw, hr, h, zrh, rh})) return false;
      if (!c.linear_before_reset &&
          !be.Gemm(false, true, B, H, H, T(1), rh, H, rd + 2 * H * H, H, T(0), hr + 2 * H, G)) {
        return false;
      }
      if (!be.ForEach(B * H, GruH<T>{c, d, s, xw, hr, zrh, h})) return false;
    }
    if (c.yh && !be.ForEach(B * H, Copy<T>{c.yh + d * B * H, h})) return false;
  }
  return true;
}

// u: the h gate's recurrent term for the rows that run (0 for the others): H_prev Rh' + Rbh
// (linear_before_reset; `u` holds H_prev Rh' on entry) or r H_prev.
template <typename T>
struct GruU {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* hps;
  T* u;
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 3 * H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) {
      u[i] = T(0);
      return;
    }
    const int64_t t = c.TimeOf(d, s, len);
    const T* z = c.gates_in + ((t * c.D + d) * c.B + bb) * G;
    if (c.linear_before_reset) {
      if (c.b) u[i] = static_cast<T>(u[i] + c.b[d * 6 * H + 5 * H + k]);
    } else {
      u[i] = static_cast<T>(RecActValue(c.act[d][0], double(z[H + k])) * double(hps[i]));
    }
  }
};

// dh += dY_t; dz and dh~ of unit k; dh becomes its direct path dh z. Rows that do not run keep dpre 0.
template <typename T>
struct GruGradA {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* hps;
  T* dh;
  T* dpre;  // [B, 3H]
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 3 * H, bb = i / H, k = i % H, len = c.Len(bb);
    T* dz = dpre + bb * G;
    if (s >= len) {
      dz[k] = dz[H + k] = dz[2 * H + k] = T(0);
      return;
    }
    const int64_t t = c.TimeOf(d, s, len);
    const T* z = c.gates_in + ((t * c.D + d) * c.B + bb) * G;
    if (c.dy) dh[i] = static_cast<T>(dh[i] + c.dy[((t * c.D + d) * c.B + bb) * H + k]);
    const RecAct &f = c.act[d][0], &g = c.act[d][1];
    const double zz = z[k], zh = z[2 * H + k];
    const double gz = RecActValue(f, zz), hh = RecActValue(g, zh), hpk = double(hps[i]), dH = dh[i];
    dz[k] = static_cast<T>(c.Clipped(zz) ? 0.0 : dH * (hpk - hh) * RecActSlope(f, zz));
    dz[2 * H + k] = static_cast<T>(c.Clipped(zh) ? 0.0 : dH * (1 - gz) * RecActSlope(g, zh));
    dz[H + k] = T(0);
    dh[i] = static_cast<T>(dH * gz);
  }
};

// dgh: dh~ of every row (rows that do not run: 0), the input of d(r H) = dh~ Rh.
template <typename T>
struct GruDgh {
  int64_t H;
  const T* dpre;
  T* dgh;
  ONT_HD void operator()(int64_t i) const {
    const int64_t bb = i / H, k = i % H;
    dgh[i] = dpre[bb * 3 * H + 2 * H + k];
  }
};

// dr of unit k and its share of dH_prev (r's path); the row's gate gradients into dG.
template <typename T>
struct GruGradB {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* hps;
  const T* u;
  const T* back;  // without linear_before_reset: d(r H) = dh~ Rh
  T* dh;
  T* dpre;
  T* dgh;  // linear_before_reset: becomes d(u) = dh~ r
  T* dg;   // [S, B, 3H]
  ONT_HD void operator()(int64_t i) const {
    const int64_t H = c.H, G = 3 * H, bb = i / H, k = i % H, len = c.Len(bb);
    if (s >= len) return;
    const int64_t t = c.TimeOf(d, s, len);
    const T* z = c.gates_in + ((t * c.D + d) * c.B + bb) * G;
    T* dz = dpre + bb * G;
    const RecAct& f = c.act[d][0];
    const double zr = z[H + k], gr = RecActValue(f, zr), dzh = dz[2 * H + k];
    double dgr;
    if (c.linear_before_reset) {
      dgr = dzh * double(u[i]);
      dgh[i] = static_cast<T>(dzh * gr);
    } else {
      const double drh = back[i];
      dgr = drh * double(hps[i]);
      dh[i] = static_cast<T>(dh[i] + static_cast<T>(drh * gr));
    }
    dz[H + k] = static_cast<T>(c.Clipped(zr) ? 0.0 : dgr * RecActSlope(f, zr));
    T* row = dg + (t * c.B + bb) * G;
    row[k] = dz[k];
    row[H + k] = dz[H + k];
    row[2 * H + k] = dz[2 * H + k];
  }
};

// dB's Rbh part, summed over the rows that ran, in row order (one thread per unit).
template <typename T>
struct GruRbh {
  RecurrentCall<T> c;
  int64_t d, s;
  const T* dpre;
  const T* dgh;
  ONT_HD void operator()(int64_t q) const {
    const int64_t H = c.H, G = 3 * H;
    T* dbd = c.db + d * 6 * H;
    for (int64_t bb = 0; bb < c.B; ++bb) {
      if (s >= c.Len(bb)) continue;
      dbd[5 * H + q] = static_cast<T>(dbd[5 * H + q] + (c.linear_before_reset ? dgh[bb * H + q] : dpre[bb * G + 2 * H + q]));
    }
  }
};

template <class Be, typename T>
bool GruBackward(Be& be, const RecurrentCall<T>& c) {
  const int64_t S = c.S, B = c.B, H = c.H, D = c.D, G = 3 * H;
  T* dg = c.work;
  T* dh = dg + S * B * G;
  T* dpre = dh + B * H;
  T* u = dpre + B * G;
  T* back = u + B * H;
  T* dgh = back + B * H;
  T* hps = dgh + B * H;
  if (!ZeroGradients(be, c, G)) return false;
  for (int64_t d = 0; d < D; ++d) {
    const T* rd = c.r + d * G * H;
    if (!be.ForEach(S * B * G, Fill<T>{dg, T(0)})) return false;
    if (!be.ForEach(B * H, Copy<T>{dh, c.dyh ? c.dyh + d * B * H : nullptr})) return false;
    for (int64_t s = S - 1; s >= 0; --s) {
      if (!be.ForEach(B * H, Fill<T>{dgh, T(0)})) return false;
      if (!be.ForEach(B * H, GatherPrev<T>{c, c.hall, c.h0, d, s, hps})) return false;
      if (c.linear_before_reset && !be.Gemm(false, true, B, H, H, T(1), hps, H, rd + 2 * H * H, H, T(0), u, H)) return false;
      if (!be.ForEach(B * H, GruU<T>{c, d, s, hps, u})) return false;
      if (!be.ForEach(B * H, GruGradA<T>{c, d, s, hps, dh, dpre})) return false;
      if (!c.linear_before_reset) {
        if (!be.ForEach(B * H, GruDgh<T>{H, dpre, dgh})) return false;
        if (!be.Gemm(false, false, B, H, H, T(1), dgh, H, rd + 2 * H * H, H, T(0), back, H)) return false;
      }
      if (!be.ForEach(B * H, GruGradB<T>{c, d, s, hps, u, back, dh, dpre, dgh, dg})) return false;
      if (c.linear_before_reset) {
        if (!be.Gemm(false, false, B, H, H, T(1), dgh, H, rd + 2 * H * H, H, T(0), back, H)) return false;
        if (!be.ForEach(B * H, CopyRunning<T>{c, s, dh, back, true})) return false;
      }
      if (c.db && !be.ForEach(H, GruRbh<T>{c, d, s, dpre, dgh})) return false;
      if (c.dr) {
        T* drd = c.dr + d * G * H;
        if (!be.Gemm(true, false, 2 * H, H, B, T(1), dpre, G, hps, H, T(1), drd, H)) return false;
        if (c.linear_before_reset) {
          if (!be.Gemm(true, false, H, H, B, T(1), dgh, H, hps, H, T(1), drd + 2 * H * H, H)) return false;
        } else {
          if (!be.Gemm(true, false, H, H, B, T(1), dpre + 2 * H, G, u, H, T(1), drd + 2 * H * H, H)) return false;
        }
      }
      if (!be.Gemm(false, false, B, H, 2 * H, T(1), dpre, G, rd, H, T(0), back, H)) return false;
      if (!be.ForEach(B * H, CopyRunning<T>{c, s, dh, back, true})) return false;
    }
    if (c.dh0 && !be.ForEach(B * H, Copy<T>{c.dh0 + d * B * H, dh})) return false;
    if (!InputAndBiasGradients(be, c, dg, G, d, 2 * H)) return false;
  }
  return true;
}

}  // namespace rec
}  // namespace cuda
}  // namespace ontrain
