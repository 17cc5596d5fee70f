// OpenArtifacts.
#include "tools/cli/session_loader.h"

#include <fstream>

#include "checkpoint/checkpoint_io.h"
#include "graph/model_io.h"

namespace ontrain {
namespace cli {

bool FileExists(const std::string& path) { return !std::ifstream(path).fail(); }

StatusOr<OpenSession> OpenArtifacts(const std::string& dir, const OpenOptions& options) {
  if (dir.empty()) return InvalidArgument("name the artifacts folder with --artifacts DIR");
  for (const char* name : {"training_model.onnx", "optimizer_model.onnx", "checkpoint"}) {
    if (!FileExists(dir + "/" + name)) return NotFound("artifacts directory \"", dir, "\" has no ", name);
  }
  OpenSession o;
  o.has_eval = FileExists(dir + "/eval_model.onnx");
  ProviderListOptions po;
  po.threads = options.threads;
  po.tune_pool = options.tune_pool;
  po.graph_capture = options.graph_capture;
  po.flush_denormals = options.flush_denormals;
  po.deterministic = options.deterministic;
  ONT_ASSIGN_OR_RETURN(o.providers, CreateProviders(options.providers, po).WithContext("--provider"));
  const std::string ckpt = options.checkpoint.empty() ? dir + "/checkpoint" : options.checkpoint;
  ONT_ASSIGN_OR_RETURN(CheckpointState state, LoadCheckpoint(ckpt));
  o.state = std::make_unique<CheckpointState>(std::move(state));
  ONT_ASSIGN_OR_RETURN(o.training_model, LoadModel(dir + "/training_model.onnx"));
  TrainingSessionOptions session_options{o.providers.ordered};
  session_options.communicator = options.communicator;
  session_options.gradient_accumulation_steps = options.gradient_accumulation_steps;
  if (options.bucket_bytes > 0) session_options.bucket_bytes = options.bucket_bytes;
  session_options.memory_limit_bytes = options.memory_limit_bytes;
  ONT_ASSIGN_OR_RETURN(o.session,
                       TrainingSession::Create(session_options, o.state.get(),
                                               ModelSource::FromPath(dir + "/training_model.onnx"),
                                               o.has_eval ? ModelSource::FromPath(dir + "/eval_model.onnx") : ModelSource(),
                                               ModelSource::FromPath(dir + "/optimizer_model.onnx")));
  return o;
}

}  // namespace cli
}  // namespace ontrain
