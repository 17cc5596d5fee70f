// The CUDA provider: device selection, stream and library handles, copies, kernel runs.
#include "providers/cuda/cuda_provider.h"

#include <cstring>

namespace ontrain {
namespace cuda {

Status CountDevices(int* count) {
  *count = 0;
  cudaError_t e = cudaGetDeviceCount(count);
  if (e == cudaSuccess && *count > 0) return Status::OK();
  cudaGetLastError();
  if (e == cudaErrorInsufficientDriver) {
    return FailedPrecondition("no usable NVIDIA driver on this machine (cudaGetDeviceCount: ", cudaGetErrorName(e),
                              ": ", cudaGetErrorString(e), "); the CUDA provider needs a driver for CUDA 13 or newer");
  }
  if (e == cudaErrorNoDevice || (e == cudaSuccess && *count == 0)) {
    return FailedPrecondition("the NVIDIA driver reports no CUDA device on this machine (cudaGetDeviceCount: ",
                              cudaGetErrorName(e), ")");
  }
  return FailedPrecondition("CUDA is not usable on this machine (cudaGetDeviceCount: ", cudaGetErrorName(e), ": ",
                            cudaGetErrorString(e), ")");
}

CudaExecutionProvider::CudaExecutionProvider(KernelRegistry registry, std::shared_ptr<CudaAllocator> allocator)
    : registry_(std::move(registry)), allocator_(std::move(allocator)) {}

StatusOr<std::unique_ptr<CudaExecutionProvider>> CudaExecutionProvider::Create(const DeviceProviderOptions& options) {
  int count = 0;
  ONT_RETURN_IF_ERROR(CountDevices(&count));
  if (options.device_index < 0 || options.device_index >= count) {
    return InvalidArgument("CUDA device ", options.device_index, " does not exist; this machine has ", count,
                           " device", count == 1 ? "" : "s", " (0..", count - 1, ")");
  }
  if (options.next_kernel_seed != nullptr) SetSeedSource(options.next_kernel_seed);
  ONT_ASSIGN_OR_RETURN(KernelRegistry registry, KernelRegistry::Create(CudaKernelList()));
  std::unique_ptr<CudaExecutionProvider> p(
      new CudaExecutionProvider(std::move(registry), std::make_shared<CudaAllocator>(options.device_index)));
  ONT_RETURN_IF_ERROR(p->Init(options).WithContext(StrCat("CUDA device ", options.device_index)));
  return p;
}

PinnedStaging::~PinnedStaging() {
  for (cudaEvent_t& e : done_) {
    if (e != nullptr) {
      cudaEventSynchronize(e);
      cudaEventDestroy(e);
    }
  }
  if (base_ != nullptr) cudaFreeHost(base_);
}

Status PinnedStaging::Init() {
  void* p = nullptr;
  if (cudaHostAlloc(&p, kSlots * kSlotBytes + kReadbackBytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // no page-locked memory to be had: copies go directly
    return Status::OK();
  }
  base_ = static_cast<char*>(p);
  for (cudaEvent_t& e : done_) ONT_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return Status::OK();
}

Status PinnedStaging::CopyToDevice(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  const int slot = next_;
  next_ = (next_ + 1) % kSlots;
  char* buffer = base_ + static_cast<size_t>(slot) * kSlotBytes;
  // An event not yet recorded counts as complete, so the first use of a slot does not wait.
  ONT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_[slot]));
  std::memcpy(buffer, src, bytes);
  ONT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, buffer, bytes, cudaMemcpyHostToDevice, stream));
  ONT_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_[slot], stream));
  return Status::OK();
}

StatusOr<bool> PinnedStaging::QueueReadback(const Tensor& dst, const void* src, size_t bytes, cudaStream_t stream) {
  const size_t offset = (readback_used_ + 63) & ~size_t{63};
  if (base_ == nullptr || num_readbacks_ == kMaxReadbacks || offset + bytes > kReadbackBytes) return false;
  char* area = base_ + kSlots * kSlotBytes;
  ONT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(area + offset, src, bytes, cudaMemcpyDeviceToHost, stream));
  readbacks_[num_readbacks_++] = {dst, offset, bytes};
  readback_used_ = offset + bytes;
  return true;
}

void PinnedStaging::FinishReadbacks(bool done) {
  const char* area = base_ + kSlots * kSlotBytes;
  for (int i = 0; i < num_readbacks_; ++i) {
    Readback& r = readbacks_[i];
    if (done) std::memcpy(r.dst.raw_data(), area + r.offset, r.bytes);
    r.dst = Tensor();  // lets go of the destination's storage
  }
  num_readbacks_ = 0;
  readback_used_ = 0;
}

// A CUDA graph instantiated from a captured stream, launched on that stream.
class CudaGraphWork : public CapturedWork {
 public:
  CudaGraphWork(int device, cudaStream_t stream, cudaGraphExec_t exec, cudaEvent_t done)
      : device_(device), stream_(stream), exec_(exec), done_(done) {}
  ~CudaGraphWork() override {
    cudaSetDevice(device_);
    cudaEventSynchronize(done_);  // a graph still running keeps reading its staging
    cudaGraphExecDestroy(exec_);
    cudaEventDestroy(done_);
  }
  Status Replay() override {
    ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ONT_CUDA_RETURN_IF_ERROR(cudaGraphLaunch(exec_, stream_));
    ONT_CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, stream_));
    return Status::OK();
  }
  // An event never recorded counts as complete.
  Status WaitForReplay() override {
    ONT_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(done_));
    return Status::OK();
  }

 private:
  int device_;
  cudaStream_t stream_;
  cudaGraphExec_t exec_;
  cudaEvent_t done_;
};

Status CudaExecutionProvider::BeginCapture() {
  if (!capture_enabled_) return Unimplemented("the CUDA provider was made with graph_capture off");
  if (capturing_) return FailedPrecondition("the CUDA provider is already capturing");
  ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(resources_.device_index));
  ONT_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(resources_.stream, cudaStreamCaptureModeRelaxed));
  capturing_ = true;
  return Status::OK();
}

StatusOr<std::unique_ptr<CapturedWork>> CudaExecutionProvider::EndCapture() {
  if (!capturing_) return FailedPrecondition("the CUDA provider is not capturing");
  capturing_ = false;
  ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(resources_.device_index));
  cudaGraph_t graph = nullptr;
  cudaError_t e = cudaStreamEndCapture(resources_.stream, &graph);
  if (e != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    return CudaStatus(e, "cudaStreamEndCapture");
  }
  cudaGraphExec_t exec = nullptr;
  e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return CudaStatus(e, "cudaGraphInstantiate");
  }
  cudaEvent_t done = nullptr;
  if (cudaError_t ev = cudaEventCreateWithFlags(&done, cudaEventDisableTiming); ev != cudaSuccess) {
    cudaGraphExecDestroy(exec);
    return CudaStatus(ev, "cudaEventCreateWithFlags");
  }
  return std::unique_ptr<CapturedWork>(new CudaGraphWork(resources_.device_index, resources_.stream, exec, done));
}

void CudaExecutionProvider::AbortCapture() {
  if (!capturing_) return;
  capturing_ = false;
  cudaSetDevice(resources_.device_index);
  cudaGraph_t graph = nullptr;
  cudaStreamEndCapture(resources_.stream, &graph);
  if (graph != nullptr) cudaGraphDestroy(graph);
  cudaGetLastError();
}

Status CudaExecutionProvider::Init(const DeviceProviderOptions& options) {
  CudaResources& r = resources_;
  capture_enabled_ = options.graph_capture && !LaunchBlocking();  // a replay would hide which node faulted
  r.device_index = options.device_index;
  r.deterministic = options.deterministic;
  r.allocator = allocator_.get();
  ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(r.device_index));
  ONT_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking));
  ONT_CUBLAS_RETURN_IF_ERROR(cublasCreate(&r.cublas));
  ONT_CUBLAS_RETURN_IF_ERROR(cublasSetStream(r.cublas, r.stream));
  // No TF32 and no reduced-precision reductions: float32 results stay comparable with the CPU provider's.
  ONT_CUBLAS_RETURN_IF_ERROR(cublasSetMathMode(r.cublas, r.deterministic ? CUBLAS_PEDANTIC_MATH : CUBLAS_DEFAULT_MATH));
  // A workspace of its own, so that no cuBLAS call allocates (which a captured stream would not allow).
  cublas_workspace_ = allocator_->Allocate(kCublasWorkspaceBytes);
  if (cublas_workspace_ == nullptr) {
    return ResourceExhausted("no device memory for cuBLAS's workspace (", kCublasWorkspaceBytes, " bytes)");
  }
  ONT_CUBLAS_RETURN_IF_ERROR(cublasSetWorkspace(r.cublas, cublas_workspace_, kCublasWorkspaceBytes));
  ONT_CUBLAS_RETURN_IF_ERROR(cublasLtCreate(&r.cublaslt));
  r.blas_workspace = cublas_workspace_;
  r.blas_workspace_bytes = kCublasWorkspaceBytes;
  ONT_CUDNN_RETURN_IF_ERROR(cudnnCreate(&r.cudnn));
  ONT_CUDNN_RETURN_IF_ERROR(cudnnSetStream(r.cudnn, r.stream));
  ONT_RETURN_IF_ERROR(staging_.Init());
  return Status::OK();
}

CudaExecutionProvider::~CudaExecutionProvider() {
  CudaResources& r = resources_;
  AbortCapture();
  if (r.stream != nullptr) {
    cudaSetDevice(r.device_index);
    staging_.FinishReadbacks(cudaStreamSynchronize(r.stream) == cudaSuccess);
  }
  if (r.cudnn != nullptr) cudnnDestroy(r.cudnn);
  if (r.cublaslt != nullptr) cublasLtDestroy(r.cublaslt);
  if (r.cublas != nullptr) cublasDestroy(r.cublas);
  if (cublas_workspace_ != nullptr) allocator_->Free(cublas_workspace_);
  if (r.stream != nullptr) cudaStreamDestroy(r.stream);
}

Status CudaExecutionProvider::CopyTensor(const Tensor& src, Tensor* dst) {
  ONT_RETURN_IF_ERROR(CheckCopyCompatible(src, *dst));
  Device me = device();
  bool src_here = src.device() == me, dst_here = dst->device() == me;
  if ((!src_here && !src.device().is_host()) || (!dst_here && !dst->device().is_host())) {
    return InvalidArgument("the CUDA provider copies between the host and ", me.ToString(), "; got ",
                           src.device().ToString(), " -> ", dst->device().ToString());
  }
  size_t bytes = src.SizeInBytes();
  if (bytes == 0 || src.raw_data() == dst->raw_data()) return Status::OK();
  cudaMemcpyKind kind = src_here ? (dst_here ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                                 : (dst_here ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(resources_.device_index));
  if (capturing_) {
    // Recorded: the source is read again at every replay, so it is the caller's (page-locked) staging.
    if (kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost) {
      return FailedPrecondition("the CUDA provider cannot copy to the host while capturing (", bytes, " bytes)");
    }
    ONT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->raw_data(), src.raw_data(), bytes, kind, resources_.stream));
    return Status::OK();
  }
  if (kind == cudaMemcpyHostToDevice && staging_.enabled() && bytes <= PinnedStaging::kSlotBytes) {
    return staging_.CopyToDevice(dst->raw_data(), src.raw_data(), bytes, resources_.stream);
  }
  if (kind == cudaMemcpyDeviceToHost) {
    ONT_ASSIGN_OR_RETURN(bool queued, staging_.QueueReadback(*dst, src.raw_data(), bytes, resources_.stream));
    if (queued) return Status::OK();
    // Copied directly: the queued readbacks land first, so that a destination written twice ends with the
    // later copy (a copy into pageable memory waits for the stream anyway).
    if (staging_.pending_readbacks() > 0) ONT_RETURN_IF_ERROR(Synchronize());
  }
  // From pageable host memory the call returns once the source has been staged, so the caller may reuse
  // it; into pageable host memory it returns when the copy is done.
  ONT_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst->raw_data(), src.raw_data(), bytes, kind, resources_.stream));
  return Status::OK();
}

Status CudaExecutionProvider::Run(OpKernel& kernel, KernelContext& ctx) {
  auto* k = dynamic_cast<CudaKernel*>(&kernel);
  if (k == nullptr) return Internal("the CUDA provider was given a kernel that is not a CUDA kernel");
  ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(resources_.device_index));
  ONT_RETURN_IF_ERROR(k->ComputeCuda(resources_, ctx));
  // A launch configuration error shows here; a fault inside a kernel shows at a later check, or here when
  // CUDA_LAUNCH_BLOCKING=1 has the provider wait for each kernel (never while capturing: capture is off then).
  ONT_CUDA_RETURN_IF_ERROR(cudaPeekAtLastError());
  if (LaunchBlocking()) ONT_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(resources_.stream));
  return Status::OK();
}

Status CudaExecutionProvider::Synchronize() {
  if (capturing_) return FailedPrecondition("the CUDA provider cannot synchronize while capturing");
  ONT_CUDA_RETURN_IF_ERROR(cudaSetDevice(resources_.device_index));
  const cudaError_t e = cudaStreamSynchronize(resources_.stream);
  staging_.FinishReadbacks(e == cudaSuccess);
  return CudaStatus(e, "cudaStreamSynchronize(resources_.stream)");
}

}  // namespace cuda
}  // namespace ontrain
