// RNN (ONNX, opsets 7 on, layouts 0 and 1) and ontrain's com.microsoft RNNGrad.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/recurrent.h"

namespace ontrain {
namespace cpu {
namespace {

using namespace recurrent;  // NOLINT: the shared pieces of the recurrent kernels

// H' = f(Xt Wi' + H Ri' + Wbi + Rbi), clip bounding the pre-activation. RNNGrad(X, W, R, B, SL, H0, Y, dY,
// dY_h) -> dX, dW, dR, dB, dH0 (ontrain's: ONNX Runtime has no RNN gradient) recomputes each step's
// pre-activation from Y, the previous hidden states.

// One row's pre-activation: its row of X W', both biases and its row of H_prev R' (hr, from one GEMM over
// the step's rows), summed in double and clipped.
template <typename T>
void RnnPre(const RecurrentDims& n, int64_t d, const T* b, const T* hr, const T* xrow, T* out, double clip) {
  const int64_t H = n.hidden;
  for (int64_t k = 0; k < H; ++k) {
    double z = double(xrow[k]);
    if (b) z += double(b[d * 2 * H + k]) + b[d * 2 * H + H + k];
    z += double(hr[k]);
    out[k] = static_cast<T>(clip > 0 ? std::min(clip, std::max(-clip, z)) : z);
  }
}

class RnnKernel : public OpKernel {
 public:
  explicit RnnKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_, 1, {"Tanh"}));
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r, 1));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    ONT_RETURN_IF_ERROR(CheckRecurrentInputs(ctx, attrs_, n_, 2 * H, {5}));
    const Shape state = attrs_.layout ? Shape{B, D, H} : Shape{D, B, H};
    // scratch: xw [S, B, H], h [B, H], pre [B, H]; layout 1: x, y, h0, yh transposed
    int64_t elems = S * B * H + 2 * B * H;
    if (attrs_.layout) elems += S * B * n_.input + S * D * B * H + 2 * D * B * H;
    ctx.RequestScratch(static_cast<size_t>(elems) * DTypeSize(x->dtype()));
    const Shape y = attrs_.layout ? Shape{B, S, D, H} : Shape{S, D, B, H};
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), y));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), state));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, I = n_.input;
      T* xw = static_cast<T*>(ctx.scratch());
      T* h = xw + S * B * H;
      T* pre = h + B * H;
      T* extra = pre + B * H;
      const Tensor* sl = Optional(ctx, 4);
      const Tensor* b = Optional(ctx, 3);
      const Tensor* h0 = Optional(ctx, 5);
      T* yt = ctx.output(0) ? ctx.output(0)->data<T>() : nullptr;
      T* yht = ctx.output(1) ? ctx.output(1)->data<T>() : nullptr;
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
      auto len_of = [&](int64_t bb) { return SeqLen(sl, bb, S); };
      if (y) std::fill(y, y + S * D * B * H, T(0));
      for (int64_t d = 0; d < D; ++d) {
        const bool reverse = attrs_.reverse_only || d == 1;
        const Activation& f = attrs_.act[d][0];
        const T* rd = r.data<T>() + d * H * H;
        Gemm<T>(false, true, S * B, H, I, T(1), px, w.data<T>() + d * H * I, T(0), xw, nullptr);
        for (int64_t j = 0; j < B * H; ++j) h[j] = ph0 ? ph0[d * B * H + j] : T(0);
        for (int64_t s = 0; s < S; ++s) {
          // H_prev R' for every row in one GEMM (rows that do not run at s are computed and not used), then
          // each running row's pre-activation in place.
          Gemm<T>(false, true, B, H, H, T(1), h, rd, T(0), pre, nullptr);
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            RnnPre<T>(n_, d, b ? b->data<T>() : nullptr, pre + bb * H, xw + (t * B + bb) * H, pre + bb * H, attrs_.clip);
          }
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            for (int64_t k = 0; k < H; ++k) h[bb * H + k] = static_cast<T>(f(pre[bb * H + k]));
            if (y) std::copy_n(h + bb * H, H, y + ((t * D + d) * B + bb) * H);
          }
        }
        if (yh) std::copy_n(h, B * H, yh + d * B * H);
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
  bool parsed_ = false;
  RecurrentAttrs attrs_;
  RecurrentDims n_;
};

class RnnGradKernel : public OpKernel {
 public:
  explicit RnnGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, RecurrentAttrs::FromNode(node_, 1, {"Tanh"}));
      if (attrs_.layout != 0) return InvalidArgument("RNNGrad takes layout 0 only");
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(CheckRecurrentDTypes(ctx));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r, 1));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    // B, sequence_lens, initial_h, dY (all hidden states), dY_h
    ONT_RETURN_IF_ERROR(CheckRecurrentGradInputs(ctx, B, S, 4, {{3, {D, 2 * H}}, {5, {D, B, H}}, {7, {S, D, B, H}},
                                                               {8, {D, B, H}}}));
    ONT_ASSIGN_OR_RETURN(const Tensor* yall, RequireInput(ctx, 6, "Y"));
    if (yall->shape() != Shape{S, D, B, H}) return InvalidArgument("Y has shape ", ShapeToString(yall->shape()));
    // scratch: xw [S, B, H], dG [S, B, H], dh [B, H], dpre [B, H], back [B, H], previous states [B, H],
    // pre [B, H]
    ctx.RequestScratch(static_cast<size_t>(2 * S * B * H + 5 * B * H) * DTypeSize(x->dtype()));
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), w->shape()));
    if (ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, x->dtype(), r->shape()));
    if (ctx.output_requested(3)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(3, x->dtype(), {D, 2 * H}));
    if (ctx.output_requested(4)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(4, x->dtype(), {D, B, H}));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, I = n_.input;
      T* xw = static_cast<T*>(ctx.scratch());
      T* dg = xw + S * B * H;
      T* dh = dg + S * B * H;
      T* dpre = dh + B * H;
      T* back = dpre + B * H;
      T* hps = back + B * H;
      T* pre = hps + B * H;
      const Tensor* b = Optional(ctx, 3);
      const Tensor* sl = Optional(ctx, 4);
      const Tensor* h0 = Optional(ctx, 5);
      const T* yall = ctx.input(6)->data<T>();
      const Tensor* dyall = Optional(ctx, 7);
      const Tensor* dyh = Optional(ctx, 8);
      Tensor *dx = ctx.output(0), *dw = ctx.output(1), *dr = ctx.output(2), *db = ctx.output(3), *dh0 = ctx.output(4);
      for (Tensor* o : {dx, dw, dr, db}) if (o) std::fill(o->data<T>(), o->data<T>() + o->NumElements(), T(0));
      auto len_of = [&](int64_t bb) { return SeqLen(sl, bb, S); };
      for (int64_t d = 0; d < D; ++d) {
        const bool reverse = attrs_.reverse_only || d == 1;
        const Activation& f = attrs_.act[d][0];
        const T* rd = r.data<T>() + d * H * H;
        Gemm<T>(false, true, S * B, H, I, T(1), x.data<T>(), w.data<T>() + d * H * I, T(0), xw, nullptr);
        std::fill(dg, dg + S * B * H, T(0));
        for (int64_t j = 0; j < B * H; ++j) dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
        const PrevState<T> hprev{yall, h0 ? h0->data<T>() : nullptr, D, d, B, H, reverse};
        for (int64_t s = S - 1; s >= 0; --s) {
          std::fill(dpre, dpre + B * H, T(0));
          // The step's previous states gathered (zeros for rows that do not run or start from no state), and
          // H_prev R' for all rows in one GEMM, as the forward pass computes it; dR below reads the same rows.
          bool any_prev = false;
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            const T* hp = s < len ? hprev(s, bb, len) : nullptr;
            if (hp) std::copy_n(hp, H, hps + bb * H);
            else std::fill(hps + bb * H, hps + (bb + 1) * H, T(0));
            any_prev = any_prev || hp != nullptr;
          }
          Gemm<T>(false, true, B, H, H, T(1), hps, rd, T(0), pre, nullptr);
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            RnnPre<T>(n_, d, b ? b->data<T>() : nullptr, pre + bb * H, xw + (t * B + bb) * H, pre + bb * H,
                      attrs_.clip);
            T* dhr = dh + bb * H;
            if (dyall) {
              const T* gy = dyall->data<T>() + ((t * D + d) * B + bb) * H;
              for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
            }
            for (int64_t k = 0; k < H; ++k) {
              const double z = pre[bb * H + k];
              const bool clipped = attrs_.clip > 0 && (z >= attrs_.clip || z <= -attrs_.clip);
              dpre[bb * H + k] = static_cast<T>(clipped ? 0.0 : double(dhr[k]) * f.Derivative(z));
            }
            std::copy_n(dpre + bb * H, H, dg + (t * B + bb) * H);
          }
          if (dr && any_prev) {  // dR += dpre' H_prev over the rows that ran (the others' rows are 0 in both)
            GemmLd<T>(true, false, H, H, B, T(1), dpre, H, hps, H, T(1), dr->data<T>() + d * H * H, H);
          }
          Gemm<T>(false, false, B, H, H, T(1), dpre, rd, T(0), back, nullptr);
          for (int64_t bb = 0; bb < B; ++bb) {
            if (s >= len_of(bb)) continue;
            std::copy_n(back + bb * H, H, dh + bb * H);
          }
        }
        if (dh0) std::copy_n(dh, B * H, dh0->data<T>() + d * B * H);
        recurrent::InputAndBiasGradients<T>(dg, x, w, S * B, I, H, d, H, dx, dw, db);
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

KernelFactory kRnn = MakeKernel<RnnKernel>;
KernelFactory kRnnGrad = MakeKernel<RnnGradKernel>;

}  // namespace cpu
}  // namespace ontrain
