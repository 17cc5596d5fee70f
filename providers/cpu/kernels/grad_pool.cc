// Gradients of pooling: MaxPoolGrad and AveragePoolGrad (ONNX domain, opset 9, as ONNX Runtime registers
// them), and ai.ontrain MaxPoolReluGrad (engine/kernel_fusion.h).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/pool.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

// dX's shape is not a function of dY: it is the forward input's shape, which the graph declares for this
// node's output (batch taken from dY), as ONNX Runtime's kernels read it.
StatusOr<Shape> PoolGradOutputShape(const NodeInfo& info, const Tensor& dy) {
  const ValueInfo* v = info.output_infos.empty() ? nullptr : info.output_infos[0];
  if (v == nullptr || !v->has_shape || v->dims.size() != dy.shape().size()) {
    return InvalidArgument("the graph must declare the shape of output \"",
                           info.node->outputs.empty() ? "" : info.node->outputs[0],
                           "\" (the pooled input's shape) for a pooling gradient");
  }
  Shape s;
  for (size_t d = 0; d < v->dims.size(); ++d) {
    if (d == 0) s.push_back(dy.dim(0));
    else if (v->dims[d].known()) s.push_back(v->dims[d].value);
    else return InvalidArgument("output \"", v->name, "\" has a symbolic dimension ", d, "; a static shape is needed");
  }
  return s;
}

// MaxPoolGrad(dY, Indices), and ai.ontrain MaxPoolReluGrad(dY, Indices, Y): MaxPoolGrad with only the dY
// elements whose pooled value Y (MaxPool's output) is positive. It is ReluGrad(MaxPoolGrad(dY, Indices), X)
// in one pass where MaxPool pooled Relu(X) or pooled X itself (engine/kernel_fusion.h): the pooled value is
// X's element at the index (or its Relu), positive exactly where ReluGrad lets the sum through; elsewhere
// both give 0. Reading Y beside dY costs a quarter of reading X at the scattered indices. With
// compact_indices = 1 (after a FusedConvMaxPool that writes them so) the Indices are uint8 window codes,
// whose positive bit is Y > 0, and Y is not read.
class MaxPoolGradKernel : public OpKernel {
 public:
  explicit MaxPoolGradKernel(const NodeInfo& info)
      : info_(info),
        masked_(info.node->op_type == "MaxPoolReluGrad"),
        codes_(masked_ && info.node->GetInt("compact_indices", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "Indices"));
    ONT_ASSIGN_OR_RETURN(Shape s, PoolGradOutputShape(info_, *dy));
    if (codes_) {
      // Window codes (FusedConvMaxPool's compact Indices): 2x2 windows at stride 2 over 4-D planes.
      if (idx->dtype() != DType::kUInt8 || idx->shape() != dy->shape() || dy->rank() != 4 || s.size() != 4 ||
          s[1] != dy->dim(1) || 2 * dy->dim(2) > s[2] || 2 * dy->dim(3) > s[3]) {
        return InvalidArgument("compact Indices must be uint8 like dY, a 4-D pooling of 2x2 windows at stride 2: dY ",
                               ShapeToString(dy->shape()), ", Indices ", DTypeName(idx->dtype()),
                               ShapeToString(idx->shape()), ", dX ", ShapeToString(s));
      }
      if (dy->dtype() == DType::kFloat32 && !lanes_.fits(s[2], s[3], dy->dim(2), dy->dim(3))) {
        lanes_ = Unpool2x2Lanes(s[2], s[3], dy->dim(2), dy->dim(3));
      }
      return ctx.DeclareOutput(0, dy->dtype(), s);
    }
    if (idx->dtype() != DType::kInt64 || idx->shape() != dy->shape()) return InvalidArgument("Indices must be int64 like dY");
    if (masked_) {
      ONT_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, 2, "Y"));
      if (y->dtype() != dy->dtype() || y->shape() != dy->shape()) {
        return InvalidArgument("Y is ", DTypeName(y->dtype()), ShapeToString(y->shape()), ", dY is ", DTypeName(dy->dtype()),
                               ShapeToString(dy->shape()));
      }
    }
    return ctx.DeclareOutput(0, dy->dtype(), s);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &idx = *ctx.input(1);
    const Tensor* mask = masked_ ? ctx.input(2) : nullptr;
    Tensor* dx = ctx.output(0);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      T* p = dx->data<T>();
      if (codes_) {  // by planes, in parallel; the positive bit is the mask, so Y is not read
        const int64_t planes = dy.dim(0) * dy.dim(1), h = dx->dim(2), wd = dx->dim(3), oh = dy.dim(2), ow = dy.dim(3);
        const uint8_t* codes = idx.data<uint8_t>();
        ParallelFor(ctx.thread_pool(), planes, 4.0 * static_cast<double>(h * wd + 2 * oh * ow), [&](int64_t p0, int64_t p1) {
          if constexpr (std::is_same_v<T, float>) {
            if (VPlanesMaxUnpool2x2Codes(dy.data<float>(), codes, h, wd, oh, ow, p0, p1, p, &lanes_)) return;
          }
          UnpoolWindowCodes<T>(dy.data<T>(), codes, h, wd, oh, ow, p0, p1, p);
        });
        return Status::OK();
      }
      const int64_t n = dx->NumElements();
      const int64_t* ix = idx.data<int64_t>();
      const T* my = mask ? mask->data<T>() : nullptr;
      // Whether dY element i reaches dX: always, or where its pooled value is positive (ReluGrad's test).
      auto open = [my](int64_t i) {
        if constexpr (std::is_same_v<T, double>) return my == nullptr || my[i] > 0.0;
        else return my == nullptr || static_cast<float>(my[i]) > 0.0f;
      };
      // By planes, in parallel: each [N, C] plane of dX zeroed and then scattered into while it is in cache.
      // That is the serial scatter's result whenever every index of a dY plane points into the same dX
      // plane (as MaxPool's do); an index elsewhere sends the whole op to the serial loop below.
      const int64_t planes = dy.rank() >= 3 && dx->rank() >= 3 ? dy.dim(0) * dy.dim(1) : 0;
      if (planes > 0 && dx->dim(0) * dx->dim(1) == planes) {
        const int64_t isize = n / planes, osize = dy.NumElements() / planes;
        // 2x2 windows at stride 2 (float32): whole planes by a select per element where VPlanesMaxUnpool2x2
        // takes them; else (false) the scatter below rewrites the planes.
        const bool windows2x2 = std::is_same_v<T, float> && dy.rank() == 4 && dx->rank() == 4 &&
                                2 * dy.dim(2) <= dx->dim(2) && 2 * dy.dim(3) <= dx->dim(3);
        std::atomic<bool> elsewhere{false};
        ParallelFor(ctx.thread_pool(), planes, 4.0 * static_cast<double>(isize + 2 * osize), [&](int64_t p0, int64_t p1) {
          if constexpr (std::is_same_v<T, float>) {
            if (windows2x2 && VPlanesMaxUnpool2x2(dy.data<float>(), my, ix, 0, dx->dim(2), dx->dim(3), dy.dim(2),
                                                  dy.dim(3), p0, p1, p)) {
              return;
            }
          }
          for (int64_t q = p0; q < p1 && !elsewhere.load(std::memory_order_relaxed); ++q) {
            T* plane = p + q * isize;
            std::fill(plane, plane + isize, static_cast<T>(0.0f));
            const T* g = dy.data<T>() + q * osize;
            const T* z = my ? my + q * osize : nullptr;
            const int64_t* k = ix + q * osize;
            for (int64_t i = 0; i < osize; ++i) {
              const int64_t at = k[i] - q * isize;
              if (at < 0 || at >= isize) {
                elsewhere.store(true, std::memory_order_relaxed);
                break;
              }
              float add = static_cast<float>(g[i]);
              if constexpr (std::is_same_v<T, float>) {
                // Without a branch: windows open and shut at random (ReLU's signs; a branch on them cost
                // 7x). A dX element is reached only from windows that agree (their pooled value is the
                // element's), so the +0 a shut window adds leaves it +0, as ReluGrad would.
                if (z != nullptr) add = KeepIfPositive(add, z[i]);
              } else if (!open(q * osize + i)) {
                add = 0.0f;
              }
              plane[at] = static_cast<T>(static_cast<float>(plane[at]) + add);
            }
          }
        });
        if (!elsewhere.load()) return Status::OK();
      }
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(0.0f);
      for (int64_t i = 0; i < dy.NumElements(); ++i) {
        int64_t k = idx.data<int64_t>()[i];
        if (k < 0 || k >= n) return InvalidArgument("index ", k, " at position ", i, " is outside dX (", n, " elements)");
        if (open(i)) p[k] = static_cast<T>(static_cast<float>(p[k]) + static_cast<float>(dy.data<T>()[i]));
      }
      return Status::OK();
    });
  }

 private:
  NodeInfo info_;
  bool masked_;  // MaxPoolReluGrad
  bool codes_;   // MaxPoolReluGrad with compact_indices: Indices are window codes (pool.h)
  Unpool2x2Lanes lanes_;  // codes_, float32: the flat unpooling's tables for this shape
};

// Spreads each dY element evenly over its pooling window (the count as the forward pass divided by).
class AveragePoolGradKernel : public OpKernel {
 public:
  explicit AveragePoolGradKernel(const NodeInfo& info)
      : info_(info), count_include_pad_(info.node->GetInt("count_include_pad", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    // dX's shape: X's when given as input 1 (ontrain's extension for pooled dims known only at run time;
    // only its shape is read), else the graph's declared output shape, as in ONNX Runtime.
    Shape s;
    if (const Tensor* x = ctx.input(1)) {
      s = x->shape();
    } else {
      ONT_ASSIGN_OR_RETURN(s, PoolGradOutputShape(info_, *dy));
    }
    if (s.size() < 3 || s.size() != dy->shape().size()) {
      return InvalidArgument("dX shape ", ShapeToString(s), " does not match dY ", ShapeToString(dy->shape()));
    }
    in_.assign(s.begin() + 2, s.end());
    geo_ = WindowAttrs::FromNode(*info_.node, {});
    if (geo_.kernel.size() != in_.size()) return InvalidArgument("kernel_shape does not match the spatial rank");
    ONT_ASSIGN_OR_RETURN(Shape out, geo_.OutputDims(in_));
    Shape expect = {dy->dim(0), s[1]};
    expect.insert(expect.end(), out.begin(), out.end());
    if (dy->shape() != expect) return InvalidArgument("dY has shape ", ShapeToString(dy->shape()), ", expected ", ShapeToString(expect));
    out_ = out;
    return ctx.DeclareOutput(0, dy->dtype(), s);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& dy = *ctx.input(0);
    Tensor* dx = ctx.output(0);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      size_t nd = in_.size();
      int64_t planes = dy.dim(0) * dy.dim(1), isize = ShapeNumElements(in_), osize = ShapeNumElements(out_);
      int64_t ksize = ShapeNumElements(geo_.kernel);
      std::vector<float> acc(static_cast<size_t>(isize));
      Shape oidx(nd), kidx(nd), offs(ksize);
      for (int64_t p = 0; p < planes; ++p) {
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(oidx.begin(), oidx.end(), 0);
        for (int64_t o = 0; o < osize; ++o) {
          int64_t inside = 0, padded = 0;
          for (int64_t kk = 0; kk < ksize; ++kk) {
            int64_t r = kk, off = 0;
            bool in = true, in_pad = true;
            for (size_t d = nd; d-- > 0;) {
              kidx[d] = r % geo_.kernel[d];
              r /= geo_.kernel[d];
            }
            for (size_t d = 0; d < nd; ++d) {
              int64_t q = oidx[d] * geo_.strides[d] - geo_.pads[d] + kidx[d] * geo_.dilations[d];
              if (q < -geo_.pads[d] || q >= in_[d] + geo_.pads[d + nd]) in_pad = false;
              if (q < 0 || q >= in_[d]) in = false;
              off = off * in_[d] + q;
            }
            padded += in_pad;
            offs[inside] = off;
            inside += in;
          }
          int64_t count = count_include_pad_ ? padded : inside;
          float g = count ? static_cast<float>(dy.data<T>()[p * osize + o]) / count : 0.0f;
          for (int64_t k = 0; k < inside; ++k) acc[offs[k]] += g;
          for (size_t d = nd; d-- > 0;) {
            if (++oidx[d] < out_[d]) break;
            oidx[d] = 0;
          }
        }
        for (int64_t i = 0; i < isize; ++i) dx->data<T>()[p * isize + i] = static_cast<T>(acc[i]);
      }
      return Status::OK();
    });
  }

 private:
  NodeInfo info_;
  bool count_include_pad_;
  WindowAttrs geo_;
  Shape in_, out_;
};

}  // namespace

KernelFactory kMaxPoolGrad = MakeKernel<MaxPoolGradKernel>;
KernelFactory kMaxPoolReluGrad = MakeKernel<MaxPoolGradKernel>;
KernelFactory kAveragePoolGrad = MakeKernel<AveragePoolGradKernel>;

}  // namespace cpu
}  // namespace ontrain
