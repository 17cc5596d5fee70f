// Kernels that make values rather than transform them: Constant, ConstantOfShape, Range, EyeLike, and the
// dtype conversions Cast and CastLike.
#include <cmath>
#include <cstring>

#include "graph/tensor_proto.h"
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

class ConstantKernel : public OpKernel {
 public:
  explicit ConstantKernel(Tensor value) : value_(std::move(value)) {}
  Status Prepare(KernelContext& ctx) override { return ctx.DeclareOutput(0, value_.dtype(), value_.shape()); }
  Status Compute(KernelContext& ctx) override {
    CopyBytes(value_, ctx.output(0));
    return Status::OK();
  }

 private:
  Tensor value_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeConstant(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(Tensor value, ConstantNodeValue(*info.node));
  return std::unique_ptr<OpKernel>(new ConstantKernel(std::move(value)));
}

class ConstantOfShapeKernel : public OpKernel {
 public:
  explicit ConstantOfShapeKernel(Tensor value) : value_(std::move(value)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 0, "input"));
    ONT_ASSIGN_OR_RETURN(Shape shape, ReadInts(*s, "shape"));
    return ctx.DeclareOutput(0, value_.dtype(), shape);
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    size_t es = DTypeSize(value_.dtype());
    uint8_t* p = static_cast<uint8_t*>(y->raw_data());
    for (int64_t i = 0; i < y->NumElements(); ++i) std::memcpy(p + i * es, value_.raw_data(), es);
    return Status::OK();
  }

 private:
  Tensor value_;
};

StatusOr<std::unique_ptr<OpKernel>> MakeConstantOfShape(const NodeInfo& info) {
  Tensor value = Tensor::FromVector<float>({0.0f}, {1});
  if (info.node->HasAttribute("value")) {
    ONT_ASSIGN_OR_RETURN(value, TensorFromProto(info.node->attributes.at("value").t(), ""));
    if (value.NumElements() != 1) return InvalidArgument("value must have exactly one element");
  }
  return std::unique_ptr<OpKernel>(new ConstantOfShapeKernel(std::move(value)));
}

class RangeKernel : public OpKernel {
 public:
  explicit RangeKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    const char* names[] = {"start", "limit", "delta"};
    double v[3];
    for (int i = 0; i < 3; ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, names[i]));
      if (t->dtype() != ctx.input(0)->dtype()) return InvalidArgument(names[i], " has a different dtype");
      ONT_ASSIGN_OR_RETURN(v[i], ReadScalar(*t, names[i]));
    }
    if (v[2] == 0) return InvalidArgument("delta must not be 0");
    double n = std::ceil((v[1] - v[0]) / v[2]);
    if (!(n < 1e12)) return InvalidArgument("range of ", n, " elements is too large");
    return ctx.DeclareOutput(0, ctx.input(0)->dtype(), {std::max<int64_t>(0, static_cast<int64_t>(n))});
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    return DispatchAll(y->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool range");
      } else {
        // output[i] = start + i * delta, as ONNX defines it.
        using C = std::conditional_t<std::is_integral_v<T>, T, std::conditional_t<std::is_same_v<T, double>, double, float>>;
        C start = ConvertValue<C>(ctx.input(0)->data<T>()[0]), delta = ConvertValue<C>(ctx.input(2)->data<T>()[0]);
        for (int64_t i = 0; i < y->NumElements(); ++i) {
          y->data<T>()[i] = ConvertValue<T>(static_cast<C>(start + static_cast<C>(i) * delta));
        }
        return Status::OK();
      }
    });
  }
};

class EyeLikeKernel : public OpKernel {
 public:
  explicit EyeLikeKernel(const NodeInfo& info)
      : dtype_attr_(static_cast<int32_t>(info.node->GetInt("dtype", 0))), k_(info.node->GetInt("k", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() != 2) return InvalidArgument("input must be 2-D");
    DType dt = x->dtype();
    if (dtype_attr_ != 0) {
        ONT_ASSIGN_OR_RETURN(dt, DTypeFromOnnx(dtype_attr_));
      }
    return ctx.DeclareOutput(0, dt, x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    return DispatchAll(y->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t r = y->dim(0), c = y->dim(1);
      for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) y->data<T>()[i * c + j] = ConvertValue<T>(j - i == k_ ? 1 : 0);
      return Status::OK();
    });
  }

 private:
  int32_t dtype_attr_;
  int64_t k_;
};

template <typename To, typename From>
void CastLoop(const From* in, To* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_integral_v<To> && !std::is_same_v<To, bool> &&
                  (std::is_floating_point_v<From> || std::is_same_v<From, Float16> || std::is_same_v<From, BFloat16>)) {
      // NaN and out-of-range floats have no integer value; keep them defined (0 / saturate) instead of UB.
      double v = ConvertValue<double>(in[i]);
      if (std::isnan(v)) out[i] = 0;
      else if (v <= static_cast<double>(std::numeric_limits<To>::lowest())) out[i] = std::numeric_limits<To>::lowest();
      else if (v >= static_cast<double>(std::numeric_limits<To>::max())) out[i] = std::numeric_limits<To>::max();
      else out[i] = static_cast<To>(v);
    } else if constexpr (std::is_same_v<To, Float16> || std::is_same_v<To, BFloat16>) {
      if constexpr (std::is_same_v<From, double>) {
        out[i] = To(static_cast<float>(in[i]));
      } else {
        out[i] = ConvertValue<To>(in[i]);
      }
    } else {
      out[i] = ConvertValue<To>(in[i]);
    }
  }
}

Status CastTensor(const Tensor& x, Tensor* y) {
  return DispatchAll(x.dtype(), [&](auto tf) -> Status {
    using From = typename decltype(tf)::type;
    return DispatchAll(y->dtype(), [&](auto tt) -> Status {
      using To = typename decltype(tt)::type;
      CastLoop<To, From>(x.data<From>(), y->data<To>(), x.NumElements());
      return Status::OK();
    });
  });
}

// The `to` attribute: a TensorProto.DataType code, or (Cast-1) its name as a string.
int32_t CastTarget(const Node& n) {
  auto it = n.attributes.find("to");
  if (it == n.attributes.end()) return 0;
  if (it->second.type() != onnx::AttributeProto::STRING) return static_cast<int32_t>(it->second.i());
  const char* names[] = {"UNDEFINED", "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL",
                         "FLOAT16", "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};
  for (int32_t code = 0; code < 17; ++code) if (it->second.s() == names[code]) return code;
  return -1;
}

class CastKernel : public OpKernel {
 public:
  CastKernel(const NodeInfo& info, bool like) : like_(like), to_(CastTarget(*info.node)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    DType to;
    if (like_) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, 1, "target_type"));
      to = t->dtype();
    } else {
      ONT_ASSIGN_OR_RETURN(to, DTypeFromOnnx(to_));
    }
    if (to == DType::kString) return Unimplemented("Cast to string is not supported");
    return ctx.DeclareOutput(0, to, x->shape());
  }
  Status Compute(KernelContext& ctx) override { return CastTensor(*ctx.input(0), ctx.output(0)); }

 private:
  bool like_;
  int32_t to_;
};

}  // namespace

KernelFactory kConstant = MakeConstant;
KernelFactory kConstantOfShape = MakeConstantOfShape;
KernelFactory kRange = MakeKernel<RangeKernel>;
KernelFactory kEyeLike = MakeKernel<EyeLikeKernel>;
KernelFactory kCast = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new CastKernel(i, false));
};
KernelFactory kCastLike = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new CastKernel(i, true));
};

}  // namespace cpu
}  // namespace ontrain
