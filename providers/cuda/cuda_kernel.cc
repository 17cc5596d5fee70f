// Helpers shared by the CUDA kernel classes.
#include "providers/cuda/cuda_kernel.h"

namespace ontrain {
namespace cuda {

StatusOr<void*> DeviceBuffer::Get(size_t bytes, CudaAllocator* allocator) {
  if (!t_.defined() || t_.SizeInBytes() < bytes) {
    ONT_ASSIGN_OR_RETURN(t_, Tensor::Allocate(DType::kUInt8, {static_cast<int64_t>(std::max<size_t>(bytes, 1))},
                                              allocator));
  }
  return t_.raw_data();
}

StatusOr<StridedSpace> BroadcastSpace(const Shape& out, const std::vector<Shape>& operands) {
  if (out.size() > static_cast<size_t>(kMaxDims) || operands.size() > 3) {
    return Unimplemented("the CUDA kernels handle up to ", kMaxDims, " dims, got ", out.size());
  }
  StridedSpace s;
  s.rank = static_cast<int>(out.size());
  for (int d = 0; d < s.rank; ++d) s.dims[d] = out[d];
  for (size_t k = 0; k < operands.size(); ++k) {
    const Shape& in = operands[k];
    if (in.size() > out.size()) return Internal("operand of rank ", in.size(), " in a space of rank ", out.size());
    int64_t stride = 1;
    for (int d = s.rank - 1; d >= 0; --d) {
      int j = d - (s.rank - static_cast<int>(in.size()));
      int64_t dim = j >= 0 ? in[j] : 1;
      if (dim != 1 && dim != out[d]) {
        return InvalidArgument("shape ", ShapeToString(in), " does not broadcast to ", ShapeToString(out));
      }
      s.strides[k][d] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  }
  if (s.rank == 0) {  // a scalar: one element
    s.rank = 1;
    s.dims[0] = 1;
  }
  return s;
}

Status CheckLaunchable(const Tensor& t, const char* what) {
  if (t.NumElements() < 0) return InvalidArgument(what, " has an invalid shape ", ShapeToString(t.shape()));
  return Status::OK();
}

}  // namespace cuda
}  // namespace ontrain
