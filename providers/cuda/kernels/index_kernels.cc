// Kernel classes of ConstantOfShape, Einsum, Resize, ResizeGrad and the index ops (Trilu, CumSum,
// GatherElements, ScatterElements, GatherND, GatherNDGrad, ScatterND, TopK) on CUDA. Prepare is the CPU kernel's,
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
#include "providers/cpu/kernels/common.h"
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

// Resize and ResizeGrad: the tables follow the CPU plan's generation (rebuilt only when the shapes, roi,
// scales or sizes change), uploaded into a buffer of the kernel when it changes; a recorded run (graph
// capture) only reads them there.
class ResizeBase : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;

 protected:
  // Uploads the tables when the plan changed; returns their device view in *t.
  Status Tables(const CudaResources& r, ResizeTables* t) {
    cpu::ResizePlanView v;
    if (!cpu::ResizePlanOf(cpu_kernel(), &v) || v.generation == 0) return Internal(node_.op_type, ": no CPU plan");
    if (v.generation != generation_) {
      ONT_RETURN_IF_ERROR(RefuseWhileCapturing(r, "new Resize tables"));
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


Status Launched(cudaError_t e, const char* what) { return CudaStatus(e, what); }

bool Index64(const Tensor& idx) { return idx.dtype() == DType::kInt64; }

Status CopyInto(const Tensor& from, Tensor* to, cudaStream_t stream) {
  if (from.raw_data() == to->raw_data() || from.SizeInBytes() == 0) return Status::OK();
  return CudaStatus(cudaMemcpyAsync(to->raw_data(), from.raw_data(), from.SizeInBytes(), cudaMemcpyDeviceToDevice, stream),
                    "cudaMemcpyAsync");
}

StatusOr<int> ReductionOf(const Node& n) {
  const std::string r = n.GetString("reduction", "none");
  if (r == "none") return static_cast<int>(kScatterNone);
  if (r == "add") return static_cast<int>(kScatterAdd);
  if (r == "mul") return static_cast<int>(kScatterMul);
  if (r == "max") return static_cast<int>(kScatterMax);
  if (r == "min") return static_cast<int>(kScatterMin);
  return InvalidArgument("reduction \"", r, "\"");
}

class TriluKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    TriluArgs a;
    a.upper = node_.GetInt("upper", 1) != 0;
    a.rows = x.dim(x.rank() - 2);
    a.cols = x.dim(x.rank() - 1);
    if (ctx.input(1) && ctx.input(1)->NumElements() > 0) {
      ONT_ASSIGN_OR_RETURN(double k, cpu::ReadScalar(*ctx.input(1), "k"));
      a.k = static_cast<int64_t>(k);
    }
    if (a.rows == 0 || a.cols == 0) return Status::OK();
    return Launched(Trilu(x.raw_data(), ctx.output(0)->raw_data(), a, x.NumElements(), static_cast<int>(DTypeSize(x.dtype())),
                          r.stream),
                    "Trilu");
  }
};

class CumSumKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(double ax, cpu::ReadScalar(*ctx.input(1), "axis"));
    ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(static_cast<int64_t>(ax), x.rank()));
    const cpu::AxisSplit sp = cpu::SplitAtAxis(x.shape(), axis);
    const bool exclusive = node_.GetInt("exclusive", 0) != 0, reverse = node_.GetInt("reverse", 0) != 0;
    Tensor* y = ctx.output(0);
    if (x.dtype() == DType::kFloat64) {
      return Launched(CumSum(x.data<double>(), y->data<double>(), sp.outer * sp.inner, sp.len, sp.inner, exclusive, reverse,
                             r.stream),
                      "CumSum");
    }
    return Launched(
        CumSum(x.data<float>(), y->data<float>(), sp.outer * sp.inner, sp.len, sp.inner, exclusive, reverse, r.stream),
        "CumSum");
  }
};

class GatherElementsKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1);
    ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(node_.GetInt("axis", 0), x.rank()));
    ElementsArgs a;
    ONT_RETURN_IF_ERROR(MakeElementsArgs(x.shape(), idx.shape(), axis, &a));
    return Launched(GatherElements(x.raw_data(), idx.raw_data(), Index64(idx), ctx.output(0)->raw_data(), a, idx.NumElements(),
                                   static_cast<int>(DTypeSize(x.dtype())), r.stream),
                    "GatherElements");
  }
};

class ScatterElementsKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1), &up = *ctx.input(2);
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(int red, ReductionOf(node_));
    ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(node_.GetInt("axis", 0), x.rank()));
    ElementsArgs a;
    ONT_RETURN_IF_ERROR(MakeElementsArgs(x.shape(), idx.shape(), axis, &a));
    ONT_RETURN_IF_ERROR(CopyInto(x, y, r.stream));
    if (idx.NumElements() == 0) return Status::OK();
    return Launched(ScatterElements(up.data<float>(), idx.raw_data(), Index64(idx), y->data<float>(), a, red,
                                    idx.NumElements() / idx.dim(axis), r.stream),
                    "ScatterElements");
  }
};

class GatherNDKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1);
    NdArgs a;
    ONT_RETURN_IF_ERROR(MakeNdArgs(x.shape(), idx.shape(), node_.GetInt("batch_dims", 0), &a));
    Tensor* y = ctx.output(0);
    return Launched(GatherND(x.raw_data(), idx.raw_data(), Index64(idx), y->raw_data(), a, y->NumElements(),
                             static_cast<int>(DTypeSize(x.dtype())), r.stream),
                    "GatherND");
  }
};

// GatherNDGrad(shape, indices, dY): zeros of `shape`, then dY's slices added at their indices.
class GatherNDGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &idx = *ctx.input(1), &dy = *ctx.input(2);
    Tensor* dx = ctx.output(0);
    NdArgs a;
    ONT_RETURN_IF_ERROR(MakeNdArgs(dx->shape(), idx.shape(), node_.GetInt("batch_dims", 0), &a));
    ONT_RETURN_IF_ERROR(CudaStatus(cudaMemsetAsync(dx->raw_data(), 0, dx->SizeInBytes(), r.stream), "cudaMemsetAsync"));
    return Launched(NdScatter(dy.data<float>(), idx.raw_data(), Index64(idx), dx->data<float>(), a, kScatterAdd, r.stream),
                    "NdScatter");
  }
};

class ScatterNDKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1), &up = *ctx.input(2);
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(int red, ReductionOf(node_));
    NdArgs a;
    ONT_RETURN_IF_ERROR(MakeNdArgs(x.shape(), idx.shape(), 0, &a));
    ONT_RETURN_IF_ERROR(CopyInto(x, y, r.stream));
    return Launched(NdScatter(up.data<float>(), idx.raw_data(), Index64(idx), y->data<float>(), a, red, r.stream), "NdScatter");
  }
};

// TopK: K is the output's length along the axis (the CPU kernel's Prepare read it and checked it). An output
// the graph does not read (an eval graph's indices, say) is computed into the scratch: the selection needs
// both.
class TopKKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status Prepare(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(DelegatingKernel::Prepare(ctx));
    const int64_t n = ShapeNumElements(ctx.declared_shape(0));
    size_t bytes = 0;
    if (!ctx.output_requested(1)) bytes += static_cast<size_t>(n) * sizeof(int64_t);
    if (!ctx.output_requested(0)) bytes += static_cast<size_t>(n) * sizeof(float);
    ctx.RequestScratch(bytes);
    return Status::OK();
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(node_.GetInt("axis", -1), x.rank()));
    Tensor* values = ctx.output(0);
    Tensor* indices = ctx.output(1);
    Shape out = x.shape();
    out[axis] = values ? values->dim(axis) : indices->dim(axis);
    const int64_t n = ShapeNumElements(out);
    uint8_t* scratch = static_cast<uint8_t*>(ctx.scratch());
    int64_t* pi = indices ? indices->data<int64_t>() : reinterpret_cast<int64_t*>(scratch);
    float* pv = values ? values->data<float>() : reinterpret_cast<float*>(scratch + (indices ? 0 : n * sizeof(int64_t)));
    const cpu::AxisSplit sp = cpu::SplitAtAxis(x.shape(), axis);
    return Launched(TopK(x.data<float>(), pv, pi, sp.outer * sp.inner, sp.len, sp.inner, out[axis],
                         node_.GetInt("largest", 1) != 0, node_.GetInt("sorted", 1) != 0, r.stream),
                    "TopK");
  }
};

// OneHot(indices, depth (host), values [off, on]) with the new axis at `axis`.
class OneHotKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &idx = *ctx.input(0), &values = *ctx.input(2);
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(int64_t axis, cpu::NormalizeAxis(node_.GetInt("axis", -1), idx.rank() + 1));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < idx.rank(); ++d) (d < axis ? outer : inner) *= idx.dim(d);
    return Launched(OneHot(idx.raw_data(), idx.dtype() == DType::kInt64, values.raw_data(), y->raw_data(), outer,
                           y->dim(axis), inner, static_cast<int>(DTypeSize(values.dtype())), r.stream),
                    "OneHot");
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
KernelFactory kTrilu = Wrap<TriluKernel, &cpu::kTrilu>;
KernelFactory kCumSum = Wrap<CumSumKernel, &cpu::kCumSum>;
KernelFactory kGatherElements = Wrap<GatherElementsKernel, &cpu::kGatherElements>;
KernelFactory kScatterElements = Wrap<ScatterElementsKernel, &cpu::kScatterElements>;
KernelFactory kGatherND = Wrap<GatherNDKernel, &cpu::kGatherND>;
KernelFactory kGatherNDGrad = Wrap<GatherNDGradKernel, &cpu::kGatherNDGrad>;
KernelFactory kScatterND = Wrap<ScatterNDKernel, &cpu::kScatterND>;
KernelFactory kTopK = Wrap<TopKKernel, &cpu::kTopK>;
KernelFactory kOneHot = Wrap<OneHotKernel, &cpu::kOneHot>;

}  // namespace cuda
}  // namespace ontrain
