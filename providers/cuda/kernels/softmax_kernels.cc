// Softmax, LogSoftmax, their gradients and the softmax cross-entropy losses on CUDA (float32). Prepare is
// the CPU kernels'; the layouts ([outer, len, inner] along the axis; opset < 13 and the non-"_13" gradients
// flatten from the axis on) are recomputed here from the node.
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

struct Layout {
  int64_t outer = 1, len = 1, inner = 1;
};

StatusOr<Layout> AxisLayout(const Shape& shape, int64_t axis_attr, bool flatten_tail) {
  ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(axis_attr, static_cast<int64_t>(shape.size())));
  Layout l;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) l.outer *= shape[d];
    else if (d == axis || flatten_tail) l.len *= shape[d];
    else l.inner *= shape[d];
  }
  return l;
}

class SoftmaxKernel : public DelegatingKernel {
 public:
  SoftmaxKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool log)
      : DelegatingKernel(info, std::move(cpu)),
        log_(log),
        flatten_(info.opset < 13),
        axis_(info.node->GetInt("axis", info.opset >= 13 ? -1 : 1)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(Layout l, AxisLayout(x.shape(), axis_, flatten_));
    return CudaStatus(Softmax(x.data<float>(), ctx.output(0)->data<float>(), l.outer, l.len, l.inner, log_, r.stream),
                      "Softmax");
  }

 private:
  bool log_, flatten_;
  int64_t axis_;
};

class SoftmaxGradKernel : public DelegatingKernel {
 public:
  SoftmaxGradKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool log, bool v13)
      : DelegatingKernel(info, std::move(cpu)), log_(log), v13_(v13), axis_(info.node->GetInt("axis", v13 ? -1 : 1)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &y = *ctx.input(1);
    ONT_ASSIGN_OR_RETURN(Layout l, AxisLayout(y.shape(), axis_, !v13_));
    return CudaStatus(SoftmaxGrad(dy.data<float>(), y.data<float>(), ctx.output(0)->data<float>(), l.outer, l.len,
                                  l.inner, log_, r.stream),
                      "SoftmaxGrad");
  }

 private:
  bool log_, v13_;
  int64_t axis_;
};

// The cross-entropy arguments of a node: reduction and ignore_index (an attribute, or for the Internal
// forms a host input at `ignore_input`).
StatusOr<CrossEntropyArgs> LossArgs(const Node& node, const KernelContext& ctx, const Tensor& scores, int label_input,
                                    int weight_input, int ignore_input) {
  CrossEntropyArgs a{};
  std::string reduction = node.GetString("reduction", "mean");
  a.reduction = reduction == "none" ? 0 : reduction == "sum" ? 1 : 2;
  a.has_ignore = node.HasAttribute("ignore_index");
  a.ignore_index = node.GetInt("ignore_index", 0);
  if (ignore_input >= 0 && ctx.input(ignore_input)) {
    ONT_ASSIGN_OR_RETURN(double v, cpu::ReadScalar(*ctx.input(ignore_input), "ignore_index"));
    a.has_ignore = true;
    a.ignore_index = static_cast<int64_t>(v);
  }
  const Tensor& labels = *ctx.input(label_input);
  a.labels = labels.raw_data();
  a.labels64 = labels.dtype() == DType::kInt64;
  a.weights = ctx.input(weight_input) ? ctx.input(weight_input)->data<float>() : nullptr;
  a.n = scores.dim(0);
  a.c = scores.dim(1);
  a.d = a.n * a.c != 0 ? scores.NumElements() / (a.n * a.c) : 0;
  return a;
}

// SoftmaxCrossEntropyLoss(scores, labels, weights?) -> (loss, log_prob?); the Internal form adds
// ignore_index as input 3.
class CrossEntropyKernel : public DelegatingKernel {
 public:
  CrossEntropyKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool internal)
      : DelegatingKernel(info, std::move(cpu)), internal_(internal) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& scores = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(CrossEntropyArgs a, LossArgs(node_, ctx, scores, 1, 2, internal_ ? 3 : -1));
    a.scores = scores.data<float>();
    float* log_prob = nullptr;
    if (Tensor* lp = ctx.output(1)) {
      log_prob = lp->data<float>();
    } else {
      ONT_ASSIGN_OR_RETURN(void* p, log_prob_.Get(scores.SizeInBytes(), r.allocator));
      log_prob = static_cast<float*>(p);
    }
    ONT_ASSIGN_OR_RETURN(void* scratch, scratch_.Get(sizeof(float) * 2 * std::max<int64_t>(a.n * a.d, 1), r.allocator));
    return CudaStatus(CrossEntropy(a, ctx.output(0)->data<float>(), log_prob, static_cast<float*>(scratch), r.stream),
                      "CrossEntropy");
  }

 private:
  bool internal_;
  DeviceBuffer log_prob_, scratch_;
};

// NegativeLogLikelihoodLoss(log_prob, target, weight?) -> loss.
class NllLossKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(CrossEntropyArgs a, LossArgs(node_, ctx, x, 1, 2, -1));
    a.scores = x.data<float>();
    ONT_ASSIGN_OR_RETURN(void* scratch, scratch_.Get(sizeof(float) * 2 * std::max<int64_t>(a.n * a.d, 1), r.allocator));
    return CudaStatus(NllLoss(a, ctx.output(0)->data<float>(), static_cast<float*>(scratch), r.stream), "NllLoss");
  }

 private:
  DeviceBuffer scratch_;
};

// (dY, log_prob, labels, weights? (, ignore_index?, bias? for the Internal form)) -> dScores.
class CrossEntropyGradKernel : public DelegatingKernel {
 public:
  CrossEntropyGradKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool internal)
      : DelegatingKernel(info, std::move(cpu)), internal_(internal) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& lp = *ctx.input(1);
    ONT_ASSIGN_OR_RETURN(CrossEntropyArgs a, LossArgs(node_, ctx, lp, 2, 3, internal_ ? 4 : -1));
    a.bias = internal_ && ctx.input(5) ? ctx.input(5)->data<float>() : nullptr;
    ONT_ASSIGN_OR_RETURN(void* scratch, scratch_.Get(sizeof(float), r.allocator));
    return CudaStatus(CrossEntropyGrad(a, ctx.input(0)->data<float>(), lp.data<float>(), ctx.output(0)->data<float>(),
                                       static_cast<float*>(scratch), r.stream),
                      "CrossEntropyGrad");
  }

 private:
  bool internal_;
  DeviceBuffer scratch_;
};

template <bool log, bool v13, const KernelFactory* cpu_factory>
StatusOr<std::unique_ptr<OpKernel>> MakeSoftmaxGrad(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> cpu, (*cpu_factory)(info));
  return std::unique_ptr<OpKernel>(new SoftmaxGradKernel(info, std::move(cpu), log, v13));
}

}  // namespace

KernelFactory kSoftmax = WrapOp<SoftmaxKernel, bool, false, &cpu::kSoftmax>;
KernelFactory kLogSoftmax = WrapOp<SoftmaxKernel, bool, true, &cpu::kLogSoftmax>;
KernelFactory kSoftmaxGrad = MakeSoftmaxGrad<false, false, &cpu::kSoftmaxGrad>;
KernelFactory kSoftmaxGrad13 = MakeSoftmaxGrad<false, true, &cpu::kSoftmaxGrad13>;
KernelFactory kLogSoftmaxGrad = MakeSoftmaxGrad<true, false, &cpu::kLogSoftmaxGrad>;
KernelFactory kLogSoftmaxGrad13 = MakeSoftmaxGrad<true, true, &cpu::kLogSoftmaxGrad13>;
KernelFactory kSoftmaxCrossEntropyLoss = WrapOp<CrossEntropyKernel, bool, false, &cpu::kSoftmaxCrossEntropyLoss>;
KernelFactory kSoftmaxCrossEntropyLossInternal =
    WrapOp<CrossEntropyKernel, bool, true, &cpu::kSoftmaxCrossEntropyLossInternal>;
KernelFactory kSoftmaxCrossEntropyLossGrad =
    WrapOp<CrossEntropyGradKernel, bool, false, &cpu::kSoftmaxCrossEntropyLossGrad>;
KernelFactory kNegativeLogLikelihoodLoss = Wrap<NllLossKernel, &cpu::kNegativeLogLikelihoodLoss>;
KernelFactory kSoftmaxCrossEntropyLossInternalGrad =
    WrapOp<CrossEntropyGradKernel, bool, true, &cpu::kSoftmaxCrossEntropyLossInternalGrad>;

}  // namespace cuda
}  // namespace ontrain
