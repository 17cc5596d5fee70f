// Gradient of convolution: ConvGrad (com.microsoft), and ai.ontrain MaxPoolReluConvGrad, the ConvGrad of
// MaxPoolReluGrad's result (engine/kernel_fusion.h).
#include <algorithm>
#include <atomic>
#include <cstring>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/conv_geometry.h"
#include "providers/cpu/kernels/depthwise.h"
#include "providers/cpu/kernels/direct_conv.h"
#include "providers/cpu/kernels/pointwise.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/pool.h"
#include "providers/cpu/kernels/vrows.h"
#include "providers/cpu/kernels/winograd.h"

namespace ontrain {
namespace cpu {
namespace {

// ConvGrad(dY, X, W) -> (dX?, dW?, dB?) with the forward Conv's attributes.
//   col(dX_g) = W_g^T [cg*K, mg] * dY_g, scattered back (images in parallel);
//   dW_g = dY_g [mg, N*O] * col(X_g)^T [N*O, cg*K] (one GEMM over the batch when it fits, else per image);
//   dB = sum of dY over batch and space.
// Stride-1 2-D convolutions use the padded-rows layout of conv_geometry.h: dX as kh * kw GEMMs accumulating
// into shifted views of a padded dX, dW from patch matrices of one copy per patch row (dY gets zero gaps;
// the per-image column count is rows_.n). Where the CPU has AVX-512 and the data is float32, such a dX is
// instead the stride-1 convolution of dY with the weights transposed and flipped (pads d * (k - 1) - p),
// run by the forward pass's direct kernel (direct_conv.h), or where the forward pass runs on Winograd's
// F(2x2, 3x3) by that algorithm's adjoint over the same tiles (winograd.h), and the dW of 3x3
// windows with strides 1 or 2 (dilation 1) by DirectWeightGrad3x3 over padded images and dY transposed,
// chunk by chunk as the GEMMs.
class ConvGradKernel : public OpKernel {
 public:
  explicit ConvGradKernel(const NodeInfo& info)
      : node_(*info.node),
        group_(info.node->GetInt("group", 1)),
        pooled_(info.node->op_type == "MaxPoolReluConvGrad"),
        codes_(pooled_ && info.node->GetInt("compact_indices", 0) != 0) {}
  Status Prepare(KernelContext& ctx) override {
    const int xi = pooled_ ? 3 : 1;
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, pooled_ ? "dZ" : "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, xi, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, xi + 1, "W"));
    if (x->rank() < 3 || w->rank() != x->rank() || dy->rank() != x->rank()) {
      return InvalidArgument(pooled_ ? "dZ" : "dY", ", X and W must have equal rank >= 3");
    }
    if (pooled_) {
      ONT_ASSIGN_OR_RETURN(const Tensor* idx, RequireInput(ctx, 1, "Indices"));
      ONT_ASSIGN_OR_RETURN(const Tensor* z, RequireInput(ctx, 2, "Z"));
      if (idx->dtype() != (codes_ ? DType::kUInt8 : DType::kInt64) || idx->shape() != dy->shape() ||
          z->shape() != dy->shape() || z->dtype() != DType::kFloat32 || dy->dtype() != DType::kFloat32 ||
          x->dtype() != DType::kFloat32 || x->rank() != 4) {
        return InvalidArgument("MaxPoolReluConvGrad takes float32 dZ and Z and ", codes_ ? "uint8" : "int64",
                               " Indices of one shape, and a 4-D X; got dZ ",
                               DTypeName(dy->dtype()), ShapeToString(dy->shape()), ", Indices ", DTypeName(idx->dtype()),
                               ShapeToString(idx->shape()), ", Z ", DTypeName(z->dtype()), ShapeToString(z->shape()));
      }
    }
    int64_t c = x->dim(1), m = w->dim(0);
    if (group_ <= 0 || c % group_ || m % group_ || w->dim(1) * group_ != c) {
      return InvalidArgument("channels do not match: X has ", c, ", W ", ShapeToString(w->shape()), ", group ", group_);
    }
    in_.assign(x->shape().begin() + 2, x->shape().end());
    geo_ = WindowAttrs::FromNode(node_, Shape(w->shape().begin() + 2, w->shape().end()));
    ONT_ASSIGN_OR_RETURN(out_, geo_.OutputDims(in_));
    Shape expect = {x->dim(0), m};
    expect.insert(expect.end(), out_.begin(), out_.end());
    if (!pooled_ && dy->shape() != expect) {
      return InvalidArgument("dY has shape ", ShapeToString(dy->shape()), ", expected ", ShapeToString(expect));
    }
    if (pooled_ && (dy->dim(0) != x->dim(0) || dy->dim(1) != m)) {
      return InvalidArgument("dZ has shape ", ShapeToString(dy->shape()), ", expected [", x->dim(0), ", ", m, ", ...]");
    }
    if (codes_ && (2 * dy->dim(2) > out_[0] || 2 * dy->dim(3) > out_[1])) {
      return InvalidArgument("dZ ", ShapeToString(dy->shape()), " is not a 2x2 pooling of the convolution's output ",
                             ShapeToString(expect), ", which compact Indices need");
    }
    // Scratch: one patch matrix per thread (dX); for dW, per thread the patch matrix of a chunk of images
    // and their dY laid out as [mg, images * O] (one GEMM per chunk), and each chunk's partial dW. The chunk
    // size depends only on the shapes (about kChunkBytes of patches), so the sums do not depend on the
    // thread count.
    int64_t ck = (c / group_) * ShapeNumElements(geo_.kernel), o = ShapeNumElements(out_), n = x->dim(0);
    int64_t mg = m / group_;
    col_ = ck * o;
    padded_ = PaddedRows::Applies(in_, geo_);
    pad_ = 0;
    if (padded_) {
      // Per thread, for dX and dW alike: one padded image, then a chunk's dY with gaps and its patch matrix
      // (dW) or the patch matrix's gradient (dX), one GEMM per chunk and group.
      rows_ = PaddedRows(in_, out_, geo_);
      o = rows_.n;
      pad_ = (c / group_) * rows_.plane();
    }
    slots_ = ctx.thread_pool() ? ctx.thread_pool()->num_threads() : 1;
    const int64_t elem = static_cast<int64_t>(DTypeSize(x->dtype()));
    chunk_ = std::max<int64_t>(1, std::min<int64_t>(n, kChunkBytes / std::max<int64_t>(1, (ck + mg) * o * elem)));
    chunks_ = n > 0 ? (n + chunk_ - 1) / chunk_ : 0;
    // An even number of chunks of nearly equal size, so two threads get the same work: 32 images in at most
    // 5 per chunk had made 7 chunks, 4 of them (20 images) on one thread and 12 images on the other.
    if (chunks_ > 1) {
      chunks_ += chunks_ % 2;
      chunk_ = (n + chunks_ - 1) / chunks_;
      chunks_ = (n + chunk_ - 1) / chunk_;
    }
    // Padded rows, dX: per thread one padded image and dY with gaps; after everything, the split weights.
    dxwork_ = pad_ + mg * o;
    dx_direct_ = false;
    dx_wino_ = false;
    if (padded_ && ctx.output_requested(0) && x->dtype() == DType::kFloat32 && !rows_.trivial() &&
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
                    x->dtype() == DType::kFloat32 && DirectConv2D::Available() && positions > 0 &&
                    positions % 16 == 0 && positions < 256;
    // dW of 3x3 windows (float32, AVX-512): the direct kernel over a chunk's padded images and transposed dY.
    // Strides 1 or 2.
    dw_direct_ = ctx.output_requested(1) && x->dtype() == DType::kFloat32 && !IsDepthwise2D(c, m, group_, in_.size()) &&
                 DirectWeightGrad3x3::Applies(in_, geo_);
    if (dw_direct_) dwk_ = DirectWeightGrad3x3(in_, out_, geo_, c / group_, mg);
    // dW of 1x1 windows without pads: at stride 1 each image is its own patch matrix, so one GEMM per image
    // straight from the tensors (no copies, no partials); at larger strides (a ResNet's downsampling
    // shortcut) the image's strided samples are gathered first, per half of the batch.
    int64_t one = 1, unit_strides = 1;
    for (size_t d = 0; d < in_.size(); ++d) {
      one &= geo_.kernel[d] == 1 && geo_.dilations[d] == 1 && geo_.pads[d] == 0 && geo_.pads[d + in_.size()] == 0;
      unit_strides &= geo_.strides[d] == 1;
    }
    dw_pointwise_ = one && ctx.output_requested(1) && !IsDepthwise2D(c, m, group_, in_.size());
    dw_gather_ = dw_pointwise_ && !unit_strides ? (c / group_) * o : 0;
    // PointwiseWeightGrad where its inner operand (the fewer channels' rows over the batch) stays within
    // half an L2: the MobileNet's 128 -> 16 at 16x16 0.674 -> 0.544 ms, 16 -> 64 0.329 -> 0.223; its 32 -> 128
    // (1 MB of x re-read per output tile) 0.815 -> 0.864, so that one keeps the GEMMs.
    dw_tiles_ = dw_pointwise_ && unit_strides && x->dtype() == DType::kFloat32 && DirectConv2D::Available() &&
                mg % 4 == 0 && (c / group_) % 4 == 0 && ShapeNumElements(out_) % 16 == 0 &&
                ShapeNumElements(out_) >= 64 && n > 0 &&
                std::min(mg, c / group_) * ShapeNumElements(out_) * n * 4 <= (int64_t{512} << 10);
    // The second half's partial, then a gathered image per half.
    int64_t dw_elems = dw_pointwise_ ? mg * (c / group_) + 2 * dw_gather_ : 0;
    if (ctx.output_requested(1) && !dw_pointwise_) {
      dw_elems = dw_direct_ ? (dwk_.copy_size(chunk_) + chunk_ * dwk_.transposed_size()) * slots_ +
                                  chunks_ * dwk_.cout_padded() * ck
                            : (pad_ + (ck + mg) * chunk_ * o) * slots_ + chunks_ * mg * ck;
    }
    int64_t elems = std::max(dx_pointwise_ ? 0 : padded_ ? dxwork_ * slots_ : col_ * slots_, dw_elems);
    wr_offset_ = elems;
    if (padded_ && ctx.output_requested(0) && !dx_pointwise_) {  // (PointwiseConv reads W as it is)
      elems += !dx_direct_ ? w->NumElements() : dx_wino_ ? dxg_.packed_size() : group_ * dxc_.packed_size();
    }
    // MaxPoolReluConvGrad: dY image by image into a buffer per thread where only the direct weight gradient
    // reads it (one group, no dX), with each image's row sums for dB (doubles, two floats each); else dY whole.
    per_image_ = pooled_ && dw_direct_ && group_ == 1 && !ctx.output_requested(0);
    // Window codes there: dY unpooled straight into the transposed layout (UnpoolTransposed), through a
    // buffer of the transposed dZ and codes.
    unpool_transposed_ = per_image_ && codes_;
    // Elsewhere window codes are unpooled plane by plane (ScatterPooledImage), small planes by lane tables.
    if (codes_ && !unpool_transposed_ && !lanes_.fits(out_[0], out_[1], dy->dim(2), dy->dim(3))) {
      lanes_ = Unpool2x2Lanes(out_[0], out_[1], dy->dim(2), dy->dim(3));
    }
    // dB from each image's transposed dY (DirectWeightGrad3x3::ChannelSums) wherever the direct weight
    // gradient makes it, in one group: a sum that the unpooling into that layout can give too.
    dt_sums_ = dw_direct_ && group_ == 1 && ctx.output_requested(2);
    dy_offset_ = elems;
    // Per thread: the image's dY (ScatterPooledImage), or the transposed dZ and codes (UnpoolOutputGrad).
    const int64_t per_thread = unpool_transposed_ ? dwk_.unpool_work_size(dy->dim(2), dy->dim(3))
                                                  : m * ShapeNumElements(out_);
    const int64_t after_dy = dy_offset_ + (!pooled_ ? 0 : per_image_ ? slots_ * per_thread : ShapeNumElements(expect));
    // The images' sums start at an even float offset, so that the doubles are aligned (the scratch is).
    sums_offset_ = (after_dy + 1) / 2 * 2;
    dy_slot_ = per_thread;
    elems = per_image_ || dt_sums_ ? sums_offset_ + 2 * n * m : after_dy;
    ctx.RequestScratch(static_cast<size_t>(elems * elem));
    if (ctx.output_requested(0)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    if (ctx.output_requested(1)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, w->dtype(), w->shape()));
    if (ctx.output_requested(2)) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, w->dtype(), {m}));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const int xi = pooled_ ? 3 : 1;
    const Tensor &x = *ctx.input(xi), &w = *ctx.input(xi + 1);
    Tensor *dx = ctx.output(0), *dw = ctx.output(1), *db = ctx.output(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t n = x.dim(0), c = x.dim(1), m = w.dim(0), cg = c / group_, mg = m / group_;
      int64_t isize = ShapeNumElements(in_), osize = ShapeNumElements(out_), ksize = ShapeNumElements(geo_.kernel);
      T* scratch = static_cast<T*>(ctx.scratch());
      // dY: the input, or (MaxPoolReluConvGrad) MaxPoolReluGrad's result, whole or image by image.
      const T* dyp = pooled_ ? scratch + dy_offset_ : ctx.input(0)->data<T>();
      double* row_sums = per_image_ || dt_sums_ ? reinterpret_cast<double*>(scratch + sums_offset_) : nullptr;
      if constexpr (std::is_same_v<T, float>) {
        if (pooled_ && !per_image_) {
          Status st = Status::OK();
          std::atomic<bool> bad{false};
          ParallelFor(ctx.thread_pool(), n, 4.0 * static_cast<double>(m * osize), [&](int64_t i0, int64_t i1) {
            for (int64_t i = i0; i < i1 && !bad.load(std::memory_order_relaxed); ++i) {
              if (!ScatterPooledImage(ctx, i, m, osize, scratch + dy_offset_ + i * m * osize)) bad.store(true);
            }
          });
          if (bad.load()) return PooledIndexError();
        }
      }
      const bool depthwise = IsDepthwise2D(c, m, group_, in_.size());
      if (depthwise && (dx || dw)) {
        DepthwiseBackward<T>(dyp, x.data<T>(), w.data<T>(), dx ? dx->data<T>() : nullptr,
                             dw ? dw->data<T>() : nullptr, n, c, in_.data(), out_.data(), geo_, ctx.thread_pool());
      }
      // 1. dX: images in parallel, each with its own patch matrix (the same calls whatever the threads).
      if constexpr (std::is_same_v<T, float>) {
        if (dx && dx_pointwise_) {  // dX[i][ci][p] = sum over co of W[co, ci] dY[i][co][p]
          ParallelFor(ctx.thread_pool(), n * (osize / 16), 2.0 * static_cast<double>(m * c * 16), [&](int64_t v0, int64_t v1) {
            PointwiseConv(dyp, m * osize, w.data<float>(), 1, c, nullptr, false, dx->data<float>(), c * isize, osize, c,
                          m, v0, v1);
          });
        } else if (dx && dx_wino_) {
          // Output channel ci (dX's) reads input channel co (dY's) through the forward weight W[co, ci],
          // flipped in space for the convolution of dY; blocks of dxg_.block() images.
          float* packed = scratch + wr_offset_;
          dxg_.PackWeights(w.data<float>(), 9, c * 9, dx_flipped_, packed);
          const int64_t blk = dxg_.block();
          std::atomic<int> next_slot{0};
          ParallelFor(ctx.thread_pool(), (n + blk - 1) / blk, 2.0 * static_cast<double>(blk * m * c * 9 * osize),
                      [&](int64_t b0, int64_t b1) {
                        float* work = scratch + (next_slot++ % slots_) * dxwork_;
                        for (int64_t bi = b0; bi < b1; ++bi) {
                          const int64_t i0 = bi * blk;
                          dxg_.Run(dyp + i0 * m * osize, std::min(blk, n - i0), packed, nullptr,
                                   dx->data<float>() + i0 * c * isize, work);
                        }
                      });
        } else if (dx && dx_direct_) {
          float* packed = scratch + wr_offset_;
          const float* pw = w.data<float>();
          const int64_t kk = ksize;
          for (int64_t g = 0; g < group_; ++g) {
            // Output channel ci of the transposed convolution reads input channel (dY's) co through the
            // forward weight W[co, ci] flipped in space.
            dxc_.PackWeights(
                [&](int64_t ci, int64_t co, int64_t k) { return pw[((g * mg + co) * cg + ci) * kk + (kk - 1 - k)]; },
                packed + g * dxc_.packed_size());
          }
          std::atomic<int> next_slot{0};
          ParallelFor(ctx.thread_pool(), n, 2.0 * static_cast<double>(m * cg * ksize * osize), [&](int64_t i0, int64_t i1) {
            float* work = scratch + (next_slot++ % slots_) * dxwork_;
            for (int64_t i = i0; i < i1; ++i) {
              for (int64_t g = 0; g < group_; ++g) {
                dxc_.Run(dyp + (i * m + g * mg) * osize, packed + g * dxc_.packed_size(), nullptr,
                         dx->data<float>() + (i * c + g * cg) * isize, work);
              }
            }
          });
        }
      }
      if (dx && !depthwise && padded_ && !dx_direct_ && !dx_pointwise_) {
        T* wr = scratch + wr_offset_;
        rows_.SplitWeights(w.data<T>(), group_, mg, cg, wr);
        std::atomic<int> next_slot{0};
        ParallelFor(ctx.thread_pool(), n, 2.0 * static_cast<double>(m * cg * ksize * osize), [&](int64_t i0, int64_t i1) {
          T* work = scratch + (next_slot++ % slots_) * dxwork_;
          for (int64_t i = i0; i < i1; ++i) {
            BackwardDataPadded<T>(dyp + i * m * osize, wr, dx->data<T>() + i * c * isize, c, m, work);
          }
        });
      } else if (dx && !depthwise && !padded_) {
        std::atomic<int> next_slot{0};
        ParallelFor(ctx.thread_pool(), n, 2.0 * static_cast<double>(m * cg * ksize * osize), [&](int64_t i0, int64_t i1) {
          T* col = scratch + (next_slot++ % slots_) * col_;
          for (int64_t i = i0; i < i1; ++i) {
            std::fill(dx->data<T>() + i * c * isize, dx->data<T>() + (i + 1) * c * isize, T(0));
            for (int64_t g = 0; g < group_; ++g) {
              Gemm<T>(true, false, cg * ksize, osize, mg, T(1), w.data<T>() + g * mg * cg * ksize,
                      dyp + (i * m + g * mg) * osize, T(0), col, nullptr);
              Col2Im(col, cg, in_, out_, geo_, dx->data<T>() + (i * c + g * cg) * isize);
            }
          }
        });
      }
      // 2a. 1x1, no pads: dW_g [mg, cg] = sum over images, in order, of dY_i,g [mg, O] * X_i,g [cg, O]^T, one
      // GEMM per image accumulating (the copies and partials of 2b cost more than these GEMMs of K = O:
      // MobileNet's 16 -> 64 at 16x16, 32 images, 0.96 -> 0.16 ms; 32 -> 128, 0.76 -> 0.48; a ResNet's
      // stride-2 shortcuts 16 -> 32 from 32x32, 0.64 -> 0.24 ms, 32 -> 64 from 16x16, 0.45 -> 0.15). X_i,g is the
      // image itself at stride 1, else its strided samples gathered. From 8 images the two halves of the
      // batch run in parallel, the second into a partial added after: a split fixed by the shape, so the
      // sums do not depend on the thread count. (Blocks of 32 output rows instead: 0.82 ms, for GEMMs too
      // small.)
      // On AVX-512 at stride 1, channel counts in fours and planes of whole vectors from 64 positions:
      // PointwiseWeightGrad, input channels split between threads (a split of the sums' owners, not of the
      // sums: the bits do not depend on the thread count).
      if constexpr (std::is_same_v<T, float>) {
        if (dw && dw_pointwise_ && dw_tiles_) {
          const bool input_outer = cg >= mg;  // x's rows the larger: the outer loop and the threads' split
          for (int64_t g = 0; g < group_; ++g) {
            const float* dyg = dyp + g * mg * osize;
            const float* xg = x.data<float>() + g * cg * isize;
            float* dwg = dw->data<float>() + g * mg * cg;
            const int64_t outer = (input_outer ? cg : mg) / 4, inner = input_outer ? mg : cg;
            ParallelFor(ctx.thread_pool(), outer, 2.0 * static_cast<double>(4 * inner * osize * n), [&](int64_t q0, int64_t q1) {
              if (input_outer) {
                PointwiseWeightGrad(dyg, m * osize, xg, c * isize, n, osize, 0, mg, 4 * q0, 4 * q1, true, dwg, cg);
              } else {
                PointwiseWeightGrad(dyg, m * osize, xg, c * isize, n, osize, 4 * q0, 4 * q1, 0, cg, false, dwg, cg);
              }
            });
          }
        }
      }
      if (dw && dw_pointwise_ && !dw_tiles_) {
        const int64_t halves = n >= 8 ? 2 : 1, half = (n + 1) / 2;
        T* out = dw->data<T>();
        T* partial = scratch;
        if (n == 0) std::fill(out, out + dw->NumElements(), T(0));
        for (int64_t g = 0; g < group_ && n > 0; ++g) {
          ParallelFor(ctx.thread_pool(), halves, 2.0 * static_cast<double>(mg * cg * osize * half), [&](int64_t h0, int64_t h1) {
            for (int64_t h = h0; h < h1; ++h) {
              const int64_t i0 = halves == 1 ? 0 : h * half, i1 = halves == 1 ? n : std::min(n, i0 + half);
              T* dst = h == 0 ? out + g * mg * cg : partial;
              T* gathered = scratch + mg * cg + h * dw_gather_;
              for (int64_t i = i0; i < i1; ++i) {
                const T* xi = x.data<T>() + (i * c + g * cg) * isize;
                int64_t ld = isize;
                if (dw_gather_ > 0) {
                  Im2ColStrided(xi, cg, in_, out_, geo_, gathered, osize);
                  xi = gathered;
                  ld = osize;
                }
                GemmLd<T>(false, true, mg, cg, osize, T(1), dyp + (i * m + g * mg) * osize, osize, xi, ld,
                          i == i0 ? T(0) : T(1), dst, cg);
              }
            }
          });
          if (halves == 2) {
            T* dst = out + g * mg * cg;
            for (int64_t e = 0; e < mg * cg; ++e) dst[e] += partial[e];
          }
        }
      }
      // 2b. Otherwise dW_g = sum over chunks of dY_g [mg, images*O] * col(X_g)^T [images*O, cg*K]: chunks in
      // parallel, each one GEMM (or DirectWeightGrad3x3) into its (transposed) partial, then the partials
      // added in chunk order.
      std::atomic<bool> bad_index{false};
      if (dw && !depthwise && !dw_pointwise_ && chunks_ > 0) {
        const int64_t ck = cg * ksize, cols = padded_ ? rows_.n : osize;
        // Partial rows: pld apart (dw_direct_: the output channels padded to a multiple of 16).
        const int64_t per_slot =
            dw_direct_ ? dwk_.copy_size(chunk_) + chunk_ * dwk_.transposed_size() : pad_ + (ck + mg) * chunk_ * cols;
        const int64_t pld = dw_direct_ ? dwk_.cout_padded() : mg;
        T* partials = scratch + per_slot * slots_;
        for (int64_t g = 0; g < group_; ++g) {
          std::atomic<int> next_slot{0};
          const double cost = 2.0 * static_cast<double>(mg * ck * chunk_ * osize);
          if constexpr (std::is_same_v<T, float>) {
            if (dw_direct_) {
              // Per chunk: its images padded and their dY transposed, then the direct kernel into the partial.
              ParallelFor(ctx.thread_pool(), chunks_, cost, [&](int64_t k0, int64_t k1) {
                const int slot = next_slot++ % slots_;
                float* xp = scratch + slot * per_slot;
                float* dyt = xp + dwk_.copy_size(chunk_);
                // The images read where they lie (c * isize apart) by RunInPlace where it applies, or without
                // pads in one group (the chunk's images, image_size() apart, are x itself); else copied padded.
                const bool in_place = dwk_.in_place();
                const bool as_padded = group_ == 1 && dwk_.unpadded();
                for (int64_t k = k0; k < k1; ++k) {
                  const int64_t i0 = k * chunk_, i1 = std::min(n, i0 + chunk_);
                  for (int64_t i = i0; i < i1; ++i) {
                    if (!in_place && !as_padded) {
                      dwk_.PadImage(x.data<float>() + (i * c + g * cg) * isize, xp + (i - i0) * dwk_.image_size());
                    }
                    const float* dyi = dyp + (i * m + g * mg) * osize;
                    float* dyti = dyt + (i - i0) * dwk_.transposed_size();
                    if (unpool_transposed_) {  // this image's dY made in the transposed layout
                      const Tensor& dz = *ctx.input(0);
                      const int64_t psize = dz.dim(2) * dz.dim(3);
                      dwk_.UnpoolOutputGrad(dz.data<float>() + i * m * psize,
                                            ctx.input(1)->data<uint8_t>() + i * m * psize, dz.dim(2), dz.dim(3),
                                            scratch + dy_offset_ + (slot % slots_) * dy_slot_, dyti);
                    } else {
                      if (per_image_) {  // this image's dY into the thread's buffer
                        float* buf = scratch + dy_offset_ + (slot % slots_) * dy_slot_;
                        if (!ScatterPooledImage(ctx, i, m, osize, buf)) {
                          bad_index.store(true);
                          continue;
                        }
                        dyi = buf;
                      }
                      dwk_.TransposeOutputGrad(dyi, dyti);
                    }
                    if (dt_sums_) dwk_.ChannelSums(dyti, row_sums + i * m);
                  }
                  if (in_place) {
                    dwk_.RunInPlace(x.data<float>() + (i0 * c + g * cg) * isize, c * isize, dyt, i1 - i0,
                                    partials + k * pld * ck);
                  } else {
                    dwk_.Run(as_padded ? x.data<float>() + i0 * c * isize : xp, dyt, i1 - i0, partials + k * pld * ck);
                  }
                }
              });
            }
          }
          if (!dw_direct_) ParallelFor(ctx.thread_pool(), chunks_, cost, [&](int64_t k0, int64_t k1) {
            T* xp = scratch + (next_slot++ % slots_) * per_slot;
            T* col = xp + pad_;
            T* dy_t = col + ck * chunk_ * cols;
            for (int64_t k = k0; k < k1; ++k) {
              const int64_t i0 = k * chunk_, i1 = std::min(n, i0 + chunk_), ld = (i1 - i0) * cols;
              for (int64_t i = i0; i < i1; ++i) {
                const T* xi = x.data<T>() + (i * c + g * cg) * isize;
                const T* dyi = dyp + (i * m + g * mg) * osize;
                if (padded_) {
                  // A 1x1 window without pads: the image is its own padded plane (no copy).
                  const T* src = xi;
                  if (!rows_.trivial()) {
                    rows_.Pad(xi, cg, xp);
                    src = xp;
                  }
                  rows_.Im2Col(src, cg, col + (i - i0) * cols, ld);
                  rows_.Spread(dyi, mg, dy_t + (i - i0) * cols, ld);
                  continue;
                }
                Im2ColStrided(xi, cg, in_, out_, geo_, col + (i - i0) * osize, ld);
                for (int64_t r = 0; r < mg; ++r) std::copy_n(dyi + r * osize, osize, dy_t + r * ld + (i - i0) * osize);
              }
              // dW^T [ck, mg] = col [ck, ld] * dY_t^T: the long side as M runs about twice as fast in the GEMM
              // as dW = dY_t * col^T (measured with oneDNN on mg = 16, ck = 144).
              Gemm<T>(false, true, ck, mg, ld, T(1), col, dy_t, T(0), partials + k * mg * ck, nullptr);
            }
          });
          // The partials added in chunk order into the first (contiguous runs, vectorized), then dW^T [ck, mg]
          // transposed into dW [mg, ck] by tiles (reading the partials down their columns missed the cache).
          T* out = dw->data<T>() + g * mg * ck;
          ParallelFor(ctx.thread_pool(), ck, static_cast<double>(pld * chunks_), [&](int64_t q0, int64_t q1) {
            T* acc = partials + q0 * pld;
            const int64_t len = (q1 - q0) * pld;
            for (int64_t k = 1; k < chunks_; ++k) {
              const T* p = partials + k * pld * ck + q0 * pld;
              for (int64_t e = 0; e < len; ++e) acc[e] += p[e];
            }
          });
          constexpr int64_t kTile = 16;
          ParallelFor(ctx.thread_pool(), (mg + kTile - 1) / kTile, static_cast<double>(kTile * ck), [&](int64_t b0, int64_t b1) {
            for (int64_t r0 = b0 * kTile; r0 < std::min(mg, b1 * kTile); r0 += kTile) {
              const int64_t r1 = std::min(mg, r0 + kTile);
              for (int64_t q0 = 0; q0 < ck; q0 += kTile) {
                const int64_t q1 = std::min(ck, q0 + kTile);
                for (int64_t r = r0; r < r1; ++r) {
                  for (int64_t q = q0; q < q1; ++q) out[r * ck + q] = partials[q * pld + r];  // dW[r, q] is dW^T[q, r]
                }
              }
            }
          });
        }
      }
      if (bad_index.load()) return PooledIndexError();
      // dB: per channel, the images' rows summed in double in LaneSum's fixed order (vectorized; one running
      // float sum was a 4-cycle add chain per element, 1.6 ms of the benchmark CNN's first ConvGrad).
      if (db) {
        ParallelFor(ctx.thread_pool(), m, static_cast<double>(n * osize), [&](int64_t j0, int64_t j1) {
          for (int64_t j = j0; j < j1; ++j) {
            double s = 0;
            for (int64_t i = 0; i < n; ++i) {
              const T* row = dyp + (i * m + j) * osize;
              if (dt_sums_) s += row_sums[i * m + j];
              else if constexpr (std::is_same_v<T, float>) s += VRowSum(row, osize);
              else s += LaneSum(osize, [row](int64_t o) { return static_cast<double>(row[o]); });
            }
            db->data<T>()[j] = static_cast<T>(s);
          }
        });
      }
      if (dw && n == 0 && !dw_pointwise_) std::fill(dw->data<T>(), dw->data<T>() + dw->NumElements(), T(0));
      return Status::OK();
    });
  }

 private:
  // MaxPoolReluGrad's dX for image i (MaxPoolReluConvGrad; float32): each of its m planes zeroed, then dZ
  // scattered to the indices where Z is positive, the adds of MaxPoolGradKernel in the same order (or the
  // same bits by VPlanesMaxUnpool2x2 where every index lies in its 2x2 window). False when an index leaves
  // its plane (MaxPool's never do).
  bool ScatterPooledImage(KernelContext& ctx, int64_t i, int64_t m, int64_t osize, float* out) const {
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

  Status PooledIndexError() const {
    return InvalidArgument("Indices point outside their own [N, C] plane of the pooled tensor; MaxPool's never do");
  }

  // 1 MB: one Zen 5 core's L2; also more chunks to share between threads (the ResNet's ConvGrad at 2 threads
  // 28.4 -> 27.3 ms, peak RSS 197 -> 163 MB, against 4 MB).
  static constexpr int64_t kChunkBytes = int64_t{1} << 20;

  // dX's convolution (dY in, dX out, the weights transposed and flipped) where it exists: pads
  // d * (k - 1) - p >= 0 on every side, in the padded-rows layout. Returns whether it does.
  bool TransposedGeometry(PaddedRows* rows) const {
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
  bool WinogradRows(int64_t c, int64_t m) {
    if (group_ != 1 || !Winograd3x3::Applies(rows_, c, m)) return false;
    PaddedRows t;
    dx_flipped_ = TransposedGeometry(&t) && Winograd3x3::Applies(t, m, c);
    dxg_ = dx_flipped_ ? Winograd3x3(t, m, c) : Winograd3x3::InputGrad(rows_, c, m);
    return true;
  }

  // Sets dxc_ to dX's convolution where the direct kernel takes it. Returns whether it does.
  bool TransposedRows(int64_t c, int64_t m) {
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

  // dX of one image in the padded-rows layout: for each patch position k in order, the padded dX shifted by
  // k ([cg, n], rows a plane apart) += Wr_g,k^T [cg, mg] times dY_g with zero gaps; the interior is dX.
  // `work` holds dxwork_ elements.
  template <typename T>
  void BackwardDataPadded(const T* dy, const T* wr, T* dx, int64_t c, int64_t m, T* work) const {
    const PaddedRows& pr = rows_;
    const int64_t cg = c / group_, mg = m / group_, kk = pr.kh * pr.kw, isize = pr.h * pr.w, osize = pr.oh * pr.ow;
    T* xp = work;
    T* dyp = xp + pad_;
    for (int64_t g = 0; g < group_; ++g) {
      const T* wg = wr + g * kk * mg * cg;
      const T* dyg = dy + g * mg * osize;
      T* dxg = dx + g * cg * isize;
      if (pr.trivial()) {  // 1x1, no pads: dX_g = W_g^T dY_g directly
        Gemm<T>(true, false, cg, pr.n, mg, T(1), wg, dyg, T(0), dxg, nullptr);
        continue;
      }
      pr.Spread(dyg, mg, dyp, pr.n);
      std::fill(xp, xp + pad_, T(0));
      for (int64_t k = 0; k < kk; ++k) {
        GemmLd<T>(true, false, cg, pr.n, mg, T(1), wg + k * mg * cg, cg, dyp, pr.n, T(1), xp + pr.shift(k), pr.plane());
      }
      pr.Crop(xp, cg, dxg);
    }
  }

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

}  // namespace

KernelFactory kConvGrad = MakeKernel<ConvGradKernel>;
KernelFactory kMaxPoolReluConvGrad = MakeKernel<ConvGradKernel>;

}  // namespace cpu
}  // namespace ontrain
