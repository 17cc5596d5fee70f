// Fuzz target: a whole TrainingSession created from fuzzed artifacts and stepped twice. Sections:
// [training model, eval model, optimizer model, checkpoint]. User inputs are made from the training
// graph's declared types (unknown or symbolic dims: 2), zero-filled (so class labels are valid); the
// session runs under a 256 MiB memory limit, so a model that declares huge tensors is an error, not an
// out-of-memory kill.
#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/model_io.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

ontrain::IExecutionProvider* Cpu() {
  ontrain::CpuProviderOptions o;
  o.intra_op_threads = 1;  // one thread: more inputs per second, and a crash has one stack
  static auto* cpu = ontrain::CpuExecutionProvider::Create(o).value().release();
  return cpu;
}

// Zero tensors for `names`, from `model`'s input declarations; false when one cannot be made.
bool MakeInputs(const ontrain::Model& model, const std::vector<std::string>& names, std::vector<ontrain::Tensor>* out) {
  for (const std::string& name : names) {
    const ontrain::ValueInfo* info = model.graph.FindInput(name);
    if (info == nullptr || !info->is_tensor) return false;
    ontrain::Shape shape;
    for (const ontrain::Dim& d : info->dims) shape.push_back(d.known() ? d.value : 2);
    int64_t n = ontrain::ShapeNumElements(shape);
    if (n < 0 || n > (1 << 20)) return false;
    ontrain::DType dt = info->dtype == ontrain::DType::kUndefined ? ontrain::DType::kFloat32 : info->dtype;
    auto t = ontrain::Tensor::Allocate(dt, shape, ontrain::HostAllocator());
    if (!t.ok()) return false;
    if (t->SizeInBytes()) std::memset(t->raw_data(), 0, t->SizeInBytes());
    out->push_back(std::move(t).value());
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> s = ontrain::fuzz::SplitSections(data, size, 4);
  auto state = ontrain::LoadCheckpointFromBuffer(s[3].data(), s[3].size());
  if (!state.ok()) return 0;
  ontrain::TrainingSessionOptions options;
  options.providers = {Cpu()};
  options.memory_limit_bytes = int64_t{256} << 20;
  auto session = ontrain::TrainingSession::Create(
      options, &state.value(), ontrain::ModelSource::FromBytes(s[0]),
      s[1].empty() ? ontrain::ModelSource() : ontrain::ModelSource::FromBytes(s[1]),
      s[2].empty() ? ontrain::ModelSource() : ontrain::ModelSource::FromBytes(s[2]));
  if (!session.ok()) return 0;
  ontrain::TrainingSession& ts = *session.value();
  auto train = ontrain::LoadModelFromBuffer(s[0].data(), s[0].size(), "");
  std::vector<ontrain::Tensor> inputs, outputs;
  if (!train.ok() || !MakeInputs(train.value(), ts.training_input_names(), &inputs)) return 0;
  for (int step = 0; step < 2; ++step) {
    if (!ts.TrainStep(inputs, &outputs).ok()) return 0;
    if (ts.has_optimizer() && !ts.OptimizerStep().ok()) return 0;
    ts.LazyResetGrad();
  }
  if (ts.has_eval_model()) {
    auto eval = ontrain::LoadModelFromBuffer(s[1].data(), s[1].size(), "");
    std::vector<ontrain::Tensor> eval_inputs;
    if (eval.ok() && MakeInputs(eval.value(), ts.eval_input_names(), &eval_inputs)) (void)ts.EvalStep(eval_inputs, &outputs);
  }
  (void)ontrain::SerializeCheckpoint(state.value());
  return 0;
}
