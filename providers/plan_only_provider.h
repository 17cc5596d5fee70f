// PlanOnlyProvider: a device provider reduced to its name, device and kernel list, for placement reports
// (`ontrain info --provider cuda,cpu`) on machines without the device. It plans like the real provider
// (capability comes from the same kernel list) but allocates, copies and runs nothing: each such call is
// an error saying so.
#pragma once

#include <string>
#include <vector>

#include "providers/execution_provider.h"

namespace ontrain {

class PlanOnlyProvider : public IExecutionProvider {
 public:
  PlanOnlyProvider(std::string name, Device device, KernelRegistry registry)
      : name_(std::move(name)), device_(device), registry_(std::move(registry)) {}

  const std::string& name() const override { return name_; }
  Device device() const override { return device_; }
  const KernelRegistry& kernel_registry() const override { return registry_; }
  IAllocator* allocator() override { return nullptr; }
  Status CopyTensor(const Tensor&, Tensor*) override { return Unavailable(); }
  Status Run(OpKernel&, KernelContext&) override { return Unavailable(); }
  Status Synchronize() override { return Unavailable(); }

 private:
  Status Unavailable() const {
    return FailedPrecondition("provider ", name_, " was created for planning only; it cannot run anything");
  }

  std::string name_;
  Device device_;
  KernelRegistry registry_;
};

}  // namespace ontrain
