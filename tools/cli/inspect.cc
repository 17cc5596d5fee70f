// `ontrain eval` and `ontrain export`: evaluate an artifacts folder, and export an inference model from it.
#include <cstdio>

#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/dataset.h"
#include "tools/cli/table_data.h"
#include "tools/cli/session_loader.h"

namespace ontrain {
namespace cli {

Status Eval(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts", "data", "batch-size", "threads", "data-root", "provider"}, {}));
  ONT_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 0));
  OpenOptions open;
  open.threads = static_cast<int>(threads);
  open.providers = f.Get("provider", "cpu");
  ONT_ASSIGN_OR_RETURN(OpenSession job, OpenArtifacts(f.Get("artifacts"), open));
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
  OpenOptions open;
  open.threads = 1;
  ONT_ASSIGN_OR_RETURN(OpenSession job, OpenArtifacts(f.Get("artifacts"), open));
  ONT_RETURN_IF_ERROR(job.session->ExportModelForInferencing(f.Get("to"), outputs));
  std::printf("exported %s\n", f.Get("to").c_str());
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
