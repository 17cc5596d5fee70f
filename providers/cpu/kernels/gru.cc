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
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r, 3));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
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
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1), &r = *ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq, I = n_.input, G = 3 * H;
      T* dg = static_cast<T*>(ctx.scratch());
      T* dh = dg + S * B * G;
      T* dpre = dh + B * H;
      T* u = dpre + B * G;
      T* back = u + B * H;
      T* dgh = back + B * H;
      T* hps = dgh + B * H;
      T* acts = hps + B * H;
      const Tensor* b = Optional(ctx, 3);
      const Tensor* sl = Optional(ctx, 4);
      const Tensor* h0 = Optional(ctx, 5);
      const Tensor* dyall = Optional(ctx, 8);
      const Tensor* dyh = Optional(ctx, 9);
      const T* hall = ctx.input(6)->data<T>();
      const T* zrh = ctx.input(7)->data<T>();
      Tensor *dx = ctx.output(0), *dw = ctx.output(1), *dr = ctx.output(2), *db = ctx.output(3), *dh0 = ctx.output(4);
      for (Tensor* o : {dx, dw, dr, db}) if (o) std::fill(o->data<T>(), o->data<T>() + o->NumElements(), T(0));
      auto len_of = [&](int64_t bb) { return SeqLen(sl, bb, S); };
      auto clipped = [&](double z) { return attrs_.clip > 0 && (z >= attrs_.clip || z <= -attrs_.clip); };
      for (int64_t d = 0; d < D; ++d) {
        const bool reverse = attrs_.reverse_only || d == 1;
        const Activation &f = attrs_.act[d][0], &g = attrs_.act[d][1];
        const T* rd = r.data<T>() + d * G * H;
        const T* rbh = b ? b->data<T>() + d * 6 * H + 5 * H : nullptr;
        const bool fast = std::is_same_v<T, float> && f.kind == Activation::kSigmoid && g.kind == Activation::kTanh;
        // Gate q's value (f(z), f(r), g(h~)) of row bb at element k, whose pre-activation is v, and its
        // derivative there: from the step's vectorized values on the fast path.
        auto act = [&](int64_t bb, int64_t q, int64_t k, double v) -> double {
          return fast ? double(acts[bb * G + q * H + k]) : (q < 2 ? f(v) : g(v));
        };
        auto slope = [&](int64_t bb, int64_t q, int64_t k, double v) -> double {
          if (!fast) return q < 2 ? f.Derivative(v) : g.Derivative(v);
          const double a = acts[bb * G + q * H + k];
          return q < 2 ? a * (1 - a) : 1 - a * a;
        };
        std::fill(dg, dg + S * B * G, T(0));
        for (int64_t j = 0; j < B * H; ++j) dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
        const PrevState<T> hprev{hall, h0 ? h0->data<T>() : nullptr, D, d, B, H, reverse};
        auto hprev_of = [&](int64_t s, int64_t bb) { return hprev(s, bb, len_of(bb)); };
        for (int64_t s = S - 1; s >= 0; --s) {
          // u: the h gate's recurrent term, H_prev Rh' + Rbh (linear_before_reset) or r H_prev (the product's input)
          std::fill(dpre, dpre + B * G, T(0));
          std::fill(dgh, dgh + B * H, T(0));  // rows that do not run stay 0 (they meet zero rows in dR's GEMMs)
          if constexpr (std::is_same_v<T, float>) {
            if (fast) {
              GatesOf(B, H, 0, 3, [&](int64_t bb) -> const float* {
                const int64_t len = len_of(bb);
                return s < len ? zrh + (((reverse ? len - 1 - s : s) * D + d) * B + bb) * G : nullptr;
              }, acts);
            }
          }
          // The step's previous hidden states, zero rows for rows that do not run or start from no state.
          for (int64_t bb = 0; bb < B; ++bb) {
            const T* hp = s < len_of(bb) ? hprev_of(s, bb) : nullptr;
            if (hp) std::copy_n(hp, H, hps + bb * H);
            else std::fill(hps + bb * H, hps + (bb + 1) * H, T(0));
          }
          if (attrs_.linear_before_reset) {  // u = H_prev Rh' (one GEMM for the step) + Rbh
            Gemm<T>(false, true, B, H, H, T(1), hps, rd + 2 * H * H, T(0), u, nullptr);
          }
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) {
              std::fill(u + bb * H, u + (bb + 1) * H, T(0));
              continue;
            }
            const int64_t t = reverse ? len - 1 - s : s;
            const T* z = zrh + ((t * D + d) * B + bb) * G;
            if (attrs_.linear_before_reset) {
              if (rbh) for (int64_t k = 0; k < H; ++k) u[bb * H + k] += rbh[k];
            } else {
              for (int64_t k = 0; k < H; ++k) u[bb * H + k] = static_cast<T>(act(bb, 1, k, z[H + k]) * double(hps[bb * H + k]));
            }
          }
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            const T* hp = hprev_of(s, bb);
            const T* z = zrh + ((t * D + d) * B + bb) * G;
            T* dhr = dh + bb * H;
            if (dyall) {
              const T* gy = dyall->data<T>() + ((t * D + d) * B + bb) * H;
              for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
            }
            T* dz = dpre + bb * G;
            for (int64_t k = 0; k < H; ++k) {
              const double zz = z[k], zh = z[2 * H + k];
              const double gz = act(bb, 0, k, zz), hh = act(bb, 2, k, zh), hpk = hp ? double(hp[k]) : 0.0, dH = dhr[k];
              dz[k] = static_cast<T>(clipped(zz) ? 0.0 : dH * (hpk - hh) * slope(bb, 0, k, zz));
              dz[2 * H + k] = static_cast<T>(clipped(zh) ? 0.0 : dH * (1 - gz) * slope(bb, 2, k, zh));
              dhr[k] = static_cast<T>(dH * gz);  // the direct path; the gates' paths are added below
            }
          }
          // dr and the h gate's recurrent path: linear_before_reset: dr = dzh u, d(u) = dzh r; else d(rH) = dzh Rh.
          if (!attrs_.linear_before_reset) {
            for (int64_t bb = 0; bb < B; ++bb)
              for (int64_t k = 0; k < H; ++k) dgh[bb * H + k] = dpre[bb * G + 2 * H + k];
            Gemm<T>(false, false, B, H, H, T(1), dgh, rd + 2 * H * H, T(0), back, nullptr);  // d(r H)
          }
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            const T* hp = hprev_of(s, bb);
            const T* z = zrh + ((t * D + d) * B + bb) * G;
            T* dz = dpre + bb * G;
            for (int64_t k = 0; k < H; ++k) {
              const double zr = z[H + k], gr = act(bb, 1, k, zr), dzh = dz[2 * H + k];
              double dgr;
              if (attrs_.linear_before_reset) {
                dgr = dzh * double(u[bb * H + k]);
                dgh[bb * H + k] = static_cast<T>(dzh * gr);  // d(u)
              } else {
                const double drh = back[bb * H + k];
                dgr = drh * (hp ? double(hp[k]) : 0.0);
                dh[bb * H + k] += static_cast<T>(drh * gr);
              }
              dz[H + k] = static_cast<T>(clipped(zr) ? 0.0 : dgr * slope(bb, 1, k, zr));
            }
            std::copy_n(dz, G, dg + (t * B + bb) * G);
          }
          // Recurrent weights and the remaining H_prev paths.
          if (attrs_.linear_before_reset) {
            Gemm<T>(false, false, B, H, H, T(1), dgh, rd + 2 * H * H, T(0), back, nullptr);  // d(u) Rh
          }
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const T* dz = dpre + bb * G;
            if (attrs_.linear_before_reset) {
              for (int64_t k = 0; k < H; ++k) dh[bb * H + k] += back[bb * H + k];
            }
            if (db) {
              T* dbd = db->data<T>() + d * 6 * H;
              for (int64_t q = 0; q < H; ++q) dbd[5 * H + q] += attrs_.linear_before_reset ? dgh[bb * H + q] : dz[2 * H + q];
            }
          }
          if (dr) {
            // z and r rows: dR += d(pre)' H_prev; h rows: d(u)' H_prev (linear_before_reset), else dzh' (r H_prev),
            // where the rows that did not run are 0 in hps and u.
            T* drd = dr->data<T>() + d * G * H;
            GemmLd<T>(true, false, 2 * H, H, B, T(1), dpre, G, hps, H, T(1), drd, H);
            if (attrs_.linear_before_reset) {
              GemmLd<T>(true, false, H, H, B, T(1), dgh, H, hps, H, T(1), drd + 2 * H * H, H);
            } else {
              GemmLd<T>(true, false, H, H, B, T(1), dpre + 2 * H, G, u, H, T(1), drd + 2 * H * H, H);
            }
          }
          // dH_prev += [dz, dr] (R_z, R_r), for the rows that ran.
          // (dpre rows are [B, 3H]; the product reads the first 2H columns of each with stride 3H)
          GemmLd<T>(false, false, B, H, 2 * H, T(1), dpre, G, rd, H, T(0), back, H);
          for (int64_t bb = 0; bb < B; ++bb) {
            if (s >= len_of(bb)) continue;
            for (int64_t k = 0; k < H; ++k) dh[bb * H + k] += back[bb * H + k];
          }
        }
        if (dh0) std::copy_n(dh, B * H, dh0->data<T>() + d * B * H);
        recurrent::InputAndBiasGradients<T>(dg, x, w, S * B, I, G, d, 2 * H, dx, dw, db);
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
