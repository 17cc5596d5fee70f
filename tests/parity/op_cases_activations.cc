// Op cases for the activations, trigonometric and classifying ops, PRelu, ArgMax/ArgMin, OneHot,
// NegativeLogLikelihoodLoss, GlobalMaxPool, Mean and ReduceLogSum on CUDA: random values in each op's domain, plus the values where the CPU
// kernels' formulas have edges (NaN, infinities, signed zeros, rounding ties, HardSwish's +-3, ties among
// maxima).
#include <cmath>
#include <limits>
#include <random>

#include "tests/parity/op_case_builder.h"

namespace ontrain {
namespace parity {
namespace cases {
namespace {

using D = DType;

std::string ShapeName(const Shape& s) {
  std::string n;
  for (int64_t d : s) n += (n.empty() ? "" : "x") + std::to_string(d);
  return n.empty() ? "scalar" : n;
}

// A tensor of `dtype` holding `values` (floats converted; integers truncated).
Tensor Values(D dtype, const std::vector<double>& values, const Shape& shape) {
  switch (dtype) {
    case D::kFloat64: return Tensor::FromVector<double>(values, shape);
    case D::kInt32: return Tensor::FromVector<int32_t>(std::vector<int32_t>(values.begin(), values.end()), shape);
    case D::kInt64: return Tensor::FromVector<int64_t>(std::vector<int64_t>(values.begin(), values.end()), shape);
    default: return Tensor::FromVector<float>(std::vector<float>(values.begin(), values.end()), shape);
  }
}

// `n` small integers in [-2, 2] (as any dtype), so that a line has equal maxima and minima.
std::vector<double> SmallInts(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v) x = d(rng);
  return v;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

void UnaryActivationCases(Builder& b) {
  struct U {
    const char* op;
    double lo, hi;
    int opset;
    std::vector<onnx::AttributeProto> attrs;
    const char* tag;
  };
  const U ops[] = {
      {"Tan", -1.2, 1.2, 7, {}, ""},
      {"Asin", -0.95, 0.95, 7, {}, ""},
      {"Acos", -0.95, 0.95, 7, {}, ""},
      {"Atan", -4, 4, 7, {}, ""},
      {"Sinh", -3, 3, 9, {}, ""},
      {"Cosh", -3, 3, 9, {}, ""},
      {"Asinh", -4, 4, 9, {}, ""},
      {"Acosh", 1.05, 5, 9, {}, ""},
      {"Atanh", -0.95, 0.95, 9, {}, ""},
      {"Softsign", -4, 4, 1, {}, ""},
      {"Sign", -2, 2, 13, {}, ""},
      {"Round", -4, 4, 11, {}, ""},
      {"HardSwish", -5, 5, 14, {}, ""},
      {"HardSigmoid", -4, 4, 6, {}, ""},
      {"HardSigmoid", -4, 4, 6, {AttrFloat("alpha", 0.25f), AttrFloat("beta", 0.4f)}, "_attrs"},
      {"Selu", -3, 3, 6, {}, ""},
      {"Selu", -3, 3, 6, {AttrFloat("alpha", 1.5f), AttrFloat("gamma", 2.0f)}, "_attrs"},
      {"Celu", -3, 3, 12, {}, ""},
      {"Celu", -3, 3, 12, {AttrFloat("alpha", 0.7f)}, "_attrs"},
      {"ThresholdedRelu", -2, 2, 10, {}, ""},
      {"ThresholdedRelu", -2, 2, 10, {AttrFloat("alpha", 0.5f)}, "_attrs"},
  };
  for (const U& u : ops) {
    for (D t : kF32F64) {
      for (const Shape& s : {Shape{}, Shape{3, 5, 4}}) {
        b.Add(StrCat(u.op, u.tag, "_", DTypeName(t), "_", ShapeName(s)), "", u.op, u.opset,
              {Random(t, s, b.seed(), u.lo, u.hi)}, {t}, u.attrs);
      }
    }
  }
  // The formulas' edges: NaN and infinities pass through each op as the CPU's code passes them (HardSigmoid
  // keeps NaN on both: the first GPU run found nvcc's saturating clamp making it 0 where the CPU's
  // std::min(1, NaN) made it 1), signed zeros, Round's ties to even, HardSwish's +-3.
  const std::vector<double> edges = {kNaN, kInf, -kInf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.0, -3.0, 2.9999,
                                     -3.0001, 1e-30, -7.25};
  for (const char* op : {"Sign", "Round", "HardSwish", "HardSigmoid", "Softsign", "ThresholdedRelu", "Selu", "Celu"}) {
    const int opset = std::string(op) == "HardSwish" ? 14 : std::string(op) == "Celu" ? 12 : 13;
    for (D t : kF32F64) {
      b.Add(StrCat(op, "_edges_", DTypeName(t)), "", op, opset, {Values(t, edges, {16})}, {t});
    }
  }
  const std::vector<double> special = {0.0, kNaN, kInf, -kInf, 1.5, -0.0, -1e30, 3.4e38};
  for (D t : kF32F64) {
    b.Add(StrCat("IsNaN_", DTypeName(t)), "", "IsNaN", 13, {Values(t, special, {2, 4})}, {D::kBool});
    b.Add(StrCat("IsInf_", DTypeName(t)), "", "IsInf", 10, {Values(t, special, {2, 4})}, {D::kBool});
    b.Add(StrCat("IsInf_positive_only_", DTypeName(t)), "", "IsInf", 10, {Values(t, special, {8})}, {D::kBool},
          {AttrInt("detect_negative", 0)});
    b.Add(StrCat("IsInf_negative_only_", DTypeName(t)), "", "IsInf", 10, {Values(t, special, {8})}, {D::kBool},
          {AttrInt("detect_positive", 0)});
  }
  b.Add("Not", "", "Not", 1, {Random(D::kBool, {3, 7}, b.seed())}, {D::kBool});
  b.Add("Not_empty", "", "Not", 1, {Random(D::kBool, {0, 2}, b.seed())}, {D::kBool});
}

void PReluAndArgCases(Builder& b) {
  for (D t : {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64}) {
    for (const Shape& slope : {Shape{3, 1}, Shape{4}, Shape{1}, Shape{2, 3, 4}}) {
      b.Add(StrCat("PRelu_", DTypeName(t), "_slope_", ShapeName(slope)), "", "PRelu", 16,
            {Random(t, {2, 3, 4}, b.seed(), -3, 3), Random(t, slope, b.seed(), -1, 1)}, {t});
    }
  }
  // ArgMax / ArgMin over small integers (ties), first and last index, every axis position.
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (D t : {D::kFloat32, D::kFloat64, D::kInt32, D::kInt64}) {
      const Tensor x = Values(t, SmallInts(60, b.seed()), {3, 5, 4});
      for (int64_t axis : {0, 1, -1}) {
        for (int last : {0, 1}) {
          b.Add(StrCat(op, "_", DTypeName(t), "_axis", axis < 0 ? 9 : axis, "_last", last), "", op, 13, {x},
                {D::kInt64}, {AttrInt("axis", axis), AttrInt("keepdims", axis == 1 ? 0 : 1),
                              AttrInt("select_last_index", last)});
        }
      }
    }
    // NaN first in a line (it stays the answer) and in the middle (never chosen); a long line.
    b.Add(StrCat(op, "_nan"), "", op, 13, {Values(D::kFloat32, {kNaN, 1, 2, 0, 1, kNaN, 3, -1}, {2, 4})}, {D::kInt64},
          {AttrInt("axis", 1)});
    b.Add(StrCat(op, "_long_rows"), "", op, 13, {Random(D::kFloat32, {6, 3000}, b.seed(), -3, 3)}, {D::kInt64},
          {AttrInt("axis", 1), AttrInt("keepdims", 0)});
  }
}

void OneHotAndNllCases(Builder& b) {
  // Indices in range, negative (from depth), and out of range (no "on" value).
  const std::vector<int64_t> idx = {0, 4, -1, 2, -5, 7, 3, -9, 1, 1, 4, 0};
  for (D it : {D::kInt64, D::kInt32}) {
    for (int64_t axis : {-1, 0, 1}) {
      b.Add(StrCat("OneHot_", DTypeName(it), "_axis", axis < 0 ? 9 : axis), "", "OneHot", 11,
            {Ints(idx, {3, 4}, it), Ints({5}, {}), Tensor::FromVector<float>({0.25f, 2.0f}, {2})}, {D::kFloat32},
            {AttrInt("axis", axis)});
    }
  }
  // GatherGrad over 3000 positions (six ranges of 500 summed apart, copy.cu), 40% of them one row (a
  // padding token's), negative indices; dy of one sign so that the ranges' grouping differs from the CPU's
  // order by rounding only.
  {
    std::vector<int64_t> tokens(3000);
    for (size_t j = 0; j < tokens.size(); ++j) {
      tokens[j] = j % 5 < 2 ? 0 : j % 7 == 3 ? -1 - static_cast<int64_t>(j % 9) : static_cast<int64_t>((j * 13) % 50);
    }
    b.Add("GatherGrad_ranges", "com.microsoft", "GatherGrad", 1,
          {Ints({50, 70}, {2}), Ints(tokens, {30, 100}), Random(D::kFloat32, {30, 100, 70}, b.seed(), 0.5, 1.5)},
          {D::kFloat32});
  }
  b.Add("OneHot_int64_values", "", "OneHot", 11,
        {Ints(idx, {12}), Ints({6}, {1}), Tensor::FromVector<int64_t>({-1, 5}, {2})}, {D::kInt64});
  b.Add("OneHot_float64_values", "", "OneHot", 11,
        {Ints(idx, {2, 6}), Ints({5}, {}), Tensor::FromVector<double>({0.0, -1.0}, {2})}, {D::kFloat64},
        {AttrInt("axis", 1)});

  // NegativeLogLikelihoodLoss: log-probabilities [N, C] and [N, C, d1, d2]; reductions, class weights,
  // ignore_index (present among the targets).
  const std::vector<int64_t> targets = {0, 4, 2, 1, 2, 3, 4, 0};
  const Tensor weight = Random(D::kFloat32, {5}, b.seed(), 0.2, 2);
  for (const char* reduction : {"none", "sum", "mean"}) {
    const Tensor x = Random(D::kFloat32, {8, 5}, b.seed(), -4, 0);
    b.Add(StrCat("NLLLoss_", reduction), "", "NegativeLogLikelihoodLoss", 13, {x, Ints(targets, {8})}, {D::kFloat32},
          {AttrString("reduction", reduction)});
    b.Add(StrCat("NLLLoss_", reduction, "_weights_ignore"), "", "NegativeLogLikelihoodLoss", 13,
          {x, Ints(targets, {8}, D::kInt32), weight}, {D::kFloat32},
          {AttrString("reduction", reduction), AttrInt("ignore_index", 2)});
    std::vector<int64_t> spatial(12);
    for (size_t i = 0; i < spatial.size(); ++i) spatial[i] = static_cast<int64_t>((i * 7 + 3) % 4);
    b.Add(StrCat("NLLLoss_", reduction, "_spatial"), "", "NegativeLogLikelihoodLoss", 13,
          {Random(D::kFloat32, {3, 4, 2, 2}, b.seed(), -4, 0), Ints(spatial, {3, 2, 2})}, {D::kFloat32},
          {AttrString("reduction", reduction), AttrInt("ignore_index", 1)});
  }
}

// GlobalMaxPool, Mean, ReduceLogSum (an attribute's axes and the input's; a column split into row ranges;
// an empty reduction, -inf).
void PoolMeanLogSumCases(Builder& b) {
  b.Add("GlobalMaxPool", "", "GlobalMaxPool", 1, {Random(D::kFloat32, {2, 3, 5, 4}, b.seed(), -3, 3)}, {D::kFloat32});
  b.Add("GlobalMaxPool_long_planes", "", "GlobalMaxPool", 1, {Random(D::kFloat32, {2, 2, 40, 40}, b.seed(), -3, 3)},
        {D::kFloat32});
  for (D t : kF32F64) {
    b.Add(StrCat("Mean_", DTypeName(t)), "", "Mean", 13,
          {Random(t, {2, 3, 4}, b.seed(), -3, 3), Random(t, {3, 1}, b.seed(), -3, 3), Random(t, {4}, b.seed(), -3, 3)},
          {t});
    b.Add(StrCat("Mean_one_input_", DTypeName(t)), "", "Mean", 13, {Random(t, {5}, b.seed(), -3, 3)}, {t});
  }
  b.Add("ReduceLogSum_attr_axes", "", "ReduceLogSum", 13, {Random(D::kFloat32, {3, 4, 5}, b.seed(), 0.1, 2)},
        {D::kFloat32}, {AttrInts("axes", {0, 2})});
  b.Add("ReduceLogSum_all", "", "ReduceLogSum", 13, {Random(D::kFloat32, {3, 4, 5}, b.seed(), 0.1, 2)}, {D::kFloat32},
        {AttrInt("keepdims", 0)});
  b.Add("ReduceLogSum_split_rows", "", "ReduceLogSum", 18,
        {Random(D::kFloat32, {2048, 96}, b.seed(), 0.5, 1.5), Ints({0}, {1})}, {D::kFloat32});
  b.Add("ReduceLogSum_empty", "", "ReduceLogSum", 18, {Random(D::kFloat32, {0, 3}, b.seed()), Ints({0}, {1})},
        {D::kFloat32});
}

}  // namespace

void ActivationCases(Builder& b) {
  UnaryActivationCases(b);
  PReluAndArgCases(b);
  OneHotAndNllCases(b);
  PoolMeanLogSumCases(b);
}

}  // namespace cases
}  // namespace parity
}  // namespace ontrain
