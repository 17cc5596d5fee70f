// LayerNormalization (ONNX and com.microsoft) and its gradient on CUDA, float32; rows are the dims before
// `axis`, columns the rest, as on the CPU (whose Prepare these kernels use). BatchNormalization, ONNX
// Runtime's BatchNormInternal and its gradient (batchnorm.cu).
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

StatusOr<std::pair<int64_t, int64_t>> RowsAndCols(const Shape& shape, int64_t axis_attr) {
  ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(axis_attr, static_cast<int64_t>(shape.size())));
  int64_t rows = 1, cols = 1;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) (d < axis ? rows : cols) *= shape[d];
  return std::make_pair(rows, cols);
}

float* DataOrNull(Tensor* t) { return t ? t->data<float>() : nullptr; }

class LayerNormKernel : public DelegatingKernel {
 public:
  LayerNormKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        axis_(info.node->GetInt("axis", -1)),
        epsilon_(info.node->GetFloat("epsilon", 1e-5f)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(auto rc, RowsAndCols(x.shape(), axis_));
    const float* bias = ctx.input(2) ? ctx.input(2)->data<float>() : nullptr;
    return CudaStatus(LayerNorm(x.data<float>(), ctx.input(1)->data<float>(), bias, ctx.output(0)->data<float>(),
                                DataOrNull(ctx.output(1)), DataOrNull(ctx.output(2)), rc.first, rc.second, epsilon_,
                                r.stream),
                      "LayerNorm");
  }

 private:
  int64_t axis_;
  float epsilon_;
};

class LayerNormGradKernel : public DelegatingKernel {
 public:
  LayerNormGradKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), axis_(info.node->GetInt("axis", -1)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(1);
    ONT_ASSIGN_OR_RETURN(auto rc, RowsAndCols(x.shape(), axis_));
    return CudaStatus(LayerNormGrad(ctx.input(0)->data<float>(), x.data<float>(), ctx.input(2)->data<float>(),
                                    ctx.input(3)->data<float>(), ctx.input(4)->data<float>(), DataOrNull(ctx.output(0)),
                                    DataOrNull(ctx.output(1)), DataOrNull(ctx.output(2)), rc.first, rc.second,
                                    r.stream),
                      "LayerNormGrad");
  }

 private:
  int64_t axis_;
};

// BatchNormalization (ONNX) and com.microsoft BatchNormInternal; the mode follows the CPU kernel's rules.
class BatchNormKernel : public DelegatingKernel {
 public:
  BatchNormKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool internal)
      : DelegatingKernel(info, std::move(cpu)), opset_(info.opset), internal_(internal) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    bool attr = node_.GetInt("training_mode", internal_ ? 1 : 0) != 0;
    bool training = opset_ >= 14 || internal_ ? attr : (ctx.output_requested(1) || ctx.output_requested(2));
    if (internal_ && ctx.input(5)) training = ctx.input(5)->data<bool>()[0];
    BatchNormArgs a{};
    a.x = x.data<float>();
    a.scale = ctx.input(1)->data<float>();
    a.bias = ctx.input(2)->data<float>();
    a.mean = ctx.input(3)->data<float>();
    a.var = ctx.input(4)->data<float>();
    a.y = ctx.output(0)->data<float>();
    a.n = x.dim(0);
    a.c = x.dim(1);
    a.inner = a.n * a.c != 0 ? x.NumElements() / (a.n * a.c) : 0;
    a.epsilon = node_.GetFloat("epsilon", 1e-5f);
    a.momentum = node_.GetFloat("momentum", 0.9f);
    a.training = training;
    a.saved_inv_std = internal_;
    if (training) {
      a.running_mean = DataOrNull(ctx.output(1));
      a.running_var = DataOrNull(ctx.output(2));
      if (opset_ < 14 || internal_) {
        a.saved_mean = DataOrNull(ctx.output(3));
        a.saved_var = DataOrNull(ctx.output(4));
      }
    }
    double* ws = nullptr;
    if (training) {
      ONT_ASSIGN_OR_RETURN(void* p, workspace_.Get(sizeof(double) * BatchNormWorkspace(a.n, a.c, a.inner), r.allocator));
      ws = static_cast<double*>(p);
    }
    return CudaStatus(BatchNorm(a, ws, r.stream), "BatchNorm");
  }

 private:
  int64_t opset_;
  bool internal_;
  DeviceBuffer workspace_;  // the channels' per-range sums
};

class BatchNormGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(1);
    int64_t n = x.dim(0), c = x.dim(1), inner = n * c != 0 ? x.NumElements() / (n * c) : 0;
    ONT_ASSIGN_OR_RETURN(void* ws, workspace_.Get(sizeof(double) * BatchNormWorkspace(n, c, inner), r.allocator));
    return CudaStatus(BatchNormGrad(ctx.input(0)->data<float>(), x.data<float>(), ctx.input(2)->data<float>(),
                                    ctx.input(3)->data<float>(), ctx.input(4)->data<float>(), DataOrNull(ctx.output(0)),
                                    DataOrNull(ctx.output(1)), DataOrNull(ctx.output(2)), n, c, inner, static_cast<double*>(ws),
                                    r.stream),
                      "BatchNormGrad");
  }

 private:
  DeviceBuffer workspace_;  // the channels' per-range sums
};

}  // namespace

KernelFactory kLayerNormalization = Wrap<LayerNormKernel, &cpu::kLayerNormalization>;
KernelFactory kLayerNormalizationGrad = Wrap<LayerNormGradKernel, &cpu::kLayerNormalizationGrad>;
KernelFactory kBatchNormalization = WrapOp<BatchNormKernel, bool, false, &cpu::kBatchNormalization>;
KernelFactory kBatchNormInternal = WrapOp<BatchNormKernel, bool, true, &cpu::kBatchNormInternal>;
KernelFactory kBatchNormalizationGrad = Wrap<BatchNormGradKernel, &cpu::kBatchNormalizationGrad>;

}  // namespace cuda
}  // namespace ontrain
