// The kernel contract: a kernel is created once per node (reading its attributes), then each run calls
// Prepare (validate inputs, declare output dtypes and shapes, request scratch) and Compute (fill the outputs
// the executor allocated). Splitting the two lets the executor plan memory between them.
#pragma once

#include <memory>
#include <vector>

#include "engine/status.h"
#include "engine/tensor.h"
#include "graph/graph.h"

namespace ontrain {

class ThreadPool;

// What a kernel factory sees of its node.
struct NodeInfo {
  const Node* node = nullptr;
  int64_t opset = 0;  // the opset version imported for the node's domain
  // The graph's declared or inferred type of each output (nullptr where unknown). Kernels whose output shape
  // is not a function of their inputs (MaxPoolGrad, AveragePoolGrad) read it.
  std::vector<const ValueInfo*> output_infos;
};

class KernelContext {
 public:
  virtual ~KernelContext() = default;

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // nullptr for an omitted optional input (and for indices past the end).
  const Tensor* input(int i) const { return i < num_inputs() ? inputs_[i] : nullptr; }
  int num_outputs() const { return static_cast<int>(requested_.size()); }
  bool output_requested(int i) const { return i < num_outputs() && requested_[i]; }

  // Prepare: declares output i. Outputs that are not requested may be declared or skipped.
  Status DeclareOutput(int i, DType dtype, Shape shape);
  // Prepare: asks for `bytes` of scratch memory, valid during Compute only.
  void RequestScratch(size_t bytes) { scratch_bytes_ = bytes; }

  // Compute: the allocated output (nullptr if not requested).
  Tensor* output(int i) { return i < static_cast<int>(outputs_.size()) && requested_[i] ? &outputs_[i] : nullptr; }
  void* scratch() { return scratch_; }
  ThreadPool* thread_pool() const { return thread_pool_; }

  // Executor side.
  void Reset(std::vector<const Tensor*> inputs, std::vector<bool> requested, ThreadPool* pool);
  const std::vector<DType>& declared_dtypes() const { return declared_dtypes_; }
  const std::vector<Shape>& declared_shapes() const { return declared_shapes_; }
  std::vector<Tensor>& outputs() { return outputs_; }
  size_t scratch_bytes() const { return scratch_bytes_; }
  void set_scratch(void* p) { scratch_ = p; }

 private:
  std::vector<const Tensor*> inputs_;
  std::vector<bool> requested_;
  std::vector<DType> declared_dtypes_;
  std::vector<Shape> declared_shapes_;
  std::vector<Tensor> outputs_;
  size_t scratch_bytes_ = 0;
  void* scratch_ = nullptr;
  ThreadPool* thread_pool_ = nullptr;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status Prepare(KernelContext& ctx) = 0;
  virtual Status Compute(KernelContext& ctx) = 0;
};

// Creates the kernel for one node; reads and validates attributes.
using KernelFactory = StatusOr<std::unique_ptr<OpKernel>> (*)(const NodeInfo& info);

// Convenience: a factory for kernels constructible from NodeInfo that cannot fail at creation.
template <typename K>
StatusOr<std::unique_ptr<OpKernel>> MakeKernel(const NodeInfo& info) {
  return std::unique_ptr<OpKernel>(new K(info));
}

}  // namespace ontrain
