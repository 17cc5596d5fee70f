// MaxPool (with its Indices output), AveragePool, GlobalAveragePool and GlobalMaxPool over N spatial dims.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/pool.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

// Visits each output position of one [in...] plane; fn(o, window) gets the flat output index and, through
// `window`, the flat input indices of the window's in-bounds elements plus the count of positions that fall
// in explicit padding (for count_include_pad).
struct Window {
  Shape idx;  // in-bounds input offsets within the plane
  int64_t padded_count = 0;  // positions inside [-pad_begin, in + pad_end)
};

template <typename Fn>
void ForEachWindow(const Shape& in, const Shape& out, const WindowAttrs& w, Fn fn) {
  size_t nd = in.size();
  int64_t osize = ShapeNumElements(out), ksize = ShapeNumElements(w.kernel);
  Shape oidx(nd, 0), kidx(nd);
  Window win;
  for (int64_t o = 0; o < osize; ++o) {
    win.idx.clear();
    win.padded_count = 0;
    for (int64_t kk = 0; kk < ksize; ++kk) {
      int64_t r = kk;
      for (size_t d = nd; d-- > 0;) {
        kidx[d] = r % w.kernel[d];
        r /= w.kernel[d];
      }
      int64_t off = 0;
      bool inside = true, in_pad_region = true;
      for (size_t d = 0; d < nd; ++d) {
        int64_t p = oidx[d] * w.strides[d] - w.pads[d] + kidx[d] * w.dilations[d];
        if (p < -w.pads[d] || p >= in[d] + w.pads[d + nd]) in_pad_region = false;
        if (p < 0 || p >= in[d]) inside = false;
        off = off * in[d] + p;
      }
      if (in_pad_region) win.padded_count++;
      if (inside) win.idx.push_back(off);
    }
    fn(o, win);
    for (size_t d = nd; d-- > 0;) {
      if (++oidx[d] < out[d]) break;
      oidx[d] = 0;
    }
  }
}

class PoolBase : public OpKernel {
 protected:
  explicit PoolBase(const NodeInfo& info) : node_(*info.node), opset_(info.opset) {}

  Status PrepareWindow(KernelContext& ctx) {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    if (x->rank() < 3) return InvalidArgument("X must be [N, C, spatial...], got ", ShapeToString(x->shape()));
    in_.assign(x->shape().begin() + 2, x->shape().end());
    geo_ = WindowAttrs::FromNode(node_, {});
    if (geo_.kernel.size() != in_.size()) {
      return InvalidArgument("kernel_shape has ", geo_.kernel.size(), " dims but X has ", in_.size(), " spatial dims");
    }
    ONT_ASSIGN_OR_RETURN(out_, geo_.OutputDims(in_));
    Shape y = {x->dim(0), x->dim(1)};
    y.insert(y.end(), out_.begin(), out_.end());
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), y));
    if (ctx.num_outputs() > 1) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, DType::kInt64, y));
    return Status::OK();
  }

  const Node& node_;
  int64_t opset_;
  WindowAttrs geo_;
  Shape in_, out_;
};

}  // namespace

// MaxPool over two spatial dims without building windows: the same visiting order (kernel rows, then
// columns), the same first-maximum rule and the same index of an all-padding window as ForEachWindow's
// general path, so both give identical results; it is about 20x faster on a CNN's pools. Float rows whose
// windows lie inside the input go through VRowMaxPool's vectorized selects.
template <typename T>
void MaxPool2D(const T* x, T* y, int64_t* ind, int64_t p0, int64_t p1, int64_t planes, const Shape& in,
               const Shape& out, const WindowAttrs& w, int64_t storage_order) {
  const int64_t h = in[0], wd = in[1], oh = out[0], ow = out[1], isize = h * wd;
  using C = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;
  // The columns whose windows are inside the input: jlo <= j < jhi.
  const int64_t sh = w.strides[0], sw = w.strides[1], kh = w.kernel[0], kw = w.kernel[1];
  const int64_t jlo = std::min(ow, (w.pads[1] + sw - 1) / sw);
  const int64_t jhi = wd + w.pads[1] - kw < 0 ? jlo : std::max(jlo, std::min(ow, (wd + w.pads[1] - kw) / sw + 1));
  const bool rows_fast = std::is_same_v<T, float> && w.dilations[0] == 1 && w.dilations[1] == 1 &&
                         isize < (int64_t{1} << 31);
  auto store = [&](int64_t p, int64_t o, int64_t arg) {
    if (arg < 0) arg = 0;
    ind[o] = p * isize + (storage_order == 0 ? arg : (arg % wd) * h + arg / wd);
  };
  for (int64_t p = p0; p < p1; ++p) {
    const T* px = x + p * isize;
    for (int64_t i = 0; i < oh; ++i) {
      const int64_t r0 = i * sh - w.pads[0];
      const bool row_inside = r0 >= 0 && r0 + kh - 1 < h;
      const bool fast = rows_fast && row_inside && jhi > jlo;
      for (int64_t j = 0; j < ow; ++j) {
        if (fast && j == jlo) {  // the interior run of this row, vectorized
          if constexpr (std::is_same_v<T, float>) {
            const int64_t m = jhi - jlo, c0 = jlo * sw - w.pads[1];
            const int64_t o = p * oh * ow + i * ow + jlo;
            const int64_t start = p * isize + r0 * wd + c0;
            // The rows of the output row kAhead below, prefetched: the input comes from memory (the layer
            // before wrote more than the caches hold) and this loop's loads otherwise wait on each line.
            constexpr int64_t kAhead = 4;
            const int64_t ahead = start + kAhead * sh * wd, span = (m - 1) * sw + kw;
            if (ahead + (kh - 1) * wd + span <= planes * isize) PrefetchRows(x + ahead, kh, span, wd);
            // Row-major indices come out based on the tensor; others plane-relative, then reordered.
            VRowMaxPool(x + start, wd, kh, kw, sw, m, planes * isize - start, y + o, ind ? ind + o : nullptr,
                        storage_order == 0 ? start : r0 * wd + c0);
            if (ind && storage_order != 0) {
              for (int64_t t = 0; t < m; ++t) store(p, o + t, ind[o + t]);
            }
          }
          j = jhi - 1;
          continue;
        }
        C best = std::numeric_limits<C>::lowest();
        int64_t arg = -1;
        const int64_t c0 = j * sw - w.pads[1];
        const bool interior = row_inside && c0 >= 0 && r0 + (kh - 1) * w.dilations[0] < h &&
                              c0 + (kw - 1) * w.dilations[1] < wd;
        if (interior) {  // no bounds to check: the same visit, without the branches
          arg = r0 * wd + c0;
          for (int64_t a = 0; a < kh; ++a) {
            const T* row = px + (r0 + a * w.dilations[0]) * wd + c0;
            for (int64_t b = 0; b < kw; ++b) {
              C v = static_cast<C>(row[b * w.dilations[1]]);
              if (v > best) {
                best = v;
                arg = (r0 + a * w.dilations[0]) * wd + c0 + b * w.dilations[1];
              }
            }
          }
        }
        for (int64_t a = 0; !interior && a < kh; ++a) {
          int64_t r = r0 + a * w.dilations[0];
          if (r < 0 || r >= h) continue;
          for (int64_t b = 0; b < kw; ++b) {
            int64_t c = c0 + b * w.dilations[1];
            if (c < 0 || c >= wd) continue;
            C v = static_cast<C>(px[r * wd + c]);
            if (arg < 0) arg = r * wd + c;
            if (v > best) {
              best = v;
              arg = r * wd + c;
            }
          }
        }
        int64_t o = p * oh * ow + i * ow + j;
        y[o] = static_cast<T>(best);
        if (ind) store(p, o, arg);
      }
    }
  }
}

template void MaxPool2D<float>(const float*, float*, int64_t*, int64_t, int64_t, int64_t, const Shape&, const Shape&,
                               const WindowAttrs&, int64_t);
template void MaxPool2D<double>(const double*, double*, int64_t*, int64_t, int64_t, int64_t, const Shape&, const Shape&,
                                const WindowAttrs&, int64_t);

namespace {

class MaxPoolKernel : public PoolBase {
 public:
  explicit MaxPoolKernel(const NodeInfo& info) : PoolBase(info), storage_order_(info.node->GetInt("storage_order", 0)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(PrepareWindow(ctx));
    // Narrow float planes whose windows all lie inside the input go through VPlaneMaxPool; the windows'
    // corners are listed once per shape (the list is rebuilt, and may grow, only when the shape changes).
    const bool inside = in_.size() == 2 && geo_.dilations[0] == 1 && geo_.dilations[1] == 1 && geo_.pads[0] == 0 &&
                        geo_.pads[1] == 0 && (out_[0] - 1) * geo_.strides[0] + geo_.kernel[0] <= in_[0] &&
                        (out_[1] - 1) * geo_.strides[1] + geo_.kernel[1] <= in_[1];
    // 2x2 windows at stride 2 (most CNNs' pools): whole planes by VPlanesMaxPool2x2, without the row path's
    // per-row calls or the narrow planes' gathers (the benchmark CNN's 26x26 and 11x11 pools, 64 images of
    // 32 and 64 channels: 0.77 -> 0.53 ms and 0.24 -> 0.17 ms on one Zen 5 core).
    pool2x2_ = inside && storage_order_ == 0 && ctx.input(0)->dtype() == DType::kFloat32 && geo_.kernel == Shape{2, 2} &&
               geo_.strides == Shape{2, 2} && ShapeNumElements(in_) < (int64_t{1} << 31) && VPlaneMaxPoolAvailable();
    plane_path_ = !pool2x2_ && inside && storage_order_ == 0 && ctx.input(0)->dtype() == DType::kFloat32 && out_[1] < kPlaneWidth &&
                  ShapeNumElements(in_) < (int64_t{1} << 31) && VPlaneMaxPoolAvailable();
    if (plane_path_ && (corner_in_ != in_ || corner_out_ != out_)) {
      corner_.resize(ShapeNumElements(out_));
      for (int64_t i = 0; i < out_[0]; ++i) {
        for (int64_t j = 0; j < out_[1]; ++j) {
          corner_[i * out_[1] + j] = static_cast<int32_t>(i * geo_.strides[0] * in_[1] + j * geo_.strides[1]);
        }
      }
      corner_in_ = in_;
      corner_out_ = out_;
    }
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    Tensor* ind = ctx.output(1);
    if (in_.size() == 2 && (x.dtype() == DType::kFloat32 || x.dtype() == DType::kFloat64)) {
      int64_t planes = x.dim(0) * x.dim(1);
      if (pool2x2_) {
        ParallelFor(ctx.thread_pool(), planes, 4.0 * static_cast<double>(ShapeNumElements(out_) * 15), [&](int64_t p0, int64_t p1) {
          VPlanesMaxPool2x2(x.data<float>(), in_[0], in_[1], out_[0], out_[1], p0, p1, y->data<float>(),
                            ind ? ind->data<int64_t>() : nullptr);
        });
        return Status::OK();
      }
      if (plane_path_) {
        const int64_t isize = in_[0] * in_[1], osize = ShapeNumElements(out_);
        ParallelFor(ctx.thread_pool(), planes, 4.0 * static_cast<double>(osize * (3 * ShapeNumElements(geo_.kernel) + 3)),
                    [&](int64_t p0, int64_t p1) {
          VPlaneMaxPool(x.data<float>(), isize, corner_.data(), osize, geo_.kernel[0], geo_.kernel[1], in_[1], p0, p1,
                        y->data<float>(), ind ? ind->data<int64_t>() : nullptr);
        });
        return Status::OK();
      }
      // Per plane: each output's window loads, compares and selects and its value and index stores, the
      // memory accesses counted four times (the input comes from memory, not cache). Counting compares
      // alone kept the CNN's pools on one thread at 2 threads, where they read what the other core had
      // just written: 0.83 and 0.44 ms at 1 thread, 2.5 and 1.4 at 2; split, 1.3-1.5 and 0.6-0.9.
      double cost = 4.0 * static_cast<double>(ShapeNumElements(out_) * (3 * ShapeNumElements(geo_.kernel) + 3));
      ParallelFor(ctx.thread_pool(), planes, cost, [&](int64_t p0, int64_t p1) {
        int64_t* pi = ind ? ind->data<int64_t>() : nullptr;
        if (x.dtype() == DType::kFloat32) MaxPool2D(x.data<float>(), y->data<float>(), pi, p0, p1, planes, in_, out_, geo_, storage_order_);
        else MaxPool2D(x.data<double>(), y->data<double>(), pi, p0, p1, planes, in_, out_, geo_, storage_order_);
      });
      return Status::OK();
    }
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      if constexpr (std::is_same_v<T, bool>) {
        return Unimplemented("bool input");
      } else {
        int64_t planes = x.dim(0) * x.dim(1), isize = ShapeNumElements(in_), osize = ShapeNumElements(out_);
        ParallelFor(ctx.thread_pool(), planes, static_cast<double>(osize * ShapeNumElements(geo_.kernel)),
                    [&](int64_t p0, int64_t p1) {
          for (int64_t p = p0; p < p1; ++p) {
            const T* px = x.data<T>() + p * isize;
            ForEachWindow(in_, out_, geo_, [&](int64_t o, const Window& win) {
              C best = std::numeric_limits<C>::lowest();
              int64_t arg = win.idx.empty() ? 0 : win.idx[0];
              for (int64_t i : win.idx) {
                C v = static_cast<C>(px[i]);
                if (v > best) {
                  best = v;
                  arg = i;
                }
              }
              y->data<T>()[p * osize + o] = static_cast<T>(best);
              if (ind) ind->data<int64_t>()[p * osize + o] = p * isize + StorageIndex(arg);
            });
          }
        });
        return Status::OK();
      }
    });
  }

 private:
  // Row-major plane offset -> the offset in the requested storage order (1: column-major).
  int64_t StorageIndex(int64_t off) const {
    if (storage_order_ == 0) return off;
    int64_t result = 0, mult = 1;
    Shape coord(in_.size());
    for (size_t d = in_.size(); d-- > 0;) {
      coord[d] = off % in_[d];
      off /= in_[d];
    }
    for (size_t d = 0; d < in_.size(); ++d) {
      result += coord[d] * mult;
      mult *= in_[d];
    }
    return result;
  }
  // Output rows narrower than this go through VPlaneMaxPool (when its conditions hold), wider ones by rows:
  // the CNN's 11x11 -> 5x5 pool 0.46 -> 0.24-0.34 ms, its 26x26 -> 13x13 one 0.80 -> 0.93-1.2 ms (one Zen 5
  // core; that input comes from memory, which the row path prefetches).
  static constexpr int64_t kPlaneWidth = 8;
  int64_t storage_order_;
  bool plane_path_ = false;
  bool pool2x2_ = false;  // VPlanesMaxPool2x2
  std::vector<int32_t> corner_;  // each output's window corner within a plane
  Shape corner_in_, corner_out_;  // the plane shapes corner_ was built for
};

class AveragePoolKernel : public PoolBase {
 public:
  explicit AveragePoolKernel(const NodeInfo& info)
      : PoolBase(info), count_include_pad_(info.node->GetInt("count_include_pad", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override { return PrepareWindow(ctx); }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      int64_t planes = x.dim(0) * x.dim(1), isize = ShapeNumElements(in_), osize = ShapeNumElements(out_);
      ParallelFor(ctx.thread_pool(), planes, static_cast<double>(osize * ShapeNumElements(geo_.kernel)),
                  [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const T* px = x.data<T>() + p * isize;
          ForEachWindow(in_, out_, geo_, [&](int64_t o, const Window& win) {
            C sum = 0;
            for (int64_t i : win.idx) sum += static_cast<C>(px[i]);
            int64_t count = count_include_pad_ ? win.padded_count : static_cast<int64_t>(win.idx.size());
            y->data<T>()[p * osize + o] = static_cast<T>(count > 0 ? sum / static_cast<C>(count) : C(0));
          });
        }
      });
      return Status::OK();
    });
  }

 private:
  bool count_include_pad_;
};

// GlobalAveragePool / GlobalMaxPool: one value per (n, c) plane, spatial dims kept as 1.
class GlobalPoolKernel : public OpKernel {
 public:
  GlobalPoolKernel(const NodeInfo&, bool max) : max_(max) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    if (x->rank() < 2) return InvalidArgument("X must be [N, C, ...], got ", ShapeToString(x->shape()));
    Shape y(x->rank(), 1);
    y[0] = x->dim(0);
    y[1] = x->dim(1);
    return ctx.DeclareOutput(0, x->dtype(), y);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      int64_t planes = x.dim(0) * x.dim(1), size = planes ? x.NumElements() / planes : 0;
      for (int64_t p = 0; p < planes; ++p) {
        const T* px = x.data<T>() + p * size;
        C acc = max_ ? std::numeric_limits<C>::lowest() : C(0);
        for (int64_t i = 0; i < size; ++i) {
          C v = static_cast<C>(px[i]);
          acc = max_ ? std::max(acc, v) : acc + v;
        }
        y->data<T>()[p] = static_cast<T>(max_ ? acc : acc / static_cast<C>(size));
      }
      return Status::OK();
    });
  }

 private:
  bool max_;
};

}  // namespace

KernelFactory kMaxPool = MakeKernel<MaxPoolKernel>;
KernelFactory kAveragePool = MakeKernel<AveragePoolKernel>;
KernelFactory kGlobalAveragePool = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new GlobalPoolKernel(i, false));
};
KernelFactory kGlobalMaxPool = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new GlobalPoolKernel(i, true));
};

}  // namespace cpu
}  // namespace ontrain
