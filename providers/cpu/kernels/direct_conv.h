// Direct 2-D convolution of float32 images with stride 1, on AVX-512: the output is computed in register tiles
// of 8 output channels by 48 positions (the last tile of a plane 16 or 32) of the padded-rows layout
// (conv_geometry.h), summing over input channels and patch positions without a patch matrix or repeated
// passes over the output. Conv's forward pass runs on it where the CPU has AVX-512F (checked at run time);
// elsewhere Conv keeps its GEMM paths.
// ConvGrad's input gradient runs on it too where its planes waste few positions (grad_conv_pool.cc). The
// weight gradient stays a GEMM over a patch matrix: a direct tile of 3 output channels by the 9 positions of
// a 3x3 window, vectors over positions, was measured slower on every ResNet layer (8x8: 2.9 -> 4.0 ms).
#pragma once

#include <cstdint>

#include "providers/cpu/kernels/conv_geometry.h"

namespace ontrain {
namespace cpu {

class DirectConv2D {
 public:
  static constexpr int64_t kChannelBlock = 8;  // output channels per register tile
  static constexpr int64_t kPositions = 48;    // padded-rows positions per register tile (3 vectors)
  static constexpr int64_t kVector = 16;       // the last tile of a row: whole vectors only

  // Whether this CPU runs the kernel (AVX-512F).
  static bool Available();

  DirectConv2D() = default;
  // One image [cin, rows.h, rows.w] -> [cout, rows.oh, rows.ow] with the window of `rows`.
  DirectConv2D(const PaddedRows& rows, int64_t cin, int64_t cout);

  // Floats of the packed weights, and of one thread's work memory (padded image and product).
  int64_t packed_size() const { return cout_round_ * cin_ * kk_; }
  int64_t work_size() const { return cin_ * rows_.plane() + kSlack + cout_round_ * n_round_; }

  // Packs the weights: weight(o, i, k) is the weight from input channel i to output channel o at patch
  // position k (row-major over the window, k = a * kw + b).
  template <typename F>
  void PackWeights(F weight, float* packed) const {
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

  PaddedRows rows_;
  int64_t cin_ = 0, cout_ = 0, cout_round_ = 0, kk_ = 0, n_round_ = 0;
  int64_t shifts_[64] = {};  // patch position offsets in a padded plane (windows of at most 64 positions)

 public:
  // Windows this kernel takes: at most 64 patch positions.
  static bool Fits(const PaddedRows& rows) { return rows.kh * rows.kw <= 64; }
};

}  // namespace cpu
}  // namespace ontrain
