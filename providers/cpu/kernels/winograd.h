// 3x3 convolutions at stride 1 by Winograd's minimal filtering F(2x2, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2016), float32 on AVX-512. Each 2x2 block of outputs
// ("tile") reads a 4x4 block of the padded input; in the transformed domain the 9 products per output and
// input channel become 4 (16 per tile instead of 36), and the sum over input channels is 16 matrix
// products, one per transformed position xi: M_xi [cout, tiles] = U_xi [cout, cin] V_xi [cin, tiles].
// 1. U = G g G^T per (output, input) channel pair, from the weights in double, rounded once to float.
// 2. V = B^T d B per tile and input channel: adds only, vectors over the tiles of a tile row.
// 3. The 16 products over the tiles of a block of images (register tiles of 8 output channels by up to 48
//    tiles, the sum over input channels in order from zero).
// 4. Y = A^T M A per tile (adds only), plus the bias, stored straight into the output rows.
// The sums differ from the direct kernel's in their rounding (the transforms add and subtract inputs and
// weights before the products: within 1.5e-7 of the terms' magnitude, winograd_test.cc), and a NaN reaches
// exactly the outputs whose windows read it; an infinite input may give NaN where the direct sums give an
// infinity (inf - inf in the output transform). Each output is the same sum whatever the images beside it,
// so results do not depend on blocks or threads. Measured on Zen 4, one core, 32 images, against the
// direct kernel: 16 channels at 32x32 1.55 -> 1.11 ms, 32 at 16x16 1.29 -> 0.99, 64 at 8x8 1.17 -> 0.94,
// the benchmark CNN's 32 -> 64 at 13x13 1.33 -> 1.08 (its 11x11 outputs take 6x6 tiles, a fifth more);
// ConvGrad's dX of the same layers 1.60 -> 1.15, 1.31 -> 0.99, 1.17 -> 0.97 and 1.33 -> 1.22 ms.
#pragma once

#include <cstdint>

#include "providers/cpu/kernels/conv_geometry.h"

namespace ontrain {
namespace cpu {

class Winograd3x3 {
 public:
  static constexpr int64_t kBlock = 8;  // output channels per register tile

  // Whether this CPU runs the kernel (AVX-512 F and VL: CpuHasAvx512).
  static bool Available();
  // Whether it takes the layout: a 3x3 window at dilation 1 (PaddedRows: stride 1), at least one output,
  // pads of at most 1, and enough channels that the products, not the transforms, dominate (cin >= 8,
  // cout >= 8).
  static bool Applies(const PaddedRows& rows, int64_t cin, int64_t cout);

  Winograd3x3() = default;
  Winograd3x3(const PaddedRows& rows, int64_t cin, int64_t cout);
  // ConvGrad's dX of the convolution `rows`, cin -> cout, by the adjoint of each step (winograd_grad.cc):
  // dY's 2x2 tiles go to A f A^T, the products run from cout to cin with the same transformed weights (pack
  // them with PackWeights(w, 9, cin * 9, false, ...)), and B W B^T of each tile is added into dX's 4x4
  // block; Run then takes dY [images, cout, oh, ow] and writes dX [images, cin, h, w] (no bias).
  static Winograd3x3 InputGrad(const PaddedRows& rows, int64_t cin, int64_t cout);

  // Images per block: Run transforms that many together so the products see enough tiles.
  int64_t block() const { return images_; }
  // Floats of the transformed weights, and of one thread's work memory.
  int64_t packed_size() const { return 16 * cout_pad_ * cin_; }
  int64_t work_size() const { return images_ * cin_ * plane_ + kSlack + 16 * (vplane_ + mplane_) + kSlack; }

  // Transforms the weights: the weight from input channel i to output channel o at window position
  // k = a * 3 + b is w[o * so + i * si + k], or w[o * so + i * si + 8 - k] where `flipped` (a transposed
  // convolution's). Layout [xi][cout_pad / 8][cin][8].
  void PackWeights(const float* w, int64_t so, int64_t si, bool flipped, float* packed) const;

  // Relu on each output as it is stored (FusedConv), with Relu's bits.
  void set_relu(bool relu) { relu_ = relu; }
  // Whether the outputs can be max-pooled as they are made: 2x2 windows at stride 2 are the tiles when the
  // output's rows and columns are even (the forward kernel only).
  bool can_pool() const { return !input_grad_ && rows_.oh % 2 == 0 && rows_.ow % 2 == 0; }
  // Where can_pool(): Run stores each tile's 2x2 max pooling (FusedConvMaxPool's, after the Relu of
  // set_relu) instead of its outputs, and the window codes of vrows.h when given somewhere to put them.
  void set_pool(bool pool) { pool_ = pool && can_pool(); }

  // y [images, cout, oh, ow] (+ bias[o] when given) = the convolution of x [images, cin, h, w] with the
  // packed weights; with set_pool, y [images, cout, oh / 2, ow / 2] its 2x2 max pooling and codes (when not
  // null) the windows' codes, of y's shape. `work` holds work_size() floats.
  void Run(const float* x, int64_t images, const float* packed, const float* bias, float* y, float* work,
           uint8_t* codes = nullptr) const;

 private:
  static constexpr int64_t kSlack = 64;  // floats after a buffer: vector loads may read past its end

  // The padded copies of `images` images and their transforms V [16][cin][ld_] (zeros past the tiles).
  void TransformInput(const float* x, int64_t images, float* __restrict__ xp, float* __restrict__ v) const;
  // Outputs kb * 8 .. kb * 8 + 7 of `images` images from their products m [16][8][ld_].
  void TransformOutput(const float* m, int64_t kb, int64_t images, const float* bias, float* __restrict__ y) const;
  // The same outputs pooled (set_pool): z [images, cout, th_ * tw_] and, when not null, their codes.
  void TransformOutputPooled(const float* m, int64_t kb, int64_t images, const float* bias, float* __restrict__ z,
                             uint8_t* __restrict__ codes) const;
  // InputGrad: dY's tiles A f A^T into V [16][cin][ld_], and dX's channels kb * 8 .. kb * 8 + 7 from the
  // products m, each image's plane summed in `plane` (the padded input's size) and cropped into dx.
  void TransformOutputGrad(const float* dy, int64_t images, float* v) const;
  void ScatterInputGrad(const float* m, int64_t kb, int64_t images, float* plane, float* dx) const;

  PaddedRows rows_;  // the forward convolution's layout
  bool input_grad_ = false;  // InputGrad: cin_ are dY's channels and cout_ dX's
  bool relu_ = false;
  bool pool_ = false;  // set_pool
  int64_t cin_ = 0, cout_ = 0, cout_pad_ = 0;  // the products' inner and outer channels
  int64_t th_ = 0, tw_ = 0, tiles_ = 0;  // tile rows and columns, tiles per image
  int64_t hp_ = 0, wp_ = 0, plane_ = 0;  // the padded copy: 2 th + 2 rows of 2 tw + 2
  int64_t images_ = 1, ld_ = 0;  // images per block; V's and M's rows: a block's tiles in whole vectors, + 16
  // Floats from one transformed position's V [cin][ld_] (M [8][ld_]) to the next: an odd number of cache
  // lines, so that the 16 positions' rows fall in different sets of the L1 (a multiple of 4 KB put them all
  // in one set: the CNN's input transform ran 3x slower).
  int64_t vplane_ = 0, mplane_ = 0;
};

}  // namespace cpu
}  // namespace ontrain
