// Helpers of the random-shape sweeps (conv_sweep_test, kernel_sweep_test, model_sweep_test): a seeded
// generator, a one-node model run at 1 and 2 threads with the same bits, and a comparison against a
// reference computed in double.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/executor.h"

namespace ontrain {
namespace testing {

// A linear congruential generator: the same cases on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  int64_t In(int64_t lo, int64_t hi) {
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return lo + static_cast<int64_t>((s_ >> 33) % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t s_;
};

// Runs the model at 1 and at 2 threads (twice each: the second run from the planned arenas), expects the
// same bits from both, and returns the one-thread outputs.
std::vector<Tensor> RunBothThreadCounts(const Model& m, const NamedTensors& feeds);

// |got - want| within 1e-5 of the sum of the terms' magnitudes `scale` (float32 sums in any order).
void ExpectNear(const Tensor& got, const std::vector<double>& want, const std::vector<double>& scale,
                const char* what);

// Row-major element strides of `shape`.
Shape RowMajorStrides(const Shape& shape);

}  // namespace testing
}  // namespace ontrain
