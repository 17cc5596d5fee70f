// Depthwise convolutions at stride 2 on x's four phase planes (depthwise_flat.h).
#include <immintrin.h>

#include <algorithm>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/depthwise_flat.h"

namespace ontrain {
namespace cpu {
namespace {

// Stride 2 (both dims) by phase planes. The flat kernels above run a strided window over x's whole plane
// and keep one output in four (dX: over dY spread into x's plane, three entries in four zero). Instead x
// is split into its four phase planes P[pr, pc][i, j] = x[2i + pr, 2j + pc]: output (r, o) reads through
// tap (a, b), at x's row 2r + er (er = a dh - ph), the phase plane of row parity er mod 2 at row r +
// floor(er / 2), and likewise for columns. So the forward pass is one flat kernel over the output plane
// whose tap t reads a fixed offset into the buffer of the four planes, with the same taps in the same
// order, each either read or masked to zero as before: the same bits, a quarter of the work. dX splits
// the other way: its phase plane (qu, qv) gets only the taps whose window offset has that parity, as a
// flat kernel over dY, the flipped taps in the same order (the ones left out multiplied the zeros between
// the spread dY's entries, so the sums keep their bits, unless a weight is infinite or NaN, where the old
// products 0 * w added NaN to entries no window of dY reaches), and the four planes are interleaved into
// dX. dW is the forward flat kernel's geometry with dY as the other operand: the same sums, the lanes in
// another order. Every plane, output and phase alike, is computed as hd x wd (at least the output's and
// each phase's size), so one row offset serves all of them; the rows and columns past a plane's own size
// are masked, computed and dropped.
struct DwPhases {
  int64_t hd = 0, wd = 0;
  bool direct = false;  // the output plane is hd x wd: the forward pass writes y and dW reads dY in place
  DwFlat fwd;           // over the four planes of x: forward and dW
  DwFlat dx[4];         // over dY, phase plane 2 qu + qv of dX; its taps' weights index the flipped window
  int64_t dx_taps[4][kDwMaxTaps];
  int64_t size() const { return hd * wd; }
};

int64_t FloorHalf(int64_t v) { return v >= 0 ? v / 2 : -((1 - v) / 2); }

// Built by the calling thread, the masks in its buffers 0 (forward) and 1 (the four dX planes).
DwPhases BuildPhases(const Geo2D& g) {
  DwPhases p;
  p.hd = std::max(g.oh, (g.h + 1) / 2);
  p.wd = std::max(g.ow, (g.w + 1) / 2);
  p.direct = p.hd == g.oh && p.wd == g.ow;
  const int64_t size = p.size(), vectors = (size + 15) / 16, taps = g.kh * g.kw;
  const __mmask16 tail = static_cast<__mmask16>(size % 16 == 0 ? 0xffff : (1u << (size % 16)) - 1);
  int64_t rlo[kDwMaxTaps], rhi[kDwMaxTaps], olo[kDwMaxTaps], ohi[kDwMaxTaps];
  p.fwd.vectors = vectors;
  p.fwd.taps = taps;
  p.fwd.tail = tail;
  for (int64_t t = 0; t < taps; ++t) {
    const int64_t er = t / g.kw * g.dh - g.ph, ec = t % g.kw * g.dw - g.pw;
    const int64_t da = FloorHalf(er), db = FloorHalf(ec), pr = er - 2 * da, pc = ec - 2 * db;
    p.fwd.shift[t] = (2 * pr + pc) * size + da * p.wd + db;
    // Outputs inside the output plane whose row 2 (r + da) + pr and column 2 (o + db) + pc are inside x.
    rlo[t] = -da;
    rhi[t] = std::min(g.oh, (g.h - pr + 1) / 2 - da);
    olo[t] = -db;
    ohi[t] = std::min(g.ow, (g.w - pc + 1) / 2 - db);
  }
  __mmask16* fmask = ThreadBuffer<__mmask16>(0, static_cast<size_t>(vectors * taps));
  FillMasks(p.hd, p.wd, taps, rlo, rhi, olo, ohi, fmask);
  p.fwd.mask = fmask;
  // dX at (u, v) = (2 i + qu, 2 j + qv) takes tap (a, b) from dY (r, o) where u = 2 r - ph + a dh: where
  // qu + ph - a dh is even, at r = i + (qu + ph - a dh) / 2; the flipped window's order is t' = taps - 1 - t.
  __mmask16* dmask = ThreadBuffer<__mmask16>(1, static_cast<size_t>(vectors * taps));
  for (int64_t q = 0; q < 4; ++q) {
    const int64_t qu = q / 2, qv = q % 2;
    DwFlat& f = p.dx[q];
    f.vectors = vectors;
    f.tail = tail;
    f.taps = 0;
    for (int64_t tf = 0; tf < taps; ++tf) {
      const int64_t t = taps - 1 - tf, eu = qu + g.ph - t / g.kw * g.dh, ev = qv + g.pw - t % g.kw * g.dw;
      if (eu % 2 != 0 || ev % 2 != 0) continue;
      const int64_t k = f.taps++, da = eu / 2, db = ev / 2;
      p.dx_taps[q][k] = tf;
      f.shift[k] = da * p.wd + db;
      rlo[k] = -da;
      rhi[k] = std::min((g.h - qu + 1) / 2, g.oh - da);
      olo[k] = -db;
      ohi[k] = std::min((g.w - qv + 1) / 2, g.ow - db);
    }
    FillMasks(p.hd, p.wd, f.taps, rlo, rhi, olo, ohi, dmask);
    f.mask = dmask;
    dmask += vectors * f.taps;
  }
  return p;
}

// The four phase planes of an h x w plane, each hd x wd at `size` floats apart (entries past a phase's own
// size are left as they are: every read of them is masked). Rows go 32 elements at a time, then the last 1
// to 31 with masks fixed for the plane.
__attribute__((target("avx512f"))) void SplitPhases(const float* x, const Geo2D& g, const DwPhases& p, float* x4) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const int64_t whole = g.w / 32 * 32, rest = g.w - whole;
  const __mmask16 in_lo = FirstLanes(rest), in_hi = FirstLanes(rest - 16), out_e = FirstLanes((rest + 1) / 2),
                  out_o = FirstLanes(rest / 2);
  const int64_t size = p.size();
  for (int64_t u = 0; u < g.h; ++u) {
    const float* row = x + u * g.w;
    float* e = x4 + (2 * (u % 2)) * size + (u / 2) * p.wd;
    float* o = e + size;
    for (int64_t v = 0; v < whole; v += 32) {
      const __m512 lo = _mm512_loadu_ps(row + v), hi = _mm512_loadu_ps(row + v + 16);
      _mm512_storeu_ps(e + v / 2, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_storeu_ps(o + v / 2, _mm512_permutex2var_ps(lo, odd, hi));
    }
    if (rest == 16) {  // eight to each plane, without masks (see JoinPhases)
      const __m512 lo = _mm512_loadu_ps(row + whole);
      _mm256_storeu_ps(e + whole / 2, _mm512_castps512_ps256(_mm512_permutexvar_ps(even, lo)));
      _mm256_storeu_ps(o + whole / 2, _mm512_castps512_ps256(_mm512_permutexvar_ps(odd, lo)));
    } else if (rest > 0) {  // ceil(rest / 2) to the even plane, the others to the odd one
      const __m512 lo = _mm512_maskz_loadu_ps(in_lo, row + whole), hi = _mm512_maskz_loadu_ps(in_hi, row + whole + 16);
      _mm512_mask_storeu_ps(e + whole / 2, out_e, _mm512_permutex2var_ps(lo, even, hi));
      _mm512_mask_storeu_ps(o + whole / 2, out_o, _mm512_permutex2var_ps(lo, odd, hi));
    }
  }
}

// dX's h x w plane from its four phase planes (hd x wd, `size` floats apart).
__attribute__((target("avx512f"))) void JoinPhases(const float* d4, const Geo2D& g, const DwPhases& p, float* dx) {
  const __m512i lo_idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi_idx = _mm512_add_epi32(lo_idx, _mm512_set1_epi32(8));
  const int64_t whole = g.w / 32 * 32, rest = g.w - whole;
  const __mmask16 in_e = FirstLanes((rest + 1) / 2), in_o = FirstLanes(rest / 2), out_lo = FirstLanes(rest),
                  out_hi = FirstLanes(rest - 16);
  const int64_t size = p.size();
  for (int64_t u = 0; u < g.h; ++u) {
    float* row = dx + u * g.w;
    const float* e = d4 + (2 * (u % 2)) * size + (u / 2) * p.wd;
    const float* o = e + size;
    for (int64_t v = 0; v < whole; v += 32) {
      const __m512 ev = _mm512_loadu_ps(e + v / 2), ov = _mm512_loadu_ps(o + v / 2);
      _mm512_storeu_ps(row + v, _mm512_permutex2var_ps(ev, lo_idx, ov));
      _mm512_storeu_ps(row + v + 16, _mm512_permutex2var_ps(ev, hi_idx, ov));
    }
    if (rest == 16) {  // rows of 16 (MobileNet's): whole 256-bit loads and one store, no masks
      const __m512 ev = _mm512_castps256_ps512(_mm256_loadu_ps(e + whole / 2));
      const __m512 ov = _mm512_castps256_ps512(_mm256_loadu_ps(o + whole / 2));
      _mm512_storeu_ps(row + whole, _mm512_permutex2var_ps(ev, lo_idx, ov));
    } else if (rest > 0) {
      const __m512 ev = _mm512_maskz_loadu_ps(in_e, e + whole / 2), ov = _mm512_maskz_loadu_ps(in_o, o + whole / 2);
      _mm512_mask_storeu_ps(row + whole, out_lo, _mm512_permutex2var_ps(ev, lo_idx, ov));
      if (out_hi) _mm512_mask_storeu_ps(row + whole + 16, out_hi, _mm512_permutex2var_ps(ev, hi_idx, ov));
    }
  }
}

// dY's oh x ow plane in rows of wd: itself when the output plane is hd x wd, else copied into `buf`, whose
// other entries the caller zeroed (dW multiplies them by masked, zero, lanes of x: they must be finite).
const float* PhaseRows(const float* dy, const Geo2D& g, const DwPhases& p, float* buf) {
  if (p.direct) return dy;
  for (int64_t r = 0; r < g.oh; ++r) std::copy_n(dy + r * g.ow, g.ow, buf + r * p.wd);
  return buf;
}

// One plane's dX from dY in rows of wd (`d`), through `d4` (four hd x wd planes).
void PhaseBackwardData(const float* d, const float* w, const Geo2D& g, const DwPhases& p, float* d4, float* dx) {
  const int64_t taps = g.kh * g.kw;
  float sub[kDwMaxTaps];
  for (int64_t q = 0; q < 4; ++q) {
    for (int64_t k = 0; k < p.dx[q].taps; ++k) sub[k] = w[taps - 1 - p.dx_taps[q][k]];
    DwForwardFlat(d, sub, 0.0f, d4 + q * p.size(), p.dx[q]);
  }
  JoinPhases(d4, g, p, dx);
}

// dW lanes of channels [c0, c1) (the images in order for each), and with dx non-null their dX, in one pass:
// the images in order and for each image the block's planes, as DwBackwardBlock.
__attribute__((target("avx512f"))) void DwPhaseBackwardBlock(const float* dy, const float* x, const float* w,
                                                             float* dx, float* dw, int64_t n, int64_t c, int64_t c0,
                                                             int64_t c1, const Geo2D& g, const DwPhases& p) {
  const int64_t taps = g.kh * g.kw;
  float* buf = ThreadBuffer<float>(0, static_cast<size_t>(5 * p.size()));  // the phases of x, dY's rows
  float* rows = buf + 4 * p.size();
  float* d4 = dx ? ThreadBuffer<float>(1, static_cast<size_t>(4 * p.size())) : nullptr;
  if (!p.direct) std::fill(rows, rows + p.size(), 0.0f);
  __m512* acc = reinterpret_cast<__m512*>(ThreadBuffer<DwLanes>(0, static_cast<size_t>((c1 - c0) * taps)));
  for (int64_t k = 0; k < (c1 - c0) * taps; ++k) acc[k] = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const int64_t q = i * c + ch;
      // The next plane (the next channel, or the block's first of the next image) into L1 meanwhile: the
      // MobileNet's [64,16,16] -> [64,8,8] ConvGrad 0.29-0.32 -> 0.27 ms (perf had a third of SplitPhases's
      // samples on its first load of x).
      const int64_t next = ch + 1 < c1 ? q + 1 : (i + 1 < n ? (i + 1) * c + c0 : -1);
      if (next >= 0) {
        const float* xn = x + next * g.h * g.w;
        const float* dn = dy + next * g.oh * g.ow;
        for (int64_t f = 0; f < g.h * g.w; f += 16) _mm_prefetch(reinterpret_cast<const char*>(xn + f), _MM_HINT_T0);
        for (int64_t f = 0; f < g.oh * g.ow; f += 16) _mm_prefetch(reinterpret_cast<const char*>(dn + f), _MM_HINT_T0);
      }
      const float* d = PhaseRows(dy + q * g.oh * g.ow, g, p, rows);
      if (dx) PhaseBackwardData(d, w + ch * taps, g, p, d4, dx + q * g.h * g.w);
      SplitPhases(x + q * g.h * g.w, g, p, buf);
      DwWeightGradFlat(d, buf, acc + (ch - c0) * taps, p.fwd);
    }
  }
  for (int64_t ch = c0; ch < c1; ++ch) {
    for (int64_t t = 0; t < taps; ++t) dw[ch * taps + t] = DwLaneTotal(acc[(ch - c0) * taps + t]);
  }
}

}  // namespace

// Rows of fewer than 16 elements keep the spread planes: there the per-row splits and joins cost more than
// the products they save (MobileNet's 96 channels 8x8 -> 4x4, 32 images, dX and dW: 0.306 -> 0.327 ms).
bool DwPhasesApply(const Geo2D& g) { return DwVectorApplies(g) && g.sh == 2 && g.sw == 2 && g.w >= 16; }

void DwPhaseForward(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, const Geo2D& g,
                    ThreadPool* pool) {
  const DwPhases p = BuildPhases(g);
  ParallelFor(pool, n * c, 2.0 * static_cast<double>(p.size() * g.kh * g.kw), [&](int64_t q0, int64_t q1) {
    float* x4 = ThreadBuffer<float>(0, static_cast<size_t>(4 * p.size()));
    float* full = p.direct ? nullptr : ThreadBuffer<float>(1, static_cast<size_t>(p.size()));
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t ch = q % c;
      float* yq = y + q * g.oh * g.ow;
      SplitPhases(x + q * g.h * g.w, g, p, x4);
      DwForwardFlat(x4, w + ch * g.kh * g.kw, bias ? bias[ch] : 0.0f, p.direct ? yq : full, p.fwd);
      if (!p.direct) {
        for (int64_t r = 0; r < g.oh; ++r) std::copy_n(full + r * p.wd, g.ow, yq + r * g.ow);
      }
    }
  });
}

void DwPhaseBackwardData(const float* dy, const float* w, float* dx, int64_t n, int64_t c, const Geo2D& g,
                         ThreadPool* pool) {
  const DwPhases p = BuildPhases(g);
  ParallelFor(pool, n * c, 2.0 * static_cast<double>(p.size() * g.kh * g.kw), [&](int64_t q0, int64_t q1) {
    float* buf = ThreadBuffer<float>(0, static_cast<size_t>(5 * p.size()));
    float* rows = buf + 4 * p.size();  // read only where dY has entries: no need to clear it
    for (int64_t q = q0; q < q1; ++q) {
      const float* d = PhaseRows(dy + q * g.oh * g.ow, g, p, rows);
      PhaseBackwardData(d, w + (q % c) * g.kh * g.kw, g, p, buf, dx + q * g.h * g.w);
    }
  });
}

void DwPhaseBackward(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                     const Geo2D& g, ThreadPool* pool) {
  const DwPhases p = BuildPhases(g);
  ParallelFor(pool, c, (dx ? 4.0 : 2.0) * static_cast<double>(n * p.size() * g.kh * g.kw), [&](int64_t c0, int64_t c1) {
    DwPhaseBackwardBlock(dy, x, w, dx, dw, n, c, c0, c1, g, p);
  });
}

}  // namespace cpu
}  // namespace ontrain
