// Helpers shared by ontrain's tests: small models built in code and tensor comparisons.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"

namespace ontrain {
namespace testing {

// x [batch, 4] -> MatMul(w1 [4, 3]) -> Add(b1 [3]) -> Relu -> MatMul(w2 [3, 2]) -> Softmax -> y [batch, 2]
// with fixed small weights; "batch" is a symbolic dim.
Model MakeMlpModel();

// Reference forward pass of MakeMlpModel in plain loops, for x of shape [batch, 4].
std::vector<float> MlpReference(const std::vector<float>& x, int64_t batch);

// A single-node model: inputs and output are float32 with the given static shapes.
Model MakeSingleOpModel(const std::string& op, const std::vector<std::vector<int64_t>>& input_shapes,
                        const std::vector<int64_t>& output_shape, const std::string& domain = "", int64_t opset = 17);

std::vector<float> ToVector(const Tensor& t);

// Element i of a host tensor of any numeric or bool dtype, as double (NaN for other dtypes).
double ElementAsDouble(const Tensor& t, int64_t i);

}  // namespace testing
}  // namespace ontrain
