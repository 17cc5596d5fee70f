// Bridges ontrain's Model to onnx::shape_inference::InferShapes.
#include "graph/shape_inference.h"

#include <exception>

#include <onnx/shape_inference/implementation.h>

#include "graph/model_io.h"

namespace ontrain {

Status InferShapes(Model* model) {
  onnx::ModelProto proto = ModelToProto(*model);
  proto.mutable_graph()->clear_value_info();
  onnx::ShapeInferenceOptions options;
  options.check_type = true;
  options.error_mode = 1;  // throw on errors in known ops; unknown ops are skipped
  try {
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return InvalidArgument("shape inference failed: ", e.what());
  }
  model->graph.value_infos.clear();
  for (const auto& vi : proto.graph().value_info()) {
    ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(vi));
    model->graph.value_infos.push_back(std::move(v));
  }
  for (int i = 0; i < proto.graph().output_size(); ++i) {
    ONT_ASSIGN_OR_RETURN(ValueInfo v, ValueInfoFromProto(proto.graph().output(i)));
    if (v.dtype != DType::kUndefined) model->graph.outputs[i] = std::move(v);
  }
  return Status::OK();
}

}  // namespace ontrain
