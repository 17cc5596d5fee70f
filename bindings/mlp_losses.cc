// The C++ engine's side of the bindings' tests (bindings/csharp, bindings/objc): generates artifacts for
// the built-in 784-256-10 MLP into --out, trains them through the C++ TrainingSession on deterministic
// batches and prints every loss as its float bits, so that a binding that trains the same artifacts on the
// same batches can be checked bit for bit.
//
//   mlp_losses --out DIR [--steps N]
//
// Each step: TrainStep, OptimizerStep, SchedulerStep (linear: 3 warm-up steps, N in all, from 1e-3),
// LazyResetGrad. Batch k: 32 rows of 784 inputs x[r][c] = ((r * 784 + c) * 7 + k * 13) % 256 - 128) / 256
// (exact in float), labels (r * 7 + k * 3) % 10. Output lines: "train K BITS", then "eval BITS" (the eval
// loss on batch N) and "lr BITS" (the rate after the last scheduler step); BITS is the float's 8 hex digits.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "engine/provider_list.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_zoo.h"

namespace ontrain {
namespace {

constexpr int64_t kRows = 32, kInputs = 784;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

std::vector<Tensor> Batch(int64_t k) {
  std::vector<float> x(kRows * kInputs);
  std::vector<int64_t> y(kRows);
  for (int64_t i = 0; i < kRows * kInputs; ++i) x[i] = static_cast<float>((i * 7 + k * 13) % 256 - 128) / 256.0f;
  for (int64_t r = 0; r < kRows; ++r) y[r] = (r * 7 + k * 3) % 10;
  return {Tensor::FromVector(x, Shape{kRows, kInputs}), Tensor::FromVector(y, Shape{kRows})};
}

Status Run(const std::string& dir, int steps) {
  ArtifactOptions options;
  options.extra_outputs = {"logits"};
  ONT_ASSIGN_OR_RETURN(Artifacts artifacts, GenerateArtifacts(MakeMlpClassifier(kInputs, {256}, 10, 0), options));
  ONT_RETURN_IF_ERROR(WriteArtifacts(artifacts, dir));
  ONT_ASSIGN_OR_RETURN(CheckpointState state, LoadCheckpoint(dir + "/checkpoint"));
  ONT_ASSIGN_OR_RETURN(ProviderList providers, CreateProviders(std::vector<std::string>{"cpu"}, 1));
  TrainingSessionOptions session_options{providers.ordered};
  ONT_ASSIGN_OR_RETURN(auto session,
                       TrainingSession::Create(session_options, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                               ModelSource::FromPath(dir + "/eval_model.onnx"),
                                               ModelSource::FromPath(dir + "/optimizer_model.onnx")));
  LrSchedule schedule;
  schedule.kind = ScheduleKind::kLinear;
  schedule.warmup_steps = 3;
  schedule.total_steps = steps;
  ONT_RETURN_IF_ERROR(session->RegisterScheduler(schedule, 1e-3f));
  std::vector<Tensor> outputs;
  for (int k = 0; k < steps; ++k) {
    ONT_RETURN_IF_ERROR(session->TrainStep(Batch(k), &outputs));
    std::printf("train %d %08x\n", k, Bits(outputs[0].data<float>()[0]));
    ONT_RETURN_IF_ERROR(session->OptimizerStep());
    ONT_RETURN_IF_ERROR(session->SchedulerStep());
    session->LazyResetGrad();
  }
  ONT_RETURN_IF_ERROR(session->EvalStep(Batch(steps), &outputs));
  std::printf("eval %08x\n", Bits(outputs[0].data<float>()[0]));
  ONT_ASSIGN_OR_RETURN(float lr, session->GetLearningRate());
  std::printf("lr %08x\n", Bits(lr));
  return Status::OK();
}

}  // namespace
}  // namespace ontrain

int main(int argc, char** argv) {
  std::string out;
  int steps = 12;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--out") == 0) out = argv[i + 1];
    else if (std::strcmp(argv[i], "--steps") == 0) steps = std::atoi(argv[i + 1]);
  }
  if (out.empty() || steps < 1) {
    std::fprintf(stderr, "usage: mlp_losses --out DIR [--steps N>=1]\n");
    return 2;
  }
  ontrain::Status s = ontrain::Run(out, steps);
  if (!s.ok()) {
    std::fprintf(stderr, "mlp_losses: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}
