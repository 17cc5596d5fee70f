// Type and shape inference for whole models, delegated to ONNX's own inference for standard ops.
#pragma once

#include "core/status.h"
#include "graph/graph.h"

namespace ontrain {

// Fills model->graph.value_infos (and refines output types) with the types and shapes ONNX infers.
// The com.microsoft forward ops that ontrain's rewrites introduce (BatchNormInternal, ConcatTraining, the Gelu family)
// are typed from their inputs so that inference continues past them; other ops that ONNX does not know
// leave their outputs untyped rather than failing. A contradiction ONNX detects (mismatched shapes) is
// an error naming the node.
Status InferShapes(Model* model);

}  // namespace ontrain
