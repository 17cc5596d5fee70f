// Executor: runs one graph on one execution provider, feeds and fetches by name.
//
// Memory: the first run at a given set of feed shapes allocates each value as it is produced and records
// its size and lifetime; from those it plans one arena (values that are never alive at the same time share
// bytes) and allocates it once. Later runs at the same shapes place every intermediate value, output and
// scratch buffer in that arena: no allocation at all through the provider's allocator.
// Fetched tensors are therefore views into executor memory, valid until the next Run; Clone() to keep them.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/status.h"
#include "engine/tensor.h"
#include "graph/graph.h"
#include "providers/execution_provider.h"

namespace ontrain {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Executor {
 public:
  // Resolves every node's op against the provider's kernel list (an unknown op is an error naming the op,
  // domain, opset and node) and copies the initializers to the provider's device. `model` may be destroyed
  // afterwards.
  static StatusOr<std::unique_ptr<Executor>> Create(const Model& model, IExecutionProvider* provider);
  ~Executor();

  // Feeds: every graph input without an initializer must be fed; inputs with an initializer may be.
  // Fetches: graph outputs, inputs or initializers by name, in the order asked.
  Status Run(const NamedTensors& feeds, const std::vector<std::string>& fetch_names, std::vector<Tensor>* fetches);

  // Graph inputs that must be fed (those without a default initializer), in graph order.
  const std::vector<std::string>& required_inputs() const { return required_inputs_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  // How many memory plans exist (one per distinct set of feed shapes seen).
  size_t num_plans() const { return plans_.size(); }
  // Arena bytes of the plan used by the last run (0 before the first planned run).
  size_t last_arena_bytes() const { return last_arena_bytes_; }

  struct NodeState;
  struct Plan;

 private:
  Executor() = default;
  Status Bind(const NamedTensors& feeds, std::string* key);
  Status RunNode(size_t pos, Plan* plan, std::vector<size_t>* sizes);
  void BuildPlan(const std::string& key, const std::vector<size_t>& sizes);

  IExecutionProvider* provider_ = nullptr;
  Graph graph_;  // nodes and value infos; initializers moved to the device in values_
  std::vector<std::unique_ptr<NodeState>> nodes_;  // topological order
  std::map<std::string, int> value_index_;
  std::vector<Tensor> initial_values_;   // initializers on the device, by value index
  std::vector<Tensor> values_;           // current run
  std::vector<int> last_use_;            // by value index: last node position reading it
  std::vector<bool> keep_;               // by value index: graph outputs, never reused within a run
  std::vector<std::string> required_inputs_;
  std::vector<std::string> output_names_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
  std::vector<Tensor> retired_arenas_;  // replaced plans' arenas, kept until the next Run
  size_t last_arena_bytes_ = 0;
};

}  // namespace ontrain
