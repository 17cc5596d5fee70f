// The Objective-C classes of ontrain_training.h over the C API.
#import "ontrain_training.h"

#include <string.h>

#include "ontrain/c_api.h"

NSString* const OTErrorDomain = @"ontrain";

// What the classes use of each other, beyond the public interface.
@interface OTEnv (Internal)
- (OtEnv*)handle;
@end
@interface OTSessionOptions (Internal)
- (OtSessionOptions*)handle;
@end
@interface OTTensorTypeAndShapeInfo (Internal)
- (id)initWithInfo:(OtTensorTypeAndShapeInfo*)info;  // takes ownership of info
@end
@interface OTValue (Internal)
- (id)initWithHandle:(OtValue*)value;  // takes ownership of value
- (OtValue*)handle;
@end
@interface OTCheckpoint (Internal)
- (OtCheckpointState*)handle;
@end

// Fills *error from a C API status (and releases it); YES when there was none.
static BOOL OTCheck(OtStatus* status, NSError** error) {
  if (status == NULL) return YES;
  if (error != NULL) {
    NSString* message = [NSString stringWithUTF8String:OtStatusMessage(status)];
    if (message == nil) message = @"(the engine's message is not valid UTF-8)";
    *error = [NSError errorWithDomain:OTErrorDomain
                                 code:OtStatusCode(status)
                             userInfo:[NSDictionary dictionaryWithObject:message forKey:NSLocalizedDescriptionKey]];
  }
  OtReleaseStatus(status);
  return NO;
}

// An error of the binding itself (bad arguments caught before the engine is called).
static BOOL OTFail(NSError** error, NSString* message) {
  if (error != NULL) {
    *error = [NSError errorWithDomain:OTErrorDomain
                                 code:3 /* ontrain's InvalidArgument */
                             userInfo:[NSDictionary dictionaryWithObject:message forKey:NSLocalizedDescriptionKey]];
  }
  return NO;
}

static size_t OTElementSize(OTTensorElementDataType type) {
  switch (type) {
    case OTTensorElementDataTypeFloat: return 4;
    case OTTensorElementDataTypeInt32: return 4;
    case OTTensorElementDataTypeInt64: return 8;
    case OTTensorElementDataTypeBool: return 1;
    case OTTensorElementDataTypeDouble: return 8;
    default: return 0;
  }
}

void OTSetSeed(int64_t seed) { OtReleaseStatus(OtSetSeed(seed)); }

// ---- OTEnv ----

@implementation OTEnv
- (id)initWithLoggingLevel:(OTLoggingLevel)loggingLevel error:(NSError**)error {
  if ((self = [super init]) == nil) return nil;
  if (!OTCheck(OtCreateEnv(&env_), error)) {
    [self release];
    return nil;
  }
  return self;
}
- (OtEnv*)handle {
  return env_;
}
- (void)dealloc {
  if (env_) OtReleaseEnv(env_);
  [super dealloc];
}
@end

// ---- OTSessionOptions ----

@implementation OTSessionOptions
- (id)initWithError:(NSError**)error {
  if ((self = [super init]) == nil) return nil;
  if (!OTCheck(OtCreateSessionOptions(&options_), error)) {
    [self release];
    return nil;
  }
  return self;
}
- (OtSessionOptions*)handle {
  return options_;
}
- (BOOL)setIntraOpNumThreads:(int)intraOpNumThreads error:(NSError**)error {
  return OTCheck(OtSessionOptionsSetIntraOpThreads(options_, intraOpNumThreads), error);
}
- (BOOL)appendExecutionProvider:(NSString*)providerName
                providerOptions:(NSDictionary*)providerOptions
                          error:(NSError**)error {
  if (providerName == nil) return OTFail(error, @"providerName is nil");
  NSString* name = providerName;
  NSString* device = [providerOptions objectForKey:@"device_id"];
  if (device != nil) name = [NSString stringWithFormat:@"%@:%@", providerName, device];
  for (NSString* key in providerOptions) {
    if (![key isEqualToString:@"device_id"]) {
      return OTFail(error, [NSString stringWithFormat:@"provider option \"%@\" is not supported (only device_id is)", key]);
    }
  }
  return OTCheck(OtSessionOptionsAppendProvider(options_, [name UTF8String]), error);
}
- (BOOL)setMemoryLimit:(int64_t)bytes error:(NSError**)error {
  return OTCheck(OtSessionOptionsSetMemoryLimit(options_, bytes), error);
}
- (void)dealloc {
  if (options_) OtReleaseSessionOptions(options_);
  [super dealloc];
}
@end

// ---- OTTensorTypeAndShapeInfo ----

@implementation OTTensorTypeAndShapeInfo
- (id)initWithInfo:(OtTensorTypeAndShapeInfo*)info {
  if ((self = [super init]) == nil) return nil;
  elementType_ = (OTTensorElementDataType)OtGetTensorElementType(info);
  size_t rank = OtGetDimensionsCount(info);
  int64_t dims[rank > 0 ? rank : 1];
  OtGetDimensions(info, dims, rank);
  NSMutableArray* shape = [NSMutableArray arrayWithCapacity:rank];
  for (size_t i = 0; i < rank; ++i) [shape addObject:[NSNumber numberWithLongLong:dims[i]]];
  shape_ = [shape copy];
  OtReleaseTensorTypeAndShapeInfo(info);
  return self;
}
- (OTTensorElementDataType)elementType {
  return elementType_;
}
- (NSArray*)shape {
  return shape_;
}
- (void)dealloc {
  [shape_ release];
  [super dealloc];
}
@end

// ---- OTValue ----

@implementation OTValue
- (id)initWithHandle:(OtValue*)value {
  if ((self = [super init]) == nil) return nil;
  value_ = value;
  return self;
}
- (id)initWithTensorData:(NSData*)tensorData
             elementType:(OTTensorElementDataType)elementType
                   shape:(NSArray*)shape
                   error:(NSError**)error {
  if ((self = [super init]) == nil) return nil;
  size_t size = OTElementSize(elementType);
  NSUInteger rank = [shape count];
  int64_t dims[rank > 0 ? rank : 1];
  int64_t count = 1;
  for (NSUInteger i = 0; i < rank; ++i) {
    dims[i] = [[shape objectAtIndex:i] longLongValue];
    if (dims[i] < 0) count = -1;
    if (count >= 0) count *= dims[i];
  }
  NSString* problem = nil;
  if (tensorData == nil) problem = @"tensorData is nil";
  else if (size == 0) problem = [NSString stringWithFormat:@"element type %d is not supported (float, double, int32, int64 and bool are)", (int)elementType];
  else if (count < 0) problem = @"the shape has a negative dimension";
  else if ((NSUInteger)count * size != [tensorData length]) {
    problem = [NSString stringWithFormat:@"the shape holds %lld elements (%llu bytes) but tensorData has %lu bytes",
                                         (long long)count, (unsigned long long)count * size, (unsigned long)[tensorData length]];
  }
  if (problem != nil) {
    OTFail(error, problem);
    [self release];
    return nil;
  }
  if (!OTCheck(OtCreateTensor((OtElementType)elementType, dims, rank, [tensorData bytes], &value_), error)) {
    [self release];
    return nil;
  }
  return self;
}
- (OtValue*)handle {
  return value_;
}
- (OTTensorTypeAndShapeInfo*)tensorTypeAndShapeInfoWithError:(NSError**)error {
  OtTensorTypeAndShapeInfo* info = NULL;
  if (!OTCheck(OtGetTensorTypeAndShape(value_, &info), error)) return nil;
  return [[[OTTensorTypeAndShapeInfo alloc] initWithInfo:info] autorelease];
}
- (NSMutableData*)tensorDataWithError:(NSError**)error {
  OtTensorTypeAndShapeInfo* info = NULL;
  if (!OTCheck(OtGetTensorTypeAndShape(value_, &info), error)) return nil;
  size_t bytes = OTElementSize((OTTensorElementDataType)OtGetTensorElementType(info));
  size_t rank = OtGetDimensionsCount(info);
  int64_t dims[rank > 0 ? rank : 1];
  OtGetDimensions(info, dims, rank);
  OtReleaseTensorTypeAndShapeInfo(info);
  for (size_t i = 0; i < rank; ++i) bytes *= (size_t)dims[i];
  void* data = NULL;
  if (!OTCheck(OtTensorMutableData(value_, &data), error)) return nil;
  return [NSMutableData dataWithBytesNoCopy:data length:bytes freeWhenDone:NO];
}
- (void)dealloc {
  if (value_) OtReleaseValue(value_);
  [super dealloc];
}
@end

// ---- OTCheckpoint ----

@implementation OTCheckpoint
- (id)initWithPath:(NSString*)path error:(NSError**)error {
  if ((self = [super init]) == nil) return nil;
  if (path == nil || !OTCheck(OtLoadCheckpoint([path fileSystemRepresentation], &state_), error)) {
    if (path == nil) OTFail(error, @"path is nil");
    [self release];
    return nil;
  }
  return self;
}
- (id)initWithBuffer:(NSData*)buffer error:(NSError**)error {
  if ((self = [super init]) == nil) return nil;
  if (buffer == nil || !OTCheck(OtLoadCheckpointFromBuffer([buffer bytes], [buffer length], &state_), error)) {
    if (buffer == nil) OTFail(error, @"buffer is nil");
    [self release];
    return nil;
  }
  return self;
}
- (OtCheckpointState*)handle {
  return state_;
}
- (BOOL)saveCheckpointToPath:(NSString*)path withOptimizerState:(BOOL)includeOptimizerState error:(NSError**)error {
  if (path == nil) return OTFail(error, @"path is nil");
  return OTCheck(OtSaveCheckpoint(state_, [path fileSystemRepresentation], includeOptimizerState ? true : false), error);
}
- (BOOL)addIntPropertyWithName:(NSString*)name value:(int64_t)value error:(NSError**)error {
  if (name == nil) return OTFail(error, @"name is nil");
  return OTCheck(OtAddProperty(state_, [name UTF8String], OtIntProperty, &value), error);
}
- (BOOL)addFloatPropertyWithName:(NSString*)name value:(float)value error:(NSError**)error {
  if (name == nil) return OTFail(error, @"name is nil");
  return OTCheck(OtAddProperty(state_, [name UTF8String], OtFloatProperty, &value), error);
}
- (BOOL)addStringPropertyWithName:(NSString*)name value:(NSString*)value error:(NSError**)error {
  if (name == nil || value == nil) return OTFail(error, @"name or value is nil");
  return OTCheck(OtAddProperty(state_, [name UTF8String], OtStringProperty, (void*)[value UTF8String]), error);
}
// The property's value as the C API hands it out (the caller frees it with OtFree), checked for `type`.
- (void*)property:(NSString*)name ofType:(OtPropertyType)type error:(NSError**)error {
  if (name == nil) {
    OTFail(error, @"name is nil");
    return NULL;
  }
  OtPropertyType actual;
  void* value = NULL;
  if (!OTCheck(OtGetProperty(state_, [name UTF8String], NULL, &actual, &value), error)) return NULL;
  if (actual != type) {
    static const char* names[] = {"an int", "a float", "a string"};
    OtFree(value);
    OTFail(error, [NSString stringWithFormat:@"property \"%@\" is %s, not %s", name, names[actual], names[type]]);
    return NULL;
  }
  return value;
}
- (int64_t)getIntPropertyWithName:(NSString*)name error:(NSError**)error {
  int64_t* v = [self property:name ofType:OtIntProperty error:error];
  int64_t out = v ? *v : 0;
  OtFree(v);
  return out;
}
- (float)getFloatPropertyWithName:(NSString*)name error:(NSError**)error {
  float* v = [self property:name ofType:OtFloatProperty error:error];
  float out = v ? *v : 0.0f;
  OtFree(v);
  return out;
}
- (NSString*)getStringPropertyWithName:(NSString*)name error:(NSError**)error {
  char* v = [self property:name ofType:OtStringProperty error:error];
  NSString* out = v ? [NSString stringWithUTF8String:v] : nil;
  OtFree(v);
  return out;
}
- (OTValue*)getParameterWithName:(NSString*)name error:(NSError**)error {
  if (name == nil) {
    OTFail(error, @"name is nil");
    return nil;
  }
  OtValue* value = NULL;
  if (!OTCheck(OtGetParameter(state_, [name UTF8String], NULL, &value), error)) return nil;
  return [[[OTValue alloc] initWithHandle:value] autorelease];
}
- (BOOL)updateParameterWithName:(NSString*)name value:(OTValue*)value error:(NSError**)error {
  if (name == nil || value == nil) return OTFail(error, @"name or value is nil");
  return OTCheck(OtUpdateParameter(state_, [name UTF8String], [value handle]), error);
}
- (void)dealloc {
  if (state_) OtReleaseCheckpointState(state_);
  [super dealloc];
}
@end

// ---- OTTrainingSession ----

typedef OtStatus* (*OTCountFn)(const OtTrainingSession*, size_t*);
typedef OtStatus* (*OTNameFn)(const OtTrainingSession*, size_t, const OtAllocator*, char**);

@implementation OTTrainingSession
- (id)initWithEnv:(OTEnv*)env
        sessionOptions:(OTSessionOptions*)sessionOptions
            checkpoint:(OTCheckpoint*)checkpoint
        trainModelPath:(NSString*)trainModelPath
         evalModelPath:(NSString*)evalModelPath
    optimizerModelPath:(NSString*)optimizerModelPath
                 error:(NSError**)error {
  if ((self = [super init]) == nil) return nil;
  if (env == nil || checkpoint == nil || trainModelPath == nil) {
    OTFail(error, @"env, checkpoint and trainModelPath must not be nil");
    [self release];
    return nil;
  }
  OtStatus* status = OtCreateTrainingSession(
      [env handle], sessionOptions ? [sessionOptions handle] : NULL, [checkpoint handle],
      [trainModelPath fileSystemRepresentation], evalModelPath ? [evalModelPath fileSystemRepresentation] : NULL,
      optimizerModelPath ? [optimizerModelPath fileSystemRepresentation] : NULL, &session_);
  if (!OTCheck(status, error)) {
    [self release];
    return nil;
  }
  checkpoint_ = [checkpoint retain];
  return self;
}
- (NSArray*)step:(BOOL)training inputs:(NSArray*)inputs error:(NSError**)error {
  NSUInteger n = [inputs count];
  const OtValue* in[n > 0 ? n : 1];
  for (NSUInteger i = 0; i < n; ++i) {
    id v = [inputs objectAtIndex:i];
    if (![v isKindOfClass:[OTValue class]]) {
      OTFail(error, [NSString stringWithFormat:@"input %lu is not an OTValue", (unsigned long)i]);
      return nil;
    }
    in[i] = [(OTValue*)v handle];
  }
  size_t outputs = 0;
  if (!OTCheck(training ? OtTrainingSessionGetTrainingModelOutputCount(session_, &outputs)
                        : OtTrainingSessionGetEvalModelOutputCount(session_, &outputs),
               error)) {
    return nil;
  }
  OtValue* out[outputs > 0 ? outputs : 1];
  memset(out, 0, sizeof out);
  OtStatus* status = training ? OtTrainStep(session_, NULL, n, in, outputs, out)
                              : OtEvalStep(session_, NULL, n, in, outputs, out);
  NSMutableArray* result = [NSMutableArray arrayWithCapacity:outputs];
  for (size_t i = 0; i < outputs; ++i) {
    if (out[i] == NULL) continue;
    OTValue* v = [[OTValue alloc] initWithHandle:out[i]];
    [result addObject:v];
    [v release];
  }
  if (!OTCheck(status, error)) return nil;
  return result;
}
- (NSArray*)trainStepWithInputValues:(NSArray*)inputs error:(NSError**)error {
  return [self step:YES inputs:inputs error:error];
}
- (NSArray*)evalStepWithInputValues:(NSArray*)inputs error:(NSError**)error {
  return [self step:NO inputs:inputs error:error];
}
- (BOOL)lazyResetGradWithError:(NSError**)error {
  return OTCheck(OtLazyResetGrad(session_), error);
}
- (BOOL)optimizerStepWithError:(NSError**)error {
  return OTCheck(OtOptimizerStep(session_, NULL), error);
}
- (NSArray*)namesWithCount:(OTCountFn)count name:(OTNameFn)name error:(NSError**)error {
  size_t n = 0;
  if (!OTCheck(count(session_, &n), error)) return nil;
  NSMutableArray* names = [NSMutableArray arrayWithCapacity:n];
  for (size_t i = 0; i < n; ++i) {
    char* s = NULL;
    if (!OTCheck(name(session_, i, NULL, &s), error)) return nil;
    [names addObject:[NSString stringWithUTF8String:s]];
    OtFree(s);
  }
  return names;
}
- (NSArray*)getTrainInputNamesWithError:(NSError**)error {
  return [self namesWithCount:OtTrainingSessionGetTrainingModelInputCount
                         name:OtTrainingSessionGetTrainingModelInputName
                        error:error];
}
- (NSArray*)getEvalInputNamesWithError:(NSError**)error {
  return [self namesWithCount:OtTrainingSessionGetEvalModelInputCount
                         name:OtTrainingSessionGetEvalModelInputName
                        error:error];
}
- (NSArray*)getTrainOutputNamesWithError:(NSError**)error {
  return [self namesWithCount:OtTrainingSessionGetTrainingModelOutputCount
                         name:OtTrainingSessionGetTrainingModelOutputName
                        error:error];
}
- (NSArray*)getEvalOutputNamesWithError:(NSError**)error {
  return [self namesWithCount:OtTrainingSessionGetEvalModelOutputCount
                         name:OtTrainingSessionGetEvalModelOutputName
                        error:error];
}
- (BOOL)registerLinearLRSchedulerWithWarmupStepCount:(int64_t)warmupStepCount
                                      totalStepCount:(int64_t)totalStepCount
                                           initialLr:(float)initialLr
                                               error:(NSError**)error {
  return OTCheck(OtRegisterLinearLRScheduler(session_, warmupStepCount, totalStepCount, initialLr), error);
}
- (BOOL)schedulerStepWithError:(NSError**)error {
  return OTCheck(OtSchedulerStep(session_), error);
}
- (float)getLearningRateWithError:(NSError**)error {
  float lr = 0.0f;
  if (!OTCheck(OtGetLearningRate(session_, &lr), error)) return 0.0f;
  return lr;
}
- (BOOL)setLearningRate:(float)lr error:(NSError**)error {
  return OTCheck(OtSetLearningRate(session_, lr), error);
}
- (OTValue*)toBufferWithTrainable:(BOOL)onlyTrainable error:(NSError**)error {
  size_t size = 0;
  if (!OTCheck(OtGetParametersSize(session_, &size, onlyTrainable ? true : false), error)) return nil;
  int64_t shape[1] = {(int64_t)size};
  OtValue* buffer = NULL;
  if (!OTCheck(OtCreateTensor(OT_FLOAT, shape, 1, NULL, &buffer), error)) return nil;
  OTValue* value = [[[OTValue alloc] initWithHandle:buffer] autorelease];
  if (!OTCheck(OtCopyParametersToBuffer(session_, buffer, onlyTrainable ? true : false), error)) return nil;
  return value;
}
- (BOOL)fromBufferWithValue:(OTValue*)buffer error:(NSError**)error {
  if (buffer == nil) return OTFail(error, @"buffer is nil");
  OTTensorTypeAndShapeInfo* info = [buffer tensorTypeAndShapeInfoWithError:error];
  if (info == nil) return NO;
  if ([[info shape] count] != 1) return OTFail(error, @"the buffer must be a 1-D tensor");
  long long length = [[[info shape] objectAtIndex:0] longLongValue];
  size_t trainable = 0, all = 0;
  if (!OTCheck(OtGetParametersSize(session_, &trainable, true), error)) return NO;
  if (!OTCheck(OtGetParametersSize(session_, &all, false), error)) return NO;
  if (length != (long long)trainable && length != (long long)all) {
    return OTFail(error, [NSString stringWithFormat:@"the buffer holds %lld elements; the trainable parameters have %zu and all "
                                                    @"parameters %zu",
                                                    length, trainable, all]);
  }
  return OTCheck(OtCopyBufferToParameters(session_, [buffer handle], length == (long long)trainable), error);
}
- (BOOL)exportModelForInferenceWithOutputPath:(NSString*)inferenceModelPath
                             graphOutputNames:(NSArray*)graphOutputNames
                                        error:(NSError**)error {
  if (inferenceModelPath == nil) return OTFail(error, @"inferenceModelPath is nil");
  NSUInteger n = [graphOutputNames count];
  const char* names[n > 0 ? n : 1];
  for (NSUInteger i = 0; i < n; ++i) names[i] = [[graphOutputNames objectAtIndex:i] UTF8String];
  return OTCheck(OtExportModelForInferencing(session_, [inferenceModelPath fileSystemRepresentation], n, names), error);
}
- (void)dealloc {
  if (session_) OtReleaseTrainingSession(session_);
  [checkpoint_ release];
  [super dealloc];
}
@end
