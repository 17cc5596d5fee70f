// libontrain_cuda.so's one exported symbol: the provider library API of providers/provider_library.h.
#include <cudnn.h>

#include "providers/cuda/cuda_provider.h"

namespace ontrain {
namespace cuda {
namespace {

Status Create(const DeviceProviderOptions& options, std::unique_ptr<IExecutionProvider>* out) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutionProvider> p, CudaExecutionProvider::Create(options));
  *out = std::move(p);
  return Status::OK();
}

#define ONT_STR_(x) #x
#define ONT_STR(x) ONT_STR_(x)

const ProviderLibraryApi kApi = {
    kProviderAbiVersion,
    ProviderAbiSizes(),
    "CUDA",
    "CUDA runtime " ONT_STR(CUDART_VERSION) ", cuBLAS " ONT_STR(CUBLAS_VER_MAJOR) "." ONT_STR(CUBLAS_VER_MINOR)
    ", cuDNN " ONT_STR(CUDNN_MAJOR) "." ONT_STR(CUDNN_MINOR) "; device code sm_80, sm_90, PTX compute_90",
    CountDevices,
    Create,
    CudaKernelList,
};

}  // namespace
}  // namespace cuda
}  // namespace ontrain

extern "C" __attribute__((visibility("default"))) const ontrain::ProviderLibraryApi* OntrainProviderLibrary() {
  return &ontrain::cuda::kApi;
}
