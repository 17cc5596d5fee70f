// Kernel classes of the elementwise ops on CUDA: unary math and activations, broadcasting arithmetic,
// activation gradients, comparisons, Where, Cast and Scale. Each takes its Prepare (checks, output dtype
// and shape) from the CPU kernel of the same op (DelegatingKernel), so both providers accept the same
// inputs; the broadcast layouts are derived here from the input and output shapes.
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

// The attributes' defaults, as ONNX states them (and the CPU kernels read them).
float DefaultAlpha(UnaryOp op) {
  switch (op) {
    case UnaryOp::kElu:
    case UnaryOp::kCelu:
    case UnaryOp::kThresholdedRelu: return 1.0f;
    case UnaryOp::kHardSigmoid: return 0.2f;
    case UnaryOp::kSelu: return 1.67326319217681884765625f;
    default: return 0.01f;  // LeakyRelu
  }
}
float Beta(UnaryOp op, const Node& n) {
  if (op == UnaryOp::kHardSigmoid) return n.GetFloat("beta", 0.5f);
  if (op == UnaryOp::kSelu) return n.GetFloat("gamma", 1.05070102214813232421875f);
  return 0.0f;
}

class UnaryKernel : public DelegatingKernel {
 public:
  UnaryKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, UnaryOp op)
      : DelegatingKernel(info, std::move(cpu)),
        op_(op),
        alpha_(info.node->GetFloat("alpha", DefaultAlpha(op))),
        beta_(Beta(op, *info.node)) {
    if (op == UnaryOp::kGelu && info.node->GetString("approximate", "none") == "tanh") op_ = UnaryOp::kGeluTanh;
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (x.dtype() == DType::kFloat64) {
      return CudaStatus(Unary(op_, x.data<double>(), y->data<double>(), x.NumElements(), alpha_, beta_, r.stream),
                        "Unary");
    }
    return CudaStatus(Unary(op_, x.data<float>(), y->data<float>(), x.NumElements(), alpha_, beta_, r.stream), "Unary");
  }

 private:
  UnaryOp op_;
  float alpha_, beta_;
};

// IsNaN and IsInf (float32, float64 -> bool).
class ClassifyKernel : public DelegatingKernel {
 public:
  ClassifyKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool is_nan)
      : DelegatingKernel(info, std::move(cpu)),
        is_nan_(is_nan),
        neg_(info.node->GetInt("detect_negative", 1) != 0),
        pos_(info.node->GetInt("detect_positive", 1) != 0) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    uint8_t* y = static_cast<uint8_t*>(ctx.output(0)->raw_data());
    if (x.dtype() == DType::kFloat64) {
      return CudaStatus(Classify(x.data<double>(), y, x.NumElements(), is_nan_, neg_, pos_, r.stream), "Classify");
    }
    return CudaStatus(Classify(x.data<float>(), y, x.NumElements(), is_nan_, neg_, pos_, r.stream), "Classify");
  }

 private:
  bool is_nan_, neg_, pos_;
};

class NotKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return CudaStatus(Not(static_cast<const uint8_t*>(x.raw_data()), static_cast<uint8_t*>(ctx.output(0)->raw_data()),
                          x.NumElements(), r.stream),
                      "Not");
  }
};

// com.microsoft Gelu / FastGelu: x (+ bias along the last axis), then the activation.
class MsGeluKernel : public DelegatingKernel {
 public:
  MsGeluKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, bool fast)
      : DelegatingKernel(info, std::move(cpu)), fast_(fast) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    const float* in = x.data<float>();
    if (const Tensor* bias = ctx.input(1)) {
      const Shape bias_shape{bias->NumElements()};
      ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(x.shape(), {x.shape(), x.shape(), bias_shape}));
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

// Two inputs with numpy broadcasting into the output, same dtype in and out: arithmetic and the activation
// gradients (dY, X or Y).
class BinaryKernel : public DelegatingKernel {
 public:
  BinaryKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, BinaryOp op)
      : DelegatingKernel(info, std::move(cpu)), op_(op), alpha_(info.node->GetFloat("alpha", 0.01f)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    Tensor* y = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(y->shape(), {y->shape(), a.shape(), b.shape()}));
    cudaError_t e = cudaErrorInvalidValue;
    switch (a.dtype()) {
      case DType::kFloat32: e = Binary(op_, a.data<float>(), b.data<float>(), y->data<float>(), s, alpha_, r.stream); break;
      case DType::kFloat64: e = Binary(op_, a.data<double>(), b.data<double>(), y->data<double>(), s, alpha_, r.stream); break;
      case DType::kInt32: e = Binary(op_, a.data<int32_t>(), b.data<int32_t>(), y->data<int32_t>(), s, alpha_, r.stream); break;
      case DType::kInt64: e = Binary(op_, a.data<int64_t>(), b.data<int64_t>(), y->data<int64_t>(), s, alpha_, r.stream); break;
      default: return Unimplemented("dtype ", DTypeName(a.dtype()));
    }
    return CudaStatus(e, "Binary");
  }

 private:
  BinaryOp op_;
  float alpha_;
};

class CompareKernel : public DelegatingKernel {
 public:
  CompareKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu, CompareOp op)
      : DelegatingKernel(info, std::move(cpu)), op_(op) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &a = *ctx.input(0), &b = *ctx.input(1);
    Tensor* out = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(out->shape(), {out->shape(), a.shape(), b.shape()}));
    uint8_t* y = static_cast<uint8_t*>(out->raw_data());
    if (a.dtype() == DType::kInt64) {
      return CudaStatus(Compare(op_, a.data<int64_t>(), b.data<int64_t>(), y, s, r.stream), "Compare");
    }
    if (a.dtype() == DType::kBool) {
      return CudaStatus(Compare(op_, static_cast<const uint8_t*>(a.raw_data()), static_cast<const uint8_t*>(b.raw_data()),
                                y, s, r.stream),
                        "Compare");
    }
    return CudaStatus(Compare(op_, a.data<float>(), b.data<float>(), y, s, r.stream), "Compare");
  }

 private:
  CompareOp op_;
};

class WhereKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &c = *ctx.input(0), &x = *ctx.input(1), &y = *ctx.input(2);
    Tensor* out = ctx.output(0);
    ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(out->shape(), {c.shape(), x.shape(), y.shape()}));
    return CudaStatus(Where(static_cast<const uint8_t*>(c.raw_data()), x.raw_data(), y.raw_data(), out->raw_data(), s,
                            static_cast<int>(DTypeSize(x.dtype())), r.stream),
                      "Where");
  }
};

bool Castable(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat64 || t == DType::kInt32 || t == DType::kInt64 ||
         t == DType::kBool;
}

// Cast among float32, float64, int32, int64 and bool (other targets are rejected at planning: CastRejects).
class CastKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    if (x.dtype() == y->dtype()) {
      return CudaStatus(cudaMemcpyAsync(y->raw_data(), x.raw_data(), x.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream),
                        "cudaMemcpyAsync");
    }
    if (!Castable(y->dtype())) return Unimplemented("Cast to ", DTypeName(y->dtype()), " on CUDA");
    return CudaStatus(Cast(static_cast<int>(x.dtype()), static_cast<int>(y->dtype()), x.raw_data(), y->raw_data(),
                           x.NumElements(), r.stream),
                      "Cast");
  }
};

// Scale(X, scale_as_tensor) with attribute scale_down: X * s or X / s (s a host scalar).
class ScaleKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    ONT_ASSIGN_OR_RETURN(double v, cpu::ReadScalar(*ctx.input(1), "scale"));
    float scale = node_.GetInt("scale_down", 0) != 0 ? static_cast<float>(1.0 / v) : static_cast<float>(v);
    return CudaStatus(ScaleBy(x.data<float>(), ctx.output(0)->data<float>(), x.NumElements(), scale, r.stream),
                      "ScaleBy");
  }
};

// Clip(X, min?, max?): bounds as the CPU kernel takes them (attributes before opset 11, host scalars from
// 11 on, the dtype's lowest and highest where absent).
class ClipKernel : public DelegatingKernel {
 public:
  ClipKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), node_opset_(info.opset) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    const bool f64 = x.dtype() == DType::kFloat64;
    double lo = f64 ? std::numeric_limits<double>::lowest() : std::numeric_limits<float>::lowest();
    double hi = f64 ? std::numeric_limits<double>::max() : std::numeric_limits<float>::max();
    if (node_opset_ < 11) {
      lo = std::max<double>(node_.GetFloat("min", -std::numeric_limits<float>::infinity()), lo);
      hi = std::min<double>(node_.GetFloat("max", std::numeric_limits<float>::infinity()), hi);
    }
    if (const Tensor* t = ctx.input(1)) {
      ONT_ASSIGN_OR_RETURN(lo, cpu::ReadScalar(*t, "min"));
    }
    if (const Tensor* t = ctx.input(2)) {
      ONT_ASSIGN_OR_RETURN(hi, cpu::ReadScalar(*t, "max"));
    }
    if (f64) return CudaStatus(Clip(x.data<double>(), ctx.output(0)->data<double>(), x.NumElements(), lo, hi, r.stream), "Clip");
    return CudaStatus(Clip(x.data<float>(), ctx.output(0)->data<float>(), x.NumElements(), lo, hi, r.stream), "Clip");
  }

 private:
  int64_t node_opset_;
};

// ai.ontrain ClipGrad(dY, X, min?, max?, fill) (the executor's fusion of Clip's gradient): float32, dY and X
// broadcast together, the host scalars as the CPU kernel reads them (an absent bound is an infinite one).
class ClipGradKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &x = *ctx.input(1);
    Tensor* out = ctx.output(0);
    double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
    if (const Tensor* t = ctx.input(2)) {
      ONT_ASSIGN_OR_RETURN(lo, cpu::ReadScalar(*t, "min"));
    }
    if (const Tensor* t = ctx.input(3)) {
      ONT_ASSIGN_OR_RETURN(hi, cpu::ReadScalar(*t, "max"));
    }
    ONT_ASSIGN_OR_RETURN(double fill, cpu::ReadScalar(*ctx.input(4), "fill"));
    ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(out->shape(), {out->shape(), dy.shape(), x.shape()}));
    return CudaStatus(ClipGrad(dy.data<float>(), x.data<float>(), out->data<float>(), s, lo, hi, fill, r.stream),
                      "ClipGrad");
  }
};

template <UnaryOp op, const KernelFactory* f> constexpr KernelFactory kUnaryOf = WrapOp<UnaryKernel, UnaryOp, op, f>;
template <BinaryOp op, const KernelFactory* f> constexpr KernelFactory kBinaryOf = WrapOp<BinaryKernel, BinaryOp, op, f>;
template <CompareOp op, const KernelFactory* f>
constexpr KernelFactory kCompareOf = WrapOp<CompareKernel, CompareOp, op, f>;

}  // namespace

const char* CastRejects(const Node& n) {
  return Castable(static_cast<DType>(n.GetInt("to", 0))) ? nullptr
                                                         : "Cast to a dtype other than float32, float64, int32, int64, bool";
}

KernelFactory kNeg = kUnaryOf<UnaryOp::kNeg, &cpu::kNeg>;
KernelFactory kAbs = kUnaryOf<UnaryOp::kAbs, &cpu::kAbs>;
KernelFactory kSqrt = kUnaryOf<UnaryOp::kSqrt, &cpu::kSqrt>;
KernelFactory kExp = kUnaryOf<UnaryOp::kExp, &cpu::kExp>;
KernelFactory kLog = kUnaryOf<UnaryOp::kLog, &cpu::kLog>;
KernelFactory kTanh = kUnaryOf<UnaryOp::kTanh, &cpu::kTanh>;
KernelFactory kSigmoid = kUnaryOf<UnaryOp::kSigmoid, &cpu::kSigmoid>;
KernelFactory kRelu = kUnaryOf<UnaryOp::kRelu, &cpu::kRelu>;
KernelFactory kErf = kUnaryOf<UnaryOp::kErf, &cpu::kErf>;
KernelFactory kReciprocal = kUnaryOf<UnaryOp::kReciprocal, &cpu::kReciprocal>;
KernelFactory kGelu = kUnaryOf<UnaryOp::kGelu, &cpu::kGelu>;
KernelFactory kLeakyRelu = kUnaryOf<UnaryOp::kLeakyRelu, &cpu::kLeakyRelu>;
KernelFactory kSoftplus = kUnaryOf<UnaryOp::kSoftplus, &cpu::kSoftplus>;
KernelFactory kFloor = kUnaryOf<UnaryOp::kFloor, &cpu::kFloor>;
KernelFactory kCeil = kUnaryOf<UnaryOp::kCeil, &cpu::kCeil>;
KernelFactory kSin = kUnaryOf<UnaryOp::kSin, &cpu::kSin>;
KernelFactory kCos = kUnaryOf<UnaryOp::kCos, &cpu::kCos>;
KernelFactory kElu = kUnaryOf<UnaryOp::kElu, &cpu::kElu>;
KernelFactory kCelu = kUnaryOf<UnaryOp::kCelu, &cpu::kCelu>;
KernelFactory kSelu = kUnaryOf<UnaryOp::kSelu, &cpu::kSelu>;
KernelFactory kHardSigmoid = kUnaryOf<UnaryOp::kHardSigmoid, &cpu::kHardSigmoid>;
KernelFactory kHardSwish = kUnaryOf<UnaryOp::kHardSwish, &cpu::kHardSwish>;
KernelFactory kThresholdedRelu = kUnaryOf<UnaryOp::kThresholdedRelu, &cpu::kThresholdedRelu>;
KernelFactory kSoftsign = kUnaryOf<UnaryOp::kSoftsign, &cpu::kSoftsign>;
KernelFactory kSign = kUnaryOf<UnaryOp::kSign, &cpu::kSign>;
KernelFactory kRound = kUnaryOf<UnaryOp::kRound, &cpu::kRound>;
KernelFactory kTan = kUnaryOf<UnaryOp::kTan, &cpu::kTan>;
KernelFactory kAsin = kUnaryOf<UnaryOp::kAsin, &cpu::kAsin>;
KernelFactory kAcos = kUnaryOf<UnaryOp::kAcos, &cpu::kAcos>;
KernelFactory kAtan = kUnaryOf<UnaryOp::kAtan, &cpu::kAtan>;
KernelFactory kSinh = kUnaryOf<UnaryOp::kSinh, &cpu::kSinh>;
KernelFactory kCosh = kUnaryOf<UnaryOp::kCosh, &cpu::kCosh>;
KernelFactory kAsinh = kUnaryOf<UnaryOp::kAsinh, &cpu::kAsinh>;
KernelFactory kAcosh = kUnaryOf<UnaryOp::kAcosh, &cpu::kAcosh>;
KernelFactory kAtanh = kUnaryOf<UnaryOp::kAtanh, &cpu::kAtanh>;
KernelFactory kIsNaN = WrapOp<ClassifyKernel, bool, true, &cpu::kIsNaN>;
KernelFactory kIsInf = WrapOp<ClassifyKernel, bool, false, &cpu::kIsInf>;
KernelFactory kNot = Wrap<NotKernel, &cpu::kNot>;
KernelFactory kPRelu = kBinaryOf<BinaryOp::kPRelu, &cpu::kPRelu>;
KernelFactory kMsGelu = WrapOp<MsGeluKernel, bool, false, &cpu::kMsGelu>;
KernelFactory kMsFastGelu = WrapOp<MsGeluKernel, bool, true, &cpu::kMsFastGelu>;
KernelFactory kAdd = kBinaryOf<BinaryOp::kAdd, &cpu::kAdd>;
KernelFactory kSub = kBinaryOf<BinaryOp::kSub, &cpu::kSub>;
KernelFactory kMul = kBinaryOf<BinaryOp::kMul, &cpu::kMul>;
KernelFactory kDiv = kBinaryOf<BinaryOp::kDiv, &cpu::kDiv>;
KernelFactory kReluGrad = kBinaryOf<BinaryOp::kReluGrad, &cpu::kReluGrad>;
KernelFactory kSigmoidGrad = kBinaryOf<BinaryOp::kSigmoidGrad, &cpu::kSigmoidGrad>;
KernelFactory kTanhGrad = kBinaryOf<BinaryOp::kTanhGrad, &cpu::kTanhGrad>;
KernelFactory kGeluGrad = kBinaryOf<BinaryOp::kGeluGrad, &cpu::kGeluGrad>;
KernelFactory kFastGeluGrad = kBinaryOf<BinaryOp::kFastGeluGrad, &cpu::kFastGeluGrad>;
KernelFactory kLeakyReluGrad = kBinaryOf<BinaryOp::kLeakyReluGrad, &cpu::kLeakyReluGrad>;
KernelFactory kEqual = kCompareOf<CompareOp::kEqual, &cpu::kEqual>;
KernelFactory kLess = kCompareOf<CompareOp::kLess, &cpu::kLess>;
KernelFactory kGreater = kCompareOf<CompareOp::kGreater, &cpu::kGreater>;
KernelFactory kLessOrEqual = kCompareOf<CompareOp::kLessOrEqual, &cpu::kLessOrEqual>;
KernelFactory kGreaterOrEqual = kCompareOf<CompareOp::kGreaterOrEqual, &cpu::kGreaterOrEqual>;
KernelFactory kAnd = kCompareOf<CompareOp::kAnd, &cpu::kAnd>;
KernelFactory kOr = kCompareOf<CompareOp::kOr, &cpu::kOr>;
KernelFactory kXor = kCompareOf<CompareOp::kXor, &cpu::kXor>;
KernelFactory kWhere = Wrap<WhereKernel, &cpu::kWhere>;
KernelFactory kCast = Wrap<CastKernel, &cpu::kCast>;
KernelFactory kScale = Wrap<ScaleKernel, &cpu::kScale>;
KernelFactory kClip = Wrap<ClipKernel, &cpu::kClip>;
KernelFactory kClipGrad = Wrap<ClipGradKernel, &cpu::kClipGrad>;

}  // namespace cuda
}  // namespace ontrain
