// Gradients of Softmax, LogSoftmax and the softmax cross-entropy loss (com.microsoft domain):
// SoftmaxGrad, SoftmaxGrad_13, LogSoftmaxGrad, LogSoftmaxGrad_13, SoftmaxCrossEntropyLossGrad and
// SoftmaxCrossEntropyLossInternalGrad.
#include <cmath>

#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/softmax_rows.h"

namespace ontrain {
namespace cpu {
namespace {

// (dY, Y) -> dX. Softmax: dX = Y * (dY - sum(Y * dY)); LogSoftmax: dX = dY - exp(Y) * sum(dY). The "_13"
// variants work along one axis (default -1); the older ones flatten to 2-D at axis (default 1).
class SoftmaxGradKernel : public OpKernel {
 public:
  SoftmaxGradKernel(const NodeInfo& info, bool log, bool v13)
      : log_(log), v13_(v13), axis_(info.node->GetInt("axis", v13 ? -1 : 1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, 1, "Y"));
    if (dy->shape() != y->shape()) return InvalidArgument("dY and Y shapes differ");
    ONT_RETURN_IF_ERROR(RequireSameDType(*y, "Y", *dy, "dY"));
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, y->rank()));
    outer_ = len_ = inner_ = 1;
    for (int64_t d = 0; d < y->rank(); ++d) {
      if (d < axis) outer_ *= y->dim(d);
      else if (d == axis || !v13_) len_ *= y->dim(d);
      else inner_ *= y->dim(d);
    }
    return ctx.DeclareOutput(0, dy->dtype(), dy->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &y = *ctx.input(1);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T *pd = dy.data<T>(), *py = y.data<T>();
      T* out = ctx.output(0)->data<T>();
      int64_t len = len_, inner = inner_;
      ParallelFor(ctx.thread_pool(), outer_ * inner, 6.0 * len, [&](int64_t s, int64_t e) {
        int64_t r = s;
        if (inner == 1) {  // contiguous rows (softmax_rows.h)
          SoftmaxGradRows<T>(log_, pd + s * len, py + s * len, out + s * len, e - s, len);
          r = e;
        }
        for (; r < e; ++r) {
          int64_t base = (r / inner) * len * inner + r % inner;
          C sum = 0;
          for (int64_t i = 0; i < len; ++i) {
            int64_t at = base + i * inner;
            sum += log_ ? static_cast<C>(pd[at]) : static_cast<C>(pd[at]) * static_cast<C>(py[at]);
          }
          for (int64_t i = 0; i < len; ++i) {
            int64_t at = base + i * inner;
            C g = static_cast<C>(pd[at]), v = static_cast<C>(py[at]);
            out[at] = static_cast<T>(log_ ? g - std::exp(v) * sum : v * (g - sum));
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  bool log_, v13_;
  int64_t axis_;
  int64_t outer_ = 1, len_ = 1, inner_ = 1;
};

// (dY, log_prob [N,C,d...], labels [N,d...], weight? [C] (, ignore_index?, bias? for the Internal form))
// -> d_scores. Per element w_i = weight[label] (or 1), 0 where the label is ignored; mean divides by sum(w).
class SceGradKernel : public OpKernel {
 public:
  SceGradKernel(const NodeInfo& info, bool internal)
      : internal_(internal),
        reduction_(info.node->GetString("reduction", "mean")),
        has_ignore_attr_(info.node->HasAttribute("ignore_index")),
        ignore_attr_(info.node->GetInt("ignore_index", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    if (reduction_ != "mean" && reduction_ != "sum" && reduction_ != "none") {
      return InvalidArgument("reduction must be mean, sum or none, got \"", reduction_, "\"");
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* lp, RequireInput(ctx, 1, "log_prob"));
    ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, 2, "label"));
    Shape expect;
    ONT_RETURN_IF_ERROR(CheckScoresAndLabels(*lp, *t, "log_prob", &expect));
    if (reduction_ == "none" ? dy->shape() != expect : dy->NumElements() != 1) {
      return InvalidArgument("dY has shape ", ShapeToString(dy->shape()), " for reduction ", reduction_);
    }
    has_ignore_ = has_ignore_attr_;
    ignore_ = ignore_attr_;
    if (internal_ && ctx.input(4)) {
      ONT_ASSIGN_OR_RETURN(double v, ReadScalar(*ctx.input(4), "ignore_index"));
      has_ignore_ = true;
      ignore_ = static_cast<int64_t>(v);
    }
    if (internal_ && ctx.input(5) && ctx.input(5)->shape() != lp->shape()) return InvalidArgument("bias shape differs");
    ONT_RETURN_IF_ERROR(RequireSameDType(*dy, "dY", *lp, "log_prob"));
    if (const Tensor* w = ctx.input(3)) {
      ONT_RETURN_IF_ERROR(RequireSameDType(*w, "weights", *lp, "log_prob"));
      if (w->rank() != 1 || w->dim(0) != lp->dim(1)) {
        return InvalidArgument("weights have shape ", ShapeToString(w->shape()), ", expected [", lp->dim(1), "]");
      }
    }
    if (internal_ && ctx.input(5)) ONT_RETURN_IF_ERROR(RequireSameDType(*ctx.input(5), "bias", *lp, "log_prob"));
    return ctx.DeclareOutput(0, lp->dtype(), lp->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &lp = *ctx.input(1), &t = *ctx.input(2);
    const Tensor* w = ctx.input(3);
    const Tensor* bias = internal_ ? ctx.input(5) : nullptr;
    return DispatchFloat(lp.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      int64_t n = lp.dim(0), c = lp.dim(1), inner = (n * c) != 0 ? lp.NumElements() / (n * c) : 0;
      auto label_at = [&](int64_t j) { return t.dtype() == DType::kInt64 ? t.data<int64_t>()[j] : t.data<int32_t>()[j]; };
      auto weight_of = [&](int64_t label) -> C {
        if (has_ignore_ && label == ignore_) return C(0);
        return w ? static_cast<C>(w->data<T>()[label]) : C(1);
      };
      C denom = 0;
      for (int64_t j = 0; j < n * inner; ++j) {
        int64_t label = label_at(j);
        if (!(has_ignore_ && label == ignore_) && (label < 0 || label >= c)) {
          return InvalidArgument("label ", label, " at position ", j, " is outside [0, ", c, ")");
        }
        denom += weight_of(label);
      }
      const T* plp = lp.data<T>();
      T* out = ctx.output(0)->data<T>();
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t j = b * inner + i;
          int64_t label = label_at(j);
          C g = reduction_ == "none" ? static_cast<C>(dy.data<T>()[j]) : static_cast<C>(dy.data<T>()[0]);
          C d = g * weight_of(label);
          if (reduction_ == "mean") d /= denom;
          for (int64_t k = 0; k < c; ++k) {
            int64_t at = (b * c + k) * inner + i;
            C v = d * (std::exp(static_cast<C>(plp[at])) - (k == label ? C(1) : C(0)));
            if (bias) v += static_cast<C>(bias->data<T>()[at]);
            out[at] = static_cast<T>(v);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  bool internal_;
  std::string reduction_;
  bool has_ignore_attr_;
  int64_t ignore_attr_;
  bool has_ignore_ = false;
  int64_t ignore_ = 0;
};

template <bool log, bool v13>
StatusOr<std::unique_ptr<OpKernel>> MakeSoftGrad(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new SoftmaxGradKernel(i, log, v13));
}

}  // namespace

KernelFactory kSoftmaxGrad = MakeSoftGrad<false, false>;
KernelFactory kSoftmaxGrad13 = MakeSoftGrad<false, true>;
KernelFactory kLogSoftmaxGrad = MakeSoftGrad<true, false>;
KernelFactory kLogSoftmaxGrad13 = MakeSoftGrad<true, true>;
KernelFactory kSoftmaxCrossEntropyLossGrad = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new SceGradKernel(i, false));
};
KernelFactory kSoftmaxCrossEntropyLossInternalGrad = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new SceGradKernel(i, true));
};

}  // namespace cpu
}  // namespace ontrain
