// Window geometry shared by Conv, ConvTranspose and the pooling kernels: kernel size, strides, dilations,
// explicit or automatic padding, and the resulting output size, for any number of spatial dimensions.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace ontrain {
namespace cpu {

struct WindowAttrs {
  std::vector<int64_t> kernel;     // from kernel_shape, or the weight's spatial dims
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> dilations;  // default 1
  std::vector<int64_t> pads;       // [begin..., end...]
  std::string auto_pad = "NOTSET";
  bool ceil_mode = false;

  // Reads the attributes of `node`; `kernel` may come from the weight instead (pass it non-empty).
  static WindowAttrs FromNode(const Node& node, std::vector<int64_t> kernel);

  // Fills pads (for auto_pad) and returns the output spatial dims for input spatial dims `in`.
  StatusOr<std::vector<int64_t>> OutputDims(const std::vector<int64_t>& in);
};

// Copies a patch matrix out of one image: col[c * K + kk, o] = x[c, o * stride - pad + kk * dilation] (0
// outside). x is [C, in...], col is [C * prod(kernel), prod(out)].
template <typename T>
void Im2Col(const T* x, int64_t channels, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
            const WindowAttrs& w, T* col);
// The same with rows `ld` elements apart (ld >= prod(out)): one image's block of a wider patch matrix.
template <typename T>
void Im2ColStrided(const T* x, int64_t channels, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
                   const WindowAttrs& w, T* col, int64_t ld);

// The adjoint of Im2Col: adds every patch element back into x (which the caller zeroes first).
template <typename T>
void Col2Im(const T* col, int64_t channels, const std::vector<int64_t>& in, const std::vector<int64_t>& out,
            const WindowAttrs& w, T* x);

}  // namespace cpu
}  // namespace ontrain
