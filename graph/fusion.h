// Fusions the artifact generator applies to the training model before building its gradient, as ONNX
// Runtime's training graph optimizer does (its LayerNormFusion and GeluFusion): the op sequences that
// PyTorch's exporter writes for LayerNorm below opset 17 and for exact GELU below opset 20 become one
// LayerNormalization / com.microsoft Gelu node, whose forward and gradient kernels are single passes
// instead of ten ops and twenty gradient ops; and a MatMul by a transposed matrix (nn.Linear exported
// without constant folding) becomes one com.microsoft FusedMatMul with transB, so neither the forward nor
// the gradient transposes a weight. The eval model keeps the exporter's ops.
//
// A sequence is fused only when it matches exactly: the constants are scalars of the right value, the
// normalized axis is the last, and no intermediate value is used outside the sequence or is a graph
// output. The results differ from the unfused ops by rounding only.
#pragma once

#include "core/status.h"
#include "graph/graph.h"

namespace ontrain {

struct FusionCounts {
  int layer_norms = 0;
  int gelus = 0;
  int matmul_transposes = 0;
};

FusionCounts FuseForTraining(Model* model);

}  // namespace ontrain
