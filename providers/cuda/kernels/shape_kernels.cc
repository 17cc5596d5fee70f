// Kernel classes of the data-movement ops on CUDA. Their output shapes are exactly the CPU kernels': each
// wraps the CPU kernel of its node and delegates Prepare to it (which reads only shapes, attributes and
// host inputs), then moves the bytes on the device:
// - Identity, Reshape, Squeeze, Unsqueeze, Flatten: one device-to-device copy;
// - Transpose, Expand, Tile, Concat, Split: strided copies (providers/cuda/kernels/copy.cu);
// - Slice, SliceGrad, Pad: strided copies over the CPU's slice geometry, and the pad kernel;
// - ConcatTraining, SplitTraining: Concat and Split with ONNX Runtime's extras;
// - Gather, GatherGrad: their own kernels.
#include <cstring>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/plans.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

using cpu::NormalizeAxis;

// Row-major strides of `shape`.
void ContiguousStrides(const Shape& shape, int64_t* strides) {
  int64_t s = 1;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    strides[d] = s;
    s *= shape[d];
  }
}

Status CheckRank(size_t rank) {
  if (rank > static_cast<size_t>(kMaxDims)) return Unimplemented("rank ", rank, " (the CUDA kernels handle up to ", kMaxDims, ")");
  return Status::OK();
}

class CopyKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (x.SizeInBytes() == 0 || x.raw_data() == y->raw_data()) return Status::OK();
    return CudaStatus(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream),
                      "cudaMemcpyAsync");
  }
};

class TransposeKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    int rank = static_cast<int>(x.rank());
    ONT_RETURN_IF_ERROR(CheckRank(rank));
    std::vector<int64_t> perm = node_.GetInts("perm");
    if (perm.empty()) for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
    StridedSpace s;
    s.rank = std::max(rank, 1);
    s.dims[0] = 1;
    int64_t in_strides[kMaxDims];
    ContiguousStrides(x.shape(), in_strides);
    ContiguousStrides(y->shape(), s.strides[0]);
    for (int d = 0; d < rank; ++d) {
      s.dims[d] = y->dim(d);
      s.strides[1][d] = in_strides[perm[d]];
    }
    return CudaStatus(StridedCopy(x.raw_data(), y->raw_data(), s, static_cast<int>(DTypeSize(x.dtype())), r.stream),
                      "StridedCopy");
  }
};

class ExpandKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), x.shape()}));
    return CudaStatus(StridedCopy(x.raw_data(), y->raw_data(), s, static_cast<int>(DTypeSize(x.dtype())), r.stream),
                      "StridedCopy");
  }
};

// Tile: output dim d of size repeats * in_d is iterated as (repeat, i) with source stride (0, stride_d).
class TileKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (y->NumElements() == 0) return Status::OK();
    ONT_RETURN_IF_ERROR(CheckRank(2 * x.rank()));
    int64_t in_strides[kMaxDims];
    ContiguousStrides(x.shape(), in_strides);
    StridedSpace s;
    s.rank = static_cast<int>(2 * x.rank());
    for (int d = 0; d < x.rank(); ++d) {
      s.dims[2 * d] = y->dim(d) / x.dim(d);
      s.dims[2 * d + 1] = x.dim(d);
      s.strides[1][2 * d] = 0;
      s.strides[1][2 * d + 1] = in_strides[d];
    }
    Shape iter(s.dims, s.dims + s.rank);
    ContiguousStrides(iter, s.strides[0]);
    if (s.rank == 0) s.rank = 1, s.dims[0] = 1;
    return CudaStatus(StridedCopy(x.raw_data(), y->raw_data(), s, static_cast<int>(DTypeSize(x.dtype())), r.stream),
                      "StridedCopy");
  }
};

// Copies `part` (contiguous) into or out of the slab [offset, offset + part.dim(axis)) along `axis` of
// `whole`: into when `into`, else out of it.
Status CopySlab(const Tensor& part, const Tensor& whole, int64_t axis, int64_t offset, bool into, cudaStream_t stream) {
  if (part.NumElements() == 0) return Status::OK();
  ONT_RETURN_IF_ERROR(CheckRank(part.rank()));
  StridedSpace s;
  s.rank = static_cast<int>(part.rank());
  int64_t whole_strides[kMaxDims], part_strides[kMaxDims];
  ContiguousStrides(whole.shape(), whole_strides);
  ContiguousStrides(part.shape(), part_strides);
  for (int d = 0; d < s.rank; ++d) {
    s.dims[d] = part.dim(d);
    s.strides[into ? 0 : 1][d] = whole_strides[d];
    s.strides[into ? 1 : 0][d] = part_strides[d];
  }
  size_t elem = DTypeSize(part.dtype());
  const uint8_t* whole_base = static_cast<const uint8_t*>(whole.raw_data()) + offset * whole_strides[axis] * elem;
  const void* src = into ? part.raw_data() : whole_base;
  void* dst = into ? const_cast<uint8_t*>(whole_base) : const_cast<void*>(part.raw_data());
  return CudaStatus(StridedCopy(src, dst, s, static_cast<int>(elem), stream), "StridedCopy");
}

class ConcatKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node_.GetInt("axis", 1), y->rank()));
    int64_t offset = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* x = ctx.input(i);
      if (x == nullptr) continue;
      ONT_RETURN_IF_ERROR(CopySlab(*x, *y, axis, offset, true, r.stream));
      offset += x->dim(axis);
    }
    return Status::OK();
  }
};

class SplitKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node_.GetInt("axis", 0), x.rank()));
    int64_t offset = 0;
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      const Shape& part = ctx.declared_shape(i);
      if (static_cast<int64_t>(part.size()) != x.rank()) return Internal("Split output ", i, " was not declared");
      if (Tensor* y = ctx.output(i)) ONT_RETURN_IF_ERROR(CopySlab(*y, x, axis, offset, false, r.stream));
      offset += part[axis];
    }
    return Status::OK();
  }
};

// ConcatTraining: Concat, plus output 1, the per-input lengths along the axis (int64 [n]). They depend on
// the input shapes only: uploaded into a buffer of the kernel when they change, copied from there on the
// device at every run (the output lives in the arena, which other values reuse), so that a recorded run
// replays that copy.
class ConcatTrainingKernel : public ConcatKernel {
 public:
  using ConcatKernel::ConcatKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(ConcatKernel::ComputeCuda(r, ctx));
    Tensor* lens = ctx.output(1);
    if (lens == nullptr) return Status::OK();
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node_.GetInt("axis", 0), ctx.input(0)->rank()));
    lengths_.clear();
    for (int i = 0; i < ctx.num_inputs(); ++i) lengths_.push_back(ctx.input(i) ? ctx.input(i)->dim(axis) : 0);
    const size_t bytes = sizeof(int64_t) * lengths_.size();
    if (stored_ == nullptr || lengths_ != uploaded_) {
      ONT_RETURN_IF_ERROR(RefuseWhileCapturing(r, "new ConcatTraining lengths"));
      ONT_ASSIGN_OR_RETURN(stored_, device_.Get(bytes, r.allocator));
      // From pageable memory the call returns once the source has been staged, so lengths_ may change next.
      ONT_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(stored_, lengths_.data(), bytes, cudaMemcpyHostToDevice, r.stream), "cudaMemcpyAsync"));
      uploaded_ = lengths_;
    }
    return CudaStatus(cudaMemcpyAsync(lens->raw_data(), stored_, bytes, cudaMemcpyDeviceToDevice, r.stream),
                      "cudaMemcpyAsync");
  }

 private:
  std::vector<int64_t> lengths_, uploaded_;
  DeviceBuffer device_;
  void* stored_ = nullptr;
};

// Slice: the CPU's slice geometry (offset and signed strides) as one strided copy.
class SliceKernel : public DelegatingKernel {
 public:
  SliceKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), opset_(info.opset) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    Shape starts, ends, axes, steps;
    if (opset_ >= 10) {
      ONT_RETURN_IF_ERROR(cpu::ReadSliceInputs(ctx, 1, &starts, &ends, &axes, &steps));
    } else {
      starts = node_.GetInts("starts");
      ends = node_.GetInts("ends");
      axes = node_.GetInts("axes");
    }
    ONT_ASSIGN_OR_RETURN(cpu::SliceGeometry g, cpu::ComputeSlice(x.shape(), starts, ends, axes, steps));
    return CopySlice(r, g, x.raw_data(), y->raw_data(), DTypeSize(x.dtype()), false);
  }

  // Gathers the slice (scatter false: dst contiguous) or scatters a contiguous tensor into it.
  static Status CopySlice(const CudaResources& r, const cpu::SliceGeometry& g, const void* src, void* dst, size_t elem,
                          bool scatter) {
    if (ShapeNumElements(g.out) == 0) return Status::OK();
    ONT_RETURN_IF_ERROR(CheckRank(g.out.size()));
    StridedSpace s;
    s.rank = std::max<int>(1, static_cast<int>(g.out.size()));
    s.dims[0] = 1;
    int64_t contiguous[kMaxDims];
    ContiguousStrides(g.out, contiguous);
    for (size_t d = 0; d < g.out.size(); ++d) {
      s.dims[d] = g.out[d];
      s.strides[scatter ? 0 : 1][d] = g.strides[d];
      s.strides[scatter ? 1 : 0][d] = contiguous[d];
    }
    const uint8_t* base = static_cast<const uint8_t*>(scatter ? dst : src) + g.offset * static_cast<int64_t>(elem);
    const void* from = scatter ? src : base;
    void* to = scatter ? const_cast<uint8_t*>(base) : dst;
    return CudaStatus(StridedCopy(from, to, s, static_cast<int>(elem), r.stream), "StridedCopy");
  }

 private:
  int64_t opset_;
};

// SliceGrad(dY, shape, starts, ends, axes?, steps?): zeros with dY scattered into the slice.
class SliceGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& dy = *ctx.input(0);
    Tensor* dx = ctx.output(0);
    Shape starts, ends, axes, steps;
    ONT_RETURN_IF_ERROR(cpu::ReadSliceInputs(ctx, 2, &starts, &ends, &axes, &steps));
    ONT_ASSIGN_OR_RETURN(cpu::SliceGeometry g, cpu::ComputeSlice(dx->shape(), starts, ends, axes, steps));
    ONT_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(dx->raw_data(), 0, dx->SizeInBytes(), r.stream));
    return SliceKernel::CopySlice(r, g, dy.raw_data(), dx->raw_data(), DTypeSize(dy.dtype()), true);
  }
};

// Pad (opset >= 11: pads and constant_value are host inputs), any dtype, modes constant, edge, reflect.
class PadKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    ONT_RETURN_IF_ERROR(CheckRank(x.rank()));
    ONT_ASSIGN_OR_RETURN(std::vector<int64_t> pads, cpu::ReadInts(*ctx.input(1), "pads"));
    double value = 0;
    if (ctx.input(2) && ctx.input(2)->NumElements() > 0) {
      ONT_ASSIGN_OR_RETURN(value, cpu::ReadScalar(*ctx.input(2), "constant_value"));
    }
    std::string mode = node_.GetString("mode", "constant");
    PadArgs a{};
    a.rank = static_cast<int>(x.rank());
    a.mode = mode == "edge" ? 1 : mode == "reflect" ? 2 : mode == "wrap" ? 3 : 0;
    // pads lists begins then ends, for every dim or (opset 18) for the dims in `axes`
    std::vector<int64_t> axes;
    if (ctx.input(3) && ctx.input(3)->NumElements() > 0) {
      ONT_ASSIGN_OR_RETURN(Shape given, cpu::ReadInts(*ctx.input(3), "axes"));
      for (int64_t ax : given) {
        ONT_ASSIGN_OR_RETURN(int64_t n, NormalizeAxis(ax, x.rank()));
        axes.push_back(n);
      }
    } else {
      for (int d = 0; d < a.rank; ++d) axes.push_back(d);
    }
    for (int d = 0; d < a.rank; ++d) {
      a.out[d] = y->dim(d);
      a.in[d] = x.dim(d);
      a.begin[d] = 0;
    }
    for (size_t i = 0; i < axes.size(); ++i) a.begin[axes[i]] = pads[i];
    ONT_RETURN_IF_ERROR(cpu::DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T v = cpu::ConvertValue<T>(value);
      std::memcpy(&a.fill, &v, sizeof(T));
      return Status::OK();
    }));
    if (a.rank == 0) {  // nothing to pad: a copy
      return CudaStatus(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream),
                        "cudaMemcpyAsync");
    }
    return CudaStatus(Pad(x.raw_data(), y->raw_data(), a, static_cast<int>(DTypeSize(x.dtype())), r.stream), "Pad");
  }
};

// GatherElementsGrad(dY, shape, indices) -> dX of `shape`.
class GatherElementsGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &idx = *ctx.input(2);
    Tensor* dx = ctx.output(0);
    ONT_RETURN_IF_ERROR(CheckRank(dx->rank()));
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node_.GetInt("axis", 0), dx->rank()));
    ElementsGradArgs a{};
    a.rank = static_cast<int>(dx->rank());
    a.axis = static_cast<int>(axis);
    for (int d = 0; d < a.rank; ++d) {
      a.x[d] = dx->dim(d);
      a.y[d] = dy.dim(d);
    }
    return CudaStatus(GatherElementsGrad(dy.data<float>(), idx.raw_data(), idx.dtype() == DType::kInt64,
                                         dx->data<float>(), a, r.stream),
                      "GatherElementsGrad");
  }
};

// Gather(data, indices): out-of-range indices give zeros on the device (the CPU kernel reports them).
class GatherKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1);
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node_.GetInt("axis", 0), x.rank()));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (d < axis) outer *= x.dim(d);
      if (d > axis) inner *= x.dim(d);
    }
    ONT_ASSIGN_OR_RETURN(void* bad, flag_.Get(sizeof(int), r.allocator));
    return CudaStatus(Gather(x.raw_data(), idx.raw_data(), idx.dtype() == DType::kInt64, ctx.output(0)->raw_data(), outer,
                             x.dim(axis), inner, idx.NumElements(), static_cast<int>(DTypeSize(x.dtype())),
                             static_cast<int*>(bad), r.stream),
                      "Gather");
  }

 private:
  DeviceBuffer flag_;
};

// GatherGrad(shape, indices, dY) -> dX of `shape`: the rows dY gathered, summed back.
class GatherGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &idx = *ctx.input(1), &dy = *ctx.input(2);
    Tensor* dx = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node_.GetInt("axis", 0), dx->rank()));
    int64_t outer = 1, inner = 1;
    for (int64_t d = 0; d < dx->rank(); ++d) {
      if (d < axis) outer *= dx->dim(d);
      if (d > axis) inner *= dx->dim(d);
    }
    const int64_t rows = dx->dim(axis), n = idx.NumElements();
    float* partial = nullptr;  // the position ranges' partial sums, where the index list is split
    if (const int64_t ranges = GatherGradRanges(rows, inner, n, outer); ranges > 1) {
      ONT_ASSIGN_OR_RETURN(void* ws, workspace_.Get(sizeof(float) * ranges * outer * rows * inner, r.allocator));
      partial = static_cast<float*>(ws);
    }
    return CudaStatus(GatherGrad(dy.data<float>(), idx.raw_data(), idx.dtype() == DType::kInt64, dx->data<float>(),
                                 rows, inner, n, outer, partial, r.stream),
                      "GatherGrad");
  }

 private:
  DeviceBuffer workspace_;
};


// DepthToSpace and SpaceToDepth: one strided copy over the CPU's six-dim plan (providers/cpu/kernels/plans.h).
class BlockShuffleKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (y->NumElements() == 0) return Status::OK();
    ONT_ASSIGN_OR_RETURN(cpu::BlockShuffle p, cpu::PlanBlockShuffle(node_, x.shape()));
    StridedSpace s;
    s.rank = static_cast<int>(p.view.size());
    ContiguousStrides(p.view, s.strides[0]);
    for (int d = 0; d < s.rank; ++d) {
      s.dims[d] = p.view[d];
      s.strides[1][d] = p.strides[d];
    }
    return CudaStatus(StridedCopy(x.raw_data(), y->raw_data(), s, static_cast<int>(DTypeSize(x.dtype())), r.stream),
                      "StridedCopy");
  }
};

}  // namespace

KernelFactory kIdentity = Wrap<CopyKernel, &cpu::kIdentity>;
KernelFactory kReshape = Wrap<CopyKernel, &cpu::kReshape>;
KernelFactory kSqueeze = Wrap<CopyKernel, &cpu::kSqueeze>;
KernelFactory kUnsqueeze = Wrap<CopyKernel, &cpu::kUnsqueeze>;
KernelFactory kFlatten = Wrap<CopyKernel, &cpu::kFlatten>;
KernelFactory kTranspose = Wrap<TransposeKernel, &cpu::kTranspose>;
KernelFactory kExpand = Wrap<ExpandKernel, &cpu::kExpand>;
KernelFactory kTile = Wrap<TileKernel, &cpu::kTile>;
KernelFactory kConcat = Wrap<ConcatKernel, &cpu::kConcat>;
KernelFactory kSplit = Wrap<SplitKernel, &cpu::kSplit>;
KernelFactory kGather = Wrap<GatherKernel, &cpu::kGather>;
KernelFactory kConcatTraining = Wrap<ConcatTrainingKernel, &cpu::kConcatTraining>;
KernelFactory kSplitTraining = Wrap<SplitKernel, &cpu::kSplitTraining>;
KernelFactory kSlice = Wrap<SliceKernel, &cpu::kSlice>;
KernelFactory kGatherElementsGrad = Wrap<GatherElementsGradKernel, &cpu::kGatherElementsGrad>;
KernelFactory kSliceGrad = Wrap<SliceGradKernel, &cpu::kSliceGrad>;
KernelFactory kPad = Wrap<PadKernel, &cpu::kPad>;
KernelFactory kGatherGrad = Wrap<GatherGradKernel, &cpu::kGatherGrad>;

KernelFactory kDepthToSpace = Wrap<BlockShuffleKernel, &cpu::kDepthToSpace>;
KernelFactory kSpaceToDepth = Wrap<BlockShuffleKernel, &cpu::kSpaceToDepth>;

}  // namespace cuda
}  // namespace ontrain
