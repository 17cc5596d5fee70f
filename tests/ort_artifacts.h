// Access to ONNX Runtime's artifact sets in ../shared/ort-artifacts (located through the
// ONTRAIN_ORT_ARTIFACTS environment variable, which tools/test.sh sets), plus the deterministic batches
// that the ONNX Runtime comparison script (tools/ort_reference/) feeds both engines.
#pragma once

#include <string>
#include <vector>

#include "core/tensor.h"

namespace ontrain {
namespace testing {

// The artifact set's folder, or "" (with `why` filled) when unavailable.
std::string OrtArtifactDir(const std::string& set, std::string* why);

// Batch `step` of the synthetic data used for cross-engine loss comparisons:
// float inputs x[i] = sin(0.37 * i + 1.3 * step) * 0.8, class labels (7 * i + 3 * step) % classes,
// regression targets t[i] = cos(0.11 * i + 0.7 * step) * 0.5.
Tensor SyntheticFloats(const Shape& shape, int step);
Tensor SyntheticTargets(const Shape& shape, int step);
Tensor SyntheticLabels(const Shape& shape, int step, int classes, DType dtype);

}  // namespace testing
}  // namespace ontrain
