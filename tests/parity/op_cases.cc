// The cases of the op-level parity table, by op family. Seeds are the case's index in its family, so a
// case's inputs never change when others are added elsewhere.
#include "tests/parity/op_cases.h"

#include <cmath>
#include <functional>

namespace ontrain {
namespace parity {
namespace {

using D = DType;
const std::vector<D> kAllTypes = {D::kFloat32, D::kFloat64, D::kFloat16, D::kBFloat16, D::kInt8,   D::kInt16, D::kInt32,
                                  D::kInt64,   D::kUInt8,   D::kUInt16,  D::kUInt32,    D::kUInt64, D::kBool};
const std::vector<D> kF32F64 = {D::kFloat32, D::kFloat64};

std::string ShapeName(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string n;
  for (int64_t d : s) n += (n.empty() ? "" : "x") + std::to_string(d);
  return n;
}

class Builder {
 public:
  explicit Builder(std::vector<OpCase>* out) : out_(out) {}
  OpCase& Add(const std::string& name, const std::string& domain, const std::string& op, int opset,
              std::vector<Value> inputs, std::vector<DType> outputs, std::vector<onnx::AttributeProto> attrs = {}) {
    OpCase c;
    c.name = name;
    c.domain = domain;
    c.op = op;
    c.opset = opset;
    c.inputs = std::move(inputs);
    c.outputs = std::move(outputs);
    c.attrs = std::move(attrs);
    out_->push_back(std::move(c));
    return out_->back();
  }
  uint64_t seed() { return ++seed_; }

 private:
  std::vector<OpCase>* out_;
  uint64_t seed_ = 0;
};

void UnaryCases(Builder& b) {
  struct U {
    const char* op;
    double lo, hi;
    int opset;
  };
  const U ops[] = {{"Abs", -2, 2, 13},   {"Ceil", -3, 3, 13}, {"Cos", -3, 3, 13},        {"Erf", -2, 2, 13},
                   {"Exp", -3, 3, 13},   {"Floor", -3, 3, 13}, {"Log", 0.1, 4, 13},       {"Neg", -2, 2, 13},
                   {"Reciprocal", 0.5, 3, 13}, {"Relu", -2, 2, 14}, {"Sigmoid", -4, 4, 13}, {"Sin", -3, 3, 13},
                   {"Softplus", -4, 4, 13}, {"Sqrt", 0, 4, 13}, {"Tanh", -3, 3, 13},       {"LeakyRelu", -2, 2, 16}};
  for (const U& u : ops) {
    for (D t : kF32F64) {
      for (const Shape& s : {Shape{}, Shape{7}, Shape{3, 5, 4}, Shape{0, 3}}) {
        b.Add(StrCat(u.op, "_", DTypeName(t), "_", ShapeName(s)), "", u.op, u.opset, {Random(t, s, b.seed(), u.lo, u.hi)},
              {t}, std::string(u.op) == "LeakyRelu" ? std::vector<onnx::AttributeProto>{AttrFloat("alpha", 0.2f)}
                                                    : std::vector<onnx::AttributeProto>{});
      }
    }
  }
  for (D t : kF32F64) {
    for (const char* approx : {"none", "tanh"}) {
      b.Add(StrCat("Gelu_", approx, "_", DTypeName(t)), "", "Gelu", 20, {Random(t, {4, 33}, b.seed(), -4, 4)}, {t},
            {AttrString("approximate", approx)});
    }
  }
  for (const char* op : {"Gelu", "FastGelu"}) {
    b.Add(StrCat("Ms", op, "_float32"), "com.microsoft", op, 1, {Random(D::kFloat32, {3, 17}, b.seed(), -4, 4)},
          {D::kFloat32});
  }
  b.Add("MsFastGelu_bias_float32", "com.microsoft", "FastGelu", 1,
        {Random(D::kFloat32, {2, 3, 8}, b.seed(), -4, 4), Random(D::kFloat32, {8}, b.seed())}, {D::kFloat32});
}

void BinaryCases(Builder& b) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{3, 4}, {3, 4}}, {{2, 3, 4}, {4}}, {{2, 1, 4}, {3, 1}}, {{5}, {}}, {{0, 4}, {4}}, {{1}, {2, 3}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (D t : {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64}) {
      for (const auto& [sa, sb] : shapes) {
        bool div = std::string(op) == "Div";
        Tensor a = Random(t, sa, b.seed(), -3, 3);
        Tensor bb = div ? Random(t, sb, b.seed(), 0.5, 3) : Random(t, sb, b.seed(), -3, 3);
        b.Add(StrCat(op, "_", DTypeName(t), "_", ShapeName(sa), "_by_", ShapeName(sb)), "", op, 14, {a, bb}, {t});
      }
    }
  }
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    for (D t : {D::kFloat32, D::kInt64}) {
      for (const auto& [sa, sb] : shapes) {
        // Small integer values, so that equal elements occur.
        b.Add(StrCat(op, "_", DTypeName(t), "_", ShapeName(sa), "_by_", ShapeName(sb)), "", op, 16,
              {Random(t, sa, b.seed(), -0.03, 0.03), Random(t, sb, b.seed(), -0.03, 0.03)}, {D::kBool});
      }
    }
  }
  const char* grads[] = {"ReluGrad", "SigmoidGrad", "TanhGrad", "GeluGrad", "FastGeluGrad", "LeakyReluGrad"};
  for (const char* op : grads) {
    for (const Shape& s : {Shape{5}, Shape{3, 7}, Shape{0, 2}}) {
      b.Add(StrCat(op, "_float32_", ShapeName(s)), "com.microsoft", op, 1,
            {Random(D::kFloat32, s, b.seed()), Random(D::kFloat32, s, b.seed(), -3, 3)}, {D::kFloat32},
            std::string(op) == "LeakyReluGrad" ? std::vector<onnx::AttributeProto>{AttrFloat("alpha", 0.1f)}
                                               : std::vector<onnx::AttributeProto>{});
    }
  }
  for (int down : {0, 1}) {
    b.Add(StrCat("Scale_down", down), "com.microsoft", "Scale", 1,
          {Random(D::kFloat32, {4, 5}, b.seed()), Tensor::FromVector<float>({2.5f}, {})}, {D::kFloat32},
          {AttrInt("scale_down", down)});
  }
}

void WhereAndCastCases(Builder& b) {
  for (D t : kAllTypes) {
    b.Add(StrCat("Where_", DTypeName(t)), "", "Where", 16,
          {Random(D::kBool, {2, 1, 4}, b.seed()), Random(t, {3, 4}, b.seed()), Random(t, {1, 4}, b.seed())}, {t});
  }
  const std::vector<D> castable = {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64, D::kBool};
  for (D from : castable) {
    for (D to : castable) {
      b.Add(StrCat("Cast_", DTypeName(from), "_to_", DTypeName(to)), "", "Cast", 19,
            {Random(from, {3, 5}, b.seed(), -3, 3)}, {to}, {AttrInt("to", static_cast<int64_t>(to))});
    }
  }
}

void MovementCases(Builder& b) {
  for (D t : kAllTypes) {
    std::string ty = DTypeName(t);
    b.Add("Identity_" + ty, "", "Identity", 16, {Random(t, {3, 4}, b.seed())}, {t});
    b.Add("Flatten_" + ty, "", "Flatten", 13, {Random(t, {2, 3, 4}, b.seed())}, {t}, {AttrInt("axis", 2)});
    b.Add("Reshape_" + ty, "", "Reshape", 14, {Random(t, {2, 3, 4}, b.seed()), Ints({4, -1, 3}, {3})}, {t});
    b.Add("Squeeze_" + ty, "", "Squeeze", 13, {Random(t, {1, 3, 1, 2}, b.seed()), Ints({0, 2}, {2})}, {t});
    b.Add("Unsqueeze_" + ty, "", "Unsqueeze", 13, {Random(t, {3, 2}, b.seed()), Ints({0, 3}, {2})}, {t});
    b.Add("Transpose_" + ty, "", "Transpose", 13, {Random(t, {2, 3, 4, 5}, b.seed())}, {t},
          {AttrInts("perm", {2, 0, 3, 1})});
    b.Add("Transpose_default_" + ty, "", "Transpose", 13, {Random(t, {3, 7}, b.seed())}, {t});
    b.Add("Expand_" + ty, "", "Expand", 13, {Random(t, {3, 1}, b.seed()), Ints({2, 3, 4}, {3})}, {t});
    b.Add("Tile_" + ty, "", "Tile", 13, {Random(t, {2, 3}, b.seed()), Ints({2, 3}, {2})}, {t});
    b.Add("Concat_" + ty, "", "Concat", 13,
          {Random(t, {2, 3}, b.seed()), Random(t, {2, 0}, b.seed()), Random(t, {2, 5}, b.seed())}, {t},
          {AttrInt("axis", 1)});
    b.Add("Split_" + ty, "", "Split", 13, {Random(t, {7, 3}, b.seed()), Ints({2, 5}, {2})}, {t, t}, {AttrInt("axis", 0)});
    b.Add("Gather_" + ty, "", "Gather", 13, {Random(t, {4, 3, 2}, b.seed()), Ints({2, -1, 0, 2}, {2, 2})}, {t},
          {AttrInt("axis", 1)});
  }
  b.Add("Gather_int32_indices", "", "Gather", 13,
        {Random(D::kFloat32, {5, 3}, b.seed()), Ints({4, 0, 1}, {3}, D::kInt32)}, {D::kFloat32});
  b.Add("GatherGrad_axis0", "com.microsoft", "GatherGrad", 1,
        {Ints({6, 4}, {2}), Ints({1, 5, 1, 0, 5, 5}, {2, 3}), Random(D::kFloat32, {2, 3, 4}, b.seed())}, {D::kFloat32});
  b.Add("GatherGrad_axis1", "com.microsoft", "GatherGrad", 1,
        {Ints({2, 5, 3}, {3}), Ints({4, 4, 0}, {3}, D::kInt32), Random(D::kFloat32, {2, 3, 3}, b.seed())},
        {D::kFloat32}, {AttrInt("axis", 1)});
}

void GemmCases(Builder& b) {
  for (D t : kF32F64) {
    std::string ty = DTypeName(t);
    const std::vector<std::pair<Shape, Shape>> mm = {{{3, 4}, {4, 5}},       {{2, 3, 4}, {4, 5}},   {{2, 3, 4}, {2, 4, 5}},
                                                     {{4}, {4, 5}},          {{3, 4}, {4}},         {{2, 1, 3, 4}, {1, 5, 4, 2}},
                                                     {{2, 3, 4}, {1, 4, 5}}, {{3, 0}, {0, 5}},      {{33, 65}, {65, 17}}};
    for (const auto& [sa, sb] : mm) {
      b.Add(StrCat("MatMul_", ty, "_", ShapeName(sa), "_by_", ShapeName(sb)), "", "MatMul", 13,
            {Random(t, sa, b.seed()), Random(t, sb, b.seed())}, {t});
    }
    for (int ta : {0, 1}) {
      for (int tb : {0, 1}) {
        Shape sa = ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, sb = tb ? Shape{2, 5, 4} : Shape{2, 4, 5};
        b.Add(StrCat("FusedMatMul_", ty, "_t", ta, tb), "com.microsoft", "FusedMatMul", 1,
              {Random(t, sa, b.seed()), Random(t, sb, b.seed())}, {t},
              {AttrInt("transA", ta), AttrInt("transB", tb), AttrFloat("alpha", 0.5f)});
        for (const Shape& c : {Shape{5}, Shape{3, 5}, Shape{1, 1}, Shape{}}) {
          std::vector<Value> in = {Random(t, ta ? Shape{4, 3} : Shape{3, 4}, b.seed()),
                                   Random(t, tb ? Shape{5, 4} : Shape{4, 5}, b.seed())};
          if (!c.empty()) in.push_back(Random(t, c, b.seed()));
          b.Add(StrCat("Gemm_", ty, "_t", ta, tb, "_c", ShapeName(c)), "", "Gemm", 13, in, {t},
                {AttrInt("transA", ta), AttrInt("transB", tb), AttrFloat("alpha", 0.7f), AttrFloat("beta", 1.5f)});
        }
      }
    }
  }
}

void ReduceCases(Builder& b) {
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare",
                       "ReduceL1",  "ReduceL2",   "ReduceLogSumExp"};
  const std::vector<std::vector<int64_t>> axes = {{1}, {0, 2}, {-1}, {0}, {}};
  for (const char* op : ops) {
    int opset = std::string(op) == "ReduceSum" ? 13 : 18;
    for (const auto& ax : axes) {
      for (int keep : {0, 1}) {
        std::vector<Value> in = {Random(D::kFloat32, {3, 4, 5}, b.seed(), 0.1, 2)};
        if (!ax.empty()) in.push_back(Ints(ax, {static_cast<int64_t>(ax.size())}));
        std::string an;
        for (int64_t a : ax) an += "_" + std::to_string(a < 0 ? 9 : a);
        b.Add(StrCat(op, "_axes", ax.empty() ? "_all" : an, "_keep", keep), "", op, opset, in, {D::kFloat32},
              {AttrInt("keepdims", keep)});
      }
    }
    b.Add(StrCat(op, "_attr_axes"), "", op, 11, {Random(D::kFloat32, {2, 3, 4}, b.seed(), 0.1, 2)}, {D::kFloat32},
          {AttrInts("axes", {0, 1})});
  }
  b.Add("ReduceSum_noop", "", "ReduceSum", 13, {Random(D::kFloat32, {3, 4}, b.seed())}, {D::kFloat32},
        {AttrInt("noop_with_empty_axes", 1)});
  b.Add("ReduceSum_tall", "", "ReduceSum", 13, {Random(D::kFloat32, {3000, 3}, b.seed()), Ints({0}, {1})},
        {D::kFloat32});
  b.Add("ReduceSumTraining", "com.microsoft", "ReduceSumTraining", 1,
        {Random(D::kFloat32, {4, 3, 6}, b.seed()), Ints({0, 1}, {2})}, {D::kFloat32}, {AttrInt("keepdims", 0)});
}

void SoftmaxCases(Builder& b) {
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (int opset : {11, 13}) {
      for (int64_t axis : {-1, 1, 0}) {
        b.Add(StrCat(op, "_opset", opset, "_axis", axis < 0 ? 9 : axis), "", op, opset,
              {Random(D::kFloat32, {3, 4, 5}, b.seed(), -5, 5)}, {D::kFloat32}, {AttrInt("axis", axis)});
      }
    }
    b.Add(StrCat(op, "_wide"), "", op, 13, {Random(D::kFloat32, {2, 1000}, b.seed(), -5, 5)}, {D::kFloat32});
  }
  for (const char* op : {"SoftmaxGrad", "SoftmaxGrad_13", "LogSoftmaxGrad", "LogSoftmaxGrad_13"}) {
    for (int64_t axis : {-1, 1}) {
      b.Add(StrCat(op, "_axis", axis < 0 ? 9 : axis), "com.microsoft", op, 1,
            {Random(D::kFloat32, {3, 4, 5}, b.seed()), Random(D::kFloat32, {3, 4, 5}, b.seed(), -2, 0)}, {D::kFloat32},
            {AttrInt("axis", axis)});
    }
  }
}

void LossCases(Builder& b) {
  for (const char* reduction : {"mean", "sum", "none"}) {
    for (D labels : {D::kInt64, D::kInt32}) {
      std::string base = StrCat(reduction, "_", DTypeName(labels));
      b.Add("SCE_" + base, "", "SoftmaxCrossEntropyLoss", 13,
            {Random(D::kFloat32, {8, 5}, b.seed(), -3, 3), Ints({0, 4, 2, 2, 1, 3, 4, 0}, {8}, labels)},
            {D::kFloat32, D::kFloat32}, {AttrString("reduction", reduction)});
      b.Add("SCE_3d_weights_ignore_" + base, "", "SoftmaxCrossEntropyLoss", 13,
            {Random(D::kFloat32, {4, 5, 3}, b.seed(), -3, 3), Ints({0, 4, 2, 2, 1, 3, 4, 0, 1, 1, 2, 3}, {4, 3}, labels),
             Random(D::kFloat32, {5}, b.seed(), 0.2, 2)},
            {D::kFloat32, D::kFloat32}, {AttrString("reduction", reduction), AttrInt("ignore_index", 2)});
      b.Add("SCEInternal_" + base, "com.microsoft", "SoftmaxCrossEntropyLossInternal", 1,
            {Random(D::kFloat32, {6, 4}, b.seed(), -3, 3), Ints({0, 3, 1, 1, 2, 3}, {6}, labels), Value(),
             Ints({1}, {})},
            {D::kFloat32, D::kFloat32}, {AttrString("reduction", reduction)});
      Shape dy = std::string(reduction) == "none" ? Shape{8} : Shape{};
      b.Add("SCEGrad_" + base, "com.microsoft", "SoftmaxCrossEntropyLossGrad", 1,
            {Random(D::kFloat32, dy, b.seed()), Random(D::kFloat32, {8, 5}, b.seed(), -3, -0.5),
             Ints({0, 4, 2, 2, 1, 3, 4, 0}, {8}, labels), Random(D::kFloat32, {5}, b.seed(), 0.2, 2)},
            {D::kFloat32}, {AttrString("reduction", reduction), AttrInt("ignore_index", 4)});
      b.Add("SCEInternalGrad_" + base, "com.microsoft", "SoftmaxCrossEntropyLossInternalGrad", 1,
            {Random(D::kFloat32, dy, b.seed()), Random(D::kFloat32, {8, 5}, b.seed(), -3, -0.5),
             Ints({0, 4, 2, 2, 1, 3, 4, 0}, {8}, labels), Value(), Ints({3}, {}), Random(D::kFloat32, {8, 5}, b.seed())},
            {D::kFloat32}, {AttrString("reduction", reduction)});
    }
  }
}

void NormCases(Builder& b) {
  for (int64_t axis : {-1, 1}) {
    for (bool bias : {true, false}) {
      int64_t cols = axis == -1 ? 6 : 30;
      std::vector<Value> in = {Random(D::kFloat32, {4, 5, 6}, b.seed(), -3, 3),
                               Random(D::kFloat32, axis == -1 ? Shape{6} : Shape{5, 6}, b.seed())};
      if (bias) in.push_back(Random(D::kFloat32, axis == -1 ? Shape{6} : Shape{5, 6}, b.seed()));
      std::string n = StrCat("_axis", axis < 0 ? 9 : axis, bias ? "_bias" : "");
      b.Add("LayerNormalization" + n, "", "LayerNormalization", 17, in, {D::kFloat32, D::kFloat32, D::kFloat32},
            {AttrInt("axis", axis), AttrFloat("epsilon", 1e-5f)});
      b.Add("MsLayerNormalization" + n, "com.microsoft", "LayerNormalization", 1, in,
            {D::kFloat32, D::kFloat32, D::kFloat32}, {AttrInt("axis", axis)});
      int64_t rows = 120 / cols;
      b.Add("LayerNormalizationGrad" + n, "com.microsoft", "LayerNormalizationGrad", 1,
            {Random(D::kFloat32, {4, 5, 6}, b.seed()), Random(D::kFloat32, {4, 5, 6}, b.seed(), -3, 3),
             Random(D::kFloat32, axis == -1 ? Shape{6} : Shape{5, 6}, b.seed()),
             Random(D::kFloat32, {rows}, b.seed(), -0.5, 0.5), Random(D::kFloat32, {rows}, b.seed(), 0.5, 2)},
            {D::kFloat32, D::kFloat32, D::kFloat32}, {AttrInt("axis", axis)});
    }
  }
}

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
}

void MoreCases(Builder& b) {
  for (D t : kF32F64) {
    b.Add(StrCat("Elu_", DTypeName(t)), "", "Elu", 6, {Random(t, {4, 9}, b.seed(), -3, 3)}, {t}, {AttrFloat("alpha", 0.7f)});
  }
  b.Add("Pow_float_exponent", "", "Pow", 15, {Random(D::kFloat32, {3, 4}, b.seed(), 0.1, 2), Random(D::kFloat32, {4}, b.seed(), -2, 2)},
        {D::kFloat32});
  b.Add("Pow_int64_exponent", "", "Pow", 15, {Random(D::kFloat32, {3, 4}, b.seed(), -2, 2), Ints({2}, {})}, {D::kFloat32});
  for (const char* op : {"Sum", "Max", "Min"}) {
    for (D t : {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64}) {
      b.Add(StrCat(op, "_", DTypeName(t), "_three"), "", op, 13,
            {Random(t, {2, 3, 4}, b.seed(), -3, 3), Random(t, {4}, b.seed(), -3, 3), Random(t, {3, 1}, b.seed(), -3, 3)},
            {t});
      b.Add(StrCat(op, "_", DTypeName(t), "_one"), "", op, 13, {Random(t, {5}, b.seed(), -3, 3)}, {t});
    }
  }
  b.Add("DivGrad_broadcast", "com.microsoft", "DivGrad", 1,
        {Random(D::kFloat32, {2, 3, 4}, b.seed()), Random(D::kFloat32, {3, 4}, b.seed()),
         Random(D::kFloat32, {2, 1, 4}, b.seed(), 0.5, 2)},
        {D::kFloat32, D::kFloat32});
  for (float ratio : {0.0f, 0.4f}) {
    // Identity cases only (training off, or ratio 0): random masks differ between the providers by design;
    // tests/parity/dropout_test.cc checks the CUDA masks' statistics.
    bool training = ratio == 0.0f;
    b.Add(StrCat("Dropout_identity_ratio", ratio == 0.0f ? "0" : "04"), "", "Dropout", 13,
          {Random(D::kFloat32, {5, 7}, b.seed()), Tensor::FromVector<float>({ratio}, {}),
           Tensor::FromVector<bool>({training}, {})},
          {D::kFloat32, D::kBool});
  }
  b.Add("DropoutGrad_training", "com.microsoft", "DropoutGrad", 1,
        {Random(D::kFloat32, {4, 6}, b.seed()), Random(D::kBool, {4, 6}, b.seed()), Tensor::FromVector<float>({0.25f}, {}),
         Tensor::FromVector<bool>({true}, {})},
        {D::kFloat32});
  b.Add("LayerNormalization_opset1_contrib", "", "LayerNormalization", 13,
        {Random(D::kFloat32, {3, 8}, b.seed()), Random(D::kFloat32, {8}, b.seed()), Random(D::kFloat32, {8}, b.seed())},
        {D::kFloat32});
  for (D t : kAllTypes) {
    std::string ty = DTypeName(t);
    b.Add("Slice_" + ty, "", "Slice", 13,
          {Random(t, {5, 6, 4}, b.seed()), Ints({1, -1}, {2}), Ints({4, -7}, {2}), Ints({0, 1}, {2}), Ints({2, -2}, {2})},
          {t});
    b.Add("SliceGrad_" + ty, "com.microsoft", "SliceGrad", 1,
          {Random(t, {2, 3, 4}, b.seed()), Ints({5, 6, 4}, {3}), Ints({1, -1}, {2}), Ints({4, -7}, {2}), Ints({0, 1}, {2}),
           Ints({2, -2}, {2})},
          {t});
    b.Add("ConcatTraining_" + ty, "com.microsoft", "ConcatTraining", 1,
          {Random(t, {2, 3}, b.seed()), Random(t, {2, 1}, b.seed())}, {t, D::kInt64}, {AttrInt("axis", 1)});
    b.Add("SplitTraining_" + ty, "com.microsoft", "SplitTraining", 1, {Random(t, {2, 5}, b.seed()), Ints({3, 2}, {2})},
          {t, t}, {AttrInt("axis", 1)});
    b.Add("Pad_constant_" + ty, "", "Pad", 13, {Random(t, {2, 3}, b.seed()), Ints({1, 0, 0, 2}, {4}), Random(t, {}, b.seed())},
          {t});
  }
  for (const char* mode : {"edge", "reflect"}) {
    b.Add(StrCat("Pad_", mode), "", "Pad", 13, {Random(D::kFloat32, {3, 4}, b.seed()), Ints({2, 1, -1, 3}, {4})},
          {D::kFloat32}, {AttrString("mode", mode)});
  }
}

// ConstantOfShape, Einsum (the CUDA kernel runs the direct loop; the CPU a GEMM for plain contractions),
// Resize and ResizeGrad.
void IndexOpCases(Builder& b) {
  b.Add("ConstantOfShape_float32", "", "ConstantOfShape", 17, {Ints({2, 0, 3}, {3})}, {D::kFloat32},
        {AttrTensor("value", Tensor::FromVector<float>({1.5f}, {1}))});
  b.Add("ConstantOfShape_int64_value", "", "ConstantOfShape", 17, {Ints({3, 4}, {2})}, {D::kInt64},
        {AttrTensor("value", Tensor::FromVector<int64_t>({-7}, {1}))});
  struct E {
    const char* name;
    const char* eq;
    std::vector<Shape> shapes;
  };
  const E eqs[] = {{"attention", "bhid,bhjd->bhij", {{2, 3, 5, 4}, {2, 3, 6, 4}}},
                   {"matmul", "ij,jk->ik", {{7, 5}, {5, 3}}},
                   {"diagonal", "bii->bi", {{3, 4, 4}}},
                   {"three", "ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}},
                   {"ellipsis_broadcast", "...ij,...jk->...ik", {{2, 3, 4}, {1, 4, 5}}},
                   {"empty", "bij->bi", {{0, 3, 4}}}};
  for (D t : kF32F64) {
    for (const E& e : eqs) {
      std::vector<Value> in;
      for (const Shape& s : e.shapes) in.push_back(Random(t, s, b.seed()));
      b.Add(StrCat("Einsum_", e.name, "_", DTypeName(t)), "", "Einsum", 12, std::move(in), {t},
            {AttrString("equation", e.eq)});
    }
  }
  auto floats = [](std::vector<float> v) { return Tensor::FromVector<float>(v, {static_cast<int64_t>(v.size())}); };
  struct R {
    const char* name;
    Shape x;
    std::vector<float> scales;
    std::vector<onnx::AttributeProto> attrs;
  };
  const R rs[] = {
      {"nearest", {2, 3, 4, 5}, {1, 1, 2, 2}, {AttrString("mode", "nearest")}},
      {"linear_half_pixel", {2, 2, 4, 5}, {1, 1, 2, 1.5f}, {AttrString("mode", "linear")}},
      {"linear_align_corners_down", {1, 2, 8, 6}, {1, 1, 0.5f, 0.75f},
       {AttrString("mode", "linear"), AttrString("coordinate_transformation_mode", "align_corners")}},
      {"cubic", {1, 1, 6, 5}, {1, 1, 1.5f, 2}, {AttrString("mode", "cubic")}},
  };
  b.Add("Upsample_nearest", "", "Upsample", 9, {Random(D::kFloat32, {1, 2, 3, 4}, b.seed()), floats({1, 1, 2, 1.5f})},
        {D::kFloat32}, {AttrString("mode", "nearest")});
  for (const R& r : rs) {
    b.Add(StrCat("Resize_", r.name), "", "Resize", 13, {Random(D::kFloat32, r.x, b.seed()), Value(), floats(r.scales)},
          {D::kFloat32}, r.attrs);
    Shape y = r.x;
    for (size_t d = 0; d < y.size(); ++d) y[d] = static_cast<int64_t>(std::floor(y[d] * r.scales[d] + 1e-6));
    b.Add(StrCat("ResizeGrad_", r.name), "com.microsoft", "ResizeGrad", 1,
          {Random(D::kFloat32, y, b.seed()), Random(D::kFloat32, r.x, b.seed()), Value(), floats(r.scales)}, {D::kFloat32},
          r.attrs);
  }
}

// The recurrent layers, forward and gradient, on random states (the gradient ops take the forward pass's
// outputs as inputs; any values are valid there): bidirectional with sequence_lens and initial states, and
// a reverse GRU with linear_before_reset and clip.
void RecurrentCases(Builder& b) {
  const int64_t S = 4, B = 3, I = 5, H = 6;
  for (D t : kF32F64) {
    const std::string ty = DTypeName(t);
    for (const char* op : {"RNN", "GRU", "LSTM"}) {
      const int64_t G = std::string(op) == "RNN" ? 1 : std::string(op) == "GRU" ? 3 : 4, Dn = 2;
      const std::vector<onnx::AttributeProto> attrs = {AttrInt("hidden_size", H), AttrString("direction", "bidirectional")};
      auto x = [&] { return Random(t, {S, B, I}, b.seed()); };
      auto wt = [&] { return Random(t, {Dn, G * H, I}, b.seed(), -0.6, 0.6); };
      auto rt = [&] { return Random(t, {Dn, G * H, H}, b.seed(), -0.6, 0.6); };
      auto bias = [&] { return Random(t, {Dn, 2 * G * H}, b.seed(), -0.3, 0.3); };
      auto state = [&] { return Random(t, {Dn, B, H}, b.seed()); };
      auto all = [&] { return Random(t, {S, Dn, B, H}, b.seed()); };
      auto lens = [] { return Tensor::FromVector<int32_t>({4, 2, 0}, {3}); };
      std::vector<Value> fwd = {x(), wt(), rt(), bias(), lens(), state()};
      if (G == 4) fwd.push_back(state());
      std::vector<DType> outs(G == 4 ? 3 : 2, t);
      b.Add(StrCat(op, "_", ty), "", op, 14, fwd, outs, attrs);
      if (G == 1) {
        b.Add("RNNGrad_" + ty, "com.microsoft", "RNNGrad", 1,
              {x(), wt(), rt(), bias(), lens(), state(), all(), all(), state()}, {t, t, t, t, t}, attrs);
        continue;
      }
      const std::string tr = StrCat(op, "Training");
      std::vector<DType> touts = outs;
      if (G == 3) touts.push_back(t);
      else touts.insert(touts.end(), {t, t});
      b.Add(StrCat(tr, "_", ty), "com.microsoft", tr, 1, fwd, touts, attrs);
      const Tensor gates = Random(t, {S, Dn, B, G * H}, b.seed(), -2, 2);
      if (G == 3) {
        b.Add("GRUGrad_" + ty, "com.microsoft", "GRUGrad", 1,
              {x(), wt(), rt(), bias(), lens(), state(), all(), gates, all(), state()}, {t, t, t, t, t}, attrs);
        std::vector<onnx::AttributeProto> lbr = {AttrInt("hidden_size", H), AttrString("direction", "reverse"),
                                                 AttrInt("linear_before_reset", 1), AttrFloat("clip", 1.5f)};
        b.Add("GRUGrad_reverse_linear_before_reset_clip_" + ty, "com.microsoft", "GRUGrad", 1,
              {Random(t, {S, B, I}, b.seed()), Random(t, {1, G * H, I}, b.seed(), -0.6, 0.6),
               Random(t, {1, G * H, H}, b.seed(), -0.6, 0.6), Random(t, {1, 2 * G * H}, b.seed(), -0.3, 0.3), lens(),
               Random(t, {1, B, H}, b.seed()), Random(t, {S, 1, B, H}, b.seed()), Random(t, {S, 1, B, G * H}, b.seed(), -2, 2),
               Random(t, {S, 1, B, H}, b.seed()), Random(t, {1, B, H}, b.seed())},
              {t, t, t, t, t}, lbr);
      } else {
        b.Add("LSTMGrad_" + ty, "com.microsoft", "LSTMGrad", 1,
              {x(), wt(), rt(), lens(), state(), state(), all(), all(), gates, all(), state(), state()},
              {t, t, t, t, t, t}, attrs);
      }
    }
  }
}

// Trilu, CumSum, the gathers and scatters (repeated and negative indices), TopK with ties, and Pad's
// opset-18 axes and opset-19 wrap.
void IndexCases(Builder& b) {
  auto i64 = [](std::vector<int64_t> v, Shape s) { return Tensor::FromVector<int64_t>(v, s); };
  for (D t : kAllTypes) {
    const std::string ty = DTypeName(t);
    b.Add("Trilu_lower_" + ty, "", "Trilu", 14, {Random(t, {2, 4, 5}, b.seed()), i64({1}, {})}, {t}, {AttrInt("upper", 0)});
    b.Add("GatherElements_" + ty, "", "GatherElements", 13,
          {Random(t, {3, 4}, b.seed()), i64({0, -1, 2, 2, 1, 0, 3, -4, 1}, {3, 3})}, {t}, {AttrInt("axis", 1)});
    b.Add("GatherND_batch1_" + ty, "", "GatherND", 13,
          {Random(t, {2, 3, 4}, b.seed()), i64({0, 1, 2, -1, 1, 1, 0, 3}, {2, 2, 2})}, {t}, {AttrInt("batch_dims", 1)});
  }
  for (D t : kAllTypes) {
    const std::string ty = DTypeName(t);
    b.Add("DepthToSpace_CRD_" + ty, "", "DepthToSpace", 13, {Random(t, {2, 8, 3, 2}, b.seed())}, {t},
          {AttrInt("blocksize", 2), AttrString("mode", "CRD")});
    b.Add("SpaceToDepth_" + ty, "", "SpaceToDepth", 13, {Random(t, {2, 3, 4, 6}, b.seed())}, {t}, {AttrInt("blocksize", 2)});
  }
  b.Add("DepthToSpace_DCR_float32", "", "DepthToSpace", 13, {Random(D::kFloat32, {1, 18, 2, 3}, b.seed())}, {D::kFloat32},
        {AttrInt("blocksize", 3), AttrString("mode", "DCR")});
  b.Add("Trilu_upper_k_neg_float32", "", "Trilu", 14, {Random(D::kFloat32, {5, 3}, b.seed()), i64({-1}, {})}, {D::kFloat32});
  for (D t : kF32F64) {
    b.Add(StrCat("CumSum_", DTypeName(t)), "", "CumSum", 14, {Random(t, {3, 6, 2}, b.seed()), i64({1}, {})}, {t});
    b.Add(StrCat("CumSum_exclusive_reverse_", DTypeName(t)), "", "CumSum", 14, {Random(t, {4, 5}, b.seed()), i64({-1}, {})}, {t},
          {AttrInt("exclusive", 1), AttrInt("reverse", 1)});
  }
  for (const char* red : {"none", "add", "max"}) {
    b.Add(StrCat("ScatterElements_", red), "", "ScatterElements", 18,
          {Random(D::kFloat32, {3, 4}, b.seed()), i64({0, -1, 0, 2, 1, 1}, {3, 2}), Random(D::kFloat32, {3, 2}, b.seed())},
          {D::kFloat32}, {AttrInt("axis", 1), AttrString("reduction", red)});
    b.Add(StrCat("ScatterND_", red), "", "ScatterND", 18,
          {Random(D::kFloat32, {4, 3}, b.seed()), i64({1, 3, 1, -4}, {4, 1}), Random(D::kFloat32, {4, 3}, b.seed())},
          {D::kFloat32}, {AttrString("reduction", red)});
  }
  b.Add("Scatter_opset9", "", "Scatter", 9,
        {Random(D::kFloat32, {3, 4}, b.seed()), i64({0, 3, 1, 2, 2, 0}, {3, 2}), Random(D::kFloat32, {3, 2}, b.seed())},
        {D::kFloat32}, {AttrInt("axis", 1)});
  b.Add("GatherNDGrad_repeats", "com.microsoft", "GatherNDGrad", 1,
        {i64({2, 3, 4}, {3}), i64({0, 1, 2, -1, 1, 1, 1, 1}, {2, 2, 2}), Random(D::kFloat32, {2, 2}, b.seed())},
        {D::kFloat32}, {AttrInt("batch_dims", 1)});
  Tensor ties = Random(D::kFloat32, {3, 7, 2}, b.seed());
  ties.data<float>()[0] = ties.data<float>()[2] = ties.data<float>()[4];
  for (int largest : {0, 1}) {
    for (int sorted : {0, 1}) {
      b.Add(StrCat("TopK_largest", largest, "_sorted", sorted), "", "TopK", 11, {ties, i64({3}, {1})},
            {D::kFloat32, D::kInt64}, {AttrInt("axis", 1), AttrInt("largest", largest), AttrInt("sorted", sorted)});
    }
  }
  b.Add("Pad_opset18_axes", "", "Pad", 18,
        {Random(D::kFloat32, {2, 3, 4}, b.seed()), i64({1, -1, 2, 0}, {4}), Value(), i64({-1, 0}, {2})}, {D::kFloat32},
        {AttrString("mode", "edge")});
  b.Add("Pad_opset19_wrap", "", "Pad", 19, {Random(D::kFloat32, {3, 4}, b.seed()), i64({2, 5, 1, 3}, {4})}, {D::kFloat32},
        {AttrString("mode", "wrap")});
}

Value Seq(std::vector<Tensor> items) { return Value::Sequence(std::move(items)); }

void OptimizerCases(Builder& b) {
  for (int overwrite : {0, 1}) {
    b.Add(StrCat("InPlaceAccumulatorV2_overwrite", overwrite), "com.microsoft", "InPlaceAccumulatorV2", 1,
          {Random(D::kFloat32, {3, 4}, b.seed()), Random(D::kFloat32, {4}, b.seed()),
           Tensor::FromVector<bool>({overwrite != 0}, {1})},
          {D::kBool, D::kFloat32});
  }
  const std::vector<Shape> shapes = {{3, 4}, {7}, {1}, {2, 3, 5}};
  auto seq = [&](double lo, double hi) {
    std::vector<Tensor> items;
    for (const Shape& s : shapes) items.push_back(Random(D::kFloat32, s, b.seed(), lo, hi));
    return Seq(items);
  };
  for (int mode : {0, 1}) {
    b.Add(StrCat("AdamWOptimizer_mode", mode), "com.microsoft", "AdamWOptimizer", 1,
          {Tensor::FromVector<float>({0.01f}, {}), Tensor::FromVector<int64_t>({3}, {}), seq(-1, 1), seq(-1, 1),
           seq(-0.1, 0.1), seq(0, 0.1)},
          {D::kBool}, {AttrInt("adam_mode", mode), AttrFloat("weight_decay", 0.01f)});
  }
  b.Add("SGDOptimizerV2", "com.microsoft", "SGDOptimizerV2", 1,
        {Tensor::FromVector<float>({0.05f}, {}), seq(-1, 1), seq(-1, 1)}, {D::kBool});
  b.Add("InplaceClipGradNorm", "com.microsoft", "InplaceClipGradNorm", 1, {seq(-1, 1)}, {},
        {AttrFloat("max_norm", 0.5f)});
}

}  // namespace

const std::vector<OpCase>& OpCases() {
  static const std::vector<OpCase>* cases = [] {
    auto* v = new std::vector<OpCase>();
    Builder b(v);
    for (auto family : {UnaryCases, BinaryCases, WhereAndCastCases, MovementCases, GemmCases, ReduceCases, SoftmaxCases,
                        LossCases, NormCases, ConvPoolCases, BatchNormCases, MoreCases, IndexOpCases, IndexCases, RecurrentCases, OptimizerCases}) {
      family(b);
    }
    return v;
  }();
  return *cases;
}

}  // namespace parity
}  // namespace ontrain
