// Partitioning: which provider runs each node of a graph.
//
// Providers come in the session's priority order ("cuda,cpu"). A node goes to the first provider whose
// kernel list has a row for its (domain, op, opset, input dtype); the dtypes are the graph's static ones
// (graph/value_types.h). The last provider must be the host's, the fallback for every node. A second pass
// keeps host-side computations on the host: a node whose outputs are read only as host inputs (Reshape's
// shape, Slice's starts, ...), directly or through other such nodes, runs on the last provider, so that
// shape arithmetic never moves to a device and back.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct NodePlacement {
  int provider = -1;               // index into the provider list
  const KernelDef* def = nullptr;  // the row for the static input dtypes (nullptr when a dtype is unknown)
  std::string why_fallback;        // why earlier providers do not run it ("" when none was passed over)
};

struct GraphPartition {
  std::vector<size_t> order;            // node indices in topological order
  std::vector<NodePlacement> nodes;     // by node index
  std::map<std::string, DType> dtypes;  // static element type of every value
};

StatusOr<GraphPartition> PartitionGraph(const Model& model, const std::vector<IExecutionProvider*>& providers);

// The graph as the executor plans it over `providers`: Constant nodes folded into initializers and, when the
// list has a device, outputs that describe only the shapes of a node's inputs moved to nodes of their own
// (ConcatTraining's per_input_length becomes Shape -> Gather -> Concat), which the planner keeps on the host
// beside their readers instead of computing them on the device and copying them back at every run.
void PrepareForPlanning(Model* model, const std::vector<IExecutionProvider*>& providers);

// How a node reads input `i` under its placement.
enum class InputUse {
  kNone,       // omitted
  kShapeOnly,  // dtype and shape only: the value may live anywhere
  kHost,       // data read on the host
  kDevice,     // data read on the node's device
  kInPlace,    // data written in place on the node's device
};
InputUse UseOfInput(const NodePlacement& placement, const Node& node, int i);

}  // namespace ontrain
