// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
//
// Shapes: scores/input [N, C, d1...], labels/target [N, d1...] (int32 or int64), optional weight [C].
// loss_i = -w[t_i] * logp[i, t_i], with ignored labels (ignore_index) contributing 0 and weight 0.
// reduction "mean" divides by the summed weights of the counted elements, "sum" sums, "none" keeps [N, d...].
#include <cmath>
#include <limits>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

class NllLossKernel : public OpKernel {
 public:
  NllLossKernel(const NodeInfo& info, bool with_softmax, bool internal = false)
      : with_softmax_(with_softmax),
        internal_(internal),
        reduction_(info.node->GetString("reduction", "mean")),
        has_ignore_attr_(info.node->HasAttribute("ignore_index")),
        ignore_attr_(info.node->GetInt("ignore_index", 0)) {}

  Status Prepare(KernelContext& ctx) override {
    if (reduction_ != "mean" && reduction_ != "sum" && reduction_ != "none") {
      return InvalidArgument("reduction must be mean, sum or none, got \"", reduction_, "\"");
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "scores"));
    ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, 1, "labels"));
    Shape expect;
    ONT_RETURN_IF_ERROR(CheckScoresAndLabels(*x, *t, "scores", &expect));
    has_ignore_ = has_ignore_attr_;
    ignore_index_ = ignore_attr_;
    if (internal_ && ctx.input(3)) {  // SoftmaxCrossEntropyLossInternal takes ignore_index as a tensor
      ONT_ASSIGN_OR_RETURN(double v, ReadScalar(*ctx.input(3), "ignore_index"));
      has_ignore_ = true;
      ignore_index_ = static_cast<int64_t>(v);
    }
    if (const Tensor* w = ctx.input(2); w && (w->rank() != 1 || w->dim(0) != x->dim(1))) {
      return InvalidArgument("weights have shape ", ShapeToString(w->shape()), ", expected [", x->dim(1), "]");
    }
    if (const Tensor* w = ctx.input(2)) ONT_RETURN_IF_ERROR(RequireSameDType(*w, "weights", *x, "scores"));
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), reduction_ == "none" ? expect : Shape{}));
    if (with_softmax_ && ctx.num_outputs() > 1) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, x->dtype(), x->shape()));
    if (with_softmax_ && !ctx.output_requested(1)) ctx.RequestScratch(x->SizeInBytes());
    return Status::OK();
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const Tensor& t = *ctx.input(1);
      const Tensor* w = ctx.input(2);
      int64_t n = x.dim(0), c = x.dim(1), inner = (n * c) != 0 ? x.NumElements() / (n * c) : 0;
      // 1. Log-probabilities: given (NLL) or a log-softmax over axis 1 (SCE).
      const T* logp = x.data<T>();
      if (with_softmax_) {
        T* lp = ctx.output(1) ? ctx.output(1)->data<T>() : static_cast<T*>(ctx.scratch());
        const T* px = x.data<T>();
        for (int64_t b = 0; b < n; ++b) {
          for (int64_t i = 0; i < inner; ++i) {
            int64_t base = b * c * inner + i;
            C mx = -std::numeric_limits<C>::infinity();
            for (int64_t k = 0; k < c; ++k) mx = std::max(mx, static_cast<C>(px[base + k * inner]));
            C sum = 0;
            for (int64_t k = 0; k < c; ++k) sum += std::exp(static_cast<C>(px[base + k * inner]) - mx);
            C lse = mx + std::log(sum);
            for (int64_t k = 0; k < c; ++k) lp[base + k * inner] = static_cast<T>(static_cast<C>(px[base + k * inner]) - lse);
          }
        }
        logp = lp;
      }
      // 2. Gather -w[t] * logp[t] per element.
      T* out = ctx.output(0)->data<T>();
      C total = 0, weight_sum = 0;
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          int64_t j = b * inner + i;
          int64_t label = t.dtype() == DType::kInt64 ? t.data<int64_t>()[j] : t.data<int32_t>()[j];
          C li = 0, wi = 0;
          if (!(has_ignore_ && label == ignore_index_)) {
            if (label < 0 || label >= c) {
              return InvalidArgument("label ", label, " at position ", j, " is outside [0, ", c, ")");
            }
            wi = w ? static_cast<C>(w->data<T>()[label]) : C(1);
            li = -wi * static_cast<C>(logp[b * c * inner + label * inner + i]);
          }
          if (reduction_ == "none") out[j] = static_cast<T>(li);
          total += li;
          weight_sum += wi;
        }
      }
      if (reduction_ == "sum") out[0] = static_cast<T>(total);
      if (reduction_ == "mean") out[0] = static_cast<T>(total / weight_sum);
      return Status::OK();
    });
  }

 private:
  bool with_softmax_, internal_;
  std::string reduction_;
  bool has_ignore_attr_;
  int64_t ignore_attr_;
  bool has_ignore_ = false;
  int64_t ignore_index_ = 0;
};

}  // namespace

KernelFactory kSoftmaxCrossEntropyLoss = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new NllLossKernel(i, true));
};
KernelFactory kSoftmaxCrossEntropyLossInternal = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new NllLossKernel(i, true, true));
};
KernelFactory kNegativeLogLikelihoodLoss = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new NllLossKernel(i, false));
};

}  // namespace cpu
}  // namespace ontrain
