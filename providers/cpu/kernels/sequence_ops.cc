// ONNX's sequence ops (opset 11+): SequenceConstruct, SequenceEmpty, SequenceAt, SequenceLength,
// SequenceInsert, SequenceErase, ConcatFromSequence and SplitToSequence. Optimizer models take their
// parameters, gradients and moments as sequences; these ops let such a model take them apart or build new
// ones. Sequence outputs are new tensors that the executor allocates (DeclareSequenceOutput); the kernels
// copy bytes into them.
#include <cstring>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

StatusOr<const TensorSequence*> RequireSequence(const KernelContext& ctx, int i, const char* name) {
  const TensorSequence* s = ctx.input_sequence(i);
  if (s == nullptr) return InvalidArgument("input ", i, " (", name, ") must be a sequence");
  return s;
}

// A position input (int32/int64 scalar) in [-n, n + extra) -> [0, n + extra).
StatusOr<int64_t> ReadPosition(const Tensor& t, int64_t n, int64_t extra) {
  if (t.NumElements() != 1) return InvalidArgument("position must be a scalar, got ", ShapeToString(t.shape()));
  ONT_ASSIGN_OR_RETURN(Shape v, ReadInts(t, "position"));
  int64_t p = v[0] < 0 ? v[0] + n : v[0];
  if (p < 0 || p >= n + extra) {
    return InvalidArgument("position ", v[0], " is out of range for a sequence of ", n, " tensors");
  }
  return p;
}

void CopyTensorBytes(const Tensor& src, Tensor* dst) {
  if (src.SizeInBytes() > 0) std::memcpy(dst->raw_data(), src.raw_data(), src.SizeInBytes());
}

// Copies items into the executor-allocated sequence output, in order.
void FillSequence(const std::vector<const Tensor*>& items, TensorSequence* out) {
  for (size_t k = 0; k < items.size(); ++k) CopyTensorBytes(*items[k], &(*out)[k]);
}

Status DeclareSequenceOf(KernelContext& ctx, DType dtype, const std::vector<const Tensor*>& items) {
  std::vector<Shape> shapes;
  for (const Tensor* t : items) {
    if (t->dtype() != dtype) return InvalidArgument("sequence items must share one dtype: ", DTypeName(dtype), " and ",
                                                    DTypeName(t->dtype()));
    shapes.push_back(t->shape());
  }
  return ctx.DeclareSequenceOutput(0, dtype, std::move(shapes));
}

// SequenceConstruct(inputs...) -> a sequence of copies of the inputs.
class SequenceConstructKernel : public OpKernel {
 public:
  explicit SequenceConstructKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    items_.clear();
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, "inputs"));
      items_.push_back(t);
    }
    if (items_.empty()) return InvalidArgument("SequenceConstruct needs at least one input");
    return DeclareSequenceOf(ctx, items_[0]->dtype(), items_);
  }
  Status Compute(KernelContext& ctx) override {
    FillSequence(items_, ctx.output_sequence(0));
    return Status::OK();
  }

 private:
  std::vector<const Tensor*> items_;
};

// SequenceEmpty() -> an empty sequence of the `dtype` attribute (float by default).
class SequenceEmptyKernel : public OpKernel {
 public:
  explicit SequenceEmptyKernel(const NodeInfo& info) : dtype_code_(info.node->GetInt("dtype", 1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(DType dt, DTypeFromOnnx(static_cast<int32_t>(dtype_code_)));
    return ctx.DeclareSequenceOutput(0, dt, {});
  }
  Status Compute(KernelContext&) override { return Status::OK(); }

 private:
  int64_t dtype_code_;
};

// SequenceAt(seq, position) -> a copy of item `position` (negative counts from the end).
class SequenceAtKernel : public OpKernel {
 public:
  explicit SequenceAtKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const TensorSequence* s, RequireSequence(ctx, 0, "input_sequence"));
    ONT_ASSIGN_OR_RETURN(const Tensor* p, RequireInput(ctx, 1, "position"));
    ONT_ASSIGN_OR_RETURN(int64_t k, ReadPosition(*p, static_cast<int64_t>(s->size()), 0));
    item_ = &(*s)[k];
    return ctx.DeclareOutput(0, item_->dtype(), item_->shape());
  }
  Status Compute(KernelContext& ctx) override {
    CopyTensorBytes(*item_, ctx.output(0));
    return Status::OK();
  }

 private:
  const Tensor* item_ = nullptr;
};

// SequenceLength(seq) -> int64 scalar.
class SequenceLengthKernel : public OpKernel {
 public:
  explicit SequenceLengthKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const TensorSequence* s, RequireSequence(ctx, 0, "input_sequence"));
    n_ = static_cast<int64_t>(s->size());
    return ctx.DeclareOutput(0, DType::kInt64, {});
  }
  Status Compute(KernelContext& ctx) override {
    ctx.output(0)->data<int64_t>()[0] = n_;
    return Status::OK();
  }

 private:
  int64_t n_ = 0;
};

// SequenceInsert(seq, tensor, position?) -> seq with a copy of `tensor` before item `position` (default:
// at the end). SequenceErase(seq, position?) -> seq without item `position` (default: the last).
class SequenceEditKernel : public OpKernel {
 public:
  SequenceEditKernel(const NodeInfo&, bool insert) : insert_(insert) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const TensorSequence* s, RequireSequence(ctx, 0, "input_sequence"));
    int64_t n = static_cast<int64_t>(s->size());
    items_.clear();
    for (const Tensor& t : *s) items_.push_back(&t);
    const Tensor* pos = ctx.input(insert_ ? 2 : 1);
    if (insert_) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, 1, "tensor"));
      int64_t k = n;
      if (pos) {
        ONT_ASSIGN_OR_RETURN(k, ReadPosition(*pos, n, 1));
      }
      items_.insert(items_.begin() + k, t);
    } else {
      if (n == 0) return InvalidArgument("SequenceErase on an empty sequence");
      int64_t k = n - 1;
      if (pos) {
        ONT_ASSIGN_OR_RETURN(k, ReadPosition(*pos, n, 0));
      }
      items_.erase(items_.begin() + k);
    }
    DType dt = items_.empty() ? (s->empty() ? DType::kFloat32 : (*s)[0].dtype()) : items_[0]->dtype();
    return DeclareSequenceOf(ctx, dt, items_);
  }
  Status Compute(KernelContext& ctx) override {
    FillSequence(items_, ctx.output_sequence(0));
    return Status::OK();
  }

 private:
  bool insert_;
  std::vector<const Tensor*> items_;
};

// ConcatFromSequence(seq) -> the items concatenated along `axis`, or stacked along a new axis when
// new_axis = 1.
class ConcatFromSequenceKernel : public OpKernel {
 public:
  explicit ConcatFromSequenceKernel(const NodeInfo& info)
      : axis_(info.node->GetInt("axis", 0)), new_axis_(info.node->GetInt("new_axis", 0) == 1) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(seq_, RequireSequence(ctx, 0, "input_sequence"));
    if (seq_->empty()) return InvalidArgument("ConcatFromSequence on an empty sequence");
    const Tensor& x0 = (*seq_)[0];
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x0.rank() + (new_axis_ ? 1 : 0)));
    Shape base = x0.shape();
    if (new_axis_) base.insert(base.begin() + axis_n_, 1);
    Shape out = base;
    out[axis_n_] = 0;
    for (const Tensor& x : *seq_) {
      Shape s = x.shape();
      if (new_axis_) s.insert(s.begin() + axis_n_, 1);
      bool ok = x.dtype() == x0.dtype() && s.size() == base.size();
      for (size_t d = 0; ok && d < s.size(); ++d) ok = static_cast<int64_t>(d) == axis_n_ || s[d] == base[d];
      if (!ok) return InvalidArgument("item ", ShapeToString(x.shape()), " does not match ", ShapeToString(x0.shape()));
      out[axis_n_] += s[axis_n_];
    }
    return ctx.DeclareOutput(0, x0.dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    if (y->NumElements() == 0) return Status::OK();
    size_t es = DTypeSize(y->dtype());
    AxisSplit split = SplitAtAxis(y->shape(), axis_n_);
    int64_t out_row = y->dim(axis_n_) * split.inner * es, offset = 0;
    for (const Tensor& x : *seq_) {
      int64_t row = x.NumElements() / split.outer * es;
      for (int64_t o = 0; o < split.outer; ++o) {
        std::memcpy(static_cast<uint8_t*>(y->raw_data()) + o * out_row + offset,
                    static_cast<const uint8_t*>(x.raw_data()) + o * row, row);
      }
      offset += row;
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool new_axis_;
  int64_t axis_n_ = 0;
  const TensorSequence* seq_ = nullptr;
};

// SplitToSequence(input, split?) -> parts along `axis`: `split` a scalar chunk length (the last part may
// be shorter) or a list of lengths; without it, parts of length 1, squeezed unless keepdims = 1.
class SplitToSequenceKernel : public OpKernel {
 public:
  explicit SplitToSequenceKernel(const NodeInfo& info)
      : axis_(info.node->GetInt("axis", 0)), keepdims_(info.node->GetInt("keepdims", 1) == 1) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    int64_t dim = x->dim(axis_n_);
    lengths_.clear();
    bool squeeze = false;
    if (const Tensor* s = ctx.input(1)) {
      ONT_ASSIGN_OR_RETURN(Shape v, ReadInts(*s, "split"));
      if (s->rank() == 0) {
        if (v[0] <= 0) return InvalidArgument("split must be positive, got ", v[0]);
        for (int64_t at = 0; at < dim; at += v[0]) lengths_.push_back(std::min(v[0], dim - at));
      } else {
        int64_t total = 0;
        for (int64_t l : v) {
          if (l < 0) return InvalidArgument("negative split length ", l);
          total += l;
        }
        if (total != dim) return InvalidArgument("split ", ShapeToString(v), " does not cover axis size ", dim);
        lengths_ = v;
      }
    } else {
      lengths_.assign(dim, 1);
      squeeze = !keepdims_;
    }
    std::vector<Shape> shapes;
    for (int64_t l : lengths_) {
      Shape s = x->shape();
      s[axis_n_] = l;
      if (squeeze) s.erase(s.begin() + axis_n_);
      shapes.push_back(s);
    }
    return ctx.DeclareSequenceOutput(0, x->dtype(), std::move(shapes));
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    TensorSequence& out = *ctx.output_sequence(0);
    size_t es = DTypeSize(x.dtype());
    AxisSplit split = SplitAtAxis(x.shape(), axis_n_);
    int64_t in_row = split.len * split.inner * es, offset = 0;
    for (size_t k = 0; k < lengths_.size(); ++k) {
      int64_t row = lengths_[k] * split.inner * es;
      for (int64_t o = 0; o < split.outer; ++o) {
        std::memcpy(static_cast<uint8_t*>(out[k].raw_data()) + o * row,
                    static_cast<const uint8_t*>(x.raw_data()) + o * in_row + offset, row);
      }
      offset += row;
    }
    return Status::OK();
  }

 private:
  int64_t axis_;
  bool keepdims_;
  int64_t axis_n_ = 0;
  Shape lengths_;
};

}  // namespace

KernelFactory kSequenceConstruct = MakeKernel<SequenceConstructKernel>;
KernelFactory kSequenceEmpty = MakeKernel<SequenceEmptyKernel>;
KernelFactory kSequenceAt = MakeKernel<SequenceAtKernel>;
KernelFactory kSequenceLength = MakeKernel<SequenceLengthKernel>;
KernelFactory kSequenceInsert = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new SequenceEditKernel(i, true));
};
KernelFactory kSequenceErase = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new SequenceEditKernel(i, false));
};
KernelFactory kConcatFromSequence = MakeKernel<ConcatFromSequenceKernel>;
KernelFactory kSplitToSequence = MakeKernel<SplitToSequenceKernel>;

}  // namespace cpu
}  // namespace ontrain
