// Elementwise unary kernels: math functions and activations. Each op is a small functor; the kernels
// below apply one to every element (16-bit floats are computed in float).
#include <cmath>
#include <limits>

#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vmath.h"

namespace ontrain {
namespace cpu {
namespace {

// ---- functors: constructed from the node (for attributes), applied to a float, double or integer ----
#define ONT_SIMPLE_FN(Name, expr)                      \
  struct Name {                                        \
    explicit Name(const Node&) {}                      \
    template <typename C> C operator()(C x) const { return expr; } \
  }
ONT_SIMPLE_FN(SqrtFn, std::sqrt(x));
ONT_SIMPLE_FN(ReciprocalFn, C(1) / x);
ONT_SIMPLE_FN(ExpFn, std::exp(x));
ONT_SIMPLE_FN(LogFn, std::log(x));
ONT_SIMPLE_FN(ErfFn, std::erf(x));
ONT_SIMPLE_FN(FloorFn, std::floor(x));
ONT_SIMPLE_FN(CeilFn, std::ceil(x));
ONT_SIMPLE_FN(RoundFn, std::nearbyint(x));
ONT_SIMPLE_FN(TanhFn, std::tanh(x));
ONT_SIMPLE_FN(SoftsignFn, x / (C(1) + std::abs(x)));
ONT_SIMPLE_FN(SinFn, std::sin(x));
ONT_SIMPLE_FN(CosFn, std::cos(x));
ONT_SIMPLE_FN(TanFn, std::tan(x));
ONT_SIMPLE_FN(AsinFn, std::asin(x));
ONT_SIMPLE_FN(AcosFn, std::acos(x));
ONT_SIMPLE_FN(AtanFn, std::atan(x));
ONT_SIMPLE_FN(SinhFn, std::sinh(x));
ONT_SIMPLE_FN(CoshFn, std::cosh(x));
ONT_SIMPLE_FN(AsinhFn, std::asinh(x));
ONT_SIMPLE_FN(AcoshFn, std::acosh(x));
ONT_SIMPLE_FN(AtanhFn, std::atanh(x));
ONT_SIMPLE_FN(NegFn, static_cast<C>(-x));
ONT_SIMPLE_FN(AbsFn, static_cast<C>(x < C(0) ? -x : x));
ONT_SIMPLE_FN(SignFn, static_cast<C>(x > C(0) ? C(1) : (x < C(0) ? static_cast<C>(-1) : C(0))));
ONT_SIMPLE_FN(ReluFn, x > C(0) ? x : C(0));
#undef ONT_SIMPLE_FN

struct SigmoidFn {
  explicit SigmoidFn(const Node&) {}
  template <typename C> C operator()(C x) const {
    if (x >= C(0)) return C(1) / (C(1) + std::exp(-x));
    C e = std::exp(x);
    return e / (C(1) + e);
  }
};

struct SoftplusFn {
  explicit SoftplusFn(const Node&) {}
  template <typename C> C operator()(C x) const {
    return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  }
};

struct LeakyReluFn {
  explicit LeakyReluFn(const Node& n) : alpha(n.GetFloat("alpha", 0.01f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : static_cast<C>(alpha) * x; }
  float alpha;
};

struct EluFn {
  explicit EluFn(const Node& n) : alpha(n.GetFloat("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x >= C(0) ? x : static_cast<C>(alpha) * (std::exp(x) - C(1)); }
  float alpha;
};

struct CeluFn {
  explicit CeluFn(const Node& n) : alpha(n.GetFloat("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const {
    C a = static_cast<C>(alpha);
    return std::max(C(0), x) + std::min(C(0), a * (std::exp(x / a) - C(1)));
  }
  float alpha;
};

struct SeluFn {
  explicit SeluFn(const Node& n)
      : alpha(n.GetFloat("alpha", 1.67326319217681884765625f)), gamma(n.GetFloat("gamma", 1.05070102214813232421875f)) {}
  template <typename C> C operator()(C x) const {
    C g = static_cast<C>(gamma);
    return x > C(0) ? g * x : g * (static_cast<C>(alpha) * std::exp(x) - static_cast<C>(alpha));
  }
  float alpha, gamma;
};

struct HardSigmoidFn {
  explicit HardSigmoidFn(const Node& n) : alpha(n.GetFloat("alpha", 0.2f)), beta(n.GetFloat("beta", 0.5f)) {}
  template <typename C> C operator()(C x) const {
    const C v = static_cast<C>(alpha) * x + static_cast<C>(beta);
    return v != v ? v : std::max(C(0), std::min(C(1), v));  // NaN stays NaN (PyTorch's hardsigmoid too)
  }
  float alpha, beta;
};

struct HardSwishFn {
  explicit HardSwishFn(const Node&) {}
  template <typename C> C operator()(C x) const {
    return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
  }
};

struct ThresholdedReluFn {
  explicit ThresholdedReluFn(const Node& n) : alpha(n.GetFloat("alpha", 1.0f)) {}
  template <typename C> C operator()(C x) const { return x > static_cast<C>(alpha) ? x : C(0); }
  float alpha;
};

// Gelu: exact x * Phi(x), or the tanh approximation (ONNX Gelu approximate="tanh", com.microsoft FastGelu).
template <typename C>
C GeluExact(C x) { return C(0.5) * x * (C(1) + std::erf(x * C(M_SQRT1_2))); }
template <typename C>
C GeluTanh(C x) {
  const C k = C(0.7978845608028654);  // sqrt(2/pi)
  return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
}

struct GeluFn {
  explicit GeluFn(const Node& n) : tanh_approx(n.GetString("approximate", "none") == "tanh") {}
  template <typename C> C operator()(C x) const { return tanh_approx ? GeluTanh(x) : GeluExact(x); }
  bool tanh_approx;
};

// ---- kernels ----
Status DeclareLikeInput0(KernelContext& ctx) {
  ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
  return ctx.DeclareOutput(0, x->dtype(), x->shape());
}

// The float array version of a functor, where vmath.h has one (null otherwise).
using FloatArrayFn = void (*)(const float*, float*, int64_t);
template <typename Fn>
FloatArrayFn ArrayVersion(const Fn&) { return nullptr; }
FloatArrayFn ArrayVersion(const ExpFn&) { return VExp; }
FloatArrayFn ArrayVersion(const ErfFn&) { return VErf; }
FloatArrayFn ArrayVersion(const TanhFn&) { return VTanh; }
FloatArrayFn ArrayVersion(const SigmoidFn&) { return VSigmoid; }
FloatArrayFn ArrayVersion(const GeluFn& f) { return f.tanh_approx ? nullptr : VGelu; }

template <typename Fn>
class FloatUnary : public OpKernel {
 public:
  explicit FloatUnary(const NodeInfo& info) : fn_(*info.node) {}
  Status Prepare(KernelContext& ctx) override { return DeclareLikeInput0(ctx); }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, float>) {
        if (FloatArrayFn vf = ArrayVersion(fn_)) {
          const float* px = x.data<float>();
          float* py = y->data<float>();
          ParallelFor(ctx.thread_pool(), x.NumElements(), 20.0, [&](int64_t b, int64_t e) { vf(px + b, py + b, e - b); });
          return Status::OK();
        }
      }
      MapUnary(x.data<T>(), y->data<T>(), x.NumElements(), ctx.thread_pool(),
               [this](T v) { return static_cast<T>(fn_(static_cast<C>(v))); });
      return Status::OK();
    });
  }

 private:
  Fn fn_;
};

// For ops defined on integers too (Abs, Neg, Sign, Relu).
template <typename Fn>
class NumericUnary : public OpKernel {
 public:
  explicit NumericUnary(const NodeInfo& info) : fn_(*info.node) {}
  Status Prepare(KernelContext& ctx) override { return DeclareLikeInput0(ctx); }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool input");
      } else {
        MapUnary(x.data<T>(), y->data<T>(), x.NumElements(), ctx.thread_pool(),
                 [this](T v) { return static_cast<T>(fn_(static_cast<C>(v))); });
        return Status::OK();
      }
    });
  }

 private:
  Fn fn_;
};

class NotKernel : public OpKernel {
 public:
  explicit NotKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override { return DeclareLikeInput0(ctx); }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    MapUnary(x.data<bool>(), ctx.output(0)->data<bool>(), x.NumElements(), ctx.thread_pool(),
             [](bool v) { return !v; });
    return Status::OK();
  }
};

// IsNaN / IsInf: float in, bool out.
class FloatClassify : public OpKernel {
 public:
  FloatClassify(const NodeInfo& info, bool is_nan)
      : is_nan_(is_nan),
        neg_(info.node->GetInt("detect_negative", 1) != 0),
        pos_(info.node->GetInt("detect_positive", 1) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    return ctx.DeclareOutput(0, DType::kBool, x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    bool* y = ctx.output(0)->data<bool>();
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      MapUnary(x.data<T>(), y, x.NumElements(), ctx.thread_pool(), [this](T t) {
        double v = static_cast<double>(static_cast<ComputeType<T>>(t));
        if (is_nan_) return std::isnan(v);
        return std::isinf(v) && ((v > 0 && pos_) || (v < 0 && neg_));
      });
      return Status::OK();
    });
  }

 private:
  bool is_nan_, neg_, pos_;
};

// com.microsoft Gelu / FastGelu: optional bias (FastGelu input 1) is added along the last axis first.
class MsGeluKernel : public OpKernel {
 public:
  MsGeluKernel(const NodeInfo&, bool fast) : fast_(fast) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(DeclareLikeInput0(ctx));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1}));
    const Tensor* bias = ctx.input(1);
    const Tensor& x = *ctx.input(0);
    if (bias && (x.rank() == 0 || bias->NumElements() != x.shape().back())) {
      return InvalidArgument("bias has shape ", ShapeToString(bias->shape()), ", expected [", x.shape().back(), "]");
    }
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    const Tensor* bias = ctx.input(1);
    Tensor* y = ctx.output(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* px = x.data<T>();
      const T* pb = bias ? bias->data<T>() : nullptr;
      T* py = y->data<T>();
      int64_t n = x.NumElements(), inner = x.rank() ? x.shape().back() : 1;
      if constexpr (std::is_same_v<T, float>) {
        if (!fast_ && !pb) {
          ParallelFor(ctx.thread_pool(), n, 30.0, [&](int64_t s, int64_t e) { VGelu(px + s, py + s, e - s); });
          return Status::OK();
        }
      }
      ParallelFor(ctx.thread_pool(), n, 30.0, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) {
          C v = static_cast<C>(px[i]) + (pb ? static_cast<C>(pb[i % inner]) : C(0));
          py[i] = static_cast<T>(fast_ ? GeluTanh(v) : GeluExact(v));
        }
      });
      return Status::OK();
    });
  }

 private:
  bool fast_;
};

template <typename K>
StatusOr<std::unique_ptr<OpKernel>> Make(const NodeInfo& info) { return std::unique_ptr<OpKernel>(new K(info)); }

}  // namespace

KernelFactory kSqrt = Make<FloatUnary<SqrtFn>>;
KernelFactory kReciprocal = Make<FloatUnary<ReciprocalFn>>;
KernelFactory kExp = Make<FloatUnary<ExpFn>>;
KernelFactory kLog = Make<FloatUnary<LogFn>>;
KernelFactory kErf = Make<FloatUnary<ErfFn>>;
KernelFactory kFloor = Make<FloatUnary<FloorFn>>;
KernelFactory kCeil = Make<FloatUnary<CeilFn>>;
KernelFactory kRound = Make<FloatUnary<RoundFn>>;
KernelFactory kTanh = Make<FloatUnary<TanhFn>>;
KernelFactory kSoftsign = Make<FloatUnary<SoftsignFn>>;
KernelFactory kSin = Make<FloatUnary<SinFn>>;
KernelFactory kCos = Make<FloatUnary<CosFn>>;
KernelFactory kTan = Make<FloatUnary<TanFn>>;
KernelFactory kAsin = Make<FloatUnary<AsinFn>>;
KernelFactory kAcos = Make<FloatUnary<AcosFn>>;
KernelFactory kAtan = Make<FloatUnary<AtanFn>>;
KernelFactory kSinh = Make<FloatUnary<SinhFn>>;
KernelFactory kCosh = Make<FloatUnary<CoshFn>>;
KernelFactory kAsinh = Make<FloatUnary<AsinhFn>>;
KernelFactory kAcosh = Make<FloatUnary<AcoshFn>>;
KernelFactory kAtanh = Make<FloatUnary<AtanhFn>>;
KernelFactory kSigmoid = Make<FloatUnary<SigmoidFn>>;
KernelFactory kSoftplus = Make<FloatUnary<SoftplusFn>>;
KernelFactory kLeakyRelu = Make<FloatUnary<LeakyReluFn>>;
KernelFactory kElu = Make<FloatUnary<EluFn>>;
KernelFactory kCelu = Make<FloatUnary<CeluFn>>;
KernelFactory kSelu = Make<FloatUnary<SeluFn>>;
KernelFactory kHardSigmoid = Make<FloatUnary<HardSigmoidFn>>;
KernelFactory kHardSwish = Make<FloatUnary<HardSwishFn>>;
KernelFactory kThresholdedRelu = Make<FloatUnary<ThresholdedReluFn>>;
KernelFactory kGelu = Make<FloatUnary<GeluFn>>;
KernelFactory kNeg = Make<NumericUnary<NegFn>>;
KernelFactory kAbs = Make<NumericUnary<AbsFn>>;
KernelFactory kSign = Make<NumericUnary<SignFn>>;
KernelFactory kRelu = Make<NumericUnary<ReluFn>>;
KernelFactory kNot = Make<NotKernel>;
KernelFactory kIsNaN = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new FloatClassify(i, true));
};
KernelFactory kIsInf = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new FloatClassify(i, false));
};
KernelFactory kMsGelu = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new MsGeluKernel(i, false));
};
KernelFactory kMsFastGelu = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new MsGeluKernel(i, true));
};

}  // namespace cpu
}  // namespace ontrain
