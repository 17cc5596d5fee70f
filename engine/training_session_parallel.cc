// TrainingSession's data-parallel half: the gradient buckets laid out in the order the backward pass
// finishes them, averaged across ranks as they complete (overlapping the backward pass) or after it, and
// the parameters broadcast from rank 0 (training_session.h has the contract).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "engine/training_session.h"

namespace ontrain {

Status TrainingSession::PlanOverlap() {
  // The step after which the backward pass is done with each gradient buffer; the flat buffers are laid
  // out again in that order, so that buckets complete one after another while the backward pass goes on.
  std::map<std::string, int> done;
  for (const std::string& name : trainable_) done[name] = train_->LastStepTouching(grad_buffer_input_.at(name));
  grad_order_ = trainable_;
  std::stable_sort(grad_order_.begin(), grad_order_.end(),
                   [&](const std::string& a, const std::string& b) { return done[a] < done[b]; });
  ONT_RETURN_IF_ERROR(LayoutGradients());
  // A bucket is ready after the last of the gradients it overlaps.
  for (Bucket& b : buckets_) {
    const char* lo = static_cast<const char*>(b.flat.raw_data());
    const char* hi = lo + b.flat.SizeInBytes();
    for (const std::string& name : trainable_) {
      const Tensor& g = grads_.at(name);
      const char* g0 = static_cast<const char*>(g.raw_data());
      if (g.device() == b.flat.device() && g0 < hi && g0 + g.SizeInBytes() > lo) {
        b.ready_pos = std::max(b.ready_pos, done[name]);
      }
    }
  }
  std::stable_sort(buckets_.begin(), buckets_.end(),
                   [](const Bucket& a, const Bucket& b) { return a.ready_pos < b.ready_pos; });
  starter_.s = this;
  return Status::OK();
}

Status TrainingSession::StartReadyBuckets(int pos) {
  auto t0 = std::chrono::steady_clock::now();
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].ready_pos <= pos) {
    Bucket& b = buckets_[next_bucket_++];
    if (b.host.defined()) continue;  // device gradients staged through the host: averaged in OptimizerStep
    ONT_ASSIGN_OR_RETURN(b.request, comm_->StartAllReduceAverage(b.flat.data<float>(), b.flat.NumElements(),
                                                                 b.flat.device()));
    b.started = true;
    if (pos != std::numeric_limits<int>::max()) comm_stats_.overlapped++;
  }
  Status s = comm_->Progress();
  comm_stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return s;
}

Status TrainingSession::BroadcastParameters() {
  // Every rank must hold the same parameters: compare a fingerprint of names, types and sizes with rank 0's
  // first, so that a mismatch is an error here rather than a collective of the wrong size.
  uint64_t hash = 1469598103934665603ull;
  int64_t bytes = 0;
  auto mix = [&](const void* p, size_t n) {
    for (size_t i = 0; i < n; ++i) hash = (hash ^ static_cast<const uint8_t*>(p)[i]) * 1099511628211ull;
  };
  for (const auto& [name, p] : state_->parameters) {
    mix(name.data(), name.size() + 1);
    int64_t meta[2] = {static_cast<int64_t>(p.data.dtype()), p.data.NumElements()};
    mix(meta, sizeof(meta));
    bytes += static_cast<int64_t>(p.data.SizeInBytes());
  }
  int64_t mine[3] = {static_cast<int64_t>(state_->parameters.size()), bytes, static_cast<int64_t>(hash)};
  int64_t root[3] = {mine[0], mine[1], mine[2]};
  ONT_RETURN_IF_ERROR(comm_->Broadcast(root, sizeof(root), 0, Device()));
  // Every rank learns whether any rank differs, so that all of them stop here rather than some waiting in
  // the broadcasts below.
  const bool differs = root[0] != mine[0] || root[1] != mine[1] || root[2] != mine[2];
  float any = differs ? 1.0f : 0.0f;
  ONT_RETURN_IF_ERROR(comm_->AllReduceAverage(&any, 1, Device()));
  if (any > 0 && !differs) {
    return FailedPrecondition("another rank's checkpoint differs from rank 0's (its own error names it): every rank "
                              "must start from the same checkpoint");
  }
  if (differs) {
    return FailedPrecondition("rank ", comm_->rank(), "'s checkpoint has ", mine[0], " parameters (", mine[1],
                              " bytes), rank 0's has ", root[0], " (", root[1], " bytes)",
                              root[0] == mine[0] && root[1] == mine[1] ? " with other names or shapes" : "",
                              ": every rank must start from the same checkpoint");
  }
  for (auto& [name, p] : state_->parameters) {
    Tensor& t = p.data;
    if (t.SizeInBytes() == 0) continue;
    if (t.device().is_host() || comm_->Accepts(t.device())) {
      ONT_RETURN_IF_ERROR(comm_->Broadcast(t.raw_data(), static_cast<int64_t>(t.SizeInBytes()), 0, t.device())
                              .WithContext("broadcasting parameter \"" + name + "\" from rank 0"));
      continue;
    }
    ONT_ASSIGN_OR_RETURN(Tensor host, CopyToHost(t, state_->devices));
    ONT_RETURN_IF_ERROR(comm_->Broadcast(host.raw_data(), static_cast<int64_t>(host.SizeInBytes()), 0, Device())
                            .WithContext("broadcasting parameter \"" + name + "\" from rank 0"));
    IDataTransfer* transfer = TransferFor(t.device());
    ONT_RETURN_IF_ERROR(transfer->CopyTensor(host, &t));
    ONT_RETURN_IF_ERROR(transfer->Synchronize());
  }
  return Status::OK();
}

Status TrainingSession::AverageGradients() {
  auto t0 = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) {
    if (b.started) {  // started during the last TrainStep
      b.started = false;
      ONT_RETURN_IF_ERROR(comm_->Wait(b.request));
      continue;
    }
    if (!b.host.defined()) {
      ONT_RETURN_IF_ERROR(comm_->AllReduceAverage(b.flat.data<float>(), b.flat.NumElements(), b.flat.device()));
      continue;
    }
    IDataTransfer* transfer = TransferFor(b.flat.device());
    ONT_RETURN_IF_ERROR(transfer->CopyTensor(b.flat, &b.host));
    ONT_RETURN_IF_ERROR(transfer->Synchronize());
    ONT_RETURN_IF_ERROR(comm_->AllReduceAverage(b.host.data<float>(), b.host.NumElements(), Device()));
    ONT_RETURN_IF_ERROR(transfer->CopyTensor(b.host, &b.flat));
    ONT_RETURN_IF_ERROR(transfer->Synchronize());
  }
  comm_stats_.allreduces++;
  comm_stats_.buckets += static_cast<int64_t>(buckets_.size());
  for (const Tensor& f : flat_grads_) comm_stats_.bytes += static_cast<int64_t>(f.SizeInBytes());
  comm_stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return Status::OK();
}

}  // namespace ontrain
