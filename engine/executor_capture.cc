// Executor: recording a run on the device and replaying it (graph capture; declared in executor.h).
//
// At fixed shapes a graph queues the same device work at every run, apart from the data it reads. Once a
// memory plan has run eagerly kWarmRuns times (so that every kernel has made its workspaces and library
// choices), the next run at it is recorded by the device provider (IExecutionProvider::BeginCapture) and
// later runs replay the recording.
//
// Why a replay computes what an eager run would:
// - Device memory is where it was: values in the plan's arenas, constants in the executor, and fed device
//   tensors at the addresses they had when recorded (those addresses are part of the replay key).
// - What the device work took from the host while recorded is frozen into it, so it must not change:
//   constants, shapes, and what host nodes compute from them ("static" values); and the small fed host
//   inputs that nodes read directly (a training step's lazy_reset_grad flag, an optimizer's learning rate),
//   whose bytes are part of the replay key: other bytes make another recording, up to kMaxCaptures per plan,
//   after which runs at that plan stay eager. A key is recorded only once one of the last kRecentKeys eager
//   runs had it too, so that an input that changes at every run (an optimizer's step count) keeps its graph
//   eager without recording anything.
// - Host inputs copied to the device are copied from staging memory the recording owns (the provider's
//   staging allocator); a replay first rewrites it from the new feeds.
// - Host nodes do not run at a replay: their outputs are static, and the recording keeps the graph outputs.
// Never recorded: graphs that copy device results to the host in the middle of a run, run nodes on two
// devices, update host data in place, or have a device kernel that changes at every run
// (OpKernel::capturable: random draws). A run on other shapes drops the recordings of the previous shapes
// (kernels may have regrown the workspaces those recordings name). A recording that fails leaves its shapes
// eager and the run is redone eagerly.
#include <cstring>

#include "engine/executor_internal.h"

namespace ontrain {
namespace {

constexpr int kWarmRuns = 2;              // eager runs at a plan before it is recorded
constexpr size_t kMaxCaptures = 8;        // recordings kept per plan (distinct replay keys)
constexpr size_t kMaxKeyedBytes = 64;     // a fed host input read on the host keys a recording up to this size
constexpr size_t kRecentKeys = 4;         // eager runs whose keys are remembered

}  // namespace

void Executor::AnalyseCapture() {
  capture_provider_ = -1;
  keyed_inputs_.clear();
  device_inputs_.clear();
  capture_outputs_.clear();
  auto refuse = [&](std::string why) { capture_refusal_ = std::move(why); };
  // 1. The one device provider that runs kernels, and that can record them.
  int device = -1;
  for (const auto& st : steps_) {
    if (st->plan.kind != PlanStep::Kind::kKernel || providers_[st->plan.provider]->device().is_host()) continue;
    if (device >= 0 && device != st->plan.provider) {
      return refuse(StrCat("its nodes run on two devices (", providers_[device]->name(), " and ",
                           providers_[st->plan.provider]->name(), ")"));
    }
    device = st->plan.provider;
  }
  if (device < 0) return refuse("every node runs on the host");
  if (!providers_[device]->can_capture()) {
    return refuse(StrCat(providers_[device]->name(), " does not record runs (its graph capture is off)"));
  }
  const Device dev = providers_[device]->device();
  // 2. What each value is at a replay: fed on the host, static (the same at every run at these shapes), or
  //    made on the device during the run.
  enum Kind : uint8_t { kRunTime, kStatic, kFedHost };
  const size_t nv = plan_.values.size();
  std::vector<uint8_t> kind(nv, kRunTime);
  std::vector<bool> input(nv, false), keyed(nv, false);
  for (const ValueInfo& in : graph_.inputs) {
    int v = plan_.ids.at(in.name);
    input[v] = true;
    const Device home = plan_.values[v].device;
    if (home.is_host()) {
      kind[v] = kFedHost;
    } else if (home == dev) {
      device_inputs_.push_back(v);
    } else {
      return refuse(StrCat("input \"", in.name, "\" is fed on ", home.ToString(), ", not on ", dev.ToString()));
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    if (!input[v] && initial_values_[v].defined()) kind[v] = kStatic;
  }
  for (const auto& stp : steps_) {
    const Step& st = *stp;
    if (st.plan.kind == PlanStep::Kind::kCopy) {
      const PlannedValue &src = plan_.values[st.plan.inputs[0]], &dst = plan_.values[st.plan.outputs[0]];
      if (dst.device.is_host()) {
        return refuse(StrCat("it copies \"", src.name, "\" from ", src.device.ToString(),
                             " to the host in the middle of a run"));
      }
      if (!src.device.is_host() || kind[st.plan.inputs[0]] == kRunTime) {
        return refuse(StrCat("it copies \"", src.name, "\" to ", dst.device.ToString(), " from ", src.device.ToString()));
      }
      continue;
    }
    const bool on_host = providers_[st.plan.provider]->device().is_host();
    if (!on_host && st.kernel != nullptr && !st.kernel->capturable()) {
      return refuse(StrCat(st.node->Describe(), " cannot be recorded: its kernel changes at every run"));
    }
    NodePlacement place;
    place.provider = st.plan.provider;
    place.def = st.def;
    for (size_t i = 0; i < st.plan.inputs.size(); ++i) {
      const int v = st.plan.inputs[i];
      if (v < 0) continue;
      const InputUse use = UseOfInput(place, *st.node, static_cast<int>(i));
      if (use == InputUse::kNone || use == InputUse::kShapeOnly || !plan_.values[v].device.is_host()) continue;
      if (on_host && use == InputUse::kInPlace) {
        return refuse(StrCat(st.node->Describe(), " updates \"", plan_.values[v].name, "\" on the host"));
      }
      if (kind[v] == kStatic) continue;
      if (kind[v] == kFedHost) {
        keyed[v] = true;
        continue;
      }
      return refuse(StrCat(st.node->Describe(), " reads \"", plan_.values[v].name,
                           "\" on the host, and the run computes it"));
    }
    if (on_host) {
      for (int v : st.plan.outputs) {
        if (v >= 0) kind[v] = kStatic;
      }
    }
  }
  for (size_t v = 0; v < nv; ++v) {
    if (keyed[v]) keyed_inputs_.push_back(static_cast<int>(v));
    if (keep_[v] && !input[v]) capture_outputs_.push_back(static_cast<int>(v));
  }
  capture_provider_ = device;
}

void Executor::ChooseCapture(MemoryArenas* arenas, bool allowed, Capture** replay, bool* record) {
  *replay = nullptr;
  *record = false;
  if (arenas != capture_plan_) {
    // Another plan: the kernels may regrow buffers that the old recordings name.
    for (auto& [key, plan] : plans_) {
      plan->captures.clear();
      plan->eager_runs = 0;
      plan->recent_keys.clear();
      plan->next_recent = 0;
    }
    capture_plan_ = arenas;
  }
  if (!allowed || arenas == nullptr || !arenas->valid) return;
  last_choice_ = CaptureChoice::kRefused;
  if (!arenas->no_capture.empty()) return;
  if (capture_provider_ == kCaptureNotAnalysed) AnalyseCapture();  // a plan exists: every kernel has been made
  if (capture_provider_ < 0 || !MakeReplayKey(arenas)) return;
  for (auto& c : arenas->captures) {
    if (c->key == replay_key_) {
      *replay = c.get();
      last_choice_ = CaptureChoice::kReplay;
      return;
    }
  }
  bool seen = false;
  for (const std::string& k : arenas->recent_keys) seen = seen || k == replay_key_;
  if (arenas->recent_keys.size() < kRecentKeys) {
    arenas->recent_keys.push_back(replay_key_);
  } else {
    arenas->recent_keys[arenas->next_recent].assign(replay_key_);  // reuses the string's memory
    arenas->next_recent = (arenas->next_recent + 1) % kRecentKeys;
  }
  if (arenas->eager_runs < kWarmRuns || !seen) {
    last_choice_ = arenas->eager_runs < kWarmRuns ? CaptureChoice::kWarmUp : CaptureChoice::kUnrepeated;
    return;
  }
  if (arenas->captures.size() >= kMaxCaptures) {
    arenas->no_capture = StrCat("more than ", kMaxCaptures, " recordings at these shapes: ", ChangingInputs(),
                                " keep changing");
    arenas->captures.clear();
    return;
  }
  *record = true;
  last_choice_ = CaptureChoice::kRecord;
}

std::string Executor::ChangingInputs() const {
  std::string names;
  for (int v : keyed_inputs_) names += (names.empty() ? "\"" : ", \"") + plan_.values[v].name + "\"";
  if (names.empty()) return "the device inputs' addresses";
  return StrCat("the host inputs it reads (", names, ")", device_inputs_.empty() ? "" : " or the device inputs' addresses");
}

bool Executor::MakeReplayKey(MemoryArenas* arenas) {
  replay_key_.clear();
  for (int v : keyed_inputs_) {
    const Value& val = values_[v];
    if (!val.defined()) {
      replay_key_.push_back('-');
      continue;
    }
    if (val.is_sequence() || val.tensor().SizeInBytes() > kMaxKeyedBytes) {
      arenas->no_capture = StrCat("input \"", plan_.values[v].name, "\" is read on the host and is ",
                                  val.is_sequence() ? "a sequence" : StrCat(val.tensor().SizeInBytes(), " bytes"),
                                  " (a recording keys on at most ", kMaxKeyedBytes, " bytes)");
      return false;
    }
    const Tensor& t = val.tensor();
    replay_key_.push_back('k');
    replay_key_.append(static_cast<const char*>(t.raw_data()), t.SizeInBytes());
  }
  auto add_address = [&](const Tensor& t) {
    const void* p = t.raw_data();
    replay_key_.append(reinterpret_cast<const char*>(&p), sizeof p);
  };
  for (int v : device_inputs_) {
    const Value& val = values_[v];
    if (!val.defined()) {
      replay_key_.push_back('-');
    } else if (val.is_sequence()) {
      replay_key_.push_back('s');
      for (const Tensor& t : *val.sequence()) add_address(t);
    } else {
      replay_key_.push_back('t');
      add_address(val.tensor());
    }
  }
  return true;
}

Status Executor::Record(MemoryArenas* arenas) {
  IExecutionProvider* p = providers_[capture_provider_];
  auto c = std::make_unique<Capture>();
  c->key = replay_key_;
  ONT_RETURN_IF_ERROR(p->BeginCapture());
  recording_ = c.get();
  Status s = RunSteps(arenas, nullptr);
  recording_ = nullptr;
  if (!s.ok()) {
    p->AbortCapture();
    return s;
  }
  ONT_ASSIGN_OR_RETURN(c->work, p->EndCapture());
  if (!arenas->valid) return Internal("the recorded run needed memory outside its plan");
  // Nothing recorded has run yet: the first replay is this run.
  ONT_RETURN_IF_ERROR(c->work->Replay());
  for (int v : capture_outputs_) {
    const Value& val = values_[v];
    if (!val.defined()) continue;
    if (val.is_sequence()) {
      TensorSequence items;
      for (const Tensor& t : *val.sequence()) items.push_back(t.device().is_host() ? t.Clone() : t);
      c->outputs.push_back({v, Value::Sequence(std::move(items))});
    } else {
      const Tensor& t = val.tensor();
      c->outputs.push_back({v, Value(t.device().is_host() ? t.Clone() : t)});
    }
  }
  arenas->captures.push_back(std::move(c));
  ++capture_stats_.recorded;
  return Status::OK();
}

Status Executor::Replay(Capture& c) {
  ONT_RETURN_IF_ERROR(c.work->WaitForReplay());
  for (auto& [v, staging] : c.refresh) {
    const Value& val = values_[v];
    if (!val.defined() || val.is_sequence() || val.tensor().SizeInBytes() != staging.SizeInBytes()) {
      return Internal("input \"", plan_.values[v].name, "\" does not fit its recorded staging (",
                      staging.SizeInBytes(), " bytes)");
    }
    if (staging.SizeInBytes() > 0) std::memcpy(staging.raw_data(), val.tensor().raw_data(), staging.SizeInBytes());
  }
  ONT_RETURN_IF_ERROR(c.work->Replay());
  for (const auto& [v, val] : c.outputs) values_[v] = val;
  return Status::OK();
}

std::string Executor::CaptureStatus() const {
  if (capture_provider_ == kCaptureNotAnalysed) {
    return capture_stats_.runs == 0 ? "no run yet" : StrCat("not decided (", capture_stats_.runs, " runs so far)");
  }
  if (capture_provider_ < 0) return "not recorded: " + capture_refusal_;
  std::string s = StrCat("recorded ", capture_stats_.recorded, ", replayed ", capture_stats_.replayed, " of ",
                         capture_stats_.runs, " runs");
  if (last_ != nullptr && !last_->no_capture.empty()) return s + "; not recorded at the last shapes: " + last_->no_capture;
  switch (last_choice_) {
    case CaptureChoice::kReplay: return s + "; the last run replayed";
    case CaptureChoice::kRecord: return s + "; the last run was recorded";
    case CaptureChoice::kWarmUp: return s + "; the last run was a warm-up run at its shapes";
    case CaptureChoice::kUnrepeated:
      return s + StrCat("; the last run was not recorded: ", ChangingInputs(), " have not repeated in ", kRecentKeys,
                        " runs");
    default: return s;
  }
}

}  // namespace ontrain
