// libontrain_mpi.so: the Communicator over MPI (Open MPI from Debian), on host buffers, and the library's one
// exported symbol. MPI is initialised when the first communicator is made and finalised at process exit.
//
// Errors: MPI_COMM_WORLD is set to return errors instead of aborting, so a failed call becomes a Status
// naming the call and MPI's message; the caller then decides to Abort the job. A rank that dies is noticed
// by mpirun, which ends the others.
// Only MPI's C interface: its C++ bindings (mpicxx.h) would need libmpi_cxx.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace ontrain {
namespace {

Status MpiError(const char* call, int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  return Internal(call, " failed: ", std::string(text, len), " (MPI error ", code, ")");
}

#define ONT_MPI(call)                                        \
  do {                                                       \
    int ont_mpi_rc = (call);                                 \
    if (ont_mpi_rc != MPI_SUCCESS) return MpiError(#call, ont_mpi_rc); \
  } while (0)

// One collective call handles at most INT_MAX elements; larger buffers go in pieces.
constexpr int64_t kMaxPiece = std::numeric_limits<int>::max() / 4;

void FinalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

class MpiCommunicator : public Communicator {
 public:
  static Status Create(std::unique_ptr<Communicator>* out) {
    int initialized = 0;
    ONT_MPI(MPI_Initialized(&initialized));
    if (!initialized) {
      int provided = 0;
      // Collectives come from one thread at a time (a session is used by one thread at a time).
      ONT_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided));
      std::atexit(FinalizeAtExit);
    }
    ONT_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    auto c = std::make_unique<MpiCommunicator>();
    ONT_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank_));
    ONT_MPI(MPI_Comm_size(MPI_COMM_WORLD, &c->size_));
    *out = std::move(c);
    return Status::OK();
  }

  const char* name() const override { return "MPI"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool Accepts(const Device& device) const override { return device.is_host(); }

  Status AllReduceAverage(float* data, int64_t count, const Device& device) override {
    if (!Accepts(device)) return InvalidArgument("MPI all-reduce got a buffer on ", device.ToString());
    for (int64_t off = 0; off < count; off += kMaxPiece) {
      int n = static_cast<int>(std::min(kMaxPiece, count - off));
      ONT_MPI(MPI_Allreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD));
    }
    if (size_ > 1) {
      const float inv = 1.0f / static_cast<float>(size_);
      for (int64_t i = 0; i < count; ++i) data[i] *= inv;
    }
    return Status::OK();
  }

  // MPI_Iallreduce in place; the division by size() happens in Wait.
  StatusOr<int> StartAllReduceAverage(float* data, int64_t count, const Device& device) override {
    if (!Accepts(device) || count > kMaxPiece) return Communicator::StartAllReduceAverage(data, count, device);
    Pending p;
    p.data = data;
    p.count = count;
    ONT_MPI(MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                           &p.request));
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (pending_[i].data == nullptr) {
        pending_[i] = p;
        return static_cast<int>(i);
      }
    }
    pending_.push_back(p);
    return static_cast<int>(pending_.size() - 1);
  }

  Status Wait(int request) override {
    if (request == kDone) return Status::OK();
    if (request < 0 || request >= static_cast<int>(pending_.size()) || pending_[request].data == nullptr) {
      return InvalidArgument("MPI: no request ", request, " is pending");
    }
    Pending& p = pending_[request];
    ONT_MPI(MPI_Wait(&p.request, MPI_STATUS_IGNORE));
    if (size_ > 1) {
      const float inv = 1.0f / static_cast<float>(size_);
      for (int64_t i = 0; i < p.count; ++i) p.data[i] *= inv;
    }
    p.data = nullptr;
    return Status::OK();
  }

  Status Progress() override {
    for (Pending& p : pending_) {
      if (p.data == nullptr || p.request == MPI_REQUEST_NULL) continue;
      int done = 0;
      ONT_MPI(MPI_Test(&p.request, &done, MPI_STATUS_IGNORE));  // a finished request becomes MPI_REQUEST_NULL
    }
    return Status::OK();
  }

  Status Broadcast(void* data, int64_t bytes, int root, const Device& device) override {
    if (!Accepts(device)) return InvalidArgument("MPI broadcast got a buffer on ", device.ToString());
    auto* p = static_cast<char*>(data);
    for (int64_t off = 0; off < bytes; off += kMaxPiece) {
      int n = static_cast<int>(std::min(kMaxPiece, bytes - off));
      ONT_MPI(MPI_Bcast(p + off, n, MPI_BYTE, root, MPI_COMM_WORLD));
    }
    return Status::OK();
  }

  void Abort(const std::string& message, int exit_code) override {
    std::fprintf(stderr, "ontrain: rank %d of %d: %s\n", rank_, size_, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }

 private:
  struct Pending {
    float* data = nullptr;  // null: the slot is free
    int64_t count = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  int rank_ = 0, size_ = 1;
  std::vector<Pending> pending_;  // grows to the number of buckets once, then reused
};

Status Create(const CommunicatorOptions&, std::unique_ptr<Communicator> bootstrap, std::unique_ptr<Communicator>* out) {
  if (bootstrap != nullptr) return InvalidArgument("the MPI communicator takes no bootstrap communicator");
  return MpiCommunicator::Create(out);
}

#define ONT_STR_(x) #x
#define ONT_STR(x) ONT_STR_(x)

const CommunicatorLibraryApi kApi = {
    kCommunicatorAbiVersion, CommunicatorAbiSizes(), "MPI",
#if defined(OMPI_MAJOR_VERSION)
    "Open MPI " ONT_STR(OMPI_MAJOR_VERSION) "." ONT_STR(OMPI_MINOR_VERSION) "." ONT_STR(OMPI_RELEASE_VERSION),
#else
    "MPI " ONT_STR(MPI_VERSION) "." ONT_STR(MPI_SUBVERSION),
#endif
    Create,
};

}  // namespace
}  // namespace ontrain

extern "C" __attribute__((visibility("default"))) const ontrain::CommunicatorLibraryApi* OntrainCommunicatorLibrary() {
  return &ontrain::kApi;
}
