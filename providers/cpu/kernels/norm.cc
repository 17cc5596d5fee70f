// Normalization kernels: BatchNormalization (inference and training mode) and the executor's fused
// ai.ontrain BatchNormActivation, LayerNormalization (ONNX and com.microsoft), InstanceNormalization; and
// Dropout.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/random.h"
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

Status CheckChannelVector(const Tensor* t, int64_t c, const char* name) {
  if (t->NumElements() != c) {
    return InvalidArgument(name, " has shape ", ShapeToString(t->shape()), ", expected [", c, "]");
  }
  return Status::OK();
}

// X [N, C, ...]; scale, B, mean, var [C].
// Training mode (opset >= 14 training_mode=1, or older opsets asked for the statistics outputs) normalises
// with the batch statistics and outputs running_mean = mean*momentum + batch_mean*(1-momentum), likewise
// running_var with the population (biased) batch variance, as ONNX defines.
//
// ai.ontrain BatchNormActivation (`fused`, engine/kernel_fusion.h) is BatchNormInternal followed by the Relu
// or Clip(min, max) of its `activation` attribute, in the same pass, with one more output: affine [2, C],
// each channel's a and b of y = x * a + b (the normalization as computed), from which its gradient kernel
// recomputes the activation's input bit for bit.
class BatchNormKernel : public OpKernel {
 public:
  explicit BatchNormKernel(const NodeInfo& info, bool internal = false, bool fused = false)
      : opset_(info.opset),
        internal_(internal),
        fused_(fused),
        epsilon_(info.node->GetFloat("epsilon", 1e-5f)),
        momentum_(info.node->GetFloat("momentum", 0.9f)),
        training_attr_(info.node->GetInt("training_mode", internal ? 1 : 0) != 0),
        activation_(info.node->GetString("activation", "")),
        lo_(info.node->GetFloat("min", 0.0f)),
        hi_(info.node->GetFloat("max", 0.0f)) {}

  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    if (x->rank() < 2) return InvalidArgument("X must be [N, C, ...], got ", ShapeToString(x->shape()));
    int64_t c = x->dim(1);
    const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2, 3, 4}));  // read with X's element type
    for (int i = 1; i < 5; ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, names[i]));
      ONT_RETURN_IF_ERROR(CheckChannelVector(t, c, names[i]));
    }
    training_ = opset_ >= 14 || internal_ ? training_attr_ : (ctx.output_requested(1) || ctx.output_requested(2));
    if (internal_ && ctx.input(5)) training_ = ctx.input(5)->data<bool>()[0];
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    const int stats = fused_ ? std::min(ctx.num_outputs(), 5) : ctx.num_outputs();
    for (int i = 1; i < stats; ++i) {
      ONT_RETURN_IF_ERROR(ctx.DeclareOutput(i, ctx.input(3)->dtype(), {c}));
    }
    if (fused_) {
      if (activation_ != "Relu" && activation_ != "Clip") {
        return InvalidArgument("activation must be Relu or Clip, got \"", activation_, "\"");
      }
      if (x->dtype() != DType::kFloat32) return InvalidArgument("X must be float32, got ", DTypeName(x->dtype()));
      if (ctx.num_outputs() < 6) return InvalidArgument("output 5 (affine) is missing");
      ONT_RETURN_IF_ERROR(ctx.DeclareOutput(5, DType::kFloat32, {2, c}));
    }
    return Status::OK();
  }

  // Channels in parallel, in blocks read image by image (contiguous runs of the block's channels; one row per
  // image and channel, 128 KB apart, ran at a fifth of the memory's speed): per block the batch moments
  // (training), each channel's a and b of y = x * a + b with the statistics outputs, then y.
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      int64_t n = x.dim(0), c = x.dim(1), inner = c ? x.NumElements() / (n * c) : 0;
      if (n == 0) inner = 0;
      const RowAct act = activation_ == "Relu" ? RowAct::kRelu : RowAct::kClip;
      const int64_t blk = NormChannelBlock(n, inner, 1);
      ParallelFor(ctx.thread_pool(), c, 4.0 * n * inner, [&](int64_t c0, int64_t c1) {
        BlockMoments mom;
        C a[kNormMaxBlock], b[kNormMaxBlock];
        for (int64_t cb = c0; cb < c1; cb += blk) {
          const ChannelBlock k{n, c, inner, cb, std::min(c1, cb + blk) - cb};
          if (training_) Moments(x.data<T>(), k, &mom);
          ChannelAffine<T, C>(ctx, k, mom, a, b);
          ApplyAffine<T, C>(ctx, k, a, b, act);
        }
      });
      return Status::OK();
    });
  }

 private:
  // Channels [cb, cb + nb) of X [n, c, inner], and their batch means s and n * inner times their batch
  // variances s2.
  struct ChannelBlock {
    int64_t n, c, inner, cb, nb;
  };
  struct BlockMoments {
    double s[kNormMaxBlock], s2[kNormMaxBlock];
  };

  // Each channel's sums in a fixed order whatever the blocks and threads: float32 VChannelMoments's (vrows.h)
  // in one pass, about the channel's first value (near its mean: the variance keeps double precision), other
  // types LaneSum per row in two passes, rows in image order.
  template <typename T>
  static void Moments(const T* px, const ChannelBlock& k, BlockMoments* m) {
    const int64_t n = k.n, c = k.c, inner = k.inner, cb = k.cb, nb = k.nb;
    const double cnt = static_cast<double>(n * inner);
    double *s = m->s, *s2 = m->s2;
    if constexpr (std::is_same_v<T, float>) {  // the block's sums per ISA (vrows.h: their order)
      const ChannelRows rows{n, c * inner, nb, inner};
      double shift[kNormMaxBlock];
      for (int64_t j = 0; j < nb; ++j) shift[j] = cnt > 0 ? px[(cb + j) * inner] : 0.0;
      VChannelMoments(px + cb * inner, rows, shift, s, s2);
      // The batch mean, and cnt times the batch variance.
      for (int64_t j = 0; j < nb; ++j) MeanAndM2(shift[j], s[j], s2[j], cnt, &s[j], &s2[j]);
    } else {
      RowMoments(px, k, m);
    }
  }

  // Moments' sums for types other than float32: LaneSum per row in two passes, rows in image order.
  template <typename T>
  static void RowMoments(const T* px, const ChannelBlock& k, BlockMoments* m) {
    using C = ComputeType<T>;
    const int64_t n = k.n, c = k.c, inner = k.inner, cb = k.cb, nb = k.nb;
    const double cnt = static_cast<double>(n * inner);
    double *s = m->s, *s2 = m->s2;
    auto row_sum = [&](const T* row) {
      return LaneSum(inner, [row](int64_t i) { return static_cast<double>(static_cast<C>(row[i])); });
    };
    auto row_sum_sq_dev = [&](const T* row, double bm) {
      return LaneSum(inner, [row, bm](int64_t i) {
        double d = static_cast<double>(static_cast<C>(row[i])) - bm;
        return d * d;
      });
    };
    for (int64_t j = 0; j < nb; ++j) s[j] = s2[j] = 0;
    for (int64_t bt = 0; bt < n; ++bt) {
      for (int64_t j = 0; j < nb; ++j) s[j] += row_sum(px + (bt * c + cb + j) * inner);
    }
    for (int64_t j = 0; j < nb; ++j) s[j] /= cnt;  // the batch mean
    for (int64_t bt = 0; bt < n; ++bt) {
      for (int64_t j = 0; j < nb; ++j) s2[j] += row_sum_sq_dev(px + (bt * c + cb + j) * inner, s[j]);
    }
  }

  // Each channel's a and b (from the batch moments in training, else from the input statistics), the
  // running statistics and the other statistics outputs, and (fused_) the affine output.
  template <typename T, typename C>
  void ChannelAffine(KernelContext& ctx, const ChannelBlock& k, const BlockMoments& m, C* a, C* b) const {
    auto at = [&](int i, int64_t j) { return static_cast<C>(ctx.input(i)->data<T>()[j]); };
    float* affine = fused_ ? ctx.output(5)->data<float>() : nullptr;  // Prepare: float32 only
    const double cnt = static_cast<double>(k.n * k.inner);
    for (int64_t j = 0; j < k.nb; ++j) {
      const int64_t ch = k.cb + j;
      C mean = at(3, ch), var = at(4, ch);
      if (training_) {
        const double bm = m.s[j], bv = m.s2[j] / cnt;
        if (Tensor* rm = ctx.output(1)) rm->data<T>()[ch] = static_cast<T>(static_cast<C>(mean * momentum_ + bm * (1 - momentum_)));
        if (Tensor* rv = ctx.output(2)) rv->data<T>()[ch] = static_cast<T>(static_cast<C>(var * momentum_ + bv * (1 - momentum_)));
        if (opset_ < 14 || internal_) {  // outputs 3/4: the batch mean, and the batch variance (old
                                         // opsets) or 1/sqrt(variance + epsilon) (BatchNormInternal)
          if (Tensor* sm = ctx.output(3)) sm->data<T>()[ch] = static_cast<T>(static_cast<C>(bm));
          double v4 = internal_ ? 1.0 / std::sqrt(bv + epsilon_) : bv;
          if (Tensor* sv = ctx.output(4)) sv->data<T>()[ch] = static_cast<T>(static_cast<C>(v4));
        }
        mean = static_cast<C>(bm);
        var = static_cast<C>(bv);
      }
      C inv = C(1) / std::sqrt(var + static_cast<C>(epsilon_));
      a[j] = at(1, ch) * inv;
      b[j] = at(2, ch) - mean * at(1, ch) * inv;
      if (affine != nullptr) {
        affine[ch] = static_cast<float>(a[j]);
        affine[k.c + ch] = static_cast<float>(b[j]);
      }
    }
  }

  // y = x * a + b over the block's rows (and fused_, the activation after).
  template <typename T, typename C>
  void ApplyAffine(KernelContext& ctx, const ChannelBlock& k, const C* a, const C* b, RowAct act) const {
    const T* px = ctx.input(0)->data<T>();
    T* py = ctx.output(0)->data<T>();
    const int64_t inner = k.inner;
    for (int64_t bt = 0; bt < k.n; ++bt) {
      for (int64_t j = 0; j < k.nb; ++j) {
        const int64_t base = (bt * k.c + k.cb + j) * inner;
        if constexpr (std::is_same_v<T, float> && std::is_same_v<C, float>) {
          if (fused_) VRowAffineAct(px + base, py + base, inner, a[j], b[j], act, lo_, hi_);
          else VRowAffine(px + base, py + base, inner, a[j], b[j]);
        } else {
          for (int64_t i = 0; i < inner; ++i) py[base + i] = static_cast<T>(static_cast<C>(px[base + i]) * a[j] + b[j]);
        }
      }
    }
  }

  int64_t opset_;
  bool internal_, fused_;
  float epsilon_, momentum_;
  bool training_attr_, training_ = false;
  std::string activation_;
  float lo_, hi_;  // Clip's bounds
};

// Y = (X - mean) / sqrt(var + eps) * scale + B over the dims from `axis` on. Mean and InvStdDev have X's
// shape with those dims set to 1.
class LayerNormKernel : public OpKernel {
 public:
  explicit LayerNormKernel(const NodeInfo& info)
      : axis_(info.node->GetInt("axis", -1)), epsilon_(info.node->GetFloat("epsilon", 1e-5f)) {}

  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* scale, RequireInput(ctx, 1, "Scale"));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2}));
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, x->rank()));
    outer_ = 1;
    inner_ = 1;
    Shape stat = x->shape();
    for (int64_t d = 0; d < x->rank(); ++d) {
      if (d < axis) outer_ *= x->dim(d);
      else {
        inner_ *= x->dim(d);
        stat[d] = 1;
      }
    }
    if (scale->NumElements() != inner_) {
      return InvalidArgument("Scale has shape ", ShapeToString(scale->shape()), " but the normalized size is ", inner_);
    }
    if (const Tensor* b = ctx.input(2); b && b->NumElements() != inner_) {
      return InvalidArgument("B has shape ", ShapeToString(b->shape()), " but the normalized size is ", inner_);
    }
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    for (int i = 1; i < ctx.num_outputs() && i < 3; ++i) {
      ONT_RETURN_IF_ERROR(ctx.DeclareOutput(i, IsFloatingPoint(x->dtype()) ? DType::kFloat32 : x->dtype(), stat));
    }
    return Status::OK();
  }

  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      const T* px = x.data<T>();
      const T* ps = ctx.input(1)->data<T>();
      const T* pb = ctx.input(2) ? ctx.input(2)->data<T>() : nullptr;
      T* py = ctx.output(0)->data<T>();
      Tensor* mean_out = ctx.output(1);
      Tensor* inv_out = ctx.output(2);
      int64_t inner = inner_;
      ParallelFor(ctx.thread_pool(), outer_, 8.0 * inner, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* row = px + r * inner;
          // The sums in double, in LaneSum's fixed lane order (vectorized, independent of the thread count):
          // float32 the moments in one pass about the row's first value (VRowMoments), float64 two passes.
          double mean_d, var_d;
          if constexpr (std::is_same_v<T, float>) {
            const double shift = inner > 0 ? row[0] : 0.0;
            double sum, sq, m2;
            VRowMoments(row, inner, shift, &sum, &sq);
            MeanAndM2(shift, sum, sq, static_cast<double>(inner), &mean_d, &m2);
            var_d = m2 / inner;
          } else {
            mean_d = LaneSum(inner, [row](int64_t i) { return static_cast<double>(row[i]); }) / inner;
            var_d = LaneSum(inner, [row, mean_d](int64_t i) {
                      double d = static_cast<double>(row[i]) - mean_d;
                      return d * d;
                    }) / inner;
          }
          C mean = static_cast<C>(mean_d);
          C inv = static_cast<C>(1.0 / std::sqrt(var_d + static_cast<double>(epsilon_)));
          if constexpr (std::is_same_v<T, float>) {  // the same expressions, per ISA
            VRowLayerNorm(row, ps, pb, py + r * inner, inner, mean, inv);
          } else {
            for (int64_t i = 0; i < inner; ++i) {
              C v = (static_cast<C>(row[i]) - mean) * inv * static_cast<C>(ps[i]);
              if (pb) v += static_cast<C>(pb[i]);
              py[r * inner + i] = static_cast<T>(v);
            }
          }
          if (mean_out) WriteStat(mean_out, r, mean);
          if (inv_out) WriteStat(inv_out, r, inv);
        }
      });
      return Status::OK();
    });
  }

 private:
  template <typename C>
  static void WriteStat(Tensor* t, int64_t r, C v) {
    if (t->dtype() == DType::kFloat64) t->data<double>()[r] = static_cast<double>(v);
    else t->data<float>()[r] = static_cast<float>(v);
  }
  int64_t axis_;
  float epsilon_;
  int64_t outer_ = 0, inner_ = 0;
};

// X [N, C, ...]: each (n, c) plane is normalised on its own, then scaled by scale[c] and shifted by B[c].
class InstanceNormKernel : public OpKernel {
 public:
  explicit InstanceNormKernel(const NodeInfo& info) : epsilon_(info.node->GetFloat("epsilon", 1e-5f)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "input"));
    if (x->rank() < 3) return InvalidArgument("input must be [N, C, spatial...], got ", ShapeToString(x->shape()));
    ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, 1, "scale"));
    ONT_ASSIGN_OR_RETURN(const Tensor* b, RequireInput(ctx, 2, "B"));
    ONT_RETURN_IF_ERROR(CheckChannelVector(s, x->dim(1), "scale"));
    ONT_RETURN_IF_ERROR(CheckChannelVector(b, x->dim(1), "B"));
    return ctx.DeclareOutput(0, x->dtype(), x->shape());
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      int64_t c = x.dim(1), planes = x.dim(0) * c, size = planes ? x.NumElements() / planes : 0;
      const T* px = x.data<T>();
      T* py = ctx.output(0)->data<T>();
      for (int64_t p = 0; p < planes; ++p) {
        const T* row = px + p * size;
        C mean = 0, var = 0;
        for (int64_t i = 0; i < size; ++i) mean += static_cast<C>(row[i]);
        mean /= static_cast<C>(size);
        for (int64_t i = 0; i < size; ++i) var += (static_cast<C>(row[i]) - mean) * (static_cast<C>(row[i]) - mean);
        var /= static_cast<C>(size);
        C inv = C(1) / std::sqrt(var + static_cast<C>(epsilon_));
        C sc = static_cast<C>(ctx.input(1)->data<T>()[p % c]), bi = static_cast<C>(ctx.input(2)->data<T>()[p % c]);
        for (int64_t i = 0; i < size; ++i) py[p * size + i] = static_cast<T>((static_cast<C>(row[i]) - mean) * inv * sc + bi);
      }
      return Status::OK();
    });
  }

 private:
  float epsilon_;
};

// Dropout. Opset >= 12: ratio and training_mode are optional inputs; before that, attributes (and is_test
// before 7). In training mode each element is kept with probability 1 - ratio and scaled by 1/(1 - ratio);
// the mask output says which were kept. The generator is seeded from the `seed` attribute when present.
class DropoutKernel : public OpKernel {
 public:
  explicit DropoutKernel(const NodeInfo& info)
      : opset_(info.opset),
        attr_ratio_(info.node->GetFloat("ratio", 0.5f)),
        is_test_(info.node->GetInt("is_test", 0) != 0),
        rng_(info.node->HasAttribute("seed") ? static_cast<uint64_t>(info.node->GetInt("seed", 0))
                                             : NextKernelSeed()) {}

  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "data"));
    ratio_ = attr_ratio_;
    training_ = opset_ < 7 ? !is_test_ : false;
    if (opset_ >= 12) {
      ratio_ = 0.5;
      if (const Tensor* r = ctx.input(1)) {
        ONT_ASSIGN_OR_RETURN(double v, ReadScalar(*r, "ratio"));
        ratio_ = v;
      }
      if (const Tensor* t = ctx.input(2)) {
        if (t->dtype() != DType::kBool || t->NumElements() != 1) return InvalidArgument("training_mode must be a bool scalar");
        training_ = t->data<bool>()[0];
      }
    }
    if (!(ratio_ >= 0.0 && ratio_ < 1.0)) return InvalidArgument("ratio must be in [0, 1), got ", ratio_);
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    if (ctx.num_outputs() > 1) {
      DType mask = opset_ >= 10 ? DType::kBool : x->dtype();
      ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, mask, x->shape()));
    }
    return Status::OK();
  }

  // Its generator advances at every run: a recording would repeat one mask.
  bool capturable() const override { return false; }

  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    Tensor* mask = ctx.output(1);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = ComputeType<T>;
      const T* px = x.data<T>();
      T* py = ctx.output(0)->data<T>();
      int64_t n = x.NumElements();
      bool drop = training_ && ratio_ > 0.0;
      C scale = static_cast<C>(1.0 / (1.0 - ratio_));
      std::uniform_real_distribution<float> uni(0.0f, 1.0f);
      for (int64_t i = 0; i < n; ++i) {
        bool keep = !drop || uni(rng_) >= static_cast<float>(ratio_);
        py[i] = keep ? (drop ? static_cast<T>(static_cast<C>(px[i]) * scale) : px[i]) : static_cast<T>(C(0));
        if (mask) {
          if (mask->dtype() == DType::kBool) mask->data<bool>()[i] = keep;
          else mask->data<T>()[i] = static_cast<T>(C(keep ? 1 : 0));
        }
      }
      return Status::OK();
    });
  }

 private:
  int64_t opset_;
  float attr_ratio_;
  bool is_test_;
  std::mt19937_64 rng_;
  double ratio_ = 0.5;
  bool training_ = false;
};

}  // namespace

KernelFactory kBatchNormalization = MakeKernel<BatchNormKernel>;
KernelFactory kBatchNormInternal = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new BatchNormKernel(i, true));
};
KernelFactory kBatchNormActivation = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new BatchNormKernel(i, true, true));
};
KernelFactory kLayerNormalization = MakeKernel<LayerNormKernel>;
KernelFactory kInstanceNormalization = MakeKernel<InstanceNormKernel>;
KernelFactory kDropout = MakeKernel<DropoutKernel>;

}  // namespace cpu
}  // namespace ontrain
