// CudaExecutionProvider: runs the CUDA kernel list on one device with one stream, and is the data transfer
// between that device and the host.
//
// - Memory: every device buffer (the executor's arenas, tensors, kernel workspaces) comes from one caching
//   allocator (cuda_allocator.h).
// - Order: kernels and copies are queued on the session's stream; Synchronize waits for it. A copy to the
//   host is complete only after Synchronize, as IDataTransfer says (the planner inserts it).
// - Errors: a failing CUDA, cuBLAS or cuDNN call becomes a Status naming the call; the executor adds the
//   node. An asynchronous fault surfaces at the next call that checks, at the latest at Synchronize.
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

 private:
  CudaExecutionProvider(KernelRegistry registry, std::shared_ptr<CudaAllocator> allocator);
  Status Init(const DeviceProviderOptions& options);

  std::string name_ = "CUDA";
  KernelRegistry registry_;
  std::shared_ptr<CudaAllocator> allocator_;
  CudaResources resources_;
};

}  // namespace cuda
}  // namespace ontrain
