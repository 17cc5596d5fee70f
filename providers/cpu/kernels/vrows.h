// Row loops of the normalization, pooling and select (Where) kernels over float data, compiled per ISA like vmath.h
// (AVX-512, AVX2, baseline; chosen at load time, no FMA contraction), so each gives the same bits on every
// CPU (max pooling: AVX-512 intrinsics or a scalar loop, exact either way). The sums are LaneSum's: double
// partial sums over 32 interleaved lanes, added pairwise at the end, which is also the order the generic
// kernels use for float64 data.
#pragma once

#include <cstdint>
#include <vector>

namespace ontrain {
namespace cpu {

// The sum of f(0) .. f(n - 1) in double, in interleaved partial sums added at the end: a fixed order (the
// same on every run and thread count, chosen by n alone) that the compiler can vectorize, unlike one running
// sum. Rows of kLongRow or more take kSumLanes = 32 lanes, four independent AVX-512 accumulators, added
// pairwise (batch normalization's sums: 0.32 ns per element with eight lanes, one accumulator bound by the
// add's latency; 0.16 with 32); shorter rows eight lanes added in order, whose final sum costs less (a
// MobileNet's 4x4 and 8x8 planes ran its batch normalization 60% slower on 32 lanes). Always inlined: the
// per-ISA loops call it, and GCC would otherwise compile one baseline (SSE2) copy for them all.
constexpr int kSumLanes = 32;
constexpr int64_t kLongRow = 256;

// The total of L lane sums: in lane order for eight lanes, as a pairwise tree for kSumLanes (lane j + w
// folded into lane j, w = 16, 8, ..., 1).
template <int L>
__attribute__((always_inline)) inline double LaneTotal(double* part) {
  if constexpr (L == kSumLanes) {
    for (int w = L / 2; w >= 1; w /= 2) {
      for (int j = 0; j < w; ++j) part[j] += part[j + w];
    }
    return part[0];
  } else {
    double s = 0;
    for (int j = 0; j < L; ++j) s += part[j];
    return s;
  }
}

// Adds f(i) for i in [0, n) into L interleaved lanes (f returns one value, or adds into several lanes'
// arrays itself: see SumAndDotDevLoop).
template <int L, typename F>
__attribute__((always_inline)) inline void ForLanes(int64_t n, F f) {
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    for (int j = 0; j < L; ++j) f(i + j, j);
  }
  for (; i < n; ++i) f(i, static_cast<int>(i & (L - 1)));
}

template <int L, typename F>
__attribute__((always_inline)) inline double LaneSumOf(int64_t n, F f) {
  double part[L] = {};
  ForLanes<L>(n, [&](int64_t i, int j) { part[j] += f(i); });
  return LaneTotal<L>(part);
}

template <typename F>
__attribute__((always_inline)) inline double LaneSum(int64_t n, F f) {
  return n >= kLongRow ? LaneSumOf<kSumLanes>(n, f) : LaneSumOf<8>(n, f);
}

// Batch normalization's kernels take channels in blocks and read a block image by image (contiguous runs of
// its channels); a block's `arrays` tensors of [n, block, inner] floats stay within about half an L2.
constexpr int64_t kNormMaxBlock = 256;
inline int64_t NormChannelBlock(int64_t n, int64_t inner, int64_t arrays) {
  const int64_t per_channel = n * inner * arrays * static_cast<int64_t>(sizeof(float));
  const int64_t blk = per_channel > 0 ? (int64_t{512} << 10) / per_channel : kNormMaxBlock;
  return blk < 1 ? 1 : (blk > kNormMaxBlock ? kNormMaxBlock : blk);
}

// sum x[i]: VRowMoments's sum about 0
double VRowSum(const float* x, int64_t n);
// The moments of a row about `shift` in one pass: *sum = sum d and *sq = sum d^2, d = x[i] - shift in
// double (each square fused into its lane's add). With the shift near the mean (a value of the data),
// sq / n - (sum / n)^2 is the variance to double precision without a second pass for the mean.
void VRowMoments(const float* x, int64_t n, double shift, double* sum, double* sq);
// From `count` values' moments about `shift` (VRowMoments, VChannelMoments): *mean, and *m2 = the sum of
// squared deviations from it, sq - sum (sum / count), at least 0 (rounding can go below; NaN stays).
inline void MeanAndM2(double shift, double sum, double sq, double count, double* mean, double* m2) {
  const double d = sum / count, v = sq - sum * d;
  *mean = shift + d;
  *m2 = v < 0.0 ? 0.0 : v;
}
// *sum = sum g[i] and *dot = sum g[i] * (x[i] - mean), each product fused into its lane's add, in one pass.
void VRowSumAndDotDev(const float* g, const float* x, int64_t n, double mean, double* sum, double* dot);
// y[i] = x[i] * a + b (float arithmetic)
void VRowAffine(const float* x, float* y, int64_t n, float a, float b);
// The activation a BatchNormActivation kernel applies to its affine rows, with the bits of the separate
// kernels: Relu y > 0 ? y : 0; Clip y < lo ? lo : y, then > hi ? hi (NaN passes).
enum class RowAct { kRelu, kClip };
// y[i] = act(x[i] * a + b): VRowAffine's values, then the activation.
void VRowAffineAct(const float* x, float* y, int64_t n, float a, float b, RowAct act, float lo, float hi);
// The activation's gradient applied to g where its input was y = x[i] * a + b (VRowAffine's values):
// Relu y > 0 ? g : 0 (ReluGrad), Clip lo <= y <= hi ? g : fill (ClipGrad), into out; and in the same pass
// VRowSumAndDotDev(out, x, mean)'s two sums (the same results).
void VRowAffineActGradSums(const float* x, const float* g, float* out, int64_t n, float a, float b, RowAct act,
                           float lo, float hi, float fill, double mean, double* sum, double* dot);
// Layer normalization of one row (float arithmetic): y[i] = (x[i] - mean) * inv * scale[i] (+ bias[i] when
// bias is not null).
void VRowLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t n, float mean, float inv);
// Its gradient's first pass over one row: with xh = (x[i] - mean) * inv and b = g[i] * scale[i] * inv (float),
// ds[i] += g[i] * xh and db[i] += g[i]; *mb = sum b and *mbx = sum b * xh, in double (LaneSum's order).
void VRowLayerNormGradSums(const float* g, const float* x, const float* scale, int64_t n, float mean, float inv,
                           float* ds, float* db, double* mb, double* mbx);
// and its second: dx[i] = b - mb - xh * mbx (float).
void VRowLayerNormGradDx(const float* g, const float* x, const float* scale, float* dx, int64_t n, float mean, float inv,
                         float mb, float mbx);
// Batch normalization's per-channel sums over a block of nb channels of n images: channel j's row of image
// b is the `inner` floats at x + b * ld + j * inner. Each channel's sums have a fixed order whatever the
// block and thread count: rows of kLongRow or more as the VRow sums of each row (LaneSum's 32 lanes), the
// rows' totals added in image order; shorter rows into eight double lanes that run over all the channel's
// rows (element i of each row into lane i % 8, images in order), added in lane order once at the end (a
// total per row had cost more than the row's own sums on a MobileNet's 4x4 and 8x8 planes).
struct ChannelRows {
  int64_t n, ld, nb, inner;
};
// Channel j's moments about shift[j] in one pass (VRowMoments's terms): sum[j] of d and sq[j] of d^2,
// d = x - shift[j].
void VChannelMoments(const float* x, const ChannelRows& r, const double* shift, double* sum, double* sq);
// The gradient's two sums per channel: sum[j] of g and dot[j] = inv[j] * (the sum of g (x - mean[j]), in
// VRowSumAndDotDev's terms), g (at x's offsets in g) read as it is (act == nullptr), or made from it by the
// activation's gradient as VRowAffineActGradSums makes it (a[j], b[j] the channel's affine; written to
// out + b * out_ld + j * inner).
struct ChannelAct {
  RowAct act;
  float lo, hi, fill;
  const float *a, *b;
  float* out;
  int64_t out_ld;
};
void VChannelGradSums(const float* g, const float* x, const ChannelRows& r, const ChannelAct* act, const double* mean,
                      const double* inv, double* sum, double* dot);
// For tests: false makes the normalization sums above (VRowSumAndDotDev, VRowAffineActGradSums, the
// VChannel functions and VRowLayerNormGradSums) run their compiled per-ISA loops instead of their AVX-512
// intrinsics, which must give the same bits; true (the default) lets them choose by the CPU again.
void VRowsUseIntrinsics(bool use);
// Batch normalization's input gradient coef * (m g - db - (x - mean) inv ds) as
// dx[i] = float(a * g[i] + (b * (x[i] - mean) + c)) in double, each step one fused multiply-add, with
// a = coef m, b = -coef inv ds, c = -coef db.
void VRowBatchNormGrad(const float* g, const float* x, float* dx, int64_t n, double mean, double a, double b, double c);

// o[i] = c[i] != 0 ? x[x_whole ? i : 0] : y[y_whole ? i : 0] for 4-byte elements, without branches.
void VRowSelect32(const uint8_t* c, const uint32_t* x, bool x_whole, const uint32_t* y, bool y_whole, uint32_t* o,
                  int64_t n);

// Max pooling of n windows along one output row, all inside the input (dilation 1): window j covers rows
// 0 .. kh-1 (row pitch wd) and columns j*sw .. j*sw+kw-1 from x. y[j] is its maximum and, when ind is not
// null, ind[j] = ind_base + the offset from x of its first maximum in visiting order (rows, then columns),
// starting from the lowest float, so NaNs are passed over exactly as the generic pooling loop passes over
// them. Offsets from x must fit int32. `readable`: how many floats from x may be read (the rest of the
// tensor), so that whole vectors can be loaded where they stay inside it.
void VRowMaxPool(const float* x, int64_t wd, int64_t kh, int64_t kw, int64_t sw, int64_t n, int64_t readable,
                 float* y, int64_t* ind, int64_t ind_base);

// Max pooling of whole planes p0 .. p1 whose windows all lie inside the input (no padding reached,
// dilation 1), for planes too narrow for VRowMaxPool's rows to fill a vector: output o of plane p is the
// window whose top-left is x[p * isize + corner[o]], kh rows (pitch wd) of kw columns; y[p * osize + o] is
// its maximum and ind[p * osize + o] (when ind is not null) p * isize + the offset of its first maximum,
// by VRowMaxPool's rule. 16 outputs per AVX-512 vector through masked gathers, across row ends. Only where
// VPlaneMaxPoolAvailable() (the CPU has AVX-512F).
bool VPlaneMaxPoolAvailable();
void VPlaneMaxPool(const float* x, int64_t isize, const int32_t* corner, int64_t osize, int64_t kh, int64_t kw,
                   int64_t wd, int64_t p0, int64_t p1, float* y, int64_t* ind);

// 2x2 max pooling at stride 2 of whole planes p0 .. p1 (no padding, dilation 1): plane p of x is h rows of
// wd, of y oh rows of ow (2 oh <= h, 2 ow <= wd); y and ind (when not null; ind_base + p * h * wd + the
// offset of the first maximum) by VRowMaxPool's rule. 16 outputs per AVX-512 vector, the even and odd columns of both
// window rows split by permutes; rows are read only up to column 2 ow - 1. Only where
// VPlaneMaxPoolAvailable().
void VPlanesMaxPool2x2(const float* x, int64_t h, int64_t wd, int64_t oh, int64_t ow, int64_t p0, int64_t p1, float* y,
                       int64_t* ind, int64_t ind_base = 0);

// The gradient of VPlanesMaxPool2x2, where the ReLU before the pooling may be fused in (MaxPoolReluGrad):
// plane p of x (h rows of wd) from planes of g, z and ind (oh rows of ow; ind as VPlanesMaxPool2x2 wrote
// it, from ind_base). Every element of a window is written: the one ind names gets +0 + g (or +0 + the
// masked g, g where z > 0 and +0 elsewhere, when z is not null), the rest +0, as are the rows and columns
// no window covers. That is the bits of zeroing the plane and adding each g at its index, since windows do
// not overlap. Returns false, with the planes partly written, when an index lies outside its own window,
// and at once without AVX-512F or for rows of fewer than 8 windows (ow < 8), where it is slower: the
// caller then scatters.
bool VPlanesMaxUnpool2x2(const float* g, const float* z, const int64_t* ind, int64_t ind_base, int64_t h, int64_t wd,
                         int64_t oh, int64_t ow, int64_t p0, int64_t p1, float* x);

// Window codes: the compact Indices of a FusedConvMaxPool that only fused gradients read
// (engine/kernel_fusion.h), one byte per 2x2 window instead of an int64 offset: the position k = 2 a + b
// (window row a, column b) of its first maximum, plus kWindowCodePositive where that maximum is positive
// (the ReLU mask MaxPoolReluGrad tests on the pooled value).
constexpr int kWindowCodePositive = 4;

// VPlanesMaxPool2x2 writing window codes instead of indices (the same y). Only where VPlaneMaxPoolAvailable().
void VPlanesMaxPool2x2Codes(const float* x, int64_t h, int64_t wd, int64_t oh, int64_t ow, int64_t p0, int64_t p1,
                            float* y, uint8_t* codes);

// The lane tables of VPlanesMaxUnpool2x2Codes's flat form, for planes of h rows of wd pooled to oh rows of
// ow: for each 16-float vector of a plane (read as one flat row), the first window it takes values from and,
// per lane, which of the 32 windows from there and the code that sends the window's value to that element
// (its position in the window plus kWindowCodePositive; -1 where no window covers it). Built once per shape
// (a kernel's Prepare); usable only for pooled rows of fewer than 8 windows (from 8 on the pooled-rows
// kernel is as fast), where no vector needs windows 32 or more apart, on CPUs with AVX-512 (F, VL, BW).
class Unpool2x2Lanes {
 public:
  Unpool2x2Lanes() = default;
  Unpool2x2Lanes(int64_t h, int64_t wd, int64_t oh, int64_t ow);
  bool usable() const { return usable_; }
  bool fits(int64_t h, int64_t wd, int64_t oh, int64_t ow) const {
    return usable_ && h == h_ && wd == wd_ && oh == oh_ && ow == ow_;
  }
  // One vector's lanes: the window of each (from the vector's first) and the code that sends it there (-1:
  // none). Aligned, so that each is one cache line.
  struct alignas(64) Lanes {
    int32_t window[16];
    int32_t want[16];
  };
  int64_t vectors() const { return static_cast<int64_t>(base_.size()); }
  const int32_t* base() const { return base_.data(); }
  const Lanes* lanes() const { return lanes_.data(); }

 private:
  bool usable_ = false;
  int64_t h_ = 0, wd_ = 0, oh_ = 0, ow_ = 0;
  std::vector<int32_t> base_;  // per vector: its first window
  std::vector<Lanes> lanes_;
};

// VPlanesMaxUnpool2x2 with z from window codes: the element the code names gets +0 + g where its positive
// bit is set and +0 where not, the rest of the plane +0 (the bits of zeroing and scattering the masked g).
// Every row length, short rows too (a scalar loop on random codes mispredicts). With `lanes` that fit the
// shape, whole planes as flat rows of vectors, each element selected by the tables (no masked stores but the
// range's last; the CNN's 11x11 planes from 5x5 2x faster than by pooled rows); else by pooled rows of up to
// 16 windows. Returns false, writing nothing, without AVX-512F: the caller then scatters
// (UnpoolWindowCodes, pool.h).
bool VPlanesMaxUnpool2x2Codes(const float* g, const uint8_t* codes, int64_t h, int64_t wd, int64_t oh, int64_t ow,
                              int64_t p0, int64_t p1, float* x, const Unpool2x2Lanes* lanes = nullptr);

// Stride-2 rows of patch matrices (1x1 and 3x3 convolutions at stride 2), `rows` rows of n: row t of d
// (d_ld apart) = the even elements of row t of x (x_ld apart), d[j] = x[2 j] (VRowsGather2); and the even
// elements of row t of d += row t of s, d[2 j] += s[j] (VRowsScatterAdd2: each element one addition, so the
// bits are the scalar loop's; the elements between are not changed). Rows touch x and d only up to element
// 2 (n - 1).
void VRowsGather2(const float* x, int64_t x_ld, float* d, int64_t d_ld, int64_t rows, int64_t n);
void VRowsScatterAdd2(const float* s, int64_t s_ld, float* d, int64_t d_ld, int64_t rows, int64_t n);

}  // namespace cpu
}  // namespace ontrain
