// Gradient accumulation and the optimizer ops on CUDA: InPlaceAccumulatorV2, AdamWOptimizer,
// SGDOptimizerV2 and InplaceClipGradNorm (float32). Prepare (checks, flags, aliases) is the CPU kernels';
// the multi-tensor ops upload their table of tensor pointers only when the pointers change, which for a
// session's state (placed once) is the first step only. The optimizers read the learning rate and the step
// count on the device (their rows make them device inputs), so a recorded optimizer run replays with each
// step's values.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cuda/kernels/cuda_kernels.h"

namespace ontrain {
namespace cuda {
namespace {

bool Flag(const Tensor* t) { return t == nullptr || t->NumElements() == 0 || t->data<bool>()[0]; }

// InPlaceAccumulatorV2(buffer, value, overwrite?) -> (updated bool[1], buffer copy?): buffer += value (or
// = value when overwrite), value broadcast to the buffer's shape.
class AccumulatorKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const Tensor &buf = *ctx.input(0), &v = *ctx.input(1);
    bool overwrite = ctx.input(2) && ctx.input(2)->NumElements() > 0 && ctx.input(2)->data<bool>()[0];
    float* pb = const_cast<float*>(buf.data<float>());  // in place: the session's gradient buffer
    if (overwrite && v.raw_data() == buf.raw_data() && v.shape() == buf.shape()) {
      // The executor had the value's producer write into the buffer (Executor::FindAccumulatorTargets).
    } else if (overwrite) {
      ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(buf.shape(), {buf.shape(), v.shape()}));
      ONT_RETURN_IF_ERROR(CudaStatus(StridedCopy(v.raw_data(), pb, s, 4, r.stream), "StridedCopy"));
    } else {
      ONT_ASSIGN_OR_RETURN(StridedSpace s, BroadcastSpace(buf.shape(), {buf.shape(), buf.shape(), v.shape()}));
      ONT_RETURN_IF_ERROR(CudaStatus(Binary(BinaryOp::kAdd, pb, v.data<float>(), pb, s, 0, r.stream), "Binary(Add)"));
    }
    Tensor* flag = ctx.output(0);
    ONT_RETURN_IF_ERROR(CudaStatus(SetFlags(static_cast<uint8_t*>(flag->raw_data()), flag->NumElements(), true, r.stream),
                                   "SetFlags"));
    if (Tensor* out = ctx.output(1)) {
      ONT_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpyAsync(out->raw_data(), pb, buf.SizeInBytes(), cudaMemcpyDeviceToDevice, r.stream), "cudaMemcpyAsync"));
    }
    return Status::OK();
  }
};

// The device copy of a multi-tensor table: slots, then running offsets. The host vectors are kept from run
// to run, so that a step run eagerly allocates nothing once their sizes have been reached.
class SlotTable {
 public:
  // The slots to fill for this run, emptied.
  std::vector<TensorSlot>& Slots() {
    slots_.clear();
    return slots_;
  }
  // Uploads when the slots differ from the last upload; returns the device slot array.
  Status Upload(const CudaResources& r) {
    const std::vector<TensorSlot>& slots = slots_;
    std::vector<int64_t>& starts = starts_;
    starts.assign(1, 0);
    for (const TensorSlot& s : slots) starts.push_back(starts.back() + s.n);
    total_ = starts.back();
    size_t slot_bytes = slots.size() * sizeof(TensorSlot), bytes = slot_bytes + starts.size() * sizeof(int64_t);
    if (host_.size() == bytes && std::memcmp(host_.data(), slots.data(), slot_bytes) == 0) return Status::OK();
    host_.resize(bytes);
    std::memcpy(host_.data(), slots.data(), slot_bytes);
    std::memcpy(host_.data() + slot_bytes, starts.data(), starts.size() * sizeof(int64_t));
    ONT_ASSIGN_OR_RETURN(void* dev, device_.Get(bytes, r.allocator));
    device_ptr_ = static_cast<uint8_t*>(dev);
    count_ = static_cast<int>(slots.size());
    slot_bytes_ = slot_bytes;
    return CudaStatus(cudaMemcpyAsync(dev, host_.data(), bytes, cudaMemcpyHostToDevice, r.stream), "cudaMemcpyAsync");
  }
  const TensorSlot* slots() const { return reinterpret_cast<const TensorSlot*>(device_ptr_); }
  const int64_t* starts() const { return reinterpret_cast<const int64_t*>(device_ptr_ + slot_bytes_); }
  int count() const { return count_; }
  int64_t total() const { return total_; }

 private:
  std::vector<TensorSlot> slots_;
  std::vector<int64_t> starts_;
  std::vector<uint8_t> host_;
  DeviceBuffer device_;
  uint8_t* device_ptr_ = nullptr;
  size_t slot_bytes_ = 0;
  int count_ = 0;
  int64_t total_ = 0;
};

float* Mutable(const Tensor& t) { return const_cast<float*>(t.data<float>()); }

Status WriteFlag(const CudaResources& r, KernelContext& ctx, bool value) {
  Tensor* flag = ctx.output(0);
  return CudaStatus(SetFlags(static_cast<uint8_t*>(flag->raw_data()), flag->NumElements(), value, r.stream), "SetFlags");
}

// Device scalars of the dtype the kernel reads.
Status CheckScalar(const Tensor& t, DType dtype, const char* op, const char* what) {
  if (t.dtype() != dtype || t.NumElements() != 1) {
    return Unimplemented(op, " on CUDA takes ", what, " as one ", DTypeName(dtype), ", got ", DTypeName(t.dtype()),
                         ShapeToString(t.shape()));
  }
  return Status::OK();
}

// AdamWOptimizer(lr, step, weights, gradients, m1, m2, update_signal?): one launch for every tensor.
class AdamWKernel : public DelegatingKernel {
 public:
  AdamWKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu) : DelegatingKernel(info, std::move(cpu)) {
    args_.alpha = info.node->GetFloat("alpha", 0.9f);
    args_.beta = info.node->GetFloat("beta", 0.999f);
    args_.epsilon = info.node->GetFloat("epsilon", 1e-8f);
    args_.weight_decay = info.node->GetFloat("weight_decay", 0.0f);
    args_.mode = static_cast<int>(info.node->GetInt("adam_mode", 0));
    correct_bias_ = info.node->GetInt("correct_bias", 1) != 0;
  }
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    bool update = Flag(ctx.input(6));
    ONT_RETURN_IF_ERROR(WriteFlag(r, ctx, update));
    if (!update) return Status::OK();
    const Tensor &lr = *ctx.input(0), &step = *ctx.input(1);
    ONT_RETURN_IF_ERROR(CheckScalar(lr, DType::kFloat32, "AdamWOptimizer", "lr"));
    ONT_RETURN_IF_ERROR(CheckScalar(step, DType::kInt64, "AdamWOptimizer", "step"));
    AdamWArgs a = args_;
    a.lr = lr.data<float>();
    a.step = step.data<int64_t>();
    a.correct_bias = correct_bias_ ? 1 : 0;
    const TensorSequence &w = *ctx.input_sequence(2), &g = *ctx.input_sequence(3);
    const TensorSequence &m = *ctx.input_sequence(4), &v = *ctx.input_sequence(5);
    std::vector<TensorSlot>& slots = table_.Slots();
    for (size_t k = 0; k < w.size(); ++k) {
      slots.push_back({Mutable(w[k]), g[k].data<float>(), Mutable(m[k]), Mutable(v[k]), w[k].NumElements()});
    }
    ONT_RETURN_IF_ERROR(table_.Upload(r));
    return CudaStatus(AdamW(table_.slots(), table_.starts(), table_.count(), table_.total(), a, r.stream), "AdamW");
  }

 private:
  AdamWArgs args_{};
  bool correct_bias_;
  SlotTable table_;
};

// SGDOptimizerV2(lr, weights, gradients, update_signal?).
class SgdKernel : public DelegatingKernel {
 public:
  using DelegatingKernel::DelegatingKernel;
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    bool update = Flag(ctx.input(3));
    ONT_RETURN_IF_ERROR(WriteFlag(r, ctx, update));
    if (!update) return Status::OK();
    const Tensor& lr = *ctx.input(0);
    ONT_RETURN_IF_ERROR(CheckScalar(lr, DType::kFloat32, "SGDOptimizerV2", "lr"));
    const TensorSequence &w = *ctx.input_sequence(1), &g = *ctx.input_sequence(2);
    std::vector<TensorSlot>& slots = table_.Slots();
    for (size_t k = 0; k < w.size(); ++k) slots.push_back({Mutable(w[k]), g[k].data<float>(), nullptr, nullptr, w[k].NumElements()});
    ONT_RETURN_IF_ERROR(table_.Upload(r));
    return CudaStatus(Sgd(table_.slots(), table_.starts(), table_.count(), table_.total(), lr.data<float>(), r.stream),
                      "Sgd");
  }

 private:
  SlotTable table_;
};

// InplaceClipGradNorm(gradients): scales every gradient in place.
class ClipKernel : public DelegatingKernel {
 public:
  ClipKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu)
      : DelegatingKernel(info, std::move(cpu)), max_norm_(info.node->GetFloat("max_norm", 1.0f)) {}
  Status ComputeCuda(const CudaResources& r, KernelContext& ctx) override {
    const TensorSequence& g = *ctx.input_sequence(0);
    std::vector<TensorSlot>& slots = table_.Slots();
    int64_t largest = 0;
    for (const Tensor& t : g) {
      slots.push_back({Mutable(t), nullptr, nullptr, nullptr, t.NumElements()});
      largest = std::max(largest, t.NumElements());
    }
    ONT_RETURN_IF_ERROR(table_.Upload(r));
    const int pieces = ClipPieces(largest);
    ONT_ASSIGN_OR_RETURN(void* partials, partials_.Get(sizeof(double) * g.size() * pieces, r.allocator));
    return CudaStatus(ClipGradNorm(table_.slots(), table_.count(), pieces, max_norm_, static_cast<double*>(partials),
                                   r.stream),
                      "ClipGradNorm");
  }

 private:
  float max_norm_;
  SlotTable table_;
  DeviceBuffer partials_;
};

}  // namespace

KernelFactory kInPlaceAccumulatorV2 = Wrap<AccumulatorKernel, &cpu::kInPlaceAccumulatorV2>;
KernelFactory kAdamWOptimizer = Wrap<AdamWKernel, &cpu::kAdamWOptimizer>;
KernelFactory kSGDOptimizerV2 = Wrap<SgdKernel, &cpu::kSGDOptimizerV2>;
KernelFactory kInplaceClipGradNorm = Wrap<ClipKernel, &cpu::kInplaceClipGradNorm>;

}  // namespace cuda
}  // namespace ontrain
