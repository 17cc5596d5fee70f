// `ontrain eval`, `ontrain export` and `ontrain info`: evaluate, export an inference model from, and
// describe an artifacts folder.
#include <cstdio>
#include <map>
#include <numeric>

#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/dataset.h"
#include "tools/cli/table_data.h"
#include "tools/cli/session_loader.h"

namespace ontrain {
namespace cli {

Status Eval(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts", "data", "batch-size", "threads", "data-root"}, {}));
  ONT_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 0));
  ONT_ASSIGN_OR_RETURN(OpenSession job, OpenArtifacts(f.Get("artifacts"), static_cast<int>(threads)));
  if (!job.has_eval) return NotFound("artifacts directory \"", f.Get("artifacts"), "\" has no eval_model.onnx");
  ONT_ASSIGN_OR_RETURN(Table table, LoadTable(f.Get("data", "fashion-mnist:test"), f.Get("data-root", kFashionMnistDir),
                                              job.training_model, job.session->eval_input_names()));
  ONT_ASSIGN_OR_RETURN(int64_t batch, f.GetInt("batch-size", 256));
  if (batch <= 0) return InvalidArgument("--batch-size must be > 0");
  Batcher b;
  ONT_RETURN_IF_ERROR(b.Init(&table, batch));
  ONT_ASSIGN_OR_RETURN(EvalResult r, Evaluate(*job.session, b, batch));
  std::printf("%s: %lld examples, eval loss %.4f", f.Get("data", "fashion-mnist:test").c_str(),
              static_cast<long long>(table.rows), r.loss);
  if (r.accuracy >= 0) std::printf(", accuracy %.2f%%", 100 * r.accuracy);
  std::printf("\n");
  return Status::OK();
}

Status Export(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts", "outputs", "to"}, {}));
  if (!f.Has("to")) return InvalidArgument("export needs --to FILE");
  std::vector<std::string> outputs = f.GetList("outputs");
  if (outputs.empty()) return InvalidArgument("export needs --outputs a,b (values of the eval model)");
  ONT_ASSIGN_OR_RETURN(OpenSession job, OpenArtifacts(f.Get("artifacts"), 1));
  ONT_RETURN_IF_ERROR(job.session->ExportModelForInferencing(f.Get("to"), outputs));
  std::printf("exported %s\n", f.Get("to").c_str());
  return Status::OK();
}

Status Info(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts"}, {}));
  ONT_ASSIGN_OR_RETURN(OpenSession job, OpenArtifacts(f.Get("artifacts"), 1));
  const TrainingSession& s = *job.session;
  size_t bytes = 0, trainable = 0, frozen = 0;
  for (const auto& [name, p] : job.state->parameters) {
    bytes += p.data.SizeInBytes();
    (p.requires_grad ? trainable : frozen) += static_cast<size_t>(p.data.NumElements());
  }
  std::printf("parameters: %zu trainable, %zu frozen, %zu bytes\n", trainable, frozen, bytes);
  auto list = [&](const char* what, const std::vector<std::string>& names) {
    std::printf("%s:", what);
    for (const std::string& n : names) {
      const ValueInfo* v = job.training_model.graph.FindInput(n);
      if (!v) v = job.training_model.graph.FindOutput(n);
      std::printf(" %s%s", n.c_str(), v ? (" " + v->TypeString()).c_str() : "");
    }
    std::printf("\n");
  };
  list("training inputs", s.training_input_names());
  list("training outputs", s.training_output_names());
  if (job.has_eval) {
    list("eval inputs", s.eval_input_names());
    list("eval outputs", s.eval_output_names());
  }
  std::map<std::string, int> ops;
  for (const Node& n : job.training_model.graph.nodes) ops[(n.domain.empty() ? "" : n.domain + "::") + n.op_type]++;
  std::printf("training graph: %zu nodes:", job.training_model.graph.nodes.size());
  for (const auto& [op, count] : ops) std::printf(" %s x%d", op.c_str(), count);
  std::printf("\nprovider: every node on %s\n", job.cpu->name().c_str());
  const Optimizer* opt = s.optimizer();
  std::printf("optimizer: %s, step %lld, learning rate %g\n", opt->kind() == OptimizerKind::kAdamW ? "AdamW" : "SGD",
              static_cast<long long>(opt->step()), opt->learning_rate());
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
