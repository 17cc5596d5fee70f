// ONNX Runtime's training optimizer ops (com.microsoft, version 1), which its optimizer models hold:
// AdamWOptimizer, SGDOptimizerV2 and InplaceClipGradNorm. They update sequences of tensors in place (the
// session's parameters, gradient buffers and moments) and return those same sequences as optional outputs.
//
// The update loops run over every tensor of the step in one pass: the elements of all tensors form one
// range that the thread pool splits, so a step over many small tensors still uses every thread. The math
// is elementwise, so the split never changes a result.
#include <cmath>
#include <cstdint>
#include <cstring>
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

// AdamWRange in AVX-512 without most of the microcode assists that Intel cores take on subnormal floats
// (Zen takes none). Two cases are computed exactly by other means, so that their float operations are
// never run on a subnormal:
// - a stuck first moment: g = +-0 and m a nonzero subnormal whose update rounds lr m to zero. Parameters
//   whose gradient stays zero (an always-zero input feature, a unit that never fires) end there: m decays
//   into the subnormals and sticks (0.9 * k 2^-149 rounds back to k 2^-149 for k <= 5), and every later
//   step used to pay the assists. m = k 2^-149 exactly, so a m rounds to RNE(a k) 2^-149 (a < 1: the result
//   is subnormal), computed on the integer k in double; a subnormal v likewise by b. The step lr m / (...)
//   is then a zero of m's sign whatever the (positive) denominator, so the float operations run with m = 0
//   and v = 1 in those lanes and the exact moments are put back;
// - a tiny gradient: (1 - beta) g g subnormal (the exact product, in double, below 2^-126) added to a b v of
//   magnitude >= 2^-100, whose half ulp it is below: the sum is b v, so the float operations skip the product.
// The sign of the zero step is computed as the loop computes it, though with positive lr and wd no output
// shows it (w - (+-0) and the decay that follows give the same bits).
// Every other lane runs the loop's float operations in its order (no FMAs), so the bits are AdamWRange's;
// a block of 16 with a lane neither case covers (a tiny gradient where b v is tiny too) runs AdamWRange, as
// does a thread that flushes subnormals.
// AdamWFastOk: the parameters the two cases assume (0 <= alpha, beta < 1 with 1 - alpha, 1 - beta >=
// 2^-20, eps > 0, positive finite bias corrections, finite rates); otherwise the caller uses AdamWRange.
bool AdamWFastOk(const AdamWParams& p) {
  auto finite = [](float x) { return std::isfinite(x); };
  return p.a >= 0.0f && p.a < 1.0f && p.b >= 0.0f && p.b < 1.0f && 1.0f - p.a >= 0x1p-20f && 1.0f - p.b >= 0x1p-20f &&
         p.eps > 0.0f && finite(p.eps) && p.ac > 0.0f && finite(p.ac) && p.bc > 0.0f && finite(p.bc) && finite(p.lr) &&
         finite(p.wd) && finite(p.lr_c);
}

#define ONT_AVX512_ADAMW __attribute__((target("avx512f,avx512dq")))

// RNE(f * k) for the 16 integers k (each < 2^23) of `k`, and whether |q| * RNE(f * k) <= 1/2 (q times that
// subnormal rounds to zero), per lane.
ONT_AVX512_ADAMW inline __m512i ScaledRound(__m512i k, double f, double q, __mmask16* to_zero) {
  const __m512d vf = _mm512_set1_pd(f), vq = _mm512_set1_pd(std::fabs(q)), half = _mm512_set1_pd(0.5);
  const __m512d lo = _mm512_roundscale_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_castsi512_si256(k)), vf),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d hi = _mm512_roundscale_pd(_mm512_mul_pd(_mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(k, 1)), vf),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (to_zero != nullptr) {
    *to_zero = static_cast<__mmask16>(_mm512_cmp_pd_mask(_mm512_mul_pd(lo, vq), half, _CMP_LE_OQ) |
                                      (_mm512_cmp_pd_mask(_mm512_mul_pd(hi, vq), half, _CMP_LE_OQ) << 8));
  }
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtpd_epi32(lo)), _mm512_cvtpd_epi32(hi), 1);
}

// Whether the exact products (1 - beta) g * g of the lanes in `lanes` (x = (1 - beta) g, normal) are below
// 2^-126 in magnitude: those the float multiply would make subnormal.
ONT_AVX512_ADAMW inline __mmask16 SubnormalProducts(__m512 x, __m512 g, __mmask16 lanes) {
  const __m512d tiny = _mm512_set1_pd(0x1p-126);
  const __m512d lo = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), _mm512_cvtps_pd(_mm512_castps512_ps256(g)));
  const __m512d hi = _mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)), _mm512_cvtps_pd(_mm512_extractf32x8_ps(g, 1)));
  const unsigned below = _mm512_cmp_pd_mask(_mm512_abs_pd(lo), tiny, _CMP_LT_OQ) |
                         (static_cast<unsigned>(_mm512_cmp_pd_mask(_mm512_abs_pd(hi), tiny, _CMP_LT_OQ)) << 8);
  return static_cast<__mmask16>(below & lanes);
}

ONT_AVX512_ADAMW void AdamWRangeAvx512(float* pw, float* pm, float* pv, const float* pg, int64_t lo, int64_t hi,
                                       const AdamWParams& p) {
  const __m512 a = _mm512_set1_ps(p.a), oma = _mm512_set1_ps(1.0f - p.a), b = _mm512_set1_ps(p.b),
               omb = _mm512_set1_ps(1.0f - p.b), eps = _mm512_set1_ps(p.eps), lr = _mm512_set1_ps(p.lr),
               wd = _mm512_set1_ps(p.wd), ac = _mm512_set1_ps(p.ac), bc = _mm512_set1_ps(p.bc),
               lr_c = _mm512_set1_ps(p.lr_c), lrwd = _mm512_set1_ps(p.lr * p.wd), one = _mm512_set1_ps(1.0f);
  const __m512i abs_bits = _mm512_set1_epi32(0x7fffffff), min_normal = _mm512_set1_epi32(0x00800000),
                inf_bits = _mm512_set1_epi32(0x7f800000), sign_bits = _mm512_set1_epi32(INT32_MIN),
                tiny_g = _mm512_set1_epi32(0x0d800000) /* 2^-100 */;
  // Gradients from this magnitude up have (1 - b) g g >= 2^-126 (the rounding of (1 - b) g included).
  const float g_floor = static_cast<float>(std::sqrt(0x1p-126 / static_cast<double>(1.0f - p.b)) * (1.0 + 0x1p-20));
  int32_t g_floor_bits;
  std::memcpy(&g_floor_bits, &g_floor, sizeof g_floor_bits);
  const __m512i small_g = _mm512_set1_epi32(g_floor_bits);
  const __m512 big_bv = _mm512_set1_ps(0x1p-100f);
  // Flushing subnormals (CpuProviderOptions::flush_denormals: FTZ or DAZ set on this thread), the loop's
  // float operations take no assists and give the flushed results the mode asks for.
  if (_mm_getcsr() & 0x8040) {
    AdamWRange(pw, pm, pv, pg, lo, hi, p);
    return;
  }
  const double lr_q = p.mode0 ? p.lr : p.lr_c;
  // The weight's update from the new moments (m_q: the first moment, or a zero of its sign where stuck).
  const bool mode0 = p.mode0;
  auto step = [&](__m512 w, __m512 m_q, __m512 v1) __attribute__((target("avx512f,avx512dq"), always_inline)) {
    if (mode0) {
      const __m512 w1 = _mm512_sub_ps(w, _mm512_mul_ps(_mm512_mul_ps(w, lr), wd));
      const __m512 den = _mm512_mul_ps(ac, _mm512_add_ps(_mm512_sqrt_ps(_mm512_div_ps(v1, bc)), eps));
      return _mm512_sub_ps(w1, _mm512_div_ps(_mm512_mul_ps(lr, m_q), den));
    }
    const __m512 w1 = _mm512_sub_ps(w, _mm512_div_ps(_mm512_mul_ps(lr_c, m_q), _mm512_add_ps(_mm512_sqrt_ps(v1), eps)));
    return _mm512_sub_ps(w1, _mm512_mul_ps(lrwd, w1));
  };
  int64_t i = lo;
  for (; i + 16 <= hi; i += 16) {
    const __m512 w = _mm512_loadu_ps(pw + i), g = _mm512_loadu_ps(pg + i), m = _mm512_loadu_ps(pm + i),
                 v = _mm512_loadu_ps(pv + i);
    const __m512i gi = _mm512_castps_si512(g), mi = _mm512_castps_si512(m), vi = _mm512_castps_si512(v);
    const __m512i g_abs = _mm512_and_si512(gi, abs_bits), m_abs = _mm512_and_si512(mi, abs_bits),
                  v_abs = _mm512_and_si512(vi, abs_bits);
    // Lanes of the two cases: g = +-0 beside a nonzero subnormal m, and 0 < |g| < g_floor. Most blocks
    // have none and take the loop's operations straight away.
    const __m512i one_i = _mm512_set1_epi32(1);
    const __mmask16 g_zero = _mm512_cmpeq_epi32_mask(g_abs, _mm512_setzero_si512());
    const __mmask16 m_sub_nz = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(m_abs, one_i), _mm512_sub_epi32(min_normal, one_i));
    const __mmask16 g_small = _mm512_cmplt_epu32_mask(_mm512_sub_epi32(g_abs, one_i), _mm512_sub_epi32(small_g, one_i));
    if (((g_zero & m_sub_nz) | g_small) == 0) {
      const __m512 m1 = _mm512_add_ps(_mm512_mul_ps(a, m), _mm512_mul_ps(oma, g));
      const __m512 v1 = _mm512_add_ps(_mm512_mul_ps(b, v), _mm512_mul_ps(_mm512_mul_ps(omb, g), g));
      _mm512_storeu_ps(pw + i, step(w, m1, v1));
      _mm512_storeu_ps(pm + i, m1);
      _mm512_storeu_ps(pv + i, v1);
      continue;
    }
    const __mmask16 v_sub = _mm512_cmplt_epi32_mask(v_abs, min_normal), v_nan = _mm512_cmpgt_epi32_mask(v_abs, inf_bits);
    // Stuck first moments.
    __mmask16 stuck = 0, stuck_v = 0;
    __m512i m_exact = _mm512_setzero_si512(), v_exact = _mm512_setzero_si512();
    const __mmask16 stuck_candidates = static_cast<__mmask16>(g_zero & m_sub_nz & ~v_nan);
    if (stuck_candidates) {
      __mmask16 to_zero;
      const __m512i jm = ScaledRound(m_abs, p.a, lr_q, &to_zero);
      stuck = stuck_candidates & to_zero;
      const __m512i sm = _mm512_and_si512(mi, sign_bits), sg = _mm512_and_si512(gi, sign_bits);
      // a m + (1 - a) g with g = +-0: a m, or where that rounds to zero, -0 only if m and g are negative.
      const __mmask16 jm_zero = _mm512_cmpeq_epi32_mask(jm, _mm512_setzero_si512());
      m_exact = _mm512_mask_mov_epi32(_mm512_or_si512(sm, jm), jm_zero, _mm512_and_si512(sm, sg));
      stuck_v = stuck & v_sub;
      if (stuck_v) {
        // b v + ((1 - b) g) g = b v + 0: b v, or +0 where that rounds to zero.
        const __m512i jv = ScaledRound(v_abs, p.b, 0.0, nullptr);
        const __mmask16 jv_zero = _mm512_cmpeq_epi32_mask(jv, _mm512_setzero_si512());
        v_exact = _mm512_maskz_mov_epi32(static_cast<__mmask16>(~jv_zero), _mm512_or_si512(_mm512_and_si512(vi, sign_bits), jv));
      }
    }
    // Tiny gradients: (1 - b) g g subnormal where b v >= 2^-100 leaves b v.
    __mmask16 tiny_product = 0;
    const __m512 v_in = _mm512_mask_mov_ps(v, stuck_v, one);
    const __m512 bv = _mm512_mul_ps(b, v_in);
    if (g_small) {
      // Below 2^-100, (1 - b) g may be subnormal itself; a tiny product beside a tiny b v is not covered.
      bool covered = _mm512_mask_cmplt_epi32_mask(g_small, g_abs, tiny_g) == 0;
      if (covered) {
        tiny_product = SubnormalProducts(_mm512_mul_ps(omb, g), g, g_small);
        covered = _mm512_mask_cmp_ps_mask(tiny_product, _mm512_abs_ps(bv), big_bv, _CMP_LT_OQ) == 0;
      }
      if (!covered) {
        AdamWRange(pw, pm, pv, pg, i, i + 16, p);
        continue;
      }
    }
    // The float operations of AdamWRange, stuck lanes with m = 0 and v = 1, tiny products skipped.
    const __m512 m_in = _mm512_maskz_mov_ps(static_cast<__mmask16>(~stuck), m);
    const __m512 gv = _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny_product), g);
    const __m512 m1 = _mm512_add_ps(_mm512_mul_ps(a, m_in), _mm512_mul_ps(oma, g));
    const __m512 v1 = _mm512_add_ps(bv, _mm512_mul_ps(_mm512_mul_ps(omb, gv), gv));
    // The step's numerator from a zero of the exact m's sign where stuck.
    const __m512 m_q = _mm512_mask_mov_ps(m1, stuck, _mm512_castsi512_ps(_mm512_and_si512(m_exact, sign_bits)));
    _mm512_storeu_ps(pw + i, step(w, m_q, v1));
    _mm512_storeu_ps(pm + i, _mm512_mask_mov_ps(m1, stuck, _mm512_castsi512_ps(m_exact)));
    _mm512_storeu_ps(pv + i, _mm512_mask_mov_ps(v1, stuck_v, _mm512_castsi512_ps(v_exact)));
  }
  if (i < hi) AdamWRange(pw, pm, pv, pg, i, hi, p);  // the last elements
}

bool UseAdamWAvx512() {
#if defined(__SANITIZE_THREAD__)
  return false;  // the baseline loop only, as for the clones
#else
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has;
#endif
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
    const bool fast = UseAdamWAvx512() && AdamWFastOk(params);
    ForEachTensorPart(ctx.thread_pool(), offsets_, 12.0, [&](size_t k, int64_t lo, int64_t hi) {
      // In place: these are the session's parameter and moment buffers.
      (fast ? AdamWRangeAvx512 : AdamWRange)(const_cast<float*>(w[k].data<float>()), const_cast<float*>(m[k].data<float>()),
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
