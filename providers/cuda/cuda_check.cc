// Error texts of the three libraries.
#include "providers/cuda/cuda_check.h"

#include <string>

namespace ontrain {
namespace cuda {

// The call text up to its argument list ("cudaMemcpyAsync(dst, ...)" -> "cudaMemcpyAsync").
static std::string CallName(const char* call) {
  std::string s(call);
  size_t paren = s.find('(');
  return paren == std::string::npos ? s : s.substr(0, paren);
}

Status CudaStatus(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return Status::OK();
  cudaGetLastError();  // clear a non-sticky error so that the next call does not report it again
  return Internal(CallName(call), ": ", cudaGetErrorName(e), " (", static_cast<int>(e), "): ", cudaGetErrorString(e));
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
