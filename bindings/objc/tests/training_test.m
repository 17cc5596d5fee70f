// Trains the built-in MLP through the Objective-C binding alone and checks it against the C++ engine: the
// losses, eval loss and learning rate that bindings/mlp_losses printed for the same artifacts and batches,
// bit for bit; plus checkpoints and properties, names, parameter buffers, the scheduler, export, tensors of
// every element type and errors as NSError.
//
//   training_test ARTIFACTS_DIR REFERENCE_FILE SCRATCH_DIR
//
// Writes a JUnit file to $XML_OUTPUT_FILE (one case per check group) and exits non-zero when one fails.
#import "ontrain_training.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kRows = 32, kInputs = 784, kSteps = 12 };

static NSString* dir_;
static NSString* scratch_;
static NSMutableDictionary* reference_;  // "train K" / "eval" / "lr" -> float bits
static NSMutableString* failure_;        // the current case's first failure

#define CHECK(cond, ...)                                                                                    \
  do {                                                                                                      \
    if (!(cond) && failure_ == nil) {                                                                       \
      failure_ = [[NSMutableString alloc] initWithFormat:@"line %d: %s: ", __LINE__, #cond];                \
      [failure_ appendFormat:__VA_ARGS__];                                                                  \
    }                                                                                                       \
  } while (0)

// The call must succeed; otherwise the case fails with the engine's message.
#define OK(expr)                                                                                            \
  ({                                                                                                        \
    NSError* ok_error_ = nil;                                                                               \
    NSError** error = &ok_error_;                                                                           \
    __typeof__(expr) ok_result_ = (expr);                                                                   \
    CHECK(ok_error_ == nil, @"%s failed: %@", #expr, [ok_error_ localizedDescription]);                      \
    ok_result_;                                                                                             \
  })

// The call must fail with an NSError whose message contains `part`.
#define FAILS(expr, part)                                                                                   \
  do {                                                                                                      \
    NSError* fails_error_ = nil;                                                                            \
    NSError** error = &fails_error_;                                                                        \
    (void)(expr);                                                                                           \
    CHECK(fails_error_ != nil && [[fails_error_ localizedDescription] rangeOfString:(part)].location != NSNotFound, \
          @"%s: expected an error containing \"%@\", got %@", #expr, (part),                                \
          fails_error_ ? [fails_error_ localizedDescription] : @"no error");                               \
  } while (0)

static uint32_t Bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

static uint32_t Reference(NSString* key) {
  NSNumber* n = [reference_ objectForKey:key];
  if (n == nil) {
    fprintf(stderr, "the reference file has no \"%s\"\n", [key UTF8String]);
    exit(1);
  }
  return (uint32_t)[n unsignedLongLongValue];
}

static NSString* P(NSString* name) { return [dir_ stringByAppendingPathComponent:name]; }

static NSArray* Shape2(long long a, long long b) {
  return [NSArray arrayWithObjects:[NSNumber numberWithLongLong:a], [NSNumber numberWithLongLong:b], nil];
}
static NSArray* Shape1(long long a) { return [NSArray arrayWithObject:[NSNumber numberWithLongLong:a]]; }

// The batch bindings/mlp_losses.cc feeds at step k (exact in float on every engine).
static NSArray* Batch(int k) {
  NSMutableData* x = [NSMutableData dataWithLength:kRows * kInputs * sizeof(float)];
  NSMutableData* y = [NSMutableData dataWithLength:kRows * sizeof(int64_t)];
  float* xf = [x mutableBytes];
  int64_t* yl = [y mutableBytes];
  for (int64_t i = 0; i < kRows * kInputs; ++i) xf[i] = (float)((i * 7 + k * 13) % 256 - 128) / 256.0f;
  for (int64_t r = 0; r < kRows; ++r) yl[r] = (r * 7 + k * 3) % 10;
  OTValue* input = [[[OTValue alloc] initWithTensorData:x elementType:OTTensorElementDataTypeFloat shape:Shape2(kRows, kInputs) error:NULL] autorelease];
  OTValue* labels = [[[OTValue alloc] initWithTensorData:y elementType:OTTensorElementDataTypeInt64 shape:Shape1(kRows) error:NULL] autorelease];
  return [NSArray arrayWithObjects:input, labels, nil];
}

static float Scalar(OTValue* v) {
  NSMutableData* d = [v tensorDataWithError:NULL];
  return d ? ((const float*)[d bytes])[0] : NAN;
}

static OTEnv* env_;

static OTTrainingSession* NewSessionOn(OTCheckpoint* checkpoint, NSString* provider) {
  OTSessionOptions* options = [[[OTSessionOptions alloc] initWithError:NULL] autorelease];
  OK([options setIntraOpNumThreads:1 error:error]);
  OK([options appendExecutionProvider:provider providerOptions:[NSDictionary dictionary] error:error]);
  return [OK([[OTTrainingSession alloc] initWithEnv:env_
                                      sessionOptions:options
                                          checkpoint:checkpoint
                                      trainModelPath:P(@"training_model.onnx")
                                       evalModelPath:P(@"eval_model.onnx")
                                  optimizerModelPath:P(@"optimizer_model.onnx")
                                               error:error]) autorelease];
}

static OTTrainingSession* NewSession(OTCheckpoint* checkpoint) { return NewSessionOn(checkpoint, @"cpu"); }

// The C++ engine's losses, bit for bit, on the CPU and on the simulated device (the CPU's kernels, with the
// state on the device and every output copied back).
static void LossesMatchTheCppEngineOn(NSString* provider) {
  OTCheckpoint* checkpoint = [OK([[OTCheckpoint alloc] initWithPath:P(@"checkpoint") error:error]) autorelease];
  OTTrainingSession* session = NewSessionOn(checkpoint, provider);
  if (session == nil) return;
  OK([session registerLinearLRSchedulerWithWarmupStepCount:3 totalStepCount:kSteps initialLr:1e-3f error:error]);
  for (int k = 0; k < kSteps; ++k) {
    NSAutoreleasePool* pool = [NSAutoreleasePool new];
    NSArray* outputs = OK([session trainStepWithInputValues:Batch(k) error:error]);
    CHECK([outputs count] == 2, @"TrainStep returns the loss and the logits");
    float loss = [outputs count] ? Scalar([outputs objectAtIndex:0]) : NAN;
    uint32_t want = Reference([NSString stringWithFormat:@"train %d", k]);
    CHECK(Bits(loss) == want, @"step %d: loss bits %08x (%.9g), C++ engine %08x", k, Bits(loss), loss, want);
    OK([session optimizerStepWithError:error]);
    OK([session schedulerStepWithError:error]);
    OK([session lazyResetGradWithError:error]);
    [pool release];
  }
  NSArray* eval = OK([session evalStepWithInputValues:Batch(kSteps) error:error]);
  CHECK([eval count] == 2 && Bits(Scalar([eval objectAtIndex:0])) == Reference(@"eval"), @"the eval loss matches the C++ engine's");
  OTTensorTypeAndShapeInfo* logits = [eval count] == 2 ? OK([[eval objectAtIndex:1] tensorTypeAndShapeInfoWithError:error]) : nil;
  CHECK([logits elementType] == OTTensorElementDataTypeFloat && [[logits shape] isEqual:Shape2(kRows, 10)], @"eval logits are float [32, 10]");
  float lr = OK([session getLearningRateWithError:error]);
  CHECK(Bits(lr) == Reference(@"lr"), @"the scheduled learning rate matches the C++ engine's");
}

static void LossesMatchTheCppEngine(void) { LossesMatchTheCppEngineOn(@"cpu"); }
static void LossesMatchTheCppEngineOnADevice(void) { LossesMatchTheCppEngineOn(@"sim"); }

static void CheckpointsAndProperties(void) {
  NSString* saved = [scratch_ stringByAppendingPathComponent:@"props.ckpt"];
  OTCheckpoint* checkpoint = [OK([[OTCheckpoint alloc] initWithPath:P(@"checkpoint") error:error]) autorelease];
  OK([checkpoint addIntPropertyWithName:@"epoch" value:7 error:error]);
  OK([checkpoint addFloatPropertyWithName:@"best accuracy" value:0.875f error:error]);
  OK([checkpoint addStringPropertyWithName:@"dataset" value:@"fashion-mnist \u00e9t\u00e9" error:error]);
  OK([checkpoint saveCheckpointToPath:saved withOptimizerState:NO error:error]);
  OTCheckpoint* loaded = [OK([[OTCheckpoint alloc] initWithPath:saved error:error]) autorelease];
  CHECK(OK([loaded getIntPropertyWithName:@"epoch" error:error]) == 7, @"int property round trip");
  CHECK(OK([loaded getFloatPropertyWithName:@"best accuracy" error:error]) == 0.875f, @"float property round trip");
  CHECK([OK([loaded getStringPropertyWithName:@"dataset" error:error]) isEqualToString:@"fashion-mnist \u00e9t\u00e9"],
        @"string property round trip (UTF-8)");
  FAILS([loaded getIntPropertyWithName:@"no such property" error:error], @"no such property");
  FAILS([loaded getStringPropertyWithName:@"epoch" error:error], @"is an int, not a string");
  OTCheckpoint* fromBytes = [OK([[OTCheckpoint alloc] initWithBuffer:[NSData dataWithContentsOfFile:saved] error:error]) autorelease];
  NSData* a = [OK([loaded getParameterWithName:@"fc1.weight" error:error]) tensorDataWithError:NULL];
  NSData* b = [OK([fromBytes getParameterWithName:@"fc1.weight" error:error]) tensorDataWithError:NULL];
  CHECK([a length] == 256 * 784 * 4 && [a isEqualToData:b], @"a checkpoint loaded from its bytes holds the same parameters");
  FAILS([[OTCheckpoint alloc] initWithPath:[scratch_ stringByAppendingPathComponent:@"missing.ckpt"] error:error], @"missing.ckpt");
  char garbage[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  FAILS([[OTCheckpoint alloc] initWithBuffer:[NSData dataWithBytes:garbage length:8] error:error], @"");
  // A parameter replaced, and one of the wrong shape refused by name.
  float bias[10];
  for (int i = 0; i < 10; ++i) bias[i] = i * 0.25f - 1;
  OTValue* v = [[[OTValue alloc] initWithTensorData:[NSData dataWithBytes:bias length:sizeof bias]
                                        elementType:OTTensorElementDataTypeFloat
                                              shape:Shape1(10)
                                              error:NULL] autorelease];
  OK([checkpoint updateParameterWithName:@"fc2.bias" value:v error:error]);
  CHECK(Scalar(OK([checkpoint getParameterWithName:@"fc2.bias" error:error])) == -1.0f, @"updateParameter then getParameter");
  OTValue* wrong = [[[OTValue alloc] initWithTensorData:[NSData dataWithBytes:bias length:12]
                                            elementType:OTTensorElementDataTypeFloat
                                                  shape:Shape1(3)
                                                  error:NULL] autorelease];
  FAILS([checkpoint updateParameterWithName:@"fc2.bias" value:wrong error:error], @"fc2.bias");
}

static void NamesBuffersAndScheduler(void) {
  OTCheckpoint* checkpoint = [OK([[OTCheckpoint alloc] initWithPath:P(@"checkpoint") error:error]) autorelease];
  OTTrainingSession* session = NewSession(checkpoint);
  if (session == nil) return;
  NSArray* inputs = OK([session getTrainInputNamesWithError:error]);
  NSArray* expectedInputs = [NSArray arrayWithObjects:@"input", @"labels", nil];
  CHECK([inputs isEqual:expectedInputs], @"training inputs: %@", inputs);
  CHECK([OK([session getEvalInputNamesWithError:error]) isEqual:inputs], @"eval inputs");
  NSArray* outputs = OK([session getTrainOutputNamesWithError:error]);
  CHECK([outputs count] == 2 && [[outputs objectAtIndex:1] isEqualToString:@"logits"], @"training outputs: %@", outputs);
  CHECK([OK([session getEvalOutputNamesWithError:error]) containsObject:@"logits"], @"the eval model outputs logits");

  const long long parameters = 784 * 256 + 256 + 256 * 10 + 10;
  OTValue* buffer = OK([session toBufferWithTrainable:YES error:error]);
  OTTensorTypeAndShapeInfo* info = OK([buffer tensorTypeAndShapeInfoWithError:error]);
  CHECK([[[info shape] objectAtIndex:0] longLongValue] == parameters, @"toBuffer holds every trainable value");
  // tensorData is the tensor's own memory: writing it changes the buffer, which fromBuffer then loads.
  NSMutableData* data = OK([buffer tensorDataWithError:error]);
  float* values = [data mutableBytes];
  for (long long i = 0; i < parameters; ++i) values[i] = (i % 97) * 0.001f;
  OK([session fromBufferWithValue:buffer error:error]);
  NSData* back = [OK([session toBufferWithTrainable:YES error:error]) tensorDataWithError:NULL];
  CHECK([back isEqualToData:data], @"fromBuffer then toBuffer gives the values back");
  OTValue* w = OK([checkpoint getParameterWithName:@"fc1.weight" error:error]);
  CHECK(((const float*)[[w tensorDataWithError:NULL] bytes])[98] == 0.001f, @"fromBuffer writes the checkpoint's parameters");
  OTValue* small = [[[OTValue alloc] initWithTensorData:[NSMutableData dataWithLength:20]
                                            elementType:OTTensorElementDataTypeFloat
                                                  shape:Shape1(5)
                                                  error:NULL] autorelease];
  FAILS([session fromBufferWithValue:small error:error], @"5 elements");

  OK([session setLearningRate:0.245f error:error]);
  CHECK(OK([session getLearningRateWithError:error]) == 0.245f, @"setLearningRate then getLearningRate");
  OK([session registerLinearLRSchedulerWithWarmupStepCount:2 totalStepCount:4 initialLr:0.1f error:error]);
  const float expected[4] = {0.05f, 0.1f, 0.05f, 0.0f};  // ONNX Runtime's, after optimizer steps 1 to 4
  for (int k = 0; k < 4; ++k) {
    OK([session trainStepWithInputValues:Batch(k) error:error]);
    OK([session optimizerStepWithError:error]);
    OK([session lazyResetGradWithError:error]);
    OK([session schedulerStepWithError:error]);
    float lr = OK([session getLearningRateWithError:error]);
    CHECK(fabsf(lr - expected[k]) < 1e-7f, @"scheduled rate %g after step %d, expected %g", lr, k + 1, expected[k]);
  }
}

static void ExportAndErrors(void) {
  OTCheckpoint* checkpoint = [OK([[OTCheckpoint alloc] initWithPath:P(@"checkpoint") error:error]) autorelease];
  OTTrainingSession* session = NewSession(checkpoint);
  if (session == nil) return;
  NSArray* batch = Batch(0);
  FAILS([session trainStepWithInputValues:[NSArray arrayWithObject:[batch objectAtIndex:0]] error:error], @"expected 2 user inputs");
  NSArray* notTensors = [NSArray arrayWithObjects:@"not a tensor", [batch objectAtIndex:1], nil];
  FAILS([session trainStepWithInputValues:notTensors error:error], @"input 0 is not an OTValue");
  OK([session trainStepWithInputValues:batch error:error]);
  OK([session optimizerStepWithError:error]);
  NSString* exported = [scratch_ stringByAppendingPathComponent:@"inference.onnx"];
  OK([session exportModelForInferenceWithOutputPath:exported graphOutputNames:[NSArray arrayWithObject:@"logits"] error:error]);
  NSDictionary* attributes = [[NSFileManager defaultManager] attributesOfItemAtPath:exported error:NULL];
  CHECK([attributes fileSize] > 784 * 256 * 4, @"the exported model holds the weights");
  FAILS([session exportModelForInferenceWithOutputPath:exported graphOutputNames:[NSArray array] error:error],
        @"Empty array of graph output names");
  FAILS([session exportModelForInferenceWithOutputPath:exported graphOutputNames:[NSArray arrayWithObject:@"nope"] error:error], @"nope");

  OTSessionOptions* options = [[[OTSessionOptions alloc] initWithError:NULL] autorelease];
  FAILS([options appendExecutionProvider:@"tpu" providerOptions:nil error:error], @"tpu");
  FAILS([options appendExecutionProvider:@"cuda" providerOptions:[NSDictionary dictionaryWithObject:@"1" forKey:@"arena"] error:error],
        @"arena");
  OK([options setMemoryLimit:1024 error:error]);
  FAILS([[OTTrainingSession alloc] initWithEnv:env_ sessionOptions:options checkpoint:checkpoint
                                trainModelPath:P(@"training_model.onnx") evalModelPath:nil optimizerModelPath:nil error:error],
        @"memory limit of 1024");
  FAILS([[OTTrainingSession alloc] initWithEnv:env_ sessionOptions:nil checkpoint:checkpoint
                                trainModelPath:P(@"no_such_model.onnx") evalModelPath:nil optimizerModelPath:nil error:error],
        @"no_such_model.onnx");
  NSError* e = nil;
  [[OTCheckpoint alloc] initWithPath:@"/nonexistent/checkpoint" error:&e];
  CHECK([[e domain] isEqualToString:OTErrorDomain] && [e code] != 0, @"errors carry the ontrain domain and the engine's code");
}

static void TensorsOfEveryType(void) {
  float f[6] = {1.5f, -2, 3, 4, 5, 6};
  double d[6] = {1e300, 2, 3, 4, 5, -6.25};
  int32_t i32[6] = {INT32_MIN, 2, 3, 4, 5, INT32_MAX};
  int64_t i64[6] = {INT64_MIN, 2, 3, 4, 5, INT64_MAX};
  uint8_t b[6] = {1, 0, 1, 1, 0, 0};
  const void* data[5] = {f, d, i32, i64, b};
  size_t sizes[5] = {sizeof f, sizeof d, sizeof i32, sizeof i64, sizeof b};
  OTTensorElementDataType types[5] = {OTTensorElementDataTypeFloat, OTTensorElementDataTypeDouble, OTTensorElementDataTypeInt32,
                                      OTTensorElementDataTypeInt64, OTTensorElementDataTypeBool};
  for (int t = 0; t < 5; ++t) {
    NSData* bytes = [NSData dataWithBytes:data[t] length:sizes[t]];
    OTValue* v = [OK([[OTValue alloc] initWithTensorData:bytes elementType:types[t] shape:Shape2(2, 3) error:error]) autorelease];
    OTTensorTypeAndShapeInfo* info = OK([v tensorTypeAndShapeInfoWithError:error]);
    CHECK([info elementType] == types[t] && [[info shape] isEqual:Shape2(2, 3)], @"type %d: type and shape", (int)types[t]);
    CHECK([OK([v tensorDataWithError:error]) isEqualToData:bytes], @"type %d: the bytes round trip", (int)types[t]);
  }
  FAILS([[OTValue alloc] initWithTensorData:[NSData dataWithBytes:f length:20] elementType:OTTensorElementDataTypeFloat
                                      shape:Shape2(2, 3) error:error],
        @"6 elements");
  FAILS([[OTValue alloc] initWithTensorData:[NSData dataWithBytes:f length:12] elementType:(OTTensorElementDataType)5
                                      shape:Shape1(6) error:error],
        @"not supported");
}

int main(int argc, char** argv) {
  NSAutoreleasePool* pool = [NSAutoreleasePool new];
  if (argc != 4) {
    fprintf(stderr, "usage: training_test ARTIFACTS_DIR REFERENCE_FILE SCRATCH_DIR\n");
    return 2;
  }
  dir_ = [NSString stringWithUTF8String:argv[1]];
  scratch_ = [NSString stringWithUTF8String:argv[3]];
  reference_ = [NSMutableDictionary dictionary];
  FILE* ref = fopen(argv[2], "r");
  char line[256];
  while (ref && fgets(line, sizeof line, ref)) {
    char* cut = strrchr(line, ' ');
    if (!cut) continue;
    *cut = '\0';
    [reference_ setObject:[NSNumber numberWithUnsignedLongLong:strtoull(cut + 1, NULL, 16)]
                   forKey:[NSString stringWithUTF8String:line]];
  }
  if (ref) fclose(ref);
  OTSetSeed(1);
  env_ = [[OTEnv alloc] initWithLoggingLevel:OTLoggingLevelWarning error:NULL];

  struct { const char* name; void (*run)(void); } cases[] = {
      {"LossesMatchTheCppEngine", LossesMatchTheCppEngine},
      {"LossesMatchTheCppEngineOnADevice", LossesMatchTheCppEngineOnADevice},
      {"CheckpointsAndProperties", CheckpointsAndProperties},
      {"NamesBuffersAndScheduler", NamesBuffersAndScheduler},
      {"ExportAndErrors", ExportAndErrors},
      {"TensorsOfEveryType", TensorsOfEveryType},
  };
  const int n = sizeof cases / sizeof cases[0];
  NSMutableString* xml = [NSMutableString string];
  int failures = 0;
  for (int c = 0; c < n; ++c) {
    NSAutoreleasePool* inner = [NSAutoreleasePool new];
    failure_ = nil;
    cases[c].run();
    printf("%s %s%s%s\n", failure_ ? "[  FAILED  ]" : "[  PASSED  ]", cases[c].name, failure_ ? ": " : "",
           failure_ ? [failure_ UTF8String] : "");
    [xml appendFormat:@"  <testcase name=\"%s\" classname=\"objc.TrainingTest\">", cases[c].name];
    if (failure_) {
      ++failures;
      NSMutableString* m = [[failure_ mutableCopy] autorelease];
      [m replaceOccurrencesOfString:@"&" withString:@"&amp;" options:0 range:NSMakeRange(0, [m length])];
      [m replaceOccurrencesOfString:@"\"" withString:@"&quot;" options:0 range:NSMakeRange(0, [m length])];
      [m replaceOccurrencesOfString:@"<" withString:@"&lt;" options:0 range:NSMakeRange(0, [m length])];
      [m replaceOccurrencesOfString:@">" withString:@"&gt;" options:0 range:NSMakeRange(0, [m length])];
      [xml appendFormat:@"<failure message=\"%@\"/>", m];
      [failure_ release];
    }
    [xml appendString:@"</testcase>\n"];
    [inner release];
  }
  const char* xml_path = getenv("XML_OUTPUT_FILE");
  if (xml_path && *xml_path) {
    NSString* doc = [NSString stringWithFormat:@"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"objc\" "
                                               @"tests=\"%d\" failures=\"%d\">\n%@</testsuite>\n</testsuites>\n",
                                               n, failures, xml];
    [doc writeToFile:[NSString stringWithUTF8String:xml_path] atomically:YES encoding:NSUTF8StringEncoding error:NULL];
  }
  if (failures) printf("Objective-C: %d of %d cases failed\n", failures, n);
  else printf("Objective-C: all %d cases passed\n", n);
  [env_ release];
  [pool release];
  return failures ? 1 : 0;
}
