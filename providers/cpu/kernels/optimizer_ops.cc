// ONNX's own optimizer ops (domain ai.onnx.preview.training, version 1): Adam, Adagrad and Momentum.
// Each updates n tensors at once; inputs are [R (learning rate), T (update count), X..., G..., state...],
// outputs [X_new..., state_new...]. Formulas as in ONNX's operator definitions.
#include <cmath>
#include <string>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

enum class Algo { kAdam, kAdagrad, kMomentum };

class PreviewOptimizerKernel : public OpKernel {
 public:
  PreviewOptimizerKernel(const NodeInfo& info, Algo algo)
      : algo_(algo),
        states_(algo == Algo::kAdam ? 2 : 1),
        alpha_(info.node->GetFloat("alpha", 0.9f)),
        beta_(info.node->GetFloat("beta", algo == Algo::kAdam ? 0.999f : 1.0f)),
        epsilon_(info.node->GetFloat("epsilon", 1e-6f)),
        norm_(info.node->GetFloat("norm_coefficient", 0.0f)),
        norm_post_(info.node->GetFloat("norm_coefficient_post", 0.0f)),
        decay_(info.node->GetFloat("decay_factor", 0.0f)),
        nesterov_(info.node->GetString("mode", "standard") == "nesterov") {}

  Status Prepare(KernelContext& ctx) override {
    int groups = 2 + states_;  // X, G, states
    if (ctx.num_inputs() < 2 + groups || (ctx.num_inputs() - 2) % groups != 0) {
      return InvalidArgument("expected 2 + ", groups, "n inputs, got ", ctx.num_inputs());
    }
    n_ = (ctx.num_inputs() - 2) / groups;
    if (ctx.num_outputs() != (1 + states_) * n_) {
      return InvalidArgument("expected ", (1 + states_) * n_, " outputs, got ", ctx.num_outputs());
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 0, "R"));
    ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, 1, "T"));
    ONT_ASSIGN_OR_RETURN(lr_, ReadScalar(*r, "R"));
    ONT_ASSIGN_OR_RETURN(double step, ReadScalar(*t, "T"));
    step_ = static_cast<int64_t>(step);
    for (int64_t i = 0; i < n_; ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, static_cast<int>(2 + i), "X"));
      for (int g = 1; g < groups; ++g) {
        ONT_ASSIGN_OR_RETURN(const Tensor* o, RequireInput(ctx, static_cast<int>(2 + g * n_ + i), "G/state"));
        if (o->shape() != x->shape() || o->dtype() != x->dtype()) {
          return InvalidArgument("input ", 2 + g * n_ + i, " ", ShapeToString(o->shape()), " does not match X ",
                                 ShapeToString(x->shape()));
        }
      }
      for (int k = 0; k <= states_; ++k) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(static_cast<int>(k * n_ + i), x->dtype(), x->shape()));
    }
    return Status::OK();
  }

  Status Compute(KernelContext& ctx) override {
    for (int64_t i = 0; i < n_; ++i) {
      const Tensor& x = *ctx.input(static_cast<int>(2 + i));
      Status s = DispatchFloat(x.dtype(), [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
          Update<T>(ctx, i);
          return Status::OK();
        } else {
          return Unimplemented("16-bit optimizer state");
        }
      });
      ONT_RETURN_IF_ERROR(s);
    }
    return Status::OK();
  }

 private:
  template <typename T>
  void Update(KernelContext& ctx, int64_t i) {
    auto in = [&](int group) { return ctx.input(static_cast<int>(2 + group * n_ + i))->template data<T>(); };
    auto out = [&](int k) { return ctx.output(static_cast<int>(k * n_ + i))->template data<T>(); };
    const T *x = in(0), *g = in(1), *s1 = in(2);
    const T* s2 = states_ > 1 ? in(3) : nullptr;
    T *xo = out(0), *s1o = out(1), *s2o = states_ > 1 ? out(2) : nullptr;
    int64_t n = ctx.input(static_cast<int>(2 + i))->NumElements();
    const T a = static_cast<T>(alpha_), b = static_cast<T>(beta_), eps = static_cast<T>(epsilon_);
    const T norm = static_cast<T>(norm_), r = static_cast<T>(lr_);
    for (int64_t j = 0; j < n; ++j) {
      T gr = norm * x[j] + g[j];
      switch (algo_) {
        case Algo::kAdagrad: {
          T rr = r / (T(1) + static_cast<T>(step_) * static_cast<T>(decay_));
          T h = s1[j] + gr * gr;
          s1o[j] = h;
          xo[j] = x[j] - rr * gr / (std::sqrt(h) + eps);
          break;
        }
        case Algo::kMomentum: {
          T badj = step_ > 0 ? b : T(1);
          T v = a * s1[j] + badj * gr;
          s1o[j] = v;
          xo[j] = nesterov_ ? x[j] - r * (gr + a * v) : x[j] - r * v;
          break;
        }
        case Algo::kAdam: {
          T v = a * s1[j] + (T(1) - a) * gr;
          T h = b * s2[j] + (T(1) - b) * gr * gr;
          T radj = step_ > 0 ? r * std::sqrt(T(1) - std::pow(b, static_cast<T>(step_))) /
                                   (T(1) - std::pow(a, static_cast<T>(step_)))
                             : r;
          T xn = x[j] - radj * (v / (std::sqrt(h) + eps));
          s1o[j] = v;
          s2o[j] = h;
          xo[j] = (T(1) - static_cast<T>(norm_post_)) * xn;
          break;
        }
      }
    }
  }

  Algo algo_;
  int states_;
  float alpha_, beta_, epsilon_, norm_, norm_post_, decay_;
  bool nesterov_;
  int64_t n_ = 0, step_ = 0;
  double lr_ = 0;
};

template <Algo algo>
StatusOr<std::unique_ptr<OpKernel>> MakeOpt(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new PreviewOptimizerKernel(i, algo));
}

}  // namespace

KernelFactory kAdam = MakeOpt<Algo::kAdam>;
KernelFactory kAdagrad = MakeOpt<Algo::kAdagrad>;
KernelFactory kMomentum = MakeOpt<Algo::kMomentum>;

}  // namespace cpu
}  // namespace ontrain
