// The simulated device: page-protected memory, a filtered copy of the CPU kernel list, queued copies.
#include "providers/sim/sim_provider.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>

#include "providers/cpu/cpu_provider.h"

namespace ontrain {

// Device memory: one mapping per allocation, inaccessible unless the provider opened it.
class SimExecutionProvider::Memory : public IAllocator {
 public:
  explicit Memory(Device device) : device_(device), page_(static_cast<size_t>(::sysconf(_SC_PAGESIZE))) {}
  ~Memory() override {
    for (const auto& [p, bytes] : blocks_) ::munmap(p, bytes);
  }

  void* Allocate(size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    size_t mapped = (std::max<size_t>(bytes, 1) + page_ - 1) / page_ * page_;
    void* p = ::mmap(nullptr, mapped, open_ ? PROT_READ | PROT_WRITE : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    blocks_[p] = mapped;
    stats_.num_allocs++;
    stats_.backing_allocs++;
    int64_t now = stats_.bytes_in_use += static_cast<int64_t>(bytes);
    if (now > stats_.peak_bytes) stats_.peak_bytes = now;
    sizes_[p] = bytes;
    return p;
  }

  void Free(void* p) override {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (!pending_.empty()) {  // like cudaFree, freeing waits for queued work that may read the block
      OpenLocked(true);
      FlushLocked();
      OpenLocked(false);
    }
    auto it = blocks_.find(p);
    if (it == blocks_.end()) return;
    ::munmap(p, it->second);
    blocks_.erase(it);
    stats_.num_frees++;
    stats_.bytes_in_use -= static_cast<int64_t>(sizes_[p]);
    sizes_.erase(p);
  }

  Device device() const override { return device_; }
  const AllocatorStats& stats() const { return stats_; }
  const AllocatorStats* counters() const override { return &stats_; }

  // Opens (read/write) or closes (no access) every block.
  void SetOpen(bool open) {
    std::lock_guard<std::mutex> lock(mu_);
    OpenLocked(open);
  }

  // Queues a copy to the host; Flush performs the queued copies (with the memory open).
  void Queue(const void* src, void* dst, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({src, dst, bytes});
  }
  void Flush() {
    std::lock_guard<std::mutex> lock(mu_);
    FlushLocked();
  }
  bool has_pending() {
    std::lock_guard<std::mutex> lock(mu_);
    return !pending_.empty();
  }

 private:
  struct PendingCopy {
    const void* src;
    void* dst;
    size_t bytes;
  };
  void OpenLocked(bool open) {
    open_ = open;
    for (const auto& [p, bytes] : blocks_) ::mprotect(p, bytes, open ? PROT_READ | PROT_WRITE : PROT_NONE);
  }
  void FlushLocked() {
    for (const PendingCopy& c : pending_) std::memcpy(c.dst, c.src, c.bytes);
    pending_.clear();
  }

  std::vector<PendingCopy> pending_;
  Device device_;
  size_t page_;
  std::mutex mu_;
  bool open_ = false;
  std::map<void*, size_t> blocks_;  // mapping -> mapped bytes
  std::map<void*, size_t> sizes_;   // mapping -> requested bytes
  AllocatorStats stats_;
};

namespace {

// Opens the device memory for the lifetime of the object.
class Open {
 public:
  explicit Open(SimExecutionProvider::Memory* m) : m_(m) { m_->SetOpen(true); }
  ~Open() { m_->SetOpen(false); }

 private:
  SimExecutionProvider::Memory* m_;
};

// A value as a recorded launch keeps it: host tensors copied now (frozen), device tensors by reference
// (read at the replay).
Value Frozen(const Value& v) {
  if (!v.defined()) return Value();
  if (!v.is_sequence()) return v.tensor().device().is_host() ? Value(v.tensor().Clone()) : v;
  TensorSequence items;
  for (const Tensor& t : *v.sequence()) items.push_back(t.device().is_host() ? t.Clone() : t);
  return Value::Sequence(std::move(items));
}

std::string RowName(const KernelDef& d) {
  return std::string(d.domain).empty() ? d.op : std::string(d.domain) + "::" + d.op;
}

}  // namespace

std::vector<std::string> DefaultSimOps() {
  return {"Add", "Sub", "Mul", "Div", "Neg", "Sqrt", "Pow", "Exp", "Tanh", "Erf", "Sigmoid", "Relu", "Cast",
          "Gemm", "MatMul", "Conv", "MaxPool", "Transpose", "Concat", "Softmax", "LayerNormalization",
          "ReduceSum", "ReduceMean", "Identity", "Where", "Expand", "Reshape", "Squeeze", "Unsqueeze",
          "com.microsoft::ReluGrad", "com.microsoft::ConvGrad", "com.microsoft::FusedMatMul",
          "com.microsoft::SoftmaxGrad_13", "com.microsoft::LayerNormalizationGrad", "com.microsoft::GeluGrad",
          "com.microsoft::Gelu", "com.microsoft::FastGelu", "com.microsoft::FastGeluGrad",
          "com.microsoft::ReduceSumTraining", "com.microsoft::InPlaceAccumulatorV2",
          "com.microsoft::AdamWOptimizer", "com.microsoft::SGDOptimizerV2", "com.microsoft::InplaceClipGradNorm"};
}

// The work recorded between BeginCapture and EndCapture: kernel launches (each with its own copy of its
// context and inputs) and copies, run in order at each replay.
class SimExecutionProvider::Recording : public CapturedWork {
 public:
  struct Op {
    OpKernel* kernel = nullptr;  // a launch; else a copy
    KernelContext ctx;
    std::vector<Value> inputs;
    const void* src = nullptr;
    void* dst = nullptr;
    size_t bytes = 0;
  };

  explicit Recording(SimExecutionProvider* owner) : owner_(owner) {}

  Status Replay() override {
    Open open(owner_->memory_.get());
    owner_->memory_->Flush();  // stream order: copies queued before the replay first
    for (const auto& op : ops_) {
      if (op->kernel == nullptr) {
        std::memcpy(op->dst, op->src, op->bytes);
      } else {
        ONT_RETURN_IF_ERROR(op->kernel->Compute(op->ctx));
      }
    }
    owner_->stats_.replays++;
    return Status::OK();
  }
  Status WaitForReplay() override { return Status::OK(); }  // a replay runs to its end before returning

  void AddLaunch(OpKernel& kernel, const KernelContext& ctx) {
    auto op = std::make_unique<Op>();
    op->kernel = &kernel;
    op->ctx = ctx;
    const std::vector<const Value*>& given = ctx.input_values();
    op->inputs.resize(given.size());
    std::vector<const Value*> inputs(given.size(), nullptr);
    for (size_t i = 0; i < given.size(); ++i) {
      if (given[i] == nullptr) continue;
      op->inputs[i] = Frozen(*given[i]);
      inputs[i] = &op->inputs[i];
    }
    op->ctx.ReplaceInputs(inputs);
    ops_.push_back(std::move(op));
  }
  void AddCopy(const void* src, void* dst, size_t bytes) {
    auto op = std::make_unique<Op>();
    op->src = src;
    op->dst = dst;
    op->bytes = bytes;
    ops_.push_back(std::move(op));
  }

 private:
  SimExecutionProvider* owner_;
  std::vector<std::unique_ptr<Op>> ops_;
};

std::vector<std::string> AllCpuOps() {
  std::set<std::string> names;
  for (const KernelDef& d : CpuKernelList()) names.insert(RowName(d));
  return {names.begin(), names.end()};
}

SimExecutionProvider::SimExecutionProvider(KernelRegistry registry, int index, int threads, bool capture)
    : registry_(std::move(registry)),
      index_(index),
      memory_(std::make_shared<Memory>(Device{DeviceType::kSimulated, index})),
      pool_(std::make_unique<ThreadPool>(threads)),
      capture_(capture) {}

SimExecutionProvider::~SimExecutionProvider() = default;

StatusOr<std::unique_ptr<SimExecutionProvider>> SimExecutionProvider::Create(const SimProviderOptions& options) {
  if (options.threads < 1) return InvalidArgument("the simulated device needs >= 1 thread, got ", options.threads);
  std::vector<std::string> wanted = options.ops.empty() ? DefaultSimOps() : options.ops;
  std::set<std::string> left(wanted.begin(), wanted.end());
  std::vector<KernelDef> rows;
  for (const KernelDef& d : CpuKernelList()) {
    std::string name = RowName(d);
    if (left.count(name) || (std::string(d.domain).empty() && left.count("ai.onnx::" + name))) {
      rows.push_back(d);
      left.erase(name);
    }
  }
  if (!left.empty()) return InvalidArgument("the CPU provider has no kernel for \"", *left.begin(), "\"");
  ONT_ASSIGN_OR_RETURN(KernelRegistry registry, KernelRegistry::Create(std::move(rows)));
  return std::unique_ptr<SimExecutionProvider>(
      new SimExecutionProvider(std::move(registry), options.device_index, options.threads, options.graph_capture));
}

IAllocator* SimExecutionProvider::allocator() { return memory_.get(); }

const AllocatorStats& SimExecutionProvider::allocator_stats() const { return memory_->stats(); }

Status SimExecutionProvider::CopyTensor(const Tensor& src, Tensor* dst) {
  ONT_RETURN_IF_ERROR(CheckCopyCompatible(src, *dst));
  Device me = device();
  bool src_here = src.device() == me, dst_here = dst->device() == me;
  if ((!src_here && !src.device().is_host()) || (!dst_here && !dst->device().is_host())) {
    return InvalidArgument("the simulated device copies between the host and ", me.ToString(), "; got ",
                           src.device().ToString(), " -> ", dst->device().ToString());
  }
  size_t bytes = src.SizeInBytes();
  if (bytes == 0 || src.raw_data() == dst->raw_data()) return Status::OK();
  if (recording_ != nullptr) {
    if (!dst_here) {
      return FailedPrecondition("the simulated device cannot copy to the host while it records a run (",
                                bytes, " bytes)");
    }
    recording_->AddCopy(src.raw_data(), dst->raw_data(), bytes);
    stats_.recorded_launches++;
    return Status::OK();
  }
  if (src_here && !dst_here) {
    // To the host: queued until the next synchronization; NaN (all bits set) until then.
    std::memset(dst->raw_data(), 0xFF, bytes);
    memory_->Queue(src.raw_data(), dst->raw_data(), bytes);
    stats_.copies_to_host++;
    return Status::OK();
  }
  Open open(memory_.get());
  memory_->Flush();  // stream order: earlier copies first
  std::memcpy(dst->raw_data(), src.raw_data(), bytes);
  if (!src_here) stats_.copies_to_device++;
  return Status::OK();
}

Status SimExecutionProvider::Run(OpKernel& kernel, KernelContext& ctx) {
  if (recording_ != nullptr) {
    recording_->AddLaunch(kernel, ctx);
    stats_.recorded_launches++;
    return Status::OK();
  }
  Open open(memory_.get());
  memory_->Flush();
  stats_.runs++;
  return kernel.Compute(ctx);
}

Status SimExecutionProvider::Synchronize() {
  if (recording_ != nullptr) return FailedPrecondition("the simulated device cannot synchronize while it records a run");
  stats_.synchronizations++;
  if (!memory_->has_pending()) return Status::OK();
  Open open(memory_.get());
  memory_->Flush();
  return Status::OK();
}

}  // namespace ontrain

namespace ontrain {

Status SimExecutionProvider::BeginCapture() {
  if (!capture_) return Unimplemented("the simulated device was made without graph_capture");
  if (recording_ != nullptr) return FailedPrecondition("the simulated device is already recording a run");
  recording_ = std::make_unique<Recording>(this);
  return Status::OK();
}

StatusOr<std::unique_ptr<CapturedWork>> SimExecutionProvider::EndCapture() {
  if (recording_ == nullptr) return FailedPrecondition("the simulated device is not recording");
  return std::unique_ptr<CapturedWork>(std::move(recording_));
}

void SimExecutionProvider::AbortCapture() { recording_.reset(); }

}  // namespace ontrain
