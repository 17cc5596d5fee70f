// IDataTransfer: copies between the host and one device. Every execution provider is one; code below the
// engine (checkpoint saving, parameter getters, exports) reads tensors that live on a device through it
// without knowing anything else about providers.
#pragma once

#include <vector>

#include "core/allocator.h"
#include "core/status.h"
#include "core/tensor.h"

namespace ontrain {

class IDataTransfer {
 public:
  virtual ~IDataTransfer() = default;
  virtual Device device() const = 0;
  // Copies `src` into `dst` (same dtype and element count); each side is on the host or on device().
  // It returns once a host source may be reused; a copy to the host is complete only after Synchronize().
  virtual Status CopyTensor(const Tensor& src, Tensor* dst) = 0;
  // Waits until all work queued on the device (kernels and copies) has finished.
  virtual Status Synchronize() = 0;
};

// Checks that a copy between `src` and `dst` is well-formed (same dtype and element count).
Status CheckCopyCompatible(const Tensor& src, const Tensor& dst);

// The transfer serving `device` among `transfers`, or nullptr.
IDataTransfer* FindTransfer(const std::vector<IDataTransfer*>& transfers, Device device);

// `t` itself when it is on the host; otherwise a new host tensor holding its values, copied through the
// transfer of its device (an error names the device when `transfers` has none for it).
StatusOr<Tensor> CopyToHost(const Tensor& t, const std::vector<IDataTransfer*>& transfers);

// The same into *host: `t`'s values are written into *host when it is a host tensor of t's dtype and shape
// that nothing else holds (so that a loop reading a device value at every step allocates nothing), and
// into a new host tensor otherwise. A host `t` is shared, not copied.
Status CopyToHost(const Tensor& t, const std::vector<IDataTransfer*>& transfers, Tensor* host);

// CopyToHost's copy of a device tensor `t`, queued without waiting for it: *host is readable once
// `*transfer` (set to t's device's transfer) has synchronized, so that several copies wait once.
Status QueueCopyToHost(const Tensor& t, const std::vector<IDataTransfer*>& transfers, Tensor* host,
                       IDataTransfer** transfer);

}  // namespace ontrain
