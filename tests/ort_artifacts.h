// Access to ONNX Runtime's artifact sets in ../shared/ort-artifacts (located through the
// ONTRAIN_ORT_ARTIFACTS environment variable, which tools/test.sh sets), the sets that ontrain's generator
// makes for the same comparisons, and the deterministic batches that the ONNX Runtime comparison script
// (tools/ort_reference/) feeds both engines.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/tensor.h"
#include "engine/training_session.h"

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

struct InputSpec {
  std::string name, kind;  // kind: float, target, int32, int64
  Shape shape;
  int classes = 0;
};

// An artifact set of the cross-engine comparisons; mirrors tools/ort_reference/sets.json.
struct ArtifactSet {
  std::string name;
  std::vector<InputSpec> inputs;
  std::vector<std::string> zero_dropout;  // initializers set to 0 in both engines
  std::string local_dir;                  // in the repository (runfiles), not in ../shared
  std::string generate;                   // made by ontrain's generator from this built-in model
  std::string model;                      // made by ontrain's generator from this forward model (repository)
  std::string optimizer_model;            // replaces the optimizer model (repository)
};
const std::vector<ArtifactSet>& ReferenceSets();
const ArtifactSet& FindSet(const std::string& name);

// The batch of `step` for the set's inputs (see SyntheticFloats and friends).
std::vector<Tensor> MakeBatch(const ArtifactSet& set, int step);

// A set ready to train: its checkpoint and models (zero_dropout applied).
struct LoadedSet {
  CheckpointState state;
  ModelSource train, eval, optimizer;
};
// Loads the set, generating it first into a temporary folder when ontrain's generator makes it. An
// ONNX Runtime set that is not available gives an empty folder and `why`.
StatusOr<LoadedSet> LoadSet(const ArtifactSet& set, std::string* why);

}  // namespace testing
}  // namespace ontrain
