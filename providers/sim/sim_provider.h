// SimExecutionProvider: a device simulated on the host, so that the planner, the copies and the state
// placement are proven on a machine without a GPU.
//
// - Its memory is host memory that it keeps inaccessible (mprotect PROT_NONE) outside its own Run and
//   copy calls: host code that reads or writes device data without a copy faults at once instead of
//   passing silently.
// - It runs a chosen subset of the CPU provider's kernel rows (the same kernels, so results are bit for
//   bit the CPU's), so real graphs split into several partitions.
// - Like an asynchronous device, it queues copies to the host until Synchronize() (or its next operation)
//   and fills their destinations with NaN meanwhile: a host reader that skipped the synchronization sees
//   garbage, not the right answer.
// - With graph_capture, it records runs as CUDA's stream capture does (IExecutionProvider::BeginCapture):
//   recorded kernels and copies do not run until replayed; a replay reads device memory as it is then,
//   but every host input a kernel was given keeps the value it had when recorded (a CUDA launch's host
//   arguments are frozen into the graph). A recorded run that relied on a host value changing therefore
//   computes the wrong thing here too.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "providers/cpu/thread_pool.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct SimProviderOptions {
  // Ops to offer, as "Op" or "domain::Op" (e.g. "com.microsoft::ReluGrad"); empty: DefaultSimOps().
  std::vector<std::string> ops;
  int threads = 1;
  int device_index = 0;
  // Record and replay runs (graph capture), as the CUDA provider does.
  bool graph_capture = false;
};

// The default subset: the dense compute of MLPs, CNNs and transformer blocks, forward and backward, with
// gradient accumulation and the optimizers; the losses, pooling gradients and most shape ops are left to
// the CPU, so that a training graph splits into several partitions with copies both ways.
std::vector<std::string> DefaultSimOps();
// Every op of the CPU kernel list: a whole graph then runs on the device, as it does on CUDA (only shape
// arithmetic stays on the host).
std::vector<std::string> AllCpuOps();

class SimExecutionProvider : public IExecutionProvider {
 public:
  struct Stats {
    int64_t runs = 0;
    int64_t copies_to_device = 0;
    int64_t copies_to_host = 0;
    int64_t synchronizations = 0;
    int64_t recorded_launches = 0;  // kernels and copies recorded
    int64_t replays = 0;
  };

  static StatusOr<std::unique_ptr<SimExecutionProvider>> Create(const SimProviderOptions& options = {});
  ~SimExecutionProvider() override;

  const std::string& name() const override { return name_; }
  Device device() const override { return {DeviceType::kSimulated, index_}; }
  const KernelRegistry& kernel_registry() const override { return registry_; }
  IAllocator* allocator() override;
  Status CopyTensor(const Tensor& src, Tensor* dst) override;
  Status Run(OpKernel& kernel, KernelContext& ctx) override;
  Status Synchronize() override;
  ThreadPool* thread_pool() override { return pool_.get(); }
  bool can_capture() const override { return capture_; }
  Status BeginCapture() override;
  StatusOr<std::unique_ptr<CapturedWork>> EndCapture() override;
  void AbortCapture() override;

  const Stats& stats() const { return stats_; }
  const AllocatorStats& allocator_stats() const;

  class Memory;
  class Recording;

 private:
  SimExecutionProvider(KernelRegistry registry, int index, int threads, bool capture);

  std::string name_ = "SIM";
  KernelRegistry registry_;
  int index_ = 0;
  std::shared_ptr<Memory> memory_;
  std::unique_ptr<ThreadPool> pool_;
  Stats stats_;
  bool capture_ = false;
  std::unique_ptr<Recording> recording_;  // while a run is recorded
};

}  // namespace ontrain
