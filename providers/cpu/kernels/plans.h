// What a kernel of another provider reads from the CPU kernel it wraps: the per-shape plans that the CPU
// kernels build in Prepare (Einsum's direct loop, Resize's taps), so that a device kernel computes the same
// sums in the same order without parsing the node again. Each accessor returns null when `k` was not made
// by the matching factory of kernels.h.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "graph/graph.h"
#include "providers/kernel.h"

namespace ontrain {
namespace cpu {

// Einsum's direct loop for the shapes last prepared (providers/cpu/kernels/einsum.cc): letters numbered
// densely from 0; the output's letters (row-major, last fastest) and the summed letters (likewise), and per
// operand its (letter, element stride) pairs: a repeated letter adds its strides (a diagonal), a dim of 1
// broadcast against a larger one has none. Y[o] = sum over the summed letters of the product of the
// operands, in double.
struct EinsumDirectPlan {
  int letters = 0;
  std::vector<int> out_letters, sum_letters;
  std::vector<int64_t> out_sizes, sum_sizes;
  std::vector<std::vector<std::pair<int, int64_t>>> operand_strides;
};
const EinsumDirectPlan* EinsumPlanOf(const OpKernel& k);  // k: made by kEinsum

// The taps of one resized axis: for output coordinate j, entries [begin[j], begin[j + 1]) of (index,
// weight); an empty range with outside[j] set means extrapolation_value.
struct AxisTaps {
  std::vector<int64_t> begin, index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
};

// Resize's geometry for the shapes and inputs last prepared (providers/cpu/kernels/resize.cc). An output
// element is the extrapolation value when any axis is outside, 0 when any axis has no tap, else the sum
// over the product of its axes' taps (odometer order, last axis fastest) of the weights' product times X,
// in double. `generation` changes whenever the taps are rebuilt.
struct ResizePlanView {
  const Shape* in = nullptr;
  const Shape* out = nullptr;
  const std::vector<AxisTaps>* taps = nullptr;
  double extrapolation = 0;
  bool nearest = false;
  int64_t generation = 0;
};
// k: made by kResize or kResizeGrad (for ResizeGrad, `in` is X's shape and `out` dY's), after Prepare.
bool ResizePlanOf(const OpKernel& k, ResizePlanView* view);

// DepthToSpace (mode DCR or CRD) and SpaceToDepth as one strided copy: the output [N, C', H', W'] viewed as
// the six dims `view` (row-major), each read from the input at `strides` (elements). Fails on a rank other
// than 4, a blocksize below 1 or dims it does not divide.
struct BlockShuffle {
  Shape out;      // the output's shape [N, C', H', W']
  Shape view;     // the six dims the copy iterates
  Shape strides;  // the input's element stride for each of them
};
StatusOr<BlockShuffle> PlanBlockShuffle(const Node& n, const Shape& x);

}  // namespace cpu
}  // namespace ontrain
