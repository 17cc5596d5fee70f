// ConvTranspose (1-D, 2-D and 3-D) as the adjoint of Conv: per image and group, the patch matrix W_g^T X_g
// made by one GEMM and scattered into the output by Col2Im (the output plays the convolution's input), then
// the bias. Pads come from auto_pad, output_padding and output_shape as ONNX defines them
// (graph/conv_pads.h).
#include <algorithm>

#include "graph/conv_pads.h"
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"

namespace ontrain {
namespace cpu {
namespace {

class ConvTransposeKernel : public OpKernel {
 public:
  explicit ConvTransposeKernel(const NodeInfo& info) : node_(*info.node), group_(info.node->GetInt("group", 1)) {}

  // X [N, C, in...], W [C, M/group, k...] -> Y [N, M, out...]
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2}));
    if (x->rank() < 3 || w->rank() != x->rank()) {
      return InvalidArgument("X ", ShapeToString(x->shape()), " and W ", ShapeToString(w->shape()),
                             " must both have rank >= 3 and equal rank");
    }
    int64_t c = x->dim(1);
    if (group_ <= 0 || w->dim(0) != c || c % group_ != 0) {
      return InvalidArgument("channels do not match: X has ", c, ", W ", ShapeToString(w->shape()), ", group ", group_);
    }
    int64_t m = w->dim(1) * group_;
    if (const Tensor* b = ctx.input(2)) {
      if (b->rank() != 1 || b->dim(0) != m) return InvalidArgument("B ", ShapeToString(b->shape()), " must be [", m, "]");
    }
    in_.assign(x->shape().begin() + 2, x->shape().end());
    size_t nd = in_.size();
    geo_ = WindowAttrs::FromNode(node_, Shape(w->shape().begin() + 2, w->shape().end()));
    if (geo_.kernel.size() != nd || geo_.pads.size() != 2 * nd || geo_.strides.size() != nd ||
        geo_.dilations.size() != nd) {
      return InvalidArgument("window attributes do not match ", nd, " spatial dims");
    }
    ONT_RETURN_IF_ERROR(geo_.CheckWeightWindow());
    for (size_t i = 0; i < nd; ++i) {
      if (geo_.kernel[i] <= 0 || geo_.strides[i] <= 0 || geo_.dilations[i] <= 0) {
        return InvalidArgument("kernel, strides and dilations must be positive");
      }
    }
    Shape out_pad = node_.GetInts("output_padding");
    if (out_pad.empty()) out_pad.assign(nd, 0);
    Shape out_shape = node_.GetInts("output_shape");
    if (out_shape.size() > nd) out_shape.erase(out_shape.begin(), out_shape.end() - nd);
    out_.assign(nd, 0);
    for (size_t i = 0; i < nd; ++i) {
      int64_t span = (geo_.kernel[i] - 1) * geo_.dilations[i] + 1;
      int64_t full = geo_.strides[i] * (in_[i] - 1) + out_pad[i] + span;
      ResolveConvTransposePads(geo_.auto_pad, full, in_[i], geo_.strides[i], out_shape.empty() ? -1 : out_shape[i],
                               &geo_.pads[i], &geo_.pads[i + nd]);
      out_[i] = full - geo_.pads[i] - geo_.pads[i + nd];
      if (out_[i] <= 0) return InvalidArgument("output spatial dim ", i, " would be ", out_[i]);
    }
    Shape y = {x->dim(0), m};
    y.insert(y.end(), out_.begin(), out_.end());
    int64_t col = (m / group_) * ShapeNumElements(geo_.kernel) * ShapeNumElements(in_);
    ctx.RequestScratch(static_cast<size_t>(col) * DTypeSize(x->dtype()));
    return ctx.DeclareOutput(0, x->dtype(), y);
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1);
    const Tensor* b = ctx.input(2);
    Tensor* y = ctx.output(0);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t n = x.dim(0), c = x.dim(1), m = y->dim(1);
      int64_t cg = c / group_, mg = m / group_;
      int64_t isize = ShapeNumElements(in_), osize = ShapeNumElements(out_), ksize = ShapeNumElements(geo_.kernel);
      T* col = static_cast<T*>(ctx.scratch());
      T* py = y->data<T>();
      std::fill(py, py + y->NumElements(), T(0));
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t g = 0; g < group_; ++g) {
          // col [mg*ksize, isize] = W_g^T [mg*ksize, cg] * X_g [cg, isize]; then scatter into Y (the output
          // plays the role of the convolution's input).
          Gemm<T>(true, false, mg * ksize, isize, cg, T(1), w.data<T>() + g * cg * mg * ksize,
                  x.data<T>() + (i * c + g * cg) * isize, T(0), col, ctx.thread_pool());
          Col2Im(col, mg, out_, in_, geo_, py + (i * m + g * mg) * osize);
        }
        if (b) {
          for (int64_t j = 0; j < m; ++j) {
            T* row = py + (i * m + j) * osize;
            for (int64_t o = 0; o < osize; ++o) row[o] += b->data<T>()[j];
          }
        }
      }
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  int64_t group_;
  WindowAttrs geo_;
  Shape in_, out_;
};

}  // namespace

KernelFactory kConvTranspose = MakeKernel<ConvTransposeKernel>;

}  // namespace cpu
}  // namespace ontrain
