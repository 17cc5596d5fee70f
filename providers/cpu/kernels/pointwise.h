// 1x1 convolutions at stride 1 over the whole batch on AVX-512 (MobileNet's pointwise layers): the forward
// pass and the input gradient as one register-tiled product whose columns are the positions of all images
// (PointwiseConv), and the weight gradient in register tiles of channels over blocks of images
// (PointwiseWeightGrad). Conv (conv.cc) and ConvGrad (grad_conv.cc) choose them per layer.
#pragma once

#include <cstdint>

namespace ontrain {
namespace cpu {

// dW of a 1x1 convolution at stride 1 over planes of `hw` floats (a multiple of 16): dw[o * ld + ch] for
// the output channels o and input channels ch in [o0, o1) x [c0, c1) = the sum over n images and all
// positions of dy[i][o][p] * x[i][ch][p] (images dy_image and x_image floats apart). A tile of 4 output by
// 6 input channels (the last 2 or 4 input channels in a narrower one) keeps 24 accumulators of 16
// positions' lanes in registers over a block of images (each step 10 loads for 24 FMAs, no per-image GEMM
// calls), and in memory between blocks, while the outer tile's rows for the block stay in L1; each lane
// sums its positions (p mod 16) over images in order, then the 16 lanes are added in order, whatever the
// tile's shape and the blocks. MobileNet, one thread, warm, alone: [16 <- 128] at 16x16 129 GFLOP/s with
// 4 x 4 tiles over all the images, 148 with 4 x 6, 181 with the blocks. The outer loop runs over the
// operand whose rows take more memory, so that the inner tiles re-read the smaller one from cache (input_outer: dY is the
// smaller, as in a 1x1 layer narrowing 128 channels to 16). AVX-512F; o0, o1, c0, c1 multiples of 4.
void PointwiseWeightGrad(const float* dy, int64_t dy_image, const float* x, int64_t x_image, int64_t n, int64_t hw,
                         int64_t o0, int64_t o1, int64_t c0, int64_t c1, bool input_outer, float* dw, int64_t ld);

// A 1x1 convolution at stride 1 (and, with W's strides swapped, its input gradient) over planes of `hw`
// floats (a multiple of 16), all images at once: y[i][r][p] = sum over k in order of w[r * wr + k * wk] *
// x[i][k][p], then + bias[r] (when not null), then max(0, .) with relu; images x_image and y_image floats
// apart; rows r < `rows`, k < k_count. The batch's positions are taken as vectors of 16, vector v at
// image v / (hw / 16): this call computes vectors [v0, v1), in tiles of 4 rows by 6 vectors (10 loads per
// 24 FMAs, the tile's X vectors re-read from cache by the next rows' tiles), so that the small planes of a
// MobileNet's later layers (16 and 64 positions) fill whole tiles across images where one GEMM per image
// was 16 or 64 columns wide. AVX-512F.
void PointwiseConv(const float* x, int64_t x_image, const float* w, int64_t wr, int64_t wk, const float* bias, bool relu,
                   float* y, int64_t y_image, int64_t hw, int64_t rows, int64_t k_count, int64_t v0, int64_t v1);

}  // namespace cpu
}  // namespace ontrain
