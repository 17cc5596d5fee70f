// More elementwise kernel classes on CUDA, float32: Pow (any numeric exponent, cast to the base's type
// first), the variadic Sum/Max/Min, DivGrad, and Dropout with its gradient.
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

// Pow(X, Y) -> X's dtype; Y of another dtype is cast on the device first.
class PowKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &e = *ctx.input(1);
    Tensor* y = ctx.output(0);
    const float* pe = e.data<float>();
    if (e.dtype() != DType::kFloat32) {
      ONT_ASSIGN_OR_RETURN(void* buf, exponent_.Get(sizeof(float) * std::max<int64_t>(e.NumElements(), 1), r.allocator));
      ONT_RETURN_IF_ERROR(CudaStatus(
          Cast(static_cast<int>(e.dtype()), static_cast<int>(DType::kFloat32), e.raw_data(), buf, e.NumElements(), r.stream),
          "Cast"));
      pe = static_cast<const float*>(buf);
    }
    ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), x.shape(), e.shape()}));
    return CudaStatus(Binary(BinaryOp::kPow, x.data<float>(), pe, y->data<float>(), s, 0, r.stream), "Binary(Pow)");
  }

 private:
  DeviceBuffer exponent_;
};

// Sum, Max, Min over any number of inputs with broadcasting: y = in0 (broadcast), then y = y op in_k in
// input order, as the CPU kernels fold them.
class VariadicKernel : public DelegatingKernel {
 public:
  VariadicKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, BinaryOp op, bool mean)
      : DelegatingKernel(info, std::move(cpu)), op_(op), mean_(mean) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    const Tensor& first = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(StridedSpace s0, BroadcastSpace(y->shape(), {y->shape(), first.shape()}));
    size_t elem = DTypeSize(first.dtype());
    ONT_RETURN_IF_ERROR(CudaStatus(StridedCopy(first.raw_data(), y->raw_data(), s0, static_cast<int>(elem), r.stream),
                                   "StridedCopy"));
    for (int i = 1; i < ctx.num_inputs(); ++i) {
      const Tensor& in = *ctx.input(i);
      ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), y->shape(), in.shape()}));
      cudaError_t e = cudaErrorInvalidValue;
      switch (first.dtype()) {
        case DType::kFloat32: e = Binary(op_, y->data<float>(), in.data<float>(), y->data<float>(), s, 0, r.stream); break;
        case DType::kFloat64: e = Binary(op_, y->data<double>(), in.data<double>(), y->data<double>(), s, 0, r.stream); break;
        case DType::kInt32: e = Binary(op_, y->data<int32_t>(), in.data<int32_t>(), y->data<int32_t>(), s, 0, r.stream); break;
        case DType::kInt64: e = Binary(op_, y->data<int64_t>(), in.data<int64_t>(), y->data<int64_t>(), s, 0, r.stream); break;
        default: return Unimplemented("dtype ", DTypeName(first.dtype()));
      }
      ONT_RETURN_IF_ERROR(CudaStatus(e, "Binary"));
    }
    if (!mean_) return Status::OK();
    // Mean: the sum divided by the input count, as the CPU kernel divides (float32 and float64 only).
    const float count = static_cast<float>(ctx.num_inputs());
    if (first.dtype() == DType::kFloat64) {
      return CudaStatus(Unary(UnaryOp::kDivBy, y->data<double>(), y->data<double>(), y->NumElements(), count, r.stream),
                        "Unary(DivBy)");
    }
    return CudaStatus(Unary(UnaryOp::kDivBy, y->data<float>(), y->data<float>(), y->NumElements(), count, r.stream),
                      "Unary(DivBy)");
  }

 private:
  BinaryOp op_;
  bool mean_;
};

// DivGrad(dY, A, B) -> (dA = sum-to-A(dY / B), dB = sum-to-B(-dY A / B^2)), through the scratch buffer the
// CPU kernel's Prepare asks for (one dY-sized tensor).
class DivGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &a = *ctx.input(1), &b = *ctx.input(2);
    float* full = static_cast<float*>(ctx.scratch());
    const Shape& s = dy.shape();
    if (Tensor* da = ctx.output(0)) {
      ONT_ASSIGN_OR_RETURN(StridedSpace sp, BroadcastSpace(s, {s, s, b.shape()}));
      ONT_RETURN_IF_ERROR(CudaStatus(Binary(BinaryOp::kDiv, dy.data<float>(), b.data<float>(), full, sp, 0, r.stream), "Binary"));
      ONT_RETURN_IF_ERROR(SumToShape(r, full, s, a.shape(), da->data<float>(), &scratch_));
    }
    if (Tensor* db = ctx.output(1)) {
      ONT_ASSIGN_OR_RETURN(StridedSpace sp, BroadcastSpace(s, {s, a.shape(), b.shape()}));
      ONT_RETURN_IF_ERROR(CudaStatus(Binary(BinaryOp::kDivBySquare, a.data<float>(), b.data<float>(), full, sp, 0, r.stream),
                                     "Binary"));
      ONT_ASSIGN_OR_RETURN(StridedSpace flat, BroadcastSpace(s, {s, s, s}));
      ONT_RETURN_IF_ERROR(CudaStatus(Binary(BinaryOp::kNegMul, full, dy.data<float>(), full, flat, 0, r.stream), "Binary"));
      ONT_RETURN_IF_ERROR(SumToShape(r, full, s, b.shape(), db->data<float>(), &scratch_));
    }
    return Status::OK();
  }

 private:
  DeviceBuffer scratch_;
};

// Dropout (opset >= 12): ratio and training_mode are host inputs. Each run draws from the counter range
// after the previous run's, so steps get fresh masks; the stream of masks depends only on the seed. The
// counter lives on the device and advances there, so a recorded run (graph capture) replays with fresh
// masks too.
class DropoutKernel : public DelegatingKernel {
 public:
  DropoutKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)),
        seed_(info.node->HasAttribute("seed") ? static_cast<uint64_t>(info.node->GetInt("seed", 0)) : NextSeed()) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    Tensor* mask = ctx.output(1);
    double ratio = 0.5;
    if (const Tensor* t = ctx.input(1)) {
      ONT_ASSIGN_OR_RETURN(ratio, cpu::ReadScalar(*t, "ratio"));
    }
    bool training = ctx.input(2) && ctx.input(2)->data<bool>()[0];
    int64_t n = x.NumElements();
    if (!training || ratio == 0.0) {
      ONT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream));
      if (mask) ONT_RETURN_IF_ERROR(CudaStatus(SetFlags(static_cast<uint8_t*>(mask->raw_data()), n, true, r.stream), "SetFlags"));
      return Status::OK();
    }
    uint8_t* m = mask ? static_cast<uint8_t*>(mask->raw_data()) : nullptr;
    if (counter_ == nullptr) {  // the counter of draws so far, on the device (Dropout advances it there)
      ONT_ASSIGN_OR_RETURN(void* p, counter_buffer_.Get(sizeof(uint64_t), r.allocator));
      counter_ = static_cast<uint64_t*>(p);
      ONT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(counter_, 0, sizeof(uint64_t), r.stream));
    }
    return CudaStatus(Dropout(x.data<float>(), y->data<float>(), m, n, static_cast<float>(ratio), seed_, counter_,
                              r.stream),
                      "Dropout");
  }

 private:
  uint64_t seed_;
  DeviceBuffer counter_buffer_;
  uint64_t* counter_ = nullptr;
};

// DropoutGrad(dY, mask, ratio?, training_mode?).
class DropoutGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &mask = *ctx.input(1);
    double ratio = 0.5;
    if (const Tensor* t = ctx.input(2)) {
      ONT_ASSIGN_OR_RETURN(ratio, cpu::ReadScalar(*t, "ratio"));
    }
    bool training = ctx.input(3) && ctx.input(3)->data<bool>()[0];
    Tensor* dx = ctx.output(0);
    if (!training || ratio == 0.0) {
      return CudaStatus(cudaMemcpyAsync(dx->raw_data(), dy.raw_data(), dy.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream),
                        "cudaMemcpyAsync");
    }
    return CudaStatus(DropoutGrad(dy.data<float>(), static_cast<const uint8_t*>(mask.raw_data()), dx->data<float>(),
                                  dy.NumElements(), static_cast<float>(1.0 / (1.0 - ratio)), r.stream),
                      "DropoutGrad");
  }
};

template <BinaryOp op, const KernelFactory* cpu_factory, bool mean = false>
StatusOr<std::unique_ptr<OpKernel>> MakeVariadic(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> cpu, (*cpu_factory)(info));
  return std::unique_ptr<OpKernel>(new VariadicKernel(info, std::move(cpu), op, mean));
}

}  // namespace

KernelFactory kPow = Wrap<PowKernel, &cpu::kPow>;
KernelFactory kSum = MakeVariadic<BinaryOp::kAdd, &cpu::kSum>;
KernelFactory kMax = MakeVariadic<BinaryOp::kMax, &cpu::kMax>;
KernelFactory kMin = MakeVariadic<BinaryOp::kMin, &cpu::kMin>;
KernelFactory kMean = MakeVariadic<BinaryOp::kAdd, &cpu::kMean, true>;
KernelFactory kDivGrad = Wrap<DivGradKernel, &cpu::kDivGrad>;
KernelFactory kDropout = Wrap<DropoutKernel, &cpu::kDropout>;
KernelFactory kDropoutGrad = Wrap<DropoutGradKernel, &cpu::kDropoutGrad>;

}  // namespace cuda
}  // namespace ontrain
