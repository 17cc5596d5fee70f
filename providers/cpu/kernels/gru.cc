// GRU (ONNX, opsets 7 on, layouts 0 and 1), com.microsoft GRUTraining (ONNX Runtime's training form, layout
// 0, plus the gate pre-activations) and com.microsoft GRUGrad.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/recurrent.h"
#include "providers/cpu/kernels/vmath.h"

namespace ontrain {
namespace cpu {
namespace {

using namespace recurrent;  // NOLINT: the shared pieces of the recurrent kernels

// Gates z, r, h. Per step: z = f(Xt Wz' + H Rz' + Wbz + Rbz), r = f(Xt Wr' + H Rr' + Wbr + Rbr),
// h~ = g(Xt Wh' + (r H) Rh' + Rbh + Wbh), or with linear_before_reset g(Xt Wh' + r (H Rh' + Rbh) + Wbh);
// H' = (1 - z) h~ + z H. GRUTraining's third output keeps the clipped pre-activations [S, D, B, 3H].
// With float32 data and the default activations (sigmoid, tanh), both passes take a row's gate values from
// vmath's vectorized sigmoid and tanh (GatesOf), and the gradient takes the derivatives from those values.

// A step's gate values on the fast path: acts [B, 3H] = f(z), f(r), g(h~) of the rows that ran, from their
// clipped pre-activations (rows `pre_row(bb)`, or null for a row that did not run); `count` gates per row
// from gate `first` on. Rows not given are left as they were.
template <typename PreRow>
void GatesOf(int64_t B, int64_t H, int64_t first, int64_t count, const PreRow& pre_row, float* acts) {
  for (int64_t bb = 0; bb < B; ++bb) {
    const float* z = pre_row(bb);
    if (z == nullptr) continue;
    float* row = acts + bb * 3 * H;
    for (int64_t q = first; q < first + count; ++q) {
      if (q < 2) VSigmoid(z + q * H, row + q * H, H);
      else VTanh(z + q * H, row + q * H, H);
    }
  }
}

template <typename T>
void GruDirection(const RecurrentAttrs& a, const RecurrentDims& n, int64_t d, const T* x, const T* w, const T* r, const T* b,
                  const int64_t* lens, const T* h0, T* y, T* yh, T* zrh, T* xw, T* hr, T* rh, T* h, T* acts) {
  const int64_t H = n.hidden, G = 3 * H, B = n.batch, S = n.seq;
  const bool reverse = a.reverse_only || d == 1;
  const Activation &f = a.act[d][0], &g = a.act[d][1];
  const T* rd = r + d * G * H;
  Gemm<T>(false, true, S * B, G, n.input, T(1), x, w + d * G * n.input, T(0), xw, nullptr);
  for (int64_t j = 0; j < B * H; ++j) h[j] = h0 ? h0[d * B * H + j] : T(0);
  const T* wb = b ? b + d * 6 * H : nullptr;
  auto clip = [&](double v) { return a.clip > 0 ? std::min(a.clip, std::max(-a.clip, v)) : v; };
  const bool fast = std::is_same_v<T, float> && f.kind == Activation::kSigmoid && g.kind == Activation::kTanh;
  // f(z) and f(r) (gate q < 2) or g(h~) (q = 2) of row bb at element k whose pre-activation is v
  auto act = [&](int64_t bb, int64_t q, int64_t k, double v) -> double {
    return fast ? double(acts[bb * G + q * H + k]) : (q < 2 ? f(v) : g(v));
  };
  for (int64_t s = 0; s < S; ++s) {
    Gemm<T>(false, true, B, G, H, T(1), h, rd, T(0), hr, nullptr);  // H R' (all three gates)
    // z, r and, without linear_before_reset, r H for the h gate's product
    for (int64_t bb = 0; bb < B; ++bb) {
      const int64_t len = lens ? lens[bb] : S;
      if (s >= len) continue;
      const int64_t t = reverse ? len - 1 - s : s;
      const T* xr = xw + (t * B + bb) * G;
      const T* pr = hr + bb * G;
      T* out = zrh + ((t * n.dirs + d) * B + bb) * G;
      for (int64_t k = 0; k < 2 * H; ++k) {
        double z = double(xr[k]) + pr[k];
        if (wb) z += double(wb[k]) + wb[3 * H + k];
        out[k] = static_cast<T>(clip(z));
      }
      if constexpr (std::is_same_v<T, float>) {
        if (fast) GatesOf(1, H, 0, 2, [&](int64_t) { return out; }, acts + bb * G);
      }
      for (int64_t k = 0; k < H; ++k) rh[bb * H + k] = static_cast<T>(act(bb, 1, k, out[H + k]) * double(h[bb * H + k]));
    }
    // without linear_before_reset the h gate's recurrent term is (r H) Rh', written over H Rh' in hr
    if (!a.linear_before_reset) GemmLd<T>(false, true, B, H, H, T(1), rh, H, rd + 2 * H * H, H, T(0), hr + 2 * H, G);
    for (int64_t bb = 0; bb < B; ++bb) {
      const int64_t len = lens ? lens[bb] : S;
      if (s >= len) continue;
      const int64_t t = reverse ? len - 1 - s : s;
      const T* xr = xw + (t * B + bb) * G;
      const T* pr = hr + bb * G;
      T* out = zrh + ((t * n.dirs + d) * B + bb) * G;
      T* hrow = h + bb * H;
      for (int64_t k = 0; k < H; ++k) {
        const double gr = act(bb, 1, k, out[H + k]);
        double zh = double(xr[2 * H + k]);
        if (wb) zh += double(wb[2 * H + k]);
        if (a.linear_before_reset) {
          zh += gr * (double(pr[2 * H + k]) + (wb ? double(wb[5 * H + k]) : 0.0));
        } else {
          zh += double(pr[2 * H + k]) + (wb ? double(wb[5 * H + k]) : 0.0);
        }
        out[2 * H + k] = static_cast<T>(clip(zh));
      }
      if constexpr (std::is_same_v<T, float>) {
        if (fast) GatesOf(1, H, 2, 1, [&](int64_t) { return out; }, acts + bb * G);
      }
      for (int64_t k = 0; k < H; ++k) {
        const double gz = act(bb, 0, k, out[k]), hh = act(bb, 2, k, out[2 * H + k]);
        hrow[k] = static_cast<T>((1 - gz) * hh + gz * double(hrow[k]));
      }
      if (y) std::copy_n(hrow, H, y + ((t * n.dirs + d) * B + bb) * H);
    }
  }
  if (yh) std::copy_n(h, B * H, yh + d * B * H);
}

// GRU and GRUTraining (layout 1 on transposed copies, as LSTM).
class GruKernel : public OpKernel {
 public:
  GruKernel(const NodeInfo& info, bool training) : node_(*info.node), training_(training) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_, 2, {"Sigmoid", "Tanh"}));
      if (training_ && attrs_.layout != 0) return InvalidArgument("GRUTraining takes layout 0 only");
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r, 3));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    ONT_RETURN_IF_ERROR(CheckRecurrentInputs(ctx, attrs_, n_, 6 * H, {5}));
    const Shape state = attrs_.layout ? Shape{B, D, H} : Shape{D, B, H};
    // scratch: lens [B]; xw [S, B, 3H], hr [B, 3H], rh [B, H], h [B, H], zrh [S, D, B, 3H] when not an output,
    // gate values [B, 3H]; layout 1: x, y, h0, yh transposed
    int64_t elems = S * B * 3 * H + B * 3 * H + 2 * B * H + S * D * B * 3 * H + B * 3 * H;
    if (attrs_.layout) elems += S * B * n_.input + S * D * B * H + 2 * D * B * H;
    ctx.RequestScratch(static_cast<size_t>(B) * sizeof(int64_t) + static_cast<size_t>(elems) * DTypeSize(x->dtype()));
    const Shape y = attrs_.layout ? Shape{B, S, D, H} : Shape{S, D, B, H};
    if (ctx.output_requested(0) || training_) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), y));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), state));
    if (training_ && ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, x->dtype(), {S, D, B, 3 * H}));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, I = n_.input;
      int64_t* lens = nullptr;
      T* xw = reinterpret_cast<T*>(static_cast<int64_t*>(ctx.scratch()) + B);
      T* hr = xw + S * B * 3 * H;
      T* rh = hr + B * 3 * H;
      T* h = rh + B * H;
      T* zrh_scratch = h + B * H;
      T* acts = zrh_scratch + S * D * B * 3 * H;
      T* extra = acts + B * 3 * H;
      const Tensor* sl = Optional(ctx, 4);
      const Tensor* b = Optional(ctx, 3);
      const Tensor* h0 = Optional(ctx, 5);
      T* yt = ctx.output(0) ? ctx.output(0)->data<T>() : nullptr;
      T* yht = ctx.output(1) ? ctx.output(1)->data<T>() : nullptr;
      T* zrh = training_ && ctx.output(2) ? ctx.output(2)->data<T>() : zrh_scratch;
      const T* px = x.data<T>();
      const T* ph0 = h0 ? h0->data<T>() : nullptr;
      T *y = yt, *yh = yht;
      if (attrs_.layout) {
        T* xs = extra;
        T* ys = xs + S * B * I;
        T* st = ys + S * D * B * H;
        SwapOuter(px, B, S, I, xs);
        if (ph0) SwapOuter(ph0, B, D, H, st), ph0 = st;
        px = xs;
        y = yt ? ys : nullptr;
        yh = yht ? st + D * B * H : nullptr;
      }
      if (sl) {
        lens = static_cast<int64_t*>(ctx.scratch());
        for (int64_t bb = 0; bb < B; ++bb) lens[bb] = SeqLen(sl, bb, S);
      }
      if (y) std::fill(y, y + S * D * B * H, T(0));
      std::fill(zrh, zrh + S * D * B * 3 * H, T(0));
      for (int64_t d = 0; d < D; ++d) {
        GruDirection<T>(attrs_, n_, d, px, w.data<T>(), r.data<T>(), b ? b->data<T>() : nullptr, lens, ph0, y, yh, zrh,
                        xw, hr, rh, h, acts);
      }
      if (attrs_.layout) {
        if (yt) YToBatchFirst(y, S, D, B, H, yt);
        if (yht) SwapOuter(yh, D, B, H, yht);
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  bool training_;
  bool parsed_ = false;
  RecurrentAttrs attrs_;
  RecurrentDims n_;
};

// GRUGrad's state for one direction: GradDirection's, the step's operands and scratch buffers (Compute's
// layout), and the gates' values and derivatives. The step's four parts below read and write it in the
// order of the original single pass, so the results are that pass's.
template <typename T>
struct GruGradDir : GradDirection<T> {
  const T* rd;   // this direction's R [3H, H]
  const T* rbh;  // its Rbh [H], or null
  const T* zrh;  // GRUTraining's clipped pre-activations [S, D, B, 3H]
  T *dg, *dh, *dpre, *u, *back, *dgh, *hps, *acts;
  T* db;  // dB [D, 6H], or null
  T* dr;  // dR [D, 3H, H], or null

  // Row bb's pre-activations at step s, and its previous hidden state (null: none).
  const T* Pre(int64_t s, int64_t bb) const {
    return zrh + ((this->Time(s, bb) * this->D + this->d) * this->B + bb) * 3 * this->H;
  }
  const T* Prev(int64_t s, int64_t bb) const { return this->hprev(s, bb, this->Len(bb)); }
  // Gate q's value (f(z), f(r), g(h~)) of row bb at element k, whose pre-activation is v, and its derivative
  // there: from the step's vectorized values on the fast path.
  double Act(int64_t bb, int64_t q, int64_t k, double v) const {
    const int64_t H = this->H;
    return this->fast ? double(acts[bb * 3 * H + q * H + k]) : (q < 2 ? this->f(v) : this->g(v));
  }
  double Slope(int64_t bb, int64_t q, int64_t k, double v) const {
    const int64_t H = this->H;
    if (!this->fast) return q < 2 ? this->f.Derivative(v) : this->g.Derivative(v);
    const double av = acts[bb * 3 * H + q * H + k];
    return q < 2 ? av * (1 - av) : 1 - av * av;
  }
};

// 1. The step's gate values (fast path), previous hidden states hps (zero rows for rows that do not run or
// start from no state), and u: the h gate's recurrent term, H_prev Rh' + Rbh (linear_before_reset) or r H_prev
// (the product's input).
template <typename T>
void GruGradStepInputs(const GruGradDir<T>& st, int64_t s) {
  const int64_t B = st.B, H = st.H, G = 3 * H;
  std::fill(st.dpre, st.dpre + B * G, T(0));
  std::fill(st.dgh, st.dgh + B * H, T(0));  // rows that do not run stay 0 (they meet zero rows in dR's GEMMs)
  if constexpr (std::is_same_v<T, float>) {
    if (st.fast) {
      GatesOf(B, H, 0, 3, [&](int64_t bb) -> const float* { return s < st.Len(bb) ? st.Pre(s, bb) : nullptr; }, st.acts);
    }
  }
  for (int64_t bb = 0; bb < B; ++bb) {
    const T* hp = s < st.Len(bb) ? st.Prev(s, bb) : nullptr;
    if (hp) std::copy_n(hp, H, st.hps + bb * H);
    else std::fill(st.hps + bb * H, st.hps + (bb + 1) * H, T(0));
  }
  if (st.a.linear_before_reset) {  // u = H_prev Rh' (one GEMM for the step) + Rbh
    Gemm<T>(false, true, B, H, H, T(1), st.hps, st.rd + 2 * H * H, T(0), st.u, nullptr);
  }
  for (int64_t bb = 0; bb < B; ++bb) {
    T* ub = st.u + bb * H;
    if (s >= st.Len(bb)) {
      std::fill(ub, ub + H, T(0));
      continue;
    }
    const T* z = st.Pre(s, bb);
    if (st.a.linear_before_reset) {
      if (st.rbh) for (int64_t k = 0; k < H; ++k) ub[k] += st.rbh[k];
    } else {
      for (int64_t k = 0; k < H; ++k) ub[k] = static_cast<T>(st.Act(bb, 1, k, z[H + k]) * double(st.hps[bb * H + k]));
    }
  }
}

// 2. The update and candidate gates' pre-activation gradients, and dH's direct path.
template <typename T>
void GruGradUpdateAndCandidate(const GruGradDir<T>& st, int64_t s) {
  const int64_t H = st.H, G = 3 * H;
  for (int64_t bb = 0; bb < st.B; ++bb) {
    if (s >= st.Len(bb)) continue;
    const int64_t t = st.Time(s, bb);
    const T* hp = st.Prev(s, bb);
    const T* z = st.Pre(s, bb);
    T* dhr = st.dh + bb * H;
    if (st.dyall) {
      const T* gy = st.dyall->template data<T>() + ((t * st.D + st.d) * st.B + bb) * H;
      for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
    }
    T* dz = st.dpre + bb * G;
    for (int64_t k = 0; k < H; ++k) {
      const double zz = z[k], zh = z[2 * H + k];
      const double gz = st.Act(bb, 0, k, zz), hh = st.Act(bb, 2, k, zh), hpk = hp ? double(hp[k]) : 0.0, dH = dhr[k];
      dz[k] = static_cast<T>(st.Clipped(zz) ? 0.0 : dH * (hpk - hh) * st.Slope(bb, 0, k, zz));
      dz[2 * H + k] = static_cast<T>(st.Clipped(zh) ? 0.0 : dH * (1 - gz) * st.Slope(bb, 2, k, zh));
      dhr[k] = static_cast<T>(dH * gz);  // the direct path; the gates' paths are added below
    }
  }
}

// 3. The reset gate and the h gate's recurrent path: linear_before_reset: dr = dzh u, d(u) = dzh r; else
// d(rH) = dzh Rh. The step's gate gradients go to dG.
template <typename T>
void GruGradReset(const GruGradDir<T>& st, int64_t s) {
  const int64_t B = st.B, H = st.H, G = 3 * H;
  const bool lbr = st.a.linear_before_reset;
  if (!lbr) {
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t k = 0; k < H; ++k) st.dgh[bb * H + k] = st.dpre[bb * G + 2 * H + k];
    Gemm<T>(false, false, B, H, H, T(1), st.dgh, st.rd + 2 * H * H, T(0), st.back, nullptr);  // d(r H)
  }
  for (int64_t bb = 0; bb < B; ++bb) {
    if (s >= st.Len(bb)) continue;
    const T* hp = st.Prev(s, bb);
    const T* z = st.Pre(s, bb);
    T* dz = st.dpre + bb * G;
    for (int64_t k = 0; k < H; ++k) {
      const double zr = z[H + k], gr = st.Act(bb, 1, k, zr), dzh = dz[2 * H + k];
      double dgr;
      if (lbr) {
        dgr = dzh * double(st.u[bb * H + k]);
        st.dgh[bb * H + k] = static_cast<T>(dzh * gr);  // d(u)
      } else {
        const double drh = st.back[bb * H + k];
        dgr = drh * (hp ? double(hp[k]) : 0.0);
        st.dh[bb * H + k] += static_cast<T>(drh * gr);
      }
      dz[H + k] = static_cast<T>(st.Clipped(zr) ? 0.0 : dgr * st.Slope(bb, 1, k, zr));
    }
    std::copy_n(dz, G, st.dg + (st.Time(s, bb) * B + bb) * G);
  }
}

// 4. Recurrent weights and biases, and the remaining H_prev paths.
template <typename T>
void GruGradRecurrent(const GruGradDir<T>& st, int64_t s) {
  const int64_t B = st.B, H = st.H, G = 3 * H;
  const bool lbr = st.a.linear_before_reset;
  if (lbr) Gemm<T>(false, false, B, H, H, T(1), st.dgh, st.rd + 2 * H * H, T(0), st.back, nullptr);  // d(u) Rh
  for (int64_t bb = 0; bb < B; ++bb) {
    if (s >= st.Len(bb)) continue;
    const T* dz = st.dpre + bb * G;
    if (lbr) {
      for (int64_t k = 0; k < H; ++k) st.dh[bb * H + k] += st.back[bb * H + k];
    }
    if (st.db) {
      T* dbd = st.db + st.d * 6 * H;
      for (int64_t q = 0; q < H; ++q) dbd[5 * H + q] += lbr ? st.dgh[bb * H + q] : dz[2 * H + q];
    }
  }
  if (st.dr) {
    // z and r rows: dR += d(pre)' H_prev; h rows: d(u)' H_prev (linear_before_reset), else dzh' (r H_prev),
    // where the rows that did not run are 0 in hps and u.
    T* drd = st.dr + st.d * G * H;
    GemmLd<T>(true, false, 2 * H, H, B, T(1), st.dpre, G, st.hps, H, T(1), drd, H);
    if (lbr) GemmLd<T>(true, false, H, H, B, T(1), st.dgh, H, st.hps, H, T(1), drd + 2 * H * H, H);
    else GemmLd<T>(true, false, H, H, B, T(1), st.dpre + 2 * H, G, st.u, H, T(1), drd + 2 * H * H, H);
  }
  // dH_prev += [dz, dr] (R_z, R_r), for the rows that ran.
  // (dpre rows are [B, 3H]; the product reads the first 2H columns of each with stride 3H)
  GemmLd<T>(false, false, B, H, 2 * H, T(1), st.dpre, G, st.rd, H, T(0), st.back, H);
  for (int64_t bb = 0; bb < B; ++bb) {
    if (s >= st.Len(bb)) continue;
    for (int64_t k = 0; k < H; ++k) st.dh[bb * H + k] += st.back[bb * H + k];
  }
}

// GRUGrad(X, W, R, B, SL, H0, HAll, zrh, dHAll, dHFinal) -> dX, dW, dR, dB, dH0 (ONNX Runtime's inputs and
// outputs; zrh holds GRUTraining's clipped pre-activations).
class GruGradKernel : public OpKernel {
 public:
  explicit GruGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_, 2, {"Sigmoid", "Tanh"}));
      if (attrs_.layout != 0) return InvalidArgument("GRUGrad takes layout 0 only");
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(CheckRecurrentDTypes(ctx));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r, 3));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    // B, sequence_lens, initial_h, dY (all hidden states), dY_h
    ONT_RETURN_IF_ERROR(CheckRecurrentGradInputs(ctx, B, S, 4, {{3, {D, 6 * H}}, {5, {D, B, H}}, {8, {S, D, B, H}},
                                                               {9, {D, B, H}}}));
    ONT_ASSIGN_OR_RETURN(const Tensor* hall, RequireInput(ctx, 6, "HAll"));
    ONT_ASSIGN_OR_RETURN(const Tensor* zrh, RequireInput(ctx, 7, "zrh"));
    if (hall->shape() != Shape{S, D, B, H} || zrh->shape() != Shape{S, D, B, 3 * H}) {
      return InvalidArgument("HAll and zrh do not match X and W: ", ShapeToString(hall->shape()), " ",
                             ShapeToString(zrh->shape()));
    }
    // scratch: dG [S, B, 3H], dh [B, H], dpre [B, 3H], u [B, H] (H Rh' + Rbh, or r H), back [B, H], dgh [B, H],
    // the step's previous hidden states [B, H], and its gate values [B, 3H]
    ctx.RequestScratch(static_cast<size_t>(S * B * 3 * H + 5 * B * H + 2 * B * 3 * H) * DTypeSize(x->dtype()));
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), w->shape()));
    if (ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, x->dtype(), r->shape()));
    if (ctx.output_requested(3)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(3, x->dtype(), {D, 6 * H}));
    if (ctx.output_requested(4)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(4, x->dtype(), {D, B, H}));
    return Status::OK();
  }
  // Each direction's steps from the last back, then its input and bias gradients.
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, G = 3 * H;
      T* dg = static_cast<T*>(ctx.scratch());
      T* dh = dg + S * B * G;
      const Tensor* b = Optional(ctx, 3);
      const Tensor* h0 = Optional(ctx, 5);
      const Tensor* dyh = Optional(ctx, 9);
      Tensor *dx = ctx.output(0), *dw = ctx.output(1), *dr = ctx.output(2), *db = ctx.output(3), *dh0 = ctx.output(4);
      for (Tensor* o : {dx, dw, dr, db}) if (o) std::fill(o->data<T>(), o->data<T>() + o->NumElements(), T(0));
      for (int64_t d = 0; d < D; ++d) {
        const bool reverse = attrs_.reverse_only || d == 1;
        const Activation &f = attrs_.act[d][0], &g = attrs_.act[d][1];
        const bool fast = std::is_same_v<T, float> && f.kind == Activation::kSigmoid && g.kind == Activation::kTanh;
        GruGradDir<T> st{{attrs_, D, B, H, S, d, reverse, fast, f, g, Optional(ctx, 4), Optional(ctx, 8),
                          PrevState<T>{ctx.input(6)->data<T>(), h0 ? h0->data<T>() : nullptr, D, d, B, H, reverse}},
                         r.data<T>() + d * G * H, b ? b->data<T>() + d * 6 * H + 5 * H : nullptr,
                         ctx.input(7)->data<T>()};
        st.dg = dg;
        st.dh = dh;
        st.dpre = dh + B * H;
        st.u = st.dpre + B * G;
        st.back = st.u + B * H;
        st.dgh = st.back + B * H;
        st.hps = st.dgh + B * H;
        st.acts = st.hps + B * H;
        st.db = db ? db->data<T>() : nullptr;
        st.dr = dr ? dr->data<T>() : nullptr;
        std::fill(dg, dg + S * B * G, T(0));
        for (int64_t j = 0; j < B * H; ++j) dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
        for (int64_t s = S - 1; s >= 0; --s) {
          GruGradStepInputs(st, s);
          GruGradUpdateAndCandidate(st, s);
          GruGradReset(st, s);
          GruGradRecurrent(st, s);
        }
        if (dh0) std::copy_n(dh, B * H, dh0->data<T>() + d * B * H);
        recurrent::InputAndBiasGradients<T>(dg, x, w, S * B, n_.input, G, d, 2 * H, dx, dw, db);
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  bool parsed_ = false;
  RecurrentAttrs attrs_;
  RecurrentDims n_;
};


}  // namespace

KernelFactory kGru = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new GruKernel(i, false));
};
KernelFactory kGruTraining = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new GruKernel(i, true));
};
KernelFactory kGruGrad = MakeKernel<GruGradKernel>;

}  // namespace cpu
}  // namespace ontrain
