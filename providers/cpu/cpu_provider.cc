// CPU provider construction, host copies, and running a kernel (in the flush-to-zero mode when asked).
#include "providers/cpu/cpu_provider.h"

#include "providers/cpu/kernels/gemm.h"

#include <cstring>
#include <thread>

namespace ontrain {

CpuExecutionProvider::CpuExecutionProvider(KernelRegistry registry, int threads, const CpuProviderOptions& options)
    : registry_(std::move(registry)),
      pool_(std::make_unique<ThreadPool>(threads, options.tune_pool, options.flush_denormals)),
      flush_denormals_(options.flush_denormals) {}

StatusOr<std::unique_ptr<CpuExecutionProvider>> CpuExecutionProvider::Create(const CpuProviderOptions& options) {
  if (options.intra_op_threads < 0) {
    return InvalidArgument("intra_op_threads must be >= 0, got ", options.intra_op_threads);
  }
  int threads = options.intra_op_threads;
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.flush_denormals && !CanFlushDenormals()) {
    return Unimplemented("flush_denormals: this build's CPU has no flush-to-zero mode (x86 SSE only)");
  }
  ONT_ASSIGN_OR_RETURN(KernelRegistry registry, KernelRegistry::Create(CpuKernelList()));
  cpu::InitBlas();  // before the pool's threads run any kernel
  return std::unique_ptr<CpuExecutionProvider>(new CpuExecutionProvider(std::move(registry), threads, options));
}

Status CpuExecutionProvider::Run(OpKernel& kernel, KernelContext& ctx) {
  ScopedFlushDenormals flush(flush_denormals_);  // the caller's own mode comes back after the kernel
  return kernel.Compute(ctx);
}

Status CpuExecutionProvider::CopyTensor(const Tensor& src, Tensor* dst) {
  ONT_RETURN_IF_ERROR(CheckCopyCompatible(src, *dst));
  if (!src.device().is_host() || !dst->device().is_host()) {
    return InvalidArgument("the CPU provider copies host tensors only; got ", src.device().ToString(), " -> ",
                           dst->device().ToString());
  }
  if (src.SizeInBytes() > 0 && src.raw_data() != dst->raw_data()) {
    std::memcpy(dst->raw_data(), src.raw_data(), src.SizeInBytes());
  }
  return Status::OK();
}

}  // namespace ontrain
