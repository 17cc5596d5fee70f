// `ontrain generate`: training artifacts from a forward ONNX model (or a built-in one).
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/kernel_registry.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"

namespace ontrain {
namespace cli {
namespace {

// Which initializers became trainable parameters, frozen parameters or constants, and why: ONNX cannot tell a
// parameter from a buffer, so the user sees the decision. Each list stops after kShown names.
void PrintInitializerDecisions(const std::vector<InitializerDecision>& decisions) {
  constexpr size_t kShown = 24;
  using Kind = InitializerDecision::Kind;
  const std::pair<Kind, const char*> kinds[] = {
      {Kind::kTrainable, "trainable"}, {Kind::kFrozen, "frozen (in the checkpoint, not trained)"},
      {Kind::kConstant, "constant (kept in the models)"}};
  for (const auto& [kind, label] : kinds) {
    size_t count = 0;
    int64_t values = 0;
    for (const InitializerDecision& d : decisions) {
      if (d.kind != kind) continue;
      ++count;
      values += d.elements;
    }
    if (count == 0) continue;
    std::printf("%s: %zu initializer%s, %lld values\n", label, count, count == 1 ? "" : "s",
                static_cast<long long>(values));
    std::string line = " ";
    size_t shown = 0;
    for (const InitializerDecision& d : decisions) {
      if (d.kind != kind) continue;
      std::string item = d.why.empty() ? d.name : d.name + " (" + d.why + ")";
      if (shown++ == kShown) item = "... and " + std::to_string(count - kShown) + " more";
      if (line.size() > 1 && line.size() + item.size() + 2 > 110) {
        std::printf("%s\n", line.c_str());
        line = " ";
      }
      line += (line.size() > 1 ? ", " : " ") + item;
      if (shown > kShown) break;
    }
    std::printf("%s\n", line.c_str());
  }
  std::printf("--requires-grad a,b trains exactly the named initializers; --frozen c,d keeps the named ones in "
              "the checkpoint without training them\n");
}

// Ops of the generated models that the CPU provider has no kernel for, each with up to three of its nodes:
// the whole gap in one line, before a session would stop at the first of them.
void WarnMissingKernels(const Artifacts& a) {
  auto registry = KernelRegistry::Create(CpuKernelList());
  if (!registry.ok()) return;
  std::map<std::string, std::vector<std::string>> missing;
  for (const Model* m : {&a.training, &a.eval}) {
    for (const Node& n : m->graph.nodes) {
      if (registry->HasOp(n.domain, n.op_type, m->OpsetFor(n.domain))) continue;
      const std::string op = (n.domain.empty() ? "" : n.domain + "::") + n.op_type + "-" + std::to_string(m->OpsetFor(n.domain));
      auto& nodes = missing[op];
      if (std::find(nodes.begin(), nodes.end(), n.name) == nodes.end()) nodes.push_back(n.name);
    }
  }
  if (missing.empty()) return;
  std::string list;
  for (const auto& [op, nodes] : missing) {
    list += (list.empty() ? "" : "; ") + op + " (";
    for (size_t k = 0; k < nodes.size() && k < 3; ++k) list += (k ? ", \"" : "\"") + nodes[k] + "\"";
    list += nodes.size() > 3 ? ", ...)" : ")";
  }
  std::printf("warning: the CPU provider has no kernel for %zu op%s of these models: %s; a session on the CPU "
              "will refuse them\n", missing.size(), missing.size() == 1 ? "" : "s", list.c_str());
}

}  // namespace

Status Generate(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"model", "builtin", "out", "loss", "loss-output", "requires-grad",
                                                    "frozen", "optimizer", "beta1", "beta2", "eps", "weight-decay",
                                                    "adam-mode", "extra-outputs", "label-dtype", "seed", "reduction",
                                                    "ignore-index", "bn-running-stats"},
                                             {"no-fuse"}));
  if (!f.Has("out")) return InvalidArgument("generate needs --out DIR");
  if (f.Has("model") == f.Has("builtin")) return InvalidArgument("generate needs exactly one of --model FILE or --builtin mlp|cnn");
  Model forward;
  if (f.Has("model")) {
    ONT_ASSIGN_OR_RETURN(forward, LoadModel(f.Get("model")));
  } else {
    ONT_ASSIGN_OR_RETURN(int64_t seed, f.GetInt("seed", 0));
    std::string b = f.Get("builtin");
    if (b == "mlp") forward = MakeMlpClassifier(784, {256}, 10, static_cast<uint32_t>(seed));
    else if (b == "cnn") forward = MakeCnnClassifier(28, 10, static_cast<uint32_t>(seed));
    else return InvalidArgument("unknown built-in model \"", b, "\"; expected mlp or cnn");
  }
  ArtifactOptions o;
  if (f.Has("loss") && f.Has("loss-output")) return InvalidArgument("--loss and --loss-output exclude each other");
  if (f.Has("loss")) {
    ONT_ASSIGN_OR_RETURN(o.loss, ParseLossKind(f.Get("loss")));
  }
  if (f.Has("loss-output")) {
    o.loss = LossKind::kOutput;
    o.loss_output = f.Get("loss-output");
  }
  o.requires_grad = f.GetList("requires-grad");
  o.frozen = f.GetList("frozen");
  o.extra_outputs = f.GetList("extra-outputs");
  std::string opt = f.Get("optimizer", "AdamW");
  if (opt == "AdamW") o.optimizer = OptimizerKind::kAdamW;
  else if (opt == "SGD") o.optimizer = OptimizerKind::kSGD;
  else return InvalidArgument("unknown optimizer \"", opt, "\"; expected AdamW or SGD");
  ONT_ASSIGN_OR_RETURN(double b1, f.GetDouble("beta1", o.adamw.alpha));
  ONT_ASSIGN_OR_RETURN(double b2, f.GetDouble("beta2", o.adamw.beta));
  ONT_ASSIGN_OR_RETURN(double eps, f.GetDouble("eps", o.adamw.epsilon));
  ONT_ASSIGN_OR_RETURN(double wd, f.GetDouble("weight-decay", o.adamw.weight_decay));
  ONT_ASSIGN_OR_RETURN(int64_t mode, f.GetInt("adam-mode", o.adamw.adam_mode));
  if (mode != 0 && mode != 1) return InvalidArgument("--adam-mode must be 0 or 1");
  o.adamw = {static_cast<float>(b1), static_cast<float>(b2), static_cast<float>(eps), static_cast<float>(wd), mode, true};
  o.reduction = f.Get("reduction", "mean");
  if (f.Has("ignore-index")) {
    ONT_ASSIGN_OR_RETURN(o.ignore_index, f.GetInt("ignore-index", -100));
    o.has_ignore_index = true;
  }
  ONT_ASSIGN_OR_RETURN(o.bn_running_stats, ParseBnRunningStats(f.Get("bn-running-stats", "pytorch")));
  o.fuse = !f.Has("no-fuse");
  std::string ld = f.Get("label-dtype", "int64");
  if (ld == "int32") o.label_dtype = DType::kInt32;
  else if (ld != "int64") return InvalidArgument("--label-dtype must be int32 or int64");
  ONT_ASSIGN_OR_RETURN(Artifacts a, GenerateArtifacts(forward, o));
  ONT_RETURN_IF_ERROR(WriteArtifacts(a, f.Get("out")));
  size_t trainable = 0, frozen = 0;
  for (const auto& kv : a.checkpoint.parameters) (kv.second.requires_grad ? trainable : frozen) += kv.second.data.NumElements();
  std::printf("wrote %s/{training_model.onnx, eval_model.onnx, optimizer_model.onnx, checkpoint}: %zu trainable and "
              "%zu frozen parameters, %zu training nodes\n",
              f.Get("out").c_str(), trainable, frozen, a.training.graph.nodes.size());
  PrintInitializerDecisions(a.initializers);
  WarnMissingKernels(a);
  if (a.fused.layer_norms + a.fused.gelus + a.fused.matmul_transposes > 0) {
    std::printf("fused in the training model: %d LayerNorm and %d GELU sequences, %d MatMul(x, Transpose(W)) (--no-fuse "
                "keeps them as exported)\n",
                a.fused.layer_norms, a.fused.gelus, a.fused.matmul_transposes);
  }
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
