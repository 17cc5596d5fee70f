// 2-D max and average pooling and their gradients (ONNX Runtime's MaxPoolGrad takes the forward's
// Indices). The gradients are gathers: each input element walks, in output order, the outputs whose
// window can contain it, so sums are deterministic and in the CPU kernels' order.
#include <cfloat>

#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

__device__ __forceinline__ int64_t StorageIndex(const Pool2D& g, int64_t p, int64_t h, int64_t w) {
  return p * g.h * g.w + (g.storage_order == 0 ? h * g.w + w : w * g.h + h);
}

__global__ void MaxPoolKernel(const float* x, float* y, int64_t* indices, Pool2D g) {
  ONT_GRID_STRIDE_LOOP(o, g.planes * g.oh * g.ow) {
    int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const float* plane = x + p * g.h * g.w;
    float best = -FLT_MAX;
    int64_t bh = -1, bw = -1;
    for (int64_t i = 0; i < g.kh; ++i) {
      int64_t h = oh * g.sh - g.pt + i * g.dh;
      if (h < 0 || h >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t w = ow * g.sw - g.pl + j * g.dw;
        if (w < 0 || w >= g.w) continue;
        float v = plane[h * g.w + w];
        if (bh < 0) {
          bh = h;
          bw = w;
        }
        if (v > best) {
          best = v;
          bh = h;
          bw = w;
        }
      }
    }
    y[o] = best;
    if (indices) indices[o] = bh < 0 ? p * g.h * g.w : StorageIndex(g, p, bh, bw);
  }
}

// The outputs along one axis whose window can contain input position `pos`.
__device__ __forceinline__ void OutputRange(int64_t pos, int64_t pad, int64_t k, int64_t s, int64_t d, int64_t out,
                                            int64_t* lo, int64_t* hi) {
  int64_t a = pos + pad - (k - 1) * d, b = pos + pad;
  *lo = a <= 0 ? 0 : (a + s - 1) / s;
  *hi = b < 0 ? -1 : b / s;
  if (*hi > out - 1) *hi = out - 1;
}

// dX at each input position: the dY of the windows whose maximum it was, in window order (with y: only the
// windows whose pooled value is positive, MaxPoolReluGrad's mask).
__global__ void MaxPoolGradKernel(const float* dy, const int64_t* indices, const float* y, float* dx, Pool2D g) {
  ONT_GRID_STRIDE_LOOP(i, g.planes * g.h * g.w) {
    int64_t w = i % g.w, h = (i / g.w) % g.h, p = i / (g.w * g.h);
    int64_t me = StorageIndex(g, p, h, w);
    int64_t h0, h1, w0, w1;
    OutputRange(h, g.pt, g.kh, g.sh, g.dh, g.oh, &h0, &h1);
    OutputRange(w, g.pl, g.kw, g.sw, g.dw, g.ow, &w0, &w1);
    float acc = 0.0f;
    for (int64_t oh = h0; oh <= h1; ++oh) {
      for (int64_t ow = w0; ow <= w1; ++ow) {
        int64_t o = (p * g.oh + oh) * g.ow + ow;
        if (indices[o] == me && (y == nullptr || y[o] > 0.0f)) acc += dy[o];
      }
    }
    dx[i] = acc;
  }
}

// The element count an average divides by: in-bounds positions, or with count_include_pad those inside
// the explicitly padded extent.
__device__ __forceinline__ int64_t AvgCount(const Pool2D& g, int64_t oh, int64_t ow) {
  int64_t rows = 0, cols = 0;
  for (int64_t i = 0; i < g.kh; ++i) {
    int64_t h = oh * g.sh - g.pt + i * g.dh;
    rows += g.count_include_pad ? (h >= -g.pt && h < g.h + g.pb) : (h >= 0 && h < g.h);
  }
  for (int64_t j = 0; j < g.kw; ++j) {
    int64_t w = ow * g.sw - g.pl + j * g.dw;
    cols += g.count_include_pad ? (w >= -g.pl && w < g.w + g.pr) : (w >= 0 && w < g.w);
  }
  return rows * cols;
}

__global__ void AvgPoolKernel(const float* x, float* y, Pool2D g) {
  ONT_GRID_STRIDE_LOOP(o, g.planes * g.oh * g.ow) {
    int64_t ow = o % g.ow, oh = (o / g.ow) % g.oh, p = o / (g.ow * g.oh);
    const float* plane = x + p * g.h * g.w;
    float sum = 0.0f;
    for (int64_t i = 0; i < g.kh; ++i) {
      int64_t h = oh * g.sh - g.pt + i * g.dh;
      if (h < 0 || h >= g.h) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t w = ow * g.sw - g.pl + j * g.dw;
        if (w >= 0 && w < g.w) sum += plane[h * g.w + w];
      }
    }
    int64_t count = AvgCount(g, oh, ow);
    y[o] = count ? sum / static_cast<float>(count) : 0.0f;
  }
}

__global__ void AvgPoolGradKernel(const float* dy, float* dx, Pool2D g) {
  ONT_GRID_STRIDE_LOOP(i, g.planes * g.h * g.w) {
    int64_t w = i % g.w, h = (i / g.w) % g.h, p = i / (g.w * g.h);
    int64_t h0, h1, w0, w1;
    OutputRange(h, g.pt, g.kh, g.sh, g.dh, g.oh, &h0, &h1);
    OutputRange(w, g.pl, g.kw, g.sw, g.dw, g.ow, &w0, &w1);
    float acc = 0.0f;
    for (int64_t oh = h0; oh <= h1; ++oh) {
      if ((h + g.pt - oh * g.sh) % g.dh != 0) continue;
      for (int64_t ow = w0; ow <= w1; ++ow) {
        if ((w + g.pl - ow * g.sw) % g.dw != 0) continue;
        int64_t count = AvgCount(g, oh, ow);
        if (count) acc += dy[(p * g.oh + oh) * g.ow + ow] / static_cast<float>(count);
      }
    }
    dx[i] = acc;
  }
}

}  // namespace

cudaError_t MaxPool2D(const float* x, float* y, int64_t* indices, const Pool2D& g, cudaStream_t stream) {
  int64_t n = g.planes * g.oh * g.ow;
  if (n == 0) return cudaSuccess;
  MaxPoolKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, indices, g);
  return cudaGetLastError();
}

cudaError_t MaxPool2DGrad(const float* dy, const int64_t* indices, const float* y, float* dx, const Pool2D& g,
                          cudaStream_t stream) {
  int64_t n = g.planes * g.h * g.w;
  if (n == 0) return cudaSuccess;
  MaxPoolGradKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, indices, y, dx, g);
  return cudaGetLastError();
}

cudaError_t AvgPool2D(const float* x, float* y, const Pool2D& g, cudaStream_t stream) {
  int64_t n = g.planes * g.oh * g.ow;
  if (n == 0) return cudaSuccess;
  AvgPoolKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, g);
  return cudaGetLastError();
}

cudaError_t AvgPool2DGrad(const float* dy, float* dx, const Pool2D& g, cudaStream_t stream) {
  int64_t n = g.planes * g.h * g.w;
  if (n == 0) return cudaSuccess;
  AvgPoolGradKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, dx, g);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
