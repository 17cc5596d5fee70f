// CUDA, cuBLAS and cuDNN results as Statuses that name the failing call, so an error in a kernel reads
// `MatMul "fc1": cublasSgemmStridedBatched: CUBLAS_STATUS_EXECUTION_FAILED` once the executor adds the node.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "core/status.h"

namespace ontrain {
namespace cuda {

Status CudaStatus(cudaError_t e, const char* call);

// CUDA_LAUNCH_BLOCKING=1 in the environment (read once), as PyTorch users know it: the provider then waits
// for each kernel, so that a fault inside one is reported by that kernel's node instead of by a later copy
// or synchronization (and runs are not recorded as graphs). Without it, CudaStatus adds that advice to the
// errors that a fault in earlier device work leaves behind (cudaErrorIllegalAddress and its kin).
bool LaunchBlocking();
Status CublasStatus(cublasStatus_t e, const char* call);
Status CudnnStatus(cudnnStatus_t e, const char* call);

// Each evaluates `expr` once and returns a Status naming the call text when it failed.
#define ONT_CUDA_RETURN_IF_ERROR(expr) ONT_RETURN_IF_ERROR(::ontrain::cuda::CudaStatus((expr), #expr))
#define ONT_CUBLAS_RETURN_IF_ERROR(expr) ONT_RETURN_IF_ERROR(::ontrain::cuda::CublasStatus((expr), #expr))
#define ONT_CUDNN_RETURN_IF_ERROR(expr) ONT_RETURN_IF_ERROR(::ontrain::cuda::CudnnStatus((expr), #expr))

}  // namespace cuda
}  // namespace ontrain
