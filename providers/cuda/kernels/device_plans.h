// Host-side preparation of the device_math.h arguments from the CPU kernels' plans (Einsum's direct loop,
// Resize's taps). Plain C++ with no CUDA dependency, so that tests/parity/device_math_test.cc builds the
// same arguments as the CUDA kernels on any machine.
#pragma once

#include <vector>

#include "core/status.h"
#include "providers/cpu/kernels/plans.h"
#include "providers/cuda/kernels/device_math.h"

namespace ontrain {
namespace cuda {

// Fails (Unimplemented) past kEinsumMaxOperands operands or kEinsumMaxLetters letters.
Status MakeEinsumArgs(const cpu::EinsumDirectPlan& p, EinsumArgs* a);

// The flat tables behind ResizeTables, on the host (uploaded as they are: ints, then weights, then flags).
struct ResizeHostTables {
  std::vector<int64_t> ints;
  std::vector<double> weights;
  std::vector<uint8_t> flags;
  ResizeTables View() const { return {ints.data(), weights.data(), flags.data()}; }
};
// Fills `a` and `t` (reusing t's storage) from a plan; fails past kResizeMaxRank dims.
Status MakeResizeArgs(const cpu::ResizePlanView& v, ResizeArgs* a, ResizeHostTables* t);

// GatherElements / ScatterElements geometry (axis normalized by the caller); fails past kResizeMaxRank dims.
Status MakeElementsArgs(const Shape& data, const Shape& idx, int64_t axis, ElementsArgs* a);
// GatherND / GatherNDGrad / ScatterND geometry, as the CPU kernels check it (their Prepare has already).
Status MakeNdArgs(const Shape& data, const Shape& idx, int64_t batch_dims, NdArgs* a);

}  // namespace cuda
}  // namespace ontrain
