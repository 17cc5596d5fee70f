// ONNX Runtime artifact lookup and the shared synthetic batches.
#include "tests/ort_artifacts.h"

#include <cmath>
#include <cstdlib>
#include <fstream>

namespace ontrain {
namespace testing {

std::string OrtArtifactDir(const std::string& set, std::string* why) {
  const char* root = std::getenv("ONTRAIN_ORT_ARTIFACTS");
  if (root == nullptr) {
    *why = "ONTRAIN_ORT_ARTIFACTS is not set (tools/test.sh sets it when ../shared/ort-artifacts exists)";
    return "";
  }
  std::string dir = std::string(root) + "/" + set;
  if (std::ifstream(dir + "/training_model.onnx").fail() && std::ifstream(dir + "/checkpoint").fail()) {
    *why = "artifact set " + dir + " not found";
    return "";
  }
  return dir;
}

Tensor SyntheticFloats(const Shape& shape, int step) {
  std::vector<float> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step) * 0.8);
  return Tensor::FromVector(v, shape);
}

Tensor SyntheticTargets(const Shape& shape, int step) {
  std::vector<float> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::cos(0.11 * i + 0.7 * step) * 0.5);
  return Tensor::FromVector(v, shape);
}

Tensor SyntheticLabels(const Shape& shape, int step, int classes, DType dtype) {
  int64_t n = ShapeNumElements(shape);
  if (dtype == DType::kInt32) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((7 * i + 3 * step) % classes);
    return Tensor::FromVector(v, shape);
  }
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (7 * i + 3 * step) % classes;
  return Tensor::FromVector(v, shape);
}

}  // namespace testing
}  // namespace ontrain
