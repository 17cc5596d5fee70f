// Trains the ONNX Runtime-convention MLP of tests/data/ort_mlp for 10 AdamW steps, exports its inference
// model (output "logits") and prints the exported model's logits for the synthetic batch of step 10, one
// value per line. tools/ort_reference/check_export.sh runs the same model in onnxruntime-node and compares.
// Usage: export_fixture ARTIFACT_DIR OUT_MODEL
#include <cmath>
#include <cstdio>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/model_io.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

Tensor Floats(int step) {
  std::vector<float> v(8 * 6);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step) * 0.8);
  return Tensor::FromVector(v, {8, 6});
}

Tensor Labels(int step) {
  std::vector<int64_t> v(8);
  for (int64_t i = 0; i < 8; ++i) v[i] = (7 * i + 3 * step) % 3;
  return Tensor::FromVector(v, {8});
}

int Run(const std::string& dir, const std::string& out) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "export_fixture: %s\n", s.ToString().c_str());
    return 1;
  };
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto state = LoadCheckpoint(dir + "/checkpoint");
  if (!state.ok()) return fail(state.status());
  auto s = TrainingSession::Create({{cpu.get()}}, &state.value(), ModelSource::FromPath(dir + "/training_model.onnx"),
                                   ModelSource::FromPath(dir + "/eval_model.onnx"),
                                   ModelSource::FromPath(dir + "/optimizer_model.onnx"));
  if (!s.ok()) return fail(s.status());
  for (int step = 0; step < 10; ++step) {
    std::vector<Tensor> o;
    Status st = s.value()->TrainStep({Floats(step), Labels(step)}, &o);
    if (st.ok()) st = s.value()->OptimizerStep();
    if (!st.ok()) return fail(st);
    s.value()->LazyResetGrad();
  }
  Status e = s.value()->ExportModelForInferencing(out, {"logits"});
  if (!e.ok()) return fail(e);
  auto m = LoadModel(out);
  if (!m.ok()) return fail(m.status());
  auto ex = Executor::Create(m.value(), cpu.get());
  if (!ex.ok()) return fail(ex.status());
  std::vector<Tensor> logits;
  Status r = ex.value()->Run({{"input", Floats(10)}}, {"logits"}, &logits);
  if (!r.ok()) return fail(r);
  for (int64_t i = 0; i < logits[0].NumElements(); ++i) std::printf("%.9g\n", logits[0].data<float>()[i]);
  return 0;
}

}  // namespace
}  // namespace ontrain

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: export_fixture ARTIFACT_DIR OUT_MODEL\n");
    return 2;
  }
  return ontrain::Run(argv[1], argv[2]);
}
