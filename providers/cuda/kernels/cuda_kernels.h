// Factories of the CUDA kernels, one group per op family file. The kernel list (cuda_kernel_list.cc) is the
// only place that maps ops, opset ranges and dtypes to them.
//
// Many CUDA kernels take their output shapes from the CPU kernel of the same node: DelegatingKernel runs
// the CPU kernel's Prepare (shapes, attributes and host inputs only, never device data), so both providers
// accept and reject exactly the same inputs, and ComputeCuda does the device work.
#pragma once

#include <memory>

#include "providers/cuda/cuda_kernel.h"

namespace ontrain {
namespace cuda {

class DelegatingKernel : public CudaKernel {
 public:
  DelegatingKernel(const NodeInfo& info, std::unique_ptr<OpKernel> cpu) : node_(*info.node), cpu_(std::move(cpu)) {}
  Status Prepare(KernelContext& ctx) override { return cpu_->Prepare(ctx); }

 protected:
  const OpKernel& cpu_kernel() const { return *cpu_; }
  const Node& node_;

 private:
  std::unique_ptr<OpKernel> cpu_;
};

// The factory of a DelegatingKernel K over the CPU kernel made by *cpu_factory.
template <typename K, const KernelFactory* cpu_factory>
StatusOr<std::unique_ptr<OpKernel>> Wrap(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> cpu, (*cpu_factory)(info));
  return std::unique_ptr<OpKernel>(new K(info, std::move(cpu)));
}
// The same for a kernel class that also takes a constant (its device op, or a flag): new K(info, cpu, op).
template <typename K, typename Op, Op op, const KernelFactory* cpu_factory>
StatusOr<std::unique_ptr<OpKernel>> WrapOp(const NodeInfo& info) {
  ONT_ASSIGN_OR_RETURN(std::unique_ptr<OpKernel> cpu, (*cpu_factory)(info));
  return std::unique_ptr<OpKernel>(new K(info, std::move(cpu), op));
}

// elementwise_kernels.cc
extern KernelFactory kNeg, kAbs, kSqrt, kExp, kLog, kTanh, kSigmoid, kRelu, kErf, kReciprocal, kGelu, kLeakyRelu,
    kSoftplus, kFloor, kCeil, kSin, kCos, kMsGelu, kMsFastGelu;
extern KernelFactory kAdd, kSub, kMul, kDiv, kElu, kPRelu;
extern KernelFactory kCelu, kSelu, kHardSigmoid, kHardSwish, kThresholdedRelu, kSoftsign, kSign, kRound, kTan, kAsin,
    kAcos, kAtan, kSinh, kCosh, kAsinh, kAcosh, kAtanh, kIsNaN, kIsInf, kNot;
extern KernelFactory kReluGrad, kSigmoidGrad, kTanhGrad, kGeluGrad, kFastGeluGrad, kLeakyReluGrad;
extern KernelFactory kEqual, kLess, kGreater, kLessOrEqual, kGreaterOrEqual, kAnd, kOr, kXor;
extern KernelFactory kWhere, kCast, kScale, kClip, kClipGrad;

// Attribute cases the kernels cannot run (KernelDef::rejects).
const char* CastRejects(const Node& n);
const char* ConvRejects(const Node& n);
const char* ConvTransposeRejects(const Node& n);
const char* PoolRejects(const Node& n);
const char* MaxPoolReluGradRejects(const Node& n);

// shape_kernels.cc
extern KernelFactory kIdentity, kReshape, kSqueeze, kUnsqueeze, kFlatten, kTranspose, kExpand, kTile, kConcat,
    kSplit, kGather, kGatherGrad, kConcatTraining, kSplitTraining, kSlice, kSliceGrad, kPad, kGatherElementsGrad,
    kDepthToSpace, kSpaceToDepth;

// index_kernels.cc
extern KernelFactory kConstantOfShape, kEinsum, kResize, kResizeGrad, kTrilu, kCumSum, kGatherElements, kScatterElements,
    kGatherND, kGatherNDGrad, kScatterND, kTopK, kOneHot;
const char* EinsumRejects(const Node& n);

// recurrent_kernels.cc
extern KernelFactory kRnn, kRnnGrad, kGru, kGruTraining, kGruGrad, kLstm, kLstmTraining, kLstmGrad;
const char* RecurrentRejects(const Node& n);

// training_kernels.cc
extern KernelFactory kPow, kSum, kMax, kMin, kMean, kDivGrad, kDropout, kDropoutGrad;

// matmul.cc
extern KernelFactory kMatMul, kFusedMatMul, kMatMulBias, kGemm, kFusedGemm;

// reduce_kernels.cc
extern KernelFactory kReduceSum, kReduceMean, kReduceMax, kReduceMin, kReduceSumSquare, kReduceL1, kReduceL2,
    kReduceLogSumExp, kReduceLogSum, kReduceSumTraining, kArgMax, kArgMin;

// softmax_kernels.cc
extern KernelFactory kSoftmax, kLogSoftmax, kSoftmaxGrad, kSoftmaxGrad13, kLogSoftmaxGrad, kLogSoftmaxGrad13,
    kSoftmaxCrossEntropyLoss, kSoftmaxCrossEntropyLossInternal, kSoftmaxCrossEntropyLossGrad,
    kSoftmaxCrossEntropyLossInternalGrad, kNegativeLogLikelihoodLoss;

// norm_kernels.cc
extern KernelFactory kLayerNormalization, kLayerNormalizationGrad, kBatchNormalization, kBatchNormInternal,
    kBatchNormalizationGrad;

// conv_kernels.cc
extern KernelFactory kConv, kFusedConv, kConvTranspose, kConvGrad, kMaxPool, kMaxPoolGrad, kMaxPoolReluGrad, kAveragePool,
    kAveragePoolGrad, kGlobalAveragePool, kGlobalMaxPool;

// optimizer_kernels.cc
extern KernelFactory kInPlaceAccumulatorV2, kAdamWOptimizer, kSGDOptimizerV2, kInplaceClipGradNorm;

}  // namespace cuda
}  // namespace ontrain
