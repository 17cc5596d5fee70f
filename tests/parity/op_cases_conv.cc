// The op-parity cases of convolution, pooling and batch normalization (declared in op_case_builder.h):
// every convolution geometry with and without bias (and as FusedConv), its gradients, the pooling ops and
// their gradients (MaxPoolReluGrad included), and BatchNormalization's training and inference forms.
#include "tests/parity/op_case_builder.h"

namespace ontrain {
namespace parity {
namespace cases {
namespace {

using D = DType;

// Valid MaxPool Indices for x [n, c, h, w] pooled by k x k windows with stride s and padding p: one seeded
// in-bounds element of each window (row-major flat indices over the whole input).
Tensor PoolIndices(const Shape& x, int64_t k, int64_t s, int64_t p, const Shape& y, uint64_t seed) {
  Tensor pick = Random(D::kInt64, y, seed, 0, 1e6);
  Tensor out = Tensor::Allocate(D::kInt64, y, HostAllocator()).value();
  int64_t planes = x[0] * x[1], h = x[2], w = x[3], oh = y[2], ow = y[3];
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        std::vector<int64_t> inside;
        for (int64_t a = 0; a < k; ++a) {
          for (int64_t b = 0; b < k; ++b) {
            int64_t r = i * s - p + a, q = j * s - p + b;
            if (r >= 0 && r < h && q >= 0 && q < w) inside.push_back((pl * h + r) * w + q);
          }
        }
        int64_t o = (pl * oh + i) * ow + j;
        int64_t chosen = pick.data<int64_t>()[o];
        out.data<int64_t>()[o] = inside[static_cast<size_t>(chosen < 0 ? -chosen : chosen) % inside.size()];
      }
    }
  }
  return out;
}

}  // namespace

void ConvPoolCases(Builder& b) {
  using A = std::vector<onnx::AttributeProto>;
  struct C {
    const char* name;
    Shape x, w;
    A attrs;
  };
  const C convs[] = {
      {"3x3_pad1", {2, 3, 7, 6}, {4, 3, 3, 3}, {AttrInts("pads", {1, 1, 1, 1})}},
      {"3x3_stride2", {2, 3, 7, 6}, {4, 3, 3, 3}, {AttrInts("strides", {2, 2})}},
      {"dilated", {1, 2, 9, 9}, {3, 2, 3, 3}, {AttrInts("dilations", {2, 2}), AttrInts("pads", {2, 2, 2, 2})}},
      {"group2", {2, 4, 5, 5}, {6, 2, 3, 3}, {AttrInt("group", 2), AttrInts("pads", {1, 1, 1, 1})}},
      {"depthwise", {2, 4, 6, 6}, {4, 1, 3, 3}, {AttrInt("group", 4), AttrInts("pads", {1, 1, 1, 1})}},
      {"1d", {2, 3, 11}, {5, 3, 3}, {AttrInts("pads", {1, 1})}},
      {"1x1", {3, 8, 4, 4}, {16, 8, 1, 1}, {}},
  };
  for (const C& c : convs) {
    for (bool bias : {false, true}) {
      std::vector<Value> in = {Random(D::kFloat32, c.x, b.seed()), Random(D::kFloat32, c.w, b.seed())};
      if (bias) in.push_back(Random(D::kFloat32, {c.w[0]}, b.seed()));
      b.Add(StrCat("Conv_", c.name, bias ? "_bias" : ""), "", "Conv", 13, in, {D::kFloat32}, c.attrs);
      // com.microsoft FusedConv (the executor's Conv + Relu): the bias and ReLU in one pass on CUDA.
      A fused = c.attrs;
      fused.push_back(AttrString("activation", "Relu"));
      b.Add(StrCat("FusedConv_", c.name, bias ? "_bias" : ""), "com.microsoft", "FusedConv", 1, in, {D::kFloat32},
            fused);
    }
    // The gradient's dY has the forward output's shape: run the CPU geometry by hand for these cases.
    Shape y = {c.x[0], c.w[0]};
    for (size_t d = 2; d < c.x.size(); ++d) {
      int64_t pad = 0, stride = 1, dil = 1;
      for (const auto& a : c.attrs) {
        if (a.name() == "pads") pad = a.ints(0) + a.ints(static_cast<int>(c.x.size()) - 2);
        if (a.name() == "strides") stride = a.ints(0);
        if (a.name() == "dilations") dil = a.ints(0);
      }
      y.push_back((c.x[d] + pad - (c.w[d] - 1) * dil - 1) / stride + 1);
    }
    b.Add(StrCat("ConvGrad_", c.name), "com.microsoft", "ConvGrad", 1,
          {Random(D::kFloat32, y, b.seed()), Random(D::kFloat32, c.x, b.seed()), Random(D::kFloat32, c.w, b.seed())},
          {D::kFloat32, D::kFloat32, D::kFloat32}, c.attrs);
  }
  for (int64_t group : {1, 2}) {
    for (bool bias : {false, true}) {
      std::vector<Value> in = {Random(D::kFloat32, {2, 4, 3, 5}, b.seed()), Random(D::kFloat32, {4, 6 / group, 2, 3}, b.seed())};
      if (bias) in.push_back(Random(D::kFloat32, {6}, b.seed()));
      b.Add(StrCat("ConvTranspose_g", group, bias ? "_bias" : ""), "", "ConvTranspose", 13, in, {D::kFloat32},
            {AttrInt("group", group), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1}),
             AttrInts("output_padding", {1, 0})});
    }
  }
  b.Add("GatherElementsGrad_axis1", "com.microsoft", "GatherElementsGrad", 1,
        {Random(D::kFloat32, {3, 2, 4}, b.seed()), Ints({3, 5, 4}, {3}),
         Random(D::kInt64, {3, 2, 4}, b.seed(), -0.05, 0.05)},
        {D::kFloat32}, {AttrInt("axis", 1)});
  // Pooling: k x k, stride s, pad p on [2, 3, 7, 6].
  struct P {
    int64_t k, s, p;
  };
  const Shape x = {2, 3, 7, 6};
  for (P p : {P{2, 2, 0}, P{3, 2, 1}, P{3, 1, 1}}) {
    std::string n = StrCat("k", p.k, "s", p.s, "p", p.p);
    A attrs = {AttrInts("kernel_shape", {p.k, p.k}), AttrInts("strides", {p.s, p.s}),
               AttrInts("pads", {p.p, p.p, p.p, p.p})};
    Shape y = {2, 3, (7 + 2 * p.p - p.k) / p.s + 1, (6 + 2 * p.p - p.k) / p.s + 1};
    b.Add("MaxPool_" + n, "", "MaxPool", 12, {Random(D::kFloat32, x, b.seed())}, {D::kFloat32, D::kInt64}, attrs);
    b.Add("MaxPoolGrad_" + n, "", "MaxPoolGrad", 9, {Random(D::kFloat32, y, b.seed()), PoolIndices(x, p.k, p.s, p.p, y, b.seed())},
          {D::kFloat32}, attrs)
        .output_shapes = {x};
    // ai.ontrain MaxPoolReluGrad (the executor's MaxPoolGrad + ReluGrad): pooled values Y of both signs and
    // zeros mask the windows.
    Tensor pooled = Random(D::kFloat32, y, b.seed(), -1, 1);
    for (int64_t i = 0; i < pooled.NumElements(); i += 5) pooled.data<float>()[i] = 0.0f;
    b.Add("MaxPoolReluGrad_" + n, "ai.ontrain", "MaxPoolReluGrad", 1,
          {Random(D::kFloat32, y, b.seed()), PoolIndices(x, p.k, p.s, p.p, y, b.seed()), pooled}, {D::kFloat32}, attrs)
        .output_shapes = {x};
    for (int include : {0, 1}) {
      A avg = attrs;
      avg.push_back(AttrInt("count_include_pad", include));
      b.Add(StrCat("AveragePool_", n, "_incl", include), "", "AveragePool", 11, {Random(D::kFloat32, x, b.seed())},
            {D::kFloat32}, avg);
      b.Add(StrCat("AveragePoolGrad_", n, "_incl", include), "", "AveragePoolGrad", 9, {Random(D::kFloat32, y, b.seed())},
            {D::kFloat32}, avg)
          .output_shapes = {x};
    }
  }
  b.Add("MaxPool_ceil_dilated", "", "MaxPool", 12, {Random(D::kFloat32, x, b.seed())}, {D::kFloat32, D::kInt64},
        {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2}), AttrInts("dilations", {2, 1}), AttrInt("ceil_mode", 1)});
  b.Add("MaxPool_storage_order1", "", "MaxPool", 12, {Random(D::kFloat32, x, b.seed())}, {D::kFloat32, D::kInt64},
        {AttrInts("kernel_shape", {3, 3}), AttrInt("storage_order", 1)});
  b.Add("MaxPool_1d", "", "MaxPool", 12, {Random(D::kFloat32, {2, 3, 9}, b.seed())}, {D::kFloat32, D::kInt64},
        {AttrInts("kernel_shape", {3}), AttrInts("strides", {2})});
  b.Add("AveragePool_ceil", "", "AveragePool", 11, {Random(D::kFloat32, x, b.seed())}, {D::kFloat32},
        {AttrInts("kernel_shape", {3, 3}), AttrInts("strides", {2, 2}), AttrInt("ceil_mode", 1)});
  // sized by its X input (ontrain's form for run-time pooled dims): X's shape only is read
  b.Add("AveragePoolGrad_sized_by_x", "", "AveragePoolGrad", 9,
        {Random(D::kFloat32, {2, 3, 4, 3}, b.seed()), Random(D::kFloat32, x, b.seed())}, {D::kFloat32},
        {AttrInts("kernel_shape", {3, 2}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 0, 1, 0})});
  b.Add("GlobalAveragePool", "", "GlobalAveragePool", 1, {Random(D::kFloat32, {2, 3, 5, 4}, b.seed())}, {D::kFloat32});
}

void BatchNormCases(Builder& b) {
  const Shape x = {4, 3, 5, 2};
  auto params = [&]() {
    return std::vector<Value>{Random(D::kFloat32, x, b.seed(), -2, 3), Random(D::kFloat32, {3}, b.seed(), 0.5, 2),
                              Random(D::kFloat32, {3}, b.seed()), Random(D::kFloat32, {3}, b.seed()),
                              Random(D::kFloat32, {3}, b.seed(), 0.5, 2)};
  };
  b.Add("BatchNormalization_training", "", "BatchNormalization", 15, params(), {D::kFloat32, D::kFloat32, D::kFloat32},
        {AttrInt("training_mode", 1), AttrFloat("momentum", 0.8f)});
  b.Add("BatchNormalization_inference", "", "BatchNormalization", 15, params(), {D::kFloat32});
  b.Add("BatchNormalization_opset9_training", "", "BatchNormalization", 9, params(),
        {D::kFloat32, D::kFloat32, D::kFloat32, D::kFloat32, D::kFloat32});
  b.Add("BatchNormalization_2d", "", "BatchNormalization", 15,
        {Random(D::kFloat32, {6, 3}, b.seed()), Random(D::kFloat32, {3}, b.seed()), Random(D::kFloat32, {3}, b.seed()),
         Random(D::kFloat32, {3}, b.seed()), Random(D::kFloat32, {3}, b.seed(), 0.5, 2)},
        {D::kFloat32, D::kFloat32, D::kFloat32}, {AttrInt("training_mode", 1)});
  b.Add("BatchNormInternal", "com.microsoft", "BatchNormInternal", 1, params(),
        {D::kFloat32, D::kFloat32, D::kFloat32, D::kFloat32, D::kFloat32});
  b.Add("BatchNormalizationGrad", "com.microsoft", "BatchNormalizationGrad", 1,
        {Random(D::kFloat32, x, b.seed()), Random(D::kFloat32, x, b.seed(), -2, 3), Random(D::kFloat32, {3}, b.seed()),
         Random(D::kFloat32, {3}, b.seed()), Random(D::kFloat32, {3}, b.seed(), 0.5, 2)},
        {D::kFloat32, D::kFloat32, D::kFloat32});
  // batchnorm.cu's channel ranges: two ranges of uneven size (19 and 18 images of 16 x 16: BatchNormSplits),
  // and 1024-thread blocks (ranges of at least 8192 elements: one image of 91 x 91, two ranges).
  for (const Shape& shape : {Shape{37, 3, 16, 16}, Shape{2, 2, 91, 91}}) {
    const int64_t c = shape[1];
    const std::string name = shape[0] == 37 ? "ranges" : "1024_threads";
    b.Add("BatchNormalization_training_" + name, "", "BatchNormalization", 15,
          {Random(D::kFloat32, shape, b.seed(), -2, 3), Random(D::kFloat32, {c}, b.seed(), 0.5, 2),
           Random(D::kFloat32, {c}, b.seed()), Random(D::kFloat32, {c}, b.seed()),
           Random(D::kFloat32, {c}, b.seed(), 0.5, 2)},
          {D::kFloat32, D::kFloat32, D::kFloat32}, {AttrInt("training_mode", 1), AttrFloat("momentum", 0.8f)});
    b.Add("BatchNormalizationGrad_" + name, "com.microsoft", "BatchNormalizationGrad", 1,
          {Random(D::kFloat32, shape, b.seed()), Random(D::kFloat32, shape, b.seed(), -2, 3),
           Random(D::kFloat32, {c}, b.seed()), Random(D::kFloat32, {c}, b.seed()),
           Random(D::kFloat32, {c}, b.seed(), 0.5, 2)},
          {D::kFloat32, D::kFloat32, D::kFloat32});
  }
}

}  // namespace cases
}  // namespace parity
}  // namespace ontrain
