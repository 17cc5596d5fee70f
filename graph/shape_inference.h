// Type and shape inference for whole models, delegated to ONNX's own inference for standard ops.
#pragma once

#include "engine/status.h"
#include "graph/graph.h"

namespace ontrain {

// Fills model->graph.value_infos (and refines output types) with the types and shapes ONNX infers.
// Ops that ONNX does not know (e.g. com.microsoft) leave their outputs untyped rather than failing;
// a contradiction ONNX detects (mismatched shapes) is an error naming the node.
Status InferShapes(Model* model);

}  // namespace ontrain
