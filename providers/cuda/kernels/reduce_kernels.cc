// Reductions on CUDA (float32): ReduceSum/Mean/Max/Min/SumSquare/L1/L2/LogSumExp and com.microsoft's
// ReduceSumTraining. The output shape comes from the CPU kernel's Prepare; here the reduced axes become
// [outer, len, inner] for the device kernel. When the reduced axes (ignoring size-1 dims) are not one
// contiguous run, x is first transposed into a kept-then-reduced order in a kernel-owned buffer.
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
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(std::vector<bool> reduced, ReducedAxes(ctx, x.rank()));
    // 1. Drop size-1 dims; find whether the reduced dims are one run.
    Shape dims;
    std::vector<bool> red;
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (x.dim(d) == 1) continue;
      dims.push_back(x.dim(d));
      red.push_back(reduced[d]);
    }
    int first = -1, last = -1;
    for (size_t d = 0; d < red.size(); ++d) {
      if (!red[d]) continue;
      if (first < 0) first = static_cast<int>(d);
      last = static_cast<int>(d);
    }
    bool run = true;
    for (int d = first; d >= 0 && d <= last; ++d) run = run && red[d];
    int64_t outer = 1, len = 1, inner = 1;
    const float* src = x.data<float>();
    if (run) {
      for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
        if (first < 0 || d < first) outer *= dims[d];
        else if (d <= last) len *= dims[d];
        else inner *= dims[d];
      }
    } else {
      ONT_ASSIGN_OR_RETURN(src, TransposeReducedLast(r, x, dims, red, &outer, &len));
    }
    return CudaStatus(Reduce(op_, src, y->data<float>(), outer, len, inner, r.stream), "Reduce");
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

  // Copies x (dims without size-1 entries) into [kept..., reduced...] order; outer = kept count, len =
  // reduced count.
  StatusOr<const float*> TransposeReducedLast(const CudaResources& r, const Tensor& x, const Shape& dims,
                                              const std::vector<bool>& red, int64_t* outer, int64_t* len) {
    if (dims.size() > static_cast<size_t>(kMaxDims)) return Unimplemented("reduction over rank ", dims.size());
    std::vector<int64_t> strides(dims.size());
    int64_t s = 1;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      strides[d] = s;
      s *= dims[d];
    }
    StridedSpace sp;
    sp.rank = static_cast<int>(dims.size());
    int k = 0;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t d = 0; d < dims.size(); ++d) {
        if (red[d] != (pass == 1)) continue;
        sp.dims[k] = dims[d];
        sp.strides[1][k] = strides[d];
        (pass == 0 ? *outer : *len) *= dims[d];
        ++k;
      }
    }
    s = 1;
    for (int d = sp.rank - 1; d >= 0; --d) {
      sp.strides[0][d] = s;
      s *= sp.dims[d];
    }
    ONT_ASSIGN_OR_RETURN(void* buf, transposed_.Get(x.SizeInBytes(), r.allocator));
    ONT_RETURN_IF_ERROR(CudaStatus(StridedCopy(x.raw_data(), buf, sp, 4, r.stream), "StridedCopy"));
    return static_cast<const float*>(buf);
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
