// The kernel contract: a kernel is created once per node (reading its attributes), then each run calls
// Prepare (validate inputs, declare output dtypes and shapes, request scratch) and Compute (fill the outputs
// the executor allocated). Splitting the two lets the executor plan memory between them.
//
// Prepare runs on the host before the kernel's provider runs it: it may read the shapes and dtypes of every
// input, but the data only of the inputs its kernel row declares host inputs (KernelDef::roles), which the
// planner keeps on the host. Compute runs through the provider (IExecutionProvider::Run).
#pragma once

#include <memory>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/value.h"
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
  enum class OutputKind { kNone, kTensor, kSequence, kAlias };

  virtual ~KernelContext() = default;

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // Tensor input i; nullptr for an omitted optional input, an index past the end, or a sequence input.
  const Tensor* input(int i) const;
  // Sequence input i; nullptr unless input i is a sequence.
  const TensorSequence* input_sequence(int i) const;
  int num_outputs() const { return static_cast<int>(requested_.size()); }
  bool output_requested(int i) const { return i < num_outputs() && requested_[i]; }

  // Prepare: declares tensor output i. Outputs that are not requested may be declared or skipped.
  Status DeclareOutput(int i, DType dtype, Shape shape);
  // Prepare: output i is a sequence of new tensors of these shapes, allocated by the executor.
  Status DeclareSequenceOutput(int i, DType dtype, std::vector<Shape> shapes);
  // Prepare: output i is input `input` itself (a kernel that updates a sequence in place and returns it).
  Status AliasOutput(int i, int input);
  // Prepare, after DeclareOutput(i, ...): output i holds input `input`'s bytes unchanged (Identity, Reshape,
  // Squeeze), so the executor may give it the input's storage under the declared shape instead of new
  // memory; Compute then finds the two pointers equal and copies nothing. The executor does so only where
  // nothing writes either value in place and the output is not a graph output.
  void AllowViewOfInput(int i, int input) {
    if (i >= 0 && i < num_outputs() && input >= 0 && input < num_inputs()) view_input_[i] = input;
  }
  // Prepare: asks for `bytes` of scratch memory, valid during Compute only.
  void RequestScratch(size_t bytes) { scratch_bytes_ = bytes; }

  // Compute: the allocated output (nullptr if not requested or not a tensor).
  Tensor* output(int i);
  // Compute: the allocated sequence output (nullptr if not requested or not a sequence).
  TensorSequence* output_sequence(int i);
  void* scratch() { return scratch_; }
  ThreadPool* thread_pool() const { return thread_pool_; }

  // Executor side.
  void Reset(const std::vector<const Value*>& inputs, const std::vector<bool>& requested, ThreadPool* pool);
  const std::vector<const Value*>& input_values() const { return inputs_; }
  // Points the inputs elsewhere and keeps everything else (a recorded launch's copy of its context reads
  // values the recorder owns).
  void ReplaceInputs(const std::vector<const Value*>& inputs) { inputs_ = inputs; }
  OutputKind output_kind(int i) const { return kinds_[i]; }
  DType declared_dtype(int i) const { return declared_dtypes_[i]; }
  const Shape& declared_shape(int i) const { return declared_shapes_[i]; }
  const std::vector<Shape>& declared_sequence_shapes(int i) const { return sequence_shapes_[i]; }
  int alias_input(int i) const { return alias_input_[i]; }
  int view_input(int i) const { return view_input_[i]; }
  std::vector<Value>& outputs() { return outputs_; }
  size_t scratch_bytes() const { return scratch_bytes_; }
  void set_scratch(void* p) { scratch_ = p; }

 private:
  Status CheckOutputIndex(int i) const;

  std::vector<const Value*> inputs_;
  std::vector<bool> requested_;
  std::vector<OutputKind> kinds_;
  std::vector<DType> declared_dtypes_;
  std::vector<Shape> declared_shapes_;
  std::vector<std::vector<Shape>> sequence_shapes_;
  std::vector<int> alias_input_;
  std::vector<int> view_input_;
  std::vector<Value> outputs_;
  size_t scratch_bytes_ = 0;
  void* scratch_ = nullptr;
  ThreadPool* thread_pool_ = nullptr;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual Status Prepare(KernelContext& ctx) = 0;
  virtual Status Compute(KernelContext& ctx) = 0;
  // Whether the device work Compute queues is a function of the prepared context alone, so that a
  // recording of it replays right (graph capture). False for kernels that change their own state at every
  // run (a random kernel's draw counter) or queue copies from host memory they rewrite.
  virtual bool capturable() const { return true; }
};

// Creates the kernel for one node; reads and validates attributes.
using KernelFactory = StatusOr<std::unique_ptr<OpKernel>> (*)(const NodeInfo& info);

// Convenience: a factory for kernels constructible from NodeInfo that cannot fail at creation.
template <typename K>
StatusOr<std::unique_ptr<OpKernel>> MakeKernel(const NodeInfo& info) {
  return std::unique_ptr<OpKernel>(new K(info));
}

}  // namespace ontrain
