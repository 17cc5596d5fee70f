// Finite-difference checking of built gradient graphs, shared by the autodiff tests: for
// L = sum(w * f(inputs)), the built <x>_grad outputs must match (L(x + h) - L(x - h)) / 2h, in float64,
// for every element of every differentiated input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/graph.h"

namespace ontrain {
namespace gradcheck {

// Uniform values in [lo, hi), float64, reproducible from the seed.
Tensor Random(const Shape& shape, uint32_t seed, double lo = -1, double hi = 1);

struct Case {
  Model model;                  // forward graph; output "y"
  NamedTensors feeds;           // every input
  std::vector<std::string> xs;  // inputs to differentiate
  NamedTensors fixed;           // inputs that are not differentiated (labels, run-time pads)
};

// Adds loss = ReduceSum(y * w) for a fixed random w of y's shape.
void AddWeightedLoss(Model* m, const Shape& y_shape, uint32_t seed);

// Builds the gradient graph of `c` and checks every gradient element against central differences.
void CheckGradients(Case c, double tol = 1e-6);
// The built gradients of c.xs (in their dtype).
std::vector<Tensor> BuiltGradients(Case c);
// `c` in float32: graph inputs, outputs, float64 initializers and feeds converted (other dtypes kept).
Case ToFloat32(const Case& c);
// Builds `c` (a float64 case) in float64 and in float32 and requires every float32 gradient element within
// tol * max(1, |float64 value|): for kernels whose float32 path differs from the float64 one.
void CheckFloat32AgainstFloat64(const Case& c, double tol);

// An empty model importing ONNX opset 17.
Model Base();

}  // namespace gradcheck
}  // namespace ontrain
