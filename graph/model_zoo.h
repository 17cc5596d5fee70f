// Built-in forward models (ONNX graphs built in code, so that the demo needs no PyTorch): an MLP and a
// small CNN image classifier, initialised as PyTorch initialises Linear and Conv layers
// (uniform in +-1/sqrt(fan_in)), from a seed.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"

namespace ontrain {

// input [batch, inputs] -> (Gemm -> Relu) per hidden width -> Gemm -> logits [batch, classes]
Model MakeMlpClassifier(int64_t inputs, const std::vector<int64_t>& hidden, int64_t classes, uint32_t seed);

// input [batch, 1, side, side] -> Conv3x3(16) Relu MaxPool2 -> Conv3x3(32) Relu MaxPool2 -> Flatten
// -> Gemm(128) Relu -> Gemm(classes) -> logits. `side` must be divisible by 4.
Model MakeCnnClassifier(int64_t side, int64_t classes, uint32_t seed);

}  // namespace ontrain
