// Gradients of the normalizations (com.microsoft): BatchNormalizationGrad and LayerNormalizationGrad; and
// ai.ontrain BatchNormActivationGrad, which the executor fuses (engine/kernel_fusion.h).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <string>

#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {
namespace {

// (dY, X [N,C,...], scale [C], saved_mean [C], saved_inv_std [C]) -> (dX, dScale, dBias), with
// x^ = (x - mean) * inv_std:  dBias = sum dY,  dScale = sum dY x^,
// dX = scale * inv_std / M * (M dY - dBias - x^ dScale), M = N * spatial.
//
// ai.ontrain BatchNormActivationGrad (dZ, X, scale, mean, inv_std, affine) is the gradient of
// BatchNormActivation (norm.cc): the first pass recomputes each row's activation input y = x * a + b from
// `affine` (the forward's values, bit for bit) and applies the activation's gradient (ReluGrad's or
// ClipGrad's, fill `fill`) to make the block's dY in its thread's buffer, where the second pass reads it as
// BatchNormalizationGrad reads dY. dY is never written whole (the unfused pair wrote and read it back, and
// the forward wrote y).
class BatchNormGradKernel : public OpKernel {
 public:
  explicit BatchNormGradKernel(const NodeInfo& info, bool fused = false)
      : fused_(fused),
        act_(info.node->GetString("activation", "") == "Relu" ? RowAct::kRelu : RowAct::kClip),
        activation_(info.node->GetString("activation", "")),
        lo_(info.node->GetFloat("min", 0.0f)),
        hi_(info.node->GetFloat("max", 0.0f)),
        fill_(info.node->GetFloat("fill", 0.0f)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    if (x->rank() < 2 || dy->shape() != x->shape()) return InvalidArgument("dY and X must be equal [N, C, ...]");
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2, 3, 4}));  // read with X's element type
    for (int i = 2; i < 5; ++i) {
      ONT_ASSIGN_OR_RETURN(const Tensor* t, RequireInput(ctx, i, i == 2 ? "scale" : i == 3 ? "mean" : "inv_std"));
      if (t->NumElements() != x->dim(1)) return InvalidArgument("input ", i, " must have ", x->dim(1), " elements");
    }
    if (fused_) {
      if (activation_ != "Relu" && activation_ != "Clip") {
        return InvalidArgument("activation must be Relu or Clip, got \"", activation_, "\"");
      }
      ONT_ASSIGN_OR_RETURN(const Tensor* affine, RequireInput(ctx, 5, "affine"));
      if (x->dtype() != DType::kFloat32 || affine->dtype() != DType::kFloat32 || affine->NumElements() != 2 * x->dim(1)) {
        return InvalidArgument("X must be float32 and affine float32 [2, ", x->dim(1), "], got ", DTypeName(x->dtype()),
                               " and ", DTypeName(affine->dtype()), ShapeToString(affine->shape()));
      }
      slots_ = ctx.thread_pool() ? ctx.thread_pool()->num_threads() : 1;
      const int64_t n = x->dim(0), inner = n * x->dim(1) != 0 ? x->NumElements() / (n * x->dim(1)) : 0;
      ctx.RequestScratch(static_cast<size_t>(NormChannelBlock(n, inner, 3) * n * inner * slots_) * sizeof(float));
    }
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    for (int i = 1; i < 3; ++i) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(i, x->dtype(), {x->dim(1)}));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &x = *ctx.input(1);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      int64_t n = x.dim(0), c = x.dim(1), inner = (n * c) != 0 ? x.NumElements() / (n * c) : 0;
      double m = static_cast<double>(n * inner);
      auto at = [&](int i, int64_t j) { return static_cast<double>(static_cast<float>(ctx.input(i)->data<T>()[j])); };
      const T *pdy = dy.data<T>(), *px = x.data<T>();
      T* pdx = ctx.output(0) ? ctx.output(0)->data<T>() : nullptr;
      Tensor *dsc = ctx.output(1), *dbi = ctx.output(2);
      const float* affine = fused_ ? ctx.input(5)->data<float>() : nullptr;  // Prepare: float32 only
      std::atomic<int> next_slot{0};
      // Channels in parallel, in blocks read image by image (contiguous runs of the block's channels: one
      // row per image and channel, 128 KB apart, ran at a fifth of the memory's speed; a block's dY and X
      // stay in L2 for the second pass); each channel's sums in a fixed order whatever the blocks and
      // threads: float32 VChannelGradSums's (vrows.h), float64 LaneSum per row, rows in image order.
      const int64_t blk = NormChannelBlock(n, inner, affine != nullptr ? 3 : 2);
      ParallelFor(ctx.thread_pool(), c, 8.0 * static_cast<double>(n * inner), [&](int64_t c0, int64_t c1) {
        double db[kNormMaxBlock], ds[kNormMaxBlock], mean[kNormMaxBlock], inv[kNormMaxBlock], coef[kNormMaxBlock];
        // Fused: the block's dY, row (b, j) at (b * blk + j) * inner of this thread's buffer (the pool runs at
        // most one range per thread at a time).
        float* dy_block = affine != nullptr ? static_cast<float*>(ctx.scratch()) + blk * n * inner * (next_slot++ % slots_)
                                            : nullptr;
        for (int64_t cb = c0; cb < c1; cb += blk) {
          const int64_t nb = std::min(c1, cb + blk) - cb;
          for (int64_t j = 0; j < nb; ++j) {
            db[j] = ds[j] = 0;
            mean[j] = at(3, cb + j);
            inv[j] = at(4, cb + j);
          }
          if constexpr (std::is_same_v<T, float>) {  // the block's two sums per ISA (vrows.h: their order)
            const ChannelRows rows{n, c * inner, nb, inner};
            const ChannelAct ca{act_, lo_, hi_, fill_, affine != nullptr ? affine + cb : nullptr,
                                affine != nullptr ? affine + c + cb : nullptr, dy_block, blk * inner};
            VChannelGradSums(pdy + cb * inner, px + cb * inner, rows, affine != nullptr ? &ca : nullptr, mean, inv, db,
                             ds);
          } else {
            for (int64_t b = 0; b < n; ++b) {
              for (int64_t j = 0; j < nb; ++j) {
                const T *g = pdy + (b * c + cb + j) * inner, *xv = px + (b * c + cb + j) * inner;
                const double mj = mean[j], ij = inv[j];
                db[j] += LaneSum(inner, [g](int64_t i) { return static_cast<double>(static_cast<float>(g[i])); });
                ds[j] += LaneSum(inner, [g, xv, mj, ij](int64_t i) {
                  return static_cast<double>(static_cast<float>(g[i])) * (static_cast<float>(xv[i]) - mj) * ij;
                });
              }
            }
          }
          for (int64_t j = 0; j < nb; ++j) coef[j] = at(2, cb + j) * inv[j] / m;
          if (pdx) {
            for (int64_t b = 0; b < n; ++b) {
              for (int64_t j = 0; j < nb; ++j) {
                const int64_t base = (b * c + cb + j) * inner;
                if constexpr (std::is_same_v<T, float>) {
                  const float* g = affine != nullptr ? dy_block + (b * blk + j) * inner : pdy + base;
                  VRowBatchNormGrad(g, px + base, pdx + base, inner, mean[j], coef[j] * m, -coef[j] * inv[j] * ds[j],
                                    -coef[j] * db[j]);
                } else {
                  for (int64_t i = 0; i < inner; ++i) {
                    double xh = (static_cast<float>(px[base + i]) - mean[j]) * inv[j];
                    double g = static_cast<float>(pdy[base + i]);
                    pdx[base + i] = static_cast<T>(static_cast<float>(coef[j] * (m * g - db[j] - xh * ds[j])));
                  }
                }
              }
            }
          }
          for (int64_t j = 0; j < nb; ++j) {
            if (dsc) dsc->data<T>()[cb + j] = static_cast<T>(static_cast<float>(ds[j]));
            if (dbi) dbi->data<T>()[cb + j] = static_cast<T>(static_cast<float>(db[j]));
          }
        }
      });
      return Status::OK();
    });
  }

 private:
  bool fused_;
  RowAct act_;
  std::string activation_;
  float lo_, hi_, fill_;
  int slots_ = 1;
};

// (dY, X, scale, mean, inv_std_dev) -> (dX, dScale, dBias), rows flattened at `axis`:
// x^ = (x - mean) * inv_std, B = dY * scale * inv_std, dX = B - mean(B) - x^ * mean(B * x^).
class LayerNormGradKernel : public OpKernel {
 public:
  explicit LayerNormGradKernel(const NodeInfo& info) : axis_(info.node->GetInt("axis", -1)) {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "Y_grad"));
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 1, "X"));
    ONT_ASSIGN_OR_RETURN(const Tensor* scale, RequireInput(ctx, 2, "scale"));
    ONT_ASSIGN_OR_RETURN(const Tensor* mean, RequireInput(ctx, 3, "mean"));
    ONT_ASSIGN_OR_RETURN(const Tensor* inv, RequireInput(ctx, 4, "inv_std_dev"));
    if (dy->shape() != x->shape()) return InvalidArgument("Y_grad and X shapes differ");
    ONT_RETURN_IF_ERROR(RequireSameDTypes(ctx, {0, 1, 2}));  // mean and inv_std_dev: float32 or X's (stat)
    ONT_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(axis_, x->rank()));
    rows_ = cols_ = 1;
    for (int64_t d = 0; d < x->rank(); ++d) (d < axis ? rows_ : cols_) *= x->dim(d);
    if (scale->NumElements() != cols_ || mean->NumElements() != rows_ || inv->NumElements() != rows_) {
      return InvalidArgument("scale must have ", cols_, " elements and mean/inv_std_dev ", rows_);
    }
    if (mean->dtype() != DType::kFloat32 && mean->dtype() != x->dtype()) return InvalidArgument("mean dtype");
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(0, x->dtype(), x->shape()));
    ONT_RETURN_IF_ERROR(ctx.DeclareOutput(1, scale->dtype(), scale->shape()));
    if (ctx.num_outputs() > 2) ONT_RETURN_IF_ERROR(ctx.DeclareOutput(2, scale->dtype(), scale->shape()));
    // The dScale and dBias sums, and for float32 a pair of partial sums per chunk of rows after them.
    const int64_t chunks = x->dtype() == DType::kFloat32 ? Chunks() : 0;
    ctx.RequestScratch(2 * static_cast<size_t>((1 + chunks) * cols_) * sizeof(double));
    return Status::OK();
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &x = *ctx.input(1), &scale = *ctx.input(2);
    const Tensor &mean = *ctx.input(3), &inv = *ctx.input(4);
    return DispatchFloat(x.dtype(), [&](auto tag) -> Status {
      using T = typename decltype(tag)::type;
      using C = std::conditional_t<std::is_same_v<T, double>, double, float>;
      auto stat = [](const Tensor& t, int64_t r) -> C {
        return t.dtype() == DType::kFloat64 ? static_cast<C>(t.data<double>()[r]) : static_cast<C>(t.data<float>()[r]);
      };
      int64_t cols = cols_;
      C* ds = static_cast<C*>(ctx.scratch());
      C* db = ds + cols;
      std::fill(ds, ds + 2 * cols, C(0));
      Tensor* dx = ctx.output(0);
      if constexpr (std::is_same_v<T, float>) {
        // Float rows through the per-ISA loops: the same float expressions, the row sums b and b x^ in double
        // lanes (LaneSum's order) instead of a running float sum (a 4-cycle add chain per element). Chunks
        // of kRowChunk rows in parallel, each summing dScale and dBias from zero over its rows in order;
        // the chunks' sums added in chunk order: the same bits for any thread count (one running sum over
        // all rows kept the kernel on one thread: a GPT's 2-thread step ran it at its 1-thread time).
        const float* ps = scale.data<float>();
        const int64_t chunks = Chunks();
        float* part = db + cols;  // chunk k's dScale, then its dBias
        ParallelFor(ctx.thread_pool(), chunks, 12.0 * static_cast<double>(kRowChunk * cols), [&](int64_t k0, int64_t k1) {
          for (int64_t k = k0; k < k1; ++k) {
            float* pds = part + 2 * k * cols;
            float* pdb = pds + cols;
            std::fill(pds, pds + 2 * cols, 0.0f);
            for (int64_t r = k * kRowChunk; r < std::min(rows_, (k + 1) * kRowChunk); ++r) {
              const float* g = dy.data<float>() + r * cols;
              const float* xr = x.data<float>() + r * cols;
              const float mu = stat(mean, r), is = stat(inv, r);
              double mb = 0, mbx = 0;
              VRowLayerNormGradSums(g, xr, ps, cols, mu, is, pds, pdb, &mb, &mbx);
              if (dx == nullptr) continue;
              VRowLayerNormGradDx(g, xr, ps, dx->data<float>() + r * cols, cols, mu, is,
                                  static_cast<float>(mb / static_cast<double>(cols)),
                                  static_cast<float>(mbx / static_cast<double>(cols)));
            }
          }
        });
        for (int64_t k = 0; k < chunks; ++k) {
          const float* pds = part + 2 * k * cols;
          for (int64_t i = 0; i < cols; ++i) {
            ds[i] += pds[i];
            db[i] += pds[cols + i];
          }
        }
      } else {
        for (int64_t r = 0; r < rows_; ++r) {
          C mu = stat(mean, r), is = stat(inv, r), mb = 0, mbx = 0;
          for (int64_t i = 0; i < cols; ++i) {
            int64_t k = r * cols + i;
            C g = static_cast<C>(dy.data<T>()[k]), xh = (static_cast<C>(x.data<T>()[k]) - mu) * is;
            db[i] += g;
            ds[i] += g * xh;
            C b = g * static_cast<C>(scale.data<T>()[i]) * is;
            mb += b;
            mbx += b * xh;
          }
          mb /= static_cast<C>(cols);
          mbx /= static_cast<C>(cols);
          if (dx == nullptr) continue;
          for (int64_t i = 0; i < cols; ++i) {
            int64_t k = r * cols + i;
            C g = static_cast<C>(dy.data<T>()[k]), xh = (static_cast<C>(x.data<T>()[k]) - mu) * is;
            C b = g * static_cast<C>(scale.data<T>()[i]) * is;
            dx->data<T>()[k] = static_cast<T>(b - mb - xh * mbx);
          }
        }
      }
      for (int64_t i = 0; i < cols; ++i) {
        if (Tensor* o = ctx.output(1)) o->data<T>()[i] = static_cast<T>(ds[i]);
        if (Tensor* o = ctx.output(2)) o->data<T>()[i] = static_cast<T>(db[i]);
      }
      return Status::OK();
    });
  }

 private:
  static constexpr int64_t kRowChunk = 128;
  int64_t Chunks() const { return (rows_ + kRowChunk - 1) / kRowChunk; }
  int64_t axis_;
  int64_t rows_ = 1, cols_ = 1;
};

}  // namespace

KernelFactory kBatchNormalizationGrad = MakeKernel<BatchNormGradKernel>;
KernelFactory kBatchNormActivationGrad = [](const NodeInfo& i) -> StatusOr<std::unique_ptr<OpKernel>> {
  return std::unique_ptr<OpKernel>(new BatchNormGradKernel(i, true));
};
KernelFactory kLayerNormalizationGrad = MakeKernel<LayerNormGradKernel>;

}  // namespace cpu
}  // namespace ontrain
