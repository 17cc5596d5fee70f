// The recurrent layers LSTM, GRU and RNN (ONNX, opsets 7 on, layouts 0 and 1) with their training forms and
// gradients. LSTM: com.microsoft LSTMTraining (ONNX Runtime's training form: layout
// 0, and two more outputs that the gradient reads: every step's cell state and gate pre-activations) and
// com.microsoft LSTMGrad (back-propagation through time).
//
// Gates in ONNX's order i, o, f, c. Per step, for each direction and batch row:
//   i = f(Xt Wi' + H Ri' + Pi C + Wbi + Rbi)     f = f(... Pf C ...)  (or 1 - i with input_forget)
//   c~ = g(Xt Wc' + H Rc' + Wbc + Rbc)            C' = f C + i c~
//   o = f(Xt Wo' + H Ro' + Po C' + Wbo + Rbo)     H' = o h(C')
// with clip (when set) bounding the four pre-activations. Rows whose sequence is shorter than the step
// keep their state and output zeros; the reverse direction runs each row from its own last step. X W' for
// every step is one GEMM before the loop, H R' one GEMM per step; LSTMGrad collects the pre-activation
// gradients of all steps and forms dX and dW with one GEMM each at the end.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

// One of ONNX's RNN activations, with its derivative from the pre-activation.
struct Activation {
  enum Kind { kSigmoid, kTanh, kRelu, kHardSigmoid, kLeakyRelu, kThresholdedRelu, kScaledTanh, kAffine, kElu,
              kSoftsign, kSoftplus } kind = kSigmoid;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case kTanh: return std::tanh(x);
      case kRelu: return x > 0 ? x : 0;
      case kHardSigmoid: return std::min(1.0, std::max(0.0, alpha * x + beta));
      case kLeakyRelu: return x >= 0 ? x : alpha * x;
      case kThresholdedRelu: return x > alpha ? x : 0;
      case kScaledTanh: return alpha * std::tanh(beta * x);
      case kAffine: return alpha * x + beta;
      case kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case kSoftsign: return x / (1 + std::abs(x));
      case kSoftplus: return std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0);
    }
    return 0;
  }
  double Derivative(double x) const {
    switch (kind) {
      case kSigmoid: {
        const double s = 1.0 / (1.0 + std::exp(-x));
        return s * (1 - s);
      }
      case kTanh: {
        const double t = std::tanh(x);
        return 1 - t * t;
      }
      case kRelu: return x > 0 ? 1 : 0;
      case kHardSigmoid: {
        const double v = alpha * x + beta;
        return v > 0 && v < 1 ? alpha : 0;
      }
      case kLeakyRelu: return x >= 0 ? 1 : alpha;
      case kThresholdedRelu: return x > alpha ? 1 : 0;
      case kScaledTanh: {
        const double t = std::tanh(beta * x);
        return alpha * beta * (1 - t * t);
      }
      case kAffine: return alpha;
      case kElu: return x >= 0 ? 1 : alpha * std::exp(x);
      case kSoftsign: {
        const double d = 1 + std::abs(x);
        return 1 / (d * d);
      }
      case kSoftplus: return 1.0 / (1.0 + std::exp(-x));
    }
    return 0;
  }
};

// The attributes of an LSTM node, checked.
struct LstmAttrs {
  int64_t hidden = 0, directions = 1, layout = 0;
  bool reverse_only = false, input_forget = false;
  double clip = 0;  // 0: none
  Activation act[2][3];  // per direction: LSTM f, g, h; GRU f, g; RNN f
  bool linear_before_reset = false;  // GRU

  // `count` activations per direction, by default `defaults` (LSTM: Sigmoid, Tanh, Tanh; GRU: Sigmoid, Tanh;
  // RNN: Tanh).
  static StatusOr<LstmAttrs> FromNode(const Node& n, int count = 3,
                                      std::vector<std::string> defaults = {"Sigmoid", "Tanh", "Tanh"}) {
    LstmAttrs a;
    a.linear_before_reset = n.GetInt("linear_before_reset", 0) != 0;
    a.hidden = n.GetInt("hidden_size", 0);
    if (a.hidden <= 0) return InvalidArgument("hidden_size must be set and positive");
    const std::string dir = n.GetString("direction", "forward");
    if (dir == "bidirectional") a.directions = 2;
    else if (dir == "reverse") a.reverse_only = true;
    else if (dir != "forward") return InvalidArgument("direction \"", dir, "\" is not forward, reverse or bidirectional");
    a.layout = n.GetInt("layout", 0);
    if (a.layout != 0 && a.layout != 1) return InvalidArgument("layout must be 0 or 1");
    a.input_forget = n.GetInt("input_forget", 0) != 0;
    if (n.HasAttribute("clip")) {
      a.clip = n.GetFloat("clip", 0.0f);
      if (!(a.clip > 0)) return InvalidArgument("clip must be positive, got ", a.clip);
    }
    std::vector<std::string> names;
    if (n.HasAttribute("activations")) {
      for (const std::string& s : n.attributes.at("activations").strings()) names.push_back(s);
    }
    if (names.empty()) names = defaults;
    if (static_cast<int>(names.size()) == count && a.directions == 2) {  // one list for both directions
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (static_cast<int64_t>(names.size()) != count * a.directions) {
      return InvalidArgument("activations lists ", names.size(), " functions, expected ", count * a.directions);
    }
    std::vector<float> alphas, betas;
    if (n.HasAttribute("activation_alpha")) for (float v : n.attributes.at("activation_alpha").floats()) alphas.push_back(v);
    if (n.HasAttribute("activation_beta")) for (float v : n.attributes.at("activation_beta").floats()) betas.push_back(v);
    size_t ai = 0, bi = 0;
    for (int64_t k = 0; k < count * a.directions; ++k) {
      Activation& f = a.act[k / count][k % count];
      const std::string& s = names[k];
      auto take = [](const std::vector<float>& v, size_t* i, double dflt) { return *i < v.size() ? v[(*i)++] : dflt; };
      if (s == "Sigmoid") f.kind = Activation::kSigmoid;
      else if (s == "Tanh") f.kind = Activation::kTanh;
      else if (s == "Relu") f.kind = Activation::kRelu;
      else if (s == "Softsign") f.kind = Activation::kSoftsign;
      else if (s == "Softplus") f.kind = Activation::kSoftplus;
      else if (s == "HardSigmoid") {
        f.kind = Activation::kHardSigmoid;
        f.alpha = take(alphas, &ai, 0.2);
        f.beta = take(betas, &bi, 0.5);
      } else if (s == "LeakyRelu") {
        f.kind = Activation::kLeakyRelu;
        f.alpha = take(alphas, &ai, 0.01);
      } else if (s == "ThresholdedRelu") {
        f.kind = Activation::kThresholdedRelu;
        f.alpha = take(alphas, &ai, 1.0);
      } else if (s == "ScaledTanh") {
        f.kind = Activation::kScaledTanh;
        f.alpha = take(alphas, &ai, 1.0);
        f.beta = take(betas, &bi, 1.0);
      } else if (s == "Affine") {
        f.kind = Activation::kAffine;
        f.alpha = take(alphas, &ai, 1.0);
        f.beta = take(betas, &bi, 0.0);
      } else if (s == "Elu") {
        f.kind = Activation::kElu;
        f.alpha = take(alphas, &ai, 1.0);
      } else {
        return InvalidArgument("activation \"", s, "\" is not one of ONNX's RNN activations");
      }
    }
    return a;
  }
};

// Shapes of one LSTM call in layout 0: X [seq, batch, input], W [dirs, 4H, input], R [dirs, 4H, H].
struct LstmDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;

  // `gates`: 4 for LSTM, 3 for GRU, 1 for RNN.
  Status Check(const LstmAttrs& a, const Tensor& x, const Tensor& w, const Tensor& r, int64_t gates = 4) {
    if (x.rank() != 3) return InvalidArgument("X must have rank 3, got ", ShapeToString(x.shape()));
    seq = a.layout ? x.dim(1) : x.dim(0);
    batch = a.layout ? x.dim(0) : x.dim(1);
    input = x.dim(2);
    hidden = a.hidden;
    dirs = a.directions;
    if (w.shape() != Shape{dirs, gates * hidden, input}) {
      return InvalidArgument("W has shape ", ShapeToString(w.shape()), ", expected [", dirs, ",", gates * hidden, ",", input, "]");
    }
    if (r.shape() != Shape{dirs, gates * hidden, hidden}) {
      return InvalidArgument("R has shape ", ShapeToString(r.shape()), ", expected [", dirs, ",", gates * hidden, ",", hidden, "]");
    }
    return Status::OK();
  }
};

const Tensor* Optional(const KernelContext& ctx, int i) {
  const Tensor* t = ctx.input(i);
  return t && t->NumElements() > 0 ? t : nullptr;
}

// Sequence length of batch row b: sequence_lens[b], or every step without that input.
int64_t SeqLen(const Tensor* sl, int64_t b, int64_t steps) {
  if (!sl) return steps;
  return sl->dtype() == DType::kInt64 ? sl->data<int64_t>()[b] : sl->data<int32_t>()[b];
}

// The inputs every recurrent op shares: B [D, bias] (input 3), sequence_lens [batch] within [0, seq] (input
// 4), and the initial states at `states` ([D, batch, H], or [batch, D, H] in layout 1).
Status CheckRecurrentInputs(const KernelContext& ctx, const LstmAttrs& a, const LstmDims& n, int64_t bias,
                            std::initializer_list<int> states) {
  const int64_t D = n.dirs, B = n.batch, H = n.hidden, S = n.seq;
  if (const Tensor* b = Optional(ctx, 3); b && b->shape() != Shape{D, bias}) {
    return InvalidArgument("B has shape ", ShapeToString(b->shape()), ", expected [", D, ",", bias, "]");
  }
  if (const Tensor* sl = Optional(ctx, 4)) {
    if (sl->shape() != Shape{B}) return InvalidArgument("sequence_lens has shape ", ShapeToString(sl->shape()), ", expected [", B, "]");
    ONT_ASSIGN_OR_RETURN(Shape lens, ReadInts(*sl, "sequence_lens"));
    for (int64_t bb = 0; bb < B; ++bb) {
      if (lens[bb] < 0 || lens[bb] > S) return InvalidArgument("sequence_lens[", bb, "] = ", lens[bb], " is outside [0, ", S, "]");
    }
  }
  const Shape state = a.layout ? Shape{B, D, H} : Shape{D, B, H};
  for (int i : states) {
    if (const Tensor* st = Optional(ctx, i); st && st->shape() != state) {
      return InvalidArgument(i == 5 ? "initial_h" : "initial_c", " has shape ", ShapeToString(st->shape()), ", expected ",
                             ShapeToString(state));
    }
  }
  return Status::OK();
}

// [a, b, inner] -> [b, a, inner]: layout 1's X and initial states into layout 0, and final states back.
template <typename T>
void SwapOuter(const T* src, int64_t a, int64_t b, int64_t inner, T* dst) {
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) std::copy_n(src + (i * b + j) * inner, inner, dst + (j * a + i) * inner);
}

// Y [S, D, B, H] (layout 0) -> [B, S, D, H] (layout 1).
template <typename T>
void YToBatchFirst(const T* y, int64_t S, int64_t D, int64_t B, int64_t H, T* out) {
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t bb = 0; bb < B; ++bb) std::copy_n(y + ((s * D + d) * B + bb) * H, H, out + ((bb * S + s) * D + d) * H);
}

// The forward pass over layout-0 data for one direction `d`: x [seq, batch, input]; writes every step's
// hidden state into y (may be null), cell state into call and clipped pre-activations into gates (both may be
// null), and the final states. `xw` is scratch [seq, batch, 4H], `pre` [batch, 4H].
template <typename T>
void LstmDirection(const LstmAttrs& a, const LstmDims& n, int64_t d, const T* x, const T* w, const T* r, const T* b,
                   const int64_t* lens, const T* h0, const T* c0, const T* p, T* y, T* yh, T* yc, T* call, T* gates,
                   T* xw, T* pre, T* h, T* c) {
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
      ONT_ASSIGN_OR_RETURN(attrs_, LstmAttrs::FromNode(node_));
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
    // scratch: xw [S, B, 4H], pre [B, 4H], h, c [B, H], lens [B]; layout 1: x, y, h0, c0, yh, yc transposed
    int64_t elems = S * B * 4 * H + B * 4 * H + 2 * B * H;
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
      T* extra = c + B * H;
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
                         p ? p->data<T>() : nullptr, y, yh, yc, call, gates, xw, pre, h, c);
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
  LstmAttrs attrs_;
  LstmDims n_;
};

// LSTMGrad(X, W, R, SL, H0, C0, HAll, CAll, iofc, dHAll, dHFinal, dCFinal[, P]) -> dX, dW, dR, dB, dH0, dC0,
// dP: ONNX Runtime's inputs and outputs (iofc here holds LSTMTraining's clipped pre-activations, so the bias
// is not needed), plus ontrain's input 12, the peephole weights, given when the LSTM has them.
class LstmGradKernel : public OpKernel {
 public:
  explicit LstmGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, LstmAttrs::FromNode(node_));
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
    // and dpre R [B, H]
    ctx.RequestScratch(static_cast<size_t>(S * B * 4 * H + 3 * B * H + B * 4 * H) * DTypeSize(x->dtype()));
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
        std::fill(dg, dg + S * B * G, T(0));
        for (int64_t j = 0; j < B * H; ++j) {
          dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
          dc[j] = dyc ? dyc->data<T>()[d * B * H + j] : T(0);
        }
        for (int64_t s = S - 1; s >= 0; --s) {
          std::fill(dpre, dpre + B * G, T(0));
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            const int64_t tp = reverse ? t + 1 : t - 1;  // the step before in processing order
            const bool first = s == 0;
            const T* z = iofc + ((t * D + d) * B + bb) * G;
            const T* cn = call + ((t * D + d) * B + bb) * H;
            const T* cprev = first ? (c0 ? c0->data<T>() + (d * B + bb) * H : nullptr) : call + ((tp * D + d) * B + bb) * H;
            T* dhr = dh + bb * H;
            T* dcr = dc + bb * H;
            if (dyall) {
              const T* gy = dyall->data<T>() + ((t * D + d) * B + bb) * H;
              for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
            }
            T* dz = dpre + bb * G;
            for (int64_t k = 0; k < H; ++k) {
              const double zi = z[k], zo = z[H + k], zf = z[2 * H + k], zc = z[3 * H + k];
              const double gi = f(zi), gf = attrs_.input_forget ? 1 - gi : f(zf), gc = g(zc), go = f(zo);
              const double c = cn[k], cp = cprev ? double(cprev[k]) : 0.0;
              const double hc = hact(c);
              const double dho = double(dhr[k]);
              const double dzo = clipped(zo) ? 0.0 : dho * hc * f.Derivative(zo);
              double dcell = double(dcr[k]) + dho * go * hact.Derivative(c);
              if (pp) dcell += dzo * double(pp[H + k]);
              double dgi = dcell * gc, dgf = dcell * cp;
              const double dgc = dcell * gi;
              double dcp = dcell * gf;
              double dzf = 0;
              if (attrs_.input_forget) {
                dgi -= dgf;
              } else {
                dzf = clipped(zf) ? 0.0 : dgf * f.Derivative(zf);
              }
              const double dzi = clipped(zi) ? 0.0 : dgi * f.Derivative(zi);
              const double dzc = clipped(zc) ? 0.0 : dgc * g.Derivative(zc);
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
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            const int64_t tp = reverse ? t + 1 : t - 1;
            const T* hprev = s == 0 ? (h0 ? h0->data<T>() + (d * B + bb) * H : nullptr) : hall + ((tp * D + d) * B + bb) * H;
            const T* dz = dpre + bb * G;
            if (dr && hprev) {
              T* drd = dr->data<T>() + d * G * H;
              for (int64_t q = 0; q < G; ++q) {
                const T v = dz[q];
                if (v == T(0)) continue;
                for (int64_t k = 0; k < H; ++k) drd[q * H + k] += v * hprev[k];
              }
            }
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
        if (dx) Gemm<T>(false, false, S * B, I, G, T(1), dg, w.data<T>() + d * G * I, T(1), dx->data<T>(), nullptr);
        if (dw) Gemm<T>(true, false, G, I, S * B, T(1), dg, x.data<T>(), T(1), dw->data<T>() + d * G * I, nullptr);
        if (db) {
          T* dbd = db->data<T>() + d * 8 * H;
          for (int64_t q = 0; q < G; ++q) {
            double sum = 0;
            for (int64_t row = 0; row < S * B; ++row) sum += dg[row * G + q];
            dbd[q] = static_cast<T>(sum);
            dbd[G + q] = static_cast<T>(sum);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  bool parsed_ = false;
  LstmAttrs attrs_;
  LstmDims n_;
};


// ---- GRU ----
// Gates z, r, h. Per step: z = f(Xt Wz' + H Rz' + Wbz + Rbz), r = f(Xt Wr' + H Rr' + Wbr + Rbr),
// h~ = g(Xt Wh' + (r H) Rh' + Rbh + Wbh), or with linear_before_reset g(Xt Wh' + r (H Rh' + Rbh) + Wbh);
// H' = (1 - z) h~ + z H. GRUTraining's third output keeps the clipped pre-activations [S, D, B, 3H].

template <typename T>
void GruDirection(const LstmAttrs& a, const LstmDims& n, int64_t d, const T* x, const T* w, const T* r, const T* b,
                  const int64_t* lens, const T* h0, T* y, T* yh, T* zrh, T* xw, T* hr, T* rh, T* h) {
  const int64_t H = n.hidden, G = 3 * H, B = n.batch, S = n.seq;
  const bool reverse = a.reverse_only || d == 1;
  const Activation &f = a.act[d][0], &g = a.act[d][1];
  const T* rd = r + d * G * H;
  Gemm<T>(false, true, S * B, G, n.input, T(1), x, w + d * G * n.input, T(0), xw, nullptr);
  for (int64_t j = 0; j < B * H; ++j) h[j] = h0 ? h0[d * B * H + j] : T(0);
  const T* wb = b ? b + d * 6 * H : nullptr;
  auto clip = [&](double v) { return a.clip > 0 ? std::min(a.clip, std::max(-a.clip, v)) : v; };
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
      for (int64_t k = 0; k < H; ++k) rh[bb * H + k] = static_cast<T>(f(out[H + k]) * double(h[bb * H + k]));
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
        const double gr = f(out[H + k]);
        double zh = double(xr[2 * H + k]);
        if (wb) zh += double(wb[2 * H + k]);
        if (a.linear_before_reset) {
          zh += gr * (double(pr[2 * H + k]) + (wb ? double(wb[5 * H + k]) : 0.0));
        } else {
          zh += double(pr[2 * H + k]) + (wb ? double(wb[5 * H + k]) : 0.0);
        }
        zh = clip(zh);
        out[2 * H + k] = static_cast<T>(zh);
        const double gz = f(out[k]);
        hrow[k] = static_cast<T>((1 - gz) * g(zh) + gz * double(hrow[k]));
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
      ONT_ASSIGN_OR_RETURN(attrs_, LstmAttrs::FromNode(node_, 2, {"Sigmoid", "Tanh"}));
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
    // scratch: lens [B]; xw [S, B, 3H], hr [B, 3H], rh [B, H], h [B, H], zrh [S, D, B, 3H] when not an output;
    // layout 1: x, y, h0, yh transposed
    int64_t elems = S * B * 3 * H + B * 3 * H + 2 * B * H + S * D * B * 3 * H;
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
      T* extra = zrh_scratch + S * D * B * 3 * H;
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
                        xw, hr, rh, h);
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
  LstmAttrs attrs_;
  LstmDims n_;
};

// GRUGrad(X, W, R, B, SL, H0, HAll, zrh, dHAll, dHFinal) -> dX, dW, dR, dB, dH0 (ONNX Runtime's inputs and
// outputs; zrh holds GRUTraining's clipped pre-activations).
class GruGradKernel : public OpKernel {
 public:
  explicit GruGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, LstmAttrs::FromNode(node_, 2, {"Sigmoid", "Tanh"}));
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
    // scratch: dG [S, B, 3H], dh [B, H], dpre [B, 3H], u [B, H] (H Rh' + Rbh, or r H), back [B, H], dgh [B, H]
    ctx.RequestScratch(static_cast<size_t>(S * B * 3 * H + 4 * B * H + B * 3 * H) * DTypeSize(x->dtype()));
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
        std::fill(dg, dg + S * B * G, T(0));
        for (int64_t j = 0; j < B * H; ++j) dh[j] = dyh ? dyh->data<T>()[d * B * H + j] : T(0);
        auto hprev_of = [&](int64_t s, int64_t bb) -> const T* {
          const int64_t len = len_of(bb), t = reverse ? len - 1 - s : s, tp = reverse ? t + 1 : t - 1;
          if (s == 0) return h0 ? h0->data<T>() + (d * B + bb) * H : nullptr;
          return hall + ((tp * D + d) * B + bb) * H;
        };
        for (int64_t s = S - 1; s >= 0; --s) {
          // u: the h gate's recurrent term, H_prev Rh' + Rbh (linear_before_reset) or r H_prev (the product's input)
          std::fill(dpre, dpre + B * G, T(0));
          std::fill(u, u + B * H, T(0));
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            const T* hp = hprev_of(s, bb);
            const T* z = zrh + ((t * D + d) * B + bb) * G;
            if (attrs_.linear_before_reset) {
              for (int64_t k = 0; k < H; ++k) {
                double acc = rbh ? double(rbh[k]) : 0.0;
                if (hp) for (int64_t q = 0; q < H; ++q) acc += double(rd[(2 * H + k) * H + q]) * hp[q];
                u[bb * H + k] = static_cast<T>(acc);
              }
            } else {
              for (int64_t k = 0; k < H; ++k) u[bb * H + k] = static_cast<T>(f(z[H + k]) * (hp ? double(hp[k]) : 0.0));
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
              const double gz = f(zz), hh = g(zh), hpk = hp ? double(hp[k]) : 0.0, dH = dhr[k];
              dz[k] = static_cast<T>(clipped(zz) ? 0.0 : dH * (hpk - hh) * f.Derivative(zz));
              dz[2 * H + k] = static_cast<T>(clipped(zh) ? 0.0 : dH * (1 - gz) * g.Derivative(zh));
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
              const double zr = z[H + k], gr = f(zr), dzh = dz[2 * H + k];
              double dgr;
              if (attrs_.linear_before_reset) {
                dgr = dzh * double(u[bb * H + k]);
                dgh[bb * H + k] = static_cast<T>(dzh * gr);  // d(u)
              } else {
                const double drh = back[bb * H + k];
                dgr = drh * (hp ? double(hp[k]) : 0.0);
                dh[bb * H + k] += static_cast<T>(drh * gr);
              }
              dz[H + k] = static_cast<T>(clipped(zr) ? 0.0 : dgr * f.Derivative(zr));
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
            const T* hp = hprev_of(s, bb);
            const T* dz = dpre + bb * G;
            if (attrs_.linear_before_reset) {
              for (int64_t k = 0; k < H; ++k) dh[bb * H + k] += back[bb * H + k];
            }
            if (dr) {
              T* drd = dr->data<T>() + d * G * H;
              for (int64_t q = 0; q < 2 * H; ++q) {  // z and r rows: d(pre)' H_prev
                if (!hp || dz[q] == T(0)) continue;
                for (int64_t k = 0; k < H; ++k) drd[q * H + k] += dz[q] * hp[k];
              }
              for (int64_t q = 0; q < H; ++q) {  // h rows: d(u)' H_prev, or dzh' (r H_prev)
                const T v = attrs_.linear_before_reset ? dgh[bb * H + q] : dz[2 * H + q];
                if (v == T(0)) continue;
                const T* src = attrs_.linear_before_reset ? hp : u + bb * H;
                if (!src) continue;
                for (int64_t k = 0; k < H; ++k) drd[(2 * H + q) * H + k] += v * src[k];
              }
            }
            if (db) {
              T* dbd = db->data<T>() + d * 6 * H;
              for (int64_t q = 0; q < H; ++q) dbd[5 * H + q] += attrs_.linear_before_reset ? dgh[bb * H + q] : dz[2 * H + q];
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
        if (dx) Gemm<T>(false, false, S * B, I, G, T(1), dg, w.data<T>() + d * G * I, T(1), dx->data<T>(), nullptr);
        if (dw) Gemm<T>(true, false, G, I, S * B, T(1), dg, x.data<T>(), T(1), dw->data<T>() + d * G * I, nullptr);
        if (db) {
          T* dbd = db->data<T>() + d * 6 * H;
          for (int64_t q = 0; q < G; ++q) {
            double sum = 0;
            for (int64_t row = 0; row < S * B; ++row) sum += dg[row * G + q];
            dbd[q] = static_cast<T>(sum);
            if (q < 2 * H) dbd[3 * H + q] = static_cast<T>(sum);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  bool parsed_ = false;
  LstmAttrs attrs_;
  LstmDims n_;
};

// ---- RNN ----
// H' = f(Xt Wi' + H Ri' + Wbi + Rbi), clip bounding the pre-activation. RNNGrad(X, W, R, B, SL, H0, Y, dY,
// dY_h) -> dX, dW, dR, dB, dH0 (ontrain's: ONNX Runtime has no RNN gradient) recomputes each step's
// pre-activation from Y, the previous hidden states.

template <typename T>
void RnnPre(const LstmDims& n, int64_t d, const T* b, const T* hprev, const T* rd, const T* xrow, T* out, double clip) {
  const int64_t H = n.hidden;
  for (int64_t k = 0; k < H; ++k) {
    double z = double(xrow[k]);
    if (b) z += double(b[d * 2 * H + k]) + b[d * 2 * H + H + k];
    if (hprev) for (int64_t q = 0; q < H; ++q) z += double(rd[k * H + q]) * hprev[q];
    out[k] = static_cast<T>(clip > 0 ? std::min(clip, std::max(-clip, z)) : z);
  }
}

class RnnKernel : public OpKernel {
 public:
  explicit RnnKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, LstmAttrs::FromNode(node_, 1, {"Tanh"}));
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
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s;
            RnnPre<T>(n_, d, b ? b->data<T>() : nullptr, h + bb * H, rd, xw + (t * B + bb) * H, pre + bb * H, attrs_.clip);
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
  LstmAttrs attrs_;
  LstmDims n_;
};

class RnnGradKernel : public OpKernel {
 public:
  explicit RnnGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, LstmAttrs::FromNode(node_, 1, {"Tanh"}));
      if (attrs_.layout != 0) return InvalidArgument("RNNGrad takes layout 0 only");
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 2, "R"));
    ONT_RETURN_IF_ERROR(n_.Check(attrs_, *x, *w, *r, 1));
    const int64_t D = n_.dirs, B = n_.batch, H = n_.hidden, S = n_.seq;
    ONT_ASSIGN_OR_RETURN(const Tensor* yall, RequireInput(ctx, 6, "Y"));
    if (yall->shape() != Shape{S, D, B, H}) return InvalidArgument("Y has shape ", ShapeToString(yall->shape()));
    // scratch: xw [S, B, H], dG [S, B, H], dh [B, H], dpre [B, H], back [B, H], pre [H]
    ctx.RequestScratch(static_cast<size_t>(2 * S * B * H + 3 * B * H + H) * DTypeSize(x->dtype()));
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
      T* pre = back + B * H;
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
        for (int64_t s = S - 1; s >= 0; --s) {
          std::fill(dpre, dpre + B * H, T(0));
          for (int64_t bb = 0; bb < B; ++bb) {
            const int64_t len = len_of(bb);
            if (s >= len) continue;
            const int64_t t = reverse ? len - 1 - s : s, tp = reverse ? t + 1 : t - 1;
            const T* hp = s == 0 ? (h0 ? h0->data<T>() + (d * B + bb) * H : nullptr) : yall + ((tp * D + d) * B + bb) * H;
            RnnPre<T>(n_, d, b ? b->data<T>() : nullptr, hp, rd, xw + (t * B + bb) * H, pre, attrs_.clip);
            T* dhr = dh + bb * H;
            if (dyall) {
              const T* gy = dyall->data<T>() + ((t * D + d) * B + bb) * H;
              for (int64_t k = 0; k < H; ++k) dhr[k] += gy[k];
            }
            for (int64_t k = 0; k < H; ++k) {
              const double z = pre[k];
              const bool clipped = attrs_.clip > 0 && (z >= attrs_.clip || z <= -attrs_.clip);
              dpre[bb * H + k] = static_cast<T>(clipped ? 0.0 : double(dhr[k]) * f.Derivative(z));
            }
            std::copy_n(dpre + bb * H, H, dg + (t * B + bb) * H);
            if (dr && hp) {
              T* drd = dr->data<T>() + d * H * H;
              for (int64_t q = 0; q < H; ++q)
                for (int64_t k = 0; k < H; ++k) drd[q * H + k] += dpre[bb * H + q] * hp[k];
            }
          }
          Gemm<T>(false, false, B, H, H, T(1), dpre, rd, T(0), back, nullptr);
          for (int64_t bb = 0; bb < B; ++bb) {
            if (s >= len_of(bb)) continue;
            std::copy_n(back + bb * H, H, dh + bb * H);
          }
        }
        if (dh0) std::copy_n(dh, B * H, dh0->data<T>() + d * B * H);
        if (dx) Gemm<T>(false, false, S * B, I, H, T(1), dg, w.data<T>() + d * H * I, T(1), dx->data<T>(), nullptr);
        if (dw) Gemm<T>(true, false, H, I, S * B, T(1), dg, x.data<T>(), T(1), dw->data<T>() + d * H * I, nullptr);
        if (db) {
          T* dbd = db->data<T>() + d * 2 * H;
          for (int64_t q = 0; q < H; ++q) {
            double sum = 0;
            for (int64_t row = 0; row < S * B; ++row) sum += dg[row * H + q];
            dbd[q] = dbd[H + q] = static_cast<T>(sum);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  bool parsed_ = false;
  LstmAttrs attrs_;
  LstmDims n_;
};
}  // namespace

KernelFactory kLstm = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new LstmKernel(i, false));
};
KernelFactory kLstmTraining = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new LstmKernel(i, true));
};
KernelFactory kLstmGrad = MakeKernel<LstmGradKernel>;
KernelFactory kGru = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new GruKernel(i, false));
};
KernelFactory kGruTraining = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new GruKernel(i, true));
};
KernelFactory kGruGrad = MakeKernel<GruGradKernel>;
KernelFactory kRnn = MakeKernel<RnnKernel>;
KernelFactory kRnnGrad = MakeKernel<RnnGradKernel>;

}  // namespace cpu
}  // namespace ontrain
