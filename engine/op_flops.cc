// Matrix FLOPs per op run: see op_flops.h.
#include "engine/op_flops.h"

#include <string>
#include <vector>

namespace ontrain {
namespace {

int64_t Product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to && i < s.size(); ++i) p *= s[i];
  return p;
}

// MatMul, FusedMatMul and MatMulBias: every output element is a dot product of length K, K read from A (its
// last axis, or the one before it when FusedMatMul or MatMulBias transposes A; a vector A is K itself). The
// bias adds nothing, as Gemm's.
int64_t MatMulFlops(const Node& n, KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (a == nullptr || y == nullptr || a->shape().empty()) return 0;
  const Shape& s = a->shape();
  const bool trans_a = n.op_type != "MatMul" && n.GetInt("transA", 0) != 0 && s.size() >= 2;
  const int64_t k = trans_a ? s[s.size() - 2] : s[s.size() - 1];
  return 2 * y->NumElements() * k;
}

int64_t GemmFlops(const Node& n, KernelContext& ctx) {
  const Tensor* a = ctx.input(0);
  Tensor* y = ctx.output(0);
  if (a == nullptr || y == nullptr || a->shape().size() != 2) return 0;
  const int64_t k = n.GetInt("transA", 0) != 0 ? a->shape()[0] : a->shape()[1];
  return 2 * y->NumElements() * k;
}

// The spatial size of a convolution's output (before any fused pooling): ONNX's Conv rule for explicit pads
// and for auto_pad SAME_UPPER / SAME_LOWER (ceil(in / stride)) and VALID.
int64_t ConvOutputSpatial(const Node& n, const Shape& x, const Shape& w) {
  const size_t dims = x.size() - 2;
  // GetDims: no heap allocation (this runs for every profiled convolution of every step).
  const Shape strides = n.GetDims("strides"), dilations = n.GetDims("dilations"), pads = n.GetDims("pads");
  const std::string auto_pad = n.GetString("auto_pad", "NOTSET");
  int64_t out = 1;
  for (size_t i = 0; i < dims; ++i) {
    const int64_t in = x[2 + i], k = w[2 + i];
    const int64_t stride = i < strides.size() ? strides[i] : 1, dilation = i < dilations.size() ? dilations[i] : 1;
    if (stride <= 0) return 0;
    int64_t o;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      o = (in + stride - 1) / stride;
    } else {
      const int64_t pad = auto_pad == "VALID" || pads.size() != 2 * dims ? 0 : pads[i] + pads[dims + i];
      o = (in + pad - dilation * (k - 1) - 1) / stride + 1;
    }
    if (o <= 0) return 0;
    out *= o;
  }
  return out;
}

// One pass of a convolution (forward, data gradient or weight gradient): a multiply-add for every output
// position, output channel and filter tap.
int64_t ConvPassFlops(int64_t batch, int64_t out_channels, int64_t spatial, const Shape& w) {
  return 2 * batch * out_channels * spatial * Product(w, 1, w.size());
}

}  // namespace

int64_t MatrixFlops(const Node& n, KernelContext& ctx) {
  const std::string& op = n.op_type;
  if (op == "MatMul" || op == "FusedMatMul" || op == "MatMulBias") return MatMulFlops(n, ctx);
  if (op == "Gemm" || op == "FusedGemm") return GemmFlops(n, ctx);
  if (op == "Conv" || op == "FusedConv" || op == "FusedConvMaxPool") {
    const Tensor *x = ctx.input(0), *w = ctx.input(1);
    if (x == nullptr || w == nullptr || x->shape().size() < 3 || w->shape().size() != x->shape().size()) return 0;
    return ConvPassFlops(x->shape()[0], w->shape()[0], ConvOutputSpatial(n, x->shape(), w->shape()), w->shape());
  }
  if (op == "ConvGrad" || op == "MaxPoolReluConvGrad") {
    // ConvGrad(dY, X, W); MaxPoolReluConvGrad(dZ, I, Z, X, W), whose dY is the unpooled gradient of a conv
    // output it never stores. Outputs: dX (never requested of the fused op), dW, dB.
    const bool fused = op == "MaxPoolReluConvGrad";
    const Tensor *x = ctx.input(fused ? 3 : 1), *w = ctx.input(fused ? 4 : 2);
    if (x == nullptr || w == nullptr || x->shape().size() < 3 || w->shape().size() != x->shape().size()) return 0;
    const int64_t spatial = ConvOutputSpatial(n, x->shape(), w->shape());
    const int64_t pass = ConvPassFlops(x->shape()[0], w->shape()[0], spatial, w->shape());
    return pass * ((ctx.output_requested(0) ? 1 : 0) + (ctx.output_requested(1) ? 1 : 0));
  }
  if (op == "ConvTranspose") {
    // W is [C_in, C_out / group, k...]: every input position spreads over C_out / group channels and the taps.
    const Tensor *x = ctx.input(0), *w = ctx.input(1);
    if (x == nullptr || w == nullptr || x->shape().size() < 3 || w->shape().size() != x->shape().size()) return 0;
    return 2 * x->NumElements() * Product(w->shape(), 1, w->shape().size());
  }
  return 0;
}

}  // namespace ontrain
