// Optimizer state: restore or create group0's moments on the optimizer's device.
#include "optimizer/optimizer_state.h"

#include <cstring>

namespace ontrain {

StatusOr<Tensor> PlaceTensor(const Tensor& like, const Tensor& src, const MomentPlacement& placement) {
  ONT_ASSIGN_OR_RETURN(Tensor out, Tensor::Allocate(like.dtype(), like.shape(), placement.allocator));
  Tensor host = src;
  if (!host.defined()) {
    ONT_ASSIGN_OR_RETURN(host, Tensor::Allocate(like.dtype(), like.shape(), HostAllocator()));
    std::memset(host.raw_data(), 0, host.SizeInBytes());
  }
  if (out.device().is_host()) {
    if (host.SizeInBytes() > 0 && out.raw_data() != host.raw_data()) {
      std::memcpy(out.raw_data(), host.raw_data(), host.SizeInBytes());
    }
    return out;
  }
  ONT_RETURN_IF_ERROR(placement.transfer->CopyTensor(host, &out));
  ONT_RETURN_IF_ERROR(placement.transfer->Synchronize());  // `host` may go away when we return
  return out;
}

Status PrepareOptimizerState(CheckpointState* state, const std::vector<std::string>& trainable, OptimizerKind kind,
                             const MomentPlacement& placement) {
  OptimizerGroup& g = state->optimizer_groups["group0"];
  bool restore = !g.param_states.empty();
  Device device = placement.allocator->device();
  for (const std::string& name : trainable) {
    const Parameter* p = state->FindParameter(name);
    if (p == nullptr) return NotFound("trainable parameter \"", name, "\" is not in the checkpoint");
    if (p->data.dtype() != DType::kFloat32) {
      return Unimplemented("parameter \"", name, "\" is ", DTypeName(p->data.dtype()), "; optimizers update float32");
    }
    ParameterOptimizerState& ps = g.param_states[name];
    for (const std::string& m : MomentNames(kind)) {
      auto it = ps.momentums.find(m);
      if (restore && it == ps.momentums.end()) {
        return NotFound("parameter \"", name, "\" has no \"", m, "\" in the checkpoint's optimizer state");
      }
      if (!restore) {
        ONT_ASSIGN_OR_RETURN(ps.momentums[m], PlaceTensor(p->data, Tensor(), placement));
        continue;
      }
      Tensor& t = it->second;
      if (t.shape() != p->data.shape() || t.dtype() != p->data.dtype()) {
        return InvalidArgument("optimizer state \"", m, "\" of \"", name, "\" is ", DTypeName(t.dtype()),
                               ShapeToString(t.shape()), " but the parameter is ", ShapeToString(p->data.shape()));
      }
      if (t.device() == device) continue;
      ONT_ASSIGN_OR_RETURN(Tensor host, CopyToHost(t, state->devices));
      ONT_ASSIGN_OR_RETURN(t, PlaceTensor(p->data, host, placement));
    }
  }
  return Status::OK();
}

}  // namespace ontrain
