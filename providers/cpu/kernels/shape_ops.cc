// Kernels that change a tensor's shape or layout without arithmetic: Reshape, Flatten, Squeeze, Unsqueeze,
// Identity, Transpose, Concat, Split, Expand, Tile, Shape, Size.
#include <algorithm>
#include <cstring>
#include <set>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/plans.h"

namespace ontrain {
namespace cpu {
namespace {

// Output 0 is a byte copy of input 0 with the shape Prepare computes: a view of input 0 where the executor
// allows one (then CopyBytes sees one pointer and copies nothing).
class CopyKernel : public OpKernel {
 public:
  Status Compute(KernelContext& ctx) override {
    CopyBytes(*ctx.input(0), ctx.output(0));
    return Status::OK();
  }

 protected:
  static Status DeclareCopy(KernelContext& ctx, const Tensor& x, Shape shape) {
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x.dtype(), std::move(shape)));
    ctx.AllowViewOfInput(0, 0);
    return Status::OK();
  }
};

class IdentityKernel : public CopyKernel {
 public:
  explicit IdentityKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    return DeclareCopy(ctx, *x, x->shape());
  }
};

// Reshape: shape from input 1 (opset >= 5) or the `shape` attribute. 0 copies the input dim (unless
// allowzero=1), -1 is inferred.
class ReshapeKernel : public CopyKernel {
 public:
  explicit ReshapeKernel(const NodeInfo& info)
      : opset_(info.opset), attr_shape_(info.node->GetInts("shape")), allowzero_(info.node->GetInt("allowzero", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    Shape target = attr_shape_;
    if (opset_ >= 5) {
      ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "shape"));
      ONT_ASSIGN_OR_RETURN(target, ReadInts(*s, "shape"));
    }
    Shape out(target.size());
    int64_t infer = -1, known = 1;
    for (size_t i = 0; i < target.size(); ++i) {
      int64_t d = target[i];
      if (d == 0 && !allowzero_) {
        if (i >= x->shape().size()) return InvalidArgument("shape[", i, "] = 0 but the input has rank ", x->rank());
        d = x->dim(i);
      }
      if (d == -1) {
        if (infer >= 0) return InvalidArgument("shape ", ShapeToString(target), " has more than one -1");
        infer = static_cast<int64_t>(i);
        continue;
      }
      if (d < 0) return InvalidArgument("shape ", ShapeToString(target), " has a negative dimension");
      out[i] = d;
      known *= d;
    }
    if (infer >= 0) {
      if (known == 0 || x->NumElements() % known != 0) {
        return InvalidArgument("cannot reshape ", ShapeToString(x->shape()), " to ", ShapeToString(target));
      }
      out[infer] = x->NumElements() / known;
    }
    if (ShapeNumElements(out) != x->NumElements()) {
      return InvalidArgument("cannot reshape ", ShapeToString(x->shape()), " (", x->NumElements(), " elements) to ",
                             ShapeToString(target));
    }
    return DeclareCopy(ctx, *x, out);
  }

 private:
  int64_t opset_;
  Shape attr_shape_;
  bool allowzero_;
};

class FlattenKernel : public CopyKernel {
 public:
  explicit FlattenKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", 1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    int64_t axis = axis_ < 0 ? axis_ + x->rank() : axis_;
    if (axis < 0 || axis > x->rank()) return InvalidArgument("axis ", axis_, " out of range for rank ", x->rank());
    int64_t a = 1, b = 1;
    for (int64_t d = 0; d < x->rank(); ++d) (d < axis ? a : b) *= x->dim(d);
    return DeclareCopy(ctx, *x, {a, b});
  }

 private:
  int64_t axis_;
};

// Axes from the `axes` attribute (before opset 13) or the optional input 1.
StatusOr<Shape> AxesFrom(KernelContext& ctx, const Node& node, int64_t opset, int64_t input_since) {
  if (opset >= input_since) {
    if (const Tensor* a = ctx.input(1)) return ReadInts(*a, "axes");
    return Shape();
  }
  return node.GetDims("axes");
}

class SqueezeKernel : public CopyKernel {
 public:
  explicit SqueezeKernel(const NodeInfo& info) : node_(*info.node), opset_(info.opset) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(Shape axes, AxesFrom(ctx, node_, opset_, 13));
    Shape drop;  // inline for small ranks: Prepare runs every step and must not allocate
    drop.assign(static_cast<size_t>(x->rank()), 0);
    if (axes.empty()) {
      for (int64_t d = 0; d < x->rank(); ++d) drop[d] = x->dim(d) == 1;
    }
    for (int64_t a : axes) {
      ONT_ASSIGN_OR_RETURN(int64_t d, NormalizeAxis(a, x->rank()));
      if (x->dim(d) != 1) return InvalidArgument("cannot squeeze axis ", a, " of size ", x->dim(d));
      drop[d] = 1;
    }
    Shape out;
    for (int64_t d = 0; d < x->rank(); ++d) if (!drop[d]) out.push_back(x->dim(d));
    return DeclareCopy(ctx, *x, out);
  }

 private:
  const Node& node_;
  int64_t opset_;
};

class UnsqueezeKernel : public CopyKernel {
 public:
  explicit UnsqueezeKernel(const NodeInfo& info) : node_(*info.node), opset_(info.opset) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(Shape axes, AxesFrom(ctx, node_, opset_, 13));
    if (axes.empty()) return InvalidArgument("axes must not be empty");
    int64_t rank = x->rank() + static_cast<int64_t>(axes.size());
    Shape added(static_cast<size_t>(rank), 0);
    for (int64_t a : axes) {
      ONT_ASSIGN_OR_RETURN(int64_t d, NormalizeAxis(a, rank));
      if (added[d]) return InvalidArgument("axis ", a, " is repeated");
      added[d] = true;
    }
    Shape out;
    int64_t j = 0;
    for (int64_t d = 0; d < rank; ++d) out.push_back(added[d] ? 1 : x->dim(j++));
    return DeclareCopy(ctx, *x, out);
  }

 private:
  const Node& node_;
  int64_t opset_;
};

class TransposeKernel : public OpKernel {
 public:
  explicit TransposeKernel(const NodeInfo& info) : perm_attr_(info.node->GetInts("perm")) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    int64_t rank = x->rank();
    perm_ = perm_attr_;
    if (perm_.empty()) for (int64_t d = rank - 1; d >= 0; --d) perm_.push_back(d);
    if (static_cast<int64_t>(perm_.size()) != rank) {
      return InvalidArgument("perm ", ShapeToString(perm_), " does not match rank ", rank);
    }
    Shape seen(static_cast<size_t>(rank), 0);  // a Shape: no allocation for small ranks
    Shape out(rank);
    for (int64_t d = 0; d < rank; ++d) {
      int64_t p = perm_[d];
      if (p < 0 || p >= rank || seen[p]) return InvalidArgument("perm ", ShapeToString(perm_), " is not a permutation");
      seen[p] = true;
      out[d] = x->dim(p);
    }
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Shape in_strides = Strides(x.shape()), strides(perm_.size());
    for (size_t d = 0; d < perm_.size(); ++d) strides[d] = in_strides[perm_[d]];
    StridedCopy(x.raw_data(), strides, ctx.output(0)->shape(), DTypeSize(x.dtype()), ctx.output(0)->raw_data(),
                ctx.thread_pool());
    return Status::OK();
  }

 private:
  Shape perm_attr_, perm_;
};

class ConcatKernel : public OpKernel {
 public:
  explicit ConcatKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", 1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x0, RequireInput(ctx, 0, "inputs"));
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x0->rank()));
    Shape out = x0->shape();
    out[axis_n_] = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, i, "inputs"));
      bool ok = x->rank() == x0->rank() && x->dtype() == x0->dtype();
      for (int64_t d = 0; ok && d < x->rank(); ++d) ok = d == axis_n_ || x->dim(d) == x0->dim(d);
      if (!ok) {
        return InvalidArgument("input ", i, " ", DTypeName(x->dtype()), ShapeToString(x->shape()),
                               " does not match input 0 ", DTypeName(x0->dtype()), ShapeToString(x0->shape()),
                               " outside axis ", axis_n_);
      }
      out[axis_n_] += x->dim(axis_n_);
    }
    return ctx.DeclareOutput(0, x0->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    size_t es = DTypeSize(y->dtype());
    AxisSplit split = SplitAtAxis(y->shape(), axis_n_);
    int64_t outer = split.outer, inner = split.inner;
    int64_t out_row = y->dim(axis_n_) * inner * es, offset = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {  // input by input (rows of all inputs interleaved ran slower)
      const Tensor& x = *ctx.input(i);
      int64_t row = x.dim(axis_n_) * inner * es;
      ParallelFor(ctx.thread_pool(), outer, static_cast<double>(row), [&](int64_t o0, int64_t o1) {  // 4 a float
        for (int64_t o = o0; o < o1; ++o) {
          std::memcpy(static_cast<uint8_t*>(y->raw_data()) + o * out_row + offset,
                      static_cast<const uint8_t*>(x.raw_data()) + o * row, row);
        }
      });
      offset += row;
    }
    return Status::OK();
  }

 private:
  int64_t axis_, axis_n_ = 0;
};

// Split along `axis`: sizes from input 1 (opset >= 13) or the `split` attribute, else equal parts.
class SplitKernel : public OpKernel {
 public:
  explicit SplitKernel(const NodeInfo& info)
      : axis_(info.node->GetInt("axis", 0)), opset_(info.opset), attr_split_(info.node->GetInts("split")) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    sizes_ = opset_ >= 13 ? Shape() : attr_split_;
    if (ctx.input(1) && (opset_ >= 13 || opset_ < 2)) {
      ONT_ASSIGN_OR_RETURN(sizes_, ReadInts(*ctx.input(1), "split"));
    }
    int64_t dim = x->dim(axis_n_), n = ctx.num_outputs();
    if (sizes_.empty()) {
      if (n == 0 || dim % n != 0) return InvalidArgument("axis size ", dim, " does not split into ", n, " equal parts");
      sizes_.assign(n, dim / n);
    }
    int64_t total = 0;
    for (int64_t s : sizes_) total += s;
    if (static_cast<int64_t>(sizes_.size()) != n || total != dim) {
      return InvalidArgument("split ", ShapeToString(sizes_), " does not cover axis size ", dim, " with ", n, " outputs");
    }
    for (int i = 0; i < n; ++i) {
      Shape s = x->shape();
      s[axis_n_] = sizes_[i];
      ONT_RETURN_IF_ERROR(ctx.DeclareOutput(i, x->dtype(), s));
    }
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    size_t es = DTypeSize(x.dtype());
    AxisSplit split = SplitAtAxis(x.shape(), axis_n_);
    int64_t outer = split.outer, inner = split.inner;
    int64_t in_row = x.dim(axis_n_) * inner * es, offset = 0;
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      int64_t row = sizes_[i] * inner * es;
      if (Tensor* y = ctx.output(i)) {  // output by output (all outputs' rows interleaved ran slower)
        ParallelFor(ctx.thread_pool(), outer, static_cast<double>(row), [&](int64_t o0, int64_t o1) {  // 4 a float
          for (int64_t o = o0; o < o1; ++o) {
            std::memcpy(static_cast<uint8_t*>(y->raw_data()) + o * row,
                        static_cast<const uint8_t*>(x.raw_data()) + o * in_row + offset, row);
          }
        });
      }
      offset += row;
    }
    return Status::OK();
  }

 private:
  int64_t axis_, opset_, axis_n_ = 0;
  Shape attr_split_, sizes_;
};

class ExpandKernel : public OpKernel {
 public:
  explicit ExpandKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "shape"));
    ONT_ASSIGN_OR_RETURN(Shape shape, ReadInts(*s, "shape"));
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({x->shape(), shape}));
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    StridedCopy(x.raw_data(), BroadcastStrides(x.shape(), y->shape()), y->shape(), DTypeSize(x.dtype()), y->raw_data(),
                ctx.thread_pool());
    return Status::OK();
  }
};

// Tile; before opset 6 the inputs were (input, tiles, axis): repeat `tiles` times along `axis`.
class TileKernel : public OpKernel {
 public:
  explicit TileKernel(const NodeInfo& info) : opset_(info.opset) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(const Tensor* r, RequireInput(ctx, 1, "repeats"));
    Shape reps;
    if (opset_ < 6) {
      ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 2, "axis"));
      ONT_ASSIGN_OR_RETURN(double tiles, ReadScalar(*r, "tiles"));
      ONT_ASSIGN_OR_RETURN(double axis, ReadScalar(*a, "axis"));
      ONT_ASSIGN_OR_RETURN(int64_t ax, NormalizeAxis(static_cast<int64_t>(axis), x->rank()));
      reps.assign(x->rank(), 1);
      reps[ax] = static_cast<int64_t>(tiles);
    } else {
      ONT_ASSIGN_OR_RETURN(reps, ReadInts(*r, "repeats"));
    }
    if (static_cast<int64_t>(reps.size()) != x->rank()) {
      return InvalidArgument("repeats has ", reps.size(), " values for an input of rank ", x->rank());
    }
    Shape out(x->rank());
    for (int64_t d = 0; d < x->rank(); ++d) {
      if (reps[d] < 0) return InvalidArgument("repeats must be >= 0");
      out[d] = x->dim(d) * reps[d];
    }
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      T* py = y->data<T>();
      Shape st = Strides(x.shape());
      int64_t n = y->NumElements(), rank = y->rank();
      for (int64_t o = 0; o < n; ++o) {
        int64_t rem = o, off = 0;
        for (int64_t d = rank - 1; d >= 0; --d) {
          off += (rem % y->dim(d)) % x.dim(d) * st[d];
          rem /= y->dim(d);
        }
        py[o] = px[off];
      }
      return Status::OK();
    });
  }

 private:
  int64_t opset_;
};

class ShapeKernel : public OpKernel {
 public:
  explicit ShapeKernel(const NodeInfo& info)
      : start_(info.node->GetInt("start", 0)), end_(info.node->GetInt("end", INT64_MAX)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    int64_t r = x->rank();
    b_ = std::clamp<int64_t>(start_ < 0 ? start_ + r : start_, 0, r);
    e_ = std::clamp<int64_t>(end_ < 0 ? end_ + r : end_, 0, r);
    return ctx.DeclareOutput(0, DType::kInt64, {std::max<int64_t>(0, e_ - b_)});
  }
  Status Compute(KernelContext& ctx) override {
    for (int64_t d = b_; d < e_; ++d) ctx.output(0)->data<int64_t>()[d - b_] = ctx.input(0)->dim(d);
    return Status::OK();
  }

 private:
  int64_t start_, end_, b_ = 0, e_ = 0;
};

class SizeKernel : public OpKernel {
 public:
  explicit SizeKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(RequireInput(ctx, 0, "data").status());
    return ctx.DeclareOutput(0, DType::kInt64, {});
  }
  Status Compute(KernelContext& ctx) override {
    ctx.output(0)->data<int64_t>()[0] = ctx.input(0)->NumElements();
    return Status::OK();
  }
};


// DepthToSpace and SpaceToDepth: a permutation of the elements, planned by PlanBlockShuffle (plans.h).
class BlockShuffleKernel : public OpKernel {
 public:
  explicit BlockShuffleKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(plan_, PlanBlockShuffle(node_, x->shape()));
    return ctx.DeclareOutput(0, x->dtype(), plan_.out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    StridedCopy(x.raw_data(), plan_.strides, plan_.view, DTypeSize(x.dtype()), ctx.output(0)->raw_data(),
                ctx.thread_pool());
    return Status::OK();
  }

 private:
  const Node& node_;
  BlockShuffle plan_;
};

}  // namespace

KernelFactory kIdentity = MakeKernel<IdentityKernel>;
KernelFactory kReshape = MakeKernel<ReshapeKernel>;
KernelFactory kFlatten = MakeKernel<FlattenKernel>;
KernelFactory kSqueeze = MakeKernel<SqueezeKernel>;
KernelFactory kUnsqueeze = MakeKernel<UnsqueezeKernel>;
KernelFactory kTranspose = MakeKernel<TransposeKernel>;
KernelFactory kConcat = MakeKernel<ConcatKernel>;
KernelFactory kSplit = MakeKernel<SplitKernel>;
KernelFactory kExpand = MakeKernel<ExpandKernel>;
KernelFactory kTile = MakeKernel<TileKernel>;
KernelFactory kShape = MakeKernel<ShapeKernel>;
KernelFactory kSize = MakeKernel<SizeKernel>;

}  // namespace cpu
}  // namespace ontrain

namespace ontrain {
namespace cpu {

// SplitTraining(input, split) is Split with the split sizes as an input (opset-13 semantics).
KernelFactory kSplitTraining = [](const NodeInfo& info) -> StatusOr<std::unique_ptr<OpKernel>> {
  NodeInfo v13 = info;
  v13.opset = 13;
  return kSplit(v13);
};

KernelFactory kDepthToSpace = MakeKernel<BlockShuffleKernel>;
KernelFactory kSpaceToDepth = MakeKernel<BlockShuffleKernel>;

StatusOr<BlockShuffle> PlanBlockShuffle(const Node& n, const Shape& x) {
  const int64_t b = n.GetInt("blocksize", 0);
  if (b < 1) return InvalidArgument("blocksize must be set and positive, got ", b);
  if (x.size() != 4) return InvalidArgument("input must have rank 4, got ", ShapeToString(x));
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3];
  BlockShuffle p;
  if (n.op_type == "DepthToSpace") {
    if (C % (b * b) != 0) return InvalidArgument("channels ", C, " are not a multiple of blocksize^2 = ", b * b);
    const int64_t c = C / (b * b);
    p.out = {N, c, H * b, W * b};
    p.view = {N, c, H, b, W, b};  // out[n, k, h * b + i, w * b + j]
    const std::string mode = n.GetString("mode", "DCR");
    if (mode == "DCR") {  // from channel (i * b + j) * c + k
      p.strides = {C * H * W, H * W, W, b * c * H * W, 1, c * H * W};
    } else if (mode == "CRD") {  // from channel k * b * b + i * b + j
      p.strides = {C * H * W, b * b * H * W, W, b * H * W, 1, H * W};
    } else {
      return InvalidArgument("mode \"", mode, "\" is not DCR or CRD");
    }
    return p;
  }
  if (H % b != 0 || W % b != 0) return InvalidArgument("height ", H, " and width ", W, " are not multiples of ", b);
  p.out = {N, C * b * b, H / b, W / b};
  p.view = {N, b, b, C, H / b, W / b};  // out channel (i * b + j) * C + k from in[n, k, h * b + i, w * b + j]
  p.strides = {C * H * W, W, 1, H * W, b * W, b};
  return p;
}

}  // namespace cpu
}  // namespace ontrain
