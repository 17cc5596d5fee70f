// Executor: runs one graph over an ordered list of execution providers; feeds and fetches by name.
//
// A run follows one line: the graph is partitioned across the providers (engine/partition.h), its steps
// and copies are planned once (engine/execution_plan.h), and memory is planned per set of input shapes
// (engine/memory_plan.h): the first run at a shape allocates each buffer as it is produced and records its
// size and lifetime; from those it plans one arena per device. Later runs at the same shapes place every
// intermediate value, copy, output and scratch buffer in the arenas: no allocation through any provider's
// allocator. Fetched tensors are views into executor memory that may live on a device, valid until the
// next Run: ToHost() gives a host copy.
//
// Graph capture (executor_capture.cc): when one device provider that can record its work (CUDA, the
// simulated device) runs the graph's nodes, a run at planned shapes is recorded after a few eager ones
// and later runs at those shapes replay the recording: one launch, no Prepare and no placement per node.
// CaptureStatus() says whether that happens and, when not, why.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "core/value.h"
#include "engine/execution_plan.h"
#include "graph/graph.h"
#include "providers/execution_provider.h"

namespace ontrain {

using NamedValues = std::vector<std::pair<std::string, Value>>;
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
inline NamedValues ToNamedValues(const NamedTensors& t) { return NamedValues(t.begin(), t.end()); }

// A cap on the memory that executors (and whoever else charges it) may plan, shared by the executors of one
// session. Executors charge their arenas while they hold them; a first run at new shapes charges each
// value from its allocation to its release and fails before allocating the value that would pass the cap.
struct MemoryBudget {
  size_t limit = 0;    // bytes; 0: no limit
  size_t planned = 0;  // charged so far and still held (state tensors, arenas)
};

class Executor;
class PoolTuner;

struct ExecutorOptions {
  std::vector<IExecutionProvider*> providers;   // priority order; the last one runs on the host
  std::map<std::string, Device> input_devices;  // where each graph input will be fed (the host if absent)
  std::string name = "graph";                   // what errors call it ("training graph")
  MemoryBudget* budget = nullptr;               // none: no limit; it must outlive the executor
  // Uses the pool when `pool_leader`'s current run does and adds its run time to that run's PoolTuner
  // sample, instead of tuning itself (a session's optimizer and eval graphs follow its training graph). It
  // must outlive this executor.
  Executor* pool_leader = nullptr;
  // Runs fused kernels for node pairs that allow them (engine/kernel_fusion.h); off runs every node as the
  // graph has it.
  bool fuse_kernels = true;
};

// Told after each step of a run (TrainingSession uses it to start averaging gradient buckets while the
// backward pass goes on). An error ends the run with it.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual Status AfterStep(size_t pos) = 0;
};

class Executor {
 public:
  // Partitions and plans the graph (an op no provider runs is an error naming the op, domain, opset and
  // node) and copies the initializers to the devices that read them. `model` may be destroyed afterwards.
  static StatusOr<std::unique_ptr<Executor>> Create(const Model& model, const ExecutorOptions& options);
  static StatusOr<std::unique_ptr<Executor>> Create(const Model& model, IExecutionProvider* provider);
  ~Executor();

  // Feeds: every graph input without an initializer must be fed, on the device the options named for it;
  // inputs with an initializer may be. Fetches: graph outputs, inputs or initializers by name, in order.
  Status Run(const NamedValues& feeds, const std::vector<std::string>& fetch_names, std::vector<Tensor>* fetches,
             RunObserver* observer = nullptr);

  // The last step position of a run whose node reads `value`, or reads an output of a node that reads it
  // (an in-place update's alias); -1 when no step reads it. After that step a run no longer touches it.
  int LastStepTouching(const std::string& value) const;

  // A host tensor holding `t`'s values (`t` itself when it is on the host).
  StatusOr<Tensor> ToHost(const Tensor& t) const;
  // The same into *host, reusing it when it fits and nothing else holds it (core/data_transfer.h).
  Status ToHost(const Tensor& t, Tensor* host) const;
  // That copy of a device tensor queued, not waited for: *host is readable once *transfer has synchronized.
  Status QueueToHost(const Tensor& t, Tensor* host, IDataTransfer** transfer) const;

  // Graph inputs that must be fed (those without a default initializer), in graph order.
  const std::vector<std::string>& required_inputs() const { return required_inputs_; }
  const std::vector<std::string>& output_names() const { return output_names_; }
  const ExecutionPlan& plan() const { return plan_; }
  // The graph it runs: the model's, constants folded and kernels fused.
  const Graph& graph() const { return graph_; }
  const std::vector<IExecutionProvider*>& providers() const { return providers_; }
  // How many gradients are written straight into their accumulation buffer on runs whose InPlaceAccumulatorV2
  // overwrites it (see FindAccumulatorTargets in executor.cc).
  size_t num_accumulator_targets() const;
  // How many memory plans exist (one per distinct set of feed shapes seen).
  size_t num_plans() const { return plans_.size(); }
  // Arena bytes of the plan used by the last run, over all devices (0 before the first planned run).
  size_t last_arena_bytes() const;
  // Arena bytes of the last run's plan on provider `p`.
  size_t last_arena_bytes(int p) const;
  // Bytes of each value (and copy) the last run made, by value id of plan().values.
  const std::vector<size_t>& last_value_bytes() const { return last_value_bytes_; }
  // Whether runs at the last run's shapes go better with the intra-op pool or without it: "pool (...)",
  // "serial (...)", "undecided", "not tuned" (one thread, or a pool made with tuning off), or "follows"
  // with the leader's name.
  std::string PoolChoice() const;

  // Graph capture: runs so far, how many were recorded and how many replayed a recording.
  struct CaptureStats {
    int64_t runs = 0;
    int64_t recorded = 0;
    int64_t replayed = 0;
  };
  const CaptureStats& capture_stats() const { return capture_stats_; }
  // "recorded R, replayed P of N runs", or why this graph's runs (or those at the last run's shapes) are
  // not recorded.
  std::string CaptureStatus() const;

  struct Step;
  struct MemoryArenas;
  struct Capture;

 private:
  Executor() = default;
  Status Bind(const NamedValues& feeds);
  Status MakeConstants(const Graph& g);
  void FindAccumulatorTargets();
  const Tensor* AccumulatorBufferFor(int value, DType dtype, const Shape& shape) const;
  Status RunKernel(size_t pos, MemoryArenas* arenas, std::vector<size_t>* sizes);
  Status PlaceOutputs(Step* step, MemoryArenas* arenas, std::vector<size_t>* sizes);
  Status RunCopy(size_t pos, MemoryArenas* arenas, std::vector<size_t>* sizes);
  StatusOr<Tensor> Place(size_t slot, int provider, size_t bytes, DType dtype, Shape shape, MemoryArenas* arenas,
                         std::vector<size_t>* sizes);
  void Release(size_t pos, const Step& step);
  void Uncharge(int slot);
  void BuildArenas(const std::vector<size_t>& sizes);
  Status RunSteps(MemoryArenas* arenas, RunObserver* observer);
  // Graph capture (executor_capture.cc).
  void AnalyseCapture();
  void ChooseCapture(MemoryArenas* arenas, bool allowed, Capture** replay, bool* record);
  bool MakeReplayKey(MemoryArenas* arenas);
  std::string ChangingInputs() const;  // what a replay key holds, for messages
  Status Record(MemoryArenas* arenas);
  Status Replay(Capture& capture);

  std::vector<IExecutionProvider*> providers_;
  std::vector<IDataTransfer*> transfers_;  // the providers, for copies to the host
  Graph graph_;  // nodes and value infos; initializers moved into initial_values_
  ExecutionPlan plan_;
  std::vector<std::unique_ptr<Step>> steps_;
  std::vector<Value> initial_values_;  // constants and input defaults, by value id
  std::vector<Value> values_;          // current run, by value id
  std::vector<int> last_use_;          // by value id: last step position reading it
  std::vector<bool> keep_;             // by value id: graph outputs, alive to the end of a run
  std::vector<bool> written_;          // by value id: some node may write it in place (no views of it)
  // By value id of a gradient that an InPlaceAccumulatorV2 overwrites its buffer with: the buffer's and the
  // overwrite flag's value ids. When a run's flag is true the gradient's producer writes straight into the
  // buffer, and the accumulator finds nothing to copy (FindAccumulatorTargets in executor.cc).
  struct AccumulatorTarget {
    int buffer = -1, flag = -1;
  };
  std::vector<AccumulatorTarget> accumulator_target_;
  std::vector<int> slot_provider_;     // by slot: the provider whose arena holds it
  std::vector<int> slot_value_;        // by slot: the value it holds (-1 for scratch)
  std::vector<std::string> required_inputs_;
  std::vector<int> required_ids_;      // their value ids
  // Bind: each feed position's name, graph input and value id as last bound. Feeds come in the same order
  // from step to step, so a name equal to its position's is found without a search (a search of the
  // inputs by name per feed was 1.4% of a MobileNet step: 160 inputs, N^2 / 2 string compares).
  struct FeedSlot {
    std::string name;
    const ValueInfo* info = nullptr;
    int v = -1;
  };
  std::vector<FeedSlot> feed_slots_;
  std::vector<std::string> output_names_;
  std::vector<size_t> last_value_bytes_;  // by value id
  std::string key_;                    // the current run's input shapes
  std::vector<std::pair<const std::string*, int64_t>> symbols_;  // Bind: symbolic dims bound so far
  std::vector<size_t> sizes_;          // Run: bytes per slot
  std::string name_;
  MemoryBudget* budget_ = nullptr;
  std::vector<int> value_slot_;        // by value id: the slot that holds it (-1: fed, constant or aliased)
  std::vector<size_t> charged_;        // by slot: bytes charged to the budget by this run's allocations
  size_t live_ = 0;                    // their sum
  size_t arena_charge_ = 0;            // bytes of plans_' arenas charged to the budget
  std::map<std::string, std::unique_ptr<MemoryArenas>> plans_;
  MemoryArenas* last_ = nullptr;
  bool tunable_pool_ = false;  // a provider's pool has threads to spare and may be left out (PoolTuner)
  bool use_pool_ = true;       // this run hands kernels their provider's pool
  Executor* leader_ = nullptr;            // ExecutorOptions::pool_leader
  PoolTuner* current_tuner_ = nullptr;    // the tuner of this executor's current (or last) run, if any
  // Graph capture (executor_capture.cc).
  static constexpr int kCaptureNotAnalysed = -2;
  int capture_provider_ = kCaptureNotAnalysed;  // the recording provider; -1: never (capture_refusal_ says why)
  std::string capture_refusal_;
  std::vector<int> keyed_inputs_;     // fed host inputs that nodes read directly: their bytes key a recording
  std::vector<int> device_inputs_;    // inputs fed on the device: their addresses key a recording
  std::vector<int> capture_outputs_;  // graph outputs a node makes: kept by each recording
  std::string replay_key_;            // the current run's (memory reused from run to run)
  MemoryArenas* capture_plan_ = nullptr;  // the plan of the last run: only its recordings are kept
  Capture* recording_ = nullptr;          // set while a run is being recorded
  // What ChooseCapture decided for the last run that could have been recorded, for CaptureStatus.
  enum class CaptureChoice { kNone, kWarmUp, kUnrepeated, kRecord, kReplay, kRefused };
  CaptureChoice last_choice_ = CaptureChoice::kNone;
  CaptureStats capture_stats_;
};

}  // namespace ontrain
