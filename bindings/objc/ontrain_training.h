// ontrain's Objective-C training API: ONNX Runtime's Objective-C training classes (ORTEnv, ORTSessionOptions,
// ORTValue, ORTCheckpoint, ORTTrainingSession) with the prefix OT and the same selectors, over the C API of
// engine/include/ontrain/c_api.h. Errors come back through NSError** (domain OTErrorDomain, the engine's
// status code and message); a method that fails returns nil, NO or 0 and fills *error when error is not NULL.
//
// Manual reference counting (GNUstep with GCC has no ARC): objects follow Cocoa's rules. A training session
// retains its checkpoint. One thread at a time per session; separate sessions may run concurrently.
#import <Foundation/Foundation.h>
#include <stdint.h>

// The C API's handles (engine/include/ontrain/c_api.h); GCC's Objective-C keeps instance variables in the
// interface.
struct OtEnv;
struct OtSessionOptions;
struct OtValue;
struct OtCheckpointState;
struct OtTrainingSession;

extern NSString* const OTErrorDomain;

typedef enum {
  OTLoggingLevelVerbose = 0,
  OTLoggingLevelInfo = 1,
  OTLoggingLevelWarning = 2,
  OTLoggingLevelError = 3,
  OTLoggingLevelFatal = 4,
} OTLoggingLevel;

// ONNX's TensorProto.DataType codes, for the element types the binding reads and writes.
typedef enum {
  OTTensorElementDataTypeUndefined = 0,
  OTTensorElementDataTypeFloat = 1,
  OTTensorElementDataTypeInt32 = 6,
  OTTensorElementDataTypeInt64 = 7,
  OTTensorElementDataTypeBool = 9,
  OTTensorElementDataTypeDouble = 11,
} OTTensorElementDataType;

// Seeds the engine's random numbers (dropout, generated initial weights).
void OTSetSeed(int64_t seed);

// The process's engine environment (the C API keeps no state in it; ONNX Runtime's code makes one first).
@interface OTEnv : NSObject {
 @private
  struct OtEnv* env_;
}
- (id)initWithLoggingLevel:(OTLoggingLevel)loggingLevel error:(NSError**)error;
@end

@interface OTSessionOptions : NSObject {
 @private
  struct OtSessionOptions* options_;
}
- (id)initWithError:(NSError**)error;
// Threads per provider; 0 is one per core.
- (BOOL)setIntraOpNumThreads:(int)intraOpNumThreads error:(NSError**)error;
// "cpu", "sim" or "cuda" (providerOptions: "device_id" -> "N" picks device N), in priority order; the CPU is
// always the fallback.
- (BOOL)appendExecutionProvider:(NSString*)providerName
                providerOptions:(NSDictionary*)providerOptions
                          error:(NSError**)error;
// Caps the memory a session plans, in bytes (0: no cap).
- (BOOL)setMemoryLimit:(int64_t)bytes error:(NSError**)error;
@end

@interface OTTensorTypeAndShapeInfo : NSObject {
 @private
  OTTensorElementDataType elementType_;
  NSArray* shape_;
}
@property(nonatomic, readonly) OTTensorElementDataType elementType;
@property(nonatomic, readonly, retain) NSArray* shape;  // NSNumber (long long) per dimension
@end

// A host tensor held by the engine.
@interface OTValue : NSObject {
 @private
  struct OtValue* value_;
}
// A tensor holding a copy of `tensorData` (its length must be the shape's element count times the element
// size; bool is one byte per element).
- (id)initWithTensorData:(NSData*)tensorData
             elementType:(OTTensorElementDataType)elementType
                   shape:(NSArray*)shape
                   error:(NSError**)error;
- (OTTensorTypeAndShapeInfo*)tensorTypeAndShapeInfoWithError:(NSError**)error;
// The tensor's own memory (writes go to the tensor), valid while this value lives.
- (NSMutableData*)tensorDataWithError:(NSError**)error;
@end

@interface OTCheckpoint : NSObject {
 @private
  struct OtCheckpointState* state_;
}
- (id)initWithPath:(NSString*)path error:(NSError**)error;
- (id)initWithBuffer:(NSData*)buffer error:(NSError**)error;
// Atomic: a failed save leaves the previous file as it was.
- (BOOL)saveCheckpointToPath:(NSString*)path withOptimizerState:(BOOL)includeOptimizerState error:(NSError**)error;
- (BOOL)addIntPropertyWithName:(NSString*)name value:(int64_t)value error:(NSError**)error;
- (BOOL)addFloatPropertyWithName:(NSString*)name value:(float)value error:(NSError**)error;
- (BOOL)addStringPropertyWithName:(NSString*)name value:(NSString*)value error:(NSError**)error;
- (int64_t)getIntPropertyWithName:(NSString*)name error:(NSError**)error;
- (float)getFloatPropertyWithName:(NSString*)name error:(NSError**)error;
- (NSString*)getStringPropertyWithName:(NSString*)name error:(NSError**)error;
// A copy of a parameter's values; and replacing them (same type and shape).
- (OTValue*)getParameterWithName:(NSString*)name error:(NSError**)error;
- (BOOL)updateParameterWithName:(NSString*)name value:(OTValue*)value error:(NSError**)error;
@end

@interface OTTrainingSession : NSObject {
 @private
  struct OtTrainingSession* session_;
  OTCheckpoint* checkpoint_;  // retained: the session reads and writes its state
}
// evalModelPath and optimizerModelPath may be nil.
- (id)initWithEnv:(OTEnv*)env
        sessionOptions:(OTSessionOptions*)sessionOptions
            checkpoint:(OTCheckpoint*)checkpoint
        trainModelPath:(NSString*)trainModelPath
         evalModelPath:(NSString*)evalModelPath
    optimizerModelPath:(NSString*)optimizerModelPath
                 error:(NSError**)error;
// Inputs in getTrainInputNamesWithError: order; returns the outputs (the loss first).
- (NSArray*)trainStepWithInputValues:(NSArray*)inputs error:(NSError**)error;
- (NSArray*)evalStepWithInputValues:(NSArray*)inputs error:(NSError**)error;
- (BOOL)lazyResetGradWithError:(NSError**)error;
- (BOOL)optimizerStepWithError:(NSError**)error;
- (NSArray*)getTrainInputNamesWithError:(NSError**)error;
- (NSArray*)getEvalInputNamesWithError:(NSError**)error;
- (NSArray*)getTrainOutputNamesWithError:(NSError**)error;
- (NSArray*)getEvalOutputNamesWithError:(NSError**)error;
- (BOOL)registerLinearLRSchedulerWithWarmupStepCount:(int64_t)warmupStepCount
                                      totalStepCount:(int64_t)totalStepCount
                                           initialLr:(float)initialLr
                                               error:(NSError**)error;
- (BOOL)schedulerStepWithError:(NSError**)error;
- (float)getLearningRateWithError:(NSError**)error;
- (BOOL)setLearningRate:(float)lr error:(NSError**)error;
// The parameters (trainable only, or all) as one flat float tensor; fromBuffer takes either length.
- (OTValue*)toBufferWithTrainable:(BOOL)onlyTrainable error:(NSError**)error;
- (BOOL)fromBufferWithValue:(OTValue*)buffer error:(NSError**)error;
- (BOOL)exportModelForInferenceWithOutputPath:(NSString*)inferenceModelPath
                             graphOutputNames:(NSArray*)graphOutputNames
                                        error:(NSError**)error;
@end
