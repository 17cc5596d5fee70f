// LocalGroup: collectives as a barrier, a read of every rank's buffer, and a second barrier.
#include "distributed/local_group.h"

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace ontrain {

struct LocalGroup::Shared {
  int size = 1;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<void*> buffers;

  void Barrier() {
    std::unique_lock<std::mutex> lock(mu);
    uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen; });
    }
  }
};

namespace {

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(LocalGroup::Shared* g, int rank) : g_(g), rank_(rank) {}
  const char* name() const override { return "local"; }
  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  bool Accepts(const Device& device) const override { return device.is_host(); }

  Status AllReduceAverage(float* data, int64_t count, const Device& device) override {
    if (!Accepts(device)) return InvalidArgument("local all-reduce got a buffer on ", device.ToString());
    g_->buffers[rank_] = data;
    g_->Barrier();  // every rank's buffer is published
    sum_.assign(static_cast<size_t>(count), 0.0f);
    for (int r = 0; r < g_->size; ++r) {
      const float* src = static_cast<const float*>(g_->buffers[r]);
      for (int64_t i = 0; i < count; ++i) sum_[i] += src[i];
    }
    g_->Barrier();  // every rank has read every buffer
    const float inv = 1.0f / static_cast<float>(g_->size);
    for (int64_t i = 0; i < count; ++i) data[i] = sum_[i] * inv;
    return Status::OK();
  }

  Status Broadcast(void* data, int64_t bytes, int root, const Device& device) override {
    if (!Accepts(device)) return InvalidArgument("local broadcast got a buffer on ", device.ToString());
    if (root < 0 || root >= g_->size) return InvalidArgument("broadcast root ", root, " is not a rank");
    g_->buffers[rank_] = data;
    g_->Barrier();
    if (rank_ != root && bytes > 0) std::memcpy(data, g_->buffers[root], static_cast<size_t>(bytes));
    g_->Barrier();
    return Status::OK();
  }

  void Abort(const std::string& message, int exit_code) override {
    std::fprintf(stderr, "ontrain: rank %d of %d: %s\n", rank_, g_->size, message.c_str());
    std::exit(exit_code);
  }

 private:
  LocalGroup::Shared* g_;
  int rank_;
  std::vector<float> sum_;
};

}  // namespace

LocalGroup::LocalGroup(int size) : shared_(std::make_unique<Shared>()) {
  shared_->size = size < 1 ? 1 : size;
  shared_->buffers.assign(static_cast<size_t>(shared_->size), nullptr);
}

LocalGroup::~LocalGroup() = default;

std::unique_ptr<Communicator> LocalGroup::Rank(int rank) {
  return std::make_unique<LocalCommunicator>(shared_.get(), rank);
}

}  // namespace ontrain
