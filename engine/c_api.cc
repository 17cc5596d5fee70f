// The C API (include/ontrain/c_api.h) over TrainingSession and CheckpointState.
#include "ontrain/c_api.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "core/random.h"
#include "engine/provider_list.h"
#include "engine/training_session.h"

using ontrain::Status;

struct OtStatus {
  int code;
  std::string message;
};
struct OtEnv {};
struct OtSessionOptions {
  int threads = 0;
  bool graph_capture = true;
  bool flush_denormals = false;
  bool deterministic = true;
  std::vector<std::string> providers;
  std::string data_parallel;  // "", "mpi" or "nccl"
  int64_t memory_limit = 0;   // bytes; 0: none
};
struct OtValue {
  ontrain::Tensor tensor;
};
struct OtCheckpointState {
  ontrain::CheckpointState state;
};
struct OtTrainingSession {
  ontrain::ProviderList providers;
  std::unique_ptr<ontrain::Communicator> communicator;  // data parallel when set; outlives the session
  std::unique_ptr<ontrain::TrainingSession> session;
};
struct OtTensorTypeAndShapeInfo {
  OtElementType type;
  std::vector<int64_t> dims;
};

namespace {

OtStatus* Wrap(const Status& s) {
  if (s.ok()) return nullptr;
  return new OtStatus{static_cast<int>(s.code()), s.message()};
}
OtStatus* Error(const std::string& message) { return new OtStatus{static_cast<int>(ontrain::StatusCode::kInvalidArgument), message}; }

#define OT_REQUIRE(ptr, what) \
  if ((ptr) == nullptr) return Error(std::string(what) + " is null")

char* CopyString(const std::string& s, const OtAllocator* a) {
  char* out = static_cast<char*>(a ? a->alloc(s.size() + 1) : std::malloc(s.size() + 1));
  if (out) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

using NameList = const std::vector<std::string>& (ontrain::TrainingSession::*)() const;

// The count behind the four Get*Count entry points: the size of one of the session's name lists.
OtStatus* NameCount(const OtTrainingSession* sess, NameList names, size_t* out) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(out, "out");
  *out = (sess->session.get()->*names)().size();
  return nullptr;
}
OtStatus* NameAt(const std::vector<std::string>& names, size_t index, const OtAllocator* a, char** out, const char* what) {
  OT_REQUIRE(out, "output");
  if (index >= names.size()) {
    return Error(std::string(what) + " index out of range: expected in [0, " + std::to_string(names.size()) +
                 "), actual " + std::to_string(index));
  }
  *out = CopyString(names[index], a);
  return *out ? nullptr : Error("allocation failed");
}
// The name behind the four Get*Name entry points: entry `index` of one of the session's name lists.
OtStatus* NameOf(const OtTrainingSession* sess, NameList names, size_t index, const OtAllocator* a, char** out,
                 const char* what) {
  OT_REQUIRE(sess, "session");
  return NameAt((sess->session.get()->*names)(), index, a, out, what);
}

OtStatus* MakeSession(const OtSessionOptions* options, OtCheckpointState* state, const ontrain::ModelSource& train,
                      const ontrain::ModelSource& eval, const ontrain::ModelSource& optim, OtTrainingSession** out) {
  OT_REQUIRE(state, "checkpoint_state");
  OT_REQUIRE(out, "out");
  if (train.empty()) return Error("Training session creation failed: train model data cannot be NULL");
  std::vector<std::string> names = options ? options->providers : std::vector<std::string>{};
  auto session = std::make_unique<OtTrainingSession>();
  ontrain::ProviderListOptions provider_options;
  provider_options.threads = options ? options->threads : 0;
  provider_options.graph_capture = options ? options->graph_capture : true;
  provider_options.flush_denormals = options ? options->flush_denormals : false;
  provider_options.deterministic = options ? options->deterministic : true;
  auto providers = ontrain::CreateProviders(names, provider_options);
  if (!providers.ok()) return Wrap(providers.status());
  session->providers = std::move(providers).value();
  ontrain::TrainingSessionOptions session_options{session->providers.ordered};
  if (options) session_options.memory_limit_bytes = options->memory_limit;
  if (options && !options->data_parallel.empty()) {
    auto comm = ontrain::OpenCommunicator(options->data_parallel, {});
    if (!comm.ok()) return Wrap(comm.status());
    session->communicator = std::move(comm).value();
    session_options.communicator = session->communicator.get();
  }
  auto s = ontrain::TrainingSession::Create(session_options, &state->state, train, eval, optim);
  if (!s.ok()) return Wrap(s.status());
  session->session = std::move(s).value();
  *out = session.release();
  return nullptr;
}

ontrain::ModelSource Source(const char* path) { return path ? ontrain::ModelSource::FromPath(path) : ontrain::ModelSource(); }
ontrain::ModelSource Source(const void* data, size_t len) {
  return data && len ? ontrain::ModelSource::FromBytes(std::string(static_cast<const char*>(data), len))
                     : ontrain::ModelSource();
}

OtStatus* RunStep(bool train, OtTrainingSession* sess, size_t inputs_len, const OtValue* const* inputs,
                  size_t outputs_len, OtValue** outputs) {
  OT_REQUIRE(sess, "session");
  std::vector<ontrain::Tensor> in, out;
  for (size_t i = 0; i < inputs_len; ++i) {
    OT_REQUIRE(inputs[i], "input " + std::to_string(i));
    in.push_back(inputs[i]->tensor);
  }
  Status s = train ? sess->session->TrainStep(in, &out) : sess->session->EvalStep(in, &out);
  if (!s.ok()) return Wrap(s);
  if (outputs_len != out.size()) {
    return Error("expected " + std::to_string(out.size()) + " outputs, got room for " + std::to_string(outputs_len));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (outputs[i] == nullptr) {
      outputs[i] = new OtValue{out[i]};
      continue;
    }
    ontrain::Tensor& dst = outputs[i]->tensor;
    if (dst.dtype() != out[i].dtype() || dst.NumElements() != out[i].NumElements()) {
      return Error("preallocated output " + std::to_string(i) + " does not match the output's type and size");
    }
    std::memcpy(dst.raw_data(), out[i].raw_data(), out[i].SizeInBytes());
  }
  return nullptr;
}

}  // namespace

extern "C" {

const char* OtStatusMessage(const OtStatus* status) { return status ? status->message.c_str() : ""; }
int OtStatusCode(const OtStatus* status) { return status ? status->code : 0; }
void OtReleaseStatus(OtStatus* status) { delete status; }

OtStatus* OtCreateEnv(OtEnv** out) {
  OT_REQUIRE(out, "out");
  *out = new OtEnv();
  return nullptr;
}
void OtReleaseEnv(OtEnv* env) { delete env; }

OtStatus* OtCreateSessionOptions(OtSessionOptions** out) {
  OT_REQUIRE(out, "out");
  *out = new OtSessionOptions();
  return nullptr;
}
OtStatus* OtSessionOptionsSetIntraOpThreads(OtSessionOptions* options, int threads) {
  OT_REQUIRE(options, "options");
  if (threads < 0) return Error("intra-op threads must be >= 0");
  options->threads = threads;
  return nullptr;
}
OtStatus* OtSessionOptionsSetGraphCapture(OtSessionOptions* options, int enabled) {
  OT_REQUIRE(options, "options");
  options->graph_capture = enabled != 0;
  return nullptr;
}
OtStatus* OtSessionOptionsSetDeterministic(OtSessionOptions* options, int enabled) {
  OT_REQUIRE(options, "options");
  options->deterministic = enabled != 0;
  return nullptr;
}
OtStatus* OtSessionOptionsSetFlushDenormals(OtSessionOptions* options, int enabled) {
  OT_REQUIRE(options, "options");
  options->flush_denormals = enabled != 0;
  return nullptr;
}
OtStatus* OtSessionOptionsAppendProvider(OtSessionOptions* options, const char* provider) {
  OT_REQUIRE(options, "options");
  OT_REQUIRE(provider, "provider");
  Status known = ontrain::CheckProviderName(provider);
  if (!known.ok()) return Wrap(known);
  options->providers.push_back(provider);
  return nullptr;
}
OtStatus* OtSessionOptionsSetDataParallel(OtSessionOptions* options, const char* backend) {
  OT_REQUIRE(options, "options");
  std::string b = backend ? backend : "";
  if (b != "" && b != "mpi" && b != "nccl") return Error("unknown data-parallel backend \"" + b + "\"; expected \"mpi\", \"nccl\" or \"\"");
  options->data_parallel = b;
  return nullptr;
}
OtStatus* OtSessionOptionsSetMemoryLimit(OtSessionOptions* options, int64_t bytes) {
  OT_REQUIRE(options, "options");
  if (bytes < 0) return Error("the memory limit must be >= 0 bytes, got " + std::to_string(bytes));
  options->memory_limit = bytes;
  return nullptr;
}
void OtReleaseSessionOptions(OtSessionOptions* options) { delete options; }

OtStatus* OtCreateTensor(OtElementType type, const int64_t* shape, size_t rank, const void* data, OtValue** out) {
  OT_REQUIRE(out, "out");
  if (rank > 0 && shape == nullptr) return Error("shape is null");
  auto dt = ontrain::DTypeFromOnnx(static_cast<int32_t>(type));
  if (!dt.ok()) return Wrap(dt.status());
  auto t = ontrain::Tensor::Allocate(dt.value(), ontrain::Shape(shape, shape + rank), ontrain::HostAllocator());
  if (!t.ok()) return Wrap(t.status());
  if (data) std::memcpy(t->raw_data(), data, t->SizeInBytes());
  else std::memset(t->raw_data(), 0, t->SizeInBytes());
  *out = new OtValue{std::move(t).value()};
  return nullptr;
}
OtStatus* OtTensorMutableData(OtValue* value, void** data) {
  OT_REQUIRE(value, "value");
  OT_REQUIRE(data, "data");
  *data = value->tensor.raw_data();
  return nullptr;
}
OtStatus* OtGetTensorTypeAndShape(const OtValue* value, OtTensorTypeAndShapeInfo** out) {
  OT_REQUIRE(value, "value");
  OT_REQUIRE(out, "out");
  *out = new OtTensorTypeAndShapeInfo{static_cast<OtElementType>(value->tensor.dtype()), value->tensor.shape()};
  return nullptr;
}
OtElementType OtGetTensorElementType(const OtTensorTypeAndShapeInfo* info) { return info->type; }
size_t OtGetDimensionsCount(const OtTensorTypeAndShapeInfo* info) { return info->dims.size(); }
void OtGetDimensions(const OtTensorTypeAndShapeInfo* info, int64_t* dims, size_t dims_length) {
  for (size_t i = 0; i < dims_length && i < info->dims.size(); ++i) dims[i] = info->dims[i];
}
void OtReleaseTensorTypeAndShapeInfo(OtTensorTypeAndShapeInfo* info) { delete info; }
void OtReleaseValue(OtValue* value) { delete value; }

OtStatus* OtLoadCheckpoint(const char* checkpoint_path, OtCheckpointState** checkpoint_state) {
  OT_REQUIRE(checkpoint_path, "checkpoint_path");
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  auto s = ontrain::LoadCheckpoint(checkpoint_path);
  if (!s.ok()) return Wrap(s.status());
  *checkpoint_state = new OtCheckpointState{std::move(s).value()};
  return nullptr;
}
OtStatus* OtSaveCheckpoint(OtCheckpointState* checkpoint_state, const char* checkpoint_path, bool include_optimizer_state) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  OT_REQUIRE(checkpoint_path, "checkpoint_path");
  ontrain::CheckpointSaveOptions options;
  options.include_optimizer_state = include_optimizer_state;
  return Wrap(ontrain::SaveCheckpoint(checkpoint_state->state, checkpoint_path, options));
}
OtStatus* OtTrainingSessionGetDataParallelRank(const OtTrainingSession* sess, int* rank, int* size) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(rank, "rank");
  OT_REQUIRE(size, "size");
  *rank = sess->communicator ? sess->communicator->rank() : 0;
  *size = sess->communicator ? sess->communicator->size() : 1;
  return nullptr;
}

OtStatus* OtCreateTrainingSession(const OtEnv*, const OtSessionOptions* options, OtCheckpointState* checkpoint_state,
                                  const char* train_model_path, const char* eval_model_path,
                                  const char* optimizer_model_path, OtTrainingSession** out) {
  return MakeSession(options, checkpoint_state, Source(train_model_path), Source(eval_model_path),
                     Source(optimizer_model_path), out);
}
OtStatus* OtCreateTrainingSessionFromBuffer(const OtEnv*, const OtSessionOptions* options,
                                            OtCheckpointState* checkpoint_state, const void* train_model_data,
                                            size_t train_data_length, const void* eval_model_data,
                                            size_t eval_data_length, const void* optim_model_data,
                                            size_t optim_data_length, OtTrainingSession** out) {
  return MakeSession(options, checkpoint_state, Source(train_model_data, train_data_length),
                     Source(eval_model_data, eval_data_length), Source(optim_model_data, optim_data_length), out);
}
OtStatus* OtTrainingSessionGetTrainingModelOutputCount(const OtTrainingSession* sess, size_t* out) {
  return NameCount(sess, &ontrain::TrainingSession::training_output_names, out);
}
OtStatus* OtTrainingSessionGetEvalModelOutputCount(const OtTrainingSession* sess, size_t* out) {
  return NameCount(sess, &ontrain::TrainingSession::eval_output_names, out);
}
OtStatus* OtTrainingSessionGetTrainingModelOutputName(const OtTrainingSession* sess, size_t index,
                                                      const OtAllocator* allocator, char** output) {
  return NameOf(sess, &ontrain::TrainingSession::training_output_names, index, allocator, output, "train output name");
}
OtStatus* OtTrainingSessionGetEvalModelOutputName(const OtTrainingSession* sess, size_t index,
                                                  const OtAllocator* allocator, char** output) {
  return NameOf(sess, &ontrain::TrainingSession::eval_output_names, index, allocator, output, "eval output name");
}
OtStatus* OtLazyResetGrad(OtTrainingSession* session) {
  OT_REQUIRE(session, "session");
  session->session->LazyResetGrad();
  return nullptr;
}
OtStatus* OtTrainStep(OtTrainingSession* sess, const OtRunOptions*, size_t inputs_len, const OtValue* const* inputs,
                      size_t outputs_len, OtValue** outputs) {
  return RunStep(true, sess, inputs_len, inputs, outputs_len, outputs);
}
OtStatus* OtEvalStep(const OtTrainingSession* sess, const OtRunOptions*, size_t inputs_len,
                     const OtValue* const* inputs, size_t outputs_len, OtValue** outputs) {
  return RunStep(false, const_cast<OtTrainingSession*>(sess), inputs_len, inputs, outputs_len, outputs);
}
OtStatus* OtSetLearningRate(OtTrainingSession* sess, float learning_rate) {
  OT_REQUIRE(sess, "session");
  return Wrap(sess->session->SetLearningRate(learning_rate));
}
OtStatus* OtGetLearningRate(OtTrainingSession* sess, float* learning_rate) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(learning_rate, "learning_rate");
  auto lr = sess->session->GetLearningRate();
  if (!lr.ok()) return Wrap(lr.status());
  *learning_rate = lr.value();
  return nullptr;
}
OtStatus* OtOptimizerStep(OtTrainingSession* sess, const OtRunOptions*) {
  OT_REQUIRE(sess, "session");
  return Wrap(sess->session->OptimizerStep());
}
OtStatus* OtRegisterLinearLRScheduler(OtTrainingSession* sess, int64_t warmup_step_count, int64_t total_step_count,
                                      float initial_lr) {
  OT_REQUIRE(sess, "session");
  ontrain::LrSchedule s;
  s.kind = ontrain::ScheduleKind::kLinear;
  s.warmup_steps = warmup_step_count;
  s.total_steps = total_step_count;
  return Wrap(sess->session->RegisterScheduler(s, initial_lr));
}
OtStatus* OtSchedulerStep(OtTrainingSession* sess) {
  OT_REQUIRE(sess, "session");
  return Wrap(sess->session->SchedulerStep());
}
OtStatus* OtGetParametersSize(OtTrainingSession* sess, size_t* out, bool trainable_only) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(out, "out");
  auto n = sess->session->GetParametersSize(trainable_only);
  if (!n.ok()) return Wrap(n.status());
  *out = n.value();
  return nullptr;
}
OtStatus* OtCopyParametersToBuffer(OtTrainingSession* sess, OtValue* parameters_buffer, bool trainable_only) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(parameters_buffer, "parameters_buffer");
  return Wrap(sess->session->CopyParametersToBuffer(&parameters_buffer->tensor, trainable_only));
}
OtStatus* OtCopyBufferToParameters(OtTrainingSession* sess, OtValue* parameters_buffer, bool trainable_only) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(parameters_buffer, "parameters_buffer");
  return Wrap(sess->session->CopyBufferToParameters(parameters_buffer->tensor, trainable_only));
}
void OtFree(void* p) { std::free(p); }
void OtReleaseTrainingSession(OtTrainingSession* session) { delete session; }
void OtReleaseCheckpointState(OtCheckpointState* checkpoint_state) { delete checkpoint_state; }
OtStatus* OtExportModelForInferencing(OtTrainingSession* sess, const char* inference_model_path,
                                      size_t graph_outputs_len, const char* const* graph_output_names) {
  OT_REQUIRE(sess, "session");
  OT_REQUIRE(inference_model_path, "inference_model_path");
  if (graph_outputs_len == 0 || graph_output_names == nullptr) {
    return Error("Empty array of graph output names is not valid. Please provide valid graph output names");
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < graph_outputs_len; ++i) {
    if (graph_output_names[i] == nullptr || graph_output_names[i][0] == '\0') {
      return Error("Name of graph output cannot be empty. Please provide valid graph names");
    }
    names.push_back(graph_output_names[i]);
  }
  return Wrap(sess->session->ExportModelForInferencing(inference_model_path, names));
}
OtStatus* OtSetSeed(int64_t seed) {
  ontrain::SetGlobalSeed(static_cast<uint64_t>(seed));
  return nullptr;
}
OtStatus* OtTrainingSessionGetTrainingModelInputCount(const OtTrainingSession* sess, size_t* out) {
  return NameCount(sess, &ontrain::TrainingSession::training_input_names, out);
}
OtStatus* OtTrainingSessionGetEvalModelInputCount(const OtTrainingSession* sess, size_t* out) {
  return NameCount(sess, &ontrain::TrainingSession::eval_input_names, out);
}
OtStatus* OtTrainingSessionGetTrainingModelInputName(const OtTrainingSession* sess, size_t index,
                                                     const OtAllocator* allocator, char** output) {
  return NameOf(sess, &ontrain::TrainingSession::training_input_names, index, allocator, output, "train input name");
}
OtStatus* OtTrainingSessionGetEvalModelInputName(const OtTrainingSession* sess, size_t index,
                                                 const OtAllocator* allocator, char** output) {
  return NameOf(sess, &ontrain::TrainingSession::eval_input_names, index, allocator, output, "eval input name");
}
OtStatus* OtAddProperty(OtCheckpointState* checkpoint_state, const char* property_name, OtPropertyType property_type,
                        void* property_value) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  OT_REQUIRE(property_name, "property_name");
  OT_REQUIRE(property_value, "property_value");
  auto& bag = checkpoint_state->state.properties;
  switch (property_type) {
    case OtIntProperty: bag.Set(property_name, *static_cast<int64_t*>(property_value)); return nullptr;
    case OtFloatProperty: bag.Set(property_name, *static_cast<float*>(property_value)); return nullptr;
    case OtStringProperty: bag.Set(property_name, std::string(static_cast<const char*>(property_value))); return nullptr;
  }
  return Error("Given property type: " + std::to_string(static_cast<int>(property_type)) + " is not supported.");
}
OtStatus* OtGetProperty(const OtCheckpointState* checkpoint_state, const char* property_name,
                        const OtAllocator* allocator, OtPropertyType* property_type, void** property_value) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  OT_REQUIRE(property_name, "property_name");
  OT_REQUIRE(property_type, "property_type");
  OT_REQUIRE(property_value, "property_value");
  auto v = checkpoint_state->state.properties.GetValue(property_name);
  if (!v.ok()) return Wrap(v.status());
  auto alloc = [&](size_t n) { return allocator ? allocator->alloc(n) : std::malloc(n); };
  if (auto* i = std::get_if<int64_t>(&v.value())) {
    *property_type = OtIntProperty;
    *property_value = alloc(sizeof(int64_t));
    *static_cast<int64_t*>(*property_value) = *i;
  } else if (auto* f = std::get_if<float>(&v.value())) {
    *property_type = OtFloatProperty;
    *property_value = alloc(sizeof(float));
    *static_cast<float*>(*property_value) = *f;
  } else {
    *property_type = OtStringProperty;
    *property_value = CopyString(std::get<std::string>(v.value()), allocator);
  }
  return nullptr;
}
OtStatus* OtLoadCheckpointFromBuffer(const void* checkpoint_buffer, size_t num_bytes,
                                     OtCheckpointState** checkpoint_state) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  auto s = ontrain::LoadCheckpointFromBuffer(checkpoint_buffer, num_bytes);
  if (!s.ok()) return Wrap(s.status());
  *checkpoint_state = new OtCheckpointState{std::move(s).value()};
  return nullptr;
}
OtStatus* OtGetParameterTypeAndShape(const OtCheckpointState* checkpoint_state, const char* parameter_name,
                                     OtTensorTypeAndShapeInfo** parameter_type_and_shape) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  OT_REQUIRE(parameter_name, "parameter_name");
  OT_REQUIRE(parameter_type_and_shape, "parameter_type_and_shape");
  const ontrain::Parameter* p = checkpoint_state->state.FindParameter(parameter_name);
  if (!p) return Error(std::string("no parameter named \"") + parameter_name + "\"");
  *parameter_type_and_shape = new OtTensorTypeAndShapeInfo{static_cast<OtElementType>(p->data.dtype()), p->data.shape()};
  return nullptr;
}
OtStatus* OtUpdateParameter(OtCheckpointState* checkpoint_state, const char* parameter_name, OtValue* parameter) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  OT_REQUIRE(parameter_name, "parameter_name");
  OT_REQUIRE(parameter, "parameter");
  ontrain::Parameter* p = checkpoint_state->state.FindParameter(parameter_name);
  if (!p) return Error(std::string("no parameter named \"") + parameter_name + "\"");
  const ontrain::Tensor& src = parameter->tensor;
  if (src.shape() != p->data.shape() || src.dtype() != p->data.dtype()) {
    return Error(std::string("parameter \"") + parameter_name + "\": data type or shape mismatch: expected " +
                 ontrain::DTypeName(p->data.dtype()) + " " + ontrain::ShapeToString(p->data.shape()) + ", got " +
                 ontrain::DTypeName(src.dtype()) + " " + ontrain::ShapeToString(src.shape()));
  }
  ontrain::IDataTransfer* device = ontrain::FindTransfer(checkpoint_state->state.devices, p->data.device());
  if (p->data.device().is_host()) {
    std::memcpy(p->data.raw_data(), src.raw_data(), src.SizeInBytes());
    return nullptr;
  }
  if (device == nullptr) return Error("parameter lives on " + p->data.device().ToString() + ", which nothing can copy to");
  ontrain::Status s = device->CopyTensor(src, &p->data);
  if (s.ok()) s = device->Synchronize();
  return Wrap(s);
}
OtStatus* OtGetParameter(const OtCheckpointState* checkpoint_state, const char* parameter_name, const OtAllocator*,
                         OtValue** parameter) {
  OT_REQUIRE(checkpoint_state, "checkpoint_state");
  OT_REQUIRE(parameter_name, "parameter_name");
  OT_REQUIRE(parameter, "parameter");
  const ontrain::Parameter* p = checkpoint_state->state.FindParameter(parameter_name);
  if (!p) return Error(std::string("no parameter named \"") + parameter_name + "\"");
  if (checkpoint_state->state.is_nominal) return Error("cannot fetch parameters from a nominal checkpoint state");
  auto host = ontrain::CopyToHost(p->data, checkpoint_state->state.devices);  // wherever it lives
  if (!host.ok()) return Wrap(host.status());
  *parameter = new OtValue{host->device() == p->data.device() && host->raw_data() == p->data.raw_data()
                               ? host->Clone()
                               : std::move(host).value()};
  return nullptr;
}

}  // extern "C"
