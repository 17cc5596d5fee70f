// Opening an artifacts folder (training_model.onnx, eval_model.onnx, optimizer_model.onnx, checkpoint) as
// a TrainingSession on the CPU provider, for the CLI's train, eval, export and info commands.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/checkpoint_state.h"
#include "engine/training_session.h"
#include "graph/graph.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace cli {

struct OpenSession {
  std::unique_ptr<CpuExecutionProvider> cpu;
  std::unique_ptr<CheckpointState> state;  // stable address: the session points into it
  Model training_model;
  bool has_eval = false;
  std::unique_ptr<TrainingSession> session;
};

// `checkpoint` overrides the folder's own checkpoint (e.g. a resumed run's). A missing file is an error
// naming it.
StatusOr<OpenSession> OpenArtifacts(const std::string& dir, int threads, const std::string& checkpoint = "");

bool FileExists(const std::string& path);

}  // namespace cli
}  // namespace ontrain
