// libontrain_nccl.so: the Communicator over NCCL, on one CUDA device per rank, and the library's one exported
// symbol. Rank 0's unique id reaches the other ranks over the MPI communicator it is given (the bootstrap),
// which it keeps for Abort and for host buffers.
//
// Ordering: the CUDA provider computes on its own stream. Before a collective this communicator waits for
// the device (cudaDeviceSynchronize), runs the collective on its own stream, and waits for that stream, so
// the gradients it reads are complete and the optimizer that follows reads the reduced ones. Averaging is
// NCCL's own (ncclAvg).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdio>
#include <memory>
#include <string>

#include "distributed/communicator.h"

namespace ontrain {
namespace {

#define ONT_CUDA(call)                                                                        \
  do {                                                                                        \
    cudaError_t ont_rc = (call);                                                              \
    if (ont_rc != cudaSuccess) return Internal(#call, " failed: ", cudaGetErrorString(ont_rc)); \
  } while (0)

#define ONT_NCCL(call)                                                                          \
  do {                                                                                          \
    ncclResult_t ont_rc = (call);                                                               \
    if (ont_rc != ncclSuccess) return Internal(#call, " failed: ", ncclGetErrorString(ont_rc)); \
  } while (0)

class NcclCommunicator : public Communicator {
 public:
  ~NcclCommunicator() override {
    if (comm_ != nullptr) ncclCommDestroy(comm_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  static Status Create(const CommunicatorOptions& options, std::unique_ptr<Communicator> bootstrap,
                       std::unique_ptr<Communicator>* out) {
    if (bootstrap == nullptr) return InvalidArgument("NCCL needs an MPI communicator to share its unique id");
    auto c = std::unique_ptr<NcclCommunicator>(new NcclCommunicator());
    c->device_ = options.device_index;
    ONT_CUDA(cudaSetDevice(c->device_));
    ncclUniqueId id;
    if (bootstrap->rank() == 0) ONT_NCCL(ncclGetUniqueId(&id));
    ONT_RETURN_IF_ERROR(bootstrap->Broadcast(&id, sizeof(id), 0, Device()).WithContext("sharing NCCL's unique id"));
    ONT_NCCL(ncclCommInitRank(&c->comm_, bootstrap->size(), id, bootstrap->rank()));
    ONT_CUDA(cudaStreamCreateWithFlags(&c->stream_, cudaStreamNonBlocking));
    c->bootstrap_ = std::move(bootstrap);
    *out = std::move(c);
    return Status::OK();
  }

  const char* name() const override { return "NCCL"; }
  int rank() const override { return bootstrap_->rank(); }
  int size() const override { return bootstrap_->size(); }
  bool Accepts(const Device& device) const override {
    return device.type == DeviceType::kCUDA && device.index == device_;
  }

  Status AllReduceAverage(float* data, int64_t count, const Device& device) override {
    if (device.is_host()) return bootstrap_->AllReduceAverage(data, count, device);
    if (!Accepts(device)) return InvalidArgument("NCCL all-reduce got a buffer on ", device.ToString());
    ONT_CUDA(cudaDeviceSynchronize());
    ONT_NCCL(ncclAllReduce(data, data, static_cast<size_t>(count), ncclFloat32, ncclAvg, comm_, stream_));
    ONT_CUDA(cudaStreamSynchronize(stream_));
    return Status::OK();
  }

  Status Broadcast(void* data, int64_t bytes, int root, const Device& device) override {
    if (device.is_host()) return bootstrap_->Broadcast(data, bytes, root, device);
    if (!Accepts(device)) return InvalidArgument("NCCL broadcast got a buffer on ", device.ToString());
    ONT_CUDA(cudaDeviceSynchronize());
    ONT_NCCL(ncclBroadcast(data, data, static_cast<size_t>(bytes), ncclUint8, root, comm_, stream_));
    ONT_CUDA(cudaStreamSynchronize(stream_));
    return Status::OK();
  }

  void Abort(const std::string& message, int exit_code) override {
    if (comm_ != nullptr) ncclCommAbort(comm_);
    comm_ = nullptr;
    bootstrap_->Abort(message, exit_code);
  }

 private:
  NcclCommunicator() = default;
  int device_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Communicator> bootstrap_;
};

Status Create(const CommunicatorOptions& options, std::unique_ptr<Communicator> bootstrap,
              std::unique_ptr<Communicator>* out) {
  return NcclCommunicator::Create(options, std::move(bootstrap), out);
}

#define ONT_STR_(x) #x
#define ONT_STR(x) ONT_STR_(x)

const CommunicatorLibraryApi kApi = {
    kCommunicatorAbiVersion, CommunicatorAbiSizes(), "NCCL",
    "NCCL " ONT_STR(NCCL_MAJOR) "." ONT_STR(NCCL_MINOR) "." ONT_STR(NCCL_PATCH), Create,
};

}  // namespace
}  // namespace ontrain

extern "C" __attribute__((visibility("default"))) const ontrain::CommunicatorLibraryApi* OntrainCommunicatorLibrary() {
  return &ontrain::kApi;
}
