// Executor: binding, per-node Prepare/allocate/Compute, and the lifetime-based arena plan.
#include "engine/executor.h"

#include <algorithm>
#include <map>

#include "providers/kernel_registry.h"

namespace ontrain {

namespace {
constexpr size_t kArenaAlign = 64;
size_t AlignUp(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }
}  // namespace

struct Executor::NodeState {
  const Node* node = nullptr;
  int64_t opset = 0;
  std::vector<int> in;    // value index per input, -1 for omitted
  std::vector<int> out;   // value index per output, -1 for omitted
  size_t slot_base = 0;   // plan slots: outputs at slot_base + i, scratch at slot_base + out.size()
  const KernelDef* def = nullptr;
  std::unique_ptr<OpKernel> kernel;
  KernelContext ctx;
  std::vector<const Tensor*> in_ptrs;
  std::vector<bool> requested;
};

struct Executor::Plan {
  std::vector<size_t> offset;  // by slot
  std::vector<size_t> size;    // by slot
  Tensor arena;
  bool valid = true;           // false once a run needed more than planned: rebuilt after that run
};

Executor::~Executor() = default;

namespace {
const ValueInfo* FindValueInfo(const Graph& g, const std::string& name) {
  if (name.empty()) return nullptr;
  for (const ValueInfo& v : g.value_infos) if (v.name == name) return &v;
  for (const ValueInfo& v : g.outputs) if (v.name == name) return &v;
  return nullptr;
}
}  // namespace

StatusOr<std::unique_ptr<Executor>> Executor::Create(const Model& model, IExecutionProvider* provider) {
  std::unique_ptr<Executor> ex(new Executor());
  ex->provider_ = provider;
  ex->graph_ = model.graph;
  Graph& g = ex->graph_;
  ONT_ASSIGN_OR_RETURN(std::vector<size_t> order, TopologicalOrder(g));

  // 1. Number every value: graph inputs, initializers, node outputs.
  auto index_of = [&](const std::string& name) {
    auto it = ex->value_index_.find(name);
    if (it != ex->value_index_.end()) return it->second;
    int id = static_cast<int>(ex->value_index_.size());
    ex->value_index_[name] = id;
    return id;
  };
  for (const ValueInfo& v : g.inputs) index_of(v.name);
  for (const auto& kv : g.initializers) index_of(kv.first);
  // 2. Resolve each node's kernel row by (domain, op, opset); the dtype is settled at the first run.
  size_t slots = 0;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const Node& n = g.nodes[order[pos]];
    auto st = std::make_unique<NodeState>();
    st->node = &n;
    st->opset = model.OpsetFor(n.domain);
    if (st->opset == 0) {
      return InvalidArgument(n.Describe(), ": the model imports no opset for domain \"",
                             n.domain.empty() ? "ai.onnx" : n.domain, "\"");
    }
    if (!provider->kernel_registry().HasOp(n.domain, n.op_type, st->opset)) {
      return NotFound(n.Describe(), ": no kernel for op ", n.op_type, " (domain ",
                      n.domain.empty() ? "ai.onnx" : n.domain, ", opset ", st->opset, ") on provider ",
                      provider->name());
    }
    for (const std::string& i : n.inputs) st->in.push_back(i.empty() ? -1 : index_of(i));
    for (const std::string& o : n.outputs) st->out.push_back(o.empty() ? -1 : index_of(o));
    st->slot_base = slots;
    slots += n.outputs.size() + 1;
    ex->nodes_.push_back(std::move(st));
  }
  // 3. Lifetimes: last reader of each value; graph outputs live to the end of the run.
  size_t nv = ex->value_index_.size();
  ex->last_use_.assign(nv, -1);
  ex->keep_.assign(nv, false);
  for (size_t pos = 0; pos < ex->nodes_.size(); ++pos) {
    for (int v : ex->nodes_[pos]->in) if (v >= 0) ex->last_use_[v] = static_cast<int>(pos);
  }
  for (const ValueInfo& o : g.outputs) {
    auto it = ex->value_index_.find(o.name);
    if (it == ex->value_index_.end()) {
      return InvalidArgument("graph output \"", o.name, "\" is not produced by any node, input or initializer");
    }
    ex->keep_[it->second] = true;
    ex->output_names_.push_back(o.name);
  }
  // 4. Initializers move to the provider's device once.
  ex->initial_values_.assign(nv, Tensor());
  for (auto& kv : g.initializers) {
    ONT_ASSIGN_OR_RETURN(Tensor dev, Tensor::Allocate(kv.second.dtype(), kv.second.shape(), provider->allocator()));
    ONT_RETURN_IF_ERROR(provider->CopyTensor(kv.second, &dev));
    ex->initial_values_[ex->value_index_[kv.first]] = dev;
  }
  g.initializers.clear();
  for (const ValueInfo& v : g.inputs) {
    if (!ex->initial_values_[ex->value_index_[v.name]].defined()) ex->required_inputs_.push_back(v.name);
  }
  return ex;
}

Status Executor::Bind(const NamedTensors& feeds, std::string* key) {
  values_ = initial_values_;
  std::map<std::string, int64_t> symbols;  // symbolic dim -> size bound by an earlier feed
  std::string& k = *key;
  for (const auto& [name, t] : feeds) {
    const ValueInfo* info = graph_.FindInput(name);
    if (info == nullptr) {
      std::string expected;
      for (const std::string& r : required_inputs_) expected += (expected.empty() ? "" : ", ") + r;
      return InvalidArgument("feed \"", name, "\" is not an input of the graph; expected: ", expected);
    }
    if (!t.defined()) return InvalidArgument("feed \"", name, "\" is an empty tensor");
    if (info->dtype != DType::kUndefined && t.dtype() != info->dtype) {
      return InvalidArgument("input \"", name, "\": expected dtype ", DTypeName(info->dtype), ", got ",
                             DTypeName(t.dtype()));
    }
    if (info->has_shape) {
      bool ok = info->dims.size() == t.shape().size();
      for (size_t d = 0; ok && d < info->dims.size(); ++d) {
        const Dim& dim = info->dims[d];
        if (dim.known()) {
          ok = dim.value == t.dim(d);
        } else if (!dim.param.empty()) {
          auto [it, fresh] = symbols.emplace(dim.param, t.dim(d));
          if (!fresh && it->second != t.dim(d)) {
            return InvalidArgument("input \"", name, "\": dimension ", d, " (\"", dim.param, "\") is ", t.dim(d),
                                   " but another input bound \"", dim.param, "\" to ", it->second);
          }
        }
      }
      if (!ok) {
        return InvalidArgument("input \"", name, "\": expected shape ", info->TypeString(), ", got ",
                               DTypeName(t.dtype()), ShapeToString(t.shape()));
      }
    }
    if (t.device() != provider_->device()) {
      return InvalidArgument("input \"", name, "\" is on ", t.device().ToString(), " but the graph runs on ",
                             provider_->device().ToString());
    }
    int v = value_index_.at(name);
    values_[v] = t;
    k += StrCat(name, ":", static_cast<int>(t.dtype()), ShapeToString(t.shape()), ";");
  }
  for (const std::string& r : required_inputs_) {
    if (!values_[value_index_.at(r)].defined()) {
      const ValueInfo* info = graph_.FindInput(r);
      return InvalidArgument("missing feed for input \"", r, "\" (", info->TypeString(), ")");
    }
  }
  return Status::OK();
}

Status Executor::RunNode(size_t pos, Plan* plan, std::vector<size_t>* sizes) {
  NodeState& st = *nodes_[pos];
  const Node& n = *st.node;
  // 1. Inputs and which outputs anyone wants (all named outputs: unread ones are freed right away).
  st.in_ptrs.clear();
  for (int v : st.in) st.in_ptrs.push_back(v >= 0 && values_[v].defined() ? &values_[v] : nullptr);
  for (size_t i = 0; i < st.in.size(); ++i) {
    if (st.in[i] >= 0 && st.in_ptrs[i] == nullptr) {
      return Internal(n.Describe(), ": input \"", n.inputs[i], "\" has no value");
    }
  }
  st.requested.assign(st.out.size(), false);
  for (size_t i = 0; i < st.out.size(); ++i) st.requested[i] = st.out[i] >= 0;
  st.ctx.Reset(st.in_ptrs, st.requested, provider_->thread_pool());
  // 2. The kernel is created at the first run, once input dtypes are known.
  if (!st.kernel) {
    std::vector<DType> dtypes;
    for (const Tensor* t : st.in_ptrs) dtypes.push_back(t ? t->dtype() : DType::kUndefined);
    auto def = provider_->kernel_registry().Find(n.domain, n.op_type, st.opset, dtypes);
    if (!def.ok()) return def.status().WithContext(n.Describe());
    NodeInfo info{&n, st.opset, {}};
    for (const std::string& o : n.outputs) info.output_infos.push_back(FindValueInfo(graph_, o));
    auto kernel = def.value()->create(info);
    if (!kernel.ok()) return kernel.status().WithContext(n.Describe());
    st.def = def.value();
    st.kernel = std::move(kernel).value();
  }
  ONT_RETURN_IF_ERROR(st.kernel->Prepare(st.ctx).WithContext(n.Describe()));
  // 3. Outputs and scratch: planned arena offsets when the plan fits, else fresh allocations.
  IAllocator* alloc = provider_->allocator();
  auto place = [&](size_t slot, size_t bytes, DType dt, const Shape& shape, Tensor* out) -> Status {
    (*sizes)[slot] = bytes;
    if (plan && plan->valid && bytes <= plan->size[slot]) {
      *out = Tensor::View(dt, shape, static_cast<uint8_t*>(plan->arena.raw_data()) + plan->offset[slot],
                          provider_->device());
      return Status::OK();
    }
    if (plan) plan->valid = false;
    ONT_ASSIGN_OR_RETURN(*out, Tensor::Allocate(dt, shape, alloc));
    return Status::OK();
  };
  for (size_t i = 0; i < st.out.size(); ++i) {
    if (!st.requested[i]) continue;
    DType dt = st.ctx.declared_dtypes()[i];
    if (dt == DType::kUndefined) return Internal(n.Describe(), ": kernel did not declare output ", i);
    const Shape& shape = st.ctx.declared_shapes()[i];
    size_t bytes = static_cast<size_t>(ShapeNumElements(shape)) * DTypeSize(dt);
    ONT_RETURN_IF_ERROR(place(st.slot_base + i, bytes, dt, shape, &st.ctx.outputs()[i]));
  }
  Tensor scratch;
  if (st.ctx.scratch_bytes() > 0) {
    ONT_RETURN_IF_ERROR(place(st.slot_base + st.out.size(), st.ctx.scratch_bytes(), DType::kUInt8,
                              {static_cast<int64_t>(st.ctx.scratch_bytes())}, &scratch));
    st.ctx.set_scratch(scratch.raw_data());
  }
  // 4. Compute, publish outputs, release inputs after their last reader.
  ONT_RETURN_IF_ERROR(provider_->Run(*st.kernel, st.ctx).WithContext(n.Describe()));
  for (size_t i = 0; i < st.out.size(); ++i) {
    if (st.out[i] >= 0) values_[st.out[i]] = std::move(st.ctx.outputs()[i]);
  }
  auto release = [&](int v) {
    if (v >= 0 && !keep_[v] && last_use_[v] <= static_cast<int>(pos) && !initial_values_[v].defined()) {
      values_[v] = Tensor();
    }
  };
  for (int v : st.in) release(v);
  for (int v : st.out) release(v);
  return Status::OK();
}

void Executor::BuildPlan(const std::string& key, const std::vector<size_t>& sizes) {
  // 1. Each slot is alive over [first, last] node positions.
  struct Block { size_t slot, bytes; int first, last; size_t offset; };
  std::vector<Block> blocks;
  int end = static_cast<int>(nodes_.size());
  for (size_t pos = 0; pos < nodes_.size(); ++pos) {
    const NodeState& st = *nodes_[pos];
    for (size_t i = 0; i <= st.out.size(); ++i) {
      size_t slot = st.slot_base + i;
      if (sizes[slot] == 0) continue;
      int last = static_cast<int>(pos);
      if (i < st.out.size()) {
        int v = st.out[i];
        last = keep_[v] ? end : std::max(last, last_use_[v]);
      }
      blocks.push_back({slot, AlignUp(sizes[slot]), static_cast<int>(pos), last, 0});
    }
  }
  // 2. Greedy by size: the largest block first, each at the lowest offset that no block alive at the same
  //    time occupies.
  std::vector<size_t> idx(blocks.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return blocks[a].bytes > blocks[b].bytes; });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : idx) {
    Block& b = blocks[i];
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping live blocks
    for (size_t j : placed) {
      const Block& o = blocks[j];
      if (o.first <= b.last && b.first <= o.last) busy.push_back({o.offset, o.offset + o.bytes});
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [s, e] : busy) {
      if (offset + b.bytes <= s) break;
      offset = std::max(offset, e);
    }
    b.offset = offset;
    total = std::max(total, offset + b.bytes);
    placed.push_back(i);
  }
  // 3. One allocation holds them all.
  auto old = plans_.find(key);
  if (old != plans_.end()) retired_arenas_.push_back(old->second->arena);  // this run's fetches may view it
  auto plan = std::make_unique<Plan>();
  plan->offset.assign(sizes.size(), 0);
  plan->size.assign(sizes.size(), 0);
  for (const Block& b : blocks) {
    plan->offset[b.slot] = b.offset;
    plan->size[b.slot] = b.bytes;
  }
  auto arena = Tensor::Allocate(DType::kUInt8, {static_cast<int64_t>(total)}, provider_->allocator());
  if (!arena.ok()) return;  // no plan: later runs keep allocating per value
  plan->arena = std::move(arena).value();
  plans_[key] = std::move(plan);
}

Status Executor::Run(const NamedTensors& feeds, const std::vector<std::string>& fetch_names,
                     std::vector<Tensor>* fetches) {
  retired_arenas_.clear();
  std::string key;
  ONT_RETURN_IF_ERROR(Bind(feeds, &key));
  for (const std::string& f : fetch_names) {
    auto it = value_index_.find(f);
    bool ok = it != value_index_.end() &&
              (keep_[it->second] || graph_.FindInput(f) || initial_values_[it->second].defined());
    if (!ok) return InvalidArgument("fetch \"", f, "\" is not a graph output, input or initializer");
  }
  auto pit = plans_.find(key);
  Plan* plan = pit == plans_.end() ? nullptr : pit->second.get();
  size_t num_slots = nodes_.empty() ? 0 : nodes_.back()->slot_base + nodes_.back()->out.size() + 1;
  std::vector<size_t> sizes(num_slots, 0);
  for (size_t pos = 0; pos < nodes_.size(); ++pos) {
    Status s = RunNode(pos, plan, &sizes);
    if (!s.ok()) {
      values_.assign(values_.size(), Tensor());
      return s;
    }
  }
  ONT_RETURN_IF_ERROR(provider_->Synchronize());
  fetches->clear();
  for (const std::string& f : fetch_names) fetches->push_back(values_[value_index_.at(f)]);
  for (size_t v = 0; v < values_.size(); ++v) {
    if (!keep_[v]) values_[v] = Tensor();
  }
  if (plan == nullptr || !plan->valid) BuildPlan(key, sizes);
  last_arena_bytes_ = plans_.count(key) ? plans_[key]->arena.SizeInBytes() : 0;
  return Status::OK();
}

}  // namespace ontrain
