// Training artifacts from a forward model, in ONNX Runtime's conventions (what its generate_artifacts
// writes): a training model (forward + loss + backward + InPlaceAccumulatorV2 gradient accumulation), an
// eval model (forward + loss, Dropout and BatchNormalization in inference mode), an optimizer model
// (AdamWOptimizer or SGDOptimizerV2 with ONNX Runtime's exact input signature) and a version-2 checkpoint
// holding the trainable and frozen parameters.
//
// BatchNormalization's running statistics: ONNX Runtime's generator leaves them as constants of the
// training and eval models, so they never change. By default ontrain makes them frozen checkpoint
// parameters (inputs of both models, like any frozen parameter) and appends to the training model, per
// BatchNormalization, plain ONNX ops computing the momentum update from the batch statistics, written
// back with InPlaceAccumulatorV2(statistic, update, overwrite=true): the op ONNX Runtime's gradient
// accumulation already relies on to write into a graph input's buffer. Every TrainStep thus updates the
// checkpoint's statistics, in ontrain and in ONNX Runtime alike, and the eval model normalises with them.
#pragma once

#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/status.h"
#include "graph/fusion.h"
#include "graph/graph.h"
#include "graph/optimizer_model.h"

namespace ontrain {

enum class LossKind { kOutput, kMSE, kCrossEntropy, kBCEWithLogits, kL1 };
StatusOr<LossKind> ParseLossKind(const std::string& name);  // MSELoss, CrossEntropyLoss, BCEWithLogitsLoss, L1Loss

// How the training model treats BatchNormalization's running statistics (see above).
enum class BnRunningStats {
  kPyTorch,   // updated each TrainStep with the unbiased batch variance (n/(n-1)), as torch.nn.BatchNorm does
  kOnnx,      // updated each TrainStep with the biased batch variance, as ONNX's BatchNormalization defines
  kConstant,  // never updated: constants of the models, as ONNX Runtime's generate_artifacts leaves them
};
StatusOr<BnRunningStats> ParseBnRunningStats(const std::string& name);  // pytorch, onnx, constant

struct ArtifactOptions {
  LossKind loss = LossKind::kCrossEntropy;
  std::string loss_output;             // kOutput: the graph output used as the loss
  // empty: every float initializer that is not frozen, holds only finite values (a -inf attention mask is
  // a buffer, not a weight) and reaches the loss through inputs that carry gradients (so not, e.g.,
  // BatchNormalization's running statistics or a Reshape's shape). Names given here must be initializers
  // with finite values.
  std::vector<std::string> requires_grad;
  std::vector<std::string> frozen;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  AdamWConfig adamw{0.9f, 0.999f, 1e-6f, 0.0f, 1, true};  // onnxblock's defaults
  std::vector<std::string> extra_outputs;  // kept as outputs of the training and eval models
  DType label_dtype = DType::kInt64;       // CrossEntropyLoss labels
  std::string reduction = "mean";          // mean, sum or none (every loss)
  bool has_ignore_index = false;           // CrossEntropyLoss: labels equal to ignore_index count for nothing
  int64_t ignore_index = -100;
  // Running statistics that are initializers are updated; ones fed as graph inputs or made by nodes are
  // left alone (nothing could receive the update).
  BnRunningStats bn_running_stats = BnRunningStats::kPyTorch;
  // Fuse the exporter's LayerNorm and GELU sequences in the training model (graph/fusion.h).
  bool fuse = true;
};

// What GenerateArtifacts made of one initializer of the forward model (ONNX cannot tell a parameter from a
// buffer, so this is a decision worth showing the user).
struct InitializerDecision {
  enum class Kind { kTrainable, kFrozen, kConstant };
  std::string name;
  Kind kind = Kind::kConstant;
  int64_t elements = 0;
  std::string why;  // for frozen and constant ones: which rule or option decided
};

struct Artifacts {
  std::vector<InitializerDecision> initializers;  // in the forward model's initializer order
  Model training;
  Model eval;
  Model optimizer;
  CheckpointState checkpoint;
  FusionCounts fused;  // what options.fuse fused in the training model
};

StatusOr<Artifacts> GenerateArtifacts(const Model& forward, const ArtifactOptions& options);

// Writes training_model.onnx, eval_model.onnx, optimizer_model.onnx and checkpoint into `dir` (created if
// needed). Everything is serialized before the first file is written, and a failed write removes what
// this call wrote, so `dir` never holds a half-written set.
Status WriteArtifacts(const Artifacts& artifacts, const std::string& dir);

}  // namespace ontrain
