// Kernel classes of the elementwise ops on CUDA: unary math and activations, broadcasting arithmetic,
// activation gradients, comparisons, Where, Cast, Scale, and the ops that only relabel a buffer's shape
// (Identity, Reshape, Squeeze, Unsqueeze, Flatten: one device-to-device copy).
#include "providers/cpu/kernels/common.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

using cpu::RequireInput;

class UnaryKernel : public CudaKernel {
 public:
  UnaryKernel(const NodeInfo& info, UnaryOp op)
      : op_(op), alpha_(info.node->GetFloat("alpha", op == UnaryOp::kElu ? 1.0f : 0.01f)) {
    if (op == UnaryOp::kGelu && info.node->GetString("approximate", "none") == "tanh") op_ = UnaryOp::kGeluTanh;
  }
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (x.dtype() == DType::kFloat64) {
      return CudaStatus(Unary(op_, x.data<double>(), y->data<double>(), x.NumElements(), alpha_, r.stream), "Unary");
    }
    return CudaStatus(Unary(op_, x.data<float>(), y->data<float>(), x.NumElements(), alpha_, r.stream), "Unary");
  }

 private:
  UnaryOp op_;
  float alpha_;
};

// com.microsoft Gelu / FastGelu: x (+ bias along the last axis), then the activation.
class MsGeluKernel : public CudaKernel {
 public:
  MsGeluKernel(const NodeInfo&, bool fast) : fast_(fast) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    const Tensor* bias = ctx.input(1);
    if (bias && (x->rank() == 0 || bias->NumElements() != x->shape().back())) {
      return InvalidArgument("bias has shape ", ShapeToString(bias->shape()), ", expected [", x->shape().back(), "]");
    }
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    const float* in = x.data<float>();
    if (const Tensor* bias = ctx.input(1)) {
      ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(x.shape(), {x.shape(), x.shape(), {bias->NumElements()}}));
      ONT_RETURN_IF_ERROR(CudaStatus(Binary(BinaryOp::kAdd, in, bias->data<float>(), y->data<float>(), s, 0, r.stream),
                                     "Binary(Add)"));
      in = y->data<float>();
    }
    UnaryOp op = fast_ ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
    return CudaStatus(Unary(op, in, y->data<float>(), x.NumElements(), 0, r.stream), "Unary(Gelu)");
  }

 private:
  bool fast_;
};

// Two inputs with numpy broadcasting, same dtype in and out.
class BinaryKernel : public CudaKernel {
 public:
  BinaryKernel(const NodeInfo& info, BinaryOp op) : op_(op), alpha_(info.node->GetFloat("alpha", 0.01f)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    if (a->dtype() != b->dtype()) {
      return InvalidArgument("input dtypes differ: ", DTypeName(a->dtype()), " and ", DTypeName(b->dtype()));
    }
    ONT_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes({a->shape(), b->shape()}));
    ONT_ASSIGN_OR_RETURN(space_, BroadcastSpace(out, {out, a->shape(), b->shape()}));
    return ctx.DeclareOutput(0, a->dtype(), out);
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    Tensor* y = ctx.output(0);
    cudaError_t e = cudaErrorInvalidValue;
    switch (a.dtype()) {
      case DType::kFloat32: e = Binary(op_, a.data<float>(), b.data<float>(), y->data<float>(), space_, alpha_, r.stream); break;
      case DType::kFloat64: e = Binary(op_, a.data<double>(), b.data<double>(), y->data<double>(), space_, alpha_, r.stream); break;
      case DType::kInt32: e = Binary(op_, a.data<int32_t>(), b.data<int32_t>(), y->data<int32_t>(), space_, alpha_, r.stream); break;
      case DType::kInt64: e = Binary(op_, a.data<int64_t>(), b.data<int64_t>(), y->data<int64_t>(), space_, alpha_, r.stream); break;
      default: return Unimplemented("dtype ", DTypeName(a.dtype()));
    }
    return CudaStatus(e, "Binary");
  }

 private:
  BinaryOp op_;
  float alpha_;
  StridedSpace space_;
};

// (dY, X or Y) -> dX of the same shape.
class ActivationGradKernel : public BinaryKernel {
 public:
  ActivationGradKernel(const NodeInfo& info, BinaryOp op) : BinaryKernel(info, op) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    if (dy->shape() != x->shape() || dy->dtype() != x->dtype()) {
      return InvalidArgument("dY ", DTypeName(dy->dtype()), ShapeToString(dy->shape()), " and input ",
                             DTypeName(x->dtype()), ShapeToString(x->shape()), " must match");
    }
    return BinaryKernel::Prepare(ctx);
  }
};

class CompareKernel : public CudaKernel {
 public:
  CompareKernel(const NodeInfo&, CompareOp op) : op_(op) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    if (a->dtype() != b->dtype()) return InvalidArgument("input dtypes differ");
    ONT_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes({a->shape(), b->shape()}));
    ONT_ASSIGN_OR_RETURN(space_, BroadcastSpace(out, {out, a->shape(), b->shape()}));
    return ctx.DeclareOutput(0, DType::kBool, out);
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    uint8_t* y = static_cast<uint8_t*>(ctx.output(0)->raw_data());
    if (a.dtype() == DType::kInt64) {
      return CudaStatus(Compare(op_, a.data<int64_t>(), b.data<int64_t>(), y, space_, r.stream), "Compare");
    }
    return CudaStatus(Compare(op_, a.data<float>(), b.data<float>(), y, space_, r.stream), "Compare");
  }

 private:
  CompareOp op_;
  StridedSpace space_;
};

class WhereKernel : public CudaKernel {
 public:
  explicit WhereKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, 0, "condition"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, 2, "Y"));
    if (c->dtype() != DType::kBool) return InvalidArgument("condition must be bool, got ", DTypeName(c->dtype()));
    if (x->dtype() != y->dtype()) return InvalidArgument("X and Y dtypes differ");
    ONT_ASSIGN_OR_RETURN(Shape out, cpu::BroadcastShapes({c->shape(), x->shape(), y->shape()}));
    ONT_ASSIGN_OR_RETURN(space_, BroadcastSpace(out, {c->shape(), x->shape(), y->shape()}));
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(1);
    return CudaStatus(Where(static_cast<const uint8_t*>(ctx.input(0)->raw_data()), x.raw_data(),
                            ctx.input(2)->raw_data(), ctx.output(0)->raw_data(), space_,
                            static_cast<int>(DTypeSize(x.dtype())), r.stream),
                      "Where");
  }

 private:
  StridedSpace space_;
};

bool Castable(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kBool;
}

class CastKernel : public CudaKernel {
 public:
  explicit CastKernel(const NodeInfo& info) : to_(static_cast<DType>(info.node->GetInt("to", 0))) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (!Castable(to_)) return Unimplemented("Cast to ", DTypeName(to_), " on CUDA");
    return ctx.DeclareOutput(0, to_, x->shape());
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (x.dtype() == to_) {
      return CudaStatus(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream),
                        "cudaMemcpyAsync");
    }
    return CudaStatus(Cast(static_cast<int>(x.dtype()), static_cast<int>(to_), x.raw_data(), y->raw_data(),
                           x.NumElements(), r.stream),
                      "Cast");
  }

 private:
  DType to_;
};

// Scale(X, scale_as_tensor) with attribute scale_down: X * s or X / s.
class ScaleKernel : public CudaKernel {
 public:
  explicit ScaleKernel(const NodeInfo& info) : down_(info.node->GetInt("scale_down", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "scale"));
    ONT_ASSIGN_OR_RETURN(double v, cpu::ReadScalar(*s, "scale"));
    scale_ = down_ ? static_cast<float>(1.0 / v) : static_cast<float>(v);
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return CudaStatus(ScaleBy(x.data<float>(), ctx.output(0)->data<float>(), x.NumElements(), scale_, r.stream),
                      "ScaleBy");
  }

 private:
  bool down_;
  float scale_ = 1;
};

template <UnaryOp op>
StatusOr<std::unique_ptr<OpKernel>> MakeUnary(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new UnaryKernel(i, op));
}
template <BinaryOp op>
StatusOr<std::unique_ptr<OpKernel>> MakeBinary(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new BinaryKernel(i, op));
}
template <BinaryOp op>
StatusOr<std::unique_ptr<OpKernel>> MakeGrad(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new ActivationGradKernel(i, op));
}
template <CompareOp op>
StatusOr<std::unique_ptr<OpKernel>> MakeCompare(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new CompareKernel(i, op));
}
template <bool fast>
StatusOr<std::unique_ptr<OpKernel>> MakeMsGelu(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new MsGeluKernel(i, fast));
}

}  // namespace

const char* CastRejects(const Node& n) {
  return Castable(static_cast<DType>(n.GetInt("to", 0))) ? nullptr
                                                         : "Cast to a dtype other than float32, float64, int32, int64, bool";
}

KernelFactory kNeg = MakeUnary<UnaryOp::kNeg>;
KernelFactory kAbs = MakeUnary<UnaryOp::kAbs>;
KernelFactory kSqrt = MakeUnary<UnaryOp::kSqrt>;
KernelFactory kExp = MakeUnary<UnaryOp::kExp>;
KernelFactory kLog = MakeUnary<UnaryOp::kLog>;
KernelFactory kTanh = MakeUnary<UnaryOp::kTanh>;
KernelFactory kSigmoid = MakeUnary<UnaryOp::kSigmoid>;
KernelFactory kRelu = MakeUnary<UnaryOp::kRelu>;
KernelFactory kErf = MakeUnary<UnaryOp::kErf>;
KernelFactory kReciprocal = MakeUnary<UnaryOp::kReciprocal>;
KernelFactory kGelu = MakeUnary<UnaryOp::kGelu>;
KernelFactory kLeakyRelu = MakeUnary<UnaryOp::kLeakyRelu>;
KernelFactory kSoftplus = MakeUnary<UnaryOp::kSoftplus>;
KernelFactory kFloor = MakeUnary<UnaryOp::kFloor>;
KernelFactory kCeil = MakeUnary<UnaryOp::kCeil>;
KernelFactory kSin = MakeUnary<UnaryOp::kSin>;
KernelFactory kCos = MakeUnary<UnaryOp::kCos>;
KernelFactory kElu = MakeUnary<UnaryOp::kElu>;
KernelFactory kMsGelu = MakeMsGelu<false>;
KernelFactory kMsFastGelu = MakeMsGelu<true>;
KernelFactory kAdd = MakeBinary<BinaryOp::kAdd>;
KernelFactory kSub = MakeBinary<BinaryOp::kSub>;
KernelFactory kMul = MakeBinary<BinaryOp::kMul>;
KernelFactory kDiv = MakeBinary<BinaryOp::kDiv>;
KernelFactory kReluGrad = MakeGrad<BinaryOp::kReluGrad>;
KernelFactory kSigmoidGrad = MakeGrad<BinaryOp::kSigmoidGrad>;
KernelFactory kTanhGrad = MakeGrad<BinaryOp::kTanhGrad>;
KernelFactory kGeluGrad = MakeGrad<BinaryOp::kGeluGrad>;
KernelFactory kFastGeluGrad = MakeGrad<BinaryOp::kFastGeluGrad>;
KernelFactory kLeakyReluGrad = MakeGrad<BinaryOp::kLeakyReluGrad>;
KernelFactory kEqual = MakeCompare<CompareOp::kEqual>;
KernelFactory kLess = MakeCompare<CompareOp::kLess>;
KernelFactory kGreater = MakeCompare<CompareOp::kGreater>;
KernelFactory kLessOrEqual = MakeCompare<CompareOp::kLessOrEqual>;
KernelFactory kGreaterOrEqual = MakeCompare<CompareOp::kGreaterOrEqual>;
KernelFactory kWhere = MakeKernel<WhereKernel>;
KernelFactory kCast = MakeKernel<CastKernel>;
KernelFactory kScale = MakeKernel<ScaleKernel>;

}  // namespace cuda
}  // namespace ontrain
