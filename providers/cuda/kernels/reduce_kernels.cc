// Reductions on CUDA (float32): ReduceSum/Mean/Max/Min/SumSquare/L1/L2/LogSumExp and com.microsoft's
// ReduceSumTraining. The output shape comes from the CPU kernel's Prepare; the reduced axes go to ReduceAxes
// (cuda_kernel.h).
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

class ReduceKernel : public DelegatingKernel {
 public:
  ReduceKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, ReduceOp op, int64_t axes_input_since)
      : DelegatingKernel(info, std::move(cpu)),
        op_(op),
        axes_from_input_(info.opset >= axes_input_since),
        noop_empty_(info.node->GetInt("noop_with_empty_axes", 0) != 0) {}

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedAxes(ctx, x.rank()));
    return ReduceAxes(r, op_, x.data<float>(), x.shape(), reduced, ctx.output(0)->data<float>(), &transposed_);
  }

 private:
  StatusOr<std::vector<bool>> ReducedAxes(const KernelContext& ctx, int64_t rank) const {
    std::vector<int64_t> axes = node_.GetInts("axes");
    if (axes_from_input_) {
      axes.clear();
      if (ctx.input(1)) {
        ONT_ASSIGN_OR_RETURN(axes, cpu::ReadInts(*ctx.input(1), "axes"));
      }
    }
    std::vector<bool> reduced(rank, axes.empty() && !noop_empty_);
    for (int64_t a : axes) {
      ONT_ASSIGN_OR_RETURN(int64_t d, cpu::NormalizeAxis(a, rank));
      reduced[d] = true;
    }
    return reduced;
  }

  ReduceOp op_;
  bool axes_from_input_, noop_empty_;
  DeviceBuffer transposed_;
};

template <ReduceOp op, const KernelFactory* cpu_factory, int64_t axes_input_since>
StatusOr<std::unique_ptr<OpKernel>> MakeReduce(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> cpu, (*cpu_factory)(info));
  return std::unique_ptr<OpKernel>(new ReduceKernel(info, std::move(cpu), op, axes_input_since));
}

}  // namespace

KernelFactory kReduceSum = MakeReduce<ReduceOp::kSum, &cpu::kReduceSum, 13>;
KernelFactory kReduceMean = MakeReduce<ReduceOp::kMean, &cpu::kReduceMean, 18>;
KernelFactory kReduceMax = MakeReduce<ReduceOp::kMax, &cpu::kReduceMax, 18>;
KernelFactory kReduceMin = MakeReduce<ReduceOp::kMin, &cpu::kReduceMin, 18>;
KernelFactory kReduceSumSquare = MakeReduce<ReduceOp::kSumSquare, &cpu::kReduceSumSquare, 18>;
KernelFactory kReduceL1 = MakeReduce<ReduceOp::kL1, &cpu::kReduceL1, 18>;
KernelFactory kReduceL2 = MakeReduce<ReduceOp::kL2, &cpu::kReduceL2, 18>;
KernelFactory kReduceLogSumExp = MakeReduce<ReduceOp::kLogSumExp, &cpu::kReduceLogSumExp, 18>;
KernelFactory kReduceSumTraining = MakeReduce<ReduceOp::kSum, &cpu::kReduceSumTraining, 1>;

}  // namespace cuda
}  // namespace ontrain
