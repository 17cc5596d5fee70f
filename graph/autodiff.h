// Reverse-mode automatic differentiation over ONNX graphs, in ONNX Runtime's conventions: the backward
// graph uses the op vocabulary and names ONNX Runtime's gradient builder emits (`<value>_grad`,
// com.microsoft gradient ops such as ReluGrad, SoftmaxCrossEntropyLossGrad, ConvGrad), so ontrain's
// training models also train in ONNX Runtime.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"

namespace ontrain {

// The forward rewrites ONNX Runtime applies before differentiating: MaxPool gains its Indices output,
// SoftmaxCrossEntropyLoss its log_prob output, LayerNormalization its Mean and InvStdDev outputs, Dropout
// its mask, and BatchNormalization becomes com.microsoft BatchNormInternal (training mode, 5 outputs).
Status PrepareForGradients(Model* model);

// Appends to model->graph the nodes computing d(loss)/d(x) for each x in `xs` (graph inputs), named
// "<x>_grad", and adds them as graph outputs after the existing ones. `loss` must be a float graph value.
// Partial gradients of values read by several nodes are summed ("AccumulateGrad_<v>_grad"). An op without
// a gradient builder is an error naming the op and the node.
Status BuildGradientGraph(Model* model, const std::string& loss, const std::vector<std::string>& xs);

// The ops that have a gradient builder (for coverage listings).
std::vector<std::string> DifferentiableOps();

}  // namespace ontrain
