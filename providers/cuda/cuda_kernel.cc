// Helpers shared by the CUDA kernel classes.
#include "providers/cuda/cuda_kernel.h"

#include <atomic>

#include "core/random.h"

namespace ontrain {
namespace cuda {

StatusOr<void*> DeviceBuffer::Get(size_t bytes, CudaAllocator* allocator) {
  if (!t_.defined() || t_.SizeInBytes() < bytes) {
    ONT_ASSIGN_OR_RETURN(t_, Tensor::Allocate(DType::kUInt8, {static_cast<int64_t>(std::max<size_t>(bytes, 1))},
                                              allocator));
  }
  return t_.raw_data();
}

StatusOr<StridedSpace> BroadcastSpace(const Shape& out,
                                      std::initializer_list<std::reference_wrapper<const Shape>> operands) {
  if (out.size() > static_cast<size_t>(kMaxDims) || operands.size() > 3) {
    return Unimplemented("the CUDA kernels handle up to ", kMaxDims, " dims, got ", out.size());
  }
  StridedSpace s;
  s.rank = static_cast<int>(out.size());
  for (int d = 0; d < s.rank; ++d) s.dims[d] = out[d];
  size_t k = 0;
  for (const Shape& in : operands) {
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
    ++k;
  }
  if (s.rank == 0) {  // a scalar: one element
    s.rank = 1;
    s.dims[0] = 1;
  }
  return s;
}

namespace {

// Copies x (`rank` dims without size-1 entries, axis d reduced when bit d of `red` is set) into
// [kept..., reduced...] order; outer = kept count, len = reduced count.
StatusOr<const float*> TransposeReducedLast(const CudaResources& r, const float* x, const int64_t* dims, int rank,
                                            uint64_t red, int64_t* outer, int64_t* len, DeviceBuffer* scratch) {
  if (rank > kMaxDims) return Unimplemented("reduction over rank ", rank);
  int64_t strides[kMaxDims];
  int64_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= dims[d];
  }
  StridedSpace sp;
  sp.rank = rank;
  int k = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int d = 0; d < rank; ++d) {
      if (((red >> d) & 1) != static_cast<uint64_t>(pass)) continue;
      sp.dims[k] = dims[d];
      sp.strides[1][k] = strides[d];
      (pass == 0 ? *outer : *len) *= dims[d];
      ++k;
    }
  }
  int64_t total = s;
  s = 1;
  for (int d = sp.rank - 1; d >= 0; --d) {
    sp.strides[0][d] = s;
    s *= sp.dims[d];
  }
  ONT_ASSIGN_OR_RETURN(void* buf, scratch->Get(sizeof(float) * total, r.allocator));
  ONT_RETURN_IF_ERROR(CudaStatus(StridedCopy(x, buf, sp, 4, r.stream), "StridedCopy"));
  return static_cast<const float*>(buf);
}

}  // namespace

Status ReduceAxes(const CudaResources& r, ReduceOp op, const float* x, const Shape& shape, uint64_t reduced, float* y,
                  DeviceBuffer* scratch) {
  if (shape.size() > 64) return Unimplemented("reduction over rank ", shape.size());
  // 1. Drop size-1 dims; find whether the reduced dims are one run.
  int64_t dims[64];
  uint64_t red = 0;
  int rank = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if ((reduced >> d) & 1) red |= uint64_t{1} << rank;
    dims[rank++] = shape[d];
  }
  int first = -1, last = -1;
  for (int d = 0; d < rank; ++d) {
    if (!((red >> d) & 1)) continue;
    if (first < 0) first = d;
    last = d;
  }
  bool run = true;
  for (int d = first; d >= 0 && d <= last; ++d) run = run && ((red >> d) & 1);
  // 2. [outer, len, inner] directly, or after a transposition.
  int64_t outer = 1, len = 1, inner = 1;
  float* partial = nullptr;  // the column ranges' partial results, where the rows are split (reduce.cu)
  if (run) {
    for (int d = 0; d < rank; ++d) {
      if (first < 0 || d < first) outer *= dims[d];
      else if (d <= last) len *= dims[d];
      else inner *= dims[d];
    }
    if (const int64_t splits = ReduceSplits(op, outer, len, inner); splits > 1) {
      ONT_ASSIGN_OR_RETURN(void* buf, scratch->Get(sizeof(float) * splits * outer * inner, r.allocator));
      partial = static_cast<float*>(buf);
    }
  } else {
    ONT_ASSIGN_OR_RETURN(x, TransposeReducedLast(r, x, dims, rank, red, &outer, &len, scratch));
  }
  return CudaStatus(Reduce(op, x, y, outer, len, inner, partial, r.stream), "Reduce");
}

Status SumToShape(const CudaResources& r, const float* x, const Shape& full, const Shape& target, float* y,
                  DeviceBuffer* scratch) {
  if (full.size() > 64) return Unimplemented("reduction over rank ", full.size());
  uint64_t reduced = 0;
  size_t lead = full.size() - target.size();
  for (size_t d = 0; d < full.size(); ++d) {
    if (d < lead || (target[d - lead] == 1 && full[d] != 1)) reduced |= uint64_t{1} << d;
  }
  return ReduceAxes(r, ReduceOp::kSum, x, full, reduced, y, scratch);
}

namespace {
std::atomic<uint64_t (*)()> seed_source{nullptr};
}  // namespace

uint64_t NextSeed() {
  uint64_t (*source)() = seed_source.load();
  return source != nullptr ? source() : NextKernelSeed();
}

void SetSeedSource(uint64_t (*source)()) { seed_source.store(source); }

Status RefuseWhileCapturing(const CudaResources& r, const char* what) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  ONT_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(r.stream, &status));
  if (status == cudaStreamCaptureStatusNone) return Status::OK();
  return FailedPrecondition(what, " while the stream is captured; these shapes run eagerly");
}

Status CheckLaunchable(const Tensor& t, const char* what) {
  if (t.NumElements() < 0) return InvalidArgument(what, " has an invalid shape ", ShapeToString(t.shape()));
  return Status::OK();
}

}  // namespace cuda
}  // namespace ontrain
