// Helpers of the kernel fusion tests (kernel_fusion_test, batch_norm_fusion_test, model_sweep_test): a graph
// run with and without the executor's fusions, compared bit for bit, and the graphs and feeds they run.
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

// The training model GenerateArtifacts makes of `fwd` (MSE loss, the accumulated gradients exposed as
// outputs), run fused and node by node on seeded inputs (unknown dims 4, a true lazy-reset flag; `zeros`
// as Values has it).
void RunGeneratedTraining(const Model& fwd, uint32_t seed, bool zeros, FusionRuns* r);

// How many nodes of the fused graph are `op` ("domain::op").
int Count(const FusionRuns& r, const std::string& op);

// Conv's attributes for a square window k, stride, pads on every side and group.
std::vector<onnx::AttributeProto> ConvAttrs(int64_t k, int64_t stride, int64_t pad, int64_t group);

// A convolution layer as a training graph writes it: Conv -> Relu -> MaxPool 2x2 forward, and MaxPoolGrad ->
// ReluGrad(dY, Conv's output) -> ConvGrad backward; inputs x, w, b and dz (the pooled output's gradient).
// `first_layer`: ConvGrad without dX, as for a network's first layer.
struct ConvPoolSpec {
  int64_t n, c, h, w, m, k = 3, stride = 1, pad = 0, group = 1;
  bool first_layer = false;
  int64_t oh() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t ow() const { return (w + 2 * pad - k) / stride + 1; }
};
Model ConvPoolLayer(const ConvPoolSpec& s, bool conv_output_is_graph_output = false, bool grad_read_twice = false);

// Every input of a training model made from `fwd`: the parameters with their values in `fwd`, bool inputs
// (the lazy-reset flag) true, int64 inputs (class labels) `label`, float inputs Values(seed + 1, ...) in turn;
// dims the graph leaves symbolic are `symbolic_dim`.
NamedTensors TrainingFeeds(const Model& training, const Model& fwd, uint32_t seed, int64_t symbolic_dim,
                           int64_t label = 0);

}  // namespace testing
}  // namespace ontrain
