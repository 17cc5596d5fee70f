// Reductions on CUDA (float32): ReduceSum/Mean/Max/Min/SumSquare/L1/L2/LogSumExp/LogSum and com.microsoft's
// ReduceSumTraining; ArgMax and ArgMin. The output shape comes from the CPU kernel's Prepare; the reduced axes go to ReduceAxes
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
    ONT_ASSIGN_OR_RETURN(uint64_t reduced, ReducedAxes(ctx, x.rank()));
    if (reduced == 0 && noop_empty_) {
      // No axes with noop_with_empty_axes: the input itself, as the CPU kernel copies it (autodiff's bias
      // gradients where nothing broadcast: a GPT's [64, 64, 128] took 68 us as 524288 one-element rows).
      Tensor* y = ctx.output(0);
      if (x.SizeInBytes() == 0 || x.raw_data() == y->raw_data()) return Status::OK();
      return CudaStatus(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream),
                        "cudaMemcpyAsync");
    }
    return ReduceAxes(r, op_, x.data<float>(), x.shape(), reduced, ctx.output(0)->data<float>(), &transposed_);
  }

 private:
  // The reduced axes as bits (bit d: axis d), from the attribute or the axes input, without allocating.
  StatusOr<uint64_t> ReducedAxes(const KernelContext& ctx, int64_t rank) const {
    if (rank > 64) return Unimplemented("reduction over rank ", rank, " on CUDA");
    uint64_t reduced = 0;
    int64_t count = 0;
    auto add = [&](int64_t a) -> Status {
      ONT_ASSIGN_OR_RETURN(int64_t d, cpu::NormalizeAxis(a, rank));
      reduced |= uint64_t{1} << d;
      ++count;
      return Status::OK();
    };
    if (!axes_from_input_) {
      for (int64_t a : attr_axes_) ONT_RETURN_IF_ERROR(add(a));
    } else if (const Tensor* t = ctx.input(1); t != nullptr) {
      if (t->dtype() != DType::kInt64 && t->dtype() != DType::kInt32) {
        return InvalidArgument("axes must be int64 or int32, got ", DTypeName(t->dtype()));
      }
      for (int64_t i = 0; i < t->NumElements(); ++i) {
        ONT_RETURN_IF_ERROR(add(t->dtype() == DType::kInt64 ? t->data<int64_t>()[i] : t->data<int32_t>()[i]));
      }
    }
    if (count == 0 && !noop_empty_) reduced = rank == 64 ? ~uint64_t{0} : (uint64_t{1} << rank) - 1;
    return reduced;
  }

  ReduceOp op_;
  bool axes_from_input_, noop_empty_;
  std::vector<int64_t> attr_axes_ = node_.GetInts("axes");
  DeviceBuffer transposed_;
};

// ArgMax / ArgMin along `axis` (float32, float64, int32, int64 -> int64 indices).
class ArgKernel : public DelegatingKernel {
 public:
  ArgKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool max)
      : DelegatingKernel(info, std::move(cpu)), max_(max), last_(info.node->GetInt("select_last_index", 0) != 0) {}

  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(node_.GetInt("axis", 0), x.rank()));
    const cpu::AxisSplit sp = cpu::SplitAtAxis(x.shape(), axis);
    int64_t* y = ctx.output(0)->data<int64_t>();
    cudaError_t e = cudaErrorInvalidValue;
    switch (x.dtype()) {
      case DType::kFloat32: e = ArgExtreme(x.data<float>(), y, sp.outer, sp.len, sp.inner, max_, last_, r.stream); break;
      case DType::kFloat64: e = ArgExtreme(x.data<double>(), y, sp.outer, sp.len, sp.inner, max_, last_, r.stream); break;
      case DType::kInt32: e = ArgExtreme(x.data<int32_t>(), y, sp.outer, sp.len, sp.inner, max_, last_, r.stream); break;
      case DType::kInt64: e = ArgExtreme(x.data<int64_t>(), y, sp.outer, sp.len, sp.inner, max_, last_, r.stream); break;
      default: return Unimplemented("ArgMax/ArgMin over ", DTypeName(x.dtype()), " on CUDA");
    }
    return CudaStatus(e, "ArgExtreme");
  }

 private:
  bool max_, last_;
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
KernelFactory kReduceLogSum = MakeReduce<ReduceOp::kLogSum, &cpu::kReduceLogSum, 18>;
KernelFactory kReduceSumTraining = MakeReduce<ReduceOp::kSum, &cpu::kReduceSumTraining, 1>;
KernelFactory kArgMax = WrapOp<ArgKernel, bool, true, &cpu::kArgMax>;
KernelFactory kArgMin = WrapOp<ArgKernel, bool, false, &cpu::kArgMin>;

}  // namespace cuda
}  // namespace ontrain
