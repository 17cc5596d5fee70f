// The CPU execution provider: host memory, Eigen-based kernels, an intra-op thread pool.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "providers/cpu/thread_pool.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct CpuProviderOptions {
  int intra_op_threads = 0;  // 0: one per hardware core
  // With more than one thread: an executor times each graph's runs with and without the pool and keeps the
  // faster (engine/pool_tuner.h); false: the pool always runs what its cost model splits.
  bool tune_pool = true;
  // Kernels run with subnormal float results flushed to zero and subnormal inputs read as zero (x86's FTZ
  // and DAZ, as torch.set_flush_denormal does), on the calling thread during each kernel and in the pool's
  // workers. Faster where values sink into the subnormals on CPUs that take a microcode assist for them
  // (Intel's: AdamW over mlp_small 0.37-0.41 -> 0.09 ms per step), at the price of results that differ from
  // IEEE arithmetic (and PyTorch's default) wherever a value is subnormal. Off by default.
  bool flush_denormals = false;
};

class CpuExecutionProvider : public IExecutionProvider {
 public:
  static StatusOr<std::unique_ptr<CpuExecutionProvider>> Create(const CpuProviderOptions& options = {});

  const std::string& name() const override { return name_; }
  Device device() const override { return Device(); }
  const KernelRegistry& kernel_registry() const override { return registry_; }
  IAllocator* allocator() override { return allocator_.get(); }
  Status CopyTensor(const Tensor& src, Tensor* dst) override;
  Status Synchronize() override { return Status::OK(); }
  ThreadPool* thread_pool() override { return pool_.get(); }
  Status Run(OpKernel& kernel, KernelContext& ctx) override;

  const CpuAllocator& cpu_allocator() const { return *allocator_; }

 private:
  CpuExecutionProvider(KernelRegistry registry, int threads, const CpuProviderOptions& options);

  std::string name_ = "CPU";
  KernelRegistry registry_;
  std::shared_ptr<CpuAllocator> allocator_ = std::make_shared<CpuAllocator>();
  std::unique_ptr<ThreadPool> pool_;
  bool flush_denormals_;
};

// The CPU provider's kernel list (providers/cpu/cpu_kernel_list.cc).
std::vector<KernelDef> CpuKernelList();

}  // namespace ontrain
