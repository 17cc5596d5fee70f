// Training-graph helpers from ONNX Runtime's com.microsoft domain: InPlaceAccumulatorV2, and the gradient
// ops of tensor manipulations and broadcasting: BroadcastGradientArgs, GatherGrad, GatherElementsGrad,
// DivGrad, ConcatTraining, SplitTraining, FusedMatMul.
#include <algorithm>
#include <cstring>

#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

// InPlaceAccumulatorV2(buffer, value, overwrite?) -> (updated_flag bool[1], buffer_out?).
// buffer <- value when overwrite is true, else buffer += value (value broadcast to the buffer's shape).
// The buffer input is updated in place: it is the session's gradient buffer.
class InPlaceAccumulatorKernel : public OpKernel {
 public:
  explicit InPlaceAccumulatorKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* buf, RequireInput(ctx, 0, "accumulation_buffer"));
    ONT_ASSIGN_OR_RETURN(const Tensor* v, RequireInput(ctx, 1, "value"));
    if (buf->dtype() != v->dtype()) return InvalidArgument("buffer and value dtypes differ");
    auto out = BroadcastShapes({buf->shape(), v->shape()});
    if (!out.ok() || out.value() != buf->shape()) {
      return InvalidArgument("value ", ShapeToString(v->shape()), " does not broadcast to the buffer ",
                             ShapeToString(buf->shape()));
    }
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, DType::kBool, {1}));
    if (ctx.num_outputs() > 1) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, buf->dtype(), buf->shape()));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    Tensor buf = *ctx.input(0);  // shares the caller's storage
    const Tensor& v = *ctx.input(1);
    bool overwrite = ctx.input(2) && ctx.input(2)->NumElements() > 0 && ctx.input(2)->data<bool>()[0];
    Status s = DispatchFloat(buf.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if (overwrite && v.raw_data() == buf.raw_data() && v.shape() == buf.shape()) {
        // The executor had the value's producer write into the buffer (Executor::FindAccumulatorTargets).
      } else if (overwrite) {
        StridedCopy(v.raw_data(), BroadcastStrides(v.shape(), buf.shape()), buf.shape(), sizeof(T), buf.raw_data(),
                    ctx.thread_pool());
      } else {
        MapBinary<T, T, T>(buf, v, &buf, ctx.thread_pool(),
                           [](T a, T b) { return static_cast<T>(static_cast<C>(a) + static_cast<C>(b)); });
      }
      return Status::OK();
    });
    ONT_RETURN_IF_ERROR(s);
    ctx.output(0)->data<bool>()[0] = true;
    if (Tensor* out = ctx.output(1)) CopyBytes(buf, out);
    return Status::OK();
  }
};

// BroadcastGradientArgs(a_shape, b_shape) -> (a_axes, b_axes): for each side, the output axes (of the
// broadcast, right-aligned) it was broadcast along, listed from the last axis to the first.
class BroadcastGradientArgsKernel : public OpKernel {
 public:
  explicit BroadcastGradientArgsKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "a_shape"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "b_shape"));
    ONT_ASSIGN_OR_RETURN(Shape as, ReadInts(*a, "a_shape"));
    ONT_ASSIGN_OR_RETURN(Shape bs, ReadInts(*b, "b_shape"));
    ONT_RETURN_IF_ERROR(BroadcastShapes({as, bs}).status());
    a_axes_.clear();
    b_axes_.clear();
    int64_t rank = static_cast<int64_t>(std::max(as.size(), bs.size()));
    for (int64_t i = rank - 1; i >= 0; --i) {
      int64_t ai = i - (rank - static_cast<int64_t>(as.size())), bi = i - (rank - static_cast<int64_t>(bs.size()));
      int64_t ad = ai >= 0 ? as[ai] : 1, bd = bi >= 0 ? bs[bi] : 1;
      if (ad == bd) continue;
      if (ad == 1) a_axes_.push_back(i);
      if (bd == 1) b_axes_.push_back(i);
    }
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, DType::kInt64, {static_cast<int64_t>(a_axes_.size())}));
    if (ctx.num_outputs() > 1) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, DType::kInt64, {static_cast<int64_t>(b_axes_.size())}));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    if (Tensor* o = ctx.output(0)) std::copy(a_axes_.begin(), a_axes_.end(), o->data<int64_t>());
    if (Tensor* o = ctx.output(1)) std::copy(b_axes_.begin(), b_axes_.end(), o->data<int64_t>());
    return Status::OK();
  }

 private:
  Shape a_axes_, b_axes_;
};

// Sums `full` (shape `full_shape`) into `out` (shape `target`, which broadcasts to full_shape).
template <typename T>
void ReduceToShape(const T* full, const Shape& full_shape, const Shape& target, T* out) {
  using C = ComputeType<T>;
  int64_t n_out = ShapeNumElements(target), n = ShapeNumElements(full_shape);
  if (n_out == n) {  // nothing was broadcast: the gradient is the full tensor
    std::copy(full, full + n, out);
    return;
  }
  std::vector<C> acc(static_cast<size_t>(n_out), C(0));
  Shape st = BroadcastStrides(target, full_shape);
  // Walks `full` in order with an odometer over its dims, keeping the target offset up to date (no
  // division per element); the sums are formed in the same order as a plain index walk.
  const int64_t rank = static_cast<int64_t>(full_shape.size());
  Shape idx(static_cast<size_t>(rank), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc[off] += static_cast<C>(full[i]);
    for (int64_t d = rank - 1; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < full_shape[d]) break;
      off -= st[d] * full_shape[d];
      idx[d] = 0;
    }
  }
  for (int64_t i = 0; i < n_out; ++i) out[i] = static_cast<T>(acc[i]);
}

// DivGrad(dY, A, B) -> (dA?, dB?): dA = reduce(dY / B), dB = reduce(-dY * A / B^2).
class DivGradKernel : public OpKernel {
 public:
  explicit DivGradKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 1, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 2, "B"));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2}));
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({a->shape(), b->shape()}));
    if (out != dy->shape()) return InvalidArgument("dY ", ShapeToString(dy->shape()), " is not the broadcast of A and B");
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, a->dtype(), a->shape()));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, b->dtype(), b->shape()));
    ctx.RequestScratch(dy->SizeInBytes());
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &a = *ctx.input(1), &b = *ctx.input(2);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      Tensor full = Tensor::View(dy.dtype(), dy.shape(), ctx.scratch());
      if (Tensor* da = ctx.output(0)) {
        MapBinary<T, T, T>(dy, b, &full, nullptr, [](T g, T y) { return static_cast<T>(static_cast<C>(g) / static_cast<C>(y)); });
        ReduceToShape(full.data<T>(), dy.shape(), a.shape(), da->data<T>());
      }
      if (Tensor* db = ctx.output(1)) {
        // full = A / B^2 (broadcast), then multiplied by -dY elementwise.
        MapBinary<T, T, T>(a, b, &full, nullptr, [](T x, T y) {
          C yc = static_cast<C>(y);
          return static_cast<T>(static_cast<C>(x) / (yc * yc));
        });
        MapBinary<T, T, T>(full, dy, &full, nullptr, [](T q, T g) { return static_cast<T>(-static_cast<C>(q) * static_cast<C>(g)); });
        ReduceToShape(full.data<T>(), dy.shape(), b.shape(), db->data<T>());
      }
      return Status::OK();
    });
  }
};

// GatherGrad(shape, indices, dY) -> dX = zeros(shape) with dY scatter-added at the gathered positions.
class GatherGradKernel : public OpKernel {
 public:
  explicit GatherGradKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 0, "shape"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "indices"));
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 2, "dY"));
    ONT_ASSIGN_OR_RETURN(shape_, ReadInts(*s, "shape"));
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, static_cast<int64_t>(shape_.size())));
    Shape expect(shape_.begin(), shape_.begin() + axis_n_);
    expect.insert(expect.end(), idx->shape().begin(), idx->shape().end());
    expect.insert(expect.end(), shape_.begin() + axis_n_ + 1, shape_.end());
    if (dy->shape() != expect) return InvalidArgument("dY has shape ", ShapeToString(dy->shape()), ", expected ", ShapeToString(expect));
    return ctx.DeclareOutput(0, dy->dtype(), shape_);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &idx = *ctx.input(1), &dy = *ctx.input(2);
    Tensor* dx = ctx.output(0);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      AxisSplit split = SplitAtAxis(shape_, axis_n_);
      int64_t outer = split.outer, inner = split.inner, dim = split.len, n = idx.NumElements();
      T* px = dx->data<T>();
      for (int64_t i = 0; i < dx->NumElements(); ++i) px[i] = static_cast<T>(C(0));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < n; ++i) {
          int64_t k = idx.dtype() == DType::kInt64 ? idx.data<int64_t>()[i] : idx.data<int32_t>()[i];
          if (k < -dim || k >= dim) return InvalidArgument("index ", k, " out of range for dimension ", dim);
          if (k < 0) k += dim;
          T* dst = px + (o * dim + k) * inner;
          const T* src = dy.data<T>() + (o * n + i) * inner;
          for (int64_t j = 0; j < inner; ++j) dst[j] = static_cast<T>(static_cast<C>(dst[j]) + static_cast<C>(src[j]));
        }
      }
      return Status::OK();
    });
  }

 private:
  int64_t axis_, axis_n_ = 0;
  Shape shape_;
};

// GatherElementsGrad(dY, shape, indices) -> dX = zeros(shape), dX[.. idx ..] += dY.
class GatherElementsGradKernel : public OpKernel {
 public:
  explicit GatherElementsGradKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "shape"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 2, "indices"));
    ONT_ASSIGN_OR_RETURN(shape_, ReadInts(*s, "shape"));
    if (idx->shape() != dy->shape() || shape_.size() != dy->shape().size()) return InvalidArgument("shapes do not match");
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, dy->rank()));
    return ctx.DeclareOutput(0, dy->dtype(), shape_);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &idx = *ctx.input(2);
    Tensor* dx = ctx.output(0);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      Shape xs = Strides(shape_);
      for (int64_t i = 0; i < dx->NumElements(); ++i) dx->data<T>()[i] = static_cast<T>(C(0));
      for (int64_t o = 0; o < dy.NumElements(); ++o) {
        int64_t rem = o, off = 0;
        for (int64_t d = dy.rank() - 1; d >= 0; --d) {
          int64_t c = rem % dy.dim(d);
          rem /= dy.dim(d);
          if (d == axis_n_) {
            c = idx.dtype() == DType::kInt64 ? idx.data<int64_t>()[o] : idx.data<int32_t>()[o];
            if (c < 0) c += shape_[d];
          }
          if (c < 0 || c >= shape_[d]) return InvalidArgument("index out of range at position ", o);
          off += c * xs[d];
        }
        dx->data<T>()[off] = static_cast<T>(static_cast<C>(dx->data<T>()[off]) + static_cast<C>(dy.data<T>()[o]));
      }
      return Status::OK();
    });
  }

 private:
  int64_t axis_, axis_n_ = 0;
  Shape shape_;
};

// FusedMatMul(A, B): alpha * op(A) @ op(B), op transposing the last two dims when transA/transB is set;
// batch dims broadcast as in MatMul.
// ai.ontrain MatMulBias(A, B, bias [N]) with FusedMatMul's attributes: FusedMatMul(A, B) + bias, the bias
// added to each row of the product in float as Add does (engine/kernel_fusion.h), while the rows are still
// in cache: inside the product (Gemm's bias), or after each batch's product.
class FusedMatMulKernel : public OpKernel {
 public:
  explicit FusedMatMulKernel(const NodeInfo& info)
      : ta_(info.node->GetInt("transA", 0) != 0),
        tb_(info.node->GetInt("transB", 0) != 0),
        alpha_(info.node->GetFloat("alpha", 1.0f)),
        bias_(info.node->op_type == "MatMulBias") {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2}));
    if (a->rank() < 2 || b->rank() < 2) {
      return InvalidArgument(bias_ ? "MatMulBias" : "FusedMatMul", " needs rank >= 2 operands, got ",
                             ShapeToString(a->shape()), " and ", ShapeToString(b->shape()));
    }
    int64_t ar = a->rank(), br = b->rank();
    m_ = ta_ ? a->dim(ar - 1) : a->dim(ar - 2);
    k_ = ta_ ? a->dim(ar - 2) : a->dim(ar - 1);
    int64_t kb = tb_ ? b->dim(br - 1) : b->dim(br - 2);
    n_ = tb_ ? b->dim(br - 2) : b->dim(br - 1);
    if (k_ != kb) return InvalidArgument("inner dimensions differ: ", ShapeToString(a->shape()), " x ", ShapeToString(b->shape()));
    Shape ab(a->shape().begin(), a->shape().end() - 2), bb(b->shape().begin(), b->shape().end() - 2);
    ONT_ASSIGN_OR_RETURN(batch_, BroadcastShapes({ab, bb}));
    as_ = BroadcastStrides(ab, batch_);
    bs_ = BroadcastStrides(bb, batch_);
    Shape out = batch_;
    out.push_back(m_);
    out.push_back(n_);
    if (bias_) {
      ONT_ASSIGN_OR_RETURN(const Tensor* bias, RequireInput(ctx, 2, "bias"));
      if (bias->dtype() != a->dtype() || bias->rank() != 1 || bias->dim(0) != n_) {
        return InvalidArgument("MatMulBias: bias must be ", DTypeName(a->dtype()), " [", n_, "] (the product's columns), got ",
                               DTypeName(bias->dtype()), ShapeToString(bias->shape()));
      }
    }
    if (a->dtype() == DType::kFloat32 && SharesB()) {
      ctx.RequestScratch(GemmScratchBytes<float>(false, tb_, ShapeNumElements(batch_) * m_, n_, k_));
    }
    return ctx.DeclareOutput(0, a->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    Tensor* y = ctx.output(0);
    return DispatchFloat32Or64(a.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t batches = ShapeNumElements(batch_);
      T* py = y->data<T>();
      const T* bias = bias_ ? ctx.input(2)->data<T>() : nullptr;
      const int64_t n = n_;
      // Rows [r0, r1) of the output (batches * M rows of N) plus the bias, element by element as Add.
      auto add_bias = [py, bias, n](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* row = py + r * n;
          for (int64_t j = 0; j < n; ++j) row[j] = row[j] + bias[j];
        }
      };
      if (SharesB()) {
        Gemm<T>(false, tb_, batches * m_, n_, k_, static_cast<T>(alpha_), a.data<T>(), b.data<T>(), T(0), py,
                ctx.thread_pool(), ctx.scratch(), bias);
        return Status::OK();
      }
      // Batches in parallel, each product on one thread (see MatMul).
      ParallelFor(ctx.thread_pool(), batches, 2.0 * static_cast<double>(m_ * n_ * k_), [&](int64_t b0, int64_t b1) {
        for (int64_t bi = b0; bi < b1; ++bi) {
          int64_t oa = 0, ob = 0;
          BatchOffsets(batch_, as_, bs_, bi, &oa, &ob);
          Gemm<T>(ta_, tb_, m_, n_, k_, static_cast<T>(alpha_), a.data<T>() + oa * m_ * k_,
                  b.data<T>() + ob * k_ * n_, T(0), py + bi * m_ * n_, nullptr);
          if (bias) add_bias(bi * m_, (bi + 1) * m_);
        }
      });
      return Status::OK();
    });
  }

 private:
  // One B for every batch and A not transposed: one GEMM over all of A's rows (see MatMul).
  bool SharesB() const {
    bool shared = !ta_ && ShapeNumElements(batch_) > 1;
    for (int64_t s : bs_) shared = shared && s == 0;
    return shared;
  }

  bool ta_, tb_;
  float alpha_;
  bool bias_;  // MatMulBias
  int64_t m_ = 0, n_ = 0, k_ = 0;
  Shape batch_;
  Shape as_, bs_;
};

// ConcatTraining(inputs...) -> (concat_result, per_input_length int64 [n]).
class ConcatTrainingKernel : public OpKernel {
 public:
  explicit ConcatTrainingKernel(const NodeInfo& info) : concat_(MakeConcat(info)), axis_(info.node->GetInt("axis", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    if (!concat_.ok()) return concat_.status();
    ONT_RETURN_IF_ERROR(concat_.value()->Prepare(ctx));
    if (ctx.num_outputs() > 1) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, DType::kInt64, {ctx.num_inputs()}));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(concat_.value()->Compute(ctx));
    if (Tensor* lens = ctx.output(1)) {
      int64_t axis = axis_ < 0 ? axis_ + ctx.input(0)->rank() : axis_;
      for (int i = 0; i < ctx.num_inputs(); ++i) lens->data<int64_t>()[i] = ctx.input(i)->dim(axis);
    }
    return Status::OK();
  }

 private:
  static StatusOr<std::unique_ptr<OpKernel>> MakeConcat(const NodeInfo& info) { return kConcat(info); }
  StatusOr<std::unique_ptr<OpKernel>> concat_;
  int64_t axis_;
};

}  // namespace

KernelFactory kInPlaceAccumulatorV2 = MakeKernel<InPlaceAccumulatorKernel>;
KernelFactory kBroadcastGradientArgs = MakeKernel<BroadcastGradientArgsKernel>;
KernelFactory kDivGrad = MakeKernel<DivGradKernel>;
KernelFactory kGatherGrad = MakeKernel<GatherGradKernel>;
KernelFactory kGatherElementsGrad = MakeKernel<GatherElementsGradKernel>;
KernelFactory kFusedMatMul = MakeKernel<FusedMatMulKernel>;
KernelFactory kMatMulBias = MakeKernel<FusedMatMulKernel>;
KernelFactory kConcatTraining = MakeKernel<ConcatTrainingKernel>;

}  // namespace cpu
}  // namespace ontrain
