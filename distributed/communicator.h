// Communicator: what data-parallel training asks of MPI or NCCL, and how the engine gets one.
//
// Every rank of a data-parallel job holds the whole model and trains on its own shard of each batch; a
// communicator broadcasts the parameters from rank 0 at the start and averages the gradients across ranks
// before every optimizer step. Every rank must call the same collectives in the same order with the same
// sizes (MPI's and NCCL's rule): a rank that skips one leaves the others waiting. The average can also be
// started and waited for later, so that it overlaps with the rest of the backward pass.
//
// Implementations: MPI over host memory (libontrain_mpi.so, distributed/mpi), NCCL over CUDA device memory
// (libontrain_nccl.so, distributed/nccl), each built only where its library is installed and loaded at run
// time, so nothing else in ontrain links either; and LocalGroup (local_group.h), ranks as threads of one
// process, for tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/allocator.h"
#include "core/status.h"

namespace ontrain {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual const char* name() const = 0;  // "MPI", "NCCL", "local"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Whether buffers on `device` can be handed to the collectives as they are (MPI: host memory; NCCL: its
  // CUDA device). Others are staged through the host by the caller.
  virtual bool Accepts(const Device& device) const = 0;
  // Replaces data[0..count) on every rank with the elementwise mean over ranks (float32): the sum, then
  // divided by size(). The order of the additions is the library's, but every rank gets the same bits.
  virtual Status AllReduceAverage(float* data, int64_t count, const Device& device) = 0;
  // The same, started without waiting: returns a request to pass to Wait, and `data` must not be touched
  // until Wait returns. Every rank must start the same requests in the same order. A communicator that
  // cannot overlap (the default) completes the average here and returns kDone.
  static constexpr int kDone = -1;
  virtual StatusOr<int> StartAllReduceAverage(float* data, int64_t count, const Device& device) {
    ONT_RETURN_IF_ERROR(AllReduceAverage(data, count, device));
    return kDone;
  }
  virtual Status Wait(int request) { return request == kDone ? Status::OK() : InvalidArgument("unknown request"); }
  // Lets started requests advance (MPI moves a non-blocking collective along only inside its calls); cheap.
  virtual Status Progress() { return Status::OK(); }
  // Replaces data[0..bytes) on every rank with rank `root`'s.
  virtual Status Broadcast(void* data, int64_t bytes, int root, const Device& device) = 0;
  // Ends every rank of the job after printing `message` to stderr: a rank that cannot go on must not leave
  // the others blocked in a collective. Returns only where the library cannot abort (then the caller exits).
  virtual void Abort(const std::string& message, int exit_code) = 0;
};

// What a communicator library is asked for.
struct CommunicatorOptions {
  int device_index = 0;  // NCCL: the CUDA device of this rank
};

// Where the launcher says this process is one of several ranks (mpirun's OMPI_COMM_WORLD_SIZE, or PMIx's
// or Slurm's PMI_SIZE / PMIX_SIZE): that size, else 1.
int LauncherWorldSize();
// This process's rank among the ranks on its machine (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID,
// SLURM_LOCALID), else 0: which GPU a rank takes.
int LauncherLocalRank();

// Opens the communicator `kind` ("mpi" or "nccl") by loading its library (found as
// core/plugin_library.h describes, or at $ONTRAIN_MPI_LIBRARY / $ONTRAIN_NCCL_LIBRARY). NCCL's unique id
// travels over MPI, so "nccl" loads both. An error says which library is missing or why it failed.
StatusOr<std::unique_ptr<Communicator>> OpenCommunicator(const std::string& kind, const CommunicatorOptions& options);

// The ABI between the engine and a communicator library: one exported C symbol, `OntrainCommunicatorLibrary`,
// returning this struct. Like provider libraries, a communicator library is only loaded by the build it came
// from, which `abi_version` checks.
constexpr uint32_t kCommunicatorAbiVersion = 1;
struct CommunicatorLibraryApi {
  uint32_t abi_version;
  uint64_t abi_sizes;      // sizeof of the types crossing the boundary, summed
  const char* name;        // "MPI"
  const char* build_info;  // the library's version
  // `bootstrap` is null for MPI; for NCCL, an MPI communicator over the same ranks, which carries the unique
  // id and which the NCCL communicator keeps (it aborts the job through it).
  Status (*Create)(const CommunicatorOptions& options, std::unique_ptr<Communicator> bootstrap,
                   std::unique_ptr<Communicator>* out);
};
constexpr uint64_t CommunicatorAbiSizes() {
  return sizeof(Status) + sizeof(CommunicatorOptions) * 3 + sizeof(Device) * 5 + sizeof(CommunicatorLibraryApi) * 7;
}

}  // namespace ontrain
