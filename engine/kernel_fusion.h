// Kernel fusions the executor applies to the graph it runs (never to the model a session saves or exports):
// groups of nodes that one kernel computes in a single pass over the data, with the same bits as the group.
//
// - Conv + Relu -> com.microsoft FusedConv (activation "Relu"), as ONNX Runtime fuses them for inference.
//   A training graph also reads the Conv's output in ReluGrad(dY, X); those ReluGrads read the Relu's
//   output instead, which is positive exactly where its input is (Relu(NaN) is 0 and fails the test too),
//   so the Conv's output is no longer needed and is never written to memory.
// - MaxPoolGrad + ReluGrad, where the MaxPool pooled ReluGrad's X or Relu(X) -> ai.ontrain
//   MaxPoolReluGrad(dY, Indices, Y): the gradient scattered only from windows whose pooled value Y is
//   positive, instead of a scatter into zeros followed by a pass over X that zeroes again where X <= 0.
// - FusedConv (Relu) + MaxPool with 2x2 windows at stride 2 -> ai.ontrain FusedConvMaxPool: each image's
//   activations are pooled from a buffer of its thread, so the full-size activations (the benchmark CNN's
//   5.5 MB) are never written to memory and read back.
// - MaxPoolReluGrad + ConvGrad without dX (a first layer) -> ai.ontrain MaxPoolReluConvGrad: the scattered
//   gradient is made image by image in cache for the weight gradient, instead of written whole (the
//   benchmark CNN's 5.5 MB, three quarters zeros) and read back.
// - Clip's gradient as autodiff writes it, Where(And(GreaterOrEqual(X, min), LessOrEqual(X, max)), dY, 0)
//   -> ai.ontrain ClipGrad(dY, X, min, max, 0): one pass instead of four, and no bool tensors (MobileNet's
//   ReLU6 gradients: 2.0 ms of a 27 ms step in four passes).
// - BatchNormInternal + Relu or Clip (ReLU6), and their gradients ReluGrad or ClipGrad + BatchNormalizationGrad
//   -> ai.ontrain BatchNormActivation, which writes the activation's output only, plus each channel's a and b
//   of the normalization y = x * a + b; and BatchNormActivationGrad, which recomputes y row by row from X
//   and those (the same bits) for the activation's gradient, so that neither y nor dY is written whole
//   (MobileNet's [32, 128, 16, 16] layers: 4 MB each, four passes fewer per layer).
// - A FusedConvMaxPool whose Indices only those fused gradients read writes them as one byte per window
//   (compact_indices): the window position of the maximum and whether it is positive, instead of an int64
//   offset (the benchmark CNN's 3.6 MB of indices per step written and read back: 0.45 MB), and the
//   gradients take the ReLU mask from that bit instead of reading the pooled values again.
// - Gelu and its GeluGrad, where nothing else reads their input -> ai.ontrain GeluAndSlope, which writes
//   beside Y the derivative (in double) that the gradient multiplies by, and GeluSlopeGrad, a multiply: the
//   exact GELU's exp and erfc are computed once per element instead of twice (the benchmark transformer's
//   GeluGrad: 0.97 ms of a 17 ms step). The derivative takes 8 bytes per element where X took 4.
//
// - Gemm + Relu -> com.microsoft FusedGemm (activation "Relu"), as ONNX Runtime fuses them, with the
//   ReluGrads that read the Gemm's output moved to the Relu's as for FusedConv: a linear layer and its
//   activation in one kernel (on CUDA, cuBLASLt's ReLU-bias epilogue: one launch instead of two), and the
//   pre-activation never written.
// - FusedMatMul + Add of a bias [N] to its product's rows -> ai.ontrain MatMulBias, which adds the bias
//   inside the product (in its register tiles on the AVX-512 panels, else after each chunk while it is in
//   cache) instead of in a pass of its own over the product (the benchmark transformer's and GPT's linear
//   layers); the same bits as the Add.
// - Softmax along the last axis after a scaling by one value (Div or Mul by S of rank 0) and/or a mask
//   (Where(C, F, V) with F a scalar constant), as attention computes its probabilities -> ai.ontrain
//   ScaledMaskedSoftmax; and SoftmaxGrad_13 followed by the mask and/or the scaling -> ai.ontrain
//   ScaledMaskedSoftmaxGrad: the scores (batch x heads x seq x seq floats) read once instead of once per op
//   (the benchmark GPT's Div and Where: 0.36 ms of a 32 ms step at seq 64; the passes grow with seq^2).
//
// The benchmark CNN's first layer writes a [64, 32, 26, 26] tensor (5.5 MB, larger than a core's L2 cache):
// each fusion removes one pass that reads and writes a tensor of that size.
//
// A group fuses only where its intermediate values are read by nothing else and are not graph outputs, its
// nodes run on the same provider, and that provider has a kernel for the fused op at the input's dtype.
#pragma once

#include <vector>

#include "engine/partition.h"
#include "graph/graph.h"
#include "providers/execution_provider.h"

namespace ontrain {

struct KernelFusionCounts {
  int conv_relu = 0;
  int maxpool_relu_grad = 0;
  int clip_grad = 0;
  int conv_max_pool = 0;
  int max_pool_relu_conv_grad = 0;
  int batch_norm_act = 0;
  int compact_pool_indices = 0;
  int gelu_slope = 0;
  int matmul_bias = 0;
  int gemm_relu = 0;
  int softmax_prologue = 0;
  int softmax_grad_epilogue = 0;
  int total() const {
    return conv_relu + maxpool_relu_grad + clip_grad + conv_max_pool + max_pool_relu_conv_grad + batch_norm_act +
           compact_pool_indices + gelu_slope + matmul_bias + gemm_relu + softmax_prologue + softmax_grad_epilogue;
  }
};

// Fuses in place; `partition` is `model`'s before fusing (a fused model must be partitioned again).
KernelFusionCounts FuseKernels(Model* model, const GraphPartition& partition,
                               const std::vector<IExecutionProvider*>& providers);

}  // namespace ontrain
