// What a CUDA kernel needs to run: the provider's stream, library handles and allocator (CudaResources),
// and the CudaKernel base class, whose ComputeCuda the CUDA provider calls in place of OpKernel::Compute.
// Kernels queue work on the stream and return; nothing waits for the device.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <vector>

#include "core/tensor.h"
#include "providers/cuda/cuda_allocator.h"
#include "providers/cuda/cuda_check.h"
#include "providers/cuda/kernels/launch.h"
#include "providers/kernel.h"

namespace ontrain {
namespace cuda {

struct CudaResources {
  int device_index = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  cudnnHandle_t cudnn = nullptr;
  // cuBLAS's workspace, which cuBLASLt calls share (the same stream orders them).
  void* blas_workspace = nullptr;
  size_t blas_workspace_bytes = 0;
  bool deterministic = true;
  CudaAllocator* allocator = nullptr;  // device buffers a kernel keeps between runs (workspaces, tables)
};

class CudaKernel : public OpKernel {
 public:
  Status Compute(KernelContext&) final {
    return Internal("a CUDA kernel runs only through the CUDA provider");
  }
  virtual Status ComputeCuda(const CudaResources& cuda, KernelContext& ctx) = 0;
};

// A device buffer a kernel keeps: grown (never shrunk) through the provider's caching allocator.
class DeviceBuffer {
 public:
  StatusOr<void*> Get(size_t bytes, CudaAllocator* allocator);

 private:
  Tensor t_;
};

// The broadcast iteration space of `out` over up to three operand shapes (operand k reads shapes[k] with
// numpy broadcasting). Fails past kMaxDims dims. The shapes are referred to, not copied: nothing allocates.
StatusOr<StridedSpace> BroadcastSpace(const Shape& out,
                                      std::initializer_list<std::reference_wrapper<const Shape>> operands);

// Reduces x of `shape` over the axes whose bits are set in `reduced` (bit d: axis d) into y (the kept dims,
// in order). The reduced axes (ignoring size-1 dims) become [outer, len, inner] for the device kernel; when
// they are not one contiguous run, x is first transposed into a kept-then-reduced order in `scratch`; column
// sums split over row ranges keep their partial results there. Nothing allocates on the host once
// `scratch` is large enough.
Status ReduceAxes(const CudaResources& r, ReduceOp op, const float* x, const Shape& shape, uint64_t reduced, float* y,
                  DeviceBuffer* scratch);

// Sums x of `full` into y of `target`, a shape that broadcasts to `full` (the gradient of a broadcast).
Status SumToShape(const CudaResources& r, const float* x, const Shape& full, const Shape& target, float* y,
                  DeviceBuffer* scratch);

// A seed for a random kernel without a seed attribute: from the engine's source (SetSeedSource, at
// provider creation) so that the engine's global seed makes runs reproducible, else this library's own.
uint64_t NextSeed();
void SetSeedSource(uint64_t (*source)());

// An error while the provider's stream is captured (graph capture): a kernel whose host-made tables
// changed would upload them from pageable memory, which a recording cannot replay. The executor then runs
// those shapes eagerly. Tables that do not change are uploaded before, in the eager runs that precede a
// recording, and a captured run only reads them on the device.
Status RefuseWhileCapturing(const CudaResources& r, const char* what);

// Element-count checks the launchers rely on (int64 sizes, at most 2^31 blocks).
Status CheckLaunchable(const Tensor& t, const char* what);

}  // namespace cuda
}  // namespace ontrain
