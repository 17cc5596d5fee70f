// Reductions over any set of axes (ReduceSum, Mean, Max, Min, Prod, SumSquare, L1, L2, LogSum, LogSumExp)
// and ArgMax/ArgMin along one axis.
//
// A reduction visits, for each output element, the same set of input offsets shifted by a base; Prepare
// sizes a scratch table for those offsets so Compute allocates nothing.
#include <algorithm>
#include <cmath>
#include <limits>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

class ReduceKernel : public OpKernel {
 public:
  ReduceKernel(const NodeInfo& info, Reduce kind, int64_t axes_input_since)
      : kind_(kind),
        axes_from_input_(info.opset >= axes_input_since),
        attr_axes_(info.node->GetInts("axes")),
        keepdims_(info.node->GetInt("keepdims", 1) != 0),
        noop_empty_(info.node->GetInt("noop_with_empty_axes", 0) != 0) {}

  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    Shape axes = attr_axes_;
    if (axes_from_input_) {
      axes.clear();
      if (ctx.input(1)) {
        ONT_ASSIGN_OR_RETURN(axes, ReadInts(*ctx.input(1), "axes"));
      }
    }
    int64_t rank = x->rank();
    reduced_.assign(rank, axes.empty() && !noop_empty_);
    for (int64_t a : axes) {
      ONT_ASSIGN_OR_RETURN(int64_t d, NormalizeAxis(a, rank));
      reduced_[d] = true;
    }
    Shape out;
    red_count_ = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (!reduced_[d]) out.push_back(x->dim(d));
      else {
        red_count_ *= x->dim(d);
        if (keepdims_) out.push_back(1);
      }
    }
    if (red_count_ == 0 && (kind_ == Reduce::kMax || kind_ == Reduce::kMin) && ShapeNumElements(out) > 0) {
      return InvalidArgument("cannot take the max or min over an empty set");
    }
    ctx.RequestScratch(static_cast<size_t>(std::max<int64_t>(red_count_, 1)) * sizeof(int64_t));
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), out));
    // A sum or mean over nothing (the gradient of an Add without broadcasting: noop_with_empty_axes) is a
    // copy, which SumRows makes; where the executor lets the output be a view of the input it copies nothing.
    if (red_count_ == 1 && (kind_ == Reduce::kSum || kind_ == Reduce::kMean) &&
        (x->dtype() == DType::kFloat32 || x->dtype() == DType::kFloat64)) {
      ctx.AllowViewOfInput(0, 0);
    }
    return Status::OK();
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    if (SumRun(x, ctx.output(0), ctx.thread_pool())) return Status::OK();
    // 1. Offsets of one reduction window; the kept dims give each output element's base offset.
    Shape st = Strides(x.shape());
    int64_t* table = static_cast<int64_t*>(ctx.scratch());
    int64_t rank = x.rank();
    for (int64_t r = 0; r < red_count_; ++r) {
      int64_t rem = r, off = 0;
      for (int64_t d = rank - 1; d >= 0; --d) {
        if (!reduced_[d]) continue;
        off += (rem % x.dim(d)) * st[d];
        rem /= x.dim(d);
      }
      table[r] = off;
    }
    Tensor* y = ctx.output(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool input");
      } else {
        using C = std::conditional_t<std::is_integral_v<T>, T, std::conditional_t<std::is_same_v<T, double>, double, float>>;
        const T* px = x.data<T>();
        T* py = y->data<T>();
        int64_t n_out = y->NumElements(), count = red_count_;
        Reduce kind = kind_;
        ParallelFor(ctx.thread_pool(), n_out, 2.0 * count, [&](int64_t o0, int64_t o1) {
          for (int64_t o = o0; o < o1; ++o) {
            // 2. Base offset of output element o from the kept dims.
            int64_t rem = o, base = 0;
            for (int64_t d = rank - 1; d >= 0; --d) {
              if (reduced_[d]) continue;
              base += (rem % x.dim(d)) * st[d];
              rem /= x.dim(d);
            }
            py[o] = static_cast<T>(ReduceOne<C>(kind, px + base, table, count));
          }
        });
        return Status::OK();
      }
    });
  }

 private:
  // Sum and Mean of float32/float64 over reduced dims that form one contiguous run (size-1 dims aside), as
  // x = [outer, len, inner]: each output accumulates its len values in the same order as the general path
  // below (so the results are identical), but row by row into a vector of `inner` sums that the compiler
  // vectorizes, instead of gathering through the offset table. Returns false when it does not apply.
  bool SumRun(const Tensor& x, Tensor* y, ThreadPool* pool) const {
    if ((kind_ != Reduce::kSum && kind_ != Reduce::kMean) ||
        (x.dtype() != DType::kFloat32 && x.dtype() != DType::kFloat64)) {
      return false;
    }
    int first = -1, last = -1;
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (!reduced_[d] || x.dim(d) == 1) continue;
      if (first < 0) first = static_cast<int>(d);
      last = static_cast<int>(d);
    }
    int64_t outer = 1, len = 1, inner = 1;
    for (int64_t d = 0; d < x.rank(); ++d) {
      if (x.dim(d) == 1) continue;
      if (first >= 0 && d >= first && d <= last && !reduced_[d]) return false;  // not one run
      if (first < 0 || d < first) outer *= x.dim(d);
      else if (d <= last) len *= x.dim(d);
      else inner *= x.dim(d);
    }
    if (x.dtype() == DType::kFloat32) SumRows<float>(x.data<float>(), y->data<float>(), outer, len, inner, pool);
    else SumRows<double>(x.data<double>(), y->data<double>(), outer, len, inner, pool);
    return true;
  }

  template <typename T>
  void SumRows(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, ThreadPool* pool) const {
    const bool mean = kind_ == Reduce::kMean;
    const T count = static_cast<T>(len);
    if (len == 1) {  // nothing reduced (noop_with_empty_axes, or size-1 axes): a copy, -0 kept
      if (x == y) return;  // a view (Prepare allowed it)
      ParallelFor(pool, outer * inner, 0.5, [&](int64_t b, int64_t e) { std::copy(x + b, x + e, y + b); });
      return;
    }
    if (inner == 1) {
      ParallelFor(pool, outer, static_cast<double>(len), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) {
          T acc = 0;
          for (int64_t r = 0; r < len; ++r) acc += x[o * len + r];
          y[o] = mean && len ? acc / count : acc;
        }
      });
      return;
    }
    ParallelFor(pool, outer * inner, static_cast<double>(len), [&](int64_t b, int64_t e) {
      // Output elements b..e: runs of columns j0..j1 within row o.
      for (int64_t start = b; start < e;) {
        int64_t o = start / inner, j0 = start % inner, j1 = std::min(inner, j0 + (e - start));
        T* out = y + o * inner;
        for (int64_t j = j0; j < j1; ++j) out[j] = 0;
        for (int64_t r = 0; r < len; ++r) {
          const T* row = x + (o * len + r) * inner;
          for (int64_t j = j0; j < j1; ++j) out[j] += row[j];
        }
        if (mean && len) for (int64_t j = j0; j < j1; ++j) out[j] /= count;
        start += j1 - j0;
      }
    });
  }

  template <typename C, typename T>
  static C ReduceOne(Reduce kind, const T* p, const int64_t* table, int64_t count) {
    auto v = [&](int64_t r) { return static_cast<C>(p[table[r]]); };
    C acc;
    switch (kind) {
      case Reduce::kMax:
        acc = std::numeric_limits<C>::lowest();
        for (int64_t r = 0; r < count; ++r) acc = std::max(acc, v(r));
        return acc;
      case Reduce::kMin:
        acc = std::numeric_limits<C>::max();
        for (int64_t r = 0; r < count; ++r) acc = std::min(acc, v(r));
        return acc;
      case Reduce::kProd:
        acc = 1;
        for (int64_t r = 0; r < count; ++r) acc *= v(r);
        return acc;
      case Reduce::kLogSumExp: {
        if constexpr (std::is_integral_v<C>) {
          return 0;
        } else {
          C mx = -std::numeric_limits<C>::infinity();
          for (int64_t r = 0; r < count; ++r) mx = std::max(mx, v(r));
          if (std::isinf(mx)) return mx;
          C s = 0;
          for (int64_t r = 0; r < count; ++r) s += std::exp(v(r) - mx);
          return mx + std::log(s);
        }
      }
      default:
        break;
    }
    acc = 0;
    for (int64_t r = 0; r < count; ++r) {
      C x = v(r);
      if (kind == Reduce::kSumSquare || kind == Reduce::kL2) acc += x * x;
      else if (kind == Reduce::kL1) acc += x < 0 ? static_cast<C>(-x) : x;
      else acc += x;
    }
    if (kind == Reduce::kMean) return count ? static_cast<C>(acc / static_cast<C>(count)) : acc;
    if constexpr (!std::is_integral_v<C>) {
      if (kind == Reduce::kL2) return std::sqrt(acc);
      if (kind == Reduce::kLogSum) return std::log(acc);
    } else {
      if (kind == Reduce::kL2) return static_cast<C>(std::sqrt(static_cast<double>(acc)));
      if (kind == Reduce::kLogSum) return static_cast<C>(std::log(static_cast<double>(acc)));
    }
    return acc;
  }

  Reduce kind_;
  bool axes_from_input_;
  Shape attr_axes_;
  bool keepdims_, noop_empty_;
  std::vector<bool> reduced_;
  int64_t red_count_ = 1;
};

class ArgKernel : public OpKernel {
 public:
  ArgKernel(const NodeInfo& info, bool max)
      : max_(max),
        axis_(info.node->GetInt("axis", 0)),
        keepdims_(info.node->GetInt("keepdims", 1) != 0),
        last_(info.node->GetInt("select_last_index", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ONT_ASSIGN_OR_RETURN(axis_n_, NormalizeAxis(axis_, x->rank()));
    if (x->dim(axis_n_) == 0) return InvalidArgument("cannot take an arg-extremum over an empty axis");
    Shape out = x->shape();
    if (keepdims_) out[axis_n_] = 1;
    else out.erase(out.begin() + axis_n_);
    return ctx.DeclareOutput(0, DType::kInt64, out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      AxisSplit split = SplitAtAxis(x.shape(), axis_n_);
      int64_t outer = split.outer, inner = split.inner, len = split.len;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const T* p = x.data<T>() + o * len * inner + i;
          C best = static_cast<C>(p[0]);
          int64_t arg = 0;
          for (int64_t k = 1; k < len; ++k) {
            C v = static_cast<C>(p[k * inner]);
            bool better = max_ ? (last_ ? v >= best : v > best) : (last_ ? v <= best : v < best);
            if (better) {
              best = v;
              arg = k;
            }
          }
          ctx.output(0)->data<int64_t>()[o * inner + i] = arg;
        }
      }
      return Status::OK();
    });
  }

 private:
  bool max_;
  int64_t axis_, axis_n_ = 0;
  bool keepdims_, last_;
};

// ReduceSum takes axes as an input from opset 13; the others from opset 18.
template <Reduce kind, int since>
StatusOr<std::unique_ptr<OpKernel>> MakeReduce(const NodeInfo& i) {
  return std::unique_ptr<OpKernel>(new ReduceKernel(i, kind, since));
}

}  // namespace

KernelFactory kReduceSum = MakeReduce<Reduce::kSum, 13>;
KernelFactory kReduceSumTraining = MakeReduce<Reduce::kSum, 1>;  // com.microsoft: axes always an input
KernelFactory kReduceMean = MakeReduce<Reduce::kMean, 18>;
KernelFactory kReduceMax = MakeReduce<Reduce::kMax, 18>;
KernelFactory kReduceMin = MakeReduce<Reduce::kMin, 18>;
KernelFactory kReduceProd = MakeReduce<Reduce::kProd, 18>;
KernelFactory kReduceSumSquare = MakeReduce<Reduce::kSumSquare, 18>;
KernelFactory kReduceL1 = MakeReduce<Reduce::kL1, 18>;
KernelFactory kReduceL2 = MakeReduce<Reduce::kL2, 18>;
KernelFactory kReduceLogSum = MakeReduce<Reduce::kLogSum, 18>;
KernelFactory kReduceLogSumExp = MakeReduce<Reduce::kLogSumExp, 18>;
KernelFactory kArgMax = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new ArgKernel(i, true));
};
KernelFactory kArgMin = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new ArgKernel(i, false));
};

}  // namespace cpu
}  // namespace ontrain
