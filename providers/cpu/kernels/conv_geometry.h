// Window geometry shared by Conv, ConvTranspose and the pooling kernels: kernel size, strides, dilations,
// explicit or automatic padding, and the resulting output size, for any number of spatial dimensions.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace ontrain {
namespace cpu {

// Copies n elements of one image row. Rows of small planes are a few dozen bytes (16 bytes on a 4x4 plane),
// where a call to memmove costs more than the copy: those are copied inline, 32 and then 4 bytes at a
// time (fixed-size copies, which the compiler turns into single moves); longer rows by memcpy.
template <typename T>
inline void CopyRow(const T* src, int64_t n, T* dst) {
  const size_t bytes = static_cast<size_t>(n) * sizeof(T);
  if (bytes > 256) {
    std::memcpy(dst, src, bytes);
    return;
  }
  char* d = reinterpret_cast<char*>(dst);
  const char* s = reinterpret_cast<const char*>(src);
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32) __builtin_memcpy(d + i, s + i, 32);
  for (; i + 4 <= bytes; i += 4) __builtin_memcpy(d + i, s + i, 4);
  for (; i < bytes; ++i) d[i] = s[i];
}

struct WindowAttrs {
  Shape kernel;     // from kernel_shape, or the weight's spatial dims
  Shape weight_window;  // the weight's spatial dims, where FromNode was given them
  Shape strides;    // default 1
  Shape dilations;  // default 1
  Shape pads;       // [begin..., end...]
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  // Reads the attributes of `node`; `kernel` may come from the weight instead (pass it non-empty).
  static WindowAttrs FromNode(const Node& node, Shape kernel);

  // An error naming both where a kernel_shape attribute disagrees with the weight's spatial dims (the
  // kernels index the weight by kernel_shape).
  Status CheckWeightWindow() const;

  // Fills pads (for auto_pad) and returns the output spatial dims for input spatial dims `in`; checks
  // CheckWeightWindow first.
  StatusOr<Shape> OutputDims(const Shape& in);
};

// Copies a patch matrix out of one image: col[c * K + kk, o] = x[c, o * stride - pad + kk * dilation] (0
// outside). x is [C, in...], col is [C * prod(kernel), prod(out)].
template <typename T>
void Im2Col(const T* x, int64_t channels, const Shape& in, const Shape& out,
            const WindowAttrs& w, T* col);
// The same with rows `ld` elements apart (ld >= prod(out)): one image's block of a wider patch matrix.
template <typename T>
void Im2ColStrided(const T* x, int64_t channels, const Shape& in, const Shape& out,
                   const WindowAttrs& w, T* col, int64_t ld);

// The adjoint of Im2Col: adds every patch element back into x (which the caller zeroes first).
template <typename T>
void Col2Im(const T* col, int64_t channels, const Shape& in, const Shape& out,
            const WindowAttrs& w, T* x);

// Two-dimensional stride-1 windows in the "padded rows" layout. Each image plane [H, W] is copied once into a
// zero-bordered plane [hp, wp] (the pads added), and output position (i, j) becomes column i * wp + j of a
// matrix of n = (oh - 1) * wp + ow columns; the wp - ow columns after each output row but the last are
// gaps. Patch position (a, b) then reads one contiguous run of each padded plane, starting shift(k) in:
// the convolution and its input gradient are kh * kw GEMMs over shifted views of the padded planes (no
// patch matrix), and the weight gradient's patch matrix takes one copy per patch row instead of one per
// output row. Gaps are garbage in a product and must be zero in a matrix of output gradients, so that they
// add nothing to a product over the columns.
struct PaddedRows {
  int64_t h = 0, w = 0, hp = 0, wp = 0, oh = 0, ow = 0, n = 0, pt = 0, pl = 0;
  int64_t kh = 0, kw = 0, dh = 0, dw = 0;

  // Whether the layout applies: two spatial dims, strides 1.
  static bool Applies(const Shape& in, const WindowAttrs& a);
  PaddedRows() = default;
  PaddedRows(const Shape& in, const Shape& out, const WindowAttrs& a);
  int64_t plane() const { return hp * wp; }
  int64_t patch_rows(int64_t channels) const { return channels * kh * kw; }
  // A 1x1 window without pads: the image itself is the patch matrix (n = H * W, no gaps).
  bool trivial() const { return kh == 1 && kw == 1 && hp == h && wp == w; }

  // Offset of patch position (a, b) in a padded plane.
  int64_t shift(int64_t k) const { return (k / kw) * dh * wp + (k % kw) * dw; }
  // W [groups * mg, cg, kh, kw] -> wr [groups, kh * kw, mg, cg]: one [mg, cg] matrix per patch position, so
  // that a convolution is kh * kw GEMMs over shifted views of the padded image (no patch matrix at all).
  template <typename T> void SplitWeights(const T* w, int64_t groups, int64_t mg, int64_t cg, T* wr) const;
  // x [channels, H, W] -> xp [channels, hp, wp] with zero borders.
  template <typename T> void Pad(const T* x, int64_t channels, T* xp) const;
  // The patch matrix [channels * kh * kw, n] of a padded image, rows ld apart.
  template <typename T> void Im2Col(const T* xp, int64_t channels, T* col, int64_t ld) const;
  // xp [channels, hp, wp] -> x [channels, H, W] (the interior).
  template <typename T> void Crop(const T* xp, int64_t channels, T* x) const;
  // y [rows, oh * ow] -> yp [rows, n] (rows ld apart), zeros in the gaps.
  template <typename T> void Spread(const T* y, int64_t rows, T* yp, int64_t ld) const;
  // yp [rows, n] (rows ld apart) -> y [rows, oh * ow], plus bias[row] when bias is given.
  template <typename T> void Gather(const T* yp, int64_t rows, int64_t ld, T* y, const T* bias) const;
};

}  // namespace cpu
}  // namespace ontrain
