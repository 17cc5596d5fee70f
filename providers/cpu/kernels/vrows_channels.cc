// Batch normalization's per-channel block sums of vrows.h (VChannelMoments, VChannelGradSums): rows of
// kLongRow or more through the per-row VRow sums, shorter rows in eight lanes per channel over all its
// rows, as compiled per-ISA loops and as AVX-512 intrinsics with the same bits.
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

// The short-row channel sums (rows under kLongRow): eight lanes per channel that run over all its rows
// (ForLanes<8> of each row into the channel's lanes, images in order), totalled once per channel by
// LaneTotal<8>.
ONT_VROWS_CLONES void ShortChannelMomentsLoop(const float* x, const ChannelRows& r, const double* shift, double* sum,
                                              double* sq) {
  double ls[kNormMaxBlock][8] = {}, lq[kNormMaxBlock][8] = {};
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      const float* row = x + b * r.ld + j * r.inner;
      ForLanes<8>(r.inner, [&](int64_t i, int k) { MomentsAdd(ls[j][k], lq[j][k], row[i], shift[j]); });
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) {
    sum[j] = LaneTotal<8>(ls[j]);
    sq[j] = LaneTotal<8>(lq[j]);
  }
}

// The two gradient sums (SumAndDotDevLanes's terms), g read or made by the activation's gradient (the
// expressions of AffineReluGradSumsLoop and AffineClipGradSumsLoop).
ONT_VROWS_CLONES void ShortChannelGradSumsLoop(const float* g, const float* x, const ChannelRows& r,
                                               const ChannelAct* act, const double* mean, double* sum, double* dot) {
  double ls[kNormMaxBlock][8] = {}, ld[kNormMaxBlock][8] = {};
  for (int64_t b = 0; b < r.n; ++b) {
    for (int64_t j = 0; j < r.nb; ++j) {
      const int64_t base = b * r.ld + j * r.inner;
      const float *gr = g + base, *xr = x + base;
      float* out = act != nullptr ? act->out + b * act->out_ld + j * r.inner : nullptr;
      const double mj = mean[j];
      ForLanes<8>(r.inner, [&](int64_t i, int k) {
        float v = gr[i];
        if (act != nullptr) {
          const float y = xr[i] * act->a[j] + act->b[j];
          v = act->act == RowAct::kRelu ? ReluGradOf(y, gr[i]) : ClipGradOf(y, gr[i], act->lo, act->hi, act->fill);
          out[i] = v;
        }
        ls[j][k] += static_cast<double>(v);
        ld[j][k] = DotDevAdd(ld[j][k], v, xr[i], mj);
      });
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) {
    sum[j] = LaneTotal<8>(ls[j]);
    dot[j] = LaneTotal<8>(ld[j]);
  }
}

// The short-row channel moments in AVX-512 intrinsics: each channel's eight lanes of each sum in one double
// vector (in memory between rows: a block has up to kNormMaxBlock channels), each row walked as
// LaneSteps<8> walks it, so the lanes get ShortChannelMomentsLoop's terms in its order.
__attribute__((target("avx512f"))) void ShortChannelMomentsAvx512(const float* x, const ChannelRows& r,
                                                                  const double* shift, double* sum, double* sq) {
  __m512d s[kNormMaxBlock], q[kNormMaxBlock];
  for (int64_t j = 0; j < r.nb; ++j) s[j] = q[j] = _mm512_setzero_pd();
  for (int64_t b = 0; b < r.n; ++b) {
    if (b + 1 < r.n) PrefetchRun(x + (b + 1) * r.ld, r.nb * r.inner);
    for (int64_t j = 0; j < r.nb; ++j) {
      const float* row = x + b * r.ld + j * r.inner;
      __m512d sj = s[j], qj = q[j];
      const __m512d kj = _mm512_set1_pd(shift[j]);
      LaneSteps<8>(r.inner, [&](int64_t i, __mmask16 m, int, int) __attribute__((target("avx512f"))) {
        const __m512 v = _mm512_maskz_loadu_ps(m, row + i);
        for (int h = 0; h < 2; ++h) {
          const __mmask8 mh = static_cast<__mmask8>(h == 0 ? m : m >> 8);
          const __m512d d = _mm512_sub_pd(WidenHalf(v, h), kj);
          sj = _mm512_mask_add_pd(sj, mh, sj, d);
          qj = _mm512_mask3_fmadd_pd(d, d, qj, mh);
        }
      });
      s[j] = sj;
      q[j] = qj;
    }
  }
  for (int64_t j = 0; j < r.nb; ++j) LaneTotals<8>(&s[j], &q[j], &sum[j], &sq[j]);
}

template <SumsKind K>
__attribute__((target("avx512f"))) void ShortChannelGradSumsAvx512(const float* g, const float* x, const ChannelRows& r,
                                                                   const ChannelAct* act, const double* mean,
                                                                   double* sum, double* dot) {
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

void VChannelMoments(const float* x, const ChannelRows& r, const double* shift, double* sum, double* sq) {
  if (r.inner >= kLongRow) {
    for (int64_t j = 0; j < r.nb; ++j) sum[j] = sq[j] = 0;
    for (int64_t b = 0; b < r.n; ++b) {
      if (b + 1 < r.n) PrefetchRun(x + (b + 1) * r.ld, r.nb * r.inner);
      for (int64_t j = 0; j < r.nb; ++j) {
        double rs, rq;
        VRowMoments(x + b * r.ld + j * r.inner, r.inner, shift[j], &rs, &rq);
        sum[j] += rs;
        sq[j] += rq;
      }
    }
  } else if (VRowsIntrinsics()) {
    ShortChannelMomentsAvx512(x, r, shift, sum, sq);
  } else {
    ShortChannelMomentsLoop(x, r, shift, sum, sq);
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
                                act->b[j], act->act, act->lo, act->hi, act->fill, mean[j], &rs, &rd);
        } else {
          VRowSumAndDotDev(g + base, x + base, r.inner, mean[j], &rs, &rd);
        }
        sum[j] += rs;
        dot[j] += rd;
      }
    }
  } else if (!VRowsIntrinsics()) {
    ShortChannelGradSumsLoop(g, x, r, act, mean, sum, dot);
  } else if (act == nullptr) {
    ShortChannelGradSumsAvx512<SumsKind::kNone>(g, x, r, act, mean, sum, dot);
  } else if (act->act == RowAct::kRelu) {
    ShortChannelGradSumsAvx512<SumsKind::kRelu>(g, x, r, act, mean, sum, dot);
  } else {
    ShortChannelGradSumsAvx512<SumsKind::kClip>(g, x, r, act, mean, sum, dot);
  }
  for (int64_t j = 0; j < r.nb; ++j) dot[j] *= inv[j];
}

}  // namespace cpu
}  // namespace ontrain
