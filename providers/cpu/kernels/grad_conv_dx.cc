// ConvGradKernel's input gradient (grad_conv.h), images in parallel, each image's dX computed whole by one
// thread (the same calls whatever the threads): on AVX-512 for float32 by PointwiseConv (1x1 windows),
// Winograd's adjoint or the direct kernel over dY (the transposed, flipped convolution); elsewhere by GEMMs
// into a padded dX (padded rows) or into a patch matrix scattered back (Col2Im).
#include <algorithm>
#include <atomic>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/grad_conv.h"
#include "providers/cpu/kernels/pointwise.h"

namespace ontrain {
namespace cpu {

template <typename T>
void ConvGradKernel::InputGrad(const ConvGradPass<T>& p, bool depthwise) const {
  if (!p.dx) return;
  if constexpr (std::is_same_v<T, float>) {
    if (dx_pointwise_) InputGradPointwise(p);
    else if (dx_wino_) InputGradWinograd(p);
    else if (dx_direct_) InputGradDirect(p);
  }
  if (!depthwise && padded_ && !dx_direct_ && !dx_pointwise_) InputGradPadded(p);
  else if (!depthwise && !padded_) InputGradCol2Im(p);
}

template void ConvGradKernel::InputGrad<float>(const ConvGradPass<float>& p, bool depthwise) const;
template void ConvGradKernel::InputGrad<double>(const ConvGradPass<double>& p, bool depthwise) const;

// dX[i][ci][q] = sum over co of W[co, ci] dY[i][co][q], vectors of 16 positions shared out.
void ConvGradKernel::InputGradPointwise(const ConvGradPass<float>& p) const {
  const int64_t n = p.n, c = p.c, m = p.m, isize = p.isize, osize = p.osize;
  ParallelFor(p.ctx.thread_pool(), n * (osize / 16), 2.0 * static_cast<double>(m * c * 16), [&](int64_t v0, int64_t v1) {
    PointwiseConv(p.dyp, m * osize, p.w.data<float>(), 1, c, nullptr, false, p.dx->data<float>(), c * isize, osize, c,
                  m, v0, v1);
  });
}

// Output channel ci (dX's) reads input channel co (dY's) through the forward weight W[co, ci], flipped in
// space for the convolution of dY; blocks of dxg_.block() images.
void ConvGradKernel::InputGradWinograd(const ConvGradPass<float>& p) const {
  const int64_t n = p.n, c = p.c, m = p.m;
  float* packed = p.scratch + wr_offset_;
  dxg_.PackWeights(p.w.data<float>(), 9, c * 9, dx_flipped_, packed);
  const int64_t blk = dxg_.block();
  std::atomic<int> next_slot{0};
  ParallelFor(p.ctx.thread_pool(), (n + blk - 1) / blk, 2.0 * static_cast<double>(blk * m * c * 9 * p.osize),
              [&](int64_t b0, int64_t b1) {
                float* work = p.scratch + (next_slot++ % slots_) * dxwork_;
                for (int64_t bi = b0; bi < b1; ++bi) {
                  const int64_t i0 = bi * blk;
                  dxg_.Run(p.dyp + i0 * m * p.osize, std::min(blk, n - i0), packed, nullptr,
                           p.dx->data<float>() + i0 * c * p.isize, work);
                }
              });
}

// The direct kernel over each image's dY, group by group.
void ConvGradKernel::InputGradDirect(const ConvGradPass<float>& p) const {
  const int64_t m = p.m, c = p.c, cg = p.cg, mg = p.mg, kk = p.ksize;
  float* packed = p.scratch + wr_offset_;
  const float* pw = p.w.data<float>();
  for (int64_t g = 0; g < group_; ++g) {
    // Output channel ci of the transposed convolution reads input channel (dY's) co through the forward
    // weight W[co, ci] flipped in space.
    dxc_.PackWeights([&](int64_t ci, int64_t co, int64_t k) { return pw[((g * mg + co) * cg + ci) * kk + (kk - 1 - k)]; },
                     packed + g * dxc_.packed_size());
  }
  std::atomic<int> next_slot{0};
  ParallelFor(p.ctx.thread_pool(), p.n, 2.0 * static_cast<double>(m * cg * kk * p.osize), [&](int64_t i0, int64_t i1) {
    float* work = p.scratch + (next_slot++ % slots_) * dxwork_;
    for (int64_t i = i0; i < i1; ++i) {
      for (int64_t g = 0; g < group_; ++g) {
        dxc_.Run(p.dyp + (i * m + g * mg) * p.osize, packed + g * dxc_.packed_size(), nullptr,
                 p.dx->data<float>() + (i * c + g * cg) * p.isize, work);
      }
    }
  });
}

// Padded rows by GEMMs: the weights split by patch position, then BackwardDataPadded per image.
template <typename T>
void ConvGradKernel::InputGradPadded(const ConvGradPass<T>& p) const {
  T* wr = p.scratch + wr_offset_;
  rows_.SplitWeights(p.w.template data<T>(), group_, p.mg, p.cg, wr);
  std::atomic<int> next_slot{0};
  ParallelFor(p.ctx.thread_pool(), p.n, 2.0 * static_cast<double>(p.m * p.cg * p.ksize * p.osize),
              [&](int64_t i0, int64_t i1) {
                T* work = p.scratch + (next_slot++ % slots_) * dxwork_;
                for (int64_t i = i0; i < i1; ++i) {
                  BackwardDataPadded<T>(p.dyp + i * p.m * p.osize, wr, p.dx->template data<T>() + i * p.c * p.isize,
                                        p.c, p.m, work);
                }
              });
}

// Any other geometry: per image and group, the patch matrix's gradient W_g^T dY_g scattered back (Col2Im).
template <typename T>
void ConvGradKernel::InputGradCol2Im(const ConvGradPass<T>& p) const {
  const int64_t c = p.c, m = p.m, cg = p.cg, mg = p.mg, isize = p.isize, osize = p.osize, ksize = p.ksize;
  T* dx = p.dx->template data<T>();
  std::atomic<int> next_slot{0};
  ParallelFor(p.ctx.thread_pool(), p.n, 2.0 * static_cast<double>(m * cg * ksize * osize), [&](int64_t i0, int64_t i1) {
    T* col = p.scratch + (next_slot++ % slots_) * col_;
    for (int64_t i = i0; i < i1; ++i) {
      std::fill(dx + i * c * isize, dx + (i + 1) * c * isize, T(0));
      for (int64_t g = 0; g < group_; ++g) {
        Gemm<T>(true, false, cg * ksize, osize, mg, T(1), p.w.template data<T>() + g * mg * cg * ksize,
                p.dyp + (i * m + g * mg) * osize, T(0), col, nullptr);
        Col2Im(col, cg, in_, out_, geo_, dx + (i * c + g * cg) * isize);
      }
    }
  });
}

// dX of one image in the padded-rows layout: for each patch position k in order, the padded dX shifted by
// k ([cg, n], rows a plane apart) += Wr_g,k^T [cg, mg] times dY_g with zero gaps; the interior is dX.
// `work` holds dxwork_ elements.
template <typename T>
void ConvGradKernel::BackwardDataPadded(const T* dy, const T* wr, T* dx, int64_t c, int64_t m, T* work) const {
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

}  // namespace cpu
}  // namespace ontrain
