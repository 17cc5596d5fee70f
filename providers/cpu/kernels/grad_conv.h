// Gradient of convolution on the CPU: ConvGrad (com.microsoft), and ai.ontrain MaxPoolReluConvGrad, the
// ConvGrad of MaxPoolReluGrad's result (engine/kernel_fusion.h). One kernel class, declared here so that its
// parts live in files of their own: grad_conv.cc checks a shape and plans it (which algorithm for dX, dW and
// dB, and the scratch), grad_conv_dx.cc computes dX and grad_conv_dw.cc dW.
//   col(dX_g) = W_g^T [cg*K, mg] * dY_g, scattered back (images in parallel);
//   dW_g = dY_g [mg, N*O] * col(X_g)^T [N*O, cg*K] (one GEMM over a chunk of images, chunks in parallel);
//   dB = sum of dY over batch and space.
// Stride-1 2-D convolutions use the padded-rows layout of conv_geometry.h: dX as kh * kw GEMMs accumulating
// into shifted views of a padded dX, dW from patch matrices of one copy per patch row (dY gets zero gaps;
// the per-image column count is rows_.n). Where the CPU has AVX-512 and the data is float32, such a dX is
// instead the stride-1 convolution of dY with the weights transposed and flipped (pads d * (k - 1) - p),
// run by the forward pass's direct kernel (direct_conv.h), or where the forward pass runs on Winograd's
// F(2x2, 3x3) by that algorithm's adjoint over the same tiles (winograd.h), and the dW of 3x3 windows with
// strides 1 or 2 (dilation 1) by DirectWeightGrad3x3 over padded images and dY transposed, chunk by chunk
// as the GEMMs. Every split between threads is fixed by the shapes, so the bits do not depend on the pool.
#pragma once

#include <cstdint>

#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/direct_conv.h"
#include "providers/cpu/kernels/pool.h"
#include "providers/cpu/kernels/winograd.h"
#include "providers/kernel.h"

namespace ontrain {
namespace cpu {

// One Compute call's operands, sizes and scratch, which its passes share. dx, dw and db are null where the
// output is not requested; dyp is dY: the input, or MaxPoolReluConvGrad's unpooled dY in the scratch.
template <typename T>
struct ConvGradPass {
  KernelContext& ctx;
  const Tensor& x;
  const Tensor& w;
  Tensor* dx;
  Tensor* dw;
  Tensor* db;
  int64_t n, c, m, cg, mg, isize, osize, ksize;
  T* scratch;
  const T* dyp;
  double* row_sums;  // per_image_ or dt_sums_: each image's dB sums, [n, m]
};

class ConvGradKernel : public OpKernel {
 public:
  explicit ConvGradKernel(const NodeInfo& info);
  Status Prepare(KernelContext& ctx) override;
  Status Compute(KernelContext& ctx) override;

 private:
  // Prepare's steps (grad_conv.cc).
  Status CheckShapes(KernelContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w, Shape* expect);
  void PlanLayout(KernelContext& ctx, const Tensor& x, int64_t m);
  void PlanInputGrad(KernelContext& ctx, const Tensor& x, int64_t m);
  void PlanWeightGrad(KernelContext& ctx, const Tensor& x, int64_t m);
  void PlanScratch(KernelContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w, const Shape& expect);
  // Columns of one image's patch matrix: the padded rows' n, else the output's positions.
  int64_t Cols() const { return padded_ ? rows_.n : ShapeNumElements(out_); }
  bool TransposedGeometry(PaddedRows* rows) const;
  bool WinogradRows(int64_t c, int64_t m);
  bool TransposedRows(int64_t c, int64_t m);
  template <typename T>
  Status Run(const ConvGradPass<T>& p) const;
  template <typename T>
  void BiasGrad(const ConvGradPass<T>& p) const;
  bool ScatterPooledImage(KernelContext& ctx, int64_t i, int64_t m, int64_t osize, float* out) const;
  Status PooledIndexError() const;

  // dX (grad_conv_dx.cc).
  template <typename T>
  void InputGrad(const ConvGradPass<T>& p, bool depthwise) const;
  void InputGradPointwise(const ConvGradPass<float>& p) const;
  void InputGradWinograd(const ConvGradPass<float>& p) const;
  void InputGradDirect(const ConvGradPass<float>& p) const;
  template <typename T>
  void InputGradPadded(const ConvGradPass<T>& p) const;
  template <typename T>
  void InputGradCol2Im(const ConvGradPass<T>& p) const;
  template <typename T>
  void BackwardDataPadded(const T* dy, const T* wr, T* dx, int64_t c, int64_t m, T* work) const;

  // dW (grad_conv_dw.cc). Each returns false where an Indices entry left its plane (MaxPoolReluConvGrad).
  template <typename T>
  bool WeightGrad(const ConvGradPass<T>& p, bool depthwise) const;
  void PointwiseTiles(const ConvGradPass<float>& p) const;
  template <typename T>
  void PointwiseGemms(const ConvGradPass<T>& p) const;
  template <typename T>
  bool Chunks(const ConvGradPass<T>& p) const;
  bool DirectChunks(const ConvGradPass<float>& p, int64_t g, int64_t per_slot, int64_t pld, float* partials) const;
  bool DirectChunkImage(const ConvGradPass<float>& p, int64_t g, int slot, int64_t i, float* dyti) const;
  template <typename T>
  void GemmChunks(const ConvGradPass<T>& p, int64_t g, int64_t per_slot, T* partials) const;
  template <typename T>
  void AddPartials(const ConvGradPass<T>& p, int64_t g, int64_t pld, T* partials) const;

  // 1 MB: one Zen 5 core's L2; also more chunks to share between threads (the ResNet's ConvGrad at 2 threads
  // 28.4 -> 27.3 ms, peak RSS 197 -> 163 MB, against 4 MB).
  static constexpr int64_t kChunkBytes = int64_t{1} << 20;

  const Node& node_;
  int64_t group_;
  WindowAttrs geo_;
  Shape in_, out_;
  bool padded_ = false;
  PaddedRows rows_;
  int64_t pad_ = 0;  // elements of one padded image (padded rows only)
  bool dx_direct_ = false;  // dX by DirectConv2D (dxc_) or, where dx_wino_, Winograd3x3 (dxg_) over dY
  bool dx_pointwise_ = false;  // dX of a 1x1 window by PointwiseConv over the batch
  DirectConv2D dxc_;
  bool dx_wino_ = false;
  bool dx_flipped_ = false;  // dx_wino_: the convolution of dY with the flipped weights (else the adjoint)
  Winograd3x3 dxg_;
  bool dw_direct_ = false;  // dW by DirectWeightGrad3x3 (dwk_)
  bool dw_pointwise_ = false;  // dW of a 1x1 window without pads: one GEMM per image
  int64_t dw_gather_ = 0;      // with strides: elements of one image's gathered samples (per group), else 0
  // MaxPoolReluConvGrad(dZ, Indices, Z, X, W): ConvGrad of MaxPoolReluGrad(dZ, Indices, Z).
  bool pooled_ = false;
  bool codes_ = false;  // MaxPoolReluConvGrad with compact_indices: Indices are window codes (pool.h)
  Unpool2x2Lanes lanes_;  // codes_: the flat unpooling's tables for this shape
  bool per_image_ = false;  // pooled_: dY per image in a thread's buffer (else whole, at dy_offset_)
  bool unpool_transposed_ = false;  // per_image_ with codes_: dY unpooled into the transposed layout
                                    // (DirectWeightGrad3x3::UnpoolOutputGrad)
  bool unpool_in_tiles_ = false;  // unpool_transposed_ where RunInPlace applies: only dZ and the codes
                                  // transposed, dY made in the tiles' registers (RunPooledInPlace)
  bool dt_sums_ = false;    // dB from the images' transposed dY (DirectWeightGrad3x3::ChannelSums)
  bool dw_tiles_ = false;   // dw_pointwise_ by PointwiseWeightGrad (pointwise.h; float32, AVX-512, stride 1)
  int64_t dy_slot_ = 0;     // per_image_: floats of each thread's dY buffer
  int64_t dy_offset_ = 0;   // pooled_: where dY's buffers start in the scratch
  int64_t sums_offset_ = 0; // per_image_ or dt_sums_: where the images' dB sums (doubles) start
  DirectWeightGrad3x3 dwk_;
  int64_t dxwork_ = 0, wr_offset_ = 0;  // padded rows, dX: work elements per thread; where the split weights are
  int64_t col_ = 0;
  int slots_ = 1;
  int64_t chunk_ = 1, chunks_ = 0;
};

}  // namespace cpu
}  // namespace ontrain
