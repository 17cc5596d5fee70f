// Gradient kernels of elementwise ops (com.microsoft domain, as ONNX Runtime's gradient builder emits them):
// ReluGrad, SigmoidGrad, TanhGrad, GeluGrad, FastGeluGrad, LeakyReluGrad, DropoutGrad, and Scale; and
// ai.ontrain ClipGrad, which the executor fuses from Clip's gradient, and GeluAndSlope and GeluSlopeGrad,
// which it makes of a Gelu and its GeluGrad (engine/kernel_fusion.h).
#include <cmath>
#include <limits>

#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vmath.h"

namespace ontrain {
namespace cpu {
namespace {

enum class GradKind { kRelu, kSigmoid, kTanh, kGelu, kFastGelu, kLeakyRelu };

// (dY, X or Y) -> dX, same shape.
class ActivationGradKernel : public OpKernel {
 public:
  ActivationGradKernel(const NodeInfo& info, GradKind kind) : kind_(kind), alpha_(info.node->GetFloat("alpha", 0.01f)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    if (dy->shape() != x->shape() || dy->dtype() != x->dtype()) {
      return InvalidArgument("dY ", DTypeName(dy->dtype()), ShapeToString(dy->shape()), " and input ",
                             DTypeName(x->dtype()), ShapeToString(x->shape()), " must match");
    }
    return ctx.DeclareOutput(0, dy->dtype(), dy->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &x = *ctx.input(1);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T *pd = dy.data<T>(), *px = x.data<T>();
      T* out = ctx.output(0)->data<T>();
      GradKind kind = kind_;
      C alpha = static_cast<C>(alpha_);
      if constexpr (std::is_same_v<T, float>) {
        if (kind == GradKind::kGelu) {
          ParallelFor(ctx.thread_pool(), dy.NumElements(), 30.0,
                      [&](int64_t s, int64_t e) { VGeluGrad(pd + s, px + s, out + s, e - s); });
          return Status::OK();
        }
      }
      // One loop per kind (the kind switch outside), so the simple ones vectorize.
      auto run = [&](auto f) {
        ParallelFor(ctx.thread_pool(), dy.NumElements(), 20.0, [&](int64_t s, int64_t e) {
          BinaryLoop(pd + s, 1, px + s, 1, out + s, e - s,
                     [&f](T g, T v) { return static_cast<T>(f(static_cast<C>(g), static_cast<C>(v))); });
        });
      };
      switch (kind) {
        case GradKind::kRelu: run([](C g, C v) { return v > C(0) ? g : C(0); }); break;
        case GradKind::kSigmoid: run([](C g, C v) { return g * v * (C(1) - v); }); break;
        case GradKind::kTanh: run([](C g, C v) { return g * (C(1) - v * v); }); break;
        case GradKind::kLeakyRelu: run([alpha](C g, C v) { return v > C(0) ? g : alpha * g; }); break;
        case GradKind::kGelu:
          run([](C g, C v) {
            return g * (C(0.5) * (std::erf(v * C(M_SQRT1_2)) + C(1)) + v * std::exp(-v * v / C(2)) * C(0.3989422804014327));
          });
          break;
        case GradKind::kFastGelu:
          run([](C g, C v) {
            const C a = C(0.7978845608028654), k = C(0.044715);
            C t = std::tanh(a * (v + k * v * v * v));
            return g * C(0.5) * (C(1) + t + (C(1) - t * t) * (a * v + C(3) * k * a * v * v * v));
          });
          break;
      }
      return Status::OK();
    });
  }

 private:
  GradKind kind_;
  float alpha_;
};

// ai.ontrain ClipGrad(dY, X, min?, max?, fill) -> dX = (min <= X and X <= max) ? dY : fill, dY and X of one
// dtype and broadcast together, min, max and fill scalars, at least one bound given. It computes
// Where(And(GreaterOrEqual(X, min), LessOrEqual(X, max)), dY, fill) (or the Where of one comparison) in one
// pass. An absent bound is an infinite one, whose test fails only where X is NaN, as the other bound's does.
class ClipGradKernel : public OpKernel {
 public:
  explicit ClipGradKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* fill, RequireInput(ctx, 4, "fill"));
    if (dy->dtype() != x->dtype()) {
      return InvalidArgument("dY ", DTypeName(dy->dtype()), " and X ", DTypeName(x->dtype()), " must have one dtype");
    }
    lo_ = -std::numeric_limits<double>::infinity();
    hi_ = std::numeric_limits<double>::infinity();
    if (const Tensor* t = ctx.input(2)) {
      ONT_ASSIGN_OR_RETURN(lo_, ReadScalar(*t, "min"));
    }
    if (const Tensor* t = ctx.input(3)) {
      ONT_ASSIGN_OR_RETURN(hi_, ReadScalar(*t, "max"));
    }
    ONT_ASSIGN_OR_RETURN(fill_, ReadScalar(*fill, "fill"));
    ONT_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes({dy->shape(), x->shape()}));
    return ctx.DeclareOutput(0, dy->dtype(), shape);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &x = *ctx.input(1);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      // The bounds and fill were read from tensors of X's and dY's dtype: they convert back exactly.
      const C lo = static_cast<C>(lo_), hi = static_cast<C>(hi_);
      const T fill = static_cast<T>(static_cast<C>(fill_));
      MapBinary<T, T, T>(dy, x, ctx.output(0), ctx.thread_pool(), [lo, hi, fill](T g, T v) {
        const C c = static_cast<C>(v);
        return (c >= lo) & (c <= hi) ? g : fill;
      });
      return Status::OK();
    });
  }

 private:
  double lo_ = 0, hi_ = 0, fill_ = 0;
};

// DropoutGrad(dY, mask, ratio?, training_mode?): dX = mask ? dY / (1 - ratio) : 0 in training mode with a
// non-zero ratio; otherwise dX = dY.
class DropoutGradKernel : public OpKernel {
 public:
  explicit DropoutGradKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* mask, RequireInput(ctx, 1, "mask"));
    if (mask->dtype() != DType::kBool || mask->shape() != dy->shape()) {
      return InvalidArgument("mask must be bool", ShapeToString(dy->shape()), ", got ", DTypeName(mask->dtype()),
                             ShapeToString(mask->shape()));
    }
    ratio_ = 0.5f;
    if (ctx.input(2)) {
      ONT_ASSIGN_OR_RETURN(double r, ReadScalar(*ctx.input(2), "ratio"));
      ratio_ = r;
    }
    if (!(ratio_ >= 0.0 && ratio_ < 1.0)) return InvalidArgument("ratio must be in [0, 1), got ", ratio_);
    training_ = ctx.input(3) && ctx.input(3)->data<bool>()[0];
    return ctx.DeclareOutput(0, dy->dtype(), dy->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &mask = *ctx.input(1);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* pd = dy.data<T>();
      const bool* pm = mask.data<bool>();
      T* out = ctx.output(0)->data<T>();
      bool pass = !training_ || ratio_ == 0.0;
      C scale = static_cast<C>(1.0 / (1.0 - ratio_));
      for (int64_t i = 0; i < dy.NumElements(); ++i) {
        out[i] = pass ? pd[i] : (pm[i] ? static_cast<T>(static_cast<C>(pd[i]) * scale) : static_cast<T>(C(0)));
      }
      return Status::OK();
    });
  }

 private:
  double ratio_ = 0.5;
  bool training_ = false;
};

// Scale(input, scale): input * scale, or input / scale with scale_down=1.
class ScaleKernel : public OpKernel {
 public:
  explicit ScaleKernel(const NodeInfo& info) : down_(info.node->GetInt("scale_down", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "scale"));
    ONT_ASSIGN_OR_RETURN(scale_, ReadScalar(*s, "scale"));
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      C s = static_cast<C>(scale_);
      bool down = down_;
      MapUnary(x.data<T>(), ctx.output(0)->data<T>(), x.NumElements(), ctx.thread_pool(),
               [s, down](T v) { return static_cast<T>(down ? static_cast<C>(v) / s : static_cast<C>(v) * s); });
      return Status::OK();
    });
  }

 private:
  bool down_;
  double scale_ = 1;
};

// ai.ontrain GeluAndSlope(X) -> (Y, D): Y = Gelu(X), exact, and D (float64) the derivative GeluGrad would
// multiply its dY by, made from the same exp and erfc as Y (vmath.h VGeluAndSlope). float32.
class GeluAndSlopeKernel : public OpKernel {
 public:
  explicit GeluAndSlopeKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    if (x->dtype() != DType::kFloat32) return InvalidArgument("GeluAndSlope takes float32, got ", DTypeName(x->dtype()));
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, DType::kFloat32, x->shape()));
    return ctx.DeclareOutput(1, DType::kFloat64, x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const float* x = ctx.input(0)->data<float>();
    float* y = ctx.output(0)->data<float>();
    double* d = ctx.output(1)->data<double>();
    ParallelFor(ctx.thread_pool(), ctx.input(0)->NumElements(), 30.0,
                [&](int64_t s, int64_t e) { VGeluAndSlope(x + s, y + s, d + s, e - s); });
    return Status::OK();
  }
};

// ai.ontrain GeluSlopeGrad(dY, D) -> dX = dY * D in float64, rounded to float32: GeluGrad(dY, X) bit for bit
// where D is GeluAndSlope's of X.
class GeluSlopeGradKernel : public OpKernel {
 public:
  explicit GeluSlopeGradKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* d, RequireInput(ctx, 1, "D"));
    if (dy->dtype() != DType::kFloat32 || d->dtype() != DType::kFloat64 || dy->shape() != d->shape()) {
      return InvalidArgument("GeluSlopeGrad takes float32 dY and float64 D of one shape, got ", DTypeName(dy->dtype()),
                             ShapeToString(dy->shape()), " and ", DTypeName(d->dtype()), ShapeToString(d->shape()));
    }
    return ctx.DeclareOutput(0, DType::kFloat32, dy->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const float* dy = ctx.input(0)->data<float>();
    const double* d = ctx.input(1)->data<double>();
    float* dx = ctx.output(0)->data<float>();
    ParallelFor(ctx.thread_pool(), ctx.input(0)->NumElements(), 2.0,
                [&](int64_t s, int64_t e) { VGeluMulSlope(dy + s, d + s, dx + s, e - s); });
    return Status::OK();
  }
};

template <GradKind kind>
StatusOr<std::unique_ptr<OpKernel>> MakeActGrad(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new ActivationGradKernel(i, kind));
}

}  // namespace

KernelFactory kReluGrad = MakeActGrad<GradKind::kRelu>;
KernelFactory kClipGrad = MakeKernel<ClipGradKernel>;
KernelFactory kSigmoidGrad = MakeActGrad<GradKind::kSigmoid>;
KernelFactory kTanhGrad = MakeActGrad<GradKind::kTanh>;
KernelFactory kGeluGrad = MakeActGrad<GradKind::kGelu>;
KernelFactory kFastGeluGrad = MakeActGrad<GradKind::kFastGelu>;
KernelFactory kLeakyReluGrad = MakeActGrad<GradKind::kLeakyRelu>;
KernelFactory kDropoutGrad = MakeKernel<DropoutGradKernel>;
KernelFactory kScale = MakeKernel<ScaleKernel>;
KernelFactory kGeluAndSlope = MakeKernel<GeluAndSlopeKernel>;
KernelFactory kGeluSlopeGrad = MakeKernel<GeluSlopeGradKernel>;

}  // namespace cpu
}  // namespace ontrain
