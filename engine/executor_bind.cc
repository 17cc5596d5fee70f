// Executor::Bind: feeds checked against the graph's inputs (dtype, static dims, symbolic dims bound
// consistently, sequences on their device) and the key of their shapes, which selects the memory plan;
// Executor::BuildArenas, which makes that plan from a run's sizes and lifetimes; and the accumulation buffer
// a gradient is written into on a run (FindAccumulatorTargets, found once at creation).
#include <algorithm>
#include <charconv>

#include "engine/executor.h"
#include "engine/executor_internal.h"
#include "engine/memory_plan.h"
#include "graph/value_types.h"

namespace ontrain {

namespace {

// Checks a fed tensor against its graph input: dtype, static dims, and symbolic dims bound consistently
// across the feeds (`symbols`).
Status CheckTensorFeed(const ValueInfo& info, const Tensor& t, std::vector<std::pair<const std::string*, int64_t>>* symbols) {
  const std::string& name = info.name;
  if (info.dtype != DType::kUndefined && t.dtype() != info.dtype) {
    return InvalidArgument("input \"", name, "\": expected dtype ", DTypeName(info.dtype), ", got ",
                           DTypeName(t.dtype()));
  }
  if (!info.has_shape) return Status::OK();
  bool ok = info.dims.size() == t.shape().size();
  for (size_t d = 0; ok && d < info.dims.size(); ++d) {
    const Dim& dim = info.dims[d];
    if (dim.known()) {
      ok = dim.value == t.dim(d);
    } else if (!dim.param.empty()) {
      auto it = std::find_if(symbols->begin(), symbols->end(), [&](const auto& s) { return *s.first == dim.param; });
      if (it == symbols->end()) {
        symbols->push_back({&dim.param, t.dim(d)});
      } else if (it->second != t.dim(d)) {
        return InvalidArgument("input \"", name, "\": dimension ", d, " (\"", dim.param, "\") is ", t.dim(d),
                               " but another input bound \"", dim.param, "\" to ", it->second);
      }
    }
  }
  if (!ok) {
    return InvalidArgument("input \"", name, "\": expected shape ", info.TypeString(), ", got ",
                           DTypeName(t.dtype()), ShapeToString(t.shape()));
  }
  return Status::OK();
}

// Checks a fed sequence: every item of the input's element type, on the planned device.
Status CheckSequenceFeed(const ValueInfo& info, const TensorSequence& items, Device home) {
  if (info.is_tensor) return InvalidArgument("input \"", info.name, "\" is a tensor, but a sequence was fed");
  DType elem = ElementDType(info);
  for (const Tensor& item : items) {
    if (elem != DType::kUndefined && item.dtype() != elem) {
      return InvalidArgument("input \"", info.name, "\": expected a sequence of ", DTypeName(elem),
                             ", got an item of ", DTypeName(item.dtype()));
    }
    if (item.device() != home) {
      return InvalidArgument("input \"", info.name, "\" has an item on ", item.device().ToString(),
                             " but the plan expects it on ", home.ToString());
    }
  }
  return Status::OK();
}

}  // namespace

namespace {
// Appends "dtype[d0,d1,...]" to a run's key in place, so that the key's memory is reused from run to run.
void AppendKey(std::string* key, const Tensor& t) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, static_cast<int>(t.dtype()));
  key->append(buf, r.ptr).push_back('[');
  for (size_t d = 0; d < t.shape().size(); ++d) {
    r = std::to_chars(buf, buf + sizeof buf, t.shape()[d]);
    if (d > 0) key->push_back(',');
    key->append(buf, r.ptr);
  }
  key->push_back(']');
}
}  // namespace

Status Executor::Bind(const NamedValues& feeds) {
  values_ = initial_values_;
  key_.clear();
  symbols_.clear();  // symbolic dim -> size bound by an earlier feed (kept to reuse its memory)
  if (feed_slots_.size() < feeds.size()) feed_slots_.resize(feeds.size());
  for (size_t k = 0; k < feeds.size(); ++k) {
    const auto& [name, value] = feeds[k];
    FeedSlot& slot = feed_slots_[k];
    if (slot.info == nullptr || slot.name != name) {
      const ValueInfo* found = graph_.FindInput(name);
      if (found == nullptr) {
        std::string expected;
        for (const std::string& r : required_inputs_) expected += (expected.empty() ? "" : ", ") + r;
        return InvalidArgument("feed \"", name, "\" is not an input of the graph; expected: ", expected);
      }
      slot.name = name;
      slot.info = found;
      slot.v = plan_.ids.at(name);
    }
    const ValueInfo* info = slot.info;
    if (!value.defined()) return InvalidArgument("feed \"", name, "\" is an empty value");
    const int v = slot.v;
    Device home = plan_.values[v].device;
    // The key names each feed by its value id (the same feeds give the same key).
    char id[16];
    const auto idr = std::to_chars(id, id + sizeof id, v);
    if (value.is_sequence()) {
      ONT_RETURN_IF_ERROR(CheckSequenceFeed(*info, *value.sequence(), home));
      key_.append(id, idr.ptr).append(":seq");
      for (const Tensor& item : *value.sequence()) AppendKey(&key_, item);
      key_ += ";";
    } else {
      if (!info->is_tensor) return InvalidArgument("input \"", name, "\" is a sequence, but a tensor was fed");
      const Tensor& t = value.tensor();
      ONT_RETURN_IF_ERROR(CheckTensorFeed(*info, t, &symbols_));
      if (t.device() != home) {
        return InvalidArgument("input \"", name, "\" is on ", t.device().ToString(), " but the plan expects it on ",
                               home.ToString());
      }
      key_.append(id, idr.ptr).append(":");
      AppendKey(&key_, t);
      key_ += ";";
    }
    values_[v] = value;
  }
  for (size_t i = 0; i < required_ids_.size(); ++i) {
    if (!values_[required_ids_[i]].defined()) {
      const std::string& r = required_inputs_[i];
      const ValueInfo* info = graph_.FindInput(r);
      return InvalidArgument("missing feed for input \"", r, "\" (", info->TypeString(), ")");
    }
  }
  return Status::OK();
}

// A gradient accumulator with overwrite set, InPlaceAccumulatorV2(buffer, gradient, true), copies the
// gradient into the session's buffer: 2.7 MB read and written per step for a 784-512 weight. Where nothing
// else could see the difference, the gradient's producer writes into the buffer instead:
// - the buffer is a fed graph input (the caller's tensor) read by this node alone;
// - the gradient comes from a kernel step on the buffer's device, is read by this node alone and is not a
//   graph output;
// - the flag lives on the host, where PlaceOutputs reads it (the buffer is used only when it is true, and
//   only when its dtype and shape are the gradient's exactly: no broadcasting).
// The bits are the same: the copy was exact.
void Executor::FindAccumulatorTargets() {
  accumulator_target_.assign(plan_.values.size(), AccumulatorTarget());
  std::vector<int> readers(plan_.values.size(), 0), producer(plan_.values.size(), -1);
  for (size_t pos = 0; pos < steps_.size(); ++pos) {
    const PlanStep& ps = steps_[pos]->plan;
    for (int v : ps.inputs) if (v >= 0) ++readers[v];
    if (ps.kind == PlanStep::Kind::kKernel) for (int v : ps.outputs) if (v >= 0) producer[v] = static_cast<int>(pos);
  }
  for (const auto& st : steps_) {
    const PlanStep& ps = st->plan;
    if (ps.kind != PlanStep::Kind::kKernel || st->node->op_type != "InPlaceAccumulatorV2" ||
        st->node->domain != "com.microsoft" || ps.inputs.size() < 3) {
      continue;
    }
    const int buffer = ps.inputs[0], grad = ps.inputs[1], flag = ps.inputs[2];
    if (buffer < 0 || grad < 0 || flag < 0 || readers[buffer] != 1 || readers[grad] != 1 || keep_[grad] ||
        producer[grad] < 0 || initial_values_[buffer].defined() || !graph_.FindInput(plan_.values[buffer].name) ||
        !plan_.values[flag].device.is_host() || plan_.values[buffer].device != plan_.values[grad].device ||
        steps_[producer[grad]]->plan.provider != ps.provider) {
      continue;
    }
    accumulator_target_[grad] = {buffer, flag};
  }
}

size_t Executor::num_accumulator_targets() const {
  size_t n = 0;
  for (const AccumulatorTarget& t : accumulator_target_) n += t.buffer >= 0;
  return n;
}

const Tensor* Executor::AccumulatorBufferFor(int value, DType dtype, const Shape& shape) const {
  const AccumulatorTarget& t = accumulator_target_[value];
  if (t.buffer < 0) return nullptr;
  const Value& flag = values_[t.flag];
  const Value& buffer = values_[t.buffer];
  if (!flag.defined() || flag.is_sequence() || flag.tensor().dtype() != DType::kBool ||
      flag.tensor().NumElements() < 1 || !flag.tensor().data<bool>()[0]) {
    return nullptr;
  }
  if (!buffer.defined() || buffer.is_sequence() || buffer.tensor().dtype() != dtype || buffer.tensor().shape() != shape) {
    return nullptr;
  }
  return &buffer.tensor();
}

void Executor::BuildArenas(const std::vector<size_t>& sizes) {
  // 1. Each slot is alive from its step to the last reader of its value (graph outputs: to the end); a
  //    value that a later output aliases lives as long as that output.
  int end = static_cast<int>(steps_.size());
  std::vector<int> last = last_use_;
  for (size_t v = 0; v < last.size(); ++v) if (keep_[v]) last[v] = end;
  for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) {
    for (const auto& [out, in] : (*it)->aliases) last[in] = std::max(last[in], last[out]);
  }
  std::vector<BufferUse> buffers(sizes.size());
  for (size_t pos = 0; pos < steps_.size(); ++pos) {
    const Step& st = *steps_[pos];
    size_t n = st.plan.kind == PlanStep::Kind::kKernel ? st.plan.outputs.size() + 1 : 1;
    for (size_t i = 0; i < n; ++i) {
      size_t slot = st.slot_base + i;
      int v = slot_value_[slot];
      int first = static_cast<int>(pos);
      buffers[slot] = {slot_provider_[slot], sizes[slot], first, v >= 0 ? std::max(first, last[v]) : first};
    }
  }
  MemoryPlan mp = PlanMemory(buffers, static_cast<int>(providers_.size()));
  PoolTuner tuner;  // a replaced plan's tuner and capture refusal carry over to its successor
  std::string no_capture;
  if (auto old = plans_.find(key_); old != plans_.end()) {
    tuner = old->second->tuner;
    no_capture = old->second->no_capture;
  }
  size_t total = 0;
  for (size_t b : mp.arena_bytes) total += b;
  if (budget_) {
    auto old = plans_.find(key_);
    if (old != plans_.end()) {  // replaced below (or dropped): its arenas no longer count
      budget_->planned -= old->second->charged;
      arena_charge_ -= old->second->charged;
      old->second->charged = 0;
    }
    if (budget_->planned + total > budget_->limit) {  // no plan: runs keep allocating per value, within the cap
      plans_.erase(key_);
      return;
    }
  }
  // 2. One allocation per device holds them all.
  auto arenas = std::make_unique<MemoryArenas>();
  arenas->tuner = tuner;
  arenas->no_capture = no_capture;
  arenas->offset = mp.offset;
  arenas->size.assign(sizes.size(), 0);
  for (size_t s = 0; s < sizes.size(); ++s) arenas->size[s] = sizes[s] > 0 ? AlignUp(sizes[s]) : 0;
  for (size_t p = 0; p < providers_.size(); ++p) {
    auto arena = Tensor::Allocate(DType::kUInt8, {static_cast<int64_t>(mp.arena_bytes[p])}, providers_[p]->allocator());
    if (!arena.ok()) return;  // no plan: later runs keep allocating per value
    arenas->arenas.push_back(std::move(arena).value());
  }
  if (budget_) {
    budget_->planned += total;
    arena_charge_ += total;
    arenas->charged = total;
  }
  plans_[key_] = std::move(arenas);
}

}  // namespace ontrain
