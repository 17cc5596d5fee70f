// ConvGradKernel (grad_conv.h): its checks, its plan for a shape (Prepare), the MaxPoolReluConvGrad
// unpooling, the order of the passes (Compute) and dB. dX's passes are in grad_conv_dx.cc, dW's in
// grad_conv_dw.cc.
#include "providers/cpu/kernels/grad_conv.h"

#include <algorithm>
#include <atomic>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/depthwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {

ConvGradKernel::ConvGradKernel(const NodeInfo& info)
    : node_(*info.node),
      group_(info.node->GetInt("group", 1)),
      pooled_(info.node->op_type == "MaxPoolReluConvGrad"),
      codes_(pooled_ && info.node->GetInt("compact_indices", 0) != 0) {}

Status ConvGradKernel::Prepare(KernelContext& ctx) {
  const int xi = pooled_ ? 3 : 1;
  ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, pooled_ ? "dZ" : "dY"));
  ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, xi, "X"));
  ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, xi + 1, "W"));
  ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, xi, xi + 1}));
  Shape expect;
  ONT_RETURN_IF_ERROR(CheckShapes(ctx, *dy, *x, *w, &expect));
  const int64_t m = w->dim(0);
  PlanLayout(ctx, *x, m);
  PlanInputGrad(ctx, *x, m);
  PlanWeightGrad(ctx, *x, m);
  PlanScratch(ctx, *dy, *x, *w, expect);
  if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
  if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, w->dtype(), w->shape()));
  if (ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, w->dtype(), {m}));
  return Status::OK();
}

// The operands' ranks, dtypes and channels; sets in_, geo_ and out_, and `expect`, dY's shape.
Status ConvGradKernel::CheckShapes(KernelContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                                   Shape* expect) {
  if (x.rank() < 3 || w.rank() != x.rank() || dy.rank() != x.rank()) {
    return InvalidArgument(pooled_ ? "dZ" : "dY", ", X and W must have equal rank >= 3");
  }
  if (pooled_) {
    ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "Indices"));
    ONT_ASSIGN_OR_RETURN(const Tensor* z, RequireInput(ctx, 2, "Z"));
    if (idx->dtype() != (codes_ ? DType::kUInt8 : DType::kInt64) || idx->shape() != dy.shape() ||
        z->shape() != dy.shape() || z->dtype() != DType::kFloat32 || dy.dtype() != DType::kFloat32 ||
        x.dtype() != DType::kFloat32 || x.rank() != 4) {
      return InvalidArgument("MaxPoolReluConvGrad takes float32 dZ and Z and ", codes_ ? "uint8" : "int64",
                             " Indices of one shape, and a 4-D X; got dZ ", DTypeName(dy.dtype()),
                             ShapeToString(dy.shape()), ", Indices ", DTypeName(idx->dtype()),
                             ShapeToString(idx->shape()), ", Z ", DTypeName(z->dtype()), ShapeToString(z->shape()));
    }
  }
  const int64_t c = x.dim(1), m = w.dim(0);
  if (group_ <= 0 || c % group_ || m % group_ || w.dim(1) * group_ != c) {
    return InvalidArgument("channels do not match: X has ", c, ", W ", ShapeToString(w.shape()), ", group ", group_);
  }
  in_.assign(x.shape().begin() + 2, x.shape().end());
  geo_ = WindowAttrs::FromNode(node_, Shape(w.shape().begin() + 2, w.shape().end()));
  ONT_ASSIGN_OR_RETURN(out_, geo_.OutputDims(in_));
  *expect = {x.dim(0), m};
  expect->insert(expect->end(), out_.begin(), out_.end());
  if (!pooled_ && dy.shape() != *expect) {
    return InvalidArgument("dY has shape ", ShapeToString(dy.shape()), ", expected ", ShapeToString(*expect));
  }
  if (pooled_ && (dy.dim(0) != x.dim(0) || dy.dim(1) != m)) {
    return InvalidArgument("dZ has shape ", ShapeToString(dy.shape()), ", expected [", x.dim(0), ", ", m, ", ...]");
  }
  if (codes_ && (2 * dy.dim(2) > out_[0] || 2 * dy.dim(3) > out_[1])) {
    return InvalidArgument("dZ ", ShapeToString(dy.shape()), " is not a 2x2 pooling of the convolution's output ",
                           ShapeToString(*expect), ", which compact Indices need");
  }
  return Status::OK();
}

// The padded-rows layout where it applies, and the chunks of images that dW's passes share out. The chunk
// size depends only on the shapes (about kChunkBytes of patches), so the sums do not depend on the thread
// count.
void ConvGradKernel::PlanLayout(KernelContext& ctx, const Tensor& x, int64_t m) {
  const int64_t c = x.dim(1), n = x.dim(0), mg = m / group_;
  const int64_t ck = (c / group_) * ShapeNumElements(geo_.kernel);
  col_ = ck * ShapeNumElements(out_);
  padded_ = PaddedRows::Applies(in_, geo_);
  pad_ = 0;
  if (padded_) {
    // Per thread, for dX and dW alike: one padded image, then a chunk's dY with gaps and its patch matrix
    // (dW) or the patch matrix's gradient (dX), one GEMM per chunk and group.
    rows_ = PaddedRows(in_, out_, geo_);
    pad_ = (c / group_) * rows_.plane();
  }
  slots_ = ctx.thread_pool() ? ctx.thread_pool()->num_threads() : 1;
  const int64_t elem = static_cast<int64_t>(DTypeSize(x.dtype()));
  chunk_ = std::max<int64_t>(1, std::min<int64_t>(n, kChunkBytes / std::max<int64_t>(1, (ck + mg) * Cols() * elem)));
  chunks_ = n > 0 ? (n + chunk_ - 1) / chunk_ : 0;
  // An even number of chunks of nearly equal size, so that two threads get the same work: the fewest, from
  // the count above, whose last chunk (the others take ceil(n / count) images) has at least half of theirs.
  // 32 images in at most 5 per chunk had made 7 chunks, 4 of them (20 images) on one thread and 12 on the
  // other (now 8 of 4); the benchmark CNN's 64 in 5s made 13, and 14 of 5 are 13 again (now 16 of 4: its
  // ConvGrad at two threads 1.35 -> 1.30 ms).
  if (chunks_ > 1) {
    int64_t even = chunks_ + chunks_ % 2;
    auto balanced = [n](int64_t c) {
      const int64_t k = (n + c - 1) / c;
      return c * k - n <= k / 2;
    };
    while (even < n && !balanced(even)) even += 2;
    chunk_ = (n + even - 1) / even;
    chunks_ = (n + chunk_ - 1) / chunk_;
  }
}

// Which pass computes dX (grad_conv_dx.cc), and the work elements each thread needs for it.
void ConvGradKernel::PlanInputGrad(KernelContext& ctx, const Tensor& x, int64_t m) {
  const int64_t c = x.dim(1);
  // Padded rows: per thread one padded image and dY with gaps; after everything, the split weights.
  dxwork_ = pad_ + (m / group_) * Cols();
  dx_direct_ = false;
  dx_wino_ = false;
  if (padded_ && ctx.output_requested(0) && x.dtype() == DType::kFloat32 && !rows_.trivial() &&
      !IsDepthwise2D(c, m, group_, in_.size()) && DirectConv2D::Available()) {
    dx_wino_ = WinogradRows(c, m);
    dx_direct_ = dx_wino_ || TransposedRows(c, m);
    if (dx_direct_) dxwork_ = dx_wino_ ? dxg_.work_size() : dxc_.work_size();
  }
  // 1x1 without pads at stride 1 (float32, AVX-512): dX = W^T dY by PointwiseConv over the batch, W read
  // transposed, on planes under 256 positions (MobileNet, warm, alone, GEMMs -> PointwiseConv: 4x4 256 <-
  // 64 0.091 -> 0.067 ms, 8x8 96 <- 24 0.050 -> 0.043; but 16x16 128 <- 32 0.278 -> 0.360 and 64 <- 16
  // 0.080 -> 0.095, where each tile's dY rows, re-read by every row tile, fall out of L1).
  const int64_t positions = ShapeNumElements(out_);
  dx_pointwise_ = padded_ && rows_.trivial() && group_ == 1 && ctx.output_requested(0) &&
                  x.dtype() == DType::kFloat32 && DirectConv2D::Available() && positions > 0 &&
                  positions % 16 == 0 && positions < 256;
}

// Which pass computes dW (grad_conv_dw.cc).
void ConvGradKernel::PlanWeightGrad(KernelContext& ctx, const Tensor& x, int64_t m) {
  const int64_t c = x.dim(1), n = x.dim(0), cg = c / group_, mg = m / group_;
  // dW of 3x3 windows (float32, AVX-512): the direct kernel over a chunk's padded images and transposed dY.
  // Strides 1 or 2.
  dw_direct_ = ctx.output_requested(1) && x.dtype() == DType::kFloat32 && !IsDepthwise2D(c, m, group_, in_.size()) &&
               DirectWeightGrad3x3::Applies(in_, geo_);
  if (dw_direct_) dwk_ = DirectWeightGrad3x3(in_, out_, geo_, cg, mg);
  // dW of 1x1 windows without pads: at stride 1 each image is its own patch matrix, so one GEMM per image
  // straight from the tensors (no copies, no partials); at larger strides (a ResNet's downsampling
  // shortcut) the image's strided samples are gathered first, per half of the batch.
  int64_t one = 1, unit_strides = 1;
  for (size_t d = 0; d < in_.size(); ++d) {
    one &= geo_.kernel[d] == 1 && geo_.dilations[d] == 1 && geo_.pads[d] == 0 && geo_.pads[d + in_.size()] == 0;
    unit_strides &= geo_.strides[d] == 1;
  }
  dw_pointwise_ = one && ctx.output_requested(1) && !IsDepthwise2D(c, m, group_, in_.size());
  dw_gather_ = dw_pointwise_ && !unit_strides ? cg * Cols() : 0;
  // PointwiseWeightGrad where its inner operand (the fewer channels' rows over the batch) stays within
  // half an L2: the MobileNet's 128 -> 16 at 16x16 0.674 -> 0.544 ms, 16 -> 64 0.329 -> 0.223; its 32 -> 128
  // (1 MB of x re-read per output tile) 0.815 -> 0.864, so that one keeps the GEMMs.
  const int64_t positions = ShapeNumElements(out_);
  dw_tiles_ = dw_pointwise_ && unit_strides && x.dtype() == DType::kFloat32 && DirectConv2D::Available() &&
              mg % 4 == 0 && cg % 4 == 0 && positions % 16 == 0 && positions >= 64 && n > 0 &&
              std::min(mg, cg) * positions * n * 4 <= (int64_t{512} << 10);
}

// The scratch: per thread a patch matrix (dX), or a chunk's patch matrix and dY laid out as [mg, images * O]
// with each chunk's partial dW; the split weights; MaxPoolReluConvGrad's dY; the images' dB sums.
void ConvGradKernel::PlanScratch(KernelContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w,
                                 const Shape& expect) {
  const int64_t n = x.dim(0), m = w.dim(0), cg = x.dim(1) / group_, mg = m / group_;
  const int64_t ck = cg * ShapeNumElements(geo_.kernel), o = Cols();
  // The second half's partial, then a gathered image per half.
  int64_t dw_elems = dw_pointwise_ ? mg * cg + 2 * dw_gather_ : 0;
  if (ctx.output_requested(1) && !dw_pointwise_) {
    dw_elems = dw_direct_ ? (dwk_.copy_size(chunk_) + chunk_ * dwk_.transposed_size()) * slots_ +
                                chunks_ * dwk_.cout_padded() * ck
                          : (pad_ + (ck + mg) * chunk_ * o) * slots_ + chunks_ * mg * ck;
  }
  int64_t elems = std::max(dx_pointwise_ ? 0 : padded_ ? dxwork_ * slots_ : col_ * slots_, dw_elems);
  wr_offset_ = elems;
  if (padded_ && ctx.output_requested(0) && !dx_pointwise_) {  // (PointwiseConv reads W as it is)
    elems += !dx_direct_ ? w.NumElements() : dx_wino_ ? dxg_.packed_size() : group_ * dxc_.packed_size();
  }
  // MaxPoolReluConvGrad: dY image by image into a buffer per thread where only the direct weight gradient
  // reads it (one group, no dX), with each image's row sums for dB (doubles, two floats each); else dY whole.
  per_image_ = pooled_ && dw_direct_ && group_ == 1 && !ctx.output_requested(0);
  // Window codes there: dY unpooled straight into the transposed layout (UnpoolTransposed), through a
  // buffer of the transposed dZ and codes.
  unpool_transposed_ = per_image_ && codes_;
  // Where the chunks' tiles read the images in place (stride 1, no pads), not even that: dZ and the codes
  // transposed into each image's dY slot, dB's sums and the tiles making dY from them in registers, without
  // the unpooled dY written and read back twice (the benchmark CNN's first layer, one thread: 0.34-0.37 ->
  // 0.26 ms).
  unpool_in_tiles_ = unpool_transposed_ && dwk_.pooled_in_place();
  // Elsewhere window codes are unpooled plane by plane (ScatterPooledImage), small planes by lane tables.
  if (codes_ && !unpool_transposed_ && !lanes_.fits(out_[0], out_[1], dy.dim(2), dy.dim(3))) {
    lanes_ = Unpool2x2Lanes(out_[0], out_[1], dy.dim(2), dy.dim(3));
  }
  // dB from each image's transposed dY (DirectWeightGrad3x3::ChannelSums) wherever the direct weight
  // gradient makes it, in one group: a sum that the unpooling into that layout can give too.
  dt_sums_ = dw_direct_ && group_ == 1 && ctx.output_requested(2);
  dy_offset_ = elems;
  // Per thread: the image's dY (ScatterPooledImage), or the transposed dZ and codes (UnpoolOutputGrad).
  const int64_t per_thread = unpool_in_tiles_     ? 0
                             : unpool_transposed_ ? dwk_.unpool_work_size(dy.dim(2), dy.dim(3))
                                                  : m * ShapeNumElements(out_);
  const int64_t after_dy = dy_offset_ + (!pooled_ ? 0 : per_image_ ? slots_ * per_thread : ShapeNumElements(expect));
  // The images' sums start at an even float offset, so that the doubles are aligned (the scratch is).
  sums_offset_ = (after_dy + 1) / 2 * 2;
  dy_slot_ = per_thread;
  elems = per_image_ || dt_sums_ ? sums_offset_ + 2 * n * m : after_dy;
  ctx.RequestScratch(static_cast<size_t>(elems * static_cast<int64_t>(DTypeSize(x.dtype()))));
}

Status ConvGradKernel::Compute(KernelContext& ctx) {
  const int xi = pooled_ ? 3 : 1;
  const Tensor &x = *ctx.input(xi), &w = *ctx.input(xi + 1);
  return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0);
    T* scratch = static_cast<T*>(ctx.scratch());
    // dY: the input, or (MaxPoolReluConvGrad) MaxPoolReluGrad's result, whole or image by image.
    const T* dyp = pooled_ ? scratch + dy_offset_ : ctx.input(0)->data<T>();
    double* row_sums = per_image_ || dt_sums_ ? reinterpret_cast<double*>(scratch + sums_offset_) : nullptr;
    const ConvGradPass<T> p{ctx, x, w, ctx.output(0), ctx.output(1), ctx.output(2), n, c, m, c / group_, m / group_,
                            ShapeNumElements(in_), ShapeNumElements(out_), ShapeNumElements(geo_.kernel), scratch,
                            dyp, row_sums};
    return Run(p);
  });
}

// 1. MaxPoolReluConvGrad's dY, where it is made whole; 2. dX; 3. dW; 4. dB.
template <typename T>
Status ConvGradKernel::Run(const ConvGradPass<T>& p) const {
  if constexpr (std::is_same_v<T, float>) {
    if (pooled_ && !per_image_) {
      std::atomic<bool> bad{false};
      ParallelFor(p.ctx.thread_pool(), p.n, 4.0 * static_cast<double>(p.m * p.osize), [&](int64_t i0, int64_t i1) {
        for (int64_t i = i0; i < i1 && !bad.load(std::memory_order_relaxed); ++i) {
          if (!ScatterPooledImage(p.ctx, i, p.m, p.osize, p.scratch + dy_offset_ + i * p.m * p.osize)) bad.store(true);
        }
      });
      if (bad.load()) return PooledIndexError();
    }
  }
  const bool depthwise = IsDepthwise2D(p.c, p.m, group_, in_.size());
  if (depthwise && (p.dx || p.dw)) {
    DepthwiseBackward<T>(p.dyp, p.x.template data<T>(), p.w.template data<T>(),
                         p.dx ? p.dx->template data<T>() : nullptr, p.dw ? p.dw->template data<T>() : nullptr, p.n,
                         p.c, in_.data(), out_.data(), geo_, p.ctx.thread_pool());
  }
  InputGrad(p, depthwise);
  if (!WeightGrad(p, depthwise)) return PooledIndexError();
  if (p.db) BiasGrad(p);
  if (p.dw && p.n == 0 && !dw_pointwise_) {
    std::fill(p.dw->template data<T>(), p.dw->template data<T>() + p.dw->NumElements(), T(0));
  }
  return Status::OK();
}

// dB: per channel, the images' rows summed in double in LaneSum's fixed order (vectorized; one running float
// sum was a 4-cycle add chain per element, 1.6 ms of the benchmark CNN's first ConvGrad).
template <typename T>
void ConvGradKernel::BiasGrad(const ConvGradPass<T>& p) const {
  ParallelFor(p.ctx.thread_pool(), p.m, static_cast<double>(p.n * p.osize), [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      double s = 0;
      for (int64_t i = 0; i < p.n; ++i) {
        const T* row = p.dyp + (i * p.m + j) * p.osize;
        if (dt_sums_) s += p.row_sums[i * p.m + j];
        else if constexpr (std::is_same_v<T, float>) s += VRowSum(row, p.osize);
        else s += LaneSum(p.osize, [row](int64_t o) { return static_cast<double>(row[o]); });
      }
      p.db->template data<T>()[j] = static_cast<T>(s);
    }
  });
}

// MaxPoolReluGrad's dX for image i (MaxPoolReluConvGrad; float32): each of its m planes zeroed, then dZ
// scattered to the indices where Z is positive, the adds of MaxPoolGradKernel in the same order (or the
// same bits by VPlanesMaxUnpool2x2 where every index lies in its 2x2 window). False when an index leaves
// its plane (MaxPool's never do).
bool ConvGradKernel::ScatterPooledImage(KernelContext& ctx, int64_t i, int64_t m, int64_t osize, float* out) const {
  const Tensor& dz = *ctx.input(0);
  const int64_t psize = dz.dim(0) * dz.dim(1) > 0 ? dz.NumElements() / (dz.dim(0) * dz.dim(1)) : 0;
  const float* g = dz.data<float>() + i * m * psize;
  const float* z = ctx.input(2)->data<float>() + i * m * psize;
  if (codes_) {
    const uint8_t* codes = ctx.input(1)->data<uint8_t>() + i * m * psize;
    if (!VPlanesMaxUnpool2x2Codes(g, codes, out_[0], out_[1], dz.dim(2), dz.dim(3), 0, m, out, &lanes_)) {
      UnpoolWindowCodes<float>(g, codes, out_[0], out_[1], dz.dim(2), dz.dim(3), 0, m, out);
    }
    return true;
  }
  const int64_t* k = ctx.input(1)->data<int64_t>() + i * m * psize;
  // 2x2 windows at stride 2 (what the fusion pools): written whole by a select per element.
  if (out_.size() == 2 && dz.rank() == 4 && 2 * dz.dim(2) <= out_[0] && 2 * dz.dim(3) <= out_[1] &&
      VPlanesMaxUnpool2x2(g, z, k, i * m * osize, out_[0], out_[1], dz.dim(2), dz.dim(3), 0, m, out)) {
    return true;
  }
  for (int64_t j = 0; j < m; ++j) {
    float* plane = out + j * osize;
    std::fill(plane, plane + osize, 0.0f);
    const int64_t base = (i * m + j) * osize;
    for (int64_t e = j * psize; e < (j + 1) * psize; ++e) {
      const int64_t at = k[e] - base;
      if (at < 0 || at >= osize) return false;
      plane[at] = plane[at] + KeepIfPositive(g[e], z[e]);
    }
  }
  return true;
}

Status ConvGradKernel::PooledIndexError() const {
  return InvalidArgument("Indices point outside their own [N, C] plane of the pooled tensor; MaxPool's never do");
}

// dX's convolution (dY in, dX out, the weights transposed and flipped) where it exists: pads
// d * (k - 1) - p >= 0 on every side, in the padded-rows layout. Returns whether it does.
bool ConvGradKernel::TransposedGeometry(PaddedRows* rows) const {
  WindowAttrs t = geo_;
  t.auto_pad = "NOTSET";
  const size_t r = in_.size();
  for (size_t d = 0; d < r; ++d) {
    const int64_t reach = t.dilations[d] * (t.kernel[d] - 1);
    t.pads[d] = reach - geo_.pads[d];
    t.pads[d + r] = reach - geo_.pads[d + r];
    if (t.pads[d] < 0 || t.pads[d + r] < 0) return false;
  }
  if (!PaddedRows::Applies(out_, t)) return false;
  StatusOr<Shape> back = t.OutputDims(out_);
  if (!back.ok() || back.value() != in_) return false;  // no such convolution: dX keeps the GEMM path
  *rows = PaddedRows(out_, in_, t);
  return true;
}

// Sets dxg_ to Winograd's F(2x2, 3x3) for dX where the forward pass takes it: as the convolution of dY
// with the flipped weights where that convolution's pads are at most 1 (the forward pass's pads 1; 5%
// faster than the adjoint there: the ResNet's 16 channels at 32x32, 1.17 against 1.23 ms), else by the
// adjoint over the forward pass's tiles (the CNN's unpadded layer: the direct kernel's 1.33 -> 1.23 ms).
// Returns whether it does; dx_flipped_ says which.
bool ConvGradKernel::WinogradRows(int64_t c, int64_t m) {
  if (group_ != 1 || !Winograd3x3::Applies(rows_, c, m)) return false;
  PaddedRows t;
  dx_flipped_ = TransposedGeometry(&t) && Winograd3x3::Applies(t, m, c);
  dxg_ = dx_flipped_ ? Winograd3x3(t, m, c) : Winograd3x3::InputGrad(rows_, c, m);
  return true;
}

// Sets dxc_ to dX's convolution where the direct kernel takes it. Returns whether it does.
bool ConvGradKernel::TransposedRows(int64_t c, int64_t m) {
  PaddedRows rows;
  if (!TransposedGeometry(&rows) || !DirectConv2D::Fits(rows)) return false;
  // Unpadded windows pad dY by k - 1 on each side, and the direct kernel computes whole vectors: the CNN's
  // 11x11 dY in 15x15 planes made 193 positions per image against the GEMMs' 141 (its ConvGrad went
  // 5.5 -> 6.5 ms). Where the kernel computes at most a quarter more positions (the ResNet's pads of 1: 80
  // against 78 at 8x8, 1088 against 1086 at 32x32) it was faster.
  // The row tiles compute no gap at all (the CNN's dX: 169 positions per channel); the vector-row tiles
  // whole vectors per row.
  DirectConv2D dc(rows, m / group_, c / group_);
  const int64_t v = DirectConv2D::kVector;
  const int64_t tiles = dc.vector_rows() ? rows.oh * ((rows.ow + v - 1) / v * v) : (rows.n + v - 1) / v * v;
  if (!dc.row_tiles() && 4 * tiles > 5 * rows_.n) return false;
  dxc_ = dc;
  return true;
}

KernelFactory kConvGrad = MakeKernel<ConvGradKernel>;
KernelFactory kMaxPoolReluConvGrad = MakeKernel<ConvGradKernel>;

}  // namespace cpu
}  // namespace ontrain
