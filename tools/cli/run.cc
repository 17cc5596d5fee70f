// `ontrain run`: inference of any ONNX model the engine supports, inputs and outputs as .npz by name.
#include <cstdio>

#include "engine/executor.h"
#include "graph/model_io.h"
#include "engine/provider_list.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/npz.h"

namespace ontrain {
namespace cli {

Status Run(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"model", "inputs", "outputs", "provider", "threads"}, {}));
  if (!f.Has("model") || !f.Has("inputs")) return InvalidArgument("run needs --model FILE and --inputs FILE.npz");
  ONT_ASSIGN_OR_RETURN(int64_t threads, f.GetInt("threads", 0));
  ONT_ASSIGN_OR_RETURN(ProviderList providers,
                       CreateProviders(f.Get("provider", "cpu"), static_cast<int>(threads)).WithContext("--provider"));
  ONT_ASSIGN_OR_RETURN(Model model, LoadModel(f.Get("model")));
  ONT_ASSIGN_OR_RETURN(auto inputs, LoadNpz(f.Get("inputs")));
  ONT_ASSIGN_OR_RETURN(auto ex, Executor::Create(model, {providers.ordered, {}}));
  NamedValues feeds(inputs.begin(), inputs.end());
  std::vector<Tensor> outs;
  ONT_RETURN_IF_ERROR(ex->Run(feeds, ex->output_names(), &outs));
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t i = 0; i < outs.size(); ++i) {
    ONT_ASSIGN_OR_RETURN(Tensor t, ex->ToHost(outs[i]));
    std::printf("%s: %s%s", ex->output_names()[i].c_str(), DTypeName(t.dtype()), ShapeToString(t.shape()).c_str());
    if (t.dtype() == DType::kFloat32 && t.NumElements() > 0) {
      std::printf("  [");
      for (int64_t k = 0; k < std::min<int64_t>(6, t.NumElements()); ++k) std::printf("%s%.6g", k ? ", " : "", t.data<float>()[k]);
      std::printf(t.NumElements() > 6 ? ", ...]" : "]");
    }
    std::printf("\n");
    named.push_back({ex->output_names()[i], t.Clone()});
  }
  if (f.Has("outputs")) {
    ONT_RETURN_IF_ERROR(SaveNpz(named, f.Get("outputs")));
    std::printf("wrote %s\n", f.Get("outputs").c_str());
  }
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
