// The op-parity cases of the ops that index and reshuffle (ConstantOfShape, Einsum, Resize, the recurrent
// layers, Trilu, CumSum, the gathers and scatters, TopK, DepthToSpace, Pad 18/19); see op_cases.cc.
#include <cmath>

#include "tests/parity/op_case_builder.h"

namespace ontrain {
namespace parity {
namespace cases {

using D = DType;

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

}  // namespace cases
}  // namespace parity
}  // namespace ontrain
