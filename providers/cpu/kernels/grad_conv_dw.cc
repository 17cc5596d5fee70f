// ConvGradKernel's weight gradient (grad_conv.h). 1x1 windows without pads: per image one GEMM (or on
// AVX-512 PointwiseWeightGrad's tiles) accumulating straight from the tensors. Every other window: the
// images in chunks fixed by the shape (PlanLayout), each chunk's dW^T by one GEMM over its patch matrix or,
// for 3x3 windows in float32 on AVX-512, by DirectWeightGrad3x3, into a partial of its own; then the partials
// added in chunk order and transposed into dW. Neither split depends on the thread count, nor the bits.
#include <algorithm>
#include <atomic>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/grad_conv.h"
#include "providers/cpu/kernels/pointwise.h"

namespace ontrain {
namespace cpu {

template <typename T>
bool ConvGradKernel::WeightGrad(const ConvGradPass<T>& p, bool depthwise) const {
  if (!p.dw) return true;
  if constexpr (std::is_same_v<T, float>) {
    if (dw_pointwise_ && dw_tiles_) PointwiseTiles(p);
  }
  if (dw_pointwise_ && !dw_tiles_) PointwiseGemms(p);
  if (!depthwise && !dw_pointwise_ && chunks_ > 0) return Chunks(p);
  return true;
}

template bool ConvGradKernel::WeightGrad<float>(const ConvGradPass<float>& p, bool depthwise) const;
template bool ConvGradKernel::WeightGrad<double>(const ConvGradPass<double>& p, bool depthwise) const;

// On AVX-512 at stride 1, channel counts in fours and planes of whole vectors from 64 positions:
// PointwiseWeightGrad, input channels split between threads (a split of the sums' owners, not of the sums:
// the bits do not depend on the thread count).
void ConvGradKernel::PointwiseTiles(const ConvGradPass<float>& p) const {
  const int64_t n = p.n, c = p.c, m = p.m, cg = p.cg, mg = p.mg, isize = p.isize, osize = p.osize;
  const bool input_outer = cg >= mg;  // x's rows the larger: the outer loop and the threads' split
  for (int64_t g = 0; g < group_; ++g) {
    const float* dyg = p.dyp + g * mg * osize;
    const float* xg = p.x.data<float>() + g * cg * isize;
    float* dwg = p.dw->data<float>() + g * mg * cg;
    const int64_t outer = (input_outer ? cg : mg) / 4, inner = input_outer ? mg : cg;
    ParallelFor(p.ctx.thread_pool(), outer, 2.0 * static_cast<double>(4 * inner * osize * n), [&](int64_t q0, int64_t q1) {
      if (input_outer) {
        PointwiseWeightGrad(dyg, m * osize, xg, c * isize, n, osize, 0, mg, 4 * q0, 4 * q1, true, dwg, cg);
      } else {
        PointwiseWeightGrad(dyg, m * osize, xg, c * isize, n, osize, 4 * q0, 4 * q1, 0, cg, false, dwg, cg);
      }
    });
  }
}

// dW_g [mg, cg] = sum over images, in order, of dY_i,g [mg, O] * X_i,g [cg, O]^T, one GEMM per image
// accumulating (the copies and partials of the chunks cost more than these GEMMs of K = O: MobileNet's
// 16 -> 64 at 16x16, 32 images, 0.96 -> 0.16 ms; 32 -> 128, 0.76 -> 0.48; a ResNet's stride-2 shortcuts
// 16 -> 32 from 32x32, 0.64 -> 0.24 ms, 32 -> 64 from 16x16, 0.45 -> 0.15). X_i,g is the image itself at
// stride 1, else its strided samples gathered. From 8 images the two halves of the batch run in parallel,
// the second into a partial added after: a split fixed by the shape, so the sums do not depend on the
// thread count. (Blocks of 32 output rows instead: 0.82 ms, for GEMMs too small.)
template <typename T>
void ConvGradKernel::PointwiseGemms(const ConvGradPass<T>& p) const {
  const int64_t n = p.n, c = p.c, m = p.m, cg = p.cg, mg = p.mg, isize = p.isize, osize = p.osize;
  const int64_t halves = n >= 8 ? 2 : 1, half = (n + 1) / 2;
  T* out = p.dw->template data<T>();
  T* partial = p.scratch;
  if (n == 0) std::fill(out, out + p.dw->NumElements(), T(0));
  for (int64_t g = 0; g < group_ && n > 0; ++g) {
    ParallelFor(p.ctx.thread_pool(), halves, 2.0 * static_cast<double>(mg * cg * osize * half), [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        const int64_t i0 = halves == 1 ? 0 : h * half, i1 = halves == 1 ? n : std::min(n, i0 + half);
        T* dst = h == 0 ? out + g * mg * cg : partial;
        T* gathered = p.scratch + mg * cg + h * dw_gather_;
        for (int64_t i = i0; i < i1; ++i) {
          const T* xi = p.x.template data<T>() + (i * c + g * cg) * isize;
          int64_t ld = isize;
          if (dw_gather_ > 0) {
            Im2ColStrided(xi, cg, in_, out_, geo_, gathered, osize);
            xi = gathered;
            ld = osize;
          }
          GemmLd<T>(false, true, mg, cg, osize, T(1), p.dyp + (i * m + g * mg) * osize, osize, xi, ld,
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

// dW_g = sum over chunks of dY_g [mg, images*O] * col(X_g)^T [images*O, cg*K]: chunks in parallel, each one
// GEMM (or DirectWeightGrad3x3) into its (transposed) partial, then the partials added in chunk order.
template <typename T>
bool ConvGradKernel::Chunks(const ConvGradPass<T>& p) const {
  const int64_t ck = p.cg * p.ksize;
  // Partial rows: pld apart (dw_direct_: the output channels padded to a multiple of 16).
  const int64_t per_slot =
      dw_direct_ ? dwk_.copy_size(chunk_) + chunk_ * dwk_.transposed_size() : pad_ + (ck + p.mg) * chunk_ * Cols();
  const int64_t pld = dw_direct_ ? dwk_.cout_padded() : p.mg;
  T* partials = p.scratch + per_slot * slots_;
  bool indices_ok = true;
  for (int64_t g = 0; g < group_; ++g) {
    if constexpr (std::is_same_v<T, float>) {
      if (dw_direct_) indices_ok = DirectChunks(p, g, per_slot, pld, partials) && indices_ok;
    }
    if (!dw_direct_) GemmChunks(p, g, per_slot, partials);
    AddPartials(p, g, pld, partials);
  }
  return indices_ok;
}

// Per chunk: its images padded and their dY transposed, then the direct kernel into the chunk's partial.
bool ConvGradKernel::DirectChunks(const ConvGradPass<float>& p, int64_t g, int64_t per_slot, int64_t pld,
                                  float* partials) const {
  const int64_t n = p.n, c = p.c, cg = p.cg, isize = p.isize, ck = cg * p.ksize;
  std::atomic<int> next_slot{0};
  std::atomic<bool> bad_index{false};
  ParallelFor(p.ctx.thread_pool(), chunks_, 2.0 * static_cast<double>(p.mg * ck * chunk_ * p.osize),
              [&](int64_t k0, int64_t k1) {
    const int slot = next_slot++ % slots_;
    float* xp = p.scratch + slot * per_slot;
    float* dyt = xp + dwk_.copy_size(chunk_);
    // The images read where they lie (c * isize apart) by RunInPlace where it applies, or without pads in
    // one group (the chunk's images, image_size() apart, are x itself); else copied padded.
    const bool in_place = dwk_.in_place();
    const bool as_padded = group_ == 1 && dwk_.unpadded();
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t i0 = k * chunk_, i1 = std::min(n, i0 + chunk_);
      for (int64_t i = i0; i < i1; ++i) {
        if (!in_place && !as_padded) {
          dwk_.PadImage(p.x.data<float>() + (i * c + g * cg) * isize, xp + (i - i0) * dwk_.image_size());
        }
        if (!DirectChunkImage(p, g, slot, i, dyt + (i - i0) * dwk_.transposed_size())) bad_index.store(true);
      }
      if (unpool_in_tiles_) {
        const Tensor& dz = *p.ctx.input(0);
        dwk_.RunPooledInPlace(p.x.data<float>() + (i0 * c + g * cg) * isize, c * isize, dyt, dz.dim(2), dz.dim(3),
                              i1 - i0, partials + k * pld * ck);
      } else if (in_place) {
        dwk_.RunInPlace(p.x.data<float>() + (i0 * c + g * cg) * isize, c * isize, dyt, i1 - i0, partials + k * pld * ck);
      } else {
        dwk_.Run(as_padded ? p.x.data<float>() + i0 * c * isize : xp, dyt, i1 - i0, partials + k * pld * ck);
      }
    }
  });
  return !bad_index.load();
}

// Image i's dY, group g, transposed into dyti for DirectWeightGrad3x3: from dY, or for MaxPoolReluConvGrad
// unpooled first (into the transposed layout straight, or into the thread's buffer), or only its dZ and
// codes transposed there (unpool_in_tiles_: RunPooledInPlace unpools in its tiles); then its channel sums
// for dB where they come from here. False where an Indices entry left its plane.
bool ConvGradKernel::DirectChunkImage(const ConvGradPass<float>& p, int64_t g, int slot, int64_t i,
                                      float* dyti) const {
  const int64_t m = p.m;
  const float* dyi = p.dyp + (i * m + g * p.mg) * p.osize;
  if (unpool_in_tiles_) {  // dZ and its codes transposed; the sums and the tiles make dY from them
    const Tensor& dz = *p.ctx.input(0);
    const int64_t psize = dz.dim(2) * dz.dim(3);
    dwk_.TransposePooled(dz.data<float>() + i * m * psize, p.ctx.input(1)->data<uint8_t>() + i * m * psize, dz.dim(2),
                         dz.dim(3), dyti);
    if (dt_sums_) dwk_.PooledChannelSums(dyti, dz.dim(2), dz.dim(3), p.row_sums + i * m);
    return true;
  }
  if (unpool_transposed_) {
    const Tensor& dz = *p.ctx.input(0);
    const int64_t psize = dz.dim(2) * dz.dim(3);
    dwk_.UnpoolOutputGrad(dz.data<float>() + i * m * psize, p.ctx.input(1)->data<uint8_t>() + i * m * psize, dz.dim(2),
                          dz.dim(3), p.scratch + dy_offset_ + (slot % slots_) * dy_slot_, dyti);
  } else {
    if (per_image_) {
      float* buf = p.scratch + dy_offset_ + (slot % slots_) * dy_slot_;
      if (!ScatterPooledImage(p.ctx, i, m, p.osize, buf)) return false;
      dyi = buf;
    }
    dwk_.TransposeOutputGrad(dyi, dyti);
  }
  if (dt_sums_) dwk_.ChannelSums(dyti, p.row_sums + i * m);
  return true;
}

// Per chunk: its patch matrix col [ck, images*O] and dY_t [mg, images*O], then one GEMM into its partial.
template <typename T>
void ConvGradKernel::GemmChunks(const ConvGradPass<T>& p, int64_t g, int64_t per_slot, T* partials) const {
  const int64_t n = p.n, c = p.c, m = p.m, cg = p.cg, mg = p.mg, isize = p.isize, osize = p.osize;
  const int64_t ck = cg * p.ksize, cols = Cols();
  std::atomic<int> next_slot{0};
  ParallelFor(p.ctx.thread_pool(), chunks_, 2.0 * static_cast<double>(mg * ck * chunk_ * osize), [&](int64_t k0, int64_t k1) {
    T* xp = p.scratch + (next_slot++ % slots_) * per_slot;
    T* col = xp + pad_;
    T* dy_t = col + ck * chunk_ * cols;
    for (int64_t k = k0; k < k1; ++k) {
      const int64_t i0 = k * chunk_, i1 = std::min(n, i0 + chunk_), ld = (i1 - i0) * cols;
      for (int64_t i = i0; i < i1; ++i) {
        const T* xi = p.x.template data<T>() + (i * c + g * cg) * isize;
        const T* dyi = p.dyp + (i * m + g * mg) * osize;
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
      // dW^T [ck, mg] = col [ck, ld] * dY_t^T: the long side as M runs about twice as fast in the GEMM as
      // dW = dY_t * col^T (measured with oneDNN on mg = 16, ck = 144).
      Gemm<T>(false, true, ck, mg, ld, T(1), col, dy_t, T(0), partials + k * mg * ck, nullptr);
    }
  });
}

// The partials added in chunk order into the first (contiguous runs, vectorized), then dW^T [ck, mg]
// transposed into dW [mg, ck] by tiles (reading the partials down their columns missed the cache).
template <typename T>
void ConvGradKernel::AddPartials(const ConvGradPass<T>& p, int64_t g, int64_t pld, T* partials) const {
  const int64_t mg = p.mg, ck = p.cg * p.ksize;
  T* out = p.dw->template data<T>() + g * mg * ck;
  ParallelFor(p.ctx.thread_pool(), ck, static_cast<double>(pld * chunks_), [&](int64_t q0, int64_t q1) {
    T* acc = partials + q0 * pld;
    const int64_t len = (q1 - q0) * pld;
    for (int64_t k = 1; k < chunks_; ++k) {
      const T* part = partials + k * pld * ck + q0 * pld;
      for (int64_t e = 0; e < len; ++e) acc[e] += part[e];
    }
  });
  constexpr int64_t kTile = 16;
  ParallelFor(p.ctx.thread_pool(), (mg + kTile - 1) / kTile, static_cast<double>(kTile * ck), [&](int64_t b0, int64_t b1) {
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

}  // namespace cpu
}  // namespace ontrain
