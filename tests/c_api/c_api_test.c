/* Trains the ONNX Runtime-convention MLP of tests/data/ort_mlp through the C API alone, in C: checkpoint
 * load/save/buffer round trips, properties, names, parameter buffers, TrainStep/OptimizerStep, the linear
 * scheduler's ONNX Runtime values, export, and error objects. Prints each failed check and exits non-zero. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ontrain/c_api.h"

static int failures = 0;

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) {                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                    \
    }                                                                \
  } while (0)

#define OK(call)                                                                          \
  do {                                                                                    \
    OtStatus* st_ = (call);                                                               \
    if (st_ != NULL) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, OtStatusMessage(st_)); \
      OtReleaseStatus(st_);                                                               \
      failures++;                                                                         \
    }                                                                                     \
  } while (0)

#define DIR "tests/data/ort_mlp/"

/* A path in the test's scratch folder (TEST_TMPDIR under Bazel). */
static const char* Tmp(const char* name) {
  static char buf[4][512];
  static int next = 0;
  const char* dir = getenv("TEST_TMPDIR");
  char* out = buf[next++ % 4];
  snprintf(out, sizeof buf[0], "%s/%s", dir ? dir : ".", name);
  return out;
}

static OtValue* Batch(int step, OtValue** labels) {
  float x[8 * 6];
  int64_t y[8];
  for (int i = 0; i < 8 * 6; ++i) x[i] = (float)(sin(0.37 * i + 1.3 * step) * 0.8);
  for (int i = 0; i < 8; ++i) y[i] = (7 * i + 3 * step) % 3;
  int64_t xs[2] = {8, 6}, ys[1] = {8};
  OtValue* input = NULL;
  OK(OtCreateTensor(OT_FLOAT, xs, 2, x, &input));
  OK(OtCreateTensor(OT_INT64, ys, 1, y, labels));
  return input;
}

/* A session over the ort_mlp artifacts with `opts`, from a fresh copy of their checkpoint (*state, which
 * the caller releases after the session); NULL (and a counted failure) where either fails. */
static OtTrainingSession* NewSession(OtEnv* env, OtSessionOptions* opts, OtCheckpointState** state) {
  OtTrainingSession* s = NULL;
  OK(OtLoadCheckpoint(DIR "checkpoint", state));
  OK(OtCreateTrainingSession(env, opts, *state, DIR "training_model.onnx", DIR "eval_model.onnx",
                             DIR "optimizer_model.onnx", &s));
  return s;
}

static float TrainOneStep(OtTrainingSession* s, int step) {
  OtValue* labels = NULL;
  OtValue* input = Batch(step, &labels);
  const OtValue* inputs[2] = {input, labels};
  OtValue* outputs[2] = {NULL, NULL};
  OK(OtTrainStep(s, NULL, 2, inputs, 2, outputs));
  float loss = NAN;
  if (outputs[0]) {
    void* data = NULL;
    OK(OtTensorMutableData(outputs[0], &data));
    loss = *(float*)data;
  }
  OK(OtOptimizerStep(s, NULL));
  OK(OtLazyResetGrad(s));
  OtReleaseValue(outputs[0]);
  OtReleaseValue(outputs[1]);
  OtReleaseValue(input);
  OtReleaseValue(labels);
  return loss;
}

/* 1 when the two files hold the same bytes. */
static int SameFile(const char* a, const char* b) {
  FILE* fa = fopen(a, "rb");
  FILE* fb = fopen(b, "rb");
  int same = fa != NULL && fb != NULL;
  while (same) {
    int ca = fgetc(fa), cb = fgetc(fb);
    if (ca != cb) same = 0;
    if (ca == EOF || cb == EOF) break;
  }
  if (fa) fclose(fa);
  if (fb) fclose(fb);
  return same;
}

int main(void) {
  OtEnv* env = NULL;
  OtSessionOptions* options = NULL;
  OtCheckpointState* state = NULL;
  OK(OtCreateEnv(&env));
  OK(OtCreateSessionOptions(&options));
  OK(OtSessionOptionsSetIntraOpThreads(options, 1));
  OK(OtSessionOptionsAppendProvider(options, "cpu"));
  OK(OtSetSeed(1));
  OK(OtLoadCheckpoint(DIR "checkpoint", &state));

  /* Properties round trip through a saved checkpoint. */
  int64_t hours = 365 * 24;
  float pi = 3.14f;
  OK(OtAddProperty(state, "hours in a year", OtIntProperty, &hours));
  OK(OtAddProperty(state, "pi", OtFloatProperty, &pi));
  OK(OtAddProperty(state, "framework", OtStringProperty, (void*)"onnxruntime"));
  OK(OtSaveCheckpoint(state, Tmp("c_api_props.ckpt"), false));
  OtCheckpointState* reloaded = NULL;
  OK(OtLoadCheckpoint(Tmp("c_api_props.ckpt"), &reloaded));
  OtPropertyType type;
  void* value = NULL;
  OK(OtGetProperty(reloaded, "hours in a year", NULL, &type, &value));
  CHECK(type == OtIntProperty && *(int64_t*)value == 8760);
  free(value);
  OK(OtGetProperty(reloaded, "pi", NULL, &type, &value));
  CHECK(type == OtFloatProperty && *(float*)value == 3.14f);
  free(value);
  OK(OtGetProperty(reloaded, "framework", NULL, &type, &value));
  CHECK(type == OtStringProperty && strcmp((char*)value, "onnxruntime") == 0);
  free(value);
  OtStatus* missing = OtGetProperty(reloaded, "nope", NULL, &type, &value);
  CHECK(missing != NULL && strstr(OtStatusMessage(missing), "nope") != NULL);
  OtReleaseStatus(missing);
  OtReleaseCheckpointState(reloaded);

  /* Parameters by name. */
  OtTensorTypeAndShapeInfo* info = NULL;
  OK(OtGetParameterTypeAndShape(state, "fc1.weight", &info));
  if (info) {
    int64_t dims[2] = {0, 0};
    CHECK(OtGetTensorElementType(info) == OT_FLOAT && OtGetDimensionsCount(info) == 2);
    OtGetDimensions(info, dims, 2);
    CHECK(dims[0] == 5 && dims[1] == 6);
    OtReleaseTensorTypeAndShapeInfo(info);
  }
  OtValue* fc2b = NULL;
  OK(OtGetParameter(state, "fc2.bias", NULL, &fc2b));
  float zeros[3] = {0.5f, -0.5f, 0.25f};
  int64_t bshape[1] = {3};
  OtValue* newb = NULL;
  OK(OtCreateTensor(OT_FLOAT, bshape, 1, zeros, &newb));
  OK(OtUpdateParameter(state, "fc2.bias", newb));
  OtValue* readb = NULL;
  OK(OtGetParameter(state, "fc2.bias", NULL, &readb));
  void* rb = NULL;
  OK(OtTensorMutableData(readb, &rb));
  CHECK(rb && ((float*)rb)[1] == -0.5f);
  OK(OtUpdateParameter(state, "fc2.bias", fc2b)); /* restore */
  OtReleaseValue(fc2b);
  OtReleaseValue(newb);
  OtReleaseValue(readb);

  /* A session from files. */
  OtTrainingSession* s = NULL;
  OK(OtCreateTrainingSession(env, options, state, DIR "training_model.onnx", DIR "eval_model.onnx",
                             DIR "optimizer_model.onnx", &s));
  if (s == NULL) return 1;
  /* Without data parallelism the session is rank 0 of 1; an unknown backend is refused by name. */
  int dp_rank = -1, dp_size = -1;
  OK(OtTrainingSessionGetDataParallelRank(s, &dp_rank, &dp_size));
  CHECK(dp_rank == 0 && dp_size == 1);
  OtStatus* bad_dp = OtSessionOptionsSetDataParallel(options, "gloo");
  CHECK(bad_dp != NULL && strstr(OtStatusMessage(bad_dp), "unknown data-parallel backend \"gloo\"") != NULL);
  OtReleaseStatus(bad_dp);
  /* A memory limit below the parameters and their gradients refuses the session, naming the limit; a negative
   * one is refused when set. */
  OtSessionOptions* tight = NULL;
  OK(OtCreateSessionOptions(&tight));
  OK(OtSessionOptionsSetMemoryLimit(tight, 64)); /* the fixture's 4 parameters hold a few hundred bytes */
  OtTrainingSession* refused = NULL;
  OtStatus* over = OtCreateTrainingSession(env, tight, state, DIR "training_model.onnx", DIR "eval_model.onnx",
                                           DIR "optimizer_model.onnx", &refused);
  CHECK(over != NULL && refused == NULL && strstr(OtStatusMessage(over), "over the session's memory limit of 64") != NULL);
  OtReleaseStatus(over);
  OtStatus* negative = OtSessionOptionsSetMemoryLimit(tight, -1);
  CHECK(negative != NULL && strstr(OtStatusMessage(negative), "must be >= 0") != NULL);
  OtReleaseStatus(negative);
  OtReleaseSessionOptions(tight);
  size_t n = 0;
  OK(OtTrainingSessionGetTrainingModelInputCount(s, &n));
  CHECK(n == 2);
  char* name = NULL;
  OK(OtTrainingSessionGetTrainingModelInputName(s, 0, NULL, &name));
  CHECK(name && strcmp(name, "input") == 0);
  free(name);
  OK(OtTrainingSessionGetTrainingModelOutputCount(s, &n));
  CHECK(n == 2);
  OK(OtTrainingSessionGetTrainingModelOutputName(s, 0, NULL, &name));
  CHECK(name && strcmp(name, "onnx::loss::2") == 0);
  free(name);
  /* The eval model takes the same two inputs and returns the loss and the logits. */
  OK(OtTrainingSessionGetEvalModelInputCount(s, &n));
  CHECK(n == 2);
  OK(OtTrainingSessionGetEvalModelOutputCount(s, &n));
  CHECK(n == 2);
  OtStatus* null_out = OtTrainingSessionGetEvalModelOutputCount(s, NULL);
  CHECK(null_out != NULL && strstr(OtStatusMessage(null_out), "out is null") != NULL);
  OtReleaseStatus(null_out);
  OtStatus* range = OtTrainingSessionGetEvalModelInputName(s, 7, NULL, &name);
  CHECK(range != NULL && strstr(OtStatusMessage(range), "out of range") != NULL);
  OtReleaseStatus(range);

  size_t size = 0;
  OK(OtGetParametersSize(s, &size, true));
  CHECK(size == 5 * 6 + 5 + 3 * 5 + 3);
  int64_t flat_shape[1] = {(int64_t)size};
  OtValue* flat = NULL;
  OK(OtCreateTensor(OT_FLOAT, flat_shape, 1, NULL, &flat));
  OK(OtCopyParametersToBuffer(s, flat, true));
  OK(OtCopyBufferToParameters(s, flat, true));

  /* ONNX Runtime's scheduler expectation: warmup 2, total 4, lr 0.1 -> 0.05, 0.1, 0.05, 0.0. */
  OK(OtRegisterLinearLRScheduler(s, 2, 4, 0.1f));
  float lr = 0;
  OK(OtGetLearningRate(s, &lr));
  CHECK(lr == 0.1f);
  const float expected[4] = {0.05f, 0.1f, 0.05f, 0.0f};
  float first = TrainOneStep(s, 0), last = first;
  for (int k = 0; k < 4; ++k) {
    OK(OtSchedulerStep(s));
    OK(OtGetLearningRate(s, &lr));
    CHECK(fabsf(lr - expected[k]) < 1e-7f);
    if (k < 3) last = TrainOneStep(s, 0);
  }
  CHECK(isfinite(first) && last < first); /* same batch, lr 0.05-0.1: the loss falls */
  OK(OtSetLearningRate(s, 0.245f));
  OK(OtGetLearningRate(s, &lr));
  CHECK(lr == 0.245f);

  /* Eval, export, errors. */
  OtValue* labels = NULL;
  OtValue* input = Batch(1, &labels);
  const OtValue* eval_in[2] = {input, labels};
  OtValue* eval_out[2] = {NULL, NULL};
  OK(OtEvalStep(s, NULL, 2, eval_in, 2, eval_out));
  CHECK(eval_out[0] != NULL && eval_out[1] != NULL);
  const char* outs[1] = {"logits"};
  OK(OtExportModelForInferencing(s, Tmp("c_api_inference.onnx"), 1, outs));
  OtStatus* empty = OtExportModelForInferencing(s, Tmp("x.onnx"), 0, outs);
  CHECK(empty != NULL);
  OtReleaseStatus(empty);
  OtStatus* wrong = OtTrainStep(s, NULL, 1, eval_in, 2, eval_out);
  CHECK(wrong != NULL && strstr(OtStatusMessage(wrong), "expected 2 user inputs") != NULL);
  OtReleaseStatus(wrong);
  OtStatus* cuda = NULL;
  OtSessionOptions* cuda_opts = NULL;
  OK(OtCreateSessionOptions(&cuda_opts));
  OK(OtSessionOptionsAppendProvider(cuda_opts, "cuda"));
  OtTrainingSession* no = NULL;
  cuda = OtCreateTrainingSession(env, cuda_opts, state, DIR "training_model.onnx", NULL, NULL, &no);
  CHECK(cuda != NULL && no == NULL);
  OtReleaseStatus(cuda);
  OtReleaseSessionOptions(cuda_opts);
  OtTrainingSession* nobuf = NULL;
  OtStatus* null_buf = OtCreateTrainingSessionFromBuffer(env, options, state, NULL, 0, NULL, 0, NULL, 0, &nobuf);
  CHECK(null_buf != NULL && strstr(OtStatusMessage(null_buf), "train model data cannot be NULL") != NULL);
  OtReleaseStatus(null_buf);

  /* The same training on the simulated device ("sim" before the implicit "cpu"): the same losses bit for
   * bit, parameters readable and checkpoints savable while they live on the device, and again after the
   * session has ended. */
  OtSessionOptions* sim_opts = NULL;
  OK(OtCreateSessionOptions(&sim_opts));
  OK(OtSessionOptionsSetIntraOpThreads(sim_opts, 1));
  OK(OtSessionOptionsAppendProvider(sim_opts, "sim"));
  OtCheckpointState* states[2] = {NULL, NULL};
  OtTrainingSession* sessions[2] = {NULL, NULL};
  float losses[2][3];
  for (int k = 0; k < 2; ++k) {
    OK(OtLoadCheckpoint(DIR "checkpoint", &states[k]));
    OK(OtCreateTrainingSession(env, k ? sim_opts : options, states[k], DIR "training_model.onnx",
                               DIR "eval_model.onnx", DIR "optimizer_model.onnx", &sessions[k]));
    if (sessions[k] == NULL) return 1;
    for (int step = 0; step < 3; ++step) losses[k][step] = TrainOneStep(sessions[k], step);
    OK(OtSaveCheckpoint(states[k], Tmp(k ? "c_api_sim_live.ckpt" : "c_api_cpu_live.ckpt"), true));
  }
  CHECK(memcmp(losses[0], losses[1], sizeof losses[0]) == 0);
  OtValue* w[2] = {NULL, NULL};
  void* wd[2] = {NULL, NULL};
  for (int k = 0; k < 2; ++k) {
    OK(OtGetParameter(states[k], "fc1.weight", NULL, &w[k]));
    OK(OtTensorMutableData(w[k], &wd[k]));
  }
  CHECK(wd[0] && wd[1] && memcmp(wd[0], wd[1], 5 * 6 * sizeof(float)) == 0);
  OtReleaseValue(w[0]);
  OtReleaseValue(w[1]);
  for (int k = 0; k < 2; ++k) OtReleaseTrainingSession(sessions[k]);
  OK(OtSaveCheckpoint(states[1], Tmp("c_api_sim_after.ckpt"), true));
  CHECK(SameFile(Tmp("c_api_cpu_live.ckpt"), Tmp("c_api_sim_live.ckpt")));
  CHECK(SameFile(Tmp("c_api_cpu_live.ckpt"), Tmp("c_api_sim_after.ckpt")));
  for (int k = 0; k < 2; ++k) OtReleaseCheckpointState(states[k]);

  /* Graph capture switched off reaches the session and changes no bit (6 steps: past the 2 warm-up runs). */
  OtStatus* null_capture = OtSessionOptionsSetGraphCapture(NULL, 0);
  CHECK(null_capture != NULL && strstr(OtStatusMessage(null_capture), "options") != NULL);
  OtReleaseStatus(null_capture);
  float capture_losses[2][6];
  for (int k = 0; k < 2; ++k) {
    OK(OtSessionOptionsSetGraphCapture(sim_opts, k));
    OtCheckpointState* st = NULL;
    OtTrainingSession* s = NewSession(env, sim_opts, &st);
    if (s == NULL) return 1;
    for (int step = 0; step < 6; ++step) capture_losses[k][step] = TrainOneStep(s, step);
    OtReleaseTrainingSession(s);
    OtReleaseCheckpointState(st);
  }
  CHECK(memcmp(capture_losses[0], capture_losses[1], sizeof capture_losses[0]) == 0);
  /* Deterministic mode off reaches the session; the simulated device and the CPU are deterministic anyway,
   * so the losses are the same bits. */
  OtStatus* null_det = OtSessionOptionsSetDeterministic(NULL, 0);
  CHECK(null_det != NULL && strstr(OtStatusMessage(null_det), "options") != NULL);
  OtReleaseStatus(null_det);
  {
    float det_losses[6];
    OK(OtSessionOptionsSetDeterministic(sim_opts, 0));
    OtCheckpointState* st = NULL;
    OtTrainingSession* s = NewSession(env, sim_opts, &st);
    if (s == NULL) return 1;
    for (int step = 0; step < 6; ++step) det_losses[step] = TrainOneStep(s, step);
    OtReleaseTrainingSession(s);
    OtReleaseCheckpointState(st);
    CHECK(memcmp(det_losses, capture_losses[1], sizeof det_losses) == 0);
  }
  OtReleaseSessionOptions(sim_opts);

  /* Flushing subnormals reaches the CPU provider, trains, and leaves this thread's IEEE mode as it was (a
   * product of 2^-70 and 2^-70 is still the subnormal 2^-140, compared by bits). */
  OtStatus* null_flush = OtSessionOptionsSetFlushDenormals(NULL, 1);
  CHECK(null_flush != NULL && strstr(OtStatusMessage(null_flush), "options") != NULL);
  OtReleaseStatus(null_flush);
  {
    OtSessionOptions* flush_opts = NULL;
    OK(OtCreateSessionOptions(&flush_opts));
    OK(OtSessionOptionsSetFlushDenormals(flush_opts, 1));
    OtCheckpointState* st = NULL;
    OtTrainingSession* s = NewSession(env, flush_opts, &st);
    if (s == NULL) return 1;
    for (int step = 0; step < 3; ++step) CHECK(isfinite(TrainOneStep(s, step)));
    OtReleaseTrainingSession(s);
    OtReleaseCheckpointState(st);
    OtReleaseSessionOptions(flush_opts);
    volatile float a = 0x1p-70f, b = 0x1p-70f;
    float product = a * b, expected = 0x1p-140f;
    CHECK(memcmp(&product, &expected, sizeof product) == 0);
  }

  OK(OtSaveCheckpoint(state, Tmp("c_api_trained.ckpt"), true));
  OtReleaseValue(eval_out[0]);
  OtReleaseValue(eval_out[1]);
  OtReleaseValue(input);
  OtReleaseValue(labels);
  OtReleaseValue(flat);
  OtReleaseTrainingSession(s);
  OtReleaseCheckpointState(state);
  OtReleaseSessionOptions(options);
  OtReleaseEnv(env);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("C API: all checks passed\n");
  return 0;
}
