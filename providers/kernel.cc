// KernelContext bookkeeping.
#include "providers/kernel.h"

namespace ontrain {

const Tensor* KernelContext::input(int i) const {
  if (i < 0 || i >= num_inputs() || inputs_[i] == nullptr || inputs_[i]->is_sequence()) return nullptr;
  return inputs_[i]->tensor().defined() ? &inputs_[i]->tensor() : nullptr;
}

const TensorSequence* KernelContext::input_sequence(int i) const {
  if (i < 0 || i >= num_inputs() || inputs_[i] == nullptr) return nullptr;
  return inputs_[i]->sequence();
}

Status KernelContext::CheckOutputIndex(int i) const {
  if (i < 0 || i >= num_outputs()) return Internal("output index ", i, " out of range");
  return Status::OK();
}

Status KernelContext::DeclareOutput(int i, DType dtype, Shape shape) {
  ONT_RETURN_IF_ERROR(CheckOutputIndex(i));
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("output ", i, " would have negative dimension: ", ShapeToString(shape));
  }
  kinds_[i] = OutputKind::kTensor;
  declared_dtypes_[i] = dtype;
  declared_shapes_[i] = std::move(shape);
  return Status::OK();
}

Status KernelContext::DeclareSequenceOutput(int i, DType dtype, std::vector<Shape> shapes) {
  ONT_RETURN_IF_ERROR(CheckOutputIndex(i));
  for (const Shape& s : shapes) {
    if (ShapeNumElements(s) < 0) return InvalidArgument("sequence output ", i, " item shape ", ShapeToString(s));
  }
  kinds_[i] = OutputKind::kSequence;
  declared_dtypes_[i] = dtype;
  sequence_shapes_[i] = std::move(shapes);
  return Status::OK();
}

Status KernelContext::AliasOutput(int i, int input) {
  ONT_RETURN_IF_ERROR(CheckOutputIndex(i));
  if (input < 0 || input >= num_inputs() || inputs_[input] == nullptr) {
    return Internal("output ", i, " aliases missing input ", input);
  }
  kinds_[i] = OutputKind::kAlias;
  alias_input_[i] = input;
  declared_dtypes_[i] = inputs_[input]->dtype();
  return Status::OK();
}

Tensor* KernelContext::output(int i) {
  if (i < 0 || i >= num_outputs() || !requested_[i] || kinds_[i] != OutputKind::kTensor) return nullptr;
  return &outputs_[i].tensor();
}

TensorSequence* KernelContext::output_sequence(int i) {
  if (i < 0 || i >= num_outputs() || !requested_[i] || kinds_[i] != OutputKind::kSequence) return nullptr;
  return outputs_[i].sequence();
}

void KernelContext::Reset(const std::vector<const Value*>& inputs, const std::vector<bool>& requested,
                          ThreadPool* pool) {
  inputs_ = inputs;
  requested_ = requested;
  size_t n = requested_.size();
  kinds_.assign(n, OutputKind::kNone);
  declared_dtypes_.assign(n, DType::kUndefined);
  declared_shapes_.resize(n);
  for (Shape& s : declared_shapes_) s.clear();
  sequence_shapes_.resize(n);
  for (auto& s : sequence_shapes_) s.clear();
  alias_input_.assign(n, -1);
  view_input_.assign(n, -1);
  outputs_.resize(n);
  for (Value& v : outputs_) v = Value();
  scratch_bytes_ = 0;
  scratch_ = nullptr;
  thread_pool_ = pool;
}

}  // namespace ontrain
