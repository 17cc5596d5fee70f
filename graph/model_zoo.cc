// Built-in classifiers.
#include "graph/model_zoo.h"

#include <cmath>
#include <random>
#include <string>

#include "graph/builder.h"

namespace ontrain {

namespace {

Tensor Uniform(const Shape& shape, double bound, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(-bound, bound);
  std::vector<float> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (float& x : v) x = static_cast<float>(u(rng));
  return Tensor::FromVector(v, shape);
}

Model Empty() {
  Model m;
  m.ir_version = 8;
  m.opset_imports[""] = 17;
  m.producer_name = "ontrain";
  return m;
}

// Gemm(x, W [out, in]^T, b [out]) as PyTorch's Linear exports it.
std::string Linear(Graph& g, const std::string& x, const std::string& name, int64_t in, int64_t out, std::mt19937& rng,
                   const std::string& y) {
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  g.AddInitializer(name + ".weight", Uniform({out, in}, bound, rng));
  g.AddInitializer(name + ".bias", Uniform({out}, bound, rng));
  g.nodes.push_back(MakeNode("Gemm", {x, name + ".weight", name + ".bias"}, {y}, {AttrInt("transB", 1)}, name));
  return y;
}

}  // namespace

Model MakeMlpClassifier(int64_t inputs, const std::vector<int64_t>& hidden, int64_t classes, uint32_t seed) {
  std::mt19937 rng(seed);
  Model m = Empty();
  Graph& g = m.graph;
  g.name = "mlp";
  g.inputs.push_back(TensorInfo("input", DType::kFloat32, {-1, inputs}, {"batch", ""}));
  std::string x = "input";
  int64_t width = inputs;
  for (size_t i = 0; i < hidden.size(); ++i) {
    std::string fc = "fc" + std::to_string(i + 1);
    std::string h = Linear(g, x, fc, width, hidden[i], rng, fc + "_out");
    g.nodes.push_back(MakeNode("Relu", {h}, {fc + "_relu"}, {}, fc + "_relu"));
    x = fc + "_relu";
    width = hidden[i];
  }
  Linear(g, x, "fc" + std::to_string(hidden.size() + 1), width, classes, rng, "logits");
  g.outputs.push_back(TensorInfo("logits", DType::kFloat32, {-1, classes}, {"batch", ""}));
  return m;
}

Model MakeCnnClassifier(int64_t side, int64_t classes, uint32_t seed) {
  std::mt19937 rng(seed);
  Model m = Empty();
  Graph& g = m.graph;
  g.name = "cnn";
  g.inputs.push_back(TensorInfo("input", DType::kFloat32, {-1, 1, side, side}, {"batch", "", "", ""}));
  std::string x = "input";
  int64_t channels = 1;
  for (int i = 1; i <= 2; ++i) {
    int64_t out = i == 1 ? 16 : 32;
    std::string conv = "conv" + std::to_string(i);
    double bound = 1.0 / std::sqrt(static_cast<double>(channels * 9));
    g.AddInitializer(conv + ".weight", Uniform({out, channels, 3, 3}, bound, rng));
    g.AddInitializer(conv + ".bias", Uniform({out}, bound, rng));
    g.nodes.push_back(MakeNode("Conv", {x, conv + ".weight", conv + ".bias"}, {conv + "_out"},
                               {AttrInts("kernel_shape", {3, 3}), AttrInts("pads", {1, 1, 1, 1})}, conv));
    g.nodes.push_back(MakeNode("Relu", {conv + "_out"}, {conv + "_relu"}, {}, conv + "_relu"));
    g.nodes.push_back(MakeNode("MaxPool", {conv + "_relu"}, {conv + "_pool"},
                               {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})}, conv + "_pool"));
    x = conv + "_pool";
    channels = out;
  }
  g.nodes.push_back(MakeNode("Flatten", {x}, {"flat"}, {AttrInt("axis", 1)}, "flatten"));
  int64_t flat = channels * (side / 4) * (side / 4);
  std::string h = Linear(g, "flat", "fc1", flat, 128, rng, "fc1_out");
  g.nodes.push_back(MakeNode("Relu", {h}, {"fc1_relu"}, {}, "fc1_relu"));
  Linear(g, "fc1_relu", "fc2", 128, classes, rng, "logits");
  g.outputs.push_back(TensorInfo("logits", DType::kFloat32, {-1, classes}, {"batch", ""}));
  return m;
}

}  // namespace ontrain
