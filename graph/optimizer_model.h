// The optimizer model's conventions, both ways: building one as ONNX Runtime's generate_artifacts does,
// and reading one the way its training runtime does (the optimizer kind from the com.microsoft optimizer
// node, that node's attributes, and the exact graph-input signature it feeds).
//
// Inputs, in this order: learning_rate float[1], step int64[1], params, gradients, first_order_moments
// (and second_order_moments for AdamW), the last four seq(tensor). Any other nodes (learning-rate
// arithmetic, gradient clipping, casts, sequence ops) may surround the optimizer node: the model runs as a
// graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace ontrain {

enum class OptimizerKind { kAdamW, kSGD };

// AdamWOptimizer's attributes (com.microsoft, version 1).
struct AdamWConfig {
  float alpha = 0.9f;     // beta1
  float beta = 0.999f;    // beta2
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;
  int64_t adam_mode = 0;  // 0: PyTorch's AdamW; 1: Hugging Face's
  bool correct_bias = true;
};

struct OptimizerModelInfo {
  OptimizerKind kind = OptimizerKind::kAdamW;
  AdamWConfig adamw;            // kAdamW: the node's attributes
  float clip_max_norm = -1.0f;  // > 0 when an InplaceClipGradNorm node is present
  // The model's first output is the optimizer node's flag and the node has no update_signal input: the
  // kernels then set the flag at every step, so a caller need not read it back (from a device, that read
  // would wait for the whole step).
  bool flag_always_set = false;
};

// Reads the kind and attributes and checks the signature; the errors are ONNX Runtime's.
StatusOr<OptimizerModelInfo> ReadOptimizerModel(const Model& model);

// Graph-input names the optimizer model must have, in order.
std::vector<std::string> OptimizerInputNames(OptimizerKind kind);
// Checkpoint moment names per kind ("momentum0", "momentum1").
std::vector<std::string> MomentNames(OptimizerKind kind);

// An optimizer model as onnxblock writes it: the optimizer node alone (ONNX opset `opset`, com.microsoft 1).
Model MakeOptimizerModel(OptimizerKind kind, const AdamWConfig& adamw, int64_t opset);

}  // namespace ontrain
