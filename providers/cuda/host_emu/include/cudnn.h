// cuDNN as the emulated device provides it (cuda_emu.h): descriptors and the three convolution calls
// (forward, backward data, backward filter; cross-correlation, float32, NCHW, groups, pads, strides,
// dilations) as reference loops, with the argument checks cuDNN documents.
#pragma once

#include "cuda_emu.h"

#define CUDNN_MAJOR 9
#define CUDNN_MINOR 0

typedef enum {
  CUDNN_STATUS_SUCCESS = 0,
  CUDNN_STATUS_BAD_PARAM = 2000,
  CUDNN_STATUS_NOT_SUPPORTED = 3000,
  CUDNN_STATUS_INTERNAL_ERROR = 4000,
  CUDNN_STATUS_EXECUTION_FAILED = 5000,
} cudnnStatus_t;

typedef enum { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_DOUBLE = 1 } cudnnDataType_t;
typedef enum { CUDNN_TENSOR_NCHW = 0 } cudnnTensorFormat_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum { CUDNN_DEFAULT_MATH = 0, CUDNN_TENSOR_OP_MATH = 1, CUDNN_FMA_MATH = 3 } cudnnMathType_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;
typedef enum { CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0 } cudnnConvolutionFwdAlgo_t;
typedef enum { CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 = 0 } cudnnConvolutionBwdDataAlgo_t;
typedef enum { CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 = 0 } cudnnConvolutionBwdFilterAlgo_t;
#define CUDNN_CONVOLUTION_FWD_ALGO_COUNT 8
#define CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT 6
#define CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT 7

typedef struct {
  cudnnConvolutionFwdAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;
typedef struct {
  cudnnConvolutionBwdDataAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
} cudnnConvolutionBwdDataAlgoPerf_t;
typedef struct {
  cudnnConvolutionBwdFilterAlgo_t algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  cudnnDeterminism_t determinism;
  cudnnMathType_t mathType;
  int reserved[3];
} cudnnConvolutionBwdFilterAlgoPerf_t;

typedef struct cudnnContext* cudnnHandle_t;
typedef struct cudnnTensorStruct* cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct* cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct* cudnnConvolutionDescriptor_t;

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream);
const char* cudnnGetErrorString(cudnnStatus_t status);

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* desc);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc);
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t type, int rank,
                                         const int dims[], const int strides[]);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* desc);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc);
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int rank, const int dims[]);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* desc);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc);
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int spatial, const int pads[],
                                              const int strides[], const int dilations[],
                                              cudnnConvolutionMode_t mode, cudnnDataType_t compute);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math);

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf);
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx, int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf);
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw, int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf);

// The timed searches: each algorithm run on the caller's buffers (the output is overwritten), fastest first.
cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
                                                     const void* x, const cudnnFilterDescriptor_t w_desc, const void* w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y_desc, void* y, int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf,
                                                     void* workspace, size_t workspace_bytes);
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t handle, const cudnnFilterDescriptor_t w_desc,
                                                          const void* w, const cudnnTensorDescriptor_t dy_desc,
                                                          const void* dy, const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx_desc, void* dx,
                                                          int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf, void* workspace,
                                                          size_t workspace_bytes);
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
                                                            const void* x, const cudnnTensorDescriptor_t dy_desc,
                                                            const void* dy, const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw_desc, void* dw,
                                                            int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf, void* workspace,
                                                            size_t workspace_bytes);

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t x_desc,
                                      const void* x, const cudnnFilterDescriptor_t w_desc, const void* w,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t algo,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      const cudnnTensorDescriptor_t y_desc, void* y);
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t w_desc, const void* w,
                                           const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                           const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t algo,
                                           void* workspace, size_t workspace_bytes, const void* beta,
                                           const cudnnTensorDescriptor_t dx_desc, void* dx);
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t x_desc, const void* x,
                                             const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                             const cudnnConvolutionDescriptor_t conv,
                                             cudnnConvolutionBwdFilterAlgo_t algo, void* workspace,
                                             size_t workspace_bytes, const void* beta,
                                             const cudnnFilterDescriptor_t dw_desc, void* dw);
