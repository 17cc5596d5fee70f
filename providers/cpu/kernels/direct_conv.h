// Direct 2-D convolution of float32 images (stride 1; stride 2 on the row tiles), on AVX-512, summing over
// input channels and patch positions without a patch matrix or repeated passes over the output, in one of
// three register tilings:
// - 8 output channels by 48 positions (the last tile of a plane 16 or 32) of the padded-rows layout
//   (conv_geometry.h): vectors over positions, broadcast weights. Any window; the padded rows' gaps (kw - 1
//   columns per row) are computed and dropped, a quarter of the work on 8x8 planes.
// - Row tiles, for 3x3 windows (dilation 1) of at least 32 output channels on rows of at most 16: vectors
//   over 32 output channels by the positions of one output row (up to 14, or 8 at a time on wider rows),
//   broadcast inputs, so no gap is computed and the tile is transposed straight into the output (no
//   gather pass). Each output is the same sum in the same order (input channels, then window positions,
//   from zero; the bias after), so both tilings give the same bits. Row tiles also take stride 2 (the
//   downsampling layers), which the padded-rows tiles cannot. Measured on Zen 5, one core, against
//   the first: 64 channels at 8x8 155 -> 199 GFLOP/s, 32 at 16x16 171 -> 188, the benchmark CNN's 32 -> 64
//   at 13x13 153 -> 175; 16 channels at 32x32 168 -> 163 (hence the bounds).
// - Vector rows, at stride 1 where the row tiles do not apply: the first tiling's 8 output channels by one
//   output row (up to 3 vectors, the last masked; rows of up to 16 three rows at a time), stored straight
//   into the output: no gaps computed, no gather pass. Used unless whole vectors per row compute a fifth
//   more positions than the first tiling (rows of 8). Measured on Zen 5, one core, warm, against the
//   first: the benchmark CNN's one-channel stem (rows of 26) 0.40 -> 0.20 ms for 64 images, the ResNet's
//   3-channel stem 0.245 -> 0.158 ms and its 16-channel 32x32 layers 0.93 -> 0.83 ms for 32 (forward and dX).
//   Its sums are the first tiling's, in the same order: the same bits.
// Conv's forward pass runs on it where the CPU has AVX-512F (checked at run time); elsewhere Conv keeps its
// GEMM paths. ConvGrad's input gradient runs on it too where the tiling computes few positions it drops
// (chosen in grad_conv.cc, run in grad_conv_dx.cc).
// (1x1 windows over the batch: pointwise.h.)
// DirectWeightGrad3x3 is ConvGrad's weight gradient of 3x3 windows: vectors over output channels instead of
// positions (a tile of 3 output channels by 9 taps with vectors over positions was measured slower on every
// ResNet layer, 8x8: 2.9 -> 4.0 ms, for its lane sums and unaligned loads).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "providers/cpu/kernels/conv_geometry.h"

namespace ontrain {
namespace cpu {

// yp[j, 0..16V-1] (rows ld apart) = sum over input channels c and patch positions k of w[c, k, j] times
// xp[c * plane + shift[k] + 0..16V-1], for the 8 output channels j of one block: 8V accumulators, V input
// vectors and a broadcast weight in registers; per (c, k) V loads and 8 broadcasts feed 8V FMAs. Full tiles
// take V = 3 (also Winograd's products, winograd.cc: one position, shift 0); the last tile of a row of tiles as few vectors as it needs (8x8 planes: 80 positions, not 96).
template <int V>
__attribute__((target("avx512f"))) void Tile8(const float* xp, int64_t plane, const int64_t* shift, int64_t kk,
                                              int64_t cin, const float* w, float* yp, int64_t ld) {
  __m512 acc[8][V];
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < V; ++v) acc[j][v] = _mm512_setzero_ps();
  }
  for (int64_t c = 0; c < cin; ++c) {
    const float* xc = xp + c * plane;
    for (int64_t k = 0; k < kk; ++k, w += 8) {
      const float* s = xc + shift[k];
      __m512 x[V];
      for (int v = 0; v < V; ++v) x[v] = _mm512_loadu_ps(s + 16 * v);
      for (int j = 0; j < 8; ++j) {
        const __m512 b = _mm512_set1_ps(w[j]);
        for (int v = 0; v < V; ++v) acc[j][v] = _mm512_fmadd_ps(b, x[v], acc[j][v]);
      }
    }
  }
  for (int j = 0; j < 8; ++j) {
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(yp + j * ld + 16 * v, acc[j][v]);
  }
}

class DirectConv2D {
 public:
  static constexpr int64_t kChannelBlock = 8;  // output channels per register tile
  static constexpr int64_t kPositions = 48;    // padded-rows positions per register tile (3 vectors)
  static constexpr int64_t kVector = 16;       // the last tile of a row: whole vectors only

  // Whether this CPU runs the kernel (AVX-512F).
  static bool Available();

  DirectConv2D() = default;
  // One image [cin, rows.h, rows.w] -> [cout, rows.oh, rows.ow] with the window of `rows`. Stride 2 (both
  // dims; `rows` then built from the strided output, its n unused) only where row_tiles().
  DirectConv2D(const PaddedRows& rows, int64_t cin, int64_t cout, int64_t stride = 1);

  static constexpr int64_t kRowBlock = 32;      // row tiles: output channels per tile
  static constexpr int64_t kRowPositions = 14;  // row tiles: most positions of one tile (28 accumulators)

  // Whether Run uses the row tiles.
  bool row_tiles() const { return row_tiles_; }
  // Whether Run uses the vector-row tiles.
  bool vector_rows() const { return vec_rows_; }
  // Floats of the packed weights, and of one thread's work memory (padded image and product).
  int64_t packed_size() const { return (row_tiles_ ? row_cout_ : cout_round_) * cin_ * kk_; }
  int64_t work_size() const {
    return cin_ * rows_.plane() + kSlack + (row_tiles_ || vec_rows_ ? 0 : cout_round_ * n_round_);
  }

  // Packs the weights: weight(o, i, k) is the weight from input channel i to output channel o at patch
  // position k (row-major over the window, k = a * kw + b).
  template <typename F>
  void PackWeights(F weight, float* packed) const {
    if (row_tiles_) {  // [output block of 32][input channel][k][32]
      for (int64_t ob = 0; ob < row_cout_; ob += kRowBlock) {
        for (int64_t i = 0; i < cin_; ++i) {
          for (int64_t k = 0; k < kk_; ++k) {
            float* d = packed + ((ob * cin_ + i * kRowBlock) * kk_) + k * kRowBlock;
            for (int64_t j = 0; j < kRowBlock; ++j) d[j] = ob + j < cout_ ? weight(ob + j, i, k) : 0.0f;
          }
        }
      }
      return;
    }
    for (int64_t ob = 0; ob < cout_round_; ob += kChannelBlock) {
      for (int64_t i = 0; i < cin_; ++i) {
        for (int64_t k = 0; k < kk_; ++k) {
          float* d = packed + ((ob * cin_ + i * kChannelBlock) * kk_) + k * kChannelBlock;
          for (int64_t j = 0; j < kChannelBlock; ++j) d[j] = ob + j < cout_ ? weight(ob + j, i, k) : 0.0f;
        }
      }
    }
  }

  // y [cout, oh, ow] = the convolution of x [cin, h, w] (+ bias[o] when given). `work` holds work_size().
  void Run(const float* x, const float* packed, const float* bias, float* y, float* work) const;

 private:
  static constexpr int64_t kSlack = 64;  // floats after the padded image: the last tile reads past it

  // The row tiles over images whose padded row r, column c is x[(r - top) * ld + c - left] (planes `plane`
  // apart): the padded copy (top = left = 0) or, where unpadded_, the image itself.
  void RunRows(const float* x, int64_t plane, int64_t ld, int64_t top, int64_t left, const float* packed,
               const float* bias, float* y) const;

  // The vector-row tiles over padded images (planes rows_.plane() apart, rows rows_.wp apart).
  void RunVectorRows(const float* xp, const float* packed, const float* bias, float* y) const;

  PaddedRows rows_;
  int64_t stride_ = 1, cin_ = 0, cout_ = 0, cout_round_ = 0, kk_ = 0, n_round_ = 0;
  bool row_tiles_ = false;
  bool vec_rows_ = false;  // vector-row tiles (stride 1, where not row_tiles_)
  bool unpadded_ = false;  // row tiles: no padding column is ever read (pads left and right at most 2)
  int64_t row_cout_ = 0;  // row tiles: cout rounded up to kRowBlock
  int64_t shifts_[64] = {};  // patch position offsets in a padded plane (windows of at most 64 positions)

 public:
  // Windows this kernel takes: at most 64 patch positions.
  static bool Fits(const PaddedRows& rows) { return rows.kh * rows.kw <= 64; }
};

// The weight gradient of a 3x3 convolution with strides 1 or 2 and dilation 1, float32 on AVX-512, without
// a patch matrix: dW[o, c, a, b] = sum over images and output positions (i, j) of dY[o, i, j] *
// xp[c, s i + a, s j + b] (xp: the image copied into zero-bordered planes, as PaddedRows::Pad). dY is first
// transposed per image to [oh * ow, cout_padded()] (output channels last, zero columns up to a multiple of
// 16), so that a register tile holds 9 taps of one input channel by 32 output channels (18 accumulators;
// the last 16 channels of an odd count: 3 input channels by 16), each step one or two vector loads of dY,
// 9 broadcasts of x and 18 or 27 FMAs, with no lane sums at the end. Every sum runs over images, rows and
// columns in that order from zero, whatever the tiles. Measured on Zen 5, one core, 32 images, stride 1:
// 16 channels at 32x32 200, 32 at 16x16 220, 64 at 8x8 200 GFLOP/s, against 110-130 for the patch-matrix
// GEMM path with its copies.
class DirectWeightGrad3x3 {
 public:
  // Whether this CPU and window take it: AVX-512F, two spatial dims, a 3x3 window, dilation 1, strides both
  // 1 or both 2, pads >= 0.
  static bool Applies(const Shape& in, const WindowAttrs& a);

  DirectWeightGrad3x3() = default;
  // Images [cin, in...] -> outputs [cout, out...] under the attributes `a` (pads resolved).
  DirectWeightGrad3x3(const Shape& in, const Shape& out, const WindowAttrs& a, int64_t cin, int64_t cout);

  int64_t cout_padded() const { return cout_pad_; }
  // Floats of one padded image, and of one image's transposed dY.
  int64_t image_size() const { return cin_ * rows_.plane(); }
  int64_t transposed_size() const { return rows_.oh * rows_.ow * cout_pad_; }
  // x [cin, h, w] -> xp [cin, hp, wp] with zero borders.
  void PadImage(const float* x, float* xp) const { rows_.Pad(x, cin_, xp); }
  // Without pads the padded image is the image: Run may read the images themselves.
  bool unpadded() const { return rows_.hp == rows_.h && rows_.wp == rows_.w; }
  // dy [cout, oh * ow] -> dyt [oh * ow, cout_padded()], zeros after cout.
  void TransposeOutputGrad(const float* dy, float* dyt) const;
  // out[o] (o < cout) = column o of one image's dyt summed in double: the even positions and the odd ones,
  // each in order from zero, then the two added. ConvGrad's dB per image wherever this kernel runs, so
  // that every way of making dyt (transposed, or unpooled straight into it) sums alike.
  void ChannelSums(const float* dyt, double* out) const;
  // Floats of UnpoolOutputGrad's work memory for a pooled plane of ph x pw.
  int64_t unpool_work_size(int64_t ph, int64_t pw) const { return 2 * ph * pw * cout_pad_; }
  // MaxPoolReluGrad's dX for one image straight into dyt [oh * ow, cout_padded()], from dZ g [cout, ph * pw]
  // and its window codes (vrows.h; 2x2 windows at stride 2): the values the unpooling writes (+0 + g at the
  // element the code names where its positive bit is set, +0 elsewhere and in the padded channels),
  // without the plane-major dY, its transpose or its reads. `work` holds unpool_work_size(ph, pw) floats.
  void UnpoolOutputGrad(const float* g, const uint8_t* codes, int64_t ph, int64_t pw, float* work, float* dyt) const;
  // UnpoolOutputGrad's first step: dZ g [cout, ph * pw] and its codes transposed into `work`
  // (unpool_work_size(ph, pw) floats: [ph * pw, cout_padded()] floats, then as many int32 codes & 7).
  void TransposePooled(const float* g, const uint8_t* codes, int64_t ph, int64_t pw, float* work) const;
  // ChannelSums of the dyt that UnpoolOutputGrad would make from TransposePooled's `work`, without it.
  void PooledChannelSums(const float* work, int64_t ph, int64_t pw, double* out) const;
  // out [cin * 9, cout_padded()] (row c * 9 + a * 3 + b) = the sum over `images` images of the products of
  // xp (padded images, image_size() apart) and dyt (transposed_size() apart).
  void Run(const float* xp, const float* dyt, int64_t images, float* out) const;
  // Whether RunInPlace applies: output channels in whole tiles of 32 (no tile of 3 input channels by 16).
  bool in_place() const { return cout_pad_ % 32 == 0; }
  // Whether RunPooledInPlace applies: in_place(), stride 1, no pads.
  bool pooled_in_place() const { return in_place() && stride_ == 1 && unpadded(); }
  // Floats of padded copies a chunk of `images` images needs (none where in_place()).
  int64_t copy_size(int64_t images) const { return in_place() ? 0 : images * image_size(); }
  // Run over the images where they lie: x is channel 0 of the first image (cin planes [h, w]), images
  // image_x apart; no padded copy, the products with the padding skipped. Only where in_place().
  void RunInPlace(const float* x, int64_t image_x, const float* dyt, int64_t images, float* out) const;
  // RunInPlace of the dyts that UnpoolOutputGrad would make from the images' TransposePooled works (each at
  // the start of its image's transposed_size() floats, which hold it), made in registers instead: the
  // same products in the same order, so the same bits, without writing or reading the unpooled dY. Only
  // where pooled_in_place().
  void RunPooledInPlace(const float* x, int64_t image_x, const float* work, int64_t ph, int64_t pw, int64_t images,
                        float* out) const;

 private:
  template <int S> void RunStride(const float* xp, const float* dyt, int64_t images, float* out) const;

  PaddedRows rows_;  // the padded planes' geometry (hp, wp, oh, ow); its n assumes stride 1 and is unused
  int64_t stride_ = 1, cin_ = 0, cout_ = 0, cout_pad_ = 0;
};

}  // namespace cpu
}  // namespace ontrain
