// The gradient graph builder on graphs whose shapes are known only at run time (symbolic dims, pads and
// repeats fed as inputs, shapes computed in the graph), checked by finite differences in float64.
#include <string>

#include "graph/builder.h"
#include "gtest/gtest.h"
#include "tests/graph/gradient_check.h"

namespace ontrain {
namespace {

using gradcheck::AddWeightedLoss;
using gradcheck::Base;
using gradcheck::Case;
using gradcheck::CheckGradients;
using gradcheck::Random;

// Pads known only at run time (a graph input) and symbolic input dims: the gradient is a chain of
// GatherGrad over run-time indices. Edge mode here also crops (negative pads).
TEST(AutodiffTest, PadReflectAndEdgeWithRuntimePadsAndShapes) {
  struct Mode {
    const char* name;
    std::vector<int64_t> pads;
    Shape y;
  };
  for (const Mode& mode : {Mode{"reflect", {0, 2, 3, 0, 1, 2}, {2, 6, 9}}, Mode{"edge", {1, -1, 2, 0, 1, -1}, {3, 3, 5}}}) {
    SCOPED_TRACE(mode.name);
    Case c{Base()};
    Graph& g = c.model.graph;
    g.inputs = {TensorInfo("x", DType::kFloat64, {-1, 3, -1}, {"a", "", "b"}), TensorInfo("pads", DType::kInt64, {6})};
    g.nodes = {MakeNode("Pad", {"x", "pads"}, {"p"}, {AttrString("mode", mode.name)}, "pad"),
               MakeNode("Mul", {"p", "p"}, {"y"}, {}, "square")};
    AddWeightedLoss(&c.model, mode.y, 82);
    c.feeds = {{"x", Random({2, 3, 4}, 83)}};
    c.fixed = {{"pads", Tensor::FromVector<int64_t>(mode.pads, {6})}};
    c.xs = {"x"};
    CheckGradients(c, 1e-6);
  }
}

// Pad with `axes` (opset 18), which libonnx 1.12's shape inference rejects: ontrain types it itself (the
// padded axes grow by their pads, negative axes count from the end), so the MaxPool after it gets a static
// shape and the gradient goes through PadGrad's rule; reflect pads one axis, constant two (one cropped).
TEST(AutodiffTest, PadWithAxesAtOpset18) {
  struct Mode {
    const char* name;
    std::vector<int64_t> pads, axes;
    Shape y;
  };
  for (const Mode& mode : {Mode{"reflect", {2, 1}, {-1}, {2, 2, 3}}, Mode{"constant", {1, 0, 1, -1}, {1, 2}, {2, 4, 2}}}) {
    SCOPED_TRACE(mode.name);
    Case c{Base()};
    c.model.opset_imports[""] = 18;
    Graph& g = c.model.graph;
    g.inputs = {TensorInfo("x", DType::kFloat64, {2, 2, 5})};
    g.AddInitializer("pads", Tensor::FromVector<int64_t>(mode.pads, {static_cast<int64_t>(mode.pads.size())}));
    g.AddInitializer("axes", Tensor::FromVector<int64_t>(mode.axes, {static_cast<int64_t>(mode.axes.size())}));
    g.nodes = {MakeNode("Pad", {"x", "pads", "", "axes"}, {"p"}, {AttrString("mode", mode.name)}, "pad"),
               MakeNode("MaxPool", {"p"}, {"y"}, {AttrInts("kernel_shape", {3}), AttrInts("strides", {2})}, "pool")};
    AddWeightedLoss(&c.model, mode.y, 91);
    c.feeds = {{"x", Random({2, 2, 5}, 92)}};
    c.xs = {"x"};
    CheckGradients(c, 1e-6);
  }
}

// MaxPool after a Pad whose pads come at run time (as PyTorch exports F.pad): the pooled input's dims are
// unknown until run time, so the gradient scatters dY through the flat Indices instead of MaxPoolGrad.
TEST(AutodiffTest, MaxPoolWithRuntimeInputShape) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {-1, 2, 5}, {"batch", "", ""}), TensorInfo("pads", DType::kInt64, {6})};
  g.nodes = {MakeNode("Pad", {"x", "pads"}, {"p"}, {AttrString("mode", "edge")}, "pad"),
             MakeNode("MaxPool", {"p"}, {"y"}, {AttrInts("kernel_shape", {3}), AttrInts("strides", {2})}, "pool")};
  AddWeightedLoss(&c.model, {2, 2, 3}, 89);
  c.feeds = {{"x", Random({2, 2, 5}, 90)}};
  c.fixed = {{"pads", Tensor::FromVector<int64_t>({0, 0, 1, 0, 0, 1}, {6})}};
  c.xs = {"x"};
  CheckGradients(c, 1e-6);
}

// AveragePool after a run-time Pad, 2-D with pads of its own (count_include_pad 0 and 1, ceil_mode): the
// pooled dims are unknown until run time, so AveragePoolGrad takes X as a second input to size dX.
TEST(AutodiffTest, AveragePoolWithRuntimeInputShape) {
  for (int include_pad : {0, 1}) {
    SCOPED_TRACE(include_pad);
    Case c{Base()};
    Graph& g = c.model.graph;
    g.inputs = {TensorInfo("x", DType::kFloat64, {-1, 2, 4, 5}, {"batch", "", "", ""}),
                TensorInfo("pads", DType::kInt64, {8})};
    g.nodes = {MakeNode("Pad", {"x", "pads"}, {"p"}, {AttrString("mode", "reflect")}, "pad"),
               MakeNode("AveragePool", {"p"}, {"y"},
                        {AttrInts("kernel_shape", {3, 2}), AttrInts("strides", {2, 2}), AttrInts("pads", {1, 0, 1, 1}),
                         AttrInt("count_include_pad", include_pad), AttrInt("ceil_mode", 1)},
                        "pool")};
    AddWeightedLoss(&c.model, {2, 2, 4, 3}, 91);
    c.feeds = {{"x", Random({2, 2, 4, 5}, 92)}};
    c.fixed = {{"pads", Tensor::FromVector<int64_t>({0, 0, 1, 0, 0, 0, 1, 1}, {8})}};
    c.xs = {"x"};
    CheckGradients(c, 1e-6);
  }
}

// Tile whose input has symbolic dims and whose repeats come at run time.
TEST(AutodiffTest, TileWithRuntimeShapes) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {-1, 3}, {"n", ""}), TensorInfo("reps", DType::kInt64, {2})};
  g.nodes = {MakeNode("Tile", {"x", "reps"}, {"t"}, {}, "tile"), MakeNode("Mul", {"t", "t"}, {"y"}, {}, "square")};
  AddWeightedLoss(&c.model, {6, 6}, 84);
  c.feeds = {{"x", Random({2, 3}, 85)}};
  c.fixed = {{"reps", Tensor::FromVector<int64_t>({3, 2}, {2})}};
  c.xs = {"x"};
  CheckGradients(c, 1e-6);
}

// ConvTranspose whose pads come from output_padding, auto_pad or output_shape (including an output_shape
// larger than the full scatter result, i.e. negative pads), in 1-D with groups and dilations and in 2-D,
// with a static or a symbolic batch, and with symbolic spatial dims where the pads are explicit.
TEST(AutodiffTest, ConvTransposeWithResolvedPads) {
  struct Variant {
    const char* name;
    Shape x, w;
    std::vector<onnx::AttributeProto> attrs;
  };
  const std::vector<Variant> variants = {
      {"output_padding", {1, 2, 3, 3}, {2, 3, 3, 3},
       {AttrInts("strides", {2, 2}), AttrInts("output_padding", {1, 1}), AttrInts("pads", {1, 0, 0, 1})}},
      {"same_upper", {1, 2, 3, 3}, {2, 3, 3, 3}, {AttrInts("strides", {2, 2}), AttrString("auto_pad", "SAME_UPPER")}},
      {"same_lower", {1, 2, 3, 3}, {2, 3, 2, 3}, {AttrInts("strides", {2, 1}), AttrString("auto_pad", "SAME_LOWER")}},
      {"output_shape", {1, 2, 3, 3}, {2, 3, 3, 3}, {AttrInts("strides", {2, 2}), AttrInts("output_shape", {8, 5})}},
      {"output_padding_dynamic", {2, 2, 3, 4}, {2, 3, 3, 2},
       {AttrInts("strides", {2, 3}), AttrInts("output_padding", {1, 2}), AttrInts("pads", {0, 1, 1, 0})}},
      {"grouped_1d", {2, 2, 4}, {2, 1, 2},
       {AttrInts("strides", {3}), AttrInts("dilations", {2}), AttrInts("output_padding", {1}), AttrInt("group", 2)}},
  };
  uint32_t seed = 90;
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    Case c{Base()};
    Graph& g = c.model.graph;
    int64_t m = v.w[1] * (v.name == std::string("grouped_1d") ? 2 : 1);
    // A symbolic batch (all but the first variant): only the spatial dims resolve the pads.
    std::vector<int64_t> xdims(v.x.begin(), v.x.end());
    std::vector<std::string> names(xdims.size(), "");
    if (v.name != std::string("output_padding")) {
      xdims[0] = -1;
      names[0] = "batch";
    }
    if (v.name == std::string("output_padding_dynamic")) {  // explicit pads need no spatial dims at all
      for (size_t d = 2; d < xdims.size(); ++d) {
        xdims[d] = -1;
        names[d] = "s" + std::to_string(d);
      }
    }
    g.inputs = {TensorInfo("x", DType::kFloat64, xdims, names), TensorInfo("w", DType::kFloat64, v.w),
                TensorInfo("b", DType::kFloat64, {m})};
    g.nodes = {MakeNode("ConvTranspose", {"x", "w", "b"}, {"ct"}, v.attrs, "ct"),
               MakeNode("Mul", {"ct", "ct"}, {"sq"}, {}, "sq"),
               MakeNode("ReduceSum", {"sq"}, {"s1"}, {AttrInt("keepdims", 0)}, "s1"),
               MakeNode("ReduceSum", {"ct"}, {"s2"}, {AttrInt("keepdims", 0)}, "s2"),
               MakeNode("Add", {"s1", "s2"}, {"y"}, {}, "total")};
    AddWeightedLoss(&c.model, {}, seed++);
    c.feeds = {{"x", Random(v.x, seed++)}, {"w", Random(v.w, seed++)}, {"b", Random({m}, seed++)}};
    c.xs = {"x", "w", "b"};
    CheckGradients(c, 1e-6);
  }
}

// PyTorch's GroupNorm export: Reshape to groups, InstanceNormalization, Reshape back to Shape(x). The
// shape of the second Reshape is computed, so only shape inference with data propagation keeps the
// spatial dims that the ConvTranspose after it needs to resolve output_padding.
TEST(AutodiffTest, ComputedReshapeKeepsShapesForConvTranspose) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {-1, 4, 2, 2}, {"batch", "", "", ""}),
              TensorInfo("w", DType::kFloat64, {4, 2, 3, 3})};
  g.AddInitializer("groups", Tensor::FromVector<int64_t>({0, 2, -1}, {3}));
  g.AddInitializer("gs", Tensor::FromVector<double>({1.0, 1.0}, {2}));
  g.AddInitializer("gb", Tensor::FromVector<double>({0.0, 0.0}, {2}));
  g.nodes = {MakeNode("Reshape", {"x", "groups"}, {"xg"}, {}, "to_groups"),
             MakeNode("InstanceNormalization", {"xg", "gs", "gb"}, {"ng"}, {}, "group_norm"),
             MakeNode("Shape", {"x"}, {"xs"}, {}, "shape"),
             MakeNode("Reshape", {"ng", "xs"}, {"n"}, {}, "back"),
             MakeNode("ConvTranspose", {"n", "w"}, {"y"},
                      {AttrInts("strides", {2, 2}), AttrInts("pads", {1, 1, 1, 1}), AttrInts("output_padding", {1, 1})},
                      "up")};
  AddWeightedLoss(&c.model, {2, 2, 4, 4}, 86);
  c.feeds = {{"x", Random({2, 4, 2, 2}, 87)}, {"w", Random({4, 2, 3, 3}, 88)}};
  c.xs = {"x", "w"};
  CheckGradients(c, 1e-5);
}

// Values downstream of a node that the forward rewrites turn into a com.microsoft op (BatchNormalization ->
// BatchNormInternal) keep their static shapes, so builders that need them (Tile here) still work.
TEST(AutodiffTest, ShapesSurviveTheBatchNormRewrite) {
  Case c{Base()};
  Graph& g = c.model.graph;
  g.inputs = {TensorInfo("x", DType::kFloat64, {3, 2, 2}), TensorInfo("s", DType::kFloat64, {2}),
              TensorInfo("b", DType::kFloat64, {2})};
  g.AddInitializer("mean", Tensor::FromVector<double>({0, 0}, {2}));
  g.AddInitializer("var", Tensor::FromVector<double>({1, 1}, {2}));
  g.AddInitializer("reps", Tensor::FromVector<int64_t>({1, 2, 3}, {3}));
  g.nodes = {MakeNode("BatchNormalization", {"x", "s", "b", "mean", "var"}, {"bn"}, {}, "bn"),
             MakeNode("Tile", {"bn", "reps"}, {"t"}, {}, "tile"), MakeNode("Mul", {"t", "t"}, {"y"}, {}, "square")};
  AddWeightedLoss(&c.model, {3, 4, 6}, 100);
  c.feeds = {{"x", Random({3, 2, 2}, 101)}, {"s", Random({2}, 102, 0.5, 1.5)}, {"b", Random({2}, 103)}};
  c.xs = {"x", "s", "b"};
  CheckGradients(c, 1e-5);
}

}  // namespace
}  // namespace ontrain
