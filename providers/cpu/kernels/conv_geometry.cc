// Window geometry and im2col/col2im for N spatial dimensions.
#include "providers/cpu/kernels/conv_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "providers/cpu/kernels/vrows.h"

namespace ontrain {
namespace cpu {

WindowAttrs WindowAttrs::FromNode(const Node& node, Shape kernel) {
  WindowAttrs w;
  w.weight_window = kernel;
  w.kernel = node.HasAttribute("kernel_shape") ? node.GetDims("kernel_shape") : std::move(kernel);
  size_t k = w.kernel.size();
  w.strides = node.GetDims("strides");
  w.dilations = node.GetDims("dilations");
  w.pads = node.GetDims("pads");
  if (w.strides.empty()) w.strides.assign(k, 1);
  if (w.dilations.empty()) w.dilations.assign(k, 1);
  if (w.pads.empty()) w.pads.assign(2 * k, 0);
  w.auto_pad = node.GetString("auto_pad", "NOTSET");
  w.ceil_mode = node.GetInt("ceil_mode", 0) != 0;
  return w;
}

Status WindowAttrs::CheckWeightWindow() const {
  if (!weight_window.empty() && kernel != weight_window) {
    return InvalidArgument("kernel_shape ", ShapeToString(kernel), " does not match the weight's spatial dims ",
                           ShapeToString(weight_window));
  }
  return Status::OK();
}

StatusOr<Shape> WindowAttrs::OutputDims(const Shape& in) {
  ONT_RETURN_IF_ERROR(CheckWeightWindow());
  size_t k = kernel.size();
  if (in.size() != k || strides.size() != k || dilations.size() != k || pads.size() != 2 * k) {
    return InvalidArgument("window attributes do not match ", in.size(), " spatial dims: kernel_shape has ", k,
                           ", strides ", strides.size(), ", dilations ", dilations.size(), ", pads ", pads.size());
  }
  Shape out(k);
  for (size_t i = 0; i < k; ++i) {
    if (strides[i] <= 0 || dilations[i] <= 0 || kernel[i] <= 0) {
      return InvalidArgument("kernel, strides and dilations must be positive");
    }
    int64_t span = (kernel[i] - 1) * dilations[i] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      out[i] = (in[i] + strides[i] - 1) / strides[i];
      int64_t total = std::max<int64_t>(0, (out[i] - 1) * strides[i] + span - in[i]);
      int64_t small = total / 2;
      pads[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      pads[i + k] = total - pads[i];
      continue;
    }
    if (auto_pad == "VALID") {
      pads[i] = pads[i + k] = 0;
    } else if (auto_pad != "NOTSET") {
      return InvalidArgument("unknown auto_pad \"", auto_pad, "\"");
    }
    int64_t padded = in[i] + pads[i] + pads[i + k];
    if (padded < span) {
      return InvalidArgument("window ", span, " is larger than the padded input ", padded, " in spatial dim ", i);
    }
    int64_t num = padded - span;
    out[i] = (ceil_mode ? (num + strides[i] - 1) / strides[i] : num / strides[i]) + 1;
    // With ceil_mode, a last window that would start in the end padding is dropped.
    if (ceil_mode && (out[i] - 1) * strides[i] >= in[i] + pads[i]) out[i]--;
  }
  return out;
}

namespace {

// Calls fn(col_row, x_offset_or_-1) ... factored loop for im2col and col2im.
template <typename Fn>
void ForEachPatch(int64_t channels, const Shape& in, const Shape& out,
                  const WindowAttrs& w, Fn fn) {
  size_t nd = in.size();
  int64_t ksize = 1, osize = 1, isize = 1;
  for (size_t i = 0; i < nd; ++i) {
    ksize *= w.kernel[i];
    osize *= out[i];
    isize *= in[i];
  }
  Shape kidx(nd), oidx(nd);
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t kk = 0; kk < ksize; ++kk) {
      int64_t r = kk;
      for (size_t d = nd; d-- > 0;) {
        kidx[d] = r % w.kernel[d];
        r /= w.kernel[d];
      }
      int64_t row = (c * ksize + kk) * osize;
      std::fill(oidx.begin(), oidx.end(), 0);
      for (int64_t o = 0; o < osize; ++o) {
        int64_t off = 0;
        bool inside = true;
        for (size_t d = 0; d < nd; ++d) {
          int64_t p = oidx[d] * w.strides[d] - w.pads[d] + kidx[d] * w.dilations[d];
          if (p < 0 || p >= in[d]) {
            inside = false;
            break;
          }
          off = off * in[d] + p;
        }
        fn(row + o, inside ? c * isize + off : -1);
        for (size_t d = nd; d-- > 0;) {
          if (++oidx[d] < out[d]) break;
          oidx[d] = 0;
        }
      }
    }
  }
}

// The first output row i >= 0 with i * stride >= reach (the rows before it read above the image).
int64_t StrideRowBegin(int64_t reach, int64_t stride) { return reach <= 0 ? 0 : (reach + stride - 1) / stride; }

}  // namespace

template <typename T>
void Im2Col(const T* x, int64_t channels, const Shape& in, const Shape& out,
            const WindowAttrs& w, T* col) {
  int64_t osize = 1;
  for (int64_t o : out) osize *= o;
  Im2ColStrided(x, channels, in, out, w, col, osize);
}

template <typename T>
void Im2ColStrided(const T* x, int64_t channels, const Shape& in, const Shape& out,
                   const WindowAttrs& w, T* col, int64_t ld) {
  int64_t osize = 1;
  for (int64_t o : out) osize *= o;
  // A flat offset of the dense [rows, osize] matrix -> the same element with rows ld apart.
  auto at = [&](int64_t i) { return i / osize * ld + i % osize; };
  if (in.size() == 2) {
    // Two spatial dims, the same visit as ForEachPatch without per-element index arithmetic: for each patch
    // row (channel, kernel row a, kernel column b) the in-bounds output columns form one range [j0, j1),
    // computed once; output row i reads input row i * sh - ph + a * dh (all padding when outside).
    const int64_t h = in[0], wd = in[1], oh = out[0], ow = out[1];
    const int64_t kh = w.kernel[0], kw = w.kernel[1], sh = w.strides[0], sw = w.strides[1];
    const int64_t dh = w.dilations[0], dw = w.dilations[1], ph = w.pads[0], pw = w.pads[1];
    for (int64_t c = 0; c < channels; ++c) {
      const T* xc = x + c * h * wd;
      for (int64_t a = 0; a < kh; ++a) {
        for (int64_t b = 0; b < kw; ++b) {
          T* base = col + ((c * kh + a) * kw + b) * ld;
          int64_t first = pw - b * dw, j0 = first <= 0 ? 0 : (first + sw - 1) / sw;
          int64_t last = wd - 1 + pw - b * dw, j1 = last < 0 ? 0 : std::min(ow, last / sw + 1);
          j1 = std::max(j0, j1);
          if constexpr (std::is_same_v<T, float>) {
            if (sw == 2) {  // the block's in-bounds rows [i0, i1) in one call (rows of a few dozen elements)
              const int64_t i0 = StrideRowBegin(ph - a * dh, sh), i1 = std::max(i0, std::min(oh, StrideRowBegin(h + ph - a * dh, sh)));
              for (int64_t i = 0; i < oh; ++i) {
                T* d = base + i * ow;
                if (i < i0 || i >= i1) {
                  std::fill(d, d + ow, T(0));
                  continue;
                }
                std::fill(d, d + j0, T(0));
                std::fill(d + j1, d + ow, T(0));
              }
              if (i1 > i0 && j1 > j0) {
                VRowsGather2(xc + (i0 * sh - ph + a * dh) * wd + b * dw - pw + 2 * j0, sh * wd, base + i0 * ow + j0, ow,
                             i1 - i0, j1 - j0);
              }
              continue;
            }
          }
          for (int64_t i = 0; i < oh; ++i) {
            T* d = base + i * ow;
            const int64_t r = i * sh - ph + a * dh;
            if (r < 0 || r >= h) {
              std::fill(d, d + ow, T(0));
              continue;
            }
            const int64_t src = r * wd + b * dw - pw;  // output column 0's offset (negative in the left padding)
            std::fill(d, d + j0, T(0));
            if (sw == 1) {
              std::copy(xc + src + j0, xc + src + j1, d + j0);
            } else {
              for (int64_t j = j0; j < j1; ++j) d[j] = xc[src + j * sw];
            }
            std::fill(d + j1, d + ow, T(0));
          }
        }
      }
    }
    return;
  }
  ForEachPatch(channels, in, out, w, [&](int64_t i, int64_t src) { col[at(i)] = src >= 0 ? x[src] : T(0); });
}

template <typename T>
void Col2Im(const T* col, int64_t channels, const Shape& in, const Shape& out,
            const WindowAttrs& w, T* x) {
  if (in.size() == 2) {
    // Two spatial dims: Im2ColStrided's visit, adding back instead of copying (the additions in
    // ForEachPatch's order).
    const int64_t h = in[0], wd = in[1], oh = out[0], ow = out[1];
    const int64_t kh = w.kernel[0], kw = w.kernel[1], sh = w.strides[0], sw = w.strides[1];
    const int64_t dh = w.dilations[0], dw = w.dilations[1], ph = w.pads[0], pw = w.pads[1];
    for (int64_t c = 0; c < channels; ++c) {
      T* xc = x + c * h * wd;
      for (int64_t a = 0; a < kh; ++a) {
        for (int64_t b = 0; b < kw; ++b) {
          const T* base = col + ((c * kh + a) * kw + b) * oh * ow;
          int64_t first = pw - b * dw, j0 = first <= 0 ? 0 : (first + sw - 1) / sw;
          int64_t last = wd - 1 + pw - b * dw, j1 = last < 0 ? 0 : std::min(ow, last / sw + 1);
          if constexpr (std::is_same_v<T, float>) {
            if (sw == 2) {  // the block's in-bounds rows [i0, i1) in one call, as in Im2ColStrided
              const int64_t i0 = StrideRowBegin(ph - a * dh, sh), i1 = std::max(i0, std::min(oh, StrideRowBegin(h + ph - a * dh, sh)));
              if (i1 > i0 && j1 > j0) {
                VRowsScatterAdd2(base + i0 * ow + j0, ow, xc + (i0 * sh - ph + a * dh) * wd + b * dw - pw + 2 * j0, sh * wd,
                                 i1 - i0, j1 - j0);
              }
              continue;
            }
          }
          for (int64_t i = 0; i < oh; ++i) {
            const int64_t r = i * sh - ph + a * dh;
            if (r < 0 || r >= h) continue;
            const T* s = base + i * ow;
            const int64_t dst = r * wd + b * dw - pw;  // output column 0's offset (negative in the left padding)
            if (sw == 1) {
              for (int64_t j = j0; j < j1; ++j) xc[dst + j] += s[j];
            } else {
              for (int64_t j = j0; j < j1; ++j) xc[dst + j * sw] += s[j];
            }
          }
        }
      }
    }
    return;
  }
  ForEachPatch(channels, in, out, w, [&](int64_t i, int64_t dst) {
    if (dst >= 0) x[dst] += col[i];
  });
}

bool PaddedRows::Applies(const Shape& in, const WindowAttrs& a) {
  if (in.size() != 2 || a.strides.size() != 2 || a.pads.size() != 4 || a.dilations.size() != 2) return false;
  for (int64_t p : a.pads) if (p < 0) return false;
  return a.strides[0] == 1 && a.strides[1] == 1;
}

PaddedRows::PaddedRows(const Shape& in, const Shape& out, const WindowAttrs& a)
    : h(in[0]), w(in[1]), hp(in[0] + a.pads[0] + a.pads[2]), wp(in[1] + a.pads[1] + a.pads[3]), oh(out[0]), ow(out[1]),
      n(out[0] > 0 ? (out[0] - 1) * wp + out[1] : 0), pt(a.pads[0]), pl(a.pads[1]), kh(a.kernel[0]), kw(a.kernel[1]),
      dh(a.dilations[0]), dw(a.dilations[1]) {}

template <typename T>
void PaddedRows::SplitWeights(const T* w, int64_t groups, int64_t mg, int64_t cg, T* wr) const {
  const int64_t k = kh * kw;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t m = 0; m < mg; ++m) {
        for (int64_t c = 0; c < cg; ++c) wr[((g * k + p) * mg + m) * cg + c] = w[((g * mg + m) * cg + c) * k + p];
      }
    }
  }
}

template <typename T>
void PaddedRows::Pad(const T* x, int64_t channels, T* xp) const {
  for (int64_t c = 0; c < channels; ++c) {
    T* p = xp + c * plane();
    const T* s = x + c * h * w;
    std::fill(p, p + pt * wp, T(0));
    for (int64_t i = 0; i < h; ++i) {
      T* row = p + (pt + i) * wp;
      std::fill(row, row + pl, T(0));
      CopyRow(s + i * w, w, row + pl);
      std::fill(row + pl + w, row + wp, T(0));
    }
    std::fill(p + (pt + h) * wp, p + plane(), T(0));
  }
}

template <typename T>
void PaddedRows::Im2Col(const T* xp, int64_t channels, T* col, int64_t ld) const {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t a = 0; a < kh; ++a) {
      for (int64_t b = 0; b < kw; ++b) {
        const T* src = xp + c * plane() + a * dh * wp + b * dw;
        CopyRow(src, n, col + ((c * kh + a) * kw + b) * ld);
      }
    }
  }
}

template <typename T>
void PaddedRows::Crop(const T* xp, int64_t channels, T* x) const {
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < h; ++i) {
      CopyRow(xp + c * plane() + (pt + i) * wp + pl, w, x + (c * h + i) * w);
    }
  }
}

template <typename T>
void PaddedRows::Spread(const T* y, int64_t rows, T* yp, int64_t ld) const {
  for (int64_t r = 0; r < rows; ++r) {
    T* d = yp + r * ld;
    for (int64_t i = 0; i < oh; ++i) {
      CopyRow(y + (r * oh + i) * ow, ow, d + i * wp);
      if (i + 1 < oh) std::fill(d + i * wp + ow, d + (i + 1) * wp, T(0));
    }
  }
}

template <typename T>
void PaddedRows::Gather(const T* yp, int64_t rows, int64_t ld, T* y, const T* bias) const {
  for (int64_t r = 0; r < rows; ++r) {
    const T bv = bias ? bias[r] : T(0);
    for (int64_t i = 0; i < oh; ++i) {
      const T* s = yp + r * ld + i * wp;
      T* d = y + (r * oh + i) * ow;
      if (bias) {
        for (int64_t j = 0; j < ow; ++j) d[j] = s[j] + bv;
      } else {
        CopyRow(s, ow, d);
      }
    }
  }
}

#define ONT_PADDED_ROWS(T)                                                           \
  template void PaddedRows::SplitWeights<T>(const T*, int64_t, int64_t, int64_t, T*) const; \
  template void PaddedRows::Pad<T>(const T*, int64_t, T*) const;                     \
  template void PaddedRows::Im2Col<T>(const T*, int64_t, T*, int64_t) const;         \
  template void PaddedRows::Crop<T>(const T*, int64_t, T*) const;                    \
  template void PaddedRows::Spread<T>(const T*, int64_t, T*, int64_t) const;         \
  template void PaddedRows::Gather<T>(const T*, int64_t, int64_t, T*, const T*) const;
ONT_PADDED_ROWS(float)
ONT_PADDED_ROWS(double)
#undef ONT_PADDED_ROWS

template void Im2Col<float>(const float*, int64_t, const Shape&, const Shape&,
                            const WindowAttrs&, float*);
template void Im2Col<double>(const double*, int64_t, const Shape&, const Shape&,
                             const WindowAttrs&, double*);
template void Im2ColStrided<float>(const float*, int64_t, const Shape&, const Shape&,
                                   const WindowAttrs&, float*, int64_t);
template void Im2ColStrided<double>(const double*, int64_t, const Shape&, const Shape&,
                                    const WindowAttrs&, double*, int64_t);
template void Col2Im<float>(const float*, int64_t, const Shape&, const Shape&,
                            const WindowAttrs&, float*);
template void Col2Im<double>(const double*, int64_t, const Shape&, const Shape&,
                             const WindowAttrs&, double*);

}  // namespace cpu
}  // namespace ontrain
