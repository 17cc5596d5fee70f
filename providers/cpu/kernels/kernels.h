// Factories of the CPU kernels, one per op family file. The kernel list (cpu_kernel_list.cc) is the only
// place that maps ops, opset ranges and dtypes to them.
#pragma once

#include "providers/kernel.h"

namespace ontrain {
namespace cpu {

// binary.cc
extern KernelFactory kAdd;
extern KernelFactory kSub;
extern KernelFactory kMul;
extern KernelFactory kDiv;
extern KernelFactory kEqual;
extern KernelFactory kLess;
extern KernelFactory kGreater;
extern KernelFactory kLessOrEqual;
extern KernelFactory kGreaterOrEqual;
extern KernelFactory kAnd;
extern KernelFactory kOr;
extern KernelFactory kXor;
extern KernelFactory kPow;
extern KernelFactory kMod;
extern KernelFactory kPRelu;
extern KernelFactory kSum;
extern KernelFactory kMean;
extern KernelFactory kMax;
extern KernelFactory kMin;
extern KernelFactory kWhere;
extern KernelFactory kClip;

// scatter_gather.cc
extern KernelFactory kGatherND;
extern KernelFactory kGatherNDGrad;
extern KernelFactory kScatterND;
extern KernelFactory kScatterElements;
extern KernelFactory kTopK;

// lstm.cc
extern KernelFactory kLstm;
extern KernelFactory kLstmTraining;
extern KernelFactory kLstmGrad;

// gru.cc
extern KernelFactory kGru;
extern KernelFactory kGruTraining;
extern KernelFactory kGruGrad;

// rnn.cc
extern KernelFactory kRnn;
extern KernelFactory kRnnGrad;

// einsum.cc
extern KernelFactory kEinsum;

// resize.cc
extern KernelFactory kResize;
extern KernelFactory kResizeGrad;

// conv.cc
extern KernelFactory kConv;
extern KernelFactory kFusedConv;
extern KernelFactory kFusedConvMaxPool;
// conv_transpose.cc
extern KernelFactory kConvTranspose;

// generate_ops.cc
extern KernelFactory kConstant;
extern KernelFactory kConstantOfShape;
extern KernelFactory kRange;
extern KernelFactory kEyeLike;
extern KernelFactory kCast;
extern KernelFactory kCastLike;

// grad_conv.cc
extern KernelFactory kConvGrad;
extern KernelFactory kMaxPoolReluConvGrad;

// grad_pool.cc
extern KernelFactory kMaxPoolGrad;
extern KernelFactory kMaxPoolReluGrad;
extern KernelFactory kAveragePoolGrad;

// grad_elementwise.cc
extern KernelFactory kReluGrad;
extern KernelFactory kClipGrad;
extern KernelFactory kSigmoidGrad;
extern KernelFactory kTanhGrad;
extern KernelFactory kGeluGrad;
extern KernelFactory kFastGeluGrad;
extern KernelFactory kLeakyReluGrad;
extern KernelFactory kDropoutGrad;
extern KernelFactory kScale;
extern KernelFactory kGeluAndSlope;
extern KernelFactory kGeluSlopeGrad;

// grad_norm.cc
extern KernelFactory kBatchNormalizationGrad;
extern KernelFactory kBatchNormActivationGrad;
extern KernelFactory kLayerNormalizationGrad;

// grad_softmax_loss.cc
extern KernelFactory kSoftmaxGrad;
extern KernelFactory kSoftmaxGrad13;
extern KernelFactory kLogSoftmaxGrad;
extern KernelFactory kLogSoftmaxGrad13;
extern KernelFactory kSoftmaxCrossEntropyLossGrad;
extern KernelFactory kSoftmaxCrossEntropyLossInternalGrad;

// grad_tensor.cc
extern KernelFactory kInPlaceAccumulatorV2;
extern KernelFactory kBroadcastGradientArgs;
extern KernelFactory kDivGrad;
extern KernelFactory kGatherGrad;
extern KernelFactory kGatherElementsGrad;
extern KernelFactory kFusedMatMul;
extern KernelFactory kMatMulBias;
extern KernelFactory kConcatTraining;

// index_ops.cc
extern KernelFactory kGather;
extern KernelFactory kGatherElements;
extern KernelFactory kSlice;
extern KernelFactory kSliceGrad;
extern KernelFactory kPad;
extern KernelFactory kOneHot;
extern KernelFactory kTrilu;
extern KernelFactory kCumSum;

// loss.cc
extern KernelFactory kSoftmaxCrossEntropyLoss;
extern KernelFactory kSoftmaxCrossEntropyLossInternal;
extern KernelFactory kNegativeLogLikelihoodLoss;

// matmul.cc
extern KernelFactory kMatMul;
extern KernelFactory kGemm;
extern KernelFactory kFusedGemm;  // com.microsoft FusedGemm, activation "Relu" only

// norm.cc
extern KernelFactory kBatchNormalization;
extern KernelFactory kBatchNormInternal;
extern KernelFactory kBatchNormActivation;
extern KernelFactory kLayerNormalization;
extern KernelFactory kInstanceNormalization;
extern KernelFactory kDropout;

// optimizer_ops.cc
extern KernelFactory kAdam;
extern KernelFactory kAdagrad;
extern KernelFactory kMomentum;

// pool.cc
extern KernelFactory kMaxPool;
extern KernelFactory kAveragePool;
extern KernelFactory kGlobalAveragePool;
extern KernelFactory kGlobalMaxPool;

// reduce.cc
extern KernelFactory kReduceSum;
extern KernelFactory kReduceSumTraining;
extern KernelFactory kReduceMean;
extern KernelFactory kReduceMax;
extern KernelFactory kReduceMin;
extern KernelFactory kReduceProd;
extern KernelFactory kReduceSumSquare;
extern KernelFactory kReduceL1;
extern KernelFactory kReduceL2;
extern KernelFactory kReduceLogSum;
extern KernelFactory kReduceLogSumExp;
extern KernelFactory kArgMax;
extern KernelFactory kArgMin;

// shape_ops.cc
extern KernelFactory kDepthToSpace;
extern KernelFactory kSpaceToDepth;
extern KernelFactory kIdentity;
extern KernelFactory kReshape;
extern KernelFactory kFlatten;
extern KernelFactory kSqueeze;
extern KernelFactory kUnsqueeze;
extern KernelFactory kTranspose;
extern KernelFactory kConcat;
extern KernelFactory kSplit;
extern KernelFactory kExpand;
extern KernelFactory kTile;
extern KernelFactory kShape;
extern KernelFactory kSize;
extern KernelFactory kSplitTraining;

// softmax.cc
extern KernelFactory kSoftmax;
extern KernelFactory kLogSoftmax;
extern KernelFactory kHardmax;

// softmax_fused.cc
extern KernelFactory kScaledMaskedSoftmax;
extern KernelFactory kScaledMaskedSoftmaxGrad;

// unary.cc
extern KernelFactory kSqrt;
extern KernelFactory kReciprocal;
extern KernelFactory kExp;
extern KernelFactory kLog;
extern KernelFactory kErf;
extern KernelFactory kFloor;
extern KernelFactory kCeil;
extern KernelFactory kRound;
extern KernelFactory kTanh;
extern KernelFactory kSoftsign;
extern KernelFactory kSin;
extern KernelFactory kCos;
extern KernelFactory kTan;
extern KernelFactory kAsin;
extern KernelFactory kAcos;
extern KernelFactory kAtan;
extern KernelFactory kSinh;
extern KernelFactory kCosh;
extern KernelFactory kAsinh;
extern KernelFactory kAcosh;
extern KernelFactory kAtanh;
extern KernelFactory kSigmoid;
extern KernelFactory kSoftplus;
extern KernelFactory kLeakyRelu;
extern KernelFactory kElu;
extern KernelFactory kCelu;
extern KernelFactory kSelu;
extern KernelFactory kHardSigmoid;
extern KernelFactory kHardSwish;
extern KernelFactory kThresholdedRelu;
extern KernelFactory kGelu;
extern KernelFactory kNeg;
extern KernelFactory kAbs;
extern KernelFactory kSign;
extern KernelFactory kRelu;
extern KernelFactory kNot;
extern KernelFactory kIsNaN;
extern KernelFactory kIsInf;
extern KernelFactory kMsGelu;
extern KernelFactory kMsFastGelu;

// sequence_ops.cc
extern KernelFactory kSequenceConstruct;
extern KernelFactory kSequenceEmpty;
extern KernelFactory kSequenceAt;
extern KernelFactory kSequenceLength;
extern KernelFactory kSequenceInsert;
extern KernelFactory kSequenceErase;
extern KernelFactory kConcatFromSequence;
extern KernelFactory kSplitToSequence;

// training_optimizers.cc
extern KernelFactory kAdamWOptimizer;
extern KernelFactory kSGDOptimizerV2;
extern KernelFactory kInplaceClipGradNorm;

}  // namespace cpu
}  // namespace ontrain
