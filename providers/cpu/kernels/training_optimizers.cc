// ONNX Runtime's training optimizer ops (com.microsoft, version 1), which its optimizer models hold:
// AdamWOptimizer, SGDOptimizerV2 and InplaceClipGradNorm. They update sequences of tensors in place (the
// session's parameters, gradient buffers and moments) and return those same sequences as optional outputs.
//
// The update loops run over every tensor of the step in one pass: the elements of all tensors form one
// range that the thread pool splits, so a step over many small tensors still uses every thread. The math
// is elementwise, so the split never changes a result.
#include <cmath>
#include <initializer_list>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {
namespace {

// Checks that sequences `inputs` (by input index) are present, non-empty, equally long, float32 and
// shaped alike, item by item; returns their length.
StatusOr<size_t> CheckSequences(const KernelContext& ctx, std::initializer_list<std::pair<int, const char*>> inputs) {
  const char* first_name = inputs.begin()->second;
  const TensorSequence* first = ctx.input_sequence(inputs.begin()->first);
  for (const auto& [i, name] : inputs) {
    const TensorSequence* s = ctx.input_sequence(i);
    if (s == nullptr) return InvalidArgument("input ", i, " (", name, ") must be a sequence of tensors");
    if (s->empty()) return InvalidArgument("sequence ", name, " is empty");
    if (s->size() != first->size()) {
      return InvalidArgument("number of ", first_name, " and ", name, " mismatch: ", first->size(), " vs ",
                             s->size());
    }
    for (size_t k = 0; k < s->size(); ++k) {
      const Tensor& t = (*s)[k];
      if (t.dtype() != DType::kFloat32) return Unimplemented(name, "[", k, "] is ", DTypeName(t.dtype()), "; float32 only");
      if (t.shape() != (*first)[k].shape()) {
        return InvalidArgument(name, "[", k, "] has shape ", ShapeToString(t.shape()), " but ", first_name, "[",
                               k, "] has ", ShapeToString((*first)[k].shape()));
      }
    }
  }
  return first->size();
}

// Element offsets of each tensor of `s` in the concatenation of all of them (size n + 1).
void Offsets(const TensorSequence& s, Shape* offsets) {
  offsets->assign(1, 0);
  for (const Tensor& t : s) offsets->push_back(offsets->back() + t.NumElements());
}

// Calls fn(tensor k, begin, end) over every element of every tensor (element ranges of `offsets`, the
// running sizes), split for the pool by parts of each tensor rather than of their concatenation: every
// tensor is cut into kParts equal parts (at multiples of 16 elements) and block p of the ParallelFor
// updates part p of all of them. So at 2 threads the caller updates the first half of each parameter,
// whose gradient rows it computed itself (a weight-gradient GEMM splits by row chunks, ThreadPool gives
// block 0 to the caller, the accumulator splits its buffer in halves): each core reads what it wrote. With
// the concatenation split, the second core read most of the first layer's gradient from the other core's
// cache (mlp_large at 2 threads: AdamW slower than serial). Elementwise updates: the split changes no bit.
constexpr int64_t kParts = 4;
template <typename F>
void ForEachTensorPart(ThreadPool* pool, const Shape& offsets, double cost_per_element, F&& fn) {
  const double total = static_cast<double>(offsets.back());
  ParallelFor(pool, kParts, cost_per_element * total / kParts, [&](int64_t p0, int64_t p1) {
    for (size_t k = 0; k + 1 < offsets.size(); ++k) {
      const int64_t n = offsets[k + 1] - offsets[k];
      auto cut = [&](int64_t p) { return p >= kParts ? n : (n * p / kParts) / 16 * 16; };
      const int64_t lo = cut(p0), hi = cut(p1);
      if (lo < hi) fn(k, lo, hi);
    }
  });
}

// The element loops of the updates, compiled for AVX-512, AVX2 and the baseline and chosen at load time
// from the CPU (GCC's target_clones): the same IEEE operations in every version (no contraction into
// FMAs under -std=c++17), so the results do not depend on which runs.
// Under ThreadSanitizer one baseline version: ifunc resolvers run during relocation, before its runtime
// starts, and crash there.
#if defined(__SANITIZE_THREAD__)
#define ONT_UPDATE_CLONES
#else
#define ONT_UPDATE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif

struct AdamWParams {
  float a, b, eps, lr, wd, ac, bc, lr_c;
  bool mode0;
};

ONT_UPDATE_CLONES
void AdamWRange(float* pw, float* pm, float* pv, const float* pg, int64_t lo, int64_t hi, const AdamWParams& p) {
  const float a = p.a, b = p.b, eps = p.eps, lr = p.lr, wd = p.wd, ac = p.ac, bc = p.bc, lr_c = p.lr_c;
  if (p.mode0) {
    for (int64_t i = lo; i < hi; ++i) {
      pw[i] -= pw[i] * lr * wd;
      pm[i] = a * pm[i] + (1.0f - a) * pg[i];
      pv[i] = b * pv[i] + (1.0f - b) * pg[i] * pg[i];
      pw[i] -= lr * pm[i] / (ac * (std::sqrt(pv[i] / bc) + eps));
    }
  } else {
    for (int64_t i = lo; i < hi; ++i) {
      pm[i] = a * pm[i] + (1.0f - a) * pg[i];
      pv[i] = b * pv[i] + (1.0f - b) * pg[i] * pg[i];
      pw[i] -= lr_c * pm[i] / (std::sqrt(pv[i]) + eps);
      pw[i] -= lr * wd * pw[i];
    }
  }
}

ONT_UPDATE_CLONES
void SgdRange(float* pw, const float* pg, int64_t lo, int64_t hi, float lr) {
  for (int64_t i = lo; i < hi; ++i) pw[i] -= lr * pg[i];
}

// The optional bool update signal; absent means "update".
bool UpdateSignal(const KernelContext& ctx, int i) {
  const Tensor* s = ctx.input(i);
  return s == nullptr || s->NumElements() == 0 || s->data<bool>()[0];
}

// AdamWOptimizer(lr, step, weights, gradients, momentums_1, momentums_2, update_signal?)
//   -> (updated_flag bool, updated_weights?, updated_momentums_1?, updated_momentums_2?)
// With t = step and, when correct_bias, ac = 1 - alpha^t and bc = 1 - beta^t (else 1):
//   mode 0 (PyTorch): w -= w lr wd; m = alpha m + (1 - alpha) g; v = beta v + (1 - beta) g^2;
//                     w -= lr m / (ac (sqrt(v / bc) + eps))
//   mode 1 (Hugging Face): m, v as above; w -= lr sqrt(bc) / ac * m / (sqrt(v) + eps); w -= lr wd w
class AdamWKernel : public OpKernel {
 public:
  explicit AdamWKernel(const NodeInfo& info)
      : alpha_(info.node->GetFloat("alpha", 0.9f)),
        beta_(info.node->GetFloat("beta", 0.999f)),
        epsilon_(info.node->GetFloat("epsilon", 1e-8f)),
        weight_decay_(info.node->GetFloat("weight_decay", 0.0f)),
        adam_mode_(info.node->GetInt("adam_mode", 0)),
        correct_bias_(info.node->GetInt("correct_bias", 1)) {}

  Status Prepare(KernelContext& ctx) override {
    if ((adam_mode_ != 0 && adam_mode_ != 1) || (correct_bias_ != 0 && correct_bias_ != 1)) {
      return InvalidArgument("adam_mode and correct_bias must be 0 or 1");
    }
    if (adam_mode_ == 0 && correct_bias_ == 0) return InvalidArgument("adam_mode 0 requires correct_bias 1");
    // lr and step are read at Compute, not here: they are not host inputs of the row, so a device running
    // this kernel (the simulated one) keeps them in its memory, as CUDA's does, and a recorded run reads
    // each step's values.
    ONT_ASSIGN_OR_RETURN(const Tensor* lr, RequireInput(ctx, 0, "lr"));
    ONT_ASSIGN_OR_RETURN(const Tensor* step, RequireInput(ctx, 1, "step"));
    if (lr->NumElements() != 1 || step->NumElements() != 1) {
      return InvalidArgument("lr and step must have one element each, got ", ShapeToString(lr->shape()), " and ",
                             ShapeToString(step->shape()));
    }
    ONT_RETURN_IF_ERROR(CheckSequences(ctx, {{2, "weights"}, {3, "gradients"}, {4, "momentums_1"}, {5, "momentums_2"}})
                            .status());
    update_ = UpdateSignal(ctx, 6);
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, DType::kBool, step->shape()));
    for (int k = 1; k <= 3 && k < ctx.num_outputs(); ++k) {
      if (ctx.output_requested(k)) ONT_RETURN_IF_ERROR(ctx.AliasOutput(k, k == 1 ? 2 : k + 2));
    }
    return Status::OK();
  }

  Status Compute(KernelContext& ctx) override {
    Tensor* flag = ctx.output(0);
    for (int64_t i = 0; i < flag->NumElements(); ++i) flag->data<bool>()[i] = update_;
    if (!update_) return Status::OK();
    ONT_ASSIGN_OR_RETURN(double lr_value, ReadScalar(*ctx.input(0), "lr"));
    ONT_ASSIGN_OR_RETURN(double step_value, ReadScalar(*ctx.input(1), "step"));
    const float lr = static_cast<float>(lr_value);
    const int64_t step = static_cast<int64_t>(step_value);
    const TensorSequence &w = *ctx.input_sequence(2), &g = *ctx.input_sequence(3);
    const TensorSequence &m = *ctx.input_sequence(4), &v = *ctx.input_sequence(5);
    float ac = 1.0f, bc = 1.0f;
    if (correct_bias_) {
      ac = 1.0f - static_cast<float>(std::pow(static_cast<double>(alpha_), static_cast<double>(step)));
      bc = 1.0f - static_cast<float>(std::pow(static_cast<double>(beta_), static_cast<double>(step)));
    }
    Offsets(w, &offsets_);
    const AdamWParams params{alpha_, beta_, epsilon_, lr, weight_decay_, ac, bc, lr * std::sqrt(bc) / ac,
                             adam_mode_ == 0};
    ForEachTensorPart(ctx.thread_pool(), offsets_, 12.0, [&](size_t k, int64_t lo, int64_t hi) {
      // In place: these are the session's parameter and moment buffers.
      AdamWRange(const_cast<float*>(w[k].data<float>()), const_cast<float*>(m[k].data<float>()),
                 const_cast<float*>(v[k].data<float>()), g[k].data<float>(), lo, hi, params);
    });
    return Status::OK();
  }

 private:
  float alpha_, beta_, epsilon_, weight_decay_;
  int64_t adam_mode_, correct_bias_;
  bool update_ = true;
  Shape offsets_;
};

// SGDOptimizerV2(lr, weights, gradients, update_signal?) -> (update_completed bool, updated_weights?):
// w -= lr g, in place.
class SgdKernel : public OpKernel {
 public:
  explicit SgdKernel(const NodeInfo&) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* lr, RequireInput(ctx, 0, "lr"));  // read at Compute (see AdamW)
    if (lr->NumElements() != 1) return InvalidArgument("lr must have one element, got ", ShapeToString(lr->shape()));
    ONT_RETURN_IF_ERROR(CheckSequences(ctx, {{1, "weights"}, {2, "gradients"}}).status());
    update_ = UpdateSignal(ctx, 3);
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, DType::kBool, lr->shape()));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.AliasOutput(1, 1));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    Tensor* flag = ctx.output(0);
    for (int64_t i = 0; i < flag->NumElements(); ++i) flag->data<bool>()[i] = update_;
    if (!update_) return Status::OK();
    ONT_ASSIGN_OR_RETURN(double lr_value, ReadScalar(*ctx.input(0), "lr"));
    const float lr = static_cast<float>(lr_value);
    const TensorSequence &w = *ctx.input_sequence(1), &g = *ctx.input_sequence(2);
    Offsets(w, &offsets_);
    ForEachTensorPart(ctx.thread_pool(), offsets_, 2.0, [&](size_t k, int64_t lo, int64_t hi) {
      SgdRange(const_cast<float*>(w[k].data<float>()), g[k].data<float>(), lo, hi, lr);
    });
    return Status::OK();
  }

 private:
  bool update_ = true;
  Shape offsets_;
};

// InplaceClipGradNorm(gradients) -> (clipped_gradients): with the Frobenius norm of all gradients together,
// every gradient is scaled in place by min(max_norm / (norm + 1e-6), 1), as ONNX Runtime's kernel does.
// The sum of squares is accumulated in double, in item order.
class ClipGradNormKernel : public OpKernel {
 public:
  explicit ClipGradNormKernel(const NodeInfo& info)
      : max_norm_(info.node->GetFloat("max_norm", 1.0f)), norm_type_(info.node->GetString("norm_type", "fro")) {}
  Status Prepare(KernelContext& ctx) override {
    if (norm_type_ != "fro") return Unimplemented("norm_type \"", norm_type_, "\": only \"fro\" is supported");
    ONT_RETURN_IF_ERROR(CheckSequences(ctx, {{0, "gradients"}}).status());
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.AliasOutput(0, 0));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const TensorSequence& g = *ctx.input_sequence(0);
    double sum = 0;
    for (const Tensor& t : g) {
      const float* p = t.data<float>();
      for (int64_t i = 0; i < t.NumElements(); ++i) sum += static_cast<double>(p[i]) * p[i];
    }
    const float norm = static_cast<float>(std::sqrt(sum));
    const float coef = std::min(max_norm_ / (norm + 1e-6f), 1.0f);
    Offsets(g, &offsets_);
    ForEachTensorPart(ctx.thread_pool(), offsets_, 1.0, [&](size_t k, int64_t lo, int64_t hi) {
      float* p = const_cast<float*>(g[k].data<float>());
      for (int64_t i = lo; i < hi; ++i) p[i] *= coef;
    });
    return Status::OK();
  }

 private:
  float max_norm_;
  std::string norm_type_;
  Shape offsets_;
};

}  // namespace

KernelFactory kAdamWOptimizer = MakeKernel<AdamWKernel>;
KernelFactory kSGDOptimizerV2 = MakeKernel<SgdKernel>;
KernelFactory kInplaceClipGradNorm = MakeKernel<ClipGradNormKernel>;

}  // namespace cpu
}  // namespace ontrain
