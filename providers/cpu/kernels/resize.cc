// Resize (opset 10 on), Upsample (7-9) and com.microsoft ResizeGrad: nearest, N-linear and N-cubic
// interpolation, separable over the axes. For each axis and output coordinate the kernel first lists the
// input indices it reads and their weights (at most 4), following ONNX's reference: the coordinate
// transformation gives x_original, the neighbours are clamped to the edge, exclude_outside drops and
// renormalizes the weights outside the input, tf_crop_and_resize outside [0, length - 1] gives
// extrapolation_value. An output element is then the sum over the product of its axes' taps; ResizeGrad
// adds dY times the same weights back into dX (the exact adjoint). Taps of weight 0 are dropped, so a value
// that contributes nothing (NaN included) is never read.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/plans.h"

namespace ontrain {
namespace cpu {
namespace {

struct ResizeAttrs {
  enum class Mode { kNearest, kLinear, kCubic } mode = Mode::kNearest;
  std::string transform = "half_pixel";
  std::string nearest = "round_prefer_floor";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0.0;

  // Reads the node's attributes; Upsample and Resize-10 are asymmetric, and their nearest rounds down
  // (Upsample's definition: output[i] = input[floor(i / scale)]).
  static StatusOr<ResizeAttrs> FromNode(const Node& n, int64_t opset) {
    ResizeAttrs a;
    std::string mode = n.GetString("mode", "nearest");
    if (mode == "nearest") a.mode = Mode::kNearest;
    else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") a.mode = Mode::kLinear;
    else if (mode == "cubic" && !(n.op_type == "Upsample" || opset < 11)) a.mode = Mode::kCubic;
    else return InvalidArgument("mode \"", mode, "\" is not one of nearest, linear", opset >= 11 ? ", cubic" : "");
    const bool legacy = n.op_type == "Upsample" || (n.op_type == "Resize" && opset < 11);
    if (legacy) {
      a.transform = "asymmetric";
      a.nearest = "floor";
      return a;
    }
    a.transform = n.GetString("coordinate_transformation_mode", "half_pixel");
    a.nearest = n.GetString("nearest_mode", "round_prefer_floor");
    a.cubic_a = n.GetFloat("cubic_coeff_a", -0.75f);
    a.exclude_outside = n.GetInt("exclude_outside", 0) != 0;
    a.extrapolation = n.GetFloat("extrapolation_value", 0.0f);
    static const char* kTransforms[] = {"half_pixel",         "pytorch_half_pixel",   "align_corners",
                                        "asymmetric",         "tf_crop_and_resize",   "half_pixel_symmetric",
                                        "tf_half_pixel_for_nn"};
    bool known = false;
    for (const char* t : kTransforms) known = known || a.transform == t;
    if (!known) return InvalidArgument("coordinate_transformation_mode \"", a.transform, "\" is not supported");
    if (a.nearest != "round_prefer_floor" && a.nearest != "round_prefer_ceil" && a.nearest != "floor" &&
        a.nearest != "ceil") {
      return InvalidArgument("nearest_mode \"", a.nearest, "\" is not supported");
    }
    if (n.GetInt("antialias", 0) != 0) return Unimplemented("antialias=1 (opset 18) is not supported");
    if (!n.GetInts("axes").empty()) return Unimplemented("the axes attribute (opset 18) is not supported");
    if (n.GetString("keep_aspect_ratio_policy", "stretch") != "stretch") {
      return Unimplemented("keep_aspect_ratio_policy other than stretch (opset 18) is not supported");
    }
    return a;
  }
};

void BuildTaps(const ResizeAttrs& a, int64_t in, int64_t out, double scale, double roi_start, double roi_end,
               AxisTaps* taps) {
  AxisTaps& t = *taps;
  t.begin.clear();
  t.index.clear();
  t.weight.clear();
  t.outside.clear();
  t.begin.push_back(0);
  for (int64_t j = 0; j < out; ++j) {
    double x = 0;
    const double xr = static_cast<double>(j);
    // ONNX's reference takes the resized length as scale * length (not floored) in these formulas.
    const double out_f = scale * static_cast<double>(in);
    if (a.transform == "half_pixel") {
      x = (xr + 0.5) / scale - 0.5;
    } else if (a.transform == "half_pixel_symmetric") {
      const double adj = static_cast<double>(out) / (scale * static_cast<double>(in));
      const double center = static_cast<double>(in) / 2.0;
      const double offset = center * (1.0 - adj);
      x = offset + (xr + 0.5) / scale - 0.5;
    } else if (a.transform == "pytorch_half_pixel") {
      x = out_f > 1 ? (xr + 0.5) / scale - 0.5 : -0.5;  // ONNX's reference (and its test data) use -0.5
    } else if (a.transform == "tf_half_pixel_for_nn") {
      x = (xr + 0.5) / scale;
    } else if (a.transform == "align_corners") {
      x = out_f > 1 ? xr * static_cast<double>(in - 1) / (out_f - 1) : 0.0;
    } else if (a.transform == "asymmetric") {
      x = xr / scale;
    } else {  // tf_crop_and_resize
      x = out_f > 1 ? roi_start * static_cast<double>(in - 1) +
                          xr * (roi_end - roi_start) * static_cast<double>(in - 1) / (out_f - 1)
                    : 0.5 * (roi_start + roi_end) * static_cast<double>(in - 1);
    }
    const bool out_of_range = a.transform == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1));
    t.outside.push_back(out_of_range ? 1 : 0);
    if (out_of_range) {
      t.begin.push_back(static_cast<int64_t>(t.index.size()));
      continue;
    }
    const double fl = std::floor(x);
    const double r = x - fl;
    const int64_t base = static_cast<int64_t>(fl);
    int64_t first = base;
    double w[4] = {0, 0, 0, 0};
    int n = 0;
    if (a.mode == ResizeAttrs::Mode::kNearest) {
      bool up = false;  // round up to base + 1
      if (r > 0) {
        if (a.nearest == "round_prefer_floor") up = r > 0.5;
        else if (a.nearest == "round_prefer_ceil") up = r >= 0.5;
        else up = a.nearest == "ceil";
      }
      first = base + (up ? 1 : 0);
      w[0] = 1;
      n = 1;
    } else if (a.mode == ResizeAttrs::Mode::kLinear) {
      w[0] = 1 - r;
      w[1] = r;
      n = 2;
    } else {
      const double A = a.cubic_a;
      auto near = [A](double d) { return ((A + 2) * d - (A + 3)) * d * d + 1; };            // |d| <= 1
      auto far = [A](double d) { return ((A * d - 5 * A) * d + 8 * A) * d - 4 * A; };        // 1 < |d| < 2
      first = base - 1;
      w[0] = far(r + 1);
      w[1] = near(r);
      w[2] = near(1 - r);
      w[3] = far(2 - r);
      n = 4;
    }
    if (a.exclude_outside) {
      double sum = 0;
      for (int k = 0; k < n; ++k) {
        const int64_t i = first + k;
        if (i < 0 || i >= in) w[k] = 0;
        sum += w[k];
      }
      for (int k = 0; k < n && sum != 0; ++k) w[k] /= sum;
    }
    for (int k = 0; k < n; ++k) {
      if (w[k] == 0) continue;
      t.index.push_back(std::min<int64_t>(std::max<int64_t>(first + k, 0), in - 1));  // edge
      t.weight.push_back(w[k]);
    }
    t.begin.push_back(static_cast<int64_t>(t.index.size()));
  }
}

// Appends a float or integer tensor's values to `v` as doubles (no allocation once v has grown).
Status AppendValues(const Tensor& t, const char* what, std::vector<double>* v) {
  const int64_t n = t.NumElements();
  if (t.dtype() == DType::kInt64 || t.dtype() == DType::kInt32) {
    for (int64_t i = 0; i < n; ++i) {
      v->push_back(static_cast<double>(t.dtype() == DType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i]));
    }
    return Status::OK();
  }
  Status s = DispatchFloat(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    for (int64_t i = 0; i < n; ++i) v->push_back(static_cast<double>(static_cast<ComputeType<T>>(t.data<T>()[i])));
    return Status::OK();
  });
  if (!s.ok()) return InvalidArgument(what, " must be a float or integer tensor, got ", DTypeName(t.dtype()));
  return Status::OK();
}

// The geometry shared by Resize and ResizeGrad: input and output shapes, per-axis scales and roi, and taps.
// Rebuilt only when the input shape or the roi/scales/sizes values change, into reused buffers, so a steady
// training step allocates nothing here.
struct ResizePlan {
  static constexpr size_t kMaxRank = 8;
  Shape in, out;
  std::vector<AxisTaps> taps;
  int64_t generation = 0;  // counts rebuilds

  // x: the input's shape; roi, scales, sizes: the optional inputs (nullptr when absent or empty);
  // out_known: the output shape when the caller knows it (ResizeGrad's dY), else empty.
  Status Build(const ResizeAttrs& a, const Shape& x, const Tensor* roi, const Tensor* scales, const Tensor* sizes,
               const Shape& out_known) {
    const size_t rank = x.size();
    if (rank > kMaxRank) return Unimplemented("resizing tensors of rank ", rank, " (at most ", kMaxRank, ")");
    const size_t nroi = roi ? static_cast<size_t>(roi->NumElements()) : 0;
    const size_t nscales = scales ? static_cast<size_t>(scales->NumElements()) : 0;
    const size_t nsizes = sizes ? static_cast<size_t>(sizes->NumElements()) : 0;
    key_.clear();
    for (int64_t d : x) key_.push_back(static_cast<double>(d));
    for (int64_t d : out_known) key_.push_back(static_cast<double>(d));
    key_.push_back(-1.0);
    if (nroi) ONT_RETURN_IF_ERROR(AppendValues(*roi, "roi", &key_));
    key_.push_back(-2.0);
    if (nscales) ONT_RETURN_IF_ERROR(AppendValues(*scales, "scales", &key_));
    key_.push_back(-3.0);
    if (nsizes) ONT_RETURN_IF_ERROR(AppendValues(*sizes, "sizes", &key_));
    if (built_ && key_ == last_key_) return Status::OK();
    built_ = false;
    last_key_ = key_;
    const double* v = key_.data() + x.size() + out_known.size() + 1;  // roi values, then -2, scales, -3, sizes
    const double* roi_v = v;
    const double* scales_v = roi_v + nroi + 1;
    const double* sizes_v = scales_v + nscales + 1;
    in = x;
    double sc[kMaxRank], start[kMaxRank], end[kMaxRank];
    for (size_t d = 0; d < rank; ++d) {
      sc[d] = 1.0;
      start[d] = 0.0;
      end[d] = 1.0;
    }
    if (nroi > 0 && a.transform == "tf_crop_and_resize") {
      if (nroi != 2 * rank) return InvalidArgument("roi has ", nroi, " values, expected 2 * rank = ", 2 * rank);
      for (size_t d = 0; d < rank; ++d) {
        start[d] = roi_v[d];
        end[d] = roi_v[d + rank];
      }
    }
    out.resize(rank);
    if (nsizes > 0) {
      if (nsizes != rank) return InvalidArgument("sizes has ", nsizes, " values for an input of rank ", rank);
      for (size_t d = 0; d < rank; ++d) {
        const int64_t s = static_cast<int64_t>(sizes_v[d]);
        if (s <= 0) return InvalidArgument("sizes[", d, "] is ", s);
        out[d] = s;
        sc[d] = in[d] > 0 ? static_cast<double>(s) / static_cast<double>(in[d]) : 1.0;
      }
    } else if (nscales > 0) {
      if (nscales != rank) return InvalidArgument("scales has ", nscales, " values for an input of rank ", rank);
      for (size_t d = 0; d < rank; ++d) {
        sc[d] = scales_v[d];
        if (!(sc[d] > 0)) return InvalidArgument("scales[", d, "] is ", sc[d], ", must be > 0");
        // floor(in * (roi_end - roi_start) * scale), with a little slack for scales such as 1/3 in float
        out[d] = static_cast<int64_t>(std::floor(static_cast<double>(in[d]) * (end[d] - start[d]) * sc[d] + 1e-6));
      }
    } else if (!out_known.empty()) {
      for (size_t d = 0; d < rank; ++d) {
        sc[d] = in[d] > 0 ? static_cast<double>(out_known[d]) / static_cast<double>(in[d]) : 1.0;
        out[d] = out_known[d];
      }
    } else {
      return InvalidArgument("one of scales and sizes must be given");
    }
    if (!out_known.empty() && out_known != out) {
      return InvalidArgument("dY has shape ", ShapeToString(out_known), ", the resize gives ", ShapeToString(out));
    }
    taps.resize(rank);
    for (size_t d = 0; d < rank; ++d) {
      if (in[d] == 0 && out[d] > 0) return InvalidArgument("cannot resize an empty axis ", d, " to ", out[d]);
      BuildTaps(a, in[d], out[d], sc[d], start[d], end[d], &taps[d]);
    }
    built_ = true;
    ++generation;
    return Status::OK();
  }

  void View(const ResizeAttrs& a, ResizePlanView* v) const {
    v->in = &in;
    v->out = &out;
    v->taps = &taps;
    v->extrapolation = a.extrapolation;
    v->nearest = a.mode == ResizeAttrs::Mode::kNearest;
    v->generation = generation;
  }

  // Calls f(output offset, input offset, weight) for every tap of every output element in [o0, o1), and
  // g(output offset) for the ones that extrapolate.
  template <typename F, typename G>
  void Visit(int64_t o0, int64_t o1, F f, G g) const {
    const size_t rank = in.size();
    int64_t in_strides[kMaxRank], coord[kMaxRank], pos[kMaxRank], end[kMaxRank];
    for (size_t d = 0; d < rank; ++d) in_strides[d] = 1;
    for (int64_t d = static_cast<int64_t>(rank) - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in[d + 1];
    for (int64_t o = o0; o < o1; ++o) {
      int64_t rem = o;
      bool outside = false;
      for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
        coord[d] = rem % out[d];
        rem /= out[d];
        outside = outside || taps[d].outside[coord[d]];
      }
      if (outside) {
        g(o);
        continue;
      }
      for (size_t d = 0; d < rank; ++d) {
        pos[d] = taps[d].begin[coord[d]];
        end[d] = taps[d].begin[coord[d] + 1];
        if (pos[d] == end[d]) outside = true;  // every weight was 0 (exclude_outside with no tap inside)
      }
      if (outside) continue;
      for (;;) {  // odometer over the taps of every axis
        int64_t at = 0;
        double w = 1;
        for (size_t d = 0; d < rank; ++d) {
          at += taps[d].index[pos[d]] * in_strides[d];
          w *= taps[d].weight[pos[d]];
        }
        f(o, at, w);
        int64_t d = static_cast<int64_t>(rank) - 1;
        for (; d >= 0; --d) {
          if (++pos[d] < end[d]) break;
          pos[d] = taps[d].begin[coord[d]];
        }
        if (d < 0) break;
      }
    }
  }

 private:
  bool built_ = false;
  std::vector<double> key_, last_key_;  // shapes and input values the plan was built for
};

class ResizeKernel : public OpKernel {
 public:
  void View(ResizePlanView* v) const { plan_.View(attrs_, v); }
  explicit ResizeKernel(const NodeInfo& info) : node_(*info.node), opset_(info.opset) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, ResizeAttrs::FromNode(node_, opset_));
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    const bool legacy = node_.op_type == "Upsample" || opset_ < 11;  // (X, scales)
    const Tensor* roi = legacy ? nullptr : ctx.input(1);
    const Tensor* scales = legacy ? ctx.input(1) : ctx.input(2);
    const Tensor* sizes = legacy ? nullptr : ctx.input(3);
    if (attrs_.mode != ResizeAttrs::Mode::kNearest && !IsFloatingPoint(x->dtype())) {
      return InvalidArgument("linear and cubic modes need float input, got ", DTypeName(x->dtype()));
    }
    ONT_RETURN_IF_ERROR(plan_.Build(attrs_, x->shape(), roi, scales, sizes, {}));
    return ctx.DeclareOutput(0, x->dtype(), plan_.out);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* y = ctx.output(0);
    return DispatchAll(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const T* px = x.data<T>();
      T* py = y->data<T>();
      const int64_t n = y->NumElements();
      const double extrap = attrs_.extrapolation;
      // Elements whose taps all have weight 0 (exclude_outside with none inside the input) stay 0.
      std::fill(py, py + n, T{});
      if (attrs_.mode == ResizeAttrs::Mode::kNearest) {  // one tap of weight 1 per axis: a copy
        ParallelFor(ctx.thread_pool(), n, 8.0, [&](int64_t o0, int64_t o1) {
          plan_.Visit(
              o0, o1, [&](int64_t o, int64_t at, double) { py[o] = px[at]; },
              [&](int64_t o) { py[o] = static_cast<T>(static_cast<ComputeType<T>>(extrap)); });
        });
        return Status::OK();
      }
      if constexpr (std::is_same_v<T, bool> || !std::is_floating_point_v<ComputeType<T>>) {
        return InvalidArgument("linear and cubic modes need float input");
      } else {
        ParallelFor(ctx.thread_pool(), n, 16.0, [&](int64_t o0, int64_t o1) {
          int64_t cur = -1;
          double acc = 0;
          auto flush = [&] {
            if (cur >= 0) py[cur] = static_cast<T>(static_cast<ComputeType<T>>(acc));
          };
          plan_.Visit(
              o0, o1,
              [&](int64_t o, int64_t at, double w) {
                if (o != cur) {
                  flush();
                  cur = o;
                  acc = 0;
                }
                acc += w * static_cast<double>(static_cast<ComputeType<T>>(px[at]));
              },
              [&](int64_t o) {
                flush();
                cur = -1;
                py[o] = static_cast<T>(static_cast<ComputeType<T>>(extrap));
              });
          flush();
        });
        return Status::OK();
      }
    });
  }

 private:
  const Node& node_;
  int64_t opset_;
  bool parsed_ = false;
  ResizeAttrs attrs_;
  ResizePlan plan_;
};

// com.microsoft ResizeGrad(dY, X, roi?, scales?) -> dX, with Resize's attributes: dX = the adjoint of Resize
// applied to dY. Without scales, the scales are dY's shape over X's (as for a Resize given sizes).
class ResizeGradKernel : public OpKernel {
 public:
  void View(ResizePlanView* v) const { plan_.View(attrs_, v); }
  explicit ResizeGradKernel(const NodeInfo& info) : node_(*info.node) {}
  Status Prepare(KernelContext& ctx) override {
    if (!parsed_) {
      ONT_ASSIGN_OR_RETURN(attrs_, ResizeAttrs::FromNode(node_, 13));
      parsed_ = true;
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    if (dy->rank() != x->rank()) return InvalidArgument("dY and X ranks differ");
    ONT_RETURN_IF_ERROR(plan_.Build(attrs_, x->shape(), ctx.input(2), ctx.input(3), nullptr, dy->shape()));
    ctx.RequestScratch(static_cast<size_t>(x->NumElements()) * sizeof(double));
    return ctx.DeclareOutput(0, dy->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& dy = *ctx.input(0);
    Tensor* dx = ctx.output(0);
    return DispatchFloat(dy.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      // Accumulated in double per input element, in output order (serial: the scatter's order fixes the sums).
      double* acc = static_cast<double*>(ctx.scratch());
      const int64_t nx = dx->NumElements();
      std::fill(acc, acc + nx, 0.0);
      const T* g = dy.data<T>();
      plan_.Visit(
          0, dy.NumElements(),
          [&](int64_t o, int64_t at, double w) { acc[at] += w * static_cast<double>(static_cast<C>(g[o])); },
          [](int64_t) {});
      T* out = dx->data<T>();
      for (int64_t i = 0; i < nx; ++i) out[i] = static_cast<T>(static_cast<C>(acc[i]));
      return Status::OK();
    });
  }

 private:
  const Node& node_;
  bool parsed_ = false;
  ResizeAttrs attrs_;
  ResizePlan plan_;
};

}  // namespace

KernelFactory kResize = MakeKernel<ResizeKernel>;
KernelFactory kResizeGrad = MakeKernel<ResizeGradKernel>;

bool ResizePlanOf(const OpKernel& k, ResizePlanView* view) {
  if (const auto* r = dynamic_cast<const ResizeKernel*>(&k)) {
    r->View(view);
    return true;
  }
  if (const auto* g = dynamic_cast<const ResizeGradKernel*>(&k)) {
    g->View(view);
    return true;
  }
  return false;
}

}  // namespace cpu
}  // namespace ontrain
