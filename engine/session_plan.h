// Where a TrainingSession puts the training state, decided from the graphs alone (nothing is allocated),
// so that `ontrain info --provider` can show it before any device is used.
//
// Training-graph inputs are classified as ONNX Runtime does: checkpoint parameter names are parameters,
// `lazy_reset_grad` is the reset flag, names with a gradient suffix are gradient buffers, anything else is
// a user input. Then each state tensor goes where it is used:
// - a trainable parameter on the device of the optimizer node, which updates it in place (else of its
//   first reader), a frozen one on the device of a training-graph node that updates it in place
//   (BatchNormalization's running statistics) or else of its first reader, in training then eval;
// - each gradient buffer on its accumulator's device, all on one (the optimizer takes them as a sequence);
// - the moments on the optimizer node's device (beside the parameters when no node reads them).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_state.h"
#include "core/status.h"
#include "graph/graph.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct SessionPlan {
  std::vector<std::string> user_inputs, user_outputs;  // training graph
  std::vector<std::string> params;                     // training-graph order
  std::vector<std::string> trainable;                  // training-graph order
  std::map<std::string, std::string> grad_buffer;      // trainable parameter -> its buffer input
  std::map<std::string, Device> devices;               // parameter or buffer input -> its device
  Device gradients_device;                             // where every gradient buffer lives
  Device moments_device;
};

StatusOr<SessionPlan> PlanSession(const Model& train, const Model* eval, const Model* optimizer,
                                  const CheckpointState& state, const std::vector<IExecutionProvider*>& providers);

// True when `name` has one of ONNX Runtime's gradient suffixes.
bool IsGradientName(const std::string& name);

}  // namespace ontrain
