// Copy checks and host copies through a device's transfer.
#include "core/data_transfer.h"

namespace ontrain {

Status CheckCopyCompatible(const Tensor& src, const Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.NumElements() != dst.NumElements()) {
    return InvalidArgument("cannot copy ", DTypeName(src.dtype()), ShapeToString(src.shape()), " into ",
                           DTypeName(dst.dtype()), ShapeToString(dst.shape()));
  }
  return Status::OK();
}

IDataTransfer* FindTransfer(const std::vector<IDataTransfer*>& transfers, Device device) {
  for (IDataTransfer* t : transfers) {
    if (t != nullptr && t->device() == device) return t;
  }
  return nullptr;
}

StatusOr<Tensor> CopyToHost(const Tensor& t, const std::vector<IDataTransfer*>& transfers) {
  Tensor host;
  ONT_RETURN_IF_ERROR(CopyToHost(t, transfers, &host));
  return host;
}

Status CopyToHost(const Tensor& t, const std::vector<IDataTransfer*>& transfers, Tensor* host) {
  if (!t.defined() || t.device().is_host()) {
    *host = t;
    return Status::OK();
  }
  IDataTransfer* transfer = nullptr;
  ONT_RETURN_IF_ERROR(QueueCopyToHost(t, transfers, host, &transfer));
  return transfer->Synchronize();
}

Status QueueCopyToHost(const Tensor& t, const std::vector<IDataTransfer*>& transfers, Tensor* host,
                       IDataTransfer** transfer) {
  *transfer = FindTransfer(transfers, t.device());
  if (*transfer == nullptr) {
    return FailedPrecondition("a tensor lives on ", t.device().ToString(),
                              " and nothing that can copy from that device was given");
  }
  const bool reuse = host->SoleOwner() && host->device().is_host() && host->dtype() == t.dtype() &&
                     host->shape() == t.shape() && t.dtype() != DType::kString;
  if (!reuse) {
    ONT_ASSIGN_OR_RETURN(*host, Tensor::Allocate(t.dtype(), t.shape(), HostAllocator()));
  }
  return (*transfer)->CopyTensor(t, host);
}

}  // namespace ontrain
