// The recurrent layers' passes (RNN, GRU, LSTM forward; RNNGrad, GRUGrad, LSTMGrad), written once over a
// backend that supplies two primitives, and compiled twice: recurrent.cu instantiates them with cuBLAS
// GEMMs and one-thread-per-element launches, tests/parity/device_math_test.cc with host loops, where they
// are checked against the CPU kernels (providers/cpu/kernels/{rnn,gru,lstm}.cc) on any machine.
//
// The arithmetic follows the CPU kernels' general (double) path term by term: X W' is one GEMM for all
// steps, H R' one GEMM per step, every gate value and derivative in double from the stored (clipped)
// pre-activation, rows whose sequence is shorter than the step left alone, the reverse direction running
// each row from its own last step. Each step's per-element work is a functor over (batch row, hidden unit);
// anything summed over batch rows is a GEMM or a loop per column in row order, so results never depend on
// timing. Layout 0 only, no LSTM peepholes (the kernel list leaves those to the CPU).
//
// A backend `Be` provides:
//   bool Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
//             const T* b, int64_t ldb, T beta, T* c, int64_t ldc);   // row-major C = alpha op(A) op(B) + beta C
//   template <class F> bool ForEach(int64_t n, const F& f);         // f(i) for every i in [0, n)
// Each returns false on failure (the backend keeps the reason).
#pragma once

#include <math.h>

#include <cstdint>

#include "providers/cuda/kernels/device_math.h"

namespace ontrain {
namespace cuda {

// One of ONNX's RNN activations; `kind` numbers as cpu::recurrent::Activation::Kind.
struct RecAct {
  int kind = 0;
  double alpha = 0, beta = 0;
};
enum RecActKind { kRecSigmoid, kRecTanh, kRecRelu, kRecHardSigmoid, kRecLeakyRelu, kRecThresholdedRelu, kRecScaledTanh,
                  kRecAffine, kRecElu, kRecSoftsign, kRecSoftplus };

ONT_HD inline double RecActValue(const RecAct& a, double x) {
  switch (a.kind) {
    case kRecSigmoid: return 1.0 / (1.0 + exp(-x));
    case kRecTanh: return tanh(x);
    case kRecRelu: return x > 0 ? x : 0;
    case kRecHardSigmoid: return fmin(1.0, fmax(0.0, a.alpha * x + a.beta));
    case kRecLeakyRelu: return x >= 0 ? x : a.alpha * x;
    case kRecThresholdedRelu: return x > a.alpha ? x : 0;
    case kRecScaledTanh: return a.alpha * tanh(a.beta * x);
    case kRecAffine: return a.alpha * x + a.beta;
    case kRecElu: return x >= 0 ? x : a.alpha * (exp(x) - 1);
    case kRecSoftsign: return x / (1 + fabs(x));
    case kRecSoftplus: return log1p(exp(-fabs(x))) + fmax(x, 0.0);
  }
  return 0;
}

ONT_HD inline double RecActSlope(const RecAct& a, double x) {
  switch (a.kind) {
    case kRecSigmoid: {
      const double s = 1.0 / (1.0 + exp(-x));
      return s * (1 - s);
    }
    case kRecTanh: {
      const double t = tanh(x);
      return 1 - t * t;
    }
    case kRecRelu: return x > 0 ? 1 : 0;
    case kRecHardSigmoid: {
      const double v = a.alpha * x + a.beta;
      return v > 0 && v < 1 ? a.alpha : 0;
    }
    case kRecLeakyRelu: return x >= 0 ? 1 : a.alpha;
    case kRecThresholdedRelu: return x > a.alpha ? 1 : 0;
    case kRecScaledTanh: {
      const double t = tanh(a.beta * x);
      return a.alpha * a.beta * (1 - t * t);
    }
    case kRecAffine: return a.alpha;
    case kRecElu: return x >= 0 ? 1 : a.alpha * exp(x);
    case kRecSoftsign: {
      const double d = 1 + fabs(x);
      return 1 / (d * d);
    }
    case kRecSoftplus: return 1.0 / (1.0 + exp(-x));
  }
  return 0;
}

// Everything one call reads and writes (pointers of one memory space; unused ones null). Shapes in layout 0:
// X [S, B, I], W [D, G H, I], R [D, G H, H], B [D, 2 G H], states [D, B, H], Y/HAll/CAll [S, D, B, H],
// gates (GRU zrh, LSTM iofc) [S, D, B, G H].
template <typename T>
struct RecurrentCall {
  int64_t S = 0, B = 0, I = 0, H = 0, D = 1;
  bool reverse_only = false, input_forget = false, linear_before_reset = false;
  double clip = 0;  // 0: none
  RecAct act[2][3];
  const int64_t* lens = nullptr;  // [B], or null for every row running S steps
  const T *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr;
  // forward outputs
  T *y = nullptr, *yh = nullptr, *yc = nullptr, *call = nullptr, *gates = nullptr;
  // gradient inputs: the forward pass's outputs and the outputs' gradients
  const T *hall = nullptr, *call_in = nullptr, *gates_in = nullptr, *dy = nullptr, *dyh = nullptr, *dyc = nullptr;
  // gradient outputs
  T *dx = nullptr, *dw = nullptr, *dr = nullptr, *db = nullptr, *dh0 = nullptr, *dc0 = nullptr;
  T* work = nullptr;  // RecurrentWorkElements(...) elements

  ONT_HD int64_t Len(int64_t bb) const { return lens ? lens[bb] : S; }
  ONT_HD bool Reverse(int64_t d) const { return reverse_only || d == 1; }
  // The time index row bb processes at step s (s < Len(bb)).
  ONT_HD int64_t TimeOf(int64_t d, int64_t s, int64_t len) const { return Reverse(d) ? len - 1 - s : s; }
  // Row bb's state before step s, from `all` [S, D, B, H] or `init` [D, B, H] (null: no state, zeros).
  ONT_HD const T* Prev(const T* all, const T* init, int64_t d, int64_t s, int64_t bb, int64_t len) const {
    if (s == 0) return init ? init + (d * B + bb) * H : nullptr;
    const int64_t tp = Reverse(d) ? len - s : s - 1;
    return all + ((tp * D + d) * B + bb) * H;
  }
  ONT_HD double Clip(double v) const { return clip > 0 ? fmin(clip, fmax(-clip, v)) : v; }
  ONT_HD bool Clipped(double z) const { return clip > 0 && (z >= clip || z <= -clip); }
};

enum class RecurrentPass { kRnn, kRnnGrad, kGru, kGruGrad, kLstm, kLstmGrad };

// Workspace elements (of T) a pass needs.
inline int64_t RecurrentWorkElements(RecurrentPass p, int64_t S, int64_t B, int64_t H, int64_t D) {
  switch (p) {
    case RecurrentPass::kRnn: return S * B * H + 2 * B * H;
    case RecurrentPass::kRnnGrad: return 2 * S * B * H + 5 * B * H;
    case RecurrentPass::kGru: return S * B * 3 * H + B * 3 * H + 2 * B * H + S * D * B * 3 * H;
    case RecurrentPass::kGruGrad: return S * B * 3 * H + B * 3 * H + 5 * B * H;
    case RecurrentPass::kLstm: return S * B * 4 * H + B * 4 * H + 2 * B * H;
    case RecurrentPass::kLstmGrad: return S * B * 4 * H + B * 4 * H + 4 * B * H;
  }
  return 0;
}

namespace rec {

template <typename T>
struct Fill {
  T* p;
  T v;
  ONT_HD void operator()(int64_t i) const { p[i] = v; }
};
template <typename T>
struct Copy {
  T* dst;
  const T* src;  // null: zeros
  ONT_HD void operator()(int64_t i) const { dst[i] = src ? src[i] : T(0); }
};
// The step's previous states of every row (zeros for rows that do not run or start from no state).
template <typename T>
struct GatherPrev {
  RecurrentCall<T> c;
  const T* all;
  const T* init;
  int64_t d, s;
  T* out;
  ONT_HD void operator()(int64_t i) const {
    const int64_t bb = i / c.H, k = i % c.H, len = c.Len(bb);
    const T* p = s < len ? c.Prev(all, init, d, s, bb, len) : nullptr;
    out[i] = p ? p[k] : T(0);
  }
};
// dst[i] = src[i] for the elements of rows that ran at step s (dst [B, H]); add: dst += src.
template <typename T>
struct CopyRunning {
  RecurrentCall<T> c;
  int64_t s;
  T* dst;
  const T* src;
  bool add;
  ONT_HD void operator()(int64_t i) const {
    const int64_t bb = i / c.H;
    if (s >= c.Len(bb)) return;
    dst[i] = add ? static_cast<T>(dst[i] + src[i]) : src[i];
  }
};
// db[q] = the sum over `rows` of dg [rows, G] column q, in double in row order, and db[G + q] too for
// q < r_columns (the recurrent half of the bias).
template <typename T>
struct ColumnSums {
  const T* dg;
  int64_t rows, G, r_columns;
  T* db;
  ONT_HD void operator()(int64_t q) const {
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row) sum += dg[row * G + q];
    db[q] = static_cast<T>(sum);
    if (q < r_columns) db[G + q] = static_cast<T>(sum);
  }
};

// dX += dG W_d, dW_d += dG' X, and the bias gradient (the end of every gradient pass, per direction).
template <class Be, typename T>
bool InputAndBiasGradients(Be& be, const RecurrentCall<T>& c, const T* dg, int64_t G, int64_t d, int64_t r_columns) {
  const int64_t rows = c.S * c.B, I = c.I;
  if (c.dx && !be.Gemm(false, false, rows, I, G, T(1), dg, G, c.w + d * G * I, I, T(1), c.dx, I)) return false;
  if (c.dw && !be.Gemm(true, false, G, I, rows, T(1), dg, G, c.x, I, T(1), c.dw + d * G * I, I)) return false;
  if (c.db && !be.ForEach(G, ColumnSums<T>{dg, rows, G, r_columns, c.db + d * 2 * G})) return false;
  return true;
}

template <class Be, typename T>
bool ZeroGradients(Be& be, const RecurrentCall<T>& c, int64_t G) {
  const int64_t D = c.D, H = c.H;
  if (c.dx && !be.ForEach(c.S * c.B * c.I, Fill<T>{c.dx, T(0)})) return false;
  if (c.dw && !be.ForEach(D * G * c.I, Fill<T>{c.dw, T(0)})) return false;
  if (c.dr && !be.ForEach(D * G * H, Fill<T>{c.dr, T(0)})) return false;
  if (c.db && !be.ForEach(D * 2 * G, Fill<T>{c.db, T(0)})) return false;
  return true;
}

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
    if (s >= len) return;
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

template <class Be, typename T>
bool RunRecurrentPass(Be& be, RecurrentPass p, const RecurrentCall<T>& c) {
  switch (p) {
    case RecurrentPass::kRnn: return rec::RnnForward(be, c);
    case RecurrentPass::kRnnGrad: return rec::RnnBackward(be, c);
    case RecurrentPass::kGru: return rec::GruForward(be, c);
    case RecurrentPass::kGruGrad: return rec::GruBackward(be, c);
    case RecurrentPass::kLstm: return rec::LstmForward(be, c);
    case RecurrentPass::kLstmGrad: return rec::LstmBackward(be, c);
  }
  return false;
}

}  // namespace cuda
}  // namespace ontrain
