// Value: what a graph value holds at run time: a tensor, or a sequence of tensors (ONNX's seq(tensor), which
// optimizer models take as their params, gradients and moments). Copies share storage, like Tensor's.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace ontrain {

using TensorSequence = std::vector<Tensor>;

class Value {
 public:
  Value() = default;
  Value(Tensor t) : tensor_(std::move(t)) {}  // NOLINT: a tensor is a value
  static Value Sequence(TensorSequence items) {
    Value v;
    v.seq_ = std::make_shared<TensorSequence>(std::move(items));
    return v;
  }

  bool defined() const { return seq_ != nullptr || tensor_.defined(); }
  bool is_sequence() const { return seq_ != nullptr; }
  // The tensor (undefined for a sequence).
  const Tensor& tensor() const { return tensor_; }
  Tensor& tensor() { return tensor_; }
  // The sequence's items (nullptr for a tensor).
  const TensorSequence* sequence() const { return seq_.get(); }
  TensorSequence* sequence() { return seq_.get(); }
  // The element dtype (a sequence's first item's; kUndefined for an empty sequence).
  DType dtype() const;

 private:
  Tensor tensor_;
  std::shared_ptr<TensorSequence> seq_;
};

inline DType Value::dtype() const {
  if (!seq_) return tensor_.dtype();
  return seq_->empty() ? DType::kUndefined : seq_->front().dtype();
}

}  // namespace ontrain
