// Kernel classes of ConstantOfShape, Einsum, Resize and ResizeGrad on CUDA. Prepare is the CPU kernel's,
// which also plans the shapes (Einsum's direct loop, Resize's taps, providers/cpu/kernels/plans.h); the
// device computes the same sums in the same order from that plan (device_math.h), one thread per output:
// - Einsum runs the direct loop for every equation (the CPU takes a GEMM for two operands without
//   diagonals or broadcast dims), so two-operand contractions are bitwise the CPU's direct loop, not its
//   GEMM;
// - Resize and ResizeGrad upload their tap tables when the plan changes (a new shape or scales), not per
//   step; ResizeGrad is a gather over the transposed taps, so no atomics and a fixed order.
#include <cstring>
#include <set>

#include "graph/tensor_proto.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/plans.h"
#include "providers/cuda/kernels/cuda_kernels.h"
#include "providers/cuda/kernels/device_plans.h"

namespace ontrain {
namespace cuda {
namespace {

class ConstantOfShapeKernel : public DelegatingKernel {
 public:
  ConstantOfShapeKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu) : DelegatingKernel(info, std::move(cpu)) {
    value_ = Tensor::FromVector<float>({0.0f}, {1});
    if (node_.HasAttribute("value")) {
      auto v = TensorFromProto(node_.attributes.at("value").t(), "");
      if (v.ok()) value_ = std::move(v).value();  // the CPU factory has already accepted it
    }
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    if (y->dtype() != value_.dtype()) return Internal("ConstantOfShape: output dtype differs from the value's");
    return CudaStatus(Fill(y->raw_data(), y->NumElements(), value_.raw_data(), static_cast<int>(DTypeSize(value_.dtype())),
                           r.stream),
                      "Fill");
  }

 private:
  Tensor value_;
};

class EinsumKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const cpu::EinsumDirectPlan* plan = cpu::EinsumPlanOf(cpu_kernel());
    if (plan == nullptr) return Internal("Einsum: the wrapped CPU kernel has no plan");
    EinsumArgs a;
    ONT_RETURN_IF_ERROR(MakeEinsumArgs(*plan, &a));
    Tensor* y = ctx.output(0);
    ONT_RETURN_IF_ERROR(CheckLaunchable(*y, "Einsum's output"));
    if (ctx.input(0)->dtype() == DType::kFloat64) return Run<double>(r, ctx, a);
    return Run<float>(r, ctx, a);
  }

 private:
  template <typename T>
  Status Run(const CudaResources& r, KernelContext& ctx, const EinsumArgs& a) {
    const T* ops[kEinsumMaxOperands] = {};
    for (int k = 0; k < a.operands; ++k) ops[k] = ctx.input(k)->template data<T>();
    Tensor* y = ctx.output(0);
    return CudaStatus(Einsum(a, ops, y->template data<T>(), y->NumElements(), r.stream), "Einsum");
  }
};

// Resize and ResizeGrad: the tables follow the CPU plan's generation.
class ResizeBase : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;

 protected:
  // Uploads the tables when the plan changed; returns their device view in *t.
  Status Tables(const CudaResources& r, ResizeTables* t) {
    cpu::ResizePlanView v;
    if (!cpu::ResizePlanOf(cpu_kernel(), &v) || v.generation == 0) return Internal(node_.op_type, ": no CPU plan");
    if (v.generation != generation_) {
      ONT_RETURN_IF_ERROR(MakeResizeArgs(v, &args_, &host_));
      const size_t ib = host_.ints.size() * sizeof(int64_t), wb = host_.weights.size() * sizeof(double),
                   fb = host_.flags.size();
      ONT_ASSIGN_OR_RETURN(void* dev, device_.Get(ib + wb + fb, r.allocator));
      uint8_t* p = static_cast<uint8_t*>(dev);
      staged_.resize(ib + wb + fb);
      std::memcpy(staged_.data(), host_.ints.data(), ib);
      std::memcpy(staged_.data() + ib, host_.weights.data(), wb);
      std::memcpy(staged_.data() + ib + wb, host_.flags.data(), fb);
      ONT_RETURN_IF_ERROR(
          CudaStatus(cudaMemcpyAsync(p, staged_.data(), staged_.size(), cudaMemcpyHostToDevice, r.stream), "cudaMemcpyAsync"));
      view_ = {reinterpret_cast<const int64_t*>(p), reinterpret_cast<const double*>(p + ib), p + ib + wb};
      generation_ = v.generation;
    }
    *t = view_;
    return Status::OK();
  }
  ResizeArgs args_;

 private:
  int64_t generation_ = 0;
  ResizeHostTables host_;
  std::vector<uint8_t> staged_;
  DeviceBuffer device_;
  ResizeTables view_ = {};
};

class ResizeKernel : public ResizeBase {
 public:
  using ResizeBase::ResizeBase;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    ResizeTables t;
    ONT_RETURN_IF_ERROR(Tables(r, &t));
    Tensor* y = ctx.output(0);
    ONT_RETURN_IF_ERROR(CheckLaunchable(*y, "Resize's output"));
    return CudaStatus(Resize(args_, t, ctx.input(0)->data<float>(), y->data<float>(), y->NumElements(), r.stream),
                      "Resize");
  }
};

class ResizeGradKernel : public ResizeBase {
 public:
  using ResizeBase::ResizeBase;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    ResizeTables t;
    ONT_RETURN_IF_ERROR(Tables(r, &t));
    Tensor* dx = ctx.output(0);
    ONT_RETURN_IF_ERROR(CheckLaunchable(*dx, "ResizeGrad's output"));
    return CudaStatus(
        ResizeGrad(args_, t, ctx.input(0)->data<float>(), dx->data<float>(), dx->NumElements(), r.stream), "ResizeGrad");
  }
};

}  // namespace

const char* EinsumRejects(const Node& n) {
  if (n.inputs.size() > static_cast<size_t>(kEinsumMaxOperands)) return "more than 4 operands";
  std::set<char> letters;
  for (char c : n.GetString("equation", "")) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) letters.insert(c);
  }
  // An ellipsis adds up to kMaxDims letters of its own.
  if (letters.size() + kMaxDims > static_cast<size_t>(kEinsumMaxLetters)) return "more than 16 distinct letters";
  return nullptr;
}

KernelFactory kConstantOfShape = Wrap<ConstantOfShapeKernel, &cpu::kConstantOfShape>;
KernelFactory kEinsum = Wrap<EinsumKernel, &cpu::kEinsum>;
KernelFactory kResize = Wrap<ResizeKernel, &cpu::kResize>;
KernelFactory kResizeGrad = Wrap<ResizeGradKernel, &cpu::kResizeGrad>;

}  // namespace cuda
}  // namespace ontrain
