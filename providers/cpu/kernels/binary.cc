// Broadcasting elementwise kernels with two or more inputs: arithmetic, comparisons, logic, Pow, Mod,
// PRelu, the variadic Sum/Mean/Max/Min, Where and Clip.
#include <cmath>
#include <limits>

#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

enum class Arith { kAdd, kSub, kMul, kDiv, kMax, kMin };

template <typename C>
C ApplyArith(Arith op, C a, C b) {
  switch (op) {
    case Arith::kAdd: return a + b;
    case Arith::kSub: return a - b;
    case Arith::kMul: return a * b;
    case Arith::kDiv: return a / b;
    case Arith::kMax:
      if constexpr (std::is_floating_point_v<C>) if (std::isnan(a) || std::isnan(b)) return a + b;
      return a > b ? a : b;
    case Arith::kMin:
      if constexpr (std::is_floating_point_v<C>) if (std::isnan(a) || std::isnan(b)) return a + b;
      return a < b ? a : b;
  }
  return a;
}

// Shape of input 1 under the pre-opset-7 "broadcast"/"axis" attributes: aligned at `axis` of input 0.
Shape LegacyBroadcastShape(const Node& n, int64_t opset, const Shape& a, const Shape& b) {
  if (opset >= 7 || n.GetInt("broadcast", 0) == 0 || b.size() >= a.size()) return b;
  int64_t axis = n.GetInt("axis", static_cast<int64_t>(a.size() - b.size()));
  if (axis < 0) axis += static_cast<int64_t>(a.size());
  Shape out(a.size(), 1);
  for (size_t i = 0; i < b.size() && axis + i < out.size(); ++i) out[axis + i] = b[i];
  return out;
}

template <typename T>
Status CheckNoIntegerZero(const Tensor& b) {
  if constexpr (std::is_integral_v<T>) {
    const T* p = b.data<T>();
    for (int64_t i = 0; i < b.NumElements(); ++i) {
      if (p[i] == 0) return InvalidArgument("integer division by zero (divisor element ", i, ")");
    }
  }
  return Status::OK();
}

// Shared Prepare of the two-input broadcasting kernels: input B is read with the pre-opset-7 alignment
// when the node asks for it, and the output takes the broadcast shape.
class BroadcastBinaryKernel : public OpKernel {
 public:
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    if (same_dtype_ && a->dtype() != b->dtype()) {
      return InvalidArgument("input dtypes differ: ", DTypeName(a->dtype()), " and ", DTypeName(b->dtype()));
    }
    b_shape_ = LegacyBroadcastShape(node_, opset_, a->shape(), b->shape());
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({a->shape(), b_shape_}));
    return ctx.DeclareOutput(0, bool_output_ ? DType::kBool : a->dtype(), out);
  }

 protected:
  BroadcastBinaryKernel(const NodeInfo& info, bool same_dtype, bool bool_output)
      : node_(*info.node), opset_(info.opset), same_dtype_(same_dtype), bool_output_(bool_output) {}
  // Input B viewed with its broadcast-aligned shape.
  Tensor B(KernelContext& ctx) const {
    return Tensor::View(ctx.input(1)->dtype(), b_shape_, const_cast<void*>(ctx.input(1)->raw_data()));
  }

 private:
  const Node& node_;
  int64_t opset_;
  bool same_dtype_, bool_output_;
  Shape b_shape_;
};

// Add, Sub, Mul, Div: output dtype = input dtype.
class ArithKernel : public BroadcastBinaryKernel {
 public:
  ArithKernel(const NodeInfo& info, Arith op) : BroadcastBinaryKernel(info, true, false), op_(op) {}
  Status Compute(KernelContext& ctx) override {
    const Tensor& a = *ctx.input(0);
    Tensor b = B(ctx);
    return DispatchAll(a.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool inputs");
      } else {
        if (op_ == Arith::kDiv) ONT_RETURN_IF_ERROR(CheckNoIntegerZero<T>(b));
        // The op is fixed per loop (a constant in each instantiation), so the loops vectorize.
        auto run = [&](auto op_tag) {
          constexpr Arith kOp = decltype(op_tag)::value;
          MapBinary<T, T, T>(a, b, ctx.output(0), ctx.thread_pool(), [](T x, T y) {
            return static_cast<T>(ApplyArith<C>(kOp, static_cast<C>(x), static_cast<C>(y)));
          });
        };
        switch (op_) {
          case Arith::kAdd: run(std::integral_constant<Arith, Arith::kAdd>{}); break;
          case Arith::kSub: run(std::integral_constant<Arith, Arith::kSub>{}); break;
          case Arith::kMul: run(std::integral_constant<Arith, Arith::kMul>{}); break;
          case Arith::kDiv: run(std::integral_constant<Arith, Arith::kDiv>{}); break;
          case Arith::kMax: run(std::integral_constant<Arith, Arith::kMax>{}); break;
          case Arith::kMin: run(std::integral_constant<Arith, Arith::kMin>{}); break;
        }
        return Status::OK();
      }
    });
  }

 private:
  Arith op_;
};

enum class Compare { kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor };

class CompareKernel : public BroadcastBinaryKernel {
 public:
  CompareKernel(const NodeInfo& info, Compare op) : BroadcastBinaryKernel(info, true, true), op_(op) {}
  Status Compute(KernelContext& ctx) override {
    const Tensor& a = *ctx.input(0);
    Tensor b = B(ctx);
    return DispatchAll(a.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      // One loop per op (the op a constant in each), so that the loops vectorize.
      auto run = [&](auto op_tag) {
        constexpr Compare kOp = decltype(op_tag)::value;
        MapBinary<T, T, bool>(a, b, ctx.output(0), ctx.thread_pool(), [](T x0, T y0) {
          C x = static_cast<C>(x0), y = static_cast<C>(y0);
          if constexpr (kOp == Compare::kEqual) return x == y;
          else if constexpr (kOp == Compare::kLess) return x < y;
          else if constexpr (kOp == Compare::kGreater) return x > y;
          else if constexpr (kOp == Compare::kLessOrEqual) return x <= y;
          else if constexpr (kOp == Compare::kGreaterOrEqual) return x >= y;
          else if constexpr (kOp == Compare::kAnd) return static_cast<bool>(x) && static_cast<bool>(y);
          else if constexpr (kOp == Compare::kOr) return static_cast<bool>(x) || static_cast<bool>(y);
          else return static_cast<bool>(x) != static_cast<bool>(y);
        });
      };
      switch (op_) {
        case Compare::kEqual: run(std::integral_constant<Compare, Compare::kEqual>{}); break;
        case Compare::kLess: run(std::integral_constant<Compare, Compare::kLess>{}); break;
        case Compare::kGreater: run(std::integral_constant<Compare, Compare::kGreater>{}); break;
        case Compare::kLessOrEqual: run(std::integral_constant<Compare, Compare::kLessOrEqual>{}); break;
        case Compare::kGreaterOrEqual: run(std::integral_constant<Compare, Compare::kGreaterOrEqual>{}); break;
        case Compare::kAnd: run(std::integral_constant<Compare, Compare::kAnd>{}); break;
        case Compare::kOr: run(std::integral_constant<Compare, Compare::kOr>{}); break;
        case Compare::kXor: run(std::integral_constant<Compare, Compare::kXor>{}); break;
      }
      return Status::OK();
    });
  }

 private:
  Compare op_;
};

// Pow: base and exponent may have different types; the result has the base's type.
class PowKernel : public BroadcastBinaryKernel {
 public:
  explicit PowKernel(const NodeInfo& info) : BroadcastBinaryKernel(info, false, false) {}
  Status Compute(KernelContext& ctx) override {
    const Tensor& a = *ctx.input(0);
    Tensor b = B(ctx);
    return DispatchAll(a.dtype(), [&](auto ta) -> Status {
      using A = typename decltype(ta)::type;
      return DispatchAll(b.dtype(), [&](auto tb) -> Status {
        using B = typename decltype(tb)::type;
        if constexpr (std::is_same_v<A, bool> || std::is_same_v<B, bool>) {
          return Unimplemented("bool inputs");
        } else {
          // Exponents with an exact elementwise form, which is what a correctly rounded pow returns: x^2 (LayerNorm
          // as PyTorch exports it), x^1 (its gradient's x^(2-1)), and x^0.5 (sqrt, except that pow(-0, 0.5) is +0
          // and pow(-inf, 0.5) is +inf).
          if constexpr (std::is_floating_point_v<A>) {
            const double e = b.NumElements() == 1 ? ConvertValue<double>(b.data<B>()[0]) : 0.0;
            const A* px = a.data<A>();
            A* py = ctx.output(0)->data<A>();
            if (b.NumElements() == 1 && e == 2.0) {
              MapUnary(px, py, a.NumElements(), ctx.thread_pool(), [](A x) { return x * x; });
              return Status::OK();
            }
            if (b.NumElements() == 1 && e == 1.0) {
              MapUnary(px, py, a.NumElements(), ctx.thread_pool(), [](A x) { return x; });
              return Status::OK();
            }
            if (b.NumElements() == 1 && e == 0.5) {
              MapUnary(px, py, a.NumElements(), ctx.thread_pool(), [](A x) {
                return x == -std::numeric_limits<A>::infinity() ? std::numeric_limits<A>::infinity() : std::sqrt(x) + A(0);
              });
              return Status::OK();
            }
          }
          MapBinary<A, B, A>(a, b, ctx.output(0), ctx.thread_pool(), [](A x, B y) {
            if constexpr (std::is_same_v<A, float>) {
              return std::pow(x, ConvertValue<float>(y));
            } else {
              return ConvertValue<A>(std::pow(ConvertValue<double>(x), ConvertValue<double>(y)));
            }
          });
          return Status::OK();
        }
      });
    });
  }
};

// Mod: fmod=1 is C's fmod (sign of the dividend); fmod=0 is Python's % (sign of the divisor, integers only).
class ModKernel : public OpKernel {
 public:
  explicit ModKernel(const NodeInfo& info) : fmod_(info.node->GetInt("fmod", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* a, RequireInput(ctx, 0, "A"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 1, "B"));
    if (IsFloatingPoint(a->dtype()) && !fmod_) return InvalidArgument("fmod must be 1 for floating-point inputs");
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({a->shape(), b->shape()}));
    return ctx.DeclareOutput(0, a->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& a = *ctx.input(0);
    const Tensor& b = *ctx.input(1);
    return DispatchAll(a.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool inputs");
      } else {
        ONT_RETURN_IF_ERROR(CheckNoIntegerZero<T>(b));
        bool f = fmod_;
        MapBinary<T, T, T>(a, b, ctx.output(0), ctx.thread_pool(), [f](T x0, T y0) {
          C x = static_cast<C>(x0), y = static_cast<C>(y0);
          if constexpr (std::is_floating_point_v<C>) {
            return static_cast<T>(std::fmod(x, y));
          } else {
            C r = static_cast<C>(x % y);
            if (!f && r != 0 && ((r < 0) != (y < 0))) r = static_cast<C>(r + y);
            return static_cast<T>(r);
          }
        });
        return Status::OK();
      }
    });
  }

 private:
  bool fmod_;
};

class PReluKernel : public OpKernel {
 public:
  explicit PReluKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "slope"));
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({x->shape(), s->shape()}));
    if (out != x->shape()) return InvalidArgument("slope ", ShapeToString(s->shape()), " does not broadcast to X");
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      MapBinary<T, T, T>(x, *ctx.input(1), ctx.output(0), ctx.thread_pool(), [](T v, T s) {
        return static_cast<C>(v) < C(0) ? static_cast<T>(static_cast<C>(v) * static_cast<C>(s)) : v;
      });
      return Status::OK();
    });
  }
};

// Sum, Mean, Max, Min over any number of broadcast inputs.
class VariadicKernel : public OpKernel {
 public:
  VariadicKernel(const NodeInfo&, Arith op, bool mean) : op_(op), mean_(mean) {}
  Status Prepare(KernelContext& ctx) override {
    if (ctx.num_inputs() == 0 || !ctx.input(0)) return InvalidArgument("needs at least one input");
    shapes_.clear();  // a member: its memory is reused from run to run
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, "data"));
      if (t->dtype() != ctx.input(0)->dtype()) return InvalidArgument("input ", i, " has a different dtype");
      shapes_.push_back(t->shape());
    }
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes(shapes_));
    return ctx.DeclareOutput(0, ctx.input(0)->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* y = ctx.output(0);
    return DispatchAll(y->dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool inputs");
      } else {
        Arith op = op_;
        // Sum of same-shape float inputs (gradient accumulation): one pass, added left to right as below;
        // its cost counts the k reads and the write of each element, as the binary ops' does (at one per
        // element the ResNet's 2 MB gradient Sums ran unsplit at 2 threads, slower than at 1).
        if constexpr (std::is_floating_point_v<T>) {
          bool same = op == Arith::kAdd && !mean_ && ctx.num_inputs() <= 8;
          for (int i = 0; i < ctx.num_inputs() && same; ++i) same = ctx.input(i)->shape() == y->shape();
          if (same) {
            const T* in[8];
            int k = ctx.num_inputs();
            for (int i = 0; i < k; ++i) in[i] = ctx.input(i)->data<T>();
            T* py = y->data<T>();
            ParallelFor(ctx.thread_pool(), y->NumElements(), 2.0 * (k + 1), [&](int64_t s, int64_t e) {
              for (int64_t j = s; j < e; ++j) py[j] = in[0][j];
              for (int i = 1; i < k; ++i) {
                const T* p = in[i];
                for (int64_t j = s; j < e; ++j) py[j] += p[j];
              }
            });
            return Status::OK();
          }
        }
        // y = broadcast(x0), then y = op(y, xi) in place.
        MapBinary<T, T, T>(*ctx.input(0), *ctx.input(0), y, ctx.thread_pool(), [](T a, T) { return a; });
        for (int i = 1; i < ctx.num_inputs(); ++i) {
          MapBinary<T, T, T>(*y, *ctx.input(i), y, ctx.thread_pool(), [op](T a, T b) {
            return static_cast<T>(ApplyArith<C>(op, static_cast<C>(a), static_cast<C>(b)));
          });
        }
        if (mean_) {
          C n = static_cast<C>(ctx.num_inputs());
          T* p = y->data<T>();
          for (int64_t i = 0; i < y->NumElements(); ++i) p[i] = static_cast<T>(static_cast<C>(p[i]) / n);
        }
        return Status::OK();
      }
    });
  }

 private:
  Arith op_;
  bool mean_;
  std::vector<Shape> shapes_;
};

class WhereKernel : public OpKernel {
 public:
  explicit WhereKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* c, RequireInput(ctx, 0, "condition"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, 2, "Y"));
    if (c->dtype() != DType::kBool) return InvalidArgument("condition must be bool, got ", DTypeName(c->dtype()));
    if (x->dtype() != y->dtype()) return InvalidArgument("X and Y dtypes differ");
    ONT_ASSIGN_OR_RETURN(Shape out, BroadcastShapes({c->shape(), x->shape(), y->shape()}));
    return ctx.DeclareOutput(0, x->dtype(), out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &c = *ctx.input(0), &x = *ctx.input(1), &y = *ctx.input(2);
    Tensor* out = ctx.output(0);
    return DispatchBySize(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      // Every input either whole or a single value (a masked gradient: Where(mask, dY, 0)): one flat loop.
      const int64_t n = out->NumElements();
      auto flat = [n](const Tensor& t) { return t.NumElements() == n || t.NumElements() == 1; };
      if (flat(c) && flat(x) && flat(y) && n > 0) {
        const bool* pc = c.data<bool>();
        const T *px = x.data<T>(), *py = y.data<T>();
        T* po = out->data<T>();
        const int64_t sc = c.NumElements() == n, sx = x.NumElements() == n, sy = y.NumElements() == n;
        const uint8_t* mask = reinterpret_cast<const uint8_t*>(pc);
        ParallelFor(ctx.thread_pool(), n, 2.0, [&](int64_t s, int64_t e) {
          if constexpr (sizeof(T) == 4) {
            if (sc) {
              VRowSelect32(mask + s, px + s * sx, sx, py + s * sy, sy, po + s, e - s);
              return;
            }
          }
          for (int64_t i = s; i < e; ++i) {  // a mask blend: no branch on random masks
            const T m = static_cast<T>(T(0) - static_cast<T>(mask[i * sc] != 0));
            po[i] = static_cast<T>((px[i * sx] & m) | (py[i * sy] & static_cast<T>(~m)));
          }
        });
        return Status::OK();
      }
      BroadcastRows rows({c.shape(), x.shape(), y.shape()}, out->shape());
      const bool* pc = c.data<bool>();
      const T *px = x.data<T>(), *py = y.data<T>();
      T* po = out->data<T>();
      int64_t len = rows.row_length();
      int64_t sc = rows.inner_stride(0), sx = rows.inner_stride(1), sy = rows.inner_stride(2);
      ParallelFor(ctx.thread_pool(), rows.num_rows(), 2.0 * len, [&](int64_t s, int64_t e) {
        int64_t off[3];
        for (int64_t r = s; r < e; ++r) {
          rows.Offsets(r, off);
          const uint8_t* mask = reinterpret_cast<const uint8_t*>(pc) + off[0];
          if constexpr (sizeof(T) == 4) {
            if (sc) {
              VRowSelect32(mask, px + off[1], sx, py + off[2], sy, po + r * len, len);
              continue;
            }
          }
          for (int64_t i = 0; i < len; ++i) {
            const T m = static_cast<T>(T(0) - static_cast<T>(mask[i * sc] != 0));
            po[r * len + i] = static_cast<T>((px[off[1] + i * sx] & m) | (py[off[2] + i * sy] & static_cast<T>(~m)));
          }
        }
      });
      return Status::OK();
    });
  }
};

// Clip: bounds are attributes before opset 11, optional scalar inputs from 11 on.
class ClipKernel : public OpKernel {
 public:
  explicit ClipKernel(const NodeInfo& info)
      : opset_(info.opset),
        attr_min_(info.node->GetFloat("min", -std::numeric_limits<float>::infinity())),
        attr_max_(info.node->GetFloat("max", std::numeric_limits<float>::infinity())) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    for (int i = 1; i <= 2; ++i) {
      const Tensor* b = ctx.input(i);
      if (b && b->NumElements() != 1) return InvalidArgument(i == 1 ? "min" : "max", " must be a scalar");
      if (b && b->dtype() != x->dtype()) return InvalidArgument(i == 1 ? "min" : "max", " dtype differs from input");
    }
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
        C lo = std::numeric_limits<C>::lowest(), hi = std::numeric_limits<C>::max();
        if (opset_ < 11) {
          lo = static_cast<C>(std::max<double>(attr_min_, static_cast<double>(lo)));
          hi = static_cast<C>(std::min<double>(attr_max_, static_cast<double>(hi)));
        }
        if (ctx.input(1)) lo = static_cast<C>(ctx.input(1)->data<T>()[0]);
        if (ctx.input(2)) hi = static_cast<C>(ctx.input(2)->data<T>()[0]);
        MapUnary(x.data<T>(), ctx.output(0)->data<T>(), x.NumElements(), ctx.thread_pool(), [lo, hi](T v) {
          C c = static_cast<C>(v);
          if (c < lo) c = lo;
          if (c > hi) c = hi;
          return static_cast<T>(c);
        });
        return Status::OK();
      }
    });
  }

 private:
  int64_t opset_;
  float attr_min_, attr_max_;
};

template <Arith op>
StatusOr<std::unique_ptr<OpKernel>> MakeArith(const NodeInfo& i) { return std::unique_ptr<OpKernel>(new ArithKernel(i, op)); }
template <Compare op>
StatusOr<std::unique_ptr<OpKernel>> MakeCompare(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new CompareKernel(i, op));
}
template <Arith op, bool mean>
StatusOr<std::unique_ptr<OpKernel>> MakeVariadic(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new VariadicKernel(i, op, mean));
}

}  // namespace

KernelFactory kAdd = MakeArith<Arith::kAdd>;
KernelFactory kSub = MakeArith<Arith::kSub>;
KernelFactory kMul = MakeArith<Arith::kMul>;
KernelFactory kDiv = MakeArith<Arith::kDiv>;
KernelFactory kEqual = MakeCompare<Compare::kEqual>;
KernelFactory kLess = MakeCompare<Compare::kLess>;
KernelFactory kGreater = MakeCompare<Compare::kGreater>;
KernelFactory kLessOrEqual = MakeCompare<Compare::kLessOrEqual>;
KernelFactory kGreaterOrEqual = MakeCompare<Compare::kGreaterOrEqual>;
KernelFactory kAnd = MakeCompare<Compare::kAnd>;
KernelFactory kOr = MakeCompare<Compare::kOr>;
KernelFactory kXor = MakeCompare<Compare::kXor>;
KernelFactory kPow = MakeKernel<PowKernel>;
KernelFactory kMod = MakeKernel<ModKernel>;
KernelFactory kPRelu = MakeKernel<PReluKernel>;
KernelFactory kSum = MakeVariadic<Arith::kAdd, false>;
KernelFactory kMean = MakeVariadic<Arith::kAdd, true>;
KernelFactory kMax = MakeVariadic<Arith::kMax, false>;
KernelFactory kMin = MakeVariadic<Arith::kMin, false>;
KernelFactory kWhere = MakeKernel<WhereKernel>;
KernelFactory kClip = MakeKernel<ClipKernel>;

}  // namespace cpu
}  // namespace ontrain
