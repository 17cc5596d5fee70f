// The optimizer's state inside a CheckpointState, with ONNX Runtime's rules: one group "group0" holding,
// per trainable parameter, the moments its optimizer kind needs ("momentum0", and "momentum1" for AdamW).
//
// When the checkpoint already has parameter states in group0, they are reused, and every trainable
// parameter must have all of its moments with the parameter's dtype and shape; otherwise zero moments are
// created, like each parameter. Moments are placed on the device the optimizer updates them on.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/allocator.h"
#include "core/data_transfer.h"
#include "core/status.h"
#include "graph/optimizer_model.h"

namespace ontrain {

// Where the moments go: allocated through `allocator`, filled through `transfer` (both for one device).
struct MomentPlacement {
  IAllocator* allocator = nullptr;
  IDataTransfer* transfer = nullptr;
};

Status PrepareOptimizerState(CheckpointState* state, const std::vector<std::string>& trainable, OptimizerKind kind,
                             const MomentPlacement& placement);

// A tensor of `like`'s dtype and shape on `placement`'s device, holding `src` (a host tensor of the same
// size), or zeros when `src` is undefined.
StatusOr<Tensor> PlaceTensor(const Tensor& like, const Tensor& src, const MomentPlacement& placement);

}  // namespace ontrain
