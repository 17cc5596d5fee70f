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
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
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
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, I = n_.input, G = 4 * H;
      T* dg = static_cast<T*>(ctx.scratch());
      T* dh = dg + S * B * G;
      T* dc = dh + B * H;
      T* dpre = dc + B * H;
      T* back = dpre + B * G;  // dpre R
      T* hps = back + B * H;   // previous hidden states of this step's rows
      T* acts = hps + B * H;   // fast path: a row's f(i), f(o), f(f), g(c~) [4H], then h(C) [H]
      const Tensor* sl = Optional(ctx, 3);
      const Tensor* h0 = Optional(ctx, 4);
      const Tensor* c0 = Optional(ctx, 5);
      const Tensor* dyall = Optional(ctx, 9);
      const Tensor* dyh = Optional(ctx, 10);
      const Tensor* dyc = Optional(ctx, 11);
      const Tensor* p = Optional(ctx, 12);
      const T* hall = ctx.input(6)->data<T>();
      const T* call = ctx.input(7)->data<T>();
      const T* iofc = ctx.input(8)->data<T>();
      Tensor* dx = ctx.output(0);
      Tensor* dw = ctx.output(1);
      Tensor* dr = ctx.output(2);
      Tensor* db = ctx.output(3);
      Tensor* dh0 = ctx.output(4);
      Tensor* dc0 = ctx.output(5);
      Tensor* dp = ctx.output(6);
      if (dx) std::fill(dx->data<T>(), dx->data<T>() + dx->NumElements(), T(0));
      if (dw) std::fill(dw->data<T>(), dw->data<T>() + dw->NumElements(), T(0));
      if (dr) std::fill(dr->data<T>(), dr->data<T>() + dr->NumElements(), T(0));
      if (db) std::fill(db->data<T>(), db->data<T>() + db->NumElements(), T(0));
      if (dp) std::fill(dp->data<T>(), dp->data<T>() + dp->NumElements(), T(0));
      auto len_of = [&](int64_t bb) { return SeqLen(sl, bb, S); };
      auto clipped = [&](double z) { return attrs_.clip > 0 && (z >= attrs_.clip || z <= -attrs_.clip); };
      for (int64_t d = 0; d < D; ++d) {
        const bool reverse = attrs_.reverse_only || d == 1;
        const Activation &f = attrs_.act[d][0], &g = attrs_.act[d][1], &hact = attrs_.act[d][2];
        const T* pp = p ? p->data<T>() + d * 3 * H : nullptr;
        const bool fast = std::is_same_v<T, float> && f.kind == Activation::kSigmoid && g.kind == Activation::kTanh &&
                          hact.kind == Activation::kTanh;
        std::fill(dg, dg + S * B * G, T(0));
        for (int64_t j = 0; j < B * H; ++j) {
          dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
          dc[j] = dyc ? dyc->data<T>()[d * B * H + j] : T(0);
        }
        const PrevState<T> hprev{hall, h0 ? h0->data<T>() : nullptr, D, d, B, H, reverse};
        const PrevState<T> cprev_of{call, c0 ? c0->data<T>() : nullptr, D, d, B, H, reverse};
        for (int64_t s = S - 1; s >= 0; --s) {
          std::fill(dpre, dpre + B * G, T(0));
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            const T* z = iofc + ((t * D + d) * B + bb) * G;
            const T* cn = call + ((t * D + d) * B + bb) * H;
            const T* cprev = cprev_of(s, bb, len);
            T* dhr = dh + bb * H;
            T* dcr = dc + bb * H;
            if (dyall) {
              const T* gy = dyall->data<T>() + ((t * D + d) * B + bb) * H;
              for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
            }
            T* dz = dpre + bb * G;
            if constexpr (std::is_same_v<T, float>) {
              if (fast) {
                VSigmoid(z, acts, 3 * H);
                VTanh(z + 3 * H, acts + 3 * H, H);
                VTanh(cn, acts + 4 * H, H);
              }
            }
            for (int64_t k = 0; k < H; ++k) {
              const double zi = z[k], zo = z[H + k], zf = z[2 * H + k], zc = z[3 * H + k];
              const double c = cn[k], cp = cprev ? double(cprev[k]) : 0.0;
              // The activations at the pre-activations and the derivatives there: f'(i), f'(o), f'(f), g'(c~), h'(C).
              double gi, gf, gc, go, hc, dfi, dfo, dff = 0, dgz, dhc;
              if (fast) {
                gi = acts[k], go = acts[H + k], gc = acts[3 * H + k], hc = acts[4 * H + k];
                const double sf = acts[2 * H + k];
                gf = attrs_.input_forget ? 1 - gi : sf;
                dfi = gi * (1 - gi), dfo = go * (1 - go), dff = sf * (1 - sf), dgz = 1 - gc * gc, dhc = 1 - hc * hc;
              } else {
                gi = f(zi), gf = attrs_.input_forget ? 1 - gi : f(zf), gc = g(zc), go = f(zo), hc = hact(c);
                dfi = f.Derivative(zi), dfo = f.Derivative(zo), dgz = g.Derivative(zc), dhc = hact.Derivative(c);
                if (!attrs_.input_forget) dff = f.Derivative(zf);
              }
              const double dho = double(dhr[k]);
              const double dzo = clipped(zo) ? 0.0 : dho * hc * dfo;
              double dcell = double(dcr[k]) + dho * go * dhc;
              if (pp) dcell += dzo * double(pp[H + k]);
              double dgi = dcell * gc, dgf = dcell * cp;
              const double dgc = dcell * gi;
              double dcp = dcell * gf;
              double dzf = 0;
              if (attrs_.input_forget) {
                dgi -= dgf;
              } else {
                dzf = clipped(zf) ? 0.0 : dgf * dff;
              }
              const double dzi = clipped(zi) ? 0.0 : dgi * dfi;
              const double dzc = clipped(zc) ? 0.0 : dgc * dgz;
              if (pp) {
                dcp += dzi * double(pp[k]) + dzf * double(pp[2 * H + k]);
                if (dp) {
                  T* dpp = dp->data<T>() + d * 3 * H;
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
            std::copy_n(dz, G, dg + (t * B + bb) * G);
          }
          // dR += dpre' H_prev and dH_prev = dpre R, over the rows that ran this step (others have dpre 0).
          const T* rd = r.data<T>() + d * G * H;
          if (dr) {
            recurrent::AccumulateRecurrentWeights<T>(dpre, G, G, B, H, [&](int64_t bb) -> const T* {
              const int64_t len = len_of(bb);
              return s < len ? hprev(s, bb, len) : nullptr;
            }, hps, dr->data<T>() + d * G * H);
          }
          // dH for the previous step: rows that ran take dpre R, rows that did not keep theirs.
          Gemm<T>(false, false, B, H, G, T(1), dpre, rd, T(0), back, nullptr);
          for (int64_t bb = 0; bb < B; ++bb) {
            if (s >= len_of(bb)) continue;
            std::copy_n(back + bb * H, H, dh + bb * H);
          }
        }
        if (dh0) std::copy_n(dh, B * H, dh0->data<T>() + d * B * H);
        if (dc0) std::copy_n(dc, B * H, dc0->data<T>() + d * B * H);
        // dX += dG W, dW += dG' X, dB += column sums of dG (both halves), over all steps and rows.
        recurrent::InputAndBiasGradients<T>(dg, x, w, S * B, I, G, d, G, dx, dw, db);
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
