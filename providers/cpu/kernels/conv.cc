// Conv (and FusedConv with ReLU, and FusedConvMaxPool) as im2col plus Gemm, per image and per group, for
// 1-D, 2-D and 3-D inputs;
// stride-1 2-D convolutions of float32 on AVX-512 CPUs (and stride-2 3x3 ones where its row tiles take them)
// by the direct kernel of direct_conv.h, or for 3x3 windows with pads of at most 1 and 8 or more channels
// each side by Winograd's F(2x2, 3x3) (winograd.h), elsewhere as
// kh * kw GEMMs over the padded-rows layout of conv_geometry.h (or one GEMM over that layout's patch matrix
// when there are few input channels).
#include <immintrin.h>

#include <algorithm>
#include <atomic>

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

// y = max(y, 0), 16 floats a step (the scalar loop took 3% of the benchmark CNN's step). vmaxps returns its
// second operand, +0, for a NaN or a zero of either sign in the first: what x > 0 ? x : 0 gives.
__attribute__((target("avx512f"))) void ReluInPlaceAvx512(float* y, int64_t n) {
  const __m512 zero = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_max_ps(_mm512_loadu_ps(y + i), zero));
  if (i < n) {
    const __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(y + i, tail, _mm512_max_ps(_mm512_maskz_loadu_ps(tail, y + i), zero));
  }
}

// One Compute call's operands, sizes and scratch, which its paths share (b null without a bias).
template <typename T>
struct ConvPass {
  KernelContext& ctx;
  const T* x;
  const T* w;
  const T* b;
  int64_t n, c, m, cg, mg, isize, osize, ksize;
  int64_t posize;  // one output image as computed: pool_in_'s positions when pooled, else osize
  T* scratch;
};

// Conv, and com.microsoft FusedConv with activation "Relu" (the engine's Conv + Relu fusion,
// engine/kernel_fusion.h; ONNX Runtime writes the same node): the activation is applied to each image's
// output right after it is computed, while it is in cache, as Relu computes it (x > 0 ? x : 0).
// ai.ontrain FusedConvMaxPool (the engine's FusedConv + MaxPool fusion) is FusedConv followed by MaxPool with
// 2x2 windows at stride 2, no pads (its only pooling), outputs (Y, Indices?) as MaxPool's, or with
// compact_indices = 1 Indices as uint8 window codes (vrows.h): each image's activations go to a buffer of
// its thread and are pooled from there, never written to memory whole.
class ConvKernel : public OpKernel {
 public:
  explicit ConvKernel(const NodeInfo& info)
      : node_(*info.node),
        group_(info.node->GetInt("group", 1)),
        fused_(info.node->op_type == "FusedConv" || info.node->op_type == "FusedConvMaxPool"),
        pool_(info.node->op_type == "FusedConvMaxPool"),
        compact_(pool_ && info.node->GetInt("compact_indices", 0) != 0) {
    pool_geo_.kernel = {2, 2};
    pool_geo_.strides = {2, 2};
    pool_geo_.dilations = {1, 1};
    pool_geo_.pads = {0, 0, 0, 0};
  }

  // X [N, C, in...], W [M, C/group, k...], B [M] -> Y [N, M, out...]
  Status Prepare(KernelContext& ctx) override {
    ONT_RETURN_IF_ERROR(CheckInputs(ctx));
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1);
    const int64_t c = x.dim(1), m = w.dim(0);
    in_.assign(x.shape().begin() + 2, x.shape().end());
    geo_ = WindowAttrs::FromNode(node_, Shape(w.shape().begin() + 2, w.shape().end()));
    ONT_ASSIGN_OR_RETURN(out_, geo_.OutputDims(in_));
    PlanPaths(x, w);
    slots_ = ctx.thread_pool() ? ctx.thread_pool()->num_threads() : 1;
    if (!pool_) {
      Shape y = {x.dim(0), m};
      y.insert(y.end(), out_.begin(), out_.end());
      ctx.RequestScratch(static_cast<size_t>(col_ * slots_ + wr_) * DTypeSize(x.dtype()));
      return ctx.DeclareOutput(0, x.dtype(), y);
    }
    if (in_.size() != 2) {
      return InvalidArgument("FusedConvMaxPool pools two spatial dims; X ", ShapeToString(x.shape()), " has ",
                             in_.size());
    }
    return PlanPool(ctx, x, c, m);
  }

  // Images run in parallel, each with its own patch matrix; every image is computed by the same calls
  // whatever the thread count, so the results do not depend on it. With pool_, each image's output goes to
  // its thread's buffer and is pooled from there (Pool).
  Status Compute(KernelContext& ctx) override {
    const Tensor &x = *ctx.input(0), &w = *ctx.input(1);
    const Tensor* b = ctx.input(2);
    return DispatchFloat32Or64(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      const int64_t c = x.dim(1), m = w.dim(0), osize = ShapeNumElements(out_);
      const ConvPass<T> p{ctx, x.data<T>(), w.data<T>(), b ? b->data<T>() : nullptr, x.dim(0), c, m, c / group_,
                          m / group_, ShapeNumElements(in_), osize, ShapeNumElements(geo_.kernel),
                          pool_ ? ShapeNumElements(pool_in_) : osize, static_cast<T*>(ctx.scratch())};
      if (IsDepthwise2D(c, m, group_, in_.size())) {
        RunDepthwise(p);
        return Status::OK();
      }
      if constexpr (std::is_same_v<T, float>) {
        if (pointwise_) RunPointwise(p);
        else if (wino_) RunWinograd(p);
        else if (direct_) RunDirect(p);
        if (pointwise_ || wino_ || direct_) return Status::OK();
      }
      if (padded_) RunPadded(p);
      else RunIm2Col(p);
      return Status::OK();
    });
  }

 private:
  // FusedConv's attributes, the operands' ranks, dtypes and channels, and the bias.
  Status CheckInputs(KernelContext& ctx) const {
    if (fused_) {
      const std::string act = node_.GetString("activation", "");
      if (act != "Relu") {
        return InvalidArgument(node_.op_type, " activation \"", act, "\" is not supported (only Relu)");
      }
      if (ctx.num_inputs() > 3 && ctx.input(3) != nullptr) return InvalidArgument("FusedConv's Z input is not supported");
    }
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* w, RequireInput(ctx, 1, "W"));
    if (x->rank() < 3 || w->rank() != x->rank()) {
      return InvalidArgument("X ", ShapeToString(x->shape()), " and W ", ShapeToString(w->shape()),
                             " must both have rank >= 3 and equal rank");
    }
    if (x->dtype() != w->dtype()) return InvalidArgument("X is ", DTypeName(x->dtype()), ", W is ", DTypeName(w->dtype()));
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 2}));  // B
    const int64_t c = x->dim(1), m = w->dim(0);
    if (group_ <= 0 || c % group_ != 0 || m % group_ != 0 || w->dim(1) * group_ != c) {
      return InvalidArgument("channels do not match: X has ", c, ", W ", ShapeToString(w->shape()), ", group ", group_);
    }
    if (const Tensor* b = ctx.input(2)) {
      if (b->rank() != 1 || b->dim(0) != m) return InvalidArgument("B ", ShapeToString(b->shape()), " must be [", m, "]");
    }
    return Status::OK();
  }

  // Which path computes the images, and its work memory per thread (col_) and shared (wr_).
  void PlanPaths(const Tensor& x, const Tensor& w) {
    const int64_t c = x.dim(1), m = w.dim(0);
    col_ = (c / group_) * ShapeNumElements(geo_.kernel) * ShapeNumElements(out_);
    padded_ = PaddedRows::Applies(in_, geo_);
    wr_ = 0;
    direct_ = false;
    wino_ = false;
    wino_pool_ = false;
    relu_after_pool_ = false;
    slot_images_ = 1;
    if (!padded_ && x.dtype() == DType::kFloat32 && DirectConv2D::Available() && in_.size() == 2 &&
        geo_.strides == Shape{2, 2} && std::all_of(geo_.pads.begin(), geo_.pads.end(), [](int64_t p) { return p >= 0; })) {
      // Stride 2 (downsampling): the direct kernel's row tiles where they take the window and channels.
      const PaddedRows rows(in_, out_, geo_);
      DirectConv2D dc(rows, c / group_, m / group_, 2);
      if (dc.row_tiles()) {
        rows_ = rows;
        direct_ = true;
        dc_ = dc;
        col_ = dc_.work_size();
        wr_ = group_ * dc_.packed_size();
      }
    }
    if (padded_) PlanPadded(x, w);
    // 1x1 windows at stride 1 without pads, float32 on AVX-512: PointwiseConv over the whole batch (the
    // positions of all images as one row of vectors), not one GEMM per image, except on planes of 256
    // positions and more with fewer than 64 input channels, where the GEMM stores its output faster
    // (MobileNet, one thread, ms, GEMMs -> PointwiseConv: 4x4 planes 128 -> 32 channels 0.055 -> 0.020,
    // 64 -> 256 0.197 -> 0.165, 32 -> 128 0.104 -> 0.051; 8x8 24 -> 96 0.171 -> 0.155; 16x16 128 -> 16
    // 0.235 -> 0.209, but 16 -> 64 0.134 -> 0.200 and 32 -> 128 0.326 -> 0.432).
    // (The same 1x1 test as ConvGrad's dX: padded rows, trivial.)
    const int64_t positions = ShapeNumElements(out_);
    pointwise_ = padded_ && rows_.trivial() && group_ == 1 && !pool_ && x.dtype() == DType::kFloat32 &&
                 DirectConv2D::Available() && positions > 0 && positions % 16 == 0 && (positions < 256 || c >= 64);
    if (pointwise_) col_ = wr_ = 0;  // no patch matrices, packed or split weights
  }

  // The padded-rows layout's paths: shifted GEMMs, one patch matrix, the direct kernel or Winograd's.
  void PlanPadded(const Tensor& x, const Tensor& w) {
    const int64_t c = x.dim(1), m = w.dim(0);
    // Per thread: the padded image and the product before the gaps are dropped; shared: the weights split
    // by patch position (kh * kw GEMMs over shifted views of the padded image, no patch matrix).
    rows_ = PaddedRows(in_, out_, geo_);
    col_ = (c / group_) * rows_.plane() + (m / group_) * rows_.n;
    // Few input channels (an image's stem): the shifted GEMMs would have K = cg (1 or 3), far too thin, so
    // one patch matrix [cg * kh * kw, n] and one GEMM instead (measured 2.1x faster at cg = 1 on the
    // benchmark CNN, 1.4x at cg = 3; at cg = 16 the shifted GEMMs were 10% faster).
    im2col_ = (c / group_) < kMinShiftedChannels && !rows_.trivial();
    if (im2col_) col_ += (c / group_) * rows_.kh * rows_.kw * rows_.n;
    wr_ = im2col_ ? 0 : w.NumElements();  // the im2col path reads W as it is
    // float32 on an AVX-512 CPU: the direct kernel (register tiles, no GEMM passes over the output).
    direct_ = x.dtype() == DType::kFloat32 && !rows_.trivial() && DirectConv2D::Available() && DirectConv2D::Fits(rows_);
    if (direct_) {
      dc_ = DirectConv2D(rows_, c / group_, m / group_);
      col_ = dc_.work_size();
      wr_ = group_ * dc_.packed_size();
    }
    // 3x3 windows of enough channels: Winograd's F(2x2, 3x3), blocks of images per call (winograd.h).
    wino_ = x.dtype() == DType::kFloat32 && group_ == 1 && Winograd3x3::Applies(rows_, c, m);
    if (wino_) {
      wg_ = Winograd3x3(rows_, c, m);
      wg_.set_relu(fused_);  // the activation as the outputs are stored, not in a pass after
      col_ = wg_.work_size();
      wr_ = wg_.packed_size();
      slot_images_ = wg_.block();
    }
  }

  // FusedConvMaxPool: the pooled dims, what the convolution computes for them, where the Relu runs, and the
  // scratch with each thread's activations; declares the outputs.
  Status PlanPool(KernelContext& ctx, const Tensor& x, int64_t c, int64_t m) {
    // MaxPool's output dims, floor((d - 2) / 2) + 1, and per thread one image's activations.
    pooled_ = {out_[0] >= 2 ? (out_[0] - 2) / 2 + 1 : 0, out_[1] >= 2 ? (out_[1] - 2) / 2 + 1 : 0};
    pool_in_ = out_;
    // The pooling reads only the first 2 * pooled rows and columns: on Winograd's kernel only their tiles
    // are computed (the benchmark CNN's 11x11 outputs: 25 tiles of 36), each with the bits it has in the
    // whole output (a tile's sums do not depend on the others). Not with int64 Indices, which number the
    // whole output's elements.
    const bool int64_indices = !compact_ && ctx.num_outputs() > 1 && ctx.output_requested(1);
    if (wino_ && !int64_indices && pooled_[0] > 0 && pooled_[1] > 0 &&
        (2 * pooled_[0] < out_[0] || 2 * pooled_[1] < out_[1])) {
      PaddedRows used = rows_;
      used.oh = 2 * pooled_[0];
      used.ow = 2 * pooled_[1];
      wg_ = Winograd3x3(used, c, m);
      wg_.set_relu(fused_);
      col_ = wg_.work_size();
      slot_images_ = wg_.block();
      pool_in_ = {used.oh, used.ow};
    }
    // Winograd's tiles are the pooling windows when the pooled outputs are all that is computed: its output
    // transform pools them (window codes, or no Indices at all), so no activations are stored.
    // Relu commutes with the max: Relu(max) has max(Relu)'s bits (a NaN or -0 gives +0 either way) and is
    // positive exactly where some element is, at the same first maximum; only the position of a window
    // whose values are all <= 0 can differ, which window codes ignore (their positive bit is clear) but int64
    // Indices would show. So without int64 Indices the Relu runs on the pooled values, a quarter of the
    // activations (Winograd's kernel applies it as it stores).
    relu_after_pool_ = fused_ && !int64_indices && !wino_;
    wino_pool_ = wino_ && !int64_indices && pool_in_ == Shape{2 * pooled_[0], 2 * pooled_[1]} && wg_.can_pool();
    if (wino_pool_) wg_.set_pool(true);
    const Shape z = {x.dim(0), m, pooled_[0], pooled_[1]};
    const int64_t activations = wino_pool_ ? 0 : slots_ * slot_images_ * m * ShapeNumElements(pool_in_);
    size_t bytes = static_cast<size_t>(col_ * slots_ + wr_ + activations) * DTypeSize(x.dtype());
    // Whole planes through VPlanesMaxPool2x2 (or its Codes form) where MaxPool takes them; window codes
    // elsewhere need each image's int64 indices in a buffer of its thread first.
    planes_2x2_ = x.dtype() == DType::kFloat32 && VPlaneMaxPoolAvailable() && ShapeNumElements(out_) < (int64_t{1} << 31);
    index_offset_ = (bytes + 7) / 8 * 8;
    if (compact_ && !planes_2x2_) bytes = index_offset_ + static_cast<size_t>(slots_ * m * ShapeNumElements(pooled_)) * 8;
    ctx.RequestScratch(bytes);
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x.dtype(), z));
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      return ctx.DeclareOutput(1, compact_ ? DType::kUInt8 : DType::kInt64, z);
    }
    return Status::OK();
  }

  // Where image i's output goes: a thread's slot of the scratch when pooled, else the output.
  template <typename T>
  T* ImageOut(const ConvPass<T>& p, int64_t i, int64_t slot) const {
    return pool_ ? p.scratch + col_ * slots_ + wr_ + slot * slot_images_ * p.m * p.posize
                 : p.ctx.output(0)->template data<T>() + i * p.m * p.osize;
  }

  // What follows image i's output yi: the Relu (unless after the pooling), the pooling.
  template <typename T>
  void Finish(const ConvPass<T>& p, int64_t i, T* yi, int64_t slot) const {
    if (fused_ && !relu_after_pool_) ReluInPlace(yi, p.m * p.osize);
    if (pool_) Pool(yi, i, p.m, p.ctx, slot);
  }

  // Multiply-adds of one image, the pool's measure of a share of work.
  template <typename T>
  double ImageCost(const ConvPass<T>& p) const {
    return 2.0 * static_cast<double>(p.m * p.cg * p.ksize * p.osize);
  }

  // Images in parallel: fn(i, yi, work) computes image i's output yi with its thread's work memory (col_
  // elements), then Finish.
  template <typename T, typename F>
  void ForEachImage(const ConvPass<T>& p, const F& fn) const {
    std::atomic<int> next_slot{0};
    ParallelFor(p.ctx.thread_pool(), p.n, ImageCost(p), [&](int64_t i0, int64_t i1) {
      const int64_t slot = next_slot++ % slots_;
      T* work = p.scratch + slot * col_;
      for (int64_t i = i0; i < i1; ++i) {
        T* yi = ImageOut(p, i, slot);
        fn(i, yi, work);
        Finish(p, i, yi, slot);
      }
    });
  }

  // Depthwise windows (depthwise.h): the whole batch at once, or image by image into the pooling.
  template <typename T>
  void RunDepthwise(const ConvPass<T>& p) const {
    if (!pool_) {
      T* y = p.ctx.output(0)->template data<T>();
      DepthwiseForward<T>(p.x, p.w, p.b, y, p.n, p.c, in_.data(), out_.data(), geo_, p.ctx.thread_pool());
      if (fused_) {
        const int64_t image = p.m * p.osize;
        ParallelFor(p.ctx.thread_pool(), p.n, static_cast<double>(image),
                    [&](int64_t i0, int64_t i1) { ReluInPlace(y + i0 * image, (i1 - i0) * image); });
      }
      return;
    }
    std::atomic<int> next_slot{0};
    ParallelFor(p.ctx.thread_pool(), p.n, 2.0 * static_cast<double>(p.m * p.ksize * p.osize), [&](int64_t i0, int64_t i1) {
      const int64_t slot = next_slot++ % slots_;
      for (int64_t i = i0; i < i1; ++i) {
        T* yi = ImageOut(p, i, slot);
        DepthwiseForward<T>(p.x + i * p.c * p.isize, p.w, p.b, yi, 1, p.c, in_.data(), out_.data(), geo_, nullptr);
        Finish(p, i, yi, slot);
      }
    });
  }

  // 1x1 windows: vectors of 16 positions over the batch; each output element by one tile.
  void RunPointwise(const ConvPass<float>& p) const {
    ParallelFor(p.ctx.thread_pool(), p.n * (p.osize / 16), 2.0 * static_cast<double>(p.m * p.c * 16),
                [&](int64_t v0, int64_t v1) {
                  PointwiseConv(p.x, p.c * p.isize, p.w, p.c, 1, p.b, fused_, p.ctx.output(0)->data<float>(),
                                p.m * p.osize, p.osize, p.m, p.c, v0, v1);
                });
  }

  // Winograd's F(2x2, 3x3): blocks of wg_.block() images; each image's outputs whatever its block.
  void RunWinograd(const ConvPass<float>& p) const {
    const int64_t n = p.n, c = p.c, m = p.m, isize = p.isize;
    float* packed = p.scratch + col_ * slots_;
    wg_.PackWeights(p.w, c * 9, 9, false, packed);
    const int64_t blk = wg_.block();
    std::atomic<int> next_slot{0};
    ParallelFor(p.ctx.thread_pool(), (n + blk - 1) / blk, ImageCost(p) * static_cast<double>(blk), [&](int64_t b0, int64_t b1) {
      const int64_t slot = next_slot++ % slots_;
      float* work = p.scratch + slot * col_;
      for (int64_t bi = b0; bi < b1; ++bi) {
        const int64_t i0 = bi * blk, nb = std::min(blk, n - i0);
        if (wino_pool_) {  // pooled by the output transform, straight into outputs 0 and 1
          const int64_t psize = ShapeNumElements(pooled_);
          Tensor* codes = p.ctx.num_outputs() > 1 ? p.ctx.output(1) : nullptr;
          wg_.Run(p.x + i0 * c * isize, nb, packed, p.b, p.ctx.output(0)->data<float>() + i0 * m * psize, work,
                  codes ? codes->data<uint8_t>() + i0 * m * psize : nullptr);
          continue;
        }
        float* yb = ImageOut(p, i0, slot);
        wg_.Run(p.x + i0 * c * isize, nb, packed, p.b, yb, work);
        if (pool_) {
          for (int64_t j = 0; j < nb; ++j) Pool(yb + j * m * p.posize, i0 + j, m, p.ctx, slot);
        }
      }
    });
  }

  // The direct kernel (direct_conv.h), image by image and group by group.
  void RunDirect(const ConvPass<float>& p) const {
    const int64_t c = p.c, cg = p.cg, mg = p.mg, kk = p.ksize;
    float* packed = p.scratch + col_ * slots_;
    for (int64_t g = 0; g < group_; ++g) {
      dc_.PackWeights([&](int64_t o, int64_t ci, int64_t k) { return p.w[((g * mg + o) * cg + ci) * kk + k]; },
                      packed + g * dc_.packed_size());
    }
    ForEachImage(p, [&](int64_t i, float* yi, float* work) {
      for (int64_t g = 0; g < group_; ++g) {
        dc_.Run(p.x + (i * c + g * cg) * p.isize, packed + g * dc_.packed_size(), p.b ? p.b + g * mg : nullptr,
                yi + g * mg * p.osize, work);
      }
    });
  }

  // Padded rows by GEMMs (ForwardPadded), image by image.
  template <typename T>
  void RunPadded(const ConvPass<T>& p) const {
    T* wr = p.scratch + col_ * slots_;
    if (!im2col_) rows_.SplitWeights(p.w, group_, p.mg, p.cg, wr);
    ForEachImage(p, [&](int64_t i, T* yi, T* work) {
      ForwardPadded<T>(p.x + i * p.c * p.isize, wr, p.w, p.b, yi, p.c, p.m, work);
    });
  }

  // Any other geometry: per image and group the patch matrix (Im2Col) and one GEMM, then the bias.
  template <typename T>
  void RunIm2Col(const ConvPass<T>& p) const {
    const int64_t c = p.c, m = p.m, cg = p.cg, mg = p.mg, isize = p.isize, osize = p.osize, ksize = p.ksize;
    ForEachImage(p, [&](int64_t i, T* yi, T* col) {
      for (int64_t g = 0; g < group_; ++g) {
        Im2Col(p.x + (i * c + g * cg) * isize, cg, in_, out_, geo_, col);
        // Y_g [mg, osize] = W_g [mg, cg*ksize] * col [cg*ksize, osize]
        Gemm<T>(false, false, mg, osize, cg * ksize, T(1), p.w + g * mg * cg * ksize, col, T(0), yi + g * mg * osize,
                nullptr);
      }
      if (p.b) {
        for (int64_t j = 0; j < m; ++j) {
          T* row = yi + j * osize;
          T bj = p.b[j];
          for (int64_t o = 0; o < osize; ++o) row[o] += bj;
        }
      }
    });
  }

  template <typename T>
  static void ReluInPlace(T* y, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      if (DirectConv2D::Available()) {  // AVX-512F
        ReluInPlaceAvx512(y, n);
        return;
      }
    }
    for (int64_t i = 0; i < n; ++i) y[i] = y[i] > T(0) ? y[i] : T(0);
  }

  // One image [c, H, W] -> [m, OH, OW] in the padded-rows layout: Y_g = sum over patch positions k of
  // Wr_g,k [mg, cg] times the padded image shifted by k ([cg, n], rows a plane apart), accumulated in
  // position order, then the gaps dropped; or (im2col_) W_g times the padded image's patch matrix. `work`
  // holds col_ elements.
  template <typename T>
  void ForwardPadded(const T* x, const T* wr, const T* w, const T* bias, T* y, int64_t c, int64_t m, T* work) const {
    const PaddedRows& pr = rows_;
    const int64_t cg = c / group_, mg = m / group_, kk = pr.kh * pr.kw, isize = pr.h * pr.w, osize = pr.oh * pr.ow;
    T* xp = work;
    T* yp = xp + cg * pr.plane();
    for (int64_t g = 0; g < group_; ++g) {
      const T* wg = wr + g * kk * mg * cg;
      const T* bg = bias ? bias + g * mg : nullptr;
      T* yg = y + g * mg * osize;
      if (pr.trivial()) {  // 1x1, no pads: the image is the patch matrix and the product is Y
        Gemm<T>(false, false, mg, pr.n, cg, T(1), wg, x + g * cg * isize, T(0), yg, nullptr);
        if (bg) pr.Gather(yg, mg, pr.n, yg, bg);
        continue;
      }
      pr.Pad(x + g * cg * isize, cg, xp);
      if (im2col_) {
        T* col = yp + mg * pr.n;
        pr.Im2Col(xp, cg, col, pr.n);
        Gemm<T>(false, false, mg, pr.n, cg * kk, T(1), w + g * mg * cg * kk, col, T(0), yp, nullptr);
        pr.Gather(yp, mg, pr.n, yg, bg);
        continue;
      }
      for (int64_t k = 0; k < kk; ++k) {
        GemmLd<T>(false, false, mg, pr.n, cg, T(1), wg + k * mg * cg, cg, xp + pr.shift(k), pr.plane(), k ? T(1) : T(0),
                  yp, pr.n);
      }
      pr.Gather(yp, mg, pr.n, yg, bg);
    }
  }


  // Pools image i's activations y [m, oh, ow] into outputs 0 and 1 (when requested) as MaxPool does from the
  // whole tensor: VPlanesMaxPool2x2 where MaxPool takes it (float32 on AVX-512), else MaxPool2D; the indices
  // (relative to y) moved by the image's offset, or (compact_) window codes.
  // With relu_after_pool_, the Relu after the pooling, on a quarter of the values.
  template <typename T>
  void Pool(const T* y, int64_t i, int64_t m, KernelContext& ctx, int64_t slot) const {
    PoolPlanes(y, i, m, ctx, slot);
    const int64_t psize = ShapeNumElements(pooled_);
    if (relu_after_pool_) ReluInPlace(ctx.output(0)->data<T>() + i * m * psize, m * psize);
  }

  template <typename T>
  void PoolPlanes(const T* y, int64_t i, int64_t m, KernelContext& ctx, int64_t slot) const {
    const int64_t psize = ShapeNumElements(pooled_), osize = ShapeNumElements(pool_in_);
    if (psize == 0) return;
    T* z = ctx.output(0)->data<T>() + i * m * psize;
    Tensor* indices = ctx.num_outputs() > 1 ? ctx.output(1) : nullptr;
    if (compact_ && indices != nullptr) {
      uint8_t* codes = indices->data<uint8_t>() + i * m * psize;
      if constexpr (std::is_same_v<T, float>) {
        if (planes_2x2_) {
          VPlanesMaxPool2x2Codes(y, pool_in_[0], pool_in_[1], pooled_[0], pooled_[1], 0, m, z, codes);
          return;
        }
      }
      int64_t* ind = reinterpret_cast<int64_t*>(static_cast<uint8_t*>(ctx.scratch()) + index_offset_) + slot * m * psize;
      MaxPool2D<T>(y, z, ind, 0, m, m, pool_in_, pooled_, pool_geo_, 0);
      for (int64_t p = 0; p < m; ++p) {
        for (int64_t a = 0; a < pooled_[0]; ++a) {
          for (int64_t b = 0; b < pooled_[1]; ++b) {
            const int64_t e = (p * pooled_[0] + a) * pooled_[1] + b;
            codes[e] = WindowCode(ind[e] - p * osize, a, b, pool_in_[1], z[e]);
          }
        }
      }
      return;
    }
    int64_t* ind = indices ? indices->data<int64_t>() + i * m * psize : nullptr;
    const int64_t base = i * m * osize;
    if constexpr (std::is_same_v<T, float>) {
      if (planes_2x2_) {
        VPlanesMaxPool2x2(y, pool_in_[0], pool_in_[1], pooled_[0], pooled_[1], 0, m, z, ind, base);
        return;
      }
    }
    MaxPool2D<T>(y, z, ind, 0, m, m, pool_in_, pooled_, pool_geo_, 0);
    if (ind) {
      for (int64_t k = 0; k < m * psize; ++k) ind[k] += base;
    }
  }

  const Node& node_;
  int64_t group_;
  bool fused_;  // FusedConv and FusedConvMaxPool: Relu after
  bool pool_;   // FusedConvMaxPool: 2x2 max pooling at stride 2 after the Relu
  bool compact_;  // FusedConvMaxPool with compact_indices: Indices as window codes (uint8, pool.h)
  bool planes_2x2_ = false;  // pool_: whole planes by VPlanesMaxPool2x2 (Codes), else MaxPool2D
  bool relu_after_pool_ = false;  // pool_ without int64 Indices: the Relu on the pooled values (Prepare)
  size_t index_offset_ = 0;  // compact_ without planes_2x2_: bytes into the scratch of the int64 indices
  WindowAttrs pool_geo_;
  Shape pooled_;  // pool_: the pooled spatial dims
  Shape pool_in_;  // pool_: the convolution's outputs as computed and pooled (out_, or its first 2 * pooled_)
  WindowAttrs geo_;
  Shape in_, out_;
  bool padded_ = false;
  static constexpr int64_t kMinShiftedChannels = 8;
  bool im2col_ = false;  // padded rows through one patch matrix (few input channels)
  bool direct_ = false;  // padded rows through DirectConv2D (float32, AVX-512)
  bool pointwise_ = false;  // 1x1, stride 1, no pads: PointwiseConv over the batch (float32, AVX-512)
  DirectConv2D dc_;
  bool wino_ = false;  // padded rows through Winograd3x3 (float32, AVX-512, 3x3, one group)
  bool wino_pool_ = false;  // pool_ on wino_: the output transform pools (Winograd3x3::set_pool)
  Winograd3x3 wg_;
  int64_t slot_images_ = 1;  // pool_: images per thread's activation buffer (a Winograd block)
  PaddedRows rows_;
  int64_t wr_ = 0;  // elements of the split weights (padded rows)
  int64_t col_ = 0;  // elements of one thread's work memory (a patch matrix, or the padded-rows buffers)
  int slots_ = 1;    // work memories in the scratch: one per thread
};

}  // namespace

KernelFactory kConv = MakeKernel<ConvKernel>;
KernelFactory kFusedConv = MakeKernel<ConvKernel>;
KernelFactory kFusedConvMaxPool = MakeKernel<ConvKernel>;

}  // namespace cpu
}  // namespace ontrain
