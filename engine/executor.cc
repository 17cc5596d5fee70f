// Executor: creation (partition, plan, constants), kernel and copy steps, and a run (binding, the arenas'
// plan and the accumulation buffer a gradient is written into: executor_bind.cc; recording and replaying a
// run: executor_capture.cc).
#include "engine/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "engine/executor_internal.h"
#include "engine/kernel_fusion.h"
#include "engine/memory_plan.h"
#include "engine/op_flops.h"
#include "engine/op_profile.h"
#include "engine/pool_tuner.h"
#include "providers/cpu/thread_pool.h"
#include "graph/tensor_proto.h"
#include "graph/value_types.h"
#include "providers/kernel_registry.h"

namespace ontrain {

Executor::~Executor() {
  if (budget_) budget_->planned -= std::min(budget_->planned, arena_charge_);
}

namespace {
const ValueInfo* FindValueInfo(const Graph& g, const std::string& name) {
  if (name.empty()) return nullptr;
  for (const ValueInfo& v : g.value_infos) if (v.name == name) return &v;
  for (const ValueInfo& v : g.outputs) if (v.name == name) return &v;
  return nullptr;
}

size_t SequenceBytes(DType dtype, const std::vector<Shape>& shapes) {
  size_t total = 0;
  for (const Shape& s : shapes) total += AlignUp(static_cast<size_t>(ShapeNumElements(s)) * DTypeSize(dtype));
  return total;
}
}  // namespace

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Model& model, IExecutionProvider* provider) {
  ExecutorOptions options;
  options.providers = {provider};
  return Create(model, options);
}

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Model& model, const ExecutorOptions& options) {
  std::unique_ptr<Executor> ex(new Executor());
  ex->providers_ = options.providers;
  ex->transfers_.assign(ex->providers_.begin(), ex->providers_.end());
  for (IExecutionProvider* p : ex->providers_) {
    ThreadPool* pool = p->thread_pool();
    if (pool != nullptr && pool->num_threads() > 1 && pool->tunable()) ex->tunable_pool_ = true;
  }
  ex->name_ = options.name;
  ex->leader_ = options.pool_leader;
  ex->budget_ = options.budget && options.budget->limit > 0 ? options.budget : nullptr;
  Model folded = model;
  PrepareForPlanning(&folded, options.providers);
  ONT_ASSIGN_OR_RETURN(GraphPartition partition, PartitionGraph(folded, options.providers));
  if (options.fuse_kernels && FuseKernels(&folded, partition, options.providers).total() > 0) {
    ONT_ASSIGN_OR_RETURN(partition, PartitionGraph(folded, options.providers));
  }
  // Values some node may write in place (an in-place input, or any input of a node whose kernel row is not
  // known yet): the executor never lets an output view them or be viewed by one.
  std::set<std::string> written;
  for (size_t idx : partition.order) {
    const Node& n = folded.graph.nodes[idx];
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      InputUse use = UseOfInput(partition.nodes[idx], n, static_cast<int>(i));
      if (use == InputUse::kInPlace || (partition.nodes[idx].def == nullptr && use != InputUse::kNone)) {
        written.insert(n.inputs[i]);
      }
    }
  }
  ONT_ASSIGN_OR_RETURN(ex->plan_, PlanExecution(folded, std::move(partition), options.providers, options.input_devices));
  ex->graph_ = folded.graph;
  ex->graph_.initializers.clear();
  const ExecutionPlan& plan = ex->plan_;
  // 1. Steps and their arena slots.
  size_t slots = 0;
  for (const PlanStep& ps : plan.steps) {
    auto st = std::make_unique<Step>();
    st->plan = ps;
    st->slot_base = slots;
    if (ps.kind == PlanStep::Kind::kKernel) {
      st->node = &ex->graph_.nodes[ps.node];
      st->opset = folded.OpsetFor(st->node->domain);
      for (int v : ps.outputs) {
        ex->slot_provider_.push_back(ps.provider);
        ex->slot_value_.push_back(v);
      }
      ex->slot_provider_.push_back(ps.provider);  // scratch
      ex->slot_value_.push_back(-1);
      slots += ps.outputs.size() + 1;
    } else {
      ex->slot_provider_.push_back(ProviderIndexFor(options.providers, plan.values[ps.outputs[0]].device));
      ex->slot_value_.push_back(ps.outputs[0]);
      slots += 1;
    }
    ex->steps_.push_back(std::move(st));
  }
  ex->value_slot_.assign(plan.values.size(), -1);
  for (size_t slot = 0; slot < ex->slot_value_.size(); ++slot) {
    if (ex->slot_value_[slot] >= 0) ex->value_slot_[ex->slot_value_[slot]] = static_cast<int>(slot);
  }
  ex->charged_.assign(slots, 0);
  // 2. Lifetimes: the last step reading each value; graph outputs live to the end of the run.
  size_t nv = plan.values.size();
  ex->last_use_.assign(nv, -1);
  ex->keep_.assign(nv, false);
  ex->written_.assign(nv, false);
  for (const std::string& w : written) {
    auto it = plan.ids.find(w);
    if (it != plan.ids.end()) ex->written_[it->second] = true;
  }
  for (size_t pos = 0; pos < ex->steps_.size(); ++pos) {
    for (int v : ex->steps_[pos]->plan.inputs) if (v >= 0) ex->last_use_[v] = static_cast<int>(pos);
  }
  for (const ValueInfo& v : folded.graph.inputs) ex->keep_[plan.ids.at(v.name)] = true;  // the caller's tensors
  for (const ValueInfo& o : folded.graph.outputs) {
    auto it = plan.ids.find(o.name);
    if (it == plan.ids.end()) {
      return InvalidArgument("graph output \"", o.name, "\" is not produced by any node, input or initializer");
    }
    ex->keep_[it->second] = true;
    ex->output_names_.push_back(o.name);
  }
  // 3. Initializers and their copies on the devices that read them, once.
  ONT_RETURN_IF_ERROR(ex->MakeConstants(folded.graph));
  for (const ValueInfo& v : folded.graph.inputs) {
    const int id = plan.ids.at(v.name);
    if (!ex->initial_values_[id].defined()) {
      ex->required_inputs_.push_back(v.name);
      ex->required_ids_.push_back(id);
    }
  }
  ex->FindAccumulatorTargets();
  return ex;
}

Status Executor::MakeConstants(const Graph& g) {
  initial_values_.assign(plan_.values.size(), Value());
  auto allocate_copy = [&](const Tensor& src, Device device, Tensor* out) -> Status {
    int p = ProviderIndexFor(providers_, device);
    ONT_ASSIGN_OR_RETURN(*out, Tensor::Allocate(src.dtype(), src.shape(), providers_[p]->allocator()));
    return providers_[p]->CopyTensor(src, out);
  };
  // 1. Every initializer on its home device (the host, or where an input with a default is fed).
  for (const auto& [name, t] : g.initializers) {
    int v = plan_.ids.at(name);
    Tensor home;
    ONT_RETURN_IF_ERROR(allocate_copy(t, plan_.values[v].device, &home));
    initial_values_[v] = home;
  }
  // 2. Copies of initializers on the devices that read them.
  for (int v : plan_.constant_copies) {
    const PlannedValue& pv = plan_.values[v];
    Tensor dev;
    ONT_RETURN_IF_ERROR(allocate_copy(initial_values_[pv.source].tensor(), pv.device, &dev));
    initial_values_[v] = dev;
  }
  for (IExecutionProvider* p : providers_) ONT_RETURN_IF_ERROR(p->Synchronize());
  return Status::OK();
}

StatusOr<Tensor> Executor::Place(size_t slot, int provider, size_t bytes, DType dtype, Shape shape,
                                 MemoryArenas* arenas, std::vector<size_t>* sizes) {
  (*sizes)[slot] = bytes;
  if (arenas && arenas->valid && bytes <= arenas->size[slot]) {
    return arenas->arenas[provider].SubView(arenas->offset[slot], dtype, std::move(shape));
  }
  if (arenas) arenas->valid = false;
  if (budget_) {
    if (budget_->planned + live_ + bytes > budget_->limit) {
      int v = slot_value_[slot];
      return ResourceExhausted(name_, ": ", v >= 0 ? StrCat("value \"", plan_.values[v].name, "\"") : "a kernel's scratch",
                               " (", DTypeName(dtype), ShapeToString(shape), ", ", bytes, " bytes) would bring the ",
                               "session's planned memory to ", budget_->planned + live_ + bytes,
                               " bytes, over its limit of ", budget_->limit, " (", budget_->planned,
                               " already planned elsewhere, ", live_, " live in this graph)");
    }
    live_ += bytes - charged_[slot];
    charged_[slot] = bytes;
  }
  return Tensor::Allocate(dtype, std::move(shape), providers_[provider]->allocator());
}

Status Executor::PlaceOutputs(Step* step, MemoryArenas* arenas, std::vector<size_t>* sizes) {
  Step& st = *step;
  const Node& n = *st.node;
  st.aliases.clear();
  for (size_t i = 0; i < st.plan.outputs.size(); ++i) {
    if (!st.requested[i]) continue;
    int k = static_cast<int>(i);
    DType dt = st.ctx.declared_dtype(k);
    size_t slot = st.slot_base + i;
    switch (st.ctx.output_kind(k)) {
      case KernelContext::OutputKind::kNone:
        return Internal(n.Describe(), ": kernel did not declare output ", i);
      case KernelContext::OutputKind::kTensor: {
        const Shape& shape = st.ctx.declared_shape(k);
        int in = st.ctx.view_input(k);
        int out_v = st.plan.outputs[i], in_v = in >= 0 ? st.plan.inputs[in] : -1;
        size_t bytes = static_cast<size_t>(ShapeNumElements(shape)) * DTypeSize(dt);
        const bool may_view = in_v >= 0 && !keep_[out_v] && !written_[out_v] && !written_[in_v] && st.in_ptrs[in] &&
                              st.in_ptrs[in]->defined() && !st.in_ptrs[in]->is_sequence() &&
                              st.in_ptrs[in]->tensor().dtype() == dt;
        if (const Tensor* target = AccumulatorBufferFor(out_v, dt, shape)) {
          // The memory plan made from this run must also serve runs whose flag is false, where the output
          // is placed or is a view of its input: its slot is sized, and a possible view keeps the input
          // alive as long as the output.
          (*sizes)[slot] = bytes;
          if (may_view) st.aliases.push_back({out_v, in_v});
          st.ctx.outputs()[i] = Value(*target);
          break;
        }
        if (may_view) {
          auto view = st.in_ptrs[in]->tensor().Reshaped(shape);
          if (view.ok()) {
            st.ctx.outputs()[i] = Value(std::move(view).value());
            st.aliases.push_back({out_v, in_v});
            break;
          }
        }
        ONT_ASSIGN_OR_RETURN(Tensor t, Place(slot, st.plan.provider, bytes, dt, shape, arenas, sizes));
        st.ctx.outputs()[i] = Value(std::move(t));
        break;
      }
      case KernelContext::OutputKind::kSequence: {
        const std::vector<Shape>& shapes = st.ctx.declared_sequence_shapes(k);
        size_t total = SequenceBytes(dt, shapes);
        ONT_ASSIGN_OR_RETURN(Tensor buf, Place(slot, st.plan.provider, total, DType::kUInt8,
                                               {static_cast<int64_t>(total)}, arenas, sizes));
        TensorSequence items;
        size_t offset = 0;
        for (const Shape& s : shapes) {
          items.push_back(buf.SubView(offset, dt, s));
          offset += AlignUp(static_cast<size_t>(ShapeNumElements(s)) * DTypeSize(dt));
        }
        st.ctx.outputs()[i] = Value::Sequence(std::move(items));
        break;
      }
      case KernelContext::OutputKind::kAlias: {
        int in = st.ctx.alias_input(k);
        st.ctx.outputs()[i] = *st.in_ptrs[in];
        st.aliases.push_back({st.plan.outputs[i], st.plan.inputs[in]});
        break;
      }
    }
  }
  return Status::OK();
}

Status Executor::RunKernel(size_t pos, MemoryArenas* arenas, std::vector<size_t>* sizes) {
  Step& st = *steps_[pos];
  const Node& n = *st.node;
  IExecutionProvider* provider = providers_[st.plan.provider];
  // 1. Inputs and which outputs anyone wants (all named outputs: unread ones are freed right away).
  st.in_ptrs.clear();
  for (size_t i = 0; i < st.plan.inputs.size(); ++i) {
    int v = st.plan.inputs[i];
    if (v >= 0 && !values_[v].defined()) return Internal(n.Describe(), ": input \"", n.inputs[i], "\" has no value");
    st.in_ptrs.push_back(v >= 0 ? &values_[v] : nullptr);
  }
  st.requested.assign(st.plan.outputs.size(), false);
  for (size_t i = 0; i < st.plan.outputs.size(); ++i) st.requested[i] = st.plan.outputs[i] >= 0;
  st.ctx.Reset(st.in_ptrs, st.requested, use_pool_ ? provider->thread_pool() : nullptr);
  // 2. The kernel is created at the first run, once input dtypes are known.
  if (!st.kernel) {
    std::vector<DType> dtypes;
    for (const Value* v : st.in_ptrs) dtypes.push_back(v ? v->dtype() : DType::kUndefined);
    auto def = provider->kernel_registry().Find(n.domain, n.op_type, st.opset, dtypes);
    if (!def.ok()) return def.status().WithContext(StrCat(n.Describe(), " on ", provider->name()));
    NodeInfo info{&n, st.opset, {}};
    for (const std::string& o : n.outputs) info.output_infos.push_back(FindValueInfo(graph_, o));
    auto kernel = def.value()->create(info);
    if (!kernel.ok()) return kernel.status().WithContext(n.Describe());
    st.kernel = std::move(kernel).value();
    st.def = def.value();
  }
  // The node's description is built only on failure: this runs for every node of every step.
  if (Status s = st.kernel->Prepare(st.ctx); !s.ok()) return s.WithContext(n.Describe());
  // 3. Outputs and scratch: planned arena offsets when the plan fits, else fresh allocations.
  ONT_RETURN_IF_ERROR(PlaceOutputs(&st, arenas, sizes));
  Tensor scratch;  // alive until Compute returns
  if (size_t bytes = st.ctx.scratch_bytes(); bytes > 0) {
    ONT_ASSIGN_OR_RETURN(scratch, Place(st.slot_base + st.plan.outputs.size(), st.plan.provider, bytes,
                                        DType::kUInt8, {static_cast<int64_t>(bytes)}, arenas, sizes));
    st.ctx.set_scratch(scratch.raw_data());
  }
  // 4. Compute through the provider, publish the outputs.
  if (OpProfileEnabled()) {
    // On a device the provider is drained before and after the kernel, so that its time is the work's,
    // not the queueing's (plus a launch and a synchronization: a few microseconds on CUDA).
    const bool device = !provider->device().is_host();
    if (device) ONT_RETURN_IF_ERROR(provider->Synchronize().WithContext(n.Describe()));
    auto t0 = std::chrono::steady_clock::now();
    if (Status s = provider->Run(*st.kernel, st.ctx); !s.ok()) return s.WithContext(n.Describe());
    if (device) ONT_RETURN_IF_ERROR(provider->Synchronize().WithContext(n.Describe()));
    auto t1 = std::chrono::steady_clock::now();
    // The keys are made once per step and kept, so that profiling allocates nothing per step (the tally
    // finds an existing key without allocating); by shape, again when the input shapes change.
    if (st.profile_key.empty()) st.profile_key = n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type;
    const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
    if (OpProfileByShape()) {
      const size_t inputs = static_cast<size_t>(st.ctx.num_inputs());
      bool same = !st.profile_shape_key.empty() && st.profile_shapes.size() == inputs;
      for (size_t i = 0; same && i < inputs; ++i) {
        const Tensor* t = st.ctx.input(static_cast<int>(i));
        same = t ? t->shape() == st.profile_shapes[i] : st.profile_shapes[i] == Shape{-1};
      }
      if (!same) {
        st.profile_shape_key = st.profile_key;
        st.profile_shapes.clear();
        for (size_t i = 0; i < inputs; ++i) {
          const Tensor* t = st.ctx.input(static_cast<int>(i));
          st.profile_shape_key += t ? " " + ShapeToString(t->shape()) : " -";
          st.profile_shapes.push_back(t ? t->shape() : Shape{-1});  // [-1]: an absent input
        }
      }
      AddOpTime(st.profile_shape_key, nanos, MatrixFlops(n, st.ctx));
    } else {
      AddOpTime(st.profile_key, nanos, MatrixFlops(n, st.ctx));
    }
  } else if (Status s = provider->Run(*st.kernel, st.ctx); !s.ok()) {
    return s.WithContext(n.Describe());
  }
  for (size_t i = 0; i < st.plan.outputs.size(); ++i) {
    if (st.plan.outputs[i] >= 0) values_[st.plan.outputs[i]] = std::move(st.ctx.outputs()[i]);
  }
  return Status::OK();
}

Status Executor::RunCopy(size_t pos, MemoryArenas* arenas, std::vector<size_t>* sizes) {
  Step& st = *steps_[pos];
  int src_id = st.plan.inputs[0], dst_id = st.plan.outputs[0];
  const Value& src = values_[src_id];
  const std::string& name = plan_.values[src_id].name;
  if (!src.defined()) return Internal("copy of \"", name, "\": the value is missing");
  IExecutionProvider* provider = providers_[st.plan.provider];
  int dst_provider = slot_provider_[st.slot_base];
  auto context = [&] {
    return StrCat("copying \"", name, "\" from ", plan_.values[src_id].device.ToString(), " to ",
                  plan_.values[dst_id].device.ToString());
  };
  if (!src.is_sequence()) {
    const Tensor& t = src.tensor();
    ONT_ASSIGN_OR_RETURN(Tensor dst, Place(st.slot_base, dst_provider, t.SizeInBytes(), t.dtype(), t.shape(), arenas, sizes));
    if (recording_ != nullptr && t.device().is_host()) {
      // A recorded copy reads its source again at every replay: it is copied from staging memory the
      // recording owns (refreshed from the feeds before a replay when it is a fed input).
      ONT_ASSIGN_OR_RETURN(Tensor staging, Tensor::Allocate(t.dtype(), t.shape(), provider->staging_allocator()));
      if (t.SizeInBytes() > 0) std::memcpy(staging.raw_data(), t.raw_data(), t.SizeInBytes());
      if (Status s = provider->CopyTensor(staging, &dst); !s.ok()) return s.WithContext(context());
      if (graph_.FindInput(name) != nullptr) recording_->refresh.push_back({src_id, staging});
      recording_->staging.push_back(std::move(staging));
    } else if (Status s = provider->CopyTensor(t, &dst); !s.ok()) {
      return s.WithContext(context());
    }
    values_[dst_id] = Value(std::move(dst));
    return Status::OK();
  }
  if (recording_ != nullptr && !src.sequence()->empty() && src.sequence()->front().device().is_host()) {
    return Unimplemented("copying the sequence \"", name, "\" to the device in a recorded run");
  }
  // A sequence: one buffer, its items side by side.
  const TensorSequence& items = *src.sequence();
  size_t total = 0;
  for (const Tensor& t : items) total += AlignUp(t.SizeInBytes());
  ONT_ASSIGN_OR_RETURN(Tensor buf, Place(st.slot_base, dst_provider, total, DType::kUInt8,
                                         {static_cast<int64_t>(total)}, arenas, sizes));
  TensorSequence out;
  size_t offset = 0;
  for (const Tensor& t : items) {
    out.push_back(buf.SubView(offset, t.dtype(), t.shape()));
    if (Status s = provider->CopyTensor(t, &out.back()); !s.ok()) return s.WithContext(context());
    offset += AlignUp(t.SizeInBytes());
  }
  values_[dst_id] = Value::Sequence(std::move(out));
  return Status::OK();
}

void Executor::Uncharge(int slot) {
  if (slot < 0 || charged_[slot] == 0) return;
  live_ -= charged_[slot];
  charged_[slot] = 0;
}

void Executor::Release(size_t pos, const Step& st) {
  auto release = [&](int v) {
    if (v >= 0 && !keep_[v] && last_use_[v] <= static_cast<int>(pos) && !initial_values_[v].defined()) {
      values_[v] = Value();
      if (budget_) Uncharge(value_slot_[v]);
    }
  };
  for (int v : st.plan.inputs) release(v);
  for (int v : st.plan.outputs) release(v);
  if (budget_ && st.plan.kind == PlanStep::Kind::kKernel) Uncharge(static_cast<int>(st.slot_base + st.plan.outputs.size()));
}

Status Executor::RunSteps(MemoryArenas* arenas, RunObserver* observer) {
  for (size_t pos = 0; pos < steps_.size(); ++pos) {
    const Step& st = *steps_[pos];
    for (int p : st.plan.sync_before) ONT_RETURN_IF_ERROR(providers_[p]->Synchronize());
    ONT_RETURN_IF_ERROR(st.plan.kind == PlanStep::Kind::kKernel ? RunKernel(pos, arenas, &sizes_)
                                                                : RunCopy(pos, arenas, &sizes_));
    if (observer != nullptr) ONT_RETURN_IF_ERROR(observer->AfterStep(pos));
    Release(pos, st);
  }
  return Status::OK();
}

Status Executor::Run(const NamedValues& feeds, const std::vector<std::string>& fetch_names,
                     std::vector<Tensor>* fetches, RunObserver* observer) {
  ONT_RETURN_IF_ERROR(Bind(feeds));
  for (const std::string& f : fetch_names) {
    auto it = plan_.ids.find(f);
    bool ok = it != plan_.ids.end() &&
              (keep_[it->second] || graph_.FindInput(f) || initial_values_[it->second].defined());
    if (!ok) return InvalidArgument("fetch \"", f, "\" is not a graph output, input or initializer");
  }
  ++capture_stats_.runs;
  auto pit = plans_.find(key_);
  MemoryArenas* arenas = pit == plans_.end() ? nullptr : pit->second.get();
  // Graph capture: replay this run's recording, record this run, or run it eagerly (executor_capture.cc).
  // Runs that report each step (an observer) or time each node (profiling) are eager.
  Capture* replay = nullptr;
  bool record = false;
  ChooseCapture(arenas, observer == nullptr && !OpProfileEnabled(), &replay, &record);
  auto fetch = [&]() -> Status {
    fetches->clear();
    for (const std::string& f : fetch_names) {
      const Value& v = values_[plan_.ids.at(f)];
      if (v.is_sequence()) return InvalidArgument("fetch \"", f, "\" is a sequence; only tensors can be fetched");
      fetches->push_back(v.tensor());
    }
    for (size_t v = 0; v < values_.size(); ++v) {
      if (!keep_[v]) values_[v] = Value();
    }
    return Status::OK();
  };
  if (replay != nullptr) {
    if (Status s = Replay(*replay); !s.ok()) {
      values_.assign(values_.size(), Value());
      return s.WithContext(StrCat(name_, ": replaying its recorded run"));
    }
    ++capture_stats_.replayed;
    last_ = arenas;
    return fetch();
  }
  // The first run at new shapes plans the arenas with the pool; later ones are timed for the tuner, this
  // executor's own or its leader's.
  PoolTuner* tuner = nullptr;
  if (leader_ != nullptr) {
    tuner = tunable_pool_ ? leader_->current_tuner_ : nullptr;
    use_pool_ = tuner == nullptr ? leader_->use_pool_ : tuner->pooled_now();
  } else {
    tuner = tunable_pool_ && arenas != nullptr ? &arenas->tuner : nullptr;
    use_pool_ = tuner == nullptr || tuner->BeginRun();
    current_tuner_ = tuner;
  }
  const auto start = std::chrono::steady_clock::now();
  auto clock_out = [&] {
    if (tuner) tuner->AddTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  };
  std::vector<size_t>& sizes = sizes_;  // a member: its memory is reused from run to run
  auto reset_run = [&] {
    sizes.assign(slot_provider_.size(), 0);
    if (budget_) {
      live_ = 0;
      std::fill(charged_.begin(), charged_.end(), 0);
    }
  };
  reset_run();
  Status s;
  if (record) {
    s = Record(arenas);
    if (!s.ok()) {
      // Run eagerly. If that works, the recording was what failed: these shapes stay eager from now on. If it
      // fails too, the error was the run's own and is returned.
      const std::string why = StrCat("recording failed: ", s.message());
      s = Bind(feeds);
      reset_run();
      if (s.ok()) s = RunSteps(arenas, nullptr);
      if (s.ok()) arenas->no_capture = why;
    }
  } else {
    s = RunSteps(arenas, observer);
    if (s.ok() && arenas != nullptr) ++arenas->eager_runs;
  }
  if (!s.ok()) {
    values_.assign(values_.size(), Value());
    clock_out();
    return s;
  }
  if (Status f = fetch(); !f.ok()) {
    clock_out();
    return f;
  }
  last_value_bytes_.assign(plan_.values.size(), 0);
  for (size_t slot = 0; slot < sizes.size(); ++slot) {
    if (slot_value_[slot] >= 0) last_value_bytes_[slot_value_[slot]] = sizes[slot];
  }
  clock_out();
  if (arenas == nullptr || !arenas->valid) BuildArenas(sizes);
  auto now = plans_.find(key_);
  last_ = now == plans_.end() ? nullptr : now->second.get();
  // BuildArenas may have replaced (or dropped) the plan whose tuner this run used; followers read it next.
  if (leader_ == nullptr && current_tuner_ != nullptr) current_tuner_ = last_ != nullptr ? &last_->tuner : nullptr;
  return Status::OK();
}

int Executor::LastStepTouching(const std::string& value) const {
  auto reads = [](const Node* n, const std::vector<std::string>& names) {
    for (const std::string& in : n->inputs) {
      if (!in.empty() && std::find(names.begin(), names.end(), in) != names.end()) return true;
    }
    return false;
  };
  std::vector<std::string> direct = {value}, aliases;
  int last = -1;
  for (size_t pos = 0; pos < steps_.size(); ++pos) {
    const Node* n = steps_[pos]->node;
    if (n == nullptr) continue;
    if (reads(n, direct)) {
      last = static_cast<int>(pos);
      for (const std::string& out : n->outputs) {
        if (!out.empty()) aliases.push_back(out);
      }
    } else if (reads(n, aliases)) {
      last = static_cast<int>(pos);
    }
  }
  return last;
}

StatusOr<Tensor> Executor::ToHost(const Tensor& t) const {
  Tensor host;
  ONT_RETURN_IF_ERROR(ToHost(t, &host));
  return host;
}

Status Executor::ToHost(const Tensor& t, Tensor* host) const {
  if (t.device().is_host()) {
    *host = t;
    return Status::OK();
  }
  return CopyToHost(t, transfers_, host);
}

Status Executor::QueueToHost(const Tensor& t, Tensor* host, IDataTransfer** transfer) const {
  return QueueCopyToHost(t, transfers_, host, transfer);
}

std::string Executor::PoolChoice() const {
  if (!tunable_pool_) return "not tuned";
  if (leader_ != nullptr) return "follows the " + leader_->name_;
  return last_ == nullptr ? "undecided" : last_->tuner.Describe();
}

size_t Executor::last_arena_bytes() const {
  size_t total = 0;
  for (size_t p = 0; p < providers_.size(); ++p) total += last_arena_bytes(static_cast<int>(p));
  return total;
}

size_t Executor::last_arena_bytes(int p) const {
  if (last_ == nullptr || p < 0 || p >= static_cast<int>(last_->arenas.size())) return 0;
  return last_->arenas[p].SizeInBytes();
}

}  // namespace ontrain
