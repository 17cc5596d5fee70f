// The floating-point work of one run of a matrix op (MatMul, Gemm, the convolutions and their gradients),
// counted from the shapes the run saw, for `ontrain bench --profile`: with the machine's measured FMA peak
// it gives the least time any engine needs for a step's matrix work, so a step time can be read against
// what the hardware allows and not only against another engine.
//
// One multiply-add counts as 2 FLOPs; only the products are counted (a bias, an activation or a pooling
// fused into the op is not). Ops that are not matrix products count 0, as do shapes the count does not
// understand (a rank this model does not expect): the figure is a floor, never an overestimate.
#pragma once

#include <cstdint>

#include "graph/graph.h"
#include "providers/kernel.h"

namespace ontrain {

// FLOPs of the run of `n` just made with `ctx` (its inputs and requested outputs).
int64_t MatrixFlops(const Node& n, KernelContext& ctx);

}  // namespace ontrain
