// KernelContext bookkeeping.
#include "providers/kernel.h"

namespace ontrain {

Status KernelContext::DeclareOutput(int i, DType dtype, Shape shape) {
  if (i < 0 || i >= num_outputs()) return Internal("output index ", i, " out of range");
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("output ", i, " would have negative dimension: ", ShapeToString(shape));
  }
  declared_dtypes_[i] = dtype;
  declared_shapes_[i] = std::move(shape);
  return Status::OK();
}

void KernelContext::Reset(std::vector<const Tensor*> inputs, std::vector<bool> requested, ThreadPool* pool) {
  inputs_ = std::move(inputs);
  requested_ = std::move(requested);
  size_t n = requested_.size();
  declared_dtypes_.assign(n, DType::kUndefined);
  declared_shapes_.assign(n, Shape());
  outputs_.resize(n);
  for (auto& t : outputs_) t = Tensor();
  scratch_bytes_ = 0;
  scratch_ = nullptr;
  thread_pool_ = pool;
}

}  // namespace ontrain
