// Shared helpers for providers.
#include "providers/execution_provider.h"

namespace ontrain {

Status CheckCopyCompatible(const Tensor& src, const Tensor& dst) {
  if (src.dtype() != dst.dtype() || src.NumElements() != dst.NumElements()) {
    return InvalidArgument("cannot copy ", DTypeName(src.dtype()), ShapeToString(src.shape()), " into ",
                           DTypeName(dst.dtype()), ShapeToString(dst.shape()));
  }
  return Status::OK();
}

}  // namespace ontrain
