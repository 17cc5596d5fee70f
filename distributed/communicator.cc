// OpenCommunicator: loading the MPI and NCCL communicator libraries.
#include "distributed/communicator.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/plugin_library.h"

namespace ontrain {
namespace {

StatusOr<const CommunicatorLibraryApi*> LoadLibrary(const std::string& file, const std::string& runfiles_path,
                                                    const std::string& path_env) {
  ONT_ASSIGN_OR_RETURN(void* sym, LoadPluginSymbol(file, runfiles_path, path_env, "OntrainCommunicatorLibrary"));
  using Entry = const CommunicatorLibraryApi* (*)();
  const CommunicatorLibraryApi* api = reinterpret_cast<Entry>(sym)();
  if (api == nullptr || api->abi_version != kCommunicatorAbiVersion || api->abi_sizes != CommunicatorAbiSizes()) {
    return FailedPrecondition(file, " was built by another version of ontrain; rebuild it together with this binary");
  }
  return api;
}

}  // namespace

int LauncherWorldSize() {
  for (const char* env : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"}) {
    const char* v = std::getenv(env);
    if (v != nullptr && v[0]) {
      int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  return 1;
}

int LauncherLocalRank() {
  for (const char* env : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    const char* v = std::getenv(env);
    if (v != nullptr && v[0]) return std::max(0, std::atoi(v));
  }
  return 0;
}

StatusOr<std::unique_ptr<Communicator>> OpenCommunicator(const std::string& kind, const CommunicatorOptions& options) {
  if (kind != "mpi" && kind != "nccl") {
    return InvalidArgument("unknown communicator \"", kind, "\"; the choices are mpi and nccl");
  }
  auto mpi = LoadLibrary("libontrain_mpi.so", "ontrain/distributed/mpi/libontrain_mpi.so", "ONTRAIN_MPI_LIBRARY");
  if (!mpi.ok()) {
    if (mpi.status().code() != StatusCode::kNotFound) return mpi.status().WithContext("data-parallel training over MPI");
    return mpi.status().WithContext("data-parallel training over MPI (this build has no MPI communicator: "
                                    "install libopenmpi-dev and openmpi-bin, then rebuild)");
  }
  std::unique_ptr<Communicator> world;
  ONT_RETURN_IF_ERROR((*mpi)->Create(options, nullptr, &world).WithContext("starting MPI"));
  if (kind == "mpi") return world;
  ONT_ASSIGN_OR_RETURN(const CommunicatorLibraryApi* nccl,
                       LoadLibrary("libontrain_nccl.so", "ontrain/distributed/nccl/libontrain_nccl.so",
                                   "ONTRAIN_NCCL_LIBRARY")
                           .WithContext("data-parallel training over NCCL (this build has no CUDA toolkit with NCCL)"));
  std::unique_ptr<Communicator> out;
  ONT_RETURN_IF_ERROR(nccl->Create(options, std::move(world), &out).WithContext("starting NCCL"));
  return out;
}

}  // namespace ontrain
