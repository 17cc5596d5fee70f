// `ontrain info`: what an artifacts folder holds and, for a provider list, what will run where. Per graph
// (training, eval, optimizer): the nodes each provider runs, every node that falls back to the CPU and
// why, and the copies a step makes with their bytes; then the bytes of training state per device. Nothing
// is allocated on any device: placement comes from the providers' kernel lists alone
// (engine/session_plan.h, engine/execution_plan.h). --json prints the same as one JSON object.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

#include "checkpoint/checkpoint_io.h"
#include "engine/execution_plan.h"
#include "engine/optimizer.h"
#include "engine/partition.h"
#include "engine/provider_list.h"
#include "engine/session_plan.h"
#include "graph/model_io.h"
#include "graph/tensor_proto.h"
#include "providers/cpu/cpu_provider.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"
#include "tools/cli/session_loader.h"

namespace ontrain {
namespace cli {

namespace {

std::string Json(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += std::string("\\") + c;
    else if (static_cast<unsigned char>(c) < 0x20) out += StrCat("\\u00", "0123456789abcdef"[c >> 4 & 0xf], "0123456789abcdef"[c & 0xf]);
    else out += c;
  }
  return out + "\"";
}

std::string Bytes(double b) {
  const char* unit[] = {"B", "KB", "MB", "GB"};
  int u = 0;
  while (b >= 1000 && u < 3) b /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, unit[u]);
  return buf;
}

// One copy a step makes: the value, its devices and its bytes at the measured batch size.
struct CopyInfo {
  std::string value, from, to;
  int64_t bytes = -1;  // -1: unknown
};

struct GraphReport {
  const char* key;
  ExecutionPlan plan;
  std::vector<CopyInfo> copies;
};

// Bytes of every value of `m` in one run on the CPU provider alone, at batch size `batch`, with zero user
// inputs and gradient buffers and the checkpoint's parameters: what the copies of a step at that batch move.
// Empty (with `why`) when the model cannot run that way (other symbolic dims, inputs that must be data).
std::map<std::string, int64_t> MeasureValueBytes(const Model& m, const CheckpointState& state,
                                                 const SessionPlan& plan, int64_t batch, std::string* why) {
  std::map<std::string, std::string> buffer_of;  // gradient buffer input -> its parameter
  for (const auto& [param, buffer] : plan.grad_buffer) buffer_of[buffer] = param;
  std::map<std::string, int64_t> bytes;
  auto cpu = CpuExecutionProvider::Create({1});
  if (!cpu.ok()) return bytes;
  auto ex = Executor::Create(m, cpu.value().get());
  if (!ex.ok()) {
    *why = ex.status().message();
    return bytes;
  }
  NamedValues feeds;
  for (const std::string& name : ex.value()->required_inputs()) {
    const ValueInfo& v = *m.graph.FindInput(name);
    const Parameter* p = state.FindParameter(name);
    if (p != nullptr) {
      feeds.push_back({name, p->data});
      continue;
    }
    auto buffer = buffer_of.find(name);
    if (buffer != buffer_of.end()) p = state.FindParameter(buffer->second);  // zeros shaped like it
    Shape shape;
    if (p != nullptr) shape = p->data.shape();
    for (size_t d = 0; p == nullptr && d < v.dims.size(); ++d) {
      if (v.dims[d].known()) shape.push_back(v.dims[d].value);
      else if (d == 0) shape.push_back(batch);
      else {
        *why = StrCat("input \"", name, "\" has a symbolic dimension besides the batch: ", v.TypeString());
        return bytes;
      }
    }
    if (!v.is_tensor || v.dtype == DType::kUndefined || (!v.has_shape && p == nullptr)) {
      *why = StrCat("input \"", name, "\" has no static tensor type");
      return bytes;
    }
    auto t = Tensor::Allocate(v.dtype, shape, HostAllocator());
    if (!t.ok()) return bytes;
    std::memset(t->raw_data(), 0, t->SizeInBytes());
    if (v.dtype == DType::kBool && t->NumElements() > 0) t->data<bool>()[0] = true;  // lazy_reset_grad
    feeds.push_back({name, t.value()});
  }
  std::vector<Tensor> out;
  Status s = ex.value()->Run(feeds, {}, &out);
  if (!s.ok()) {
    *why = s.message();
    return bytes;
  }
  const ExecutionPlan& run = ex.value()->plan();
  const std::vector<size_t>& sizes = ex.value()->last_value_bytes();
  for (size_t v = 0; v < sizes.size(); ++v) {
    if (sizes[v] > 0) bytes[run.values[v].name] = static_cast<int64_t>(sizes[v]);
  }
  for (const auto& [name, value] : feeds) {
    if (!value.is_sequence()) bytes[name] = static_cast<int64_t>(value.tensor().SizeInBytes());
  }
  return bytes;
}

// Device providers only plan here: the report needs their kernel lists, not their devices, so it works on
// machines without them.
ProviderListOptions InfoProviderOptions() {
  ProviderListOptions o;
  o.threads = 1;
  o.plan_only = true;
  return o;
}

StatusOr<GraphReport> PlanGraph(const char* key, const Model& m, const std::vector<IExecutionProvider*>& providers,
                                const std::map<std::string, Device>& input_devices,
                                const std::map<std::string, int64_t>& bytes) {
  GraphReport r{key, {}, {}};
  ONT_ASSIGN_OR_RETURN(GraphPartition partition, PartitionGraph(m, providers).WithContext(key));
  ONT_ASSIGN_OR_RETURN(r.plan, PlanExecution(m, std::move(partition), providers, input_devices).WithContext(key));
  for (const PlanStep& s : r.plan.steps) {
    if (s.kind != PlanStep::Kind::kCopy) continue;
    const PlannedValue& dst = r.plan.values[s.outputs[0]];
    CopyInfo c{dst.name, r.plan.values[s.inputs[0]].device.ToString(), dst.device.ToString(), -1};
    auto it = bytes.find(dst.name);
    if (it != bytes.end()) c.bytes = it->second;
    r.copies.push_back(c);
  }
  return r;
}

void PrintText(const GraphReport& r, const Model& m, const std::vector<IExecutionProvider*>& providers) {
  std::map<int, int> count;
  for (const auto& p : r.plan.partition.nodes) count[p.provider]++;
  std::printf("%s graph:", r.key);
  for (const auto& [p, n] : count) std::printf(" %s %d node%s", providers[p]->name().c_str(), n, n == 1 ? "" : "s");
  std::printf("\n");
  const int host = static_cast<int>(providers.size()) - 1;
  for (size_t i = 0; i < m.graph.nodes.size(); ++i) {
    const NodePlacement& p = r.plan.partition.nodes[i];
    if (p.provider != host || p.why_fallback.empty()) continue;
    std::printf("  on %s: %s \"%s\" (%s)\n", providers[host]->name().c_str(), m.graph.nodes[i].op_type.c_str(),
                m.graph.nodes[i].name.c_str(), p.why_fallback.c_str());
  }
  std::printf("  copies per step: %zu\n", r.copies.size());
  for (const CopyInfo& c : r.copies) {
    std::string size = c.bytes < 0 ? "size unknown" : Bytes(static_cast<double>(c.bytes));
    std::printf("    %s %s -> %s  %s\n", c.value.c_str(), c.from.c_str(), c.to.c_str(), size.c_str());
  }
}

std::string JsonGraph(const GraphReport& r, const Model& m, const std::vector<IExecutionProvider*>& providers) {
  std::string s = "{\"nodes\": [";
  for (size_t k = 0; k < r.plan.partition.order.size(); ++k) {
    size_t i = r.plan.partition.order[k];
    const Node& n = m.graph.nodes[i];
    const NodePlacement& p = r.plan.partition.nodes[i];
    s += StrCat(k ? ", " : "", "{\"name\": ", Json(n.name), ", \"op\": ", Json(n.op_type), ", \"domain\": ",
                Json(n.domain), ", \"provider\": ", Json(providers[p.provider]->name()));
    if (!p.why_fallback.empty()) s += ", \"why\": " + Json(p.why_fallback);
    s += "}";
  }
  s += "], \"copies\": [";
  for (size_t k = 0; k < r.copies.size(); ++k) {
    const CopyInfo& c = r.copies[k];
    s += StrCat(k ? ", " : "", "{\"value\": ", Json(c.value), ", \"from\": ", Json(c.from), ", \"to\": ", Json(c.to),
                ", \"bytes\": ", c.bytes < 0 ? std::string("null") : std::to_string(c.bytes), "}");
  }
  return s + "]}";
}

// Bytes of state per device: parameters, gradient buffers and moments.
std::map<std::string, int64_t> StateBytes(const CheckpointState& state, const SessionPlan& plan, bool adamw,
                                          bool has_optimizer) {
  std::map<std::string, int64_t> bytes;
  for (const std::string& p : plan.params) {
    int64_t b = static_cast<int64_t>(state.parameters.at(p).data.SizeInBytes());
    bytes[plan.devices.at(p).ToString()] += b;
    if (!state.parameters.at(p).requires_grad) continue;
    bytes[plan.gradients_device.ToString()] += b;
    if (has_optimizer) bytes[plan.moments_device.ToString()] += b * (adamw ? 2 : 1);
  }
  return bytes;
}

// Everything `info` prints: the folder's models and state, where the state goes, and each graph's plan.
struct InfoPlan {
  Model train;
  std::optional<Model> eval, optim;
  CheckpointState state;
  SessionPlan session;
  std::optional<OptimizerModelInfo> optimizer;
  std::vector<std::pair<const Model*, GraphReport>> reports;  // training, eval, optimizer
  std::string why_unknown;                                    // why some copy sizes are unknown
  std::map<std::string, int64_t> state_bytes;                 // by device
};

Status MakeInfoPlan(const std::string& dir, const std::vector<IExecutionProvider*>& list, int64_t batch, InfoPlan* p) {
  // 1. The folder's models (prepared for planning over `list`, as the executor does) and checkpoint.
  ONT_ASSIGN_OR_RETURN(p->train, LoadModel(dir + "/training_model.onnx"));
  if (FileExists(dir + "/eval_model.onnx")) {
    ONT_ASSIGN_OR_RETURN(p->eval, LoadModel(dir + "/eval_model.onnx"));
  }
  if (FileExists(dir + "/optimizer_model.onnx")) {
    ONT_ASSIGN_OR_RETURN(p->optim, LoadModel(dir + "/optimizer_model.onnx"));
  }
  ONT_ASSIGN_OR_RETURN(p->state, LoadCheckpoint(dir + "/checkpoint"));
  for (Model* m : {&p->train, p->eval ? &*p->eval : nullptr, p->optim ? &*p->optim : nullptr}) {
    if (m) PrepareForPlanning(m, list);
  }
  // 2. Where the state goes, and each graph's plan for it.
  const Model* eval = p->eval ? &*p->eval : nullptr;
  const Model* optim = p->optim ? &*p->optim : nullptr;
  ONT_ASSIGN_OR_RETURN(p->session, PlanSession(p->train, eval, optim, p->state, list));
  const SessionPlan& plan = p->session;
  std::map<std::string, int64_t> bytes = MeasureValueBytes(p->train, p->state, plan, batch, &p->why_unknown);
  ONT_ASSIGN_OR_RETURN(GraphReport tr, PlanGraph("training", p->train, list, plan.devices, bytes));
  p->reports.push_back({&p->train, std::move(tr)});
  if (eval) {
    bytes = MeasureValueBytes(*eval, p->state, plan, batch, &p->why_unknown);
    ONT_ASSIGN_OR_RETURN(GraphReport er, PlanGraph("eval", *eval, list, plan.devices, bytes));
    p->reports.push_back({eval, std::move(er)});
  }
  if (optim) {
    ONT_ASSIGN_OR_RETURN(p->optimizer, ReadOptimizerModel(*optim));
    OptimizerOptions oo{list, plan.trainable.empty() ? Device() : plan.devices.at(plan.trainable[0]),
                        plan.gradients_device, plan.moments_device};
    int64_t seq = 0;  // every sequence input holds one tensor per trainable parameter
    for (const std::string& t : plan.trainable) seq += static_cast<int64_t>(p->state.parameters.at(t).data.SizeInBytes());
    bytes = {{"params", seq}, {"gradients", seq}, {"first_order_moments", seq}, {"second_order_moments", seq}};
    ONT_ASSIGN_OR_RETURN(GraphReport orp, PlanGraph("optimizer", *optim, list, OptimizerInputDevices(oo), bytes));
    p->reports.push_back({optim, std::move(orp)});
  }
  bool adamw = p->optimizer && p->optimizer->kind == OptimizerKind::kAdamW;
  p->state_bytes = StateBytes(p->state, plan, adamw, optim != nullptr);
  return Status::OK();
}

void PrintJson(const InfoPlan& p, const std::vector<IExecutionProvider*>& list, int64_t batch) {
  std::string s = "{\"providers\": [";
  for (size_t i = 0; i < list.size(); ++i) s += (i ? ", " : "") + Json(list[i]->name());
  s += "]";
  for (const char* key : {"training", "eval", "optimizer"}) {
    s += StrCat(", ", Json(key), ": ");
    auto it = std::find_if(p.reports.begin(), p.reports.end(),
                           [&](const auto& r) { return std::string(r.second.key) == key; });
    s += it == p.reports.end() ? "null" : JsonGraph(it->second, *it->first, list);
  }
  s += StrCat(", \"batch_size\": ", batch, ", \"state_bytes\": {");
  bool first = true;
  for (const auto& [dev, b] : p.state_bytes) s += StrCat(first ? "" : ", ", Json(dev), ": ", b), first = false;
  std::printf("%s}}\n", s.c_str());
}

void PrintSummary(const InfoPlan& p, const std::vector<IExecutionProvider*>& list, int64_t batch) {
  int64_t trainable = 0, frozen = 0, total = 0;
  for (const auto& [name, param] : p.state.parameters) {
    total += static_cast<int64_t>(param.data.SizeInBytes());
    (param.requires_grad ? trainable : frozen) += param.data.NumElements();
  }
  std::printf("parameters: %lld trainable, %lld frozen, %lld bytes\n", static_cast<long long>(trainable),
              static_cast<long long>(frozen), static_cast<long long>(total));
  auto names = [&](const char* what, const std::vector<std::string>& v) {
    std::printf("%s:", what);
    for (const std::string& n : v) {
      const ValueInfo* info = p.train.graph.FindInput(n);
      if (!info) info = p.train.graph.FindOutput(n);
      std::printf(" %s%s", n.c_str(), info ? (" " + info->TypeString()).c_str() : "");
    }
    std::printf("\n");
  };
  names("training inputs", p.session.user_inputs);
  names("training outputs", p.session.user_outputs);
  std::map<std::string, int> ops;
  for (const Node& n : p.train.graph.nodes) ops[(n.domain.empty() ? "" : n.domain + "::") + n.op_type]++;
  std::printf("training graph ops:");
  for (const auto& [op, count] : ops) std::printf(" %s x%d", op.c_str(), count);
  std::printf("\n");
  if (p.optimizer) {
    auto g = p.state.optimizer_groups.find("group0");
    std::printf("optimizer: %s, step %lld\n", p.optimizer->kind == OptimizerKind::kAdamW ? "AdamW" : "SGD",
                static_cast<long long>(g == p.state.optimizer_groups.end() ? 0 : g->second.step));
  }
  std::printf("providers:");
  for (const IExecutionProvider* pr : list) std::printf(" %s", pr->name().c_str());
  std::printf("\ncopy sizes at batch size %lld%s\n", static_cast<long long>(batch),
              p.why_unknown.empty() ? "" : (" (some unknown: " + p.why_unknown + ")").c_str());
  for (const auto& [m, r] : p.reports) PrintText(r, *m, list);
  std::printf("state:");
  for (const auto& [dev, b] : p.state_bytes) std::printf(" %s %s", dev.c_str(), Bytes(static_cast<double>(b)).c_str());
  std::printf("\n");
}

}  // namespace

Status Info(const std::vector<std::string>& args) {
  ONT_ASSIGN_OR_RETURN(Flags f, Flags::Parse(args, {"artifacts", "provider", "batch-size"}, {"json"}));
  ONT_ASSIGN_OR_RETURN(int64_t batch, f.GetInt("batch-size", 64));
  if (batch <= 0) return InvalidArgument("--batch-size must be > 0");
  std::string dir = f.Get("artifacts");
  if (dir.empty()) return InvalidArgument("name the artifacts folder with --artifacts DIR");
  ONT_ASSIGN_OR_RETURN(ProviderList providers, CreateProviders(f.Get("provider", "cpu"), InfoProviderOptions()).WithContext("--provider"));
  InfoPlan plan;
  ONT_RETURN_IF_ERROR(MakeInfoPlan(dir, providers.ordered, batch, &plan));
  if (f.Has("json")) PrintJson(plan, providers.ordered, batch);
  else PrintSummary(plan, providers.ordered, batch);
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
