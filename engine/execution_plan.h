// The execution plan of one graph over its partition: the steps a run takes (kernels in topological order,
// with a copy wherever a value is read on another device than the one it lives on) and the device
// synchronizations that host readers need. It is made once per graph and set of input devices; what it
// costs in memory is planned per set of input shapes by the executor (engine/memory_plan.h).
//
// Rules:
// - A value lives where it is made: node outputs on their provider's device, graph inputs where the caller
//   says they will be fed (the host unless told otherwise), initializers on the host.
// - One copy per (value, destination device), placed just before its first reader there, and shared by
//   all later readers on that device. A copy between two devices goes through the host (two copies, the
//   host one shared with host readers). Initializers are copied once, when the executor is created.
// - Shape-only reads need no copy. In-place inputs get none either: reading a copy would update the copy,
//   so an in-place input on the wrong device is an error naming the node and the devices.
// - Before a step reads on the host a value that a device copied to the host, that device is synchronized
//   (once, for all such copies made since its last synchronization).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/partition.h"
#include "graph/graph.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct PlannedValue {
  std::string name;       // the graph's name (copies too: the name of the value they copy)
  Device device;          // where it lives
  int source = -1;        // for a copy: the value id it copies
  bool constant = false;  // an initializer or a copy of one, made once when the executor is created
};

struct PlanStep {
  enum class Kind { kKernel, kCopy };
  Kind kind = Kind::kKernel;
  int node = -1;                  // kKernel: index into graph.nodes
  int provider = -1;              // kKernel: the provider running it; kCopy: the device side doing the copy
  std::vector<int> inputs;        // value ids, -1 for an omitted input (kCopy: the source)
  std::vector<int> outputs;       // value ids, -1 for an omitted output (kCopy: the destination)
  std::vector<int> sync_before;   // providers to synchronize before this step reads host data
};

struct ExecutionPlan {
  GraphPartition partition;
  std::vector<PlannedValue> values;
  std::map<std::string, int> ids;  // graph name -> value id (where it is made or fed)
  std::vector<PlanStep> steps;
  std::vector<int> constant_copies;  // value ids of initializer copies, in creation order

  int num_copy_steps() const;
};

// Plans `model` over `partition`. `input_devices` names the device each graph input will be fed on (the
// host when absent).
StatusOr<ExecutionPlan> PlanExecution(const Model& model, GraphPartition partition,
                                      const std::vector<IExecutionProvider*>& providers,
                                      const std::map<std::string, Device>& input_devices);

// Where a graph input is best fed, from the nodes that read it.
struct InputPlacement {
  bool read = false;           // some node reads its data
  Device device;               // the device of its first data reader (in-place reader when there is one)
  bool in_place = false;       // a node updates it in place: it must live on `device`
  std::string in_place_node;   // that node, for messages
};
std::map<std::string, InputPlacement> PlaceInputs(const Model& model, const GraphPartition& partition,
                                                  const std::vector<IExecutionProvider*>& providers);

// The index of the first provider on `device`, or -1.
int ProviderIndexFor(const std::vector<IExecutionProvider*>& providers, Device device);

}  // namespace ontrain
