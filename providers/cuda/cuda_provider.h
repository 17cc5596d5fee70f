// CudaExecutionProvider: runs the CUDA kernel list on one device with one stream, and is the data transfer
// between that device and the host.
//
// - Memory: every device buffer (the executor's arenas, tensors, kernel workspaces) comes from one caching
//   allocator (cuda_allocator.h).
// - Order: kernels and copies are queued on the session's stream; Synchronize waits for it. A copy to the
//   host is complete only after Synchronize, as IDataTransfer says (the planner inserts it).
// - Copies from the host go through pinned staging (PinnedStaging): the source is copied into one of a few
//   page-locked slots and the transfer is queued from there, so the host goes on queuing work while the
//   transfer runs (from pageable memory the driver stages synchronously). Small copies to the host are
//   queued into its page-locked readback area and land in their destinations at Synchronize. Copies larger
//   than a slot or than the readback area's room, and every copy where page-locked memory could not be had,
//   go directly.
// - Errors: a failing CUDA, cuBLAS or cuDNN call becomes a Status naming the call; the executor adds the
//   node. An asynchronous fault surfaces at the next call that checks, at the latest at Synchronize.
// - Graph capture (when DeviceProviderOptions::graph_capture): between BeginCapture and EndCapture the
//   stream is captured (relaxed mode: a kernel may still grow a workspace through cudaMalloc); kernels and
//   copies are recorded into a CUDA graph, instantiated once and launched at each Replay. Copies from the
//   host then come straight from the executor's page-locked staging (staging_allocator), which a replay
//   reads again; copies to the host and Synchronize fail while capturing. cuBLAS and cuBLASLt work in one
//   workspace set at creation, so that no call allocates while captured.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "providers/cuda/cuda_allocator.h"
#include "providers/cuda/cuda_kernel.h"
#include "providers/execution_provider.h"
#include "providers/provider_library.h"

namespace ontrain {
namespace cuda {

// The kernel list (cuda_kernel_list.cc); needs no device.
std::vector<KernelDef> CudaKernelList();

// The number of devices, or why there is none: no driver, a driver too old for this build, no device.
Status CountDevices(int* count);

// Page-locked host memory for small copies in both directions.
// - To the device: a ring of slots. A slot is reused once the transfer queued from it has finished (an event
//   per slot), so the caller's source may change as soon as a copy returns.
// - To the host: a readback area. CUDA copies into pageable memory synchronously (the call returns when the
//   copy is done, so each fetched output waited for the device on its own); a copy into the readback area is
//   queued instead, and written into its destination after the stream has finished, by the Synchronize that
//   IDataTransfer requires before the host reads it. A step's fetched outputs then cost one wait in all.
class PinnedStaging {
 public:
  static constexpr int kSlots = 4;
  static constexpr size_t kSlotBytes = size_t{4} << 20;
  static constexpr size_t kReadbackBytes = size_t{64} << 10;  // in all, between two Synchronize calls
  static constexpr int kMaxReadbacks = 64;

  PinnedStaging() = default;
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;
  ~PinnedStaging();

  // Takes the page-locked memory; where it cannot be had, staging stays off (copies go directly).
  Status Init();
  bool enabled() const { return base_ != nullptr; }
  // Queues a copy of `bytes` (at most kSlotBytes) from host `src` to device `dst` on `stream`.
  Status CopyToDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream);
  // Queues a copy of `bytes` from device `src` into the readback area on `stream`, for FinishReadbacks to
  // write into host tensor `dst` (whose storage it holds until then); false, with nothing queued, when the
  // area has no room left (the caller copies directly).
  StatusOr<bool> QueueReadback(const Tensor& dst, const void* src, size_t bytes, cudaStream_t stream);
  // After the stream has been waited for: with `done`, writes every queued readback into its destination (in
  // the order queued); without (the wait failed), leaves the destinations as they were. Empties the area.
  void FinishReadbacks(bool done);
  int pending_readbacks() const { return num_readbacks_; }

 private:
  struct Readback {
    Tensor dst;
    size_t offset = 0;
    size_t bytes = 0;
  };
  char* base_ = nullptr;  // kSlots slots, then the readback area
  cudaEvent_t done_[kSlots] = {};
  int next_ = 0;
  Readback readbacks_[kMaxReadbacks];
  int num_readbacks_ = 0;
  size_t readback_used_ = 0;
};

class CudaExecutionProvider : public IExecutionProvider {
 public:
  static StatusOr<std::unique_ptr<CudaExecutionProvider>> Create(const DeviceProviderOptions& options);
  ~CudaExecutionProvider() override;

  const std::string& name() const override { return name_; }
  Device device() const override { return {DeviceType::kCUDA, resources_.device_index}; }
  const KernelRegistry& kernel_registry() const override { return registry_; }
  IAllocator* allocator() override { return allocator_.get(); }
  Status CopyTensor(const Tensor& src, Tensor* dst) override;
  Status Run(OpKernel& kernel, KernelContext& ctx) override;
  Status Synchronize() override;
  bool can_capture() const override { return capture_enabled_; }
  Status BeginCapture() override;
  StatusOr<std::unique_ptr<CapturedWork>> EndCapture() override;
  void AbortCapture() override;
  IAllocator* staging_allocator() override { return pinned_.get(); }

  static constexpr size_t kCublasWorkspaceBytes = size_t{32} << 20;

 private:
  CudaExecutionProvider(KernelRegistry registry, std::shared_ptr<CudaAllocator> allocator);
  Status Init(const DeviceProviderOptions& options);

  std::string name_ = "CUDA";
  KernelRegistry registry_;
  std::shared_ptr<CudaAllocator> allocator_;
  std::shared_ptr<PinnedHostAllocator> pinned_ = std::make_shared<PinnedHostAllocator>();
  CudaResources resources_;
  void* cublas_workspace_ = nullptr;
  bool capture_enabled_ = true;
  bool capturing_ = false;
  PinnedStaging staging_;  // destroyed after the destructor has synchronized the stream
};

}  // namespace cuda
}  // namespace ontrain
