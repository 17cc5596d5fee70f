// LayerNormalization (ONNX and com.microsoft) and its gradient on CUDA, float32; rows are the dims before
// `axis`, columns the rest, as on the CPU (whose Prepare these kernels use).
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

}  // namespace

KernelFactory kLayerNormalization = Wrap<LayerNormKernel, &cpu::kLayerNormalization>;
KernelFactory kLayerNormalizationGrad = Wrap<LayerNormGradKernel, &cpu::kLayerNormalizationGrad>;

}  // namespace cuda
}  // namespace ontrain
