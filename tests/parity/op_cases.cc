// The cases of the op-level parity table, by op family. Seeds count within each family (Builder::StartFamily),
// so a case's inputs never change when others are added to other families.
#include "tests/parity/op_cases.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "tests/parity/op_case_builder.h"

namespace ontrain {
namespace parity {
namespace {

using D = DType;
using cases::Builder;
using cases::kAllTypes;
using cases::kF32F64;

// Rows of softmax(x) (or log-softmax) over the last axis of random logits in [-3, 3].
Tensor SoftmaxRows(const Shape& shape, uint64_t seed, bool log) {
  Tensor t = Random(D::kFloat32, shape, seed, -3, 3);
  const int64_t len = shape.back(), rows = t.NumElements() / len;
  float* p = t.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t k = 0; k < len; ++k) sum += std::exp(static_cast<double>(p[r * len + k]));
    for (int64_t k = 0; k < len; ++k) {
      const double v = static_cast<double>(p[r * len + k]) - std::log(sum);
      p[r * len + k] = static_cast<float>(log ? v : std::exp(v));
    }
  }
  return t;
}

std::string ShapeName(const Shape& s) {
  if (s.empty()) return "scalar";
  std::string n;
  for (int64_t d : s) n += (n.empty() ? "" : "x") + std::to_string(d);
  return n;
}

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
  for (const char* op : {"And", "Or", "Xor"}) {
    for (const auto& [sa, sb] : shapes) {
      b.Add(StrCat(op, "_bool_", ShapeName(sa), "_by_", ShapeName(sb)), "", op, 7,
            {Random(D::kBool, sa, b.seed()), Random(D::kBool, sb, b.seed())}, {D::kBool});
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
  // Clip with both bounds, one, or neither (the dtype's lowest and highest: -inf becomes the lowest), and
  // with the attributes of opset 6; a NaN passes through. ClipGrad (the executor's fusion of Clip's gradient):
  // both bounds or one, dY broadcast over X, a NaN in X takes the fill.
  for (D t : {D::kFloat32, D::kFloat64}) {
    Tensor x = Random(t, {4, 5}, b.seed(), -3, 3);
    if (t == D::kFloat32) {
      x.data<float>()[3] = std::nanf(""), x.data<float>()[7] = -std::numeric_limits<float>::infinity();
    } else {
      x.data<double>()[3] = std::nan(""), x.data<double>()[7] = -std::numeric_limits<double>::infinity();
    }
    Tensor lo = t == D::kFloat32 ? Tensor::FromVector<float>({-1.0f}, {}) : Tensor::FromVector<double>({-1.0}, {});
    Tensor hi = t == D::kFloat32 ? Tensor::FromVector<float>({1.5f}, {}) : Tensor::FromVector<double>({1.5}, {});
    b.Add(StrCat("Clip_", DTypeName(t), "_both"), "", "Clip", 13, {x, lo, hi}, {t});
    b.Add(StrCat("Clip_", DTypeName(t), "_min"), "", "Clip", 13, {x, lo, Tensor()}, {t});
    b.Add(StrCat("Clip_", DTypeName(t), "_max"), "", "Clip", 13, {x, Tensor(), hi}, {t});
    b.Add(StrCat("Clip_", DTypeName(t), "_none"), "", "Clip", 13, {x}, {t});
  }
  b.Add("Clip_float32_attributes", "", "Clip", 6, {Random(D::kFloat32, {3, 7}, b.seed(), -3, 3)}, {D::kFloat32},
        {AttrFloat("min", -0.5f), AttrFloat("max", 2.0f)});
  {
    Tensor x = Random(D::kFloat32, {3, 4}, b.seed(), -3, 3);
    x.data<float>()[5] = std::nanf("");
    const Tensor lo = Tensor::FromVector<float>({0.0f}, {}), hi = Tensor::FromVector<float>({6.0f}, {});
    const Tensor fill = Tensor::FromVector<float>({0.0f}, {});
    b.Add("ClipGrad_float32_both", "ai.ontrain", "ClipGrad", 1, {Random(D::kFloat32, {3, 4}, b.seed()), x, lo, hi, fill},
          {D::kFloat32});
    b.Add("ClipGrad_float32_min_broadcast", "ai.ontrain", "ClipGrad", 1,
          {Random(D::kFloat32, {2, 3, 4}, b.seed()), x, lo, Tensor(), fill}, {D::kFloat32});
    b.Add("ClipGrad_float32_max", "ai.ontrain", "ClipGrad", 1,
          {Random(D::kFloat32, {3, 4}, b.seed()), x, Tensor(), hi, Tensor::FromVector<float>({0.25f}, {})},
          {D::kFloat32});
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
  // An embedding's gradient: 300 tokens into 257 rows of 33 (rows used many times, rows never used,
  // negative indices), and no tokens at all (every row 0).
  {
    std::vector<int64_t> tokens(300);
    for (size_t j = 0; j < tokens.size(); ++j) tokens[j] = j % 7 == 0 ? -1 - static_cast<int64_t>(j % 5) : (j * j) % 200;
    b.Add("GatherGrad_embedding", "com.microsoft", "GatherGrad", 1,
          {Ints({257, 33}, {2}), Ints(tokens, {4, 75}), Random(D::kFloat32, {4, 75, 33}, b.seed())}, {D::kFloat32});
    b.Add("GatherGrad_no_tokens", "com.microsoft", "GatherGrad", 1,
          {Ints({5, 3}, {2}), Ints({}, {0}), Random(D::kFloat32, {0, 3}, b.seed())}, {D::kFloat32});
  }
  // copy.cu's warp per output row: rows wider than a 128-column pass (300: three passes, the last partial),
  // a thousand int32 indices (eight 128-index steps, the last partial), and an inner axis with outer 3.
  {
    std::vector<int64_t> tokens(1000), pos(200);
    for (size_t j = 0; j < tokens.size(); ++j) tokens[j] = (j * 7 + j / 13) % 37;
    for (size_t j = 0; j < pos.size(); ++j) pos[j] = j % 9 == 4 ? -1 - static_cast<int64_t>(j % 50) : (j * 31) % 50;
    b.Add("GatherGrad_wide_rows", "com.microsoft", "GatherGrad", 1,
          {Ints({40, 300}, {2}), Ints(tokens, {10, 100}, D::kInt32), Random(D::kFloat32, {10, 100, 300}, b.seed())},
          {D::kFloat32});
    b.Add("GatherGrad_outer", "com.microsoft", "GatherGrad", 1,
          {Ints({3, 50, 130}, {3}), Ints(pos, {200}), Random(D::kFloat32, {3, 200, 130}, b.seed())}, {D::kFloat32},
          {AttrInt("axis", 1)});
  }
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
  // A linear layer's Gemm (C a row of N, beta 1): cuBLASLt's bias epilogue on CUDA.
  for (int tb : {0, 1}) {
    for (const Shape& c : {Shape{17}, Shape{1, 17}}) {
      b.Add(StrCat("Gemm_float32_bias_row_t0", tb, "_c", ShapeName(c)), "", "Gemm", 13,
            {Random(D::kFloat32, {33, 65}, b.seed()), Random(D::kFloat32, tb ? Shape{17, 65} : Shape{65, 17}, b.seed()),
             Random(D::kFloat32, c, b.seed())},
            {D::kFloat32}, {AttrInt("transB", tb)});
    }
  }
  // com.microsoft FusedGemm (the executor's Gemm + Relu): cuBLASLt's ReLU-bias epilogue for a bias row at
  // beta 1 in float32; else the Gemm then the Relu kernel (a full C, no C, beta 1.5, float64).
  for (D t : kF32F64) {
    for (const Shape& c : {Shape{17}, Shape{1, 17}, Shape{33, 17}, Shape{}}) {
      std::vector<Value> in = {Random(t, {33, 65}, b.seed()), Random(t, {17, 65}, b.seed())};
      if (!c.empty()) in.push_back(Random(t, c, b.seed()));
      for (float beta : {1.0f, 1.5f}) {
        if (beta != 1.0f && (c.empty() || t != D::kFloat32)) continue;
        b.Add(StrCat("FusedGemm_", DTypeName(t), c.empty() ? "_noC" : "_c" + ShapeName(c), beta != 1.0f ? "_beta" : ""),
              "com.microsoft",
              "FusedGemm", 1, in, {t},
              {AttrInt("transB", 1), AttrFloat("beta", beta), AttrString("activation", "Relu")});
      }
    }
  }
  // ai.ontrain MatMulBias (the executor's FusedMatMul + Add of a bias [N]): one call with cuBLASLt's epilogue
  // where A's batch folds into rows or there is none, else the bias rows written first (transposed batched
  // A, batched B), and the empty sum (K = 0: every row the bias).
  struct MB {
    const char* name;
    Shape a, b;
    int ta, tb;
  };
  const MB mbs[] = {{"folded", {2, 3, 4}, {4, 5}, 0, 0},      {"folded_tB", {2, 3, 4}, {5, 4}, 0, 1},
                    {"2d_tA", {4, 3}, {4, 5}, 1, 0},          {"batched_tA", {2, 4, 3}, {4, 5}, 1, 0},
                    {"batched_B", {2, 3, 4}, {2, 4, 5}, 0, 0}, {"odd", {33, 65}, {65, 17}, 0, 0},
                    {"empty_K", {2, 3, 0}, {0, 5}, 0, 0}};
  for (const MB& m : mbs) {
    int64_t n = m.tb ? m.b[m.b.size() - 2] : m.b.back();
    b.Add(StrCat("MatMulBias_float32_", m.name), "ai.ontrain", "MatMulBias", 1,
          {Random(D::kFloat32, m.a, b.seed()), Random(D::kFloat32, m.b, b.seed()), Random(D::kFloat32, {n}, b.seed())},
          {D::kFloat32}, {AttrInt("transA", m.ta), AttrInt("transB", m.tb), AttrFloat("alpha", 0.5f)});
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
  // The device kernels' geometries (reduce.cu): a warp per row with a partial last block of rows, a block
  // per row (256 and 1024 threads), 32 x Y column tiles with a partial tile, tile blocks that loop over
  // more outer indices than the grid has, and many narrow columns.
  struct Geometry {
    const char* name;
    Shape shape;
    int64_t axis;
  };
  const Geometry geometries[] = {{"warp_rows", {13, 37}, 1},         {"block_rows", {3, 1500}, 1},
                                 {"long_rows", {2, 17000}, 1},       {"column_tiles", {3, 300, 70}, 1},
                                 {"narrow_columns", {20000, 5, 4}, 1},       {"tiles_looping", {1500, 9, 40}, 1}};
  for (const char* op : ops) {
    for (const Geometry& g : geometries) {
      OpCase& c = b.Add(StrCat(op, "_", g.name), "", op, 18,
                        {Random(D::kFloat32, g.shape, b.seed(), -3, 3), Ints({g.axis}, {1})}, {D::kFloat32},
                        {AttrInt("keepdims", 0)});
      if (std::string(op) == "ReduceSum") {
        // Terms of either sign: two orders of addition differ by a few float roundings of the sum of |x|
        // (1.5 a term on average), not of the result, which cancellation can make small.
        c.tol.atol = 4 * 6e-8 * 1.5 * static_cast<double>(g.shape[static_cast<size_t>(g.axis)]);
        c.tol_reason = "a sum of terms of either sign: the tolerance scales with the sum of |x|";
      }
    }
  }
  b.Add("ReduceSum_noop", "", "ReduceSum", 13, {Random(D::kFloat32, {3, 4}, b.seed())}, {D::kFloat32},
        {AttrInt("noop_with_empty_axes", 1)});
  OpCase& tall = b.Add("ReduceSum_tall", "", "ReduceSum", 13,
                       {Random(D::kFloat32, {3000, 3}, b.seed()), Ints({0}, {1})}, {D::kFloat32});
  tall.tol = {5e-4, 1e-4};
  tall.tol_reason = "3000 terms of either sign, added in another order by each provider: the difference scales with "
                    "the sum of |x| (about 1500), not with the result, which cancellation can make small (a dropped "
                    "term is off by about 0.5)";
  b.Add("ReduceSumTraining", "com.microsoft", "ReduceSumTraining", 1,
        {Random(D::kFloat32, {4, 3, 6}, b.seed()), Ints({0, 1}, {2})}, {D::kFloat32}, {AttrInt("keepdims", 0)});
  // Column tiles too few to fill a GPU split their rows into ranges (reduce.cu ReduceSplits): 8 ranges of
  // 256 rows over 3 tiles (the last partial), 4 uneven ranges (258, 258, 258, 256 rows) for each of 3 outer
  // indices, and a bias gradient's [4096, 512] (16 ranges). Terms of one sign, so that the providers'
  // orders of addition differ by rounding only, not by cancellation.
  const Geometry split[] = {{"split_rows", {2048, 96}, 0}, {"split_outer", {3, 1030, 40}, 1}};
  for (const char* op : ops) {
    for (const Geometry& g : split) {
      b.Add(StrCat(op, "_", g.name), "", op, 18, {Random(D::kFloat32, g.shape, b.seed(), 0.5, 1.5), Ints({g.axis}, {1})},
            {D::kFloat32}, {AttrInt("keepdims", 0)});
    }
  }
  b.Add("ReduceSum_split_bias", "", "ReduceSum", 13,
        {Random(D::kFloat32, {4096, 512}, b.seed(), 0.5, 1.5), Ints({0}, {1})}, {D::kFloat32}, {AttrInt("keepdims", 0)});
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
    // softmax.cu: rows past kWarpRowMax (a block each), and warp rows with a partial last block of rows.
    b.Add(StrCat(op, "_block_rows"), "", op, 13, {Random(D::kFloat32, {3, 1100}, b.seed(), -5, 5)}, {D::kFloat32});
    b.Add(StrCat(op, "_warp_rows"), "", op, 13, {Random(D::kFloat32, {13, 37}, b.seed(), -5, 5)}, {D::kFloat32});
  }
  for (const char* op : {"SoftmaxGrad", "SoftmaxGrad_13", "LogSoftmaxGrad", "LogSoftmaxGrad_13"}) {
    for (int64_t axis : {-1, 1}) {
      b.Add(StrCat(op, "_axis", axis < 0 ? 9 : axis), "com.microsoft", op, 1,
            {Random(D::kFloat32, {3, 4, 5}, b.seed()), Random(D::kFloat32, {3, 4, 5}, b.seed(), -2, 0)}, {D::kFloat32},
            {AttrInt("axis", axis)});
    }
    for (const Shape& shape : {Shape{3, 1100}, Shape{13, 37}}) {  // block rows, warp rows
      // Y as the forward pass makes it (a softmax or log-softmax row): with arbitrary Y the row sums of
      // dY Y cancel, and the providers' orders of addition then differ by more than the results' rounding.
      const bool log = std::string(op).rfind("Log", 0) == 0;
      b.Add(StrCat(op, "_rows_", shape[1]), "com.microsoft", op, 1,
            {Random(D::kFloat32, shape, b.seed()), SoftmaxRows(shape, b.seed(), log)}, {D::kFloat32},
            {AttrInt("axis", -1)});
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

// Labels for n rows of c classes: seeded, every `ignore_every`-th one the ignored index (when > 0).
Tensor SeededLabels(int64_t n, int64_t c, uint64_t seed, int64_t ignore_every, int64_t ignore_index) {
  std::vector<int64_t> labels(static_cast<size_t>(n));
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = ignore_every > 0 && i % ignore_every == 0 ? ignore_index : static_cast<int64_t>(rng() % c);
  }
  return Tensor::FromVector<int64_t>(labels, {n});
}

void WideLossCases(Builder& b) {
  // loss.cu's row kernel (scores [N, C]: a warp per row) with more classes than lanes and a partial last
  // block of rows, weights and an ignored index.
  for (const char* reduction : {"mean", "sum", "none"}) {
    b.Add(StrCat("SCE_wide_", reduction), "", "SoftmaxCrossEntropyLoss", 13,
          {Random(D::kFloat32, {37, 300}, b.seed(), -3, 3), SeededLabels(37, 300, b.seed(), 5, 7),
           Random(D::kFloat32, {300}, b.seed(), 0.2, 2)},
          {D::kFloat32, D::kFloat32}, {AttrString("reduction", reduction), AttrInt("ignore_index", 7)});
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
  // norm.cu's geometries: rows past kWarpRowMax (a block each); many rows in warps with a partial block of
  // rows, and dScale/dBias tiles of 32 threads per column with a partial tile.
  for (const Shape& shape : {Shape{3, 1030}, Shape{300, 70}}) {
    const int64_t rows = shape[0], cols = shape[1];
    b.Add(StrCat("LayerNormalization_", rows, "x", cols), "", "LayerNormalization", 17,
          {Random(D::kFloat32, shape, b.seed(), -3, 3), Random(D::kFloat32, {cols}, b.seed()),
           Random(D::kFloat32, {cols}, b.seed())},
          {D::kFloat32, D::kFloat32, D::kFloat32}, {AttrInt("axis", -1), AttrFloat("epsilon", 1e-5f)});
    b.Add(StrCat("LayerNormalizationGrad_", rows, "x", cols), "com.microsoft", "LayerNormalizationGrad", 1,
          {Random(D::kFloat32, shape, b.seed()), Random(D::kFloat32, shape, b.seed(), -3, 3),
           Random(D::kFloat32, {cols}, b.seed()), Random(D::kFloat32, {rows}, b.seed(), -0.5, 0.5),
           Random(D::kFloat32, {rows}, b.seed(), 0.5, 2)},
          {D::kFloat32, D::kFloat32, D::kFloat32}, {AttrInt("axis", -1)});
  }
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
  // Tensors past one piece (kClipPieceElements, 32768): 70000 elements in 3 pieces, the small ones in 3
  // pieces of which two are empty.
  std::vector<Tensor> big;
  for (const Shape& s : {Shape{70000}, Shape{3, 4}, Shape{2}, Shape{200, 200}}) {
    big.push_back(Random(D::kFloat32, s, b.seed(), -1, 1));
  }
  b.Add("InplaceClipGradNorm_pieces", "com.microsoft", "InplaceClipGradNorm", 1, {Seq(big)}, {},
        {AttrFloat("max_norm", 0.5f)});
}

}  // namespace

const std::vector<OpCase>& OpCases() {
  static const std::vector<OpCase>* cases = [] {
    auto* v = new std::vector<OpCase>();
    Builder b(v);
    uint64_t k = 0;
    for (auto family : {UnaryCases, BinaryCases, WhereAndCastCases, MovementCases, GemmCases, ReduceCases, SoftmaxCases,
                        LossCases, NormCases, cases::ConvPoolCases, cases::BatchNormCases, MoreCases,
                        cases::IndexOpCases, cases::IndexCases, cases::RecurrentCases, OptimizerCases, WideLossCases,
                        cases::ActivationCases}) {
      b.StartFamily(k++);
      family(b);
    }
    return v;
  }();
  return *cases;
}

}  // namespace parity
}  // namespace ontrain
