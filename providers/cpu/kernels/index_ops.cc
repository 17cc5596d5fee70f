// Kernels that select or place elements by index: Gather, GatherElements, Slice, Pad, OneHot, Trilu, CumSum.
#include <algorithm>
#include <cstring>
#include <limits>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

// Index in [-dim, dim) -> [0, dim), or an error naming where it was found.
StatusOr<int64_t> CheckIndex(int64_t idx, int64_t dim, int64_t pos) {
  if (idx < -dim || idx >= dim) {
    return InvalidArgument("index ", idx, " at position ", pos, " is out of range for a dimension of size ", dim);
  }
  return idx < 0 ? idx + dim : idx;
}

int64_t IndexAt(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

// data [outer, dim, inner], indices any shape -> [outer, indices..., inner].
class GatherKernel : public OpKernel {
 public:
  explicit GatherKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    if (idx->dtype() != DType::kInt32 && idx->dtype() != DType::kInt64) {
      return InvalidArgument("indices must be int32 or int64, got ", DTypeName(idx->dtype()));
    }
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    Shape out(x->shape().begin(), x->shape().begin() + axis_n_);
    out.insert(out.end(), idx->shape().begin(), idx->shape().end());
    out.insert(out.end(), x->shape().begin() + axis_n_ + 1, x->shape().end());
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1);
    AxisSplit split = SplitAtAxis(x.shape(), axis_n_);
    int64_t outer = split.outer, inner = split.inner, dim = x.dim(axis_n_), n = idx.NumElements();
    size_t row = static_cast<size_t>(inner) * DTypeSize(x.dtype());
    const uint8_t* px = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* py = static_cast<uint8_t*>(ctx.output(0)->raw_data());
    for (int64_t i = 0; i < n; ++i) ONT_RETURN_IF_ERROR(CheckIndex(IndexAt(idx, i), dim, i).status());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < n; ++i) {
        int64_t k = IndexAt(idx, i);
        if (k < 0) k += dim;
        std::memcpy(py + (o * n + i) * row, px + (o * dim + k) * row, row);
      }
    }
    return Status::OK();
  }

 private:
  int64_t axis_, axis_n_ = 0;
};

// out[i...] = data[i... with i_axis replaced by indices[i...]]; out has the indices' shape.
class GatherElementsKernel : public OpKernel {
 public:
  explicit GatherElementsKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    if (idx->rank() != x->rank()) return InvalidArgument("indices rank ", idx->rank(), " != data rank ", x->rank());
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    return ctx.DeclareOutput(0, x->dtype(), idx->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1);
    return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      Shape xs = Strides(x.shape());
      int64_t n = idx.NumElements(), rank = idx.rank();
      for (int64_t o = 0; o < n; ++o) {
        int64_t rem = o, off = 0;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t c = rem % idx.dim(d);
          rem /= idx.dim(d);
          if (d == axis_n_) {
            ONT_ASSIGN_OR_RETURN(c, CheckIndex(IndexAt(idx, o), x.dim(d), o));
          } else if (c >= x.dim(d)) {
            return InvalidArgument("indices shape ", ShapeToString(idx.shape()), " exceeds data ", ShapeToString(x.shape()));
          }
          off += c * xs[d];
        }
        ctx.output(0)->data<T>()[o] = x.data<T>()[off];
      }
      return Status::OK();
    });
  }

 private:
  int64_t axis_, axis_n_ = 0;
};

// Slice: starts/ends/axes/steps from inputs (opset >= 10) or attributes (opset 1).
class SliceKernel : public OpKernel {
 public:
  explicit SliceKernel(const NodeInfo& info) : node_(*info.node), opset_(info.opset) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    Shape starts, ends, axes, steps;
    if (opset_ >= 10) {
      ONT_RETURN_IF_ERROR(ReadSliceInputs(ctx, 1, &starts, &ends, &axes, &steps));
    } else {
      starts = node_.GetInts("starts");
      ends = node_.GetInts("ends");
      axes = node_.GetInts("axes");
    }
    ONT_ASSIGN_OR_RETURN(geo_, ComputeSlice(x->shape(), starts, ends, axes, steps));
    return ctx.DeclareOutput(0, x->dtype(), geo_.out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    size_t es = DTypeSize(x.dtype());
    StridedCopy(static_cast<const uint8_t*>(x.raw_data()) + geo_.offset * es, geo_.strides, ctx.output(0)->shape(), es,
                ctx.output(0)->raw_data(), ctx.thread_pool());
    return Status::OK();
  }

 private:
  const Node& node_;
  int64_t opset_;
  SliceGeometry geo_;
};

// SliceGrad(dY, shape, starts, ends, axes?, steps?) (com.microsoft): zeros of `shape` with dY written into
// the sliced positions.
class SliceGradKernel : public OpKernel {
 public:
  explicit SliceGradKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* sh, RequireInput(ctx, 1, "shape"));
    ONT_ASSIGN_OR_RETURN(Shape shape, ReadInts(*sh, "shape"));
    Shape starts, ends, axes, steps;
    ONT_RETURN_IF_ERROR(ReadSliceInputs(ctx, 2, &starts, &ends, &axes, &steps));
    ONT_ASSIGN_OR_RETURN(geo_, ComputeSlice(shape, starts, ends, axes, steps));
    if (geo_.out != dy->shape()) {
      return InvalidArgument("dY has shape ", ShapeToString(dy->shape()), " but the slice is ", ShapeToString(geo_.out));
    }
    return ctx.DeclareOutput(0, dy->dtype(), shape);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& dy = *ctx.input(0);
    Tensor* dx = ctx.output(0);
    return DispatchBySize(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      std::memset(dx->raw_data(), 0, dx->SizeInBytes());
      int64_t rank = dy.rank();
      for (int64_t o = 0; o < dy.NumElements(); ++o) {
        int64_t rem = o, off = geo_.offset;
        for (int64_t d = rank - 1; d >= 0; --d) {
          off += (rem % dy.dim(d)) * geo_.strides[d];
          rem /= dy.dim(d);
        }
        dx->data<T>()[off] = dy.data<T>()[o];
      }
      return Status::OK();
    });
  }

 private:
  SliceGeometry geo_;
};

// Pad: pads [begin..., end...] (negative pads crop) and the constant value from attributes before opset 11,
// from inputs 1 and 2 after; opset 18's axes input names the padded axes (pads then has 2 * len(axes)
// values); modes constant, reflect, edge and (opset 19) wrap.
class PadKernel : public OpKernel {
 public:
  explicit PadKernel(const NodeInfo& info) : node_(*info.node), opset_(info.opset) {
    const std::string mode = info.node->GetString("mode", "constant");
    mode_ = mode == "constant" ? kConstant : mode == "reflect" ? kReflect : mode == "edge" ? kEdge
          : mode == "wrap" ? kWrap : kUnknown;
  }
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    if (mode_ == kUnknown) return InvalidArgument("unknown mode \"", node_.GetString("mode", ""), "\"");
    const int64_t rank = x->rank();
    if (opset_ >= 11) {
      ONT_ASSIGN_OR_RETURN(const Tensor* p, RequireInput(ctx, 1, "pads"));
      ONT_ASSIGN_OR_RETURN(Shape given, ReadInts(*p, "pads"));
      value_ = 0;
      if (ctx.input(2) && ctx.input(2)->NumElements() > 0) {
        ONT_ASSIGN_OR_RETURN(value_, ReadScalar(*ctx.input(2), "constant_value"));
      }
      if (ctx.input(3) && ctx.input(3)->NumElements() > 0) {  // axes (opset 18)
        ONT_ASSIGN_OR_RETURN(Shape axes, ReadInts(*ctx.input(3), "axes"));
        const int64_t na = static_cast<int64_t>(axes.size());
        if (static_cast<int64_t>(given.size()) != 2 * na) {
          return InvalidArgument("pads has ", given.size(), " values, expected ", 2 * na, " for ", na, " axes");
        }
        pads_.assign(static_cast<size_t>(2 * rank), 0);
        for (int64_t i = 0; i < na; ++i) {
          ONT_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(axes[i], rank, "axes"));
          pads_[ax] = given[i];
          pads_[ax + rank] = given[i + na];
        }
      } else {
        pads_ = given;
      }
    } else {
      pads_ = node_.GetInts(opset_ < 2 ? "paddings" : "pads");
      value_ = node_.GetFloat("value", 0.0f);
    }
    if (static_cast<int64_t>(pads_.size()) != 2 * rank) {
      return InvalidArgument("pads has ", pads_.size(), " values, expected ", 2 * rank, " for rank ", rank);
    }
    Shape out(rank);
    for (int64_t d = 0; d < rank; ++d) {
      out[d] = x->dim(d) + pads_[d] + pads_[d + rank];
      if (out[d] < 0) return InvalidArgument("pads ", ShapeToString(pads_), " crop dimension ", d, " below zero");
      if (mode_ != kConstant && x->dim(d) == 0 && out[d] > 0) {
        return InvalidArgument(node_.GetString("mode", ""), " padding of an empty dim");
      }
    }
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T fill = ConvertValue<T>(value_);
      Shape xs = Strides(x.shape());
      int64_t n = y->NumElements(), rank = y->rank();
      for (int64_t o = 0; o < n; ++o) {
        int64_t rem = o, off = 0;
        bool outside = false;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t c = rem % y->dim(d) - pads_[d], dim = x.dim(d);
          rem /= y->dim(d);
          if (c < 0 || c >= dim) {
            if (mode_ == kConstant) {
              outside = true;
              break;
            }
            if (mode_ == kEdge) {
              c = c < 0 ? 0 : dim - 1;
            } else if (mode_ == kWrap) {
              c = ((c % dim) + dim) % dim;
            } else if (dim == 1) {
              c = 0;
            } else {
              int64_t period = 2 * (dim - 1);
              c = ((c % period) + period) % period;
              if (c >= dim) c = period - c;
            }
          }
          off += c * xs[d];
        }
        y->data<T>()[o] = outside ? fill : x.data<T>()[off];
      }
      return Status::OK();
    });
  }

 private:
  enum Mode { kConstant, kReflect, kEdge, kWrap, kUnknown };
  const Node& node_;
  int64_t opset_;
  Mode mode_ = kConstant;
  Shape pads_;
  double value_ = 0;
};

// OneHot(indices, depth, values=[off, on]): a new axis of size depth at `axis`.
class OneHotKernel : public OpKernel {
 public:
  explicit OneHotKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", -1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 0, "indices"));
    ONT_ASSIGN_OR_RETURN(const Tensor* dp, RequireInput(ctx, 1, "depth"));
    ONT_ASSIGN_OR_RETURN(const Tensor* v, RequireInput(ctx, 2, "values"));
    if (v->NumElements() != 2) return InvalidArgument("values must have 2 elements, got ", ShapeToString(v->shape()));
    ONT_ASSIGN_OR_RETURN(double depth, ReadScalar(*dp, "depth"));
    depth_ = static_cast<int64_t>(depth);
    if (depth_ < 1) return InvalidArgument("depth must be >= 1, got ", depth);
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, idx->rank() + 1));
    Shape out = idx->shape();
    out.insert(out.begin() + axis_n_, depth_);
    return ctx.DeclareOutput(0, v->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &idx = *ctx.input(0), &v = *ctx.input(2);
    Tensor* y = ctx.output(0);
    return DispatchAll(v.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < idx.rank(); ++d) (d < axis_n_ ? outer : inner) *= idx.dim(d);
      T off = v.data<T>()[0], on = v.data<T>()[1];
      T* py = y->data<T>();
      for (int64_t i = 0; i < y->NumElements(); ++i) py[i] = off;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          ONT_ASSIGN_OR_RETURN(double raw, ReadScalarAt(idx, o * inner + i));
          int64_t k = static_cast<int64_t>(raw);
          if (k < 0) k += depth_;
          if (k >= 0 && k < depth_) py[(o * depth_ + k) * inner + i] = on;
        }
      }
      return Status::OK();
    });
  }

 private:
  static StatusOr<double> ReadScalarAt(const Tensor& t, int64_t i) {
    double out = 0;
    ONT_RETURN_IF_ERROR(DispatchAll(t.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      out = ConvertValue<double>(t.data<T>()[i]);
      return Status::OK();
    }));
    return out;
  }
  int64_t axis_, axis_n_ = 0, depth_ = 0;
};

// Trilu: keeps the upper (upper=1) or lower triangle of the last two dims, offset by k (input 1).
class TriluKernel : public OpKernel {
 public:
  explicit TriluKernel(const NodeInfo& info) : upper_(info.node->GetInt("upper", 1) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() < 2) return InvalidArgument("input must have rank >= 2");
    k_ = 0;
    if (ctx.input(1)) {
      ONT_ASSIGN_OR_RETURN(double k, ReadScalar(*ctx.input(1), "k"));
      k_ = static_cast<int64_t>(k);
    }
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t rows = x.dim(x.rank() - 2), cols = x.dim(x.rank() - 1);
      int64_t mats = (rows * cols) != 0 ? x.NumElements() / (rows * cols) : 0;
      const T* px = x.data<T>();
      T* py = ctx.output(0)->data<T>();
      for (int64_t m = 0; m < mats; ++m) {
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j) {
            int64_t at = (m * rows + i) * cols + j;
            bool keep = upper_ ? j - i >= k_ : j - i <= k_;
            py[at] = keep ? px[at] : T(0);
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  bool upper_;
  int64_t k_ = 0;
};

// CumSum along the axis given by input 1; `exclusive` shifts by one, `reverse` runs from the end.
class CumSumKernel : public OpKernel {
 public:
  explicit CumSumKernel(const NodeInfo& info)
      : exclusive_(info.node->GetInt("exclusive", 0) != 0), reverse_(info.node->GetInt("reverse", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "x"));
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 1, "axis"));
    ONT_ASSIGN_OR_RETURN(double axis, ReadScalar(*a, "axis"));
    ONT_ASSIGN_OR_RETURN(axis_, NormalizeAxis(static_cast<int64_t>(axis), x->rank()));
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool input");
      } else {
        AxisSplit split = SplitAtAxis(x.shape(), axis_);
        int64_t outer = split.outer, inner = split.inner, len = split.len;
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            C acc = 0;
            for (int64_t s = 0; s < len; ++s) {
              int64_t k = reverse_ ? len - 1 - s : s;
              int64_t at = (o * len + k) * inner + i;
              C v = static_cast<C>(x.data<T>()[at]);
              if (!exclusive_) acc += v;
              ctx.output(0)->data<T>()[at] = static_cast<T>(acc);
              if (exclusive_) acc += v;
            }
          }
        }
        return Status::OK();
      }
    });
  }

 private:
  bool exclusive_, reverse_;
  int64_t axis_ = 0;
};

}  // namespace

KernelFactory kGather = MakeKernel<GatherKernel>;
KernelFactory kGatherElements = MakeKernel<GatherElementsKernel>;
KernelFactory kSlice = MakeKernel<SliceKernel>;
KernelFactory kSliceGrad = MakeKernel<SliceGradKernel>;
KernelFactory kPad = MakeKernel<PadKernel>;
KernelFactory kOneHot = MakeKernel<OneHotKernel>;
KernelFactory kTrilu = MakeKernel<TriluKernel>;
KernelFactory kCumSum = MakeKernel<CumSumKernel>;

}  // namespace cpu
}  // namespace ontrain
