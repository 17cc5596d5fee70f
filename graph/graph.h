// The in-memory graph: what ontrain loads from an ONNX ModelProto, transforms, executes and writes back.
//
// It is a plain data structure (nodes in file order, named values, initializers as host tensors); algorithms
// over it (topological order, shape inference, autodiff) are free functions. Attributes stay ONNX
// AttributeProtos so that anything ontrain does not interpret survives a load/save round trip.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/status.h"
#include "core/tensor.h"

namespace ontrain {

// One dimension: a known size, a symbolic name ("batch"), or unknown.
struct Dim {
  int64_t value = -1;   // >= 0 when known
  std::string param;    // symbolic name, when value < 0
  bool known() const { return value >= 0; }
};

// The type of a graph input, output or intermediate value.
struct ValueInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  bool has_shape = false;      // false: rank unknown
  std::vector<Dim> dims;
  bool is_tensor = true;       // false for sequences and other non-tensor types
  onnx::TypeProto type;        // the original type, kept for round trips of non-tensor values

  std::string TypeString() const;  // e.g. float32[batch,784]
};

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;                 // "" is the default ONNX domain
  std::vector<std::string> inputs;    // "" marks an omitted optional input
  std::vector<std::string> outputs;   // "" marks an omitted optional output
  std::map<std::string, onnx::AttributeProto> attributes;
  std::string doc_string;

  bool HasAttribute(const std::string& name) const { return attributes.count(name) > 0; }
  int64_t GetInt(const std::string& name, int64_t fallback) const;
  float GetFloat(const std::string& name, float fallback) const;
  std::string GetString(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> GetInts(const std::string& name) const;  // empty when absent
  // GetInts as a Shape: no heap allocation for up to Shape::kInline values (attributes kernels read per run).
  Shape GetDims(const std::string& name) const;
  std::vector<float> GetFloats(const std::string& name) const;
  // A readable id for error messages: node "name" (Domain::OpType).
  std::string Describe() const;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_infos;         // intermediate types, if known
  std::map<std::string, Tensor> initializers;  // host tensors
  std::vector<std::string> initializer_order;  // file order, for deterministic saving

  const ValueInfo* FindInput(const std::string& name) const;
  const ValueInfo* FindOutput(const std::string& name) const;
  void AddInitializer(const std::string& name, Tensor value);
  void RemoveInitializer(const std::string& name);
};

struct Model {
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opset_imports;  // domain ("" for ONNX) -> version
  std::string producer_name = "ontrain";
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<onnx::StringStringEntryProto> metadata_props;
  Graph graph;

  // Opset version imported for `domain` ("ai.onnx" and "" are the same); 0 when not imported.
  int64_t OpsetFor(const std::string& domain) const;
};

// Canonical domain name: "ai.onnx" -> "".
std::string NormalizeDomain(const std::string& domain);

// Node indices in an order where every node follows the producers of its inputs. Values with no producer
// must be graph inputs or initializers; anything else (a dangling name or a cycle) is an error naming it.
StatusOr<std::vector<size_t>> TopologicalOrder(const Graph& graph);

}  // namespace ontrain
