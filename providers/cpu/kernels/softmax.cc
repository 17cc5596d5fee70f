// Softmax, LogSoftmax and Hardmax. Opset >= 13 works along one axis (default -1); older opsets flatten the
// input to 2-D at `axis` (default 1) and work along the second dimension.
#include <cmath>
#include <limits>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vmath.h"

namespace ontrain {
namespace cpu {
namespace {

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

class SoftmaxKernel : public OpKernel {
 public:
  SoftmaxKernel(const NodeInfo& info, SoftKind kind)
      : kind_(kind), opset_(info.opset), axis_(info.node->GetInt("axis", info.opset >= 13 ? -1 : 1)) {}

  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    int64_t rank = x->rank();
    if (rank == 0) return InvalidArgument("input must have rank >= 1");
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, rank));
    outer_ = 1;
    len_ = 1;
    inner_ = 1;
    for (int64_t d = 0; d < rank; ++d) {
      if (d < axis) outer_ *= x->dim(d);
      else if (d == axis || opset_ < 13) len_ *= x->dim(d);
      else inner_ *= x->dim(d);
    }
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* px = x.data<T>();
      T* py = ctx.output(0)->data<T>();
      int64_t len = len_, inner = inner_;
      if constexpr (std::is_same_v<T, float>) {
        if (inner == 1 && kind_ != SoftKind::kHardmax) {
          // Rows are contiguous: exp(x - max) once per element through vmath.h, into y.
          ParallelFor(ctx.thread_pool(), outer_, 12.0 * len, [&](int64_t s, int64_t e) {
            for (int64_t r = s; r < e; ++r) {
              const float* x = px + r * len;
              float* y = py + r * len;
              if (kind_ == SoftKind::kSoftmax) {
                VSoftmaxRow(x, y, len);
              } else {
                float mx = -std::numeric_limits<float>::infinity();
                for (int64_t i = 0; i < len; ++i) mx = x[i] > mx ? x[i] : mx;
                // y is scratch for the exponentials until the last loop overwrites it.
                float lse = std::log(VExpShiftSum(x, mx, y, len));
                for (int64_t i = 0; i < len; ++i) y[i] = x[i] - mx - lse;
              }
            }
          });
          return Status::OK();
        }
      }
      ParallelFor(ctx.thread_pool(), outer_ * inner, 10.0 * len, [&](int64_t s, int64_t e) {
        for (int64_t r = s; r < e; ++r) {
          int64_t base = (r / inner) * len * inner + r % inner;
          C mx = -std::numeric_limits<C>::infinity();
          int64_t arg = 0;
          for (int64_t i = 0; i < len; ++i) {
            C v = static_cast<C>(px[base + i * inner]);
            if (v > mx) {
              mx = v;
              arg = i;
            }
          }
          if (kind_ == SoftKind::kHardmax) {
            for (int64_t i = 0; i < len; ++i) py[base + i * inner] = static_cast<T>(C(i == arg ? 1 : 0));
            continue;
          }
          C sum = 0;
          for (int64_t i = 0; i < len; ++i) sum += std::exp(static_cast<C>(px[base + i * inner]) - mx);
          if (kind_ == SoftKind::kSoftmax) {
            for (int64_t i = 0; i < len; ++i) {
              py[base + i * inner] = static_cast<T>(std::exp(static_cast<C>(px[base + i * inner]) - mx) / sum);
            }
          } else {
            C lse = std::log(sum);
            for (int64_t i = 0; i < len; ++i) py[base + i * inner] = static_cast<T>(static_cast<C>(px[base + i * inner]) - mx - lse);
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  SoftKind kind_;
  int64_t opset_, axis_;
  int64_t outer_ = 1, len_ = 1, inner_ = 1;
};

template <SoftKind kind>
StatusOr<std::unique_ptr<OpKernel>> MakeSoft(const NodeInfo& i) { return std::unique_ptr<OpKernel>(new SoftmaxKernel(i, kind)); }

}  // namespace

KernelFactory kSoftmax = MakeSoft<SoftKind::kSoftmax>;
KernelFactory kLogSoftmax = MakeSoft<SoftKind::kLogSoftmax>;
KernelFactory kHardmax = MakeSoft<SoftKind::kHardmax>;

}  // namespace cpu
}  // namespace ontrain
