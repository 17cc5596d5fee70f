// LSTM (ONNX, opsets 7 on, layouts 0 and 1), com.microsoft LSTMTraining (ONNX Runtime's training form:
// layout 0, and two more outputs that the gradient reads: every step's cell state and gate pre-activations)
// and com.microsoft LSTMGrad (back-propagation through time).
//
// Gates in ONNX's order i, o, f, c. Per step, for each direction and batch row:
//   i = f(Xt Wi' + H Ri' + Pi C + Wbi + Rbi)     f = f(... Pf C ...)  (or 1 - i with input_forget)
//   c~ = g(Xt Wc' + H Rc' + Wbc + Rbc)            C' = f C + i c~
//   o = f(Xt Wo' + H Ro' + Po C' + Wbo + Rbo)     H' = o h(C')
// with clip (when set) bounding the four pre-activations. Rows whose sequence is shorter than the step
// keep their state and output zeros; the reverse direction runs each row from its own last step. X W' for
// every step is one GEMM before the loop, H R' one GEMM per step; LSTMGrad collects the pre-activation
// gradients of all steps and forms dX and dW with one GEMM each at the end. With float32 data and the
// default activations (sigmoid, tanh, tanh) LSTMGrad takes a row's gate values from vmath's vectorized
// sigmoid and tanh, and their derivatives from those values, instead of evaluating each activation and
// derivative in double (LSTMGrad of a 256-unit LSTM, batch 32, 32 steps: 42.6 ms, mostly that).
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

// One row of one step on the fast path: pr [4H] holds H R' for the row and becomes the clipped
// pre-activations (i, o, f, c~); c and h [H] are the row's states, updated in place; acts is scratch [5H].
template <typename Clip>
void LstmRowFast(const RecurrentAttrs& a, const float* xr, const float* wb, int64_t H, const Clip& clip, float* pr,
                 float* acts, float* c, float* h) {
  const int64_t G = 4 * H;
  for (int64_t q = 0; q < G; ++q) {
    double z = double(xr[q]) + pr[q];
    if (wb) z += double(wb[q]) + wb[G + q];
    pr[q] = static_cast<float>(clip(z));
  }
  VSigmoid(pr, acts, 3 * H);            // i, o, f
  VTanh(pr + 3 * H, acts + 3 * H, H);   // c~
  for (int64_t k = 0; k < H; ++k) {
    const double gi = acts[k], gf = a.input_forget ? 1 - gi : double(acts[2 * H + k]), gc = acts[3 * H + k];
    c[k] = static_cast<float>(gf * c[k] + gi * gc);
  }
  VTanh(c, acts + 4 * H, H);
  for (int64_t k = 0; k < H; ++k) h[k] = static_cast<float>(double(acts[H + k]) * acts[4 * H + k]);
}

// The forward pass over layout-0 data for one direction `d`: x [seq, batch, input]; writes every step's
// hidden state into y (may be null), cell state into call and clipped pre-activations into gates (both may be
// null), and the final states. `xw` is scratch [seq, batch, 4H], `pre` [batch, 4H], `acts` [5H].
template <typename T>
void LstmDirection(const RecurrentAttrs& a, const RecurrentDims& n, int64_t d, const T* x, const T* w, const T* r, const T* b,
                   const int64_t* lens, const T* h0, const T* c0, const T* p, T* y, T* yh, T* yc, T* call, T* gates,
                   T* xw, T* pre, T* h, T* c, T* acts) {
  const int64_t H = n.hidden, G = 4 * H, B = n.batch, S = n.seq;
  const bool reverse = a.reverse_only || d == 1;
  const Activation &f = a.act[d][0], &g = a.act[d][1], &hact = a.act[d][2];
  // X W' for all steps.
  Gemm<T>(false, true, S * B, G, n.input, T(1), x, w + d * G * n.input, T(0), xw, nullptr);
  for (int64_t j = 0; j < B * H; ++j) {
    h[j] = h0 ? h0[d * B * H + j] : T(0);
    c[j] = c0 ? c0[d * B * H + j] : T(0);
  }
  const T* wb = b ? b + d * 8 * H : nullptr;
  const T* pp = p ? p + d * 3 * H : nullptr;
  auto clip = [&](double v) { return a.clip > 0 ? std::min(a.clip, std::max(-a.clip, v)) : v; };
  // float32, the default activations and no peepholes: a row's pre-activations first, then vmath's sigmoid
  // and tanh over the row (the gates in double through Activation cost most of the forward pass).
  const bool fast = std::is_same_v<T, float> && p == nullptr && f.kind == Activation::kSigmoid &&
                    g.kind == Activation::kTanh && hact.kind == Activation::kTanh;
  for (int64_t s = 0; s < S; ++s) {
    Gemm<T>(false, true, B, G, H, T(1), h, r + d * G * H, T(0), pre, nullptr);  // H R'
    for (int64_t bb = 0; bb < B; ++bb) {
      const int64_t len = lens ? lens[bb] : S;
      if (s >= len) continue;
      const int64_t t = reverse ? len - 1 - s : s;
      const T* xr = xw + (t * B + bb) * G;
      T* pr = pre + bb * G;
      T* hr = h + bb * H;
      T* cr = c + bb * H;
      if constexpr (std::is_same_v<T, float>) {
        if (fast) {
          LstmRowFast(a, xr, wb, H, clip, pr, acts, cr, hr);
          if (gates) std::copy_n(pr, G, gates + ((t * n.dirs + d) * B + bb) * G);
          if (y) std::copy_n(hr, H, y + ((t * n.dirs + d) * B + bb) * H);
          if (call) std::copy_n(cr, H, call + ((t * n.dirs + d) * B + bb) * H);
          continue;
        }
      }
      for (int64_t k = 0; k < H; ++k) {
        double zi = double(xr[k]) + pr[k], zo = double(xr[H + k]) + pr[H + k], zf = double(xr[2 * H + k]) + pr[2 * H + k],
               zc = double(xr[3 * H + k]) + pr[3 * H + k];
        if (wb) {
          zi += double(wb[k]) + wb[4 * H + k];
          zo += double(wb[H + k]) + wb[5 * H + k];
          zf += double(wb[2 * H + k]) + wb[6 * H + k];
          zc += double(wb[3 * H + k]) + wb[7 * H + k];
        }
        const double cprev = cr[k];
        if (pp) {
          zi += double(pp[k]) * cprev;
          zf += double(pp[2 * H + k]) * cprev;
        }
        zi = clip(zi);
        zf = clip(zf);
        zc = clip(zc);
        const double gi = f(zi), gf = a.input_forget ? 1 - gi : f(zf), gc = g(zc);
        const double cn = gf * cprev + gi * gc;
        if (pp) zo += double(pp[H + k]) * cn;
        zo = clip(zo);
        const double go = f(zo);
        const double hn = go * hact(cn);
        cr[k] = static_cast<T>(cn);
        hr[k] = static_cast<T>(hn);
        if (gates) {
          T* gr = gates + ((t * n.dirs + d) * B + bb) * G;
          gr[k] = static_cast<T>(zi);
          gr[H + k] = static_cast<T>(zo);
          gr[2 * H + k] = static_cast<T>(zf);
          gr[3 * H + k] = static_cast<T>(zc);
        }
      }
      if (y) std::copy_n(hr, H, y + ((t * n.dirs + d) * B + bb) * H);
      if (call) std::copy_n(cr, H, call + ((t * n.dirs + d) * B + bb) * H);
    }
  }
  if (yh) std::copy_n(h, B * H, yh + d * B * H);
  if (yc) std::copy_n(c, B * H, yc + d * B * H);
}

// LSTM and LSTMTraining. LSTM with layout 1 works on transposed copies in the scratch.
class LstmKernel : public OpKernel {
 public:
  LstmKernel(const NodeInfo& info, bool training) : node_(*info.node), training_(training) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_));
      if (training_ && attrs_.layout != 0) return InvalidArgument("LSTMTraining takes layout 0 only");
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    ONT_RETURN_IF_ERROR(CheckRecurrentInputs(ctx, attrs_, n_, 8 * H, {5, 6}));
    const Shape state = attrs_.layout ? Shape{B, D, H} : Shape{D, B, H};
    if (const Tensor* p = Optional(ctx, 7); p && p->shape() != Shape{D, 3 * H}) {
      return InvalidArgument("P has shape ", ShapeToString(p->shape()), ", expected [", D, ",", 3 * H, "]");
    }
    // scratch: xw [S, B, 4H], pre [B, 4H], h, c [B, H], acts [5H], lens [B]; layout 1: x, y, h0, c0, yh, yc
    // transposed
    int64_t elems = S * B * 4 * H + B * 4 * H + 2 * B * H + 5 * H;
    if (attrs_.layout) elems += S * B * n_.input + S * D * B * H + 4 * D * B * H;
    ctx.RequestScratch(static_cast<size_t>(B) * sizeof(int64_t) + static_cast<size_t>(elems) * DTypeSize(x->dtype()));
    const Shape y = attrs_.layout ? Shape{B, S, D, H} : Shape{S, D, B, H};
    if (ctx.output_requested(0) || training_) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), y));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), state));
    if (ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, x->dtype(), state));
    if (training_) {
      if (ctx.output_requested(3)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(3, x->dtype(), {S, D, B, H}));
      if (ctx.output_requested(4)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(4, x->dtype(), {S, D, B, 4 * H}));
    }
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, I = n_.input;
      int64_t* lens = nullptr;
      T* xw = reinterpret_cast<T*>(static_cast<int64_t*>(ctx.scratch()) + B);  // after B lengths (8-byte aligned)
      T* pre = xw + S * B * 4 * H;
      T* h = pre + B * 4 * H;
      T* c = h + B * H;
      T* acts = c + B * H;
      T* extra = acts + 5 * H;
      const Tensor* sl = Optional(ctx, 4);
      const Tensor* b = Optional(ctx, 3);
      const Tensor* h0 = Optional(ctx, 5);
      const Tensor* c0 = Optional(ctx, 6);
      const Tensor* p = Optional(ctx, 7);
      T* yt = ctx.output(0) ? ctx.output(0)->data<T>() : nullptr;
      T* yht = ctx.output(1) ? ctx.output(1)->data<T>() : nullptr;
      T* yct = ctx.output(2) ? ctx.output(2)->data<T>() : nullptr;
      T* call = training_ && ctx.output(3) ? ctx.output(3)->data<T>() : nullptr;
      T* gates = training_ && ctx.output(4) ? ctx.output(4)->data<T>() : nullptr;
      const T* px = x.data<T>();
      const T* ph0 = h0 ? h0->data<T>() : nullptr;
      const T* pc0 = c0 ? c0->data<T>() : nullptr;
      T *y = yt, *yh = yht, *yc = yct;
      if (attrs_.layout) {  // [B, S, I] -> [S, B, I]; states [B, D, H] <-> [D, B, H]; Y [S, D, B, H] -> [B, S, D, H]
        T* xs = extra;
        T* ys = xs + S * B * I;
        T* st = ys + S * D * B * H;  // h0, c0, yh, yc, each [D, B, H]
        SwapOuter(px, B, S, I, xs);
        if (ph0) SwapOuter(ph0, B, D, H, st), ph0 = st;
        if (pc0) SwapOuter(pc0, B, D, H, st + D * B * H), pc0 = st + D * B * H;
        px = xs;
        y = yt ? ys : nullptr;
        yh = yht ? st + 2 * D * B * H : nullptr;
        yc = yct ? st + 3 * D * B * H : nullptr;
      }
      if (sl) {
        lens = static_cast<int64_t*>(ctx.scratch());
        for (int64_t bb = 0; bb < B; ++bb) lens[bb] = SeqLen(sl, bb, S);
      }
      if (y) std::fill(y, y + S * D * B * H, T(0));
      if (call) std::fill(call, call + S * D * B * H, T(0));
      if (gates) std::fill(gates, gates + S * D * B * 4 * H, T(0));
      for (int64_t d = 0; d < D; ++d) {
        LstmDirection<T>(attrs_, n_, d, px, w.data<T>(), r.data<T>(), b ? b->data<T>() : nullptr, lens, ph0, pc0,
                         p ? p->data<T>() : nullptr, y, yh, yc, call, gates, xw, pre, h, c, acts);
      }
      if (attrs_.layout) {
        if (yt) YToBatchFirst(y, S, D, B, H, yt);
        if (yht) SwapOuter(yh, D, B, H, yht);
        if (yct) SwapOuter(yc, D, B, H, yct);
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

// A gate row's activations at its pre-activations, and their derivatives there: f'(i), f'(o), f'(f), g'(c~),
// h'(C).
struct LstmGates {
  double gi, gf, gc, go, hc, dfi, dfo, dff, dgz, dhc;
};

// LSTMGrad's state for one direction: GradDirection's, the step's operands and scratch buffers (Compute's
// layout), and the gates' values and derivatives. The row and step functions below read and write it in
// the order of the original single pass, so the results are that pass's.
template <typename T>
struct LstmGradDir : GradDirection<T> {
  const Activation& hact;
  const T* pp;    // this direction's peepholes [3H], or null
  const T* iofc;  // LSTMTraining's clipped pre-activations [S, D, B, 4H]
  const T* call;  // the cell states [S, D, B, H]
  PrevState<T> cprev;
  T *dg, *dh, *dc, *dpre, *back, *hps, *acts;
  T* dp;  // dP [D, 3H], or null

  // Element k's gates, from pre-activations z and cell state c: on the fast path from the row's vectorized
  // values in acts (f(i), f(o), f(f), g(c~), then h(C)).
  LstmGates Gates(int64_t k, const T* z, double c) const {
    const int64_t H = this->H;
    const bool input_forget = this->a.input_forget;
    const Activation &f = this->f, &g = this->g;
    const double zi = z[k], zo = z[H + k], zf = z[2 * H + k], zc = z[3 * H + k];
    LstmGates q{};
    if (this->fast) {
      q.gi = acts[k], q.go = acts[H + k], q.gc = acts[3 * H + k], q.hc = acts[4 * H + k];
      const double sf = acts[2 * H + k];
      q.gf = input_forget ? 1 - q.gi : sf;
      q.dfi = q.gi * (1 - q.gi), q.dfo = q.go * (1 - q.go), q.dff = sf * (1 - sf), q.dgz = 1 - q.gc * q.gc;
      q.dhc = 1 - q.hc * q.hc;
    } else {
      q.gi = f(zi), q.gf = input_forget ? 1 - q.gi : f(zf), q.gc = g(zc), q.go = f(zo), q.hc = hact(c);
      q.dfi = f.Derivative(zi), q.dfo = f.Derivative(zo), q.dgz = g.Derivative(zc), q.dhc = hact.Derivative(c);
      if (!input_forget) q.dff = f.Derivative(zf);
    }
    return q;
  }
};

// Row bb at step s (which it runs): its gates' pre-activation gradients into dpre and dG, dC for the step
// before, and the peepholes' gradient.
template <typename T>
void LstmGradRow(const LstmGradDir<T>& st, int64_t s, int64_t bb) {
  const int64_t H = st.H, G = 4 * H, t = st.Time(s, bb);
  const T* z = st.iofc + ((t * st.D + st.d) * st.B + bb) * G;
  const T* cn = st.call + ((t * st.D + st.d) * st.B + bb) * H;
  const T* cprev = st.cprev(s, bb, st.Len(bb));
  T* dhr = st.dh + bb * H;
  T* dcr = st.dc + bb * H;
  if (st.dyall) {
    const T* gy = st.dyall->template data<T>() + ((t * st.D + st.d) * st.B + bb) * H;
    for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
  }
  T* dz = st.dpre + bb * G;
  if constexpr (std::is_same_v<T, float>) {
    if (st.fast) {
      VSigmoid(z, st.acts, 3 * H);
      VTanh(z + 3 * H, st.acts + 3 * H, H);
      VTanh(cn, st.acts + 4 * H, H);
    }
  }
  const bool input_forget = st.a.input_forget;
  for (int64_t k = 0; k < H; ++k) {
    const double zi = z[k], zo = z[H + k], zf = z[2 * H + k], zc = z[3 * H + k];
    const double c = cn[k], cp = cprev ? double(cprev[k]) : 0.0;
    const LstmGates q = st.Gates(k, z, c);
    const double dho = double(dhr[k]);
    const double dzo = st.Clipped(zo) ? 0.0 : dho * q.hc * q.dfo;
    double dcell = double(dcr[k]) + dho * q.go * q.dhc;
    if (st.pp) dcell += dzo * double(st.pp[H + k]);
    double dgi = dcell * q.gc, dgf = dcell * cp;
    const double dgc = dcell * q.gi;
    double dcp = dcell * q.gf;
    double dzf = 0;
    if (input_forget) {
      dgi -= dgf;
    } else {
      dzf = st.Clipped(zf) ? 0.0 : dgf * q.dff;
    }
    const double dzi = st.Clipped(zi) ? 0.0 : dgi * q.dfi;
    const double dzc = st.Clipped(zc) ? 0.0 : dgc * q.dgz;
    if (st.pp) {
      dcp += dzi * double(st.pp[k]) + dzf * double(st.pp[2 * H + k]);
      if (st.dp) {
        T* dpp = st.dp + st.d * 3 * H;
        dpp[k] += static_cast<T>(dzi * cp);
        dpp[2 * H + k] += static_cast<T>(dzf * cp);
        dpp[H + k] += static_cast<T>(dzo * c);
      }
    }
    dz[k] = static_cast<T>(dzi);
    dz[H + k] = static_cast<T>(dzo);
    dz[2 * H + k] = static_cast<T>(dzf);
    dz[3 * H + k] = static_cast<T>(dzc);
    dcr[k] = static_cast<T>(dcp);
  }
  std::copy_n(dz, G, st.dg + (t * st.B + bb) * G);
}

// LSTMGrad(X, W, R, SL, H0, C0, HAll, CAll, iofc, dHAll, dHFinal, dCFinal[, P]) -> dX, dW, dR, dB, dH0, dC0,
// dP: ONNX Runtime's inputs and outputs (iofc here holds LSTMTraining's clipped pre-activations, so the bias
// is not needed), plus ontrain's input 12, the peephole weights, given when the LSTM has them.
class LstmGradKernel : public OpKernel {
 public:
  explicit LstmGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_));
      if (attrs_.layout != 0) return InvalidArgument("LSTMGrad takes layout 0 only");
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(CheckRecurrentDTypes(ctx, 3));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    // sequence_lens, initial_h, initial_c, dY (all hidden states), dY_h, dY_c
    ONT_RETURN_IF_ERROR(CheckRecurrentGradInputs(ctx, B, S, 3, {{4, {D, B, H}}, {5, {D, B, H}}, {9, {S, D, B, H}},
                                                               {10, {D, B, H}}, {11, {D, B, H}}}));
    ONT_ASSIGN_OR_RETURN(const Tensor* hall, RequireInput(ctx, 6, "HAll"));
    ONT_ASSIGN_OR_RETURN(const Tensor* call, RequireInput(ctx, 7, "CAll"));
    ONT_ASSIGN_OR_RETURN(const Tensor* iofc, RequireInput(ctx, 8, "iofc"));
    if (hall->shape() != Shape{S, D, B, H} || call->shape() != Shape{S, D, B, H} || iofc->shape() != Shape{S, D, B, 4 * H}) {
      return InvalidArgument("HAll, CAll and iofc do not match X and W: ", ShapeToString(hall->shape()), " ",
                             ShapeToString(call->shape()), " ", ShapeToString(iofc->shape()));
    }
    // scratch: dgates [S, B, 4H] per direction (rows for the steps each row ran), dh, dc [B, H], dpre [B, 4H],
    // dpre R [B, H], the step's previous hidden states [B, H], and one row's gate values [4H] and h(C) [H]
    ctx.RequestScratch(static_cast<size_t>(S * B * 4 * H + 4 * B * H + B * 4 * H + 5 * H) * DTypeSize(x->dtype()));
    const Shape state = {D, B, H};
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), w->shape()));
    if (ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, x->dtype(), r->shape()));
    if (ctx.output_requested(3)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(3, x->dtype(), {D, 8 * H}));
    if (ctx.output_requested(4)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(4, x->dtype(), state));
    if (ctx.output_requested(5)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(5, x->dtype(), state));
    if (ctx.output_requested(6)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(6, x->dtype(), {D, 3 * H}));
    return Status::OK();
  }
  // Each direction's steps from the last back (LstmGradRow per row that ran, then the recurrent products),
  // then its input and bias gradients.
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, G = 4 * H;
      const Tensor* h0 = Optional(ctx, 4);
      const Tensor* c0 = Optional(ctx, 5);
      const Tensor* dyh = Optional(ctx, 10);
      const Tensor* dyc = Optional(ctx, 11);
      const Tensor* p = Optional(ctx, 12);
      Tensor *dx = ctx.output(0), *dw = ctx.output(1), *dr = ctx.output(2), *db = ctx.output(3);
      Tensor *dh0 = ctx.output(4), *dc0 = ctx.output(5), *dp = ctx.output(6);
      for (Tensor* o : {dx, dw, dr, db, dp}) if (o) std::fill(o->data<T>(), o->data<T>() + o->NumElements(), T(0));
      for (int64_t d = 0; d < D; ++d) {
        const bool reverse = attrs_.reverse_only || d == 1;
        const Activation &f = attrs_.act[d][0], &g = attrs_.act[d][1], &hact = attrs_.act[d][2];
        const bool fast = std::is_same_v<T, float> && f.kind == Activation::kSigmoid && g.kind == Activation::kTanh &&
                          hact.kind == Activation::kTanh;
        const T* call = ctx.input(7)->data<T>();
        LstmGradDir<T> st{{attrs_, D, B, H, S, d, reverse, fast, f, g, Optional(ctx, 3), Optional(ctx, 9),
                           PrevState<T>{ctx.input(6)->data<T>(), h0 ? h0->data<T>() : nullptr, D, d, B, H, reverse}},
                          hact, p ? p->data<T>() + d * 3 * H : nullptr, ctx.input(8)->data<T>(), call,
                          PrevState<T>{call, c0 ? c0->data<T>() : nullptr, D, d, B, H, reverse}};
        st.dg = static_cast<T*>(ctx.scratch());
        st.dh = st.dg + S * B * G;
        st.dc = st.dh + B * H;
        st.dpre = st.dc + B * H;
        st.back = st.dpre + B * G;  // dpre R
        st.hps = st.back + B * H;   // previous hidden states of this step's rows
        st.acts = st.hps + B * H;   // fast path: a row's f(i), f(o), f(f), g(c~) [4H], then h(C) [H]
        st.dp = dp ? dp->data<T>() : nullptr;
        std::fill(st.dg, st.dg + S * B * G, T(0));
        for (int64_t j = 0; j < B * H; ++j) {
          st.dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
          st.dc[j] = dyc ? dyc->data<T>()[d * B * H + j] : T(0);
        }
        const T* rd = r.data<T>() + d * G * H;
        for (int64_t s = S - 1; s >= 0; --s) {
          std::fill(st.dpre, st.dpre + B * G, T(0));
          for (int64_t bb = 0; bb < B; ++bb) {
            if (s < st.Len(bb)) LstmGradRow(st, s, bb);
          }
          // dR += dpre' H_prev and dH_prev = dpre R, over the rows that ran this step (others have dpre 0).
          if (dr) {
            recurrent::AccumulateRecurrentWeights<T>(st.dpre, G, G, B, H, [&](int64_t bb) -> const T* {
              const int64_t len = st.Len(bb);
              return s < len ? st.hprev(s, bb, len) : nullptr;
            }, st.hps, dr->data<T>() + d * G * H);
          }
          // dH for the previous step: rows that ran take dpre R, rows that did not keep theirs.
          Gemm<T>(false, false, B, H, G, T(1), st.dpre, rd, T(0), st.back, nullptr);
          for (int64_t bb = 0; bb < B; ++bb) {
            if (s < st.Len(bb)) std::copy_n(st.back + bb * H, H, st.dh + bb * H);
          }
        }
        if (dh0) std::copy_n(st.dh, B * H, dh0->data<T>() + d * B * H);
        if (dc0) std::copy_n(st.dc, B * H, dc0->data<T>() + d * B * H);
        // dX += dG W, dW += dG' X, dB += column sums of dG (both halves), over all steps and rows.
        recurrent::InputAndBiasGradients<T>(st.dg, x, w, S * B, n_.input, G, d, G, dx, dw, db);
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

KernelFactory kLstm = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new LstmKernel(i, false));
};
KernelFactory kLstmTraining = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new LstmKernel(i, true));
};
KernelFactory kLstmGrad = MakeKernel<LstmGradKernel>;

}  // namespace cpu
}  // namespace ontrain
