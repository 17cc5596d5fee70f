// Opening an artifacts folder (training_model.onnx, eval_model.onnx, optimizer_model.onnx, checkpoint) as
// a TrainingSession on a list of providers, for the CLI's train, eval, export and info commands.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/checkpoint_state.h"
#include "engine/provider_list.h"
#include "engine/training_session.h"
#include "graph/graph.h"

namespace ontrain {
namespace cli {

struct OpenSession {
  ProviderList providers;
  std::unique_ptr<CheckpointState> state;  // stable address: the session points into it
  Model training_model;
  bool has_eval = false;
  std::unique_ptr<TrainingSession> session;  // declared last: destroyed first, while the providers live
};

struct OpenOptions {
  int threads = 0;
  bool tune_pool = true;          // ProviderListOptions' (false: --no-pool-tuning)
  bool graph_capture = true;      // ProviderListOptions' (false: --no-graph-capture)
  bool flush_denormals = false;   // ProviderListOptions' (--flush-denormals)
  bool deterministic = true;      // ProviderListOptions' (false: --nondeterministic)
  std::string checkpoint;         // overrides the folder's own checkpoint (e.g. a resumed run's)
  std::string providers = "cpu";  // "sim,cpu", ...
  Communicator* communicator = nullptr;  // data-parallel training when set (it outlives the session)
  int64_t gradient_accumulation_steps = 0;  // TrainingSessionOptions' (overlapped averaging when > 0)
  int64_t bucket_bytes = 0;                 // 0: TrainingSessionOptions' default
  int64_t memory_limit_bytes = 0;           // TrainingSessionOptions' (0: none)
};

// A missing file is an error naming it.
StatusOr<OpenSession> OpenArtifacts(const std::string& dir, const OpenOptions& options);

bool FileExists(const std::string& path);

}  // namespace cli
}  // namespace ontrain
