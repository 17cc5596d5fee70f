// GatherND and com.microsoft GatherNDGrad, ScatterND and ScatterElements (with their reductions), and TopK.
// Indices may be negative (counted from the end); an index out of range is an error naming it and where it
// was found. Scatters copy the data first, then apply the updates in index order, so that with duplicate
// indices the last update wins (reduction none) as in ONNX's reference.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

int64_t IndexValue(const Tensor& t, int64_t i) {
  return t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

StatusOr<int64_t> Wrap(int64_t idx, int64_t dim, const char* what, int64_t pos) {
  if (idx < -dim || idx >= dim) {
    return InvalidArgument(what, " index ", idx, " at position ", pos, " is out of range for a dimension of size ", dim);
  }
  return idx < 0 ? idx + dim : idx;
}

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

StatusOr<Reduction> ReadReduction(const Node& n) {
  const std::string r = n.GetString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  return InvalidArgument("reduction \"", r, "\" is not one of none, add, mul, max, min");
}

template <typename T>
void Apply(Reduction r, T* dst, T v) {
  using C = ComputeType<T>;
  if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case Reduction::kNone: *dst = v; break;
      case Reduction::kAdd: case Reduction::kMax: *dst = *dst || v; break;
      case Reduction::kMul: case Reduction::kMin: *dst = *dst && v; break;
    }
  } else {
    const C a = static_cast<C>(*dst), b = static_cast<C>(v);
    switch (r) {
      case Reduction::kNone: *dst = v; break;
      case Reduction::kAdd: *dst = static_cast<T>(a + b); break;
      case Reduction::kMul: *dst = static_cast<T>(a * b); break;
      case Reduction::kMax: *dst = static_cast<T>(std::max(a, b)); break;
      case Reduction::kMin: *dst = static_cast<T>(std::min(a, b)); break;
    }
  }
}

// The geometry of GatherND/ScatterND: data [B..., K-indexed..., slice...], indices [B..., M..., k].
struct NdGeometry {
  int64_t batch = 1;       // product of the batch dims
  int64_t per_batch = 1;   // index tuples per batch entry
  int64_t k = 0;           // indexed dims
  int64_t slice = 1;       // elements of one gathered slice
  int64_t data_batch = 1;  // data elements per batch entry

  static StatusOr<NdGeometry> Make(const Shape& data, const Shape& idx, int64_t batch_dims) {
    NdGeometry g;
    const int64_t r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(idx.size());
    if (q < 1 || r < 1) return InvalidArgument("data and indices must have rank >= 1");
    g.k = idx.back();
    if (batch_dims < 0 || batch_dims >= std::min(r, q)) return InvalidArgument("batch_dims ", batch_dims, " is out of range");
    if (g.k < 1 || g.k > r - batch_dims) {
      return InvalidArgument("indices' last dim ", g.k, " must be in [1, ", r - batch_dims, "] for data ", ShapeToString(data));
    }
    for (int64_t d = 0; d < batch_dims; ++d) {
      if (data[d] != idx[d]) return InvalidArgument("batch dim ", d, " differs: data ", data[d], ", indices ", idx[d]);
      g.batch *= data[d];
    }
    for (int64_t d = batch_dims; d < q - 1; ++d) g.per_batch *= idx[d];
    for (int64_t d = batch_dims + g.k; d < r; ++d) g.slice *= data[d];
    for (int64_t d = batch_dims; d < r; ++d) g.data_batch *= data[d];
    return g;
  }
  // Offset in the data of index tuple t (of batch entry b), checked.
  StatusOr<int64_t> Offset(const Tensor& idx, const Shape& data, int64_t batch_dims, int64_t b, int64_t t) const {
    int64_t off = 0;
    const int64_t base = (b * per_batch + t) * k;
    for (int64_t j = 0; j < k; ++j) {
      ONT_ASSIGN_OR_RETURN(int64_t i, Wrap(IndexValue(idx, base + j), data[batch_dims + j], "GatherND/ScatterND", base + j));
      off = off * data[batch_dims + j] + i;
    }
    return (b * data_batch) + off * slice;
  }
};

class GatherNDKernel : public OpKernel {
 public:
  explicit GatherNDKernel(const NodeInfo& info) : batch_dims_(info.node->GetInt("batch_dims", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    ONT_ASSIGN_OR_RETURN(geo_, NdGeometry::Make(x->shape(), idx->shape(), batch_dims_));
    Shape out(idx->shape().begin(), idx->shape().end() - 1);
    for (int64_t d = batch_dims_ + geo_.k; d < x->rank(); ++d) out.push_back(x->dim(d));
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1);
    const size_t es = DTypeSize(x.dtype()), bytes = static_cast<size_t>(geo_.slice) * es;
    const auto* src = static_cast<const uint8_t*>(x.raw_data());
    auto* dst = static_cast<uint8_t*>(ctx.output(0)->raw_data());
    for (int64_t b = 0; b < geo_.batch; ++b) {
      for (int64_t t = 0; t < geo_.per_batch; ++t) {
        ONT_ASSIGN_OR_RETURN(int64_t off, geo_.Offset(idx, x.shape(), batch_dims_, b, t));
        std::memcpy(dst + (b * geo_.per_batch + t) * bytes, src + off * es, bytes);
      }
    }
    return Status::OK();
  }

 private:
  int64_t batch_dims_;
  NdGeometry geo_;
};

// com.microsoft GatherNDGrad(shape, indices, update) -> zeros(shape) with update added at the gathered
// slices (ONNX Runtime's gradient of GatherND).
class GatherNDGradKernel : public OpKernel {
 public:
  explicit GatherNDGradKernel(const NodeInfo& info) : batch_dims_(info.node->GetInt("batch_dims", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 0, "shape"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    ONT_ASSIGN_OR_RETURN(const Tensor* up, RequireInput(ctx, 2, "update"));
    ONT_ASSIGN_OR_RETURN(shape_, ReadInts(*s, "shape"));
    ONT_ASSIGN_OR_RETURN(geo_, NdGeometry::Make(shape_, idx->shape(), batch_dims_));
    if (up->NumElements() != geo_.batch * geo_.per_batch * geo_.slice) {
      return InvalidArgument("update has shape ", ShapeToString(up->shape()), ", which does not match the indices");
    }
    return ctx.DeclareOutput(0, up->dtype(), shape_);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &idx = *ctx.input(1), &up = *ctx.input(2);
    Tensor* out = ctx.output(0);
    return DispatchFloat(up.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* o = out->data<T>();
      std::fill(o, o + out->NumElements(), T{});
      const T* u = up.data<T>();
      for (int64_t b = 0; b < geo_.batch; ++b) {
        for (int64_t t = 0; t < geo_.per_batch; ++t) {
          ONT_ASSIGN_OR_RETURN(int64_t off, geo_.Offset(idx, shape_, batch_dims_, b, t));
          const T* s = u + (b * geo_.per_batch + t) * geo_.slice;
          for (int64_t e = 0; e < geo_.slice; ++e) Apply(Reduction::kAdd, o + off + e, s[e]);
        }
      }
      return Status::OK();
    });
  }

 private:
  int64_t batch_dims_;
  Shape shape_;
  NdGeometry geo_;
};

class ScatterNDKernel : public OpKernel {
 public:
  explicit ScatterNDKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(reduction_, ReadReduction(node_));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    ONT_ASSIGN_OR_RETURN(const Tensor* up, RequireInput(ctx, 2, "updates"));
    ONT_ASSIGN_OR_RETURN(geo_, NdGeometry::Make(x->shape(), idx->shape(), 0));
    Shape want(idx->shape().begin(), idx->shape().end() - 1);
    for (int64_t d = geo_.k; d < x->rank(); ++d) want.push_back(x->dim(d));
    if (up->shape() != want) {
      return InvalidArgument("updates has shape ", ShapeToString(up->shape()), ", expected ", ShapeToString(want));
    }
    if (up->dtype() != x->dtype()) return InvalidArgument("updates and data dtypes differ");
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1), &up = *ctx.input(2);
    Tensor* out = ctx.output(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* o = out->data<T>();
      if (o != x.data<T>()) std::copy_n(x.data<T>(), x.NumElements(), o);
      const T* u = up.data<T>();
      for (int64_t t = 0; t < geo_.per_batch; ++t) {
        ONT_ASSIGN_OR_RETURN(int64_t off, geo_.Offset(idx, x.shape(), 0, 0, t));
        for (int64_t e = 0; e < geo_.slice; ++e) Apply(reduction_, o + off + e, u[t * geo_.slice + e]);
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  Reduction reduction_ = Reduction::kNone;
  NdGeometry geo_;
};

class ScatterElementsKernel : public OpKernel {
 public:
  explicit ScatterElementsKernel(const NodeInfo& info) : node_(*info.node), axis_(info.node->GetInt("axis", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(reduction_, ReadReduction(node_));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    ONT_ASSIGN_OR_RETURN(const Tensor* up, RequireInput(ctx, 2, "updates"));
    if (idx->rank() != x->rank() || up->shape() != idx->shape()) {
      return InvalidArgument("indices ", ShapeToString(idx->shape()), " and updates ", ShapeToString(up->shape()),
                             " must have one shape, of data's rank ", x->rank());
    }
    for (int64_t d = 0; d < x->rank(); ++d) {
      if (idx->dim(d) > x->dim(d)) return InvalidArgument("indices ", ShapeToString(idx->shape()), " exceed data ", ShapeToString(x->shape()));
    }
    if (up->dtype() != x->dtype()) return InvalidArgument("updates and data dtypes differ");
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &idx = *ctx.input(1), &up = *ctx.input(2);
    Tensor* out = ctx.output(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* o = out->data<T>();
      if (o != x.data<T>()) std::copy_n(x.data<T>(), x.NumElements(), o);
      const int64_t n = idx.NumElements(), rank = idx.rank();
      const T* u = up.data<T>();
      for (int64_t e = 0; e < n; ++e) {
        int64_t rem = e, off = 0, stride = 1;
        for (int64_t d = rank - 1; d >= 0; --d) {
          int64_t c = rem % idx.dim(d);
          rem /= idx.dim(d);
          if (d == axis_n_) {
            ONT_ASSIGN_OR_RETURN(c, Wrap(IndexValue(idx, e), x.dim(d), "ScatterElements", e));
          }
          off += c * stride;
          stride *= x.dim(d);
        }
        Apply(reduction_, o + off, u[e]);
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  int64_t axis_, axis_n_ = 0;
  Reduction reduction_ = Reduction::kNone;
};

// TopK(X, K) -> Values, Indices along `axis`: the K largest (or smallest) in order when sorted; equal values
// keep the lower index first, and NaN counts as larger than every number (as numpy's sort puts it last).
class TopKKernel : public OpKernel {
 public:
  explicit TopKKernel(const NodeInfo& info)
      : axis_(info.node->GetInt("axis", -1)),
        largest_(info.node->GetInt("largest", 1) != 0),
        sorted_(info.node->GetInt("sorted", 1) != 0),
        opset_(info.opset),
        k_attr_(info.node->GetInt("k", -1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    if (opset_ >= 10) {
      ONT_ASSIGN_OR_RETURN(const Tensor* kt, RequireInput(ctx, 1, "K"));
      ONT_ASSIGN_OR_RETURN(Shape kv, ReadInts(*kt, "K"));
      if (kv.size() != 1) return InvalidArgument("K must hold one value, has ", kv.size());
      k_ = kv[0];
    } else {
      k_ = k_attr_;
    }
    if (x->rank() == 0) return InvalidArgument("X must have rank >= 1");
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    if (k_ < 0 || k_ > x->dim(axis_n_)) return InvalidArgument("K = ", k_, " is out of range for axis of size ", x->dim(axis_n_));
    Shape out = x->shape();
    out[axis_n_] = k_;
    ctx.RequestScratch(static_cast<size_t>(x->dim(axis_n_)) * sizeof(int64_t));
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), out));
    return ctx.DeclareOutput(1, DType::kInt64, out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("TopK of bool");
      } else {
        using C = ComputeType<T>;
        AxisSplit sp = SplitAtAxis(x.shape(), axis_n_);
        int64_t* order = static_cast<int64_t*>(ctx.scratch());
        T* vals = ctx.output(0)->data<T>();
        int64_t* inds = ctx.output(1)->data<int64_t>();
        const T* px = x.data<T>();
        const bool largest = largest_;
        for (int64_t o = 0; o < sp.outer; ++o) {
          for (int64_t i = 0; i < sp.inner; ++i) {
            const T* row = px + o * sp.len * sp.inner + i;
            auto value = [&](int64_t j) { return static_cast<C>(row[j * sp.inner]); };
            // a before b: larger (or smaller) first, NaN as the largest, then the lower index
            auto before = [&](int64_t a, int64_t b) {
              const C va = value(a), vb = value(b);
              const bool na = va != va, nb = vb != vb;
              if (na || nb) {
                if (na && nb) return a < b;
                return largest ? na : nb;
              }
              if (va != vb) return largest ? va > vb : va < vb;
              return a < b;
            };
            std::iota(order, order + sp.len, int64_t{0});
            std::partial_sort(order, order + k_, order + sp.len, before);
            if (!sorted_) std::sort(order, order + k_);  // any order is allowed; index order is deterministic
            for (int64_t j = 0; j < k_; ++j) {
              const int64_t at = (o * k_ + j) * sp.inner + i;
              vals[at] = row[order[j] * sp.inner];
              inds[at] = order[j];
            }
          }
        }
        return Status::OK();
      }
    });
  }

 private:
  int64_t axis_;
  bool largest_, sorted_;
  int64_t opset_, k_attr_, k_ = 0, axis_n_ = 0;
};

}  // namespace

KernelFactory kGatherND = MakeKernel<GatherNDKernel>;
KernelFactory kGatherNDGrad = MakeKernel<GatherNDGradKernel>;
KernelFactory kScatterND = MakeKernel<ScatterNDKernel>;
KernelFactory kScatterElements = MakeKernel<ScatterElementsKernel>;
KernelFactory kTopK = MakeKernel<TopKKernel>;

}  // namespace cpu
}  // namespace ontrain
