// The recurrent layers' passes (RNN, GRU, LSTM forward; RNNGrad, GRUGrad, LSTMGrad), written once over a
// backend that supplies two primitives, and compiled twice (the passes are in recurrent_{rnn,gru,lstm}.h,
// RunRecurrentPass in recurrent_passes.h; this file has what they share): recurrent.cu instantiates them with cuBLAS
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

}  // namespace rec
}  // namespace cuda
}  // namespace ontrain
