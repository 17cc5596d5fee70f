// Test models and helpers.
#include "tests/test_util.h"

#include <algorithm>
#include <cmath>

#include "graph/builder.h"

namespace ontrain {
namespace testing {

namespace {
const std::vector<float> kW1 = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f, -0.7f, 0.8f, 0.9f, 1.0f, -1.1f, 1.2f};
const std::vector<float> kB1 = {0.05f, -0.05f, 0.1f};
const std::vector<float> kW2 = {0.3f, -0.3f, 0.2f, 0.1f, -0.4f, 0.6f};
}  // namespace

Model MakeMlpModel() {
  Model m;
  m.opset_imports[""] = 17;
  Graph& g = m.graph;
  g.name = "mlp";
  g.inputs.push_back(TensorInfo("x", DType::kFloat32, {-1, 4}, {"batch", ""}));
  g.outputs.push_back(TensorInfo("y", DType::kFloat32, {-1, 2}, {"batch", ""}));
  g.AddInitializer("w1", Tensor::FromVector<float>(kW1, {4, 3}));
  g.AddInitializer("b1", Tensor::FromVector<float>(kB1, {3}));
  g.AddInitializer("w2", Tensor::FromVector<float>(kW2, {3, 2}));
  g.nodes.push_back(MakeNode("MatMul", {"x", "w1"}, {"h0"}, {}, "fc1/MatMul"));
  g.nodes.push_back(MakeNode("Add", {"h0", "b1"}, {"h1"}, {}, "fc1/Add"));
  g.nodes.push_back(MakeNode("Relu", {"h1"}, {"h2"}, {}, "relu"));
  g.nodes.push_back(MakeNode("MatMul", {"h2", "w2"}, {"h3"}, {}, "fc2/MatMul"));
  g.nodes.push_back(MakeNode("Softmax", {"h3"}, {"y"}, {AttrInt("axis", -1)}, "softmax"));
  return m;
}

std::vector<float> MlpReference(const std::vector<float>& x, int64_t batch) {
  std::vector<float> y(batch * 2);
  for (int64_t b = 0; b < batch; ++b) {
    float h[3];
    for (int j = 0; j < 3; ++j) {
      float s = kB1[j];
      for (int k = 0; k < 4; ++k) s += x[b * 4 + k] * kW1[k * 3 + j];
      h[j] = std::max(0.0f, s);
    }
    float z[2];
    for (int j = 0; j < 2; ++j) {
      z[j] = 0;
      for (int k = 0; k < 3; ++k) z[j] += h[k] * kW2[k * 2 + j];
    }
    float mx = std::max(z[0], z[1]);
    float e0 = std::exp(z[0] - mx), e1 = std::exp(z[1] - mx);
    y[b * 2] = e0 / (e0 + e1);
    y[b * 2 + 1] = e1 / (e0 + e1);
  }
  return y;
}

Model MakeSingleOpModel(const std::string& op, const std::vector<std::vector<int64_t>>& input_shapes,
                        const std::vector<int64_t>& output_shape, const std::string& domain, int64_t opset) {
  Model m;
  m.opset_imports[""] = opset;
  if (!domain.empty()) m.opset_imports[domain] = 1;
  std::vector<std::string> names;
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    names.push_back("in" + std::to_string(i));
    m.graph.inputs.push_back(TensorInfo(names.back(), DType::kFloat32, input_shapes[i]));
  }
  m.graph.outputs.push_back(TensorInfo("out", DType::kFloat32, output_shape));
  m.graph.nodes.push_back(MakeNode(op, names, {"out"}, {}, "the_" + op, domain));
  return m;
}

std::vector<float> ToVector(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.NumElements());
}

double ElementAsDouble(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kFloat32: return t.data<float>()[i];
    case DType::kFloat64: return t.data<double>()[i];
    case DType::kFloat16: return static_cast<float>(t.data<Float16>()[i]);
    case DType::kBFloat16: return static_cast<float>(t.data<BFloat16>()[i]);
    case DType::kInt8: return t.data<int8_t>()[i];
    case DType::kInt16: return t.data<int16_t>()[i];
    case DType::kInt32: return t.data<int32_t>()[i];
    case DType::kInt64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::kUInt8: return t.data<uint8_t>()[i];
    case DType::kUInt16: return t.data<uint16_t>()[i];
    case DType::kUInt32: return t.data<uint32_t>()[i];
    case DType::kUInt64: return static_cast<double>(t.data<uint64_t>()[i]);
    case DType::kBool: return t.data<bool>()[i];
    default: return NAN;
  }
}

}  // namespace testing
}  // namespace ontrain
