// Batch normalization's per-channel block sums of vrows.h (VChannelSums, VChannelSumSqDevs,
// VChannelGradSums): rows of kLongRow or more through the per-row VRow sums, shorter rows in eight lanes
// per channel over all its rows, as compiled per-ISA loops and as AVX-512 intrinsics with the same bits.
#include <immintrin.h>

#include <cstdint>

#include "providers/cpu/kernels/vrows.h"
#include "providers/cpu/kernels/vrows_lanes.h"

namespace ontrain {
namespace cpu {
namespace {

// Prefetches n floats from p, a line at a time: the next image's rows of a channel block, 128 KB and more
// away from the rows in hand, which the hardware prefetcher takes up late.
inline void PrefetchRun(const float* p, int64_t n) {
  for (int64_t f = 0; f < n; f += 16) __builtin_prefetch(p + f);
}

using namespace vrows_detail;  // NOLINT: the shared lane helpers of vrows_lanes.h

// The short-row channel sums of VChannelSums and friends (rows under kLongRow): eight lanes per channel
// that run over all its rows (ForLanes<8> of each row into the channel's lanes, images in order), totalled
// once per channel by LaneTotal<8>. f(row, i) gives the term of element i of a row (a channel's term
// functions get the channel index through `row`).
template <typename F>
__attribute__((always_inline)) inline void ShortChannelLanes(const ChannelRows& r, F f, double* out) {
  double lanes[kNormMaxBlock][8] = {};
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      double* l = lanes[j];
      ForLanes<8>(r.inner, [&](int64_t i, int k) { l[k] += f(b, j, i); });
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) out[j] = LaneTotal<8>(lanes[j]);
}

ONT_VROWS_CLONES void ShortChannelSumsLoop(const float* x, const ChannelRows& r, double* sum) {
  ShortChannelLanes(r, [&](int64_t b, int64_t j, int64_t i) { return static_cast<double>(x[b * r.ld + j * r.inner + i]); },
                    sum);
}

ONT_VROWS_CLONES void ShortChannelSumSqDevsLoop(const float* x, const ChannelRows& r, const double* mean, double* sum) {
  ShortChannelLanes(r, [&](int64_t b, int64_t j, int64_t i) {
    const double d = static_cast<double>(x[b * r.ld + j * r.inner + i]) - mean[j];
    return d * d;
  }, sum);
}

// The two gradient sums (SumAndDotDevLanes's terms), g read or made by the activation's gradient (the
// expressions of AffineReluGradSumsLoop and AffineClipGradSumsLoop).
ONT_VROWS_CLONES void ShortChannelGradSumsLoop(const float* g, const float* x, const ChannelRows& r,
                                               const ChannelAct* act, const double* mean, const double* inv,
                                               double* sum, double* dot) {
  double ls[kNormMaxBlock][8] = {}, ld[kNormMaxBlock][8] = {};
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      const int64_t base = b * r.ld + j * r.inner;
      const float *gr = g + base, *xr = x + base;
      float* out = act != nullptr ? act->out + b * act->out_ld + j * r.inner : nullptr;
      const double mj = mean[j], ij = inv[j];
      ForLanes<8>(r.inner, [&](int64_t i, int k) {
        float v = gr[i];
        if (act != nullptr) {
          const float y = xr[i] * act->a[j] + act->b[j];
          v = act->act == RowAct::kRelu ? ReluGradOf(y, gr[i]) : ClipGradOf(y, gr[i], act->lo, act->hi, act->fill);
          out[i] = v;
        }
        ls[j][k] += static_cast<double>(v);
        ld[j][k] += DotDevTerm(v, xr[i], mj, ij);
      });
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) {
    sum[j] = LaneTotal<8>(ls[j]);
    dot[j] = LaneTotal<8>(ld[j]);
  }
}

// The short-row channel sums in AVX-512 intrinsics: each channel's eight lanes in one double vector (in
// memory between rows: a block has up to kNormMaxBlock channels), each row walked as LaneSteps<8> walks it,
// so the lanes get ShortChannelLanes's terms in its order.
__attribute__((target("avx512f"))) void ShortChannelSumsAvx512(const float* x, const ChannelRows& r,
                                                               const double* mean, double* sum) {
  __m512d acc[kNormMaxBlock];
  for (int64_t j = 0; j < r.nb; ++j) acc[j] = _mm512_setzero_pd();
  for (int64_t b = 0; b < r.n; ++b) {
    if (mean == nullptr && b + 1 < r.n) PrefetchRun(x + (b + 1) * r.ld, r.nb * r.inner);  // the first pass
    for (int64_t j = 0; j < r.nb; ++j) {
      const float* row = x + b * r.ld + j * r.inner;
      __m512d a = acc[j];
      const __m512d mj = _mm512_set1_pd(mean != nullptr ? mean[j] : 0.0);
      LaneSteps<8>(r.inner, [&](int64_t i, __mmask16 m, int, int) __attribute__((target("avx512f"))) {
        const __m512 v = _mm512_maskz_loadu_ps(m, row + i);
        for (int h = 0; h < 2; ++h) {
          const __mmask8 mh = static_cast<__mmask8>(h == 0 ? m : m >> 8);
          __m512d t = WidenHalf(v, h);
          if (mean != nullptr) {
            t = _mm512_sub_pd(t, mj);
            t = _mm512_mul_pd(t, t);
          }
          a = _mm512_mask_add_pd(a, mh, a, t);
        }
      });
      acc[j] = a;
    }
  }
  alignas(64) double lanes[8];
  for (int64_t j = 0; j < r.nb; ++j) {
    _mm512_store_pd(lanes, acc[j]);
    sum[j] = LaneTotal<8>(lanes);
  }
}

template <SumsKind K>
__attribute__((target("avx512f"))) void ShortChannelGradSumsAvx512(const float* g, const float* x, const ChannelRows& r,
                                                                   const ChannelAct* act, const double* mean,
                                                                   const double* inv, double* sum, double* dot) {
  __m512d s[kNormMaxBlock], d[kNormMaxBlock];
  for (int64_t j = 0; j < r.nb; ++j) s[j] = d[j] = _mm512_setzero_pd();
  for (int64_t b = 0; b < r.n; ++b) {
    if (b + 1 < r.n) {
      PrefetchRun(x + (b + 1) * r.ld, r.nb * r.inner);
      PrefetchRun(g + (b + 1) * r.ld, r.nb * r.inner);
    }
    for (int64_t j = 0; j < r.nb; ++j) {
      const int64_t base = b * r.ld + j * r.inner;
      const float *gr = g + base, *xr = x + base;
      float* out = K != SumsKind::kNone ? act->out + b * act->out_ld + j * r.inner : nullptr;
      GradSumsArgs c;
      if constexpr (K != SumsKind::kNone) {
        c.a = _mm512_set1_ps(act->a[j]);
        c.b = _mm512_set1_ps(act->b[j]);
        c.lo = _mm512_set1_ps(act->lo);
        c.hi = _mm512_set1_ps(act->hi);
        c.fill = _mm512_set1_ps(K == SumsKind::kClip ? act->fill : 0.0f);
      }
      c.mean = _mm512_set1_pd(mean[j]);
      c.inv = _mm512_set1_pd(inv[j]);
      __m512d sj[1] = {s[j]}, dj[1] = {d[j]};
      LaneSteps<8>(r.inner, [&](int64_t i, __mmask16 m, int k0, int k1) __attribute__((target("avx512f"))) {
        GradSumsStep<K>(xr, gr, out, i, m, k0, k1, c, sj, dj);
      });
      s[j] = sj[0];
      d[j] = dj[0];
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) LaneTotals<8>(&s[j], &d[j], &sum[j], &dot[j]);
}

}  // namespace

void VChannelSums(const float* x, const ChannelRows& r, double* sum) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      if (b + 1 < r.n) PrefetchRun(x + (b + 1) * r.ld, r.nb * r.inner);
      for (int64_t j = 0; j < r.nb; ++j) sum[j] += VRowSum(x + b * r.ld + j * r.inner, r.inner);
    }
  } else if (VRowsIntrinsics()) {
    ShortChannelSumsAvx512(x, r, nullptr, sum);
  } else {
    ShortChannelSumsLoop(x, r, sum);
  }
}

void VChannelSumSqDevs(const float* x, const ChannelRows& r, const double* mean, double* sum) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      for (int64_t j = 0; j < r.nb; ++j) sum[j] += VRowSumSqDev(x + b * r.ld + j * r.inner, r.inner, mean[j]);
    }
  } else if (VRowsIntrinsics()) {
    ShortChannelSumsAvx512(x, r, mean, sum);
  } else {
    ShortChannelSumSqDevsLoop(x, r, mean, sum);
  }
}

void VChannelGradSums(const float* g, const float* x, const ChannelRows& r, const ChannelAct* act, const double* mean,
                      const double* inv, double* sum, double* dot) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = dot[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      if (b + 1 < r.n) {
        PrefetchRun(x + (b + 1) * r.ld, r.nb * r.inner);
        PrefetchRun(g + (b + 1) * r.ld, r.nb * r.inner);
      }
      for (int64_t j = 0; j < r.nb; ++j) {
        const int64_t base = b * r.ld + j * r.inner;
        double rs, rd;
        if (act != nullptr) {
          VRowAffineActGradSums(x + base, g + base, act->out + b * act->out_ld + j * r.inner, r.inner, act->a[j],
                                act->b[j], act->act, act->lo, act->hi, act->fill, mean[j], inv[j], &rs, &rd);
        } else {
          VRowSumAndDotDev(g + base, x + base, r.inner, mean[j], inv[j], &rs, &rd);
        }
        sum[j] += rs;
        dot[j] += rd;
      }
    }
  } else if (!VRowsIntrinsics()) {
    ShortChannelGradSumsLoop(g, x, r, act, mean, inv, sum, dot);
  } else if (act == nullptr) {
    ShortChannelGradSumsAvx512<SumsKind::kNone>(g, x, r, act, mean, inv, sum, dot);
  } else if (act->act == RowAct::kRelu) {
    ShortChannelGradSumsAvx512<SumsKind::kRelu>(g, x, r, act, mean, inv, sum, dot);
  } else {
    ShortChannelGradSumsAvx512<SumsKind::kClip>(g, x, r, act, mean, inv, sum, dot);
  }
}

}  // namespace cpu
}  // namespace ontrain
