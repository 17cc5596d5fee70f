/* ontrain's C API: one function for each function of ONNX Runtime's on-device training C API
 * (OrtTrainingApi), with the same arguments and meaning, prefixed "Ot" instead of reached through a
 * struct of function pointers; plus the few tensor, option and status helpers they need.
 *
 * Every function that can fail returns an OtStatus*: NULL on success, else an error object carrying a
 * message (OtStatusMessage) that the caller releases with OtReleaseStatus. Objects created by the API are
 * released with their OtRelease* function. Strings and values handed out through an OtAllocator are freed
 * with that allocator's free (NULL allocator: malloc/free).
 *
 * Threads: a training session and its checkpoint state are used by one thread at a time (the API does not
 * lock); different sessions, each with its own checkpoint state, may run concurrently in different threads
 * (engine/training_session.h states the full contract). */
#ifndef ONTRAIN_C_API_H_
#define ONTRAIN_C_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct OtStatus OtStatus;
typedef struct OtEnv OtEnv;
typedef struct OtSessionOptions OtSessionOptions;
typedef struct OtRunOptions OtRunOptions; /* reserved: pass NULL */
typedef struct OtValue OtValue;           /* a tensor */
typedef struct OtCheckpointState OtCheckpointState;
typedef struct OtTrainingSession OtTrainingSession;
typedef struct OtTensorTypeAndShapeInfo OtTensorTypeAndShapeInfo;

typedef struct OtAllocator {
  void* (*alloc)(size_t bytes);
  void (*free)(void* p);
} OtAllocator;

/* Element types: ONNX's TensorProto.DataType codes. */
typedef enum OtElementType {
  OT_FLOAT = 1, OT_UINT8 = 2, OT_INT8 = 3, OT_UINT16 = 4, OT_INT16 = 5, OT_INT32 = 6, OT_INT64 = 7,
  OT_BOOL = 9, OT_FLOAT16 = 10, OT_DOUBLE = 11, OT_UINT32 = 12, OT_UINT64 = 13, OT_BFLOAT16 = 16
} OtElementType;

typedef enum OtPropertyType { OtIntProperty = 0, OtFloatProperty = 1, OtStringProperty = 2 } OtPropertyType;

/* ---- status ---- */
const char* OtStatusMessage(const OtStatus* status);
int OtStatusCode(const OtStatus* status); /* 0 = OK; otherwise ontrain's StatusCode */
void OtReleaseStatus(OtStatus* status);

/* ---- environment, options, tensors ---- */
OtStatus* OtCreateEnv(OtEnv** out);
void OtReleaseEnv(OtEnv* env);
OtStatus* OtCreateSessionOptions(OtSessionOptions** out);
OtStatus* OtSessionOptionsSetIntraOpThreads(OtSessionOptions* options, int threads); /* 0: one per core */
/* Providers in priority order: "cpu" (the default, always last: appended when missing), "sim" (a device
 * simulated on the host, for checking placement) or "cuda" / "cuda:N" (device 0 / device N; creating the
 * session says whether this build and machine have it). */
OtStatus* OtSessionOptionsAppendProvider(OtSessionOptions* options, const char* provider);
/* Device providers record a graph's run once its shapes have been seen and replay it as one launch (the
 * default, 1); 0 launches every kernel at every step. Results are the same either way. */
OtStatus* OtSessionOptionsSetGraphCapture(OtSessionOptions* options, int enabled);
/* Device providers keep to fixed, deterministic algorithms, so two runs give the same bits (the default, 1);
 * 0 lets them use nondeterministic ones and have cuDNN time its convolution algorithms at the first step of
 * each shape, keeping the fastest (as PyTorch's cudnn.benchmark). The CPU provider is deterministic either
 * way. */
OtStatus* OtSessionOptionsSetDeterministic(OtSessionOptions* options, int enabled);
/* 1: the CPU provider's kernels flush subnormal float results to zero and read subnormal inputs as zero
 * (x86 FTZ/DAZ, as torch.set_flush_denormal), faster on CPUs that slow down on subnormals (Intel's) but no
 * longer IEEE (nor PyTorch's default) where a value is subnormal; 0 (the default): IEEE arithmetic. The
 * calling thread's own mode is restored after each kernel. */
OtStatus* OtSessionOptionsSetFlushDenormals(OtSessionOptions* options, int enabled);
/* Data-parallel training (run under mpirun): "mpi" averages host gradients over MPI, "nccl" device gradients
 * over NCCL, "" (the default) trains alone. Parameters are broadcast from rank 0 when the session is made and
 * gradients averaged in OptimizerStep; each rank feeds its own shard of every batch to TrainStep. */
OtStatus* OtSessionOptionsSetDataParallel(OtSessionOptions* options, const char* backend);
/* Caps the memory a session plans (parameters, gradients, moments, every graph's intermediate values), in
 * bytes; 0 (the default) is no cap. Creating or stepping a session that would pass it fails before allocating,
 * naming the graph and the value. */
OtStatus* OtSessionOptionsSetMemoryLimit(OtSessionOptions* options, int64_t bytes);
void OtReleaseSessionOptions(OtSessionOptions* options);
/* A host tensor; `data` (may be NULL for zeros) is copied. */
OtStatus* OtCreateTensor(OtElementType type, const int64_t* shape, size_t rank, const void* data, OtValue** out);
OtStatus* OtTensorMutableData(OtValue* value, void** data);
OtStatus* OtGetTensorTypeAndShape(const OtValue* value, OtTensorTypeAndShapeInfo** out);
OtElementType OtGetTensorElementType(const OtTensorTypeAndShapeInfo* info);
size_t OtGetDimensionsCount(const OtTensorTypeAndShapeInfo* info);
void OtGetDimensions(const OtTensorTypeAndShapeInfo* info, int64_t* dims, size_t dims_length);
void OtReleaseTensorTypeAndShapeInfo(OtTensorTypeAndShapeInfo* info);
void OtReleaseValue(OtValue* value);
/* Frees a string or property value that the API handed out with a NULL allocator (malloc), for callers that
 * cannot reach the C library's free (the C# and Objective-C bindings). NULL is ignored. */
void OtFree(void* p);

/* ---- the training API (ONNX Runtime's OrtTrainingApi, in its order) ---- */
OtStatus* OtLoadCheckpoint(const char* checkpoint_path, OtCheckpointState** checkpoint_state);
OtStatus* OtSaveCheckpoint(OtCheckpointState* checkpoint_state, const char* checkpoint_path,
                           bool include_optimizer_state);
OtStatus* OtCreateTrainingSession(const OtEnv* env, const OtSessionOptions* options, OtCheckpointState* checkpoint_state,
                                  const char* train_model_path, const char* eval_model_path,
                                  const char* optimizer_model_path, OtTrainingSession** out);
OtStatus* OtCreateTrainingSessionFromBuffer(const OtEnv* env, const OtSessionOptions* options,
                                            OtCheckpointState* checkpoint_state, const void* train_model_data,
                                            size_t train_data_length, const void* eval_model_data,
                                            size_t eval_data_length, const void* optim_model_data,
                                            size_t optim_data_length, OtTrainingSession** out);
OtStatus* OtTrainingSessionGetTrainingModelOutputCount(const OtTrainingSession* sess, size_t* out);
/* This process's rank and the number of ranks (0 and 1 without data parallelism). */
OtStatus* OtTrainingSessionGetDataParallelRank(const OtTrainingSession* sess, int* rank, int* size);
OtStatus* OtTrainingSessionGetEvalModelOutputCount(const OtTrainingSession* sess, size_t* out);
OtStatus* OtTrainingSessionGetTrainingModelOutputName(const OtTrainingSession* sess, size_t index,
                                                      const OtAllocator* allocator, char** output);
OtStatus* OtTrainingSessionGetEvalModelOutputName(const OtTrainingSession* sess, size_t index,
                                                  const OtAllocator* allocator, char** output);
OtStatus* OtLazyResetGrad(OtTrainingSession* session);
/* A non-NULL outputs[i] must be a tensor of the output's type and shape and is filled in place; NULL
 * entries receive new tensors that the caller releases. */
OtStatus* OtTrainStep(OtTrainingSession* sess, const OtRunOptions* run_options, size_t inputs_len,
                      const OtValue* const* inputs, size_t outputs_len, OtValue** outputs);
OtStatus* OtEvalStep(const OtTrainingSession* sess, const OtRunOptions* run_options, size_t inputs_len,
                     const OtValue* const* inputs, size_t outputs_len, OtValue** outputs);
OtStatus* OtSetLearningRate(OtTrainingSession* sess, float learning_rate);
OtStatus* OtGetLearningRate(OtTrainingSession* sess, float* learning_rate);
OtStatus* OtOptimizerStep(OtTrainingSession* sess, const OtRunOptions* run_options);
OtStatus* OtRegisterLinearLRScheduler(OtTrainingSession* sess, int64_t warmup_step_count, int64_t total_step_count,
                                      float initial_lr);
OtStatus* OtSchedulerStep(OtTrainingSession* sess);
OtStatus* OtGetParametersSize(OtTrainingSession* sess, size_t* out, bool trainable_only);
OtStatus* OtCopyParametersToBuffer(OtTrainingSession* sess, OtValue* parameters_buffer, bool trainable_only);
OtStatus* OtCopyBufferToParameters(OtTrainingSession* sess, OtValue* parameters_buffer, bool trainable_only);
void OtReleaseTrainingSession(OtTrainingSession* session);
void OtReleaseCheckpointState(OtCheckpointState* checkpoint_state);
OtStatus* OtExportModelForInferencing(OtTrainingSession* sess, const char* inference_model_path,
                                      size_t graph_outputs_len, const char* const* graph_output_names);
OtStatus* OtSetSeed(int64_t seed);
OtStatus* OtTrainingSessionGetTrainingModelInputCount(const OtTrainingSession* sess, size_t* out);
OtStatus* OtTrainingSessionGetEvalModelInputCount(const OtTrainingSession* sess, size_t* out);
OtStatus* OtTrainingSessionGetTrainingModelInputName(const OtTrainingSession* sess, size_t index,
                                                     const OtAllocator* allocator, char** output);
OtStatus* OtTrainingSessionGetEvalModelInputName(const OtTrainingSession* sess, size_t index,
                                                 const OtAllocator* allocator, char** output);
OtStatus* OtAddProperty(OtCheckpointState* checkpoint_state, const char* property_name, OtPropertyType property_type,
                        void* property_value);
OtStatus* OtGetProperty(const OtCheckpointState* checkpoint_state, const char* property_name,
                        const OtAllocator* allocator, OtPropertyType* property_type, void** property_value);
OtStatus* OtLoadCheckpointFromBuffer(const void* checkpoint_buffer, size_t num_bytes,
                                     OtCheckpointState** checkpoint_state);
OtStatus* OtGetParameterTypeAndShape(const OtCheckpointState* checkpoint_state, const char* parameter_name,
                                     OtTensorTypeAndShapeInfo** parameter_type_and_shape);
OtStatus* OtUpdateParameter(OtCheckpointState* checkpoint_state, const char* parameter_name, OtValue* parameter);
OtStatus* OtGetParameter(const OtCheckpointState* checkpoint_state, const char* parameter_name,
                         const OtAllocator* allocator, OtValue** parameter);

#ifdef __cplusplus
}
#endif

#endif /* ONTRAIN_C_API_H_ */
