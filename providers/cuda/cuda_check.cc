// Error texts of the three libraries.
#include "providers/cuda/cuda_check.h"

#include <cstdlib>
#include <string>

namespace ontrain {
namespace cuda {

// The call text up to its argument list ("cudaMemcpyAsync(dst, ...)" -> "cudaMemcpyAsync").
static std::string CallName(const char* call) {
  std::string s(call);
  size_t paren = s.find('(');
  return paren == std::string::npos ? s : s.substr(0, paren);
}

bool LaunchBlocking() {
  static const bool blocking = [] {
    const char* v = std::getenv("CUDA_LAUNCH_BLOCKING");
    return v != nullptr && std::string(v) == "1";
  }();
  return blocking;
}

// Errors that a fault inside a kernel leaves on the context: every later call returns them, whichever call
// it is, so the one that reports it says nothing about where the fault was.
static bool IsDeviceFault(cudaError_t e) {
  return e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure || e == cudaErrorIllegalInstruction ||
         e == cudaErrorMisalignedAddress || e == cudaErrorInvalidAddressSpace || e == cudaErrorInvalidPc ||
         e == cudaErrorHardwareStackError || e == cudaErrorAssert || e == cudaErrorLaunchTimeout;
}

Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::OK();
  cudaGetLastError();  // clear a non-sticky error so that the next call does not report it again
  const char* advice = IsDeviceFault(e) && !LaunchBlocking()
                           ? " (a fault in device work queued earlier, which runs asynchronously; run with "
                             "CUDA_LAUNCH_BLOCKING=1 to have the failing node named)"
                           : "";
  return Internal(CallName(call), ": ", cudaGetErrorName(e), " (", static_cast<int>(e), "): ", cudaGetErrorString(e),
                  advice);
}

Status CublasStatus(cublasStatus_t e, const char* call) {
  if (e == CUBLAS_STATUS_SUCCESS) return Status::OK();
  return Internal(CallName(call), ": ", cublasGetStatusName(e), ": ", cublasGetStatusString(e));
}

Status CudnnStatus(cudnnStatus_t e, const char* call) {
  if (e == CUDNN_STATUS_SUCCESS) return Status::OK();
  return Internal(CallName(call), ": ", cudnnGetErrorString(e), " (", static_cast<int>(e), ")");
}

}  // namespace cuda
}  // namespace ontrain
