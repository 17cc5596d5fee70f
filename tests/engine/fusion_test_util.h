// Helpers of the kernel fusion tests (kernel_fusion_test, batch_norm_fusion_test): a graph run with and
// without the executor's fusions, compared bit for bit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/graph.h"

namespace ontrain {
namespace testing {

// Values in [-1, 1) with exact zeros mixed in (a fifth of them, unless `zeros` is false), so that
// convolutions of zero patches with zero biases give exact zeros, where ReLU's gradient is shut.
std::vector<float> Values(int64_t n, uint32_t seed, bool zeros = true);

struct FusionRuns {
  std::vector<Tensor> fused, plain;
  std::vector<std::string> fused_ops;    // the fused executor's graph, "domain::op" per node
  std::vector<std::string> compact_ops;  // its nodes with compact_indices = 1, op type per node
};

// Runs `m` twice on the CPU provider with `threads` threads (the second run from the planned arenas), with
// kernel fusion and without, each run on its own copy of `feeds`.
FusionRuns RunBoth(const Model& m, const NamedTensors& feeds, int threads = 1);

// Every output of the fused run has the plain run's shape, dtype and bytes.
void ExpectSameBits(const FusionRuns& r);

// A training model's gradients go into their accumulators in place (buffers a run does not return): makes
// each accumulated gradient a graph output too, so that a comparison of outputs covers it.
void ExposeAccumulatedGradients(Model* training);

// How many nodes of the fused graph are `op` ("domain::op").
int Count(const FusionRuns& r, const std::string& op);

}  // namespace testing
}  // namespace ontrain
