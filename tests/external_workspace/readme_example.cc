// The README's C++ example, verbatim between the markers, inside a function so that it can be tested.
#include "readme_example.h"

#include <unistd.h>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "providers/cpu/cpu_provider.h"

ontrain::StatusOr<float> TrainOneStep(const std::string& dir, const ontrain::Tensor& images,
                                      const ontrain::Tensor& labels) {
  // The README's paths are relative to the folder holding "artifacts": work from there, then come back.
  char previous[4096];
  if (getcwd(previous, sizeof previous) == nullptr) return ontrain::IoError("getcwd failed");
  if (chdir((dir + "/..").c_str()) != 0) return ontrain::IoError("cannot enter ", dir, "/..");
  struct Back {
    const char* to;
    ~Back() { (void)chdir(to); }
  } back{previous};
  // README begin
  auto cpu = ontrain::CpuExecutionProvider::Create({}).value();
  ontrain::CheckpointState state = ontrain::LoadCheckpoint("artifacts/checkpoint").value();
  auto session = ontrain::TrainingSession::Create(
      {{cpu.get()}}, &state, ontrain::ModelSource::FromPath("artifacts/training_model.onnx"),
      ontrain::ModelSource::FromPath("artifacts/eval_model.onnx"),
      ontrain::ModelSource::FromPath("artifacts/optimizer_model.onnx")).value();
  std::vector<ontrain::Tensor> out;
  ontrain::Status s = session->TrainStep({images, labels}, &out);   // loss = out[0]
  s = session->OptimizerStep();
  session->LazyResetGrad();
  s = ontrain::SaveCheckpoint(state, "artifacts/checkpoint");
  // README end
  if (!s.ok()) return s;
  return out[0].data<float>()[0];
}
