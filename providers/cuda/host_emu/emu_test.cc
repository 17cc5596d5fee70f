// The emulated CUDA device (cuda_emu.h) against what CUDA does: barriers and warp shuffles synchronize,
// threads run out of index order, bad launches, host pointers, host access to device memory and unsafe
// capture fail as on a GPU, copies to pinned memory land only at a synchronization, captured graphs
// replay with their recorded arguments, and cuBLAS, cuBLASLt and cuDNN compute their definitions.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "providers/cuda/host_emu/include/cublasLt.h"
#include "providers/cuda/host_emu/include/cuda_runtime.h"
#include "providers/cuda/host_emu/include/cudnn.h"

namespace {

class EmuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cuda_emu::ResetForTesting();
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    cuda_emu::ResetForTesting();
    for (void* p : device_) cudaFree(p);
    cudaStreamDestroy(stream_);
  }
  template <typename T>
  T* Device(const std::vector<T>& values) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, sizeof(T) * values.size()), cudaSuccess);
    device_.push_back(p);
    EXPECT_EQ(cudaMemcpyAsync(p, values.data(), sizeof(T) * values.size(), cudaMemcpyHostToDevice, stream_),
              cudaSuccess);
    return static_cast<T*>(p);
  }
  template <typename T>
  std::vector<T> Host(const T* p, size_t n) {
    std::vector<T> out(n);
    EXPECT_EQ(cudaMemcpyAsync(out.data(), p, sizeof(T) * n, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    return out;
  }
  cudaStream_t stream_ = nullptr;
  std::vector<void*> device_;
};

// ---- Kernels ----------------------------------------------------------------------------------------------

__global__ void RotateThroughShared(const float* in, float* out, bool barrier) {
  __shared__ float buf[256];
  const int t = threadIdx.x;
  buf[t] = in[t];
  if (barrier) __syncthreads();
  out[t] = buf[(t + 1) % blockDim.x];
}

__global__ void WarpSums(const float* in, float* down, float* butterfly) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  float v = in[t], w = in[t];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
  if ((threadIdx.x & 31) == 0) down[t / 32] = v;
  butterfly[t] = w;
}

// Each lane: the warp's ballot of odd inputs, and the lowest set lane (counted from 1) and count of it.
__global__ void Ballots(const int* in, unsigned* bits, int* lowest, int* count) {
  const int t = blockIdx.x * blockDim.x + threadIdx.x;
  const unsigned b = __ballot_sync(0xffffffffu, in[t] & 1);
  bits[t] = b;
  lowest[t] = __ffs(b);
  count[t] = __popc(b);
}

__global__ void DeadlockedWarp(float* out) {
  float v = 1.0f;
  if (threadIdx.x == 0) {
    __syncthreads();  // waits for threads that wait for it in a shuffle
  } else {
    v = __shfl_down_sync(0xffffffffu, v, 1);
  }
  out[threadIdx.x] = v;
}

__global__ void AddScalar(float* x, float s, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += s;
}

__global__ void Nothing() {}

}  // namespace

// ---- Device code ------------------------------------------------------------------------------------------

TEST_F(EmuTest, BarriersOrderSharedMemoryAndThreadsRunOutOfIndexOrder) {
  std::vector<float> in(256);
  for (int i = 0; i < 256; ++i) in[i] = static_cast<float>(i);
  float* x = Device(in);
  float* y = Device(std::vector<float>(256, 0.0f));
  cuda_emu::Launch(1, 256, 0, stream_).Run("RotateThroughShared", RotateThroughShared, x, y, true);
  std::vector<float> got = Host(y, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(got[i], static_cast<float>((i + 1) % 256)) << i;

  // Without the barrier some thread reads its neighbour's slot before the neighbour wrote it (threads do
  // not run in index order): the slots hold -1 from a launch that filled them.
  float* minus = Device(std::vector<float>(256, -1.0f));
  cuda_emu::Launch(1, 256, 0, stream_).Run("RotateThroughShared", RotateThroughShared, minus, y, true);
  cuda_emu::Launch(1, 256, 0, stream_).Run("RotateThroughShared", RotateThroughShared, x, y, false);
  got = Host(y, 256);
  int stale = 0;
  for (int i = 0; i < 256; ++i) {
    if (got[i] == -1.0f) {
      ++stale;
    } else {
      ASSERT_EQ(got[i], static_cast<float>((i + 1) % 256)) << i;
    }
  }
  EXPECT_GT(stale, 0) << "every thread ran after its neighbour: threads ran in index order";
}

TEST_F(EmuTest, WarpShufflesExchangeWithinEachWarp) {
  std::vector<float> in(128);
  for (int i = 0; i < 128; ++i) in[i] = static_cast<float>(i % 37) + 0.25f * static_cast<float>(i / 32);
  float* x = Device(in);
  float* down = Device(std::vector<float>(4, 0.0f));
  float* fly = Device(std::vector<float>(128, 0.0f));
  cuda_emu::Launch(2, 64, 0, stream_).Run("WarpSums", WarpSums, x, down, fly);
  std::vector<float> d = Host(down, 4), f = Host(fly, 128);
  for (int w = 0; w < 4; ++w) {
    // shfl_down's tree: lane 0 ends with ((x0 + x16) + (x8 + x24)) + ... in that order; the sum is exact
    // here (small integers and quarters), so any order gives it.
    float sum = 0;
    for (int l = 0; l < 32; ++l) sum += in[32 * w + l];
    EXPECT_EQ(d[w], sum) << "warp " << w;
    for (int l = 0; l < 32; ++l) EXPECT_EQ(f[32 * w + l], sum) << "warp " << w << " lane " << l;
  }
}

TEST_F(EmuTest, BallotsGatherEachWarpsPredicates) {
  std::vector<int> in(96);
  for (int i = 0; i < 96; ++i) in[i] = i < 32 ? (i % 3 == 1 ? 1 : 2) : i < 64 ? 0 : (i == 95 ? 7 : 4);
  const int* x = Device(in);
  unsigned* bits = Device(std::vector<unsigned>(96, 0));
  int* lowest = Device(std::vector<int>(96, -1));
  int* count = Device(std::vector<int>(96, -1));
  cuda_emu::Launch(1, 96, 0, stream_).Run("Ballots", Ballots, x, bits, lowest, count);
  std::vector<unsigned> b = Host(bits, 96);
  std::vector<int> l = Host(lowest, 96), c = Host(count, 96);
  unsigned want0 = 0;
  for (int k = 0; k < 32; ++k) want0 |= (k % 3 == 1 ? 1u : 0u) << k;
  for (int t = 0; t < 96; ++t) {
    const int w = t / 32;
    EXPECT_EQ(b[t], w == 0 ? want0 : w == 1 ? 0u : 0x80000000u) << t;
    EXPECT_EQ(l[t], w == 0 ? 2 : w == 1 ? 0 : 32) << t;
    EXPECT_EQ(c[t], w == 0 ? 11 : w == 1 ? 0 : 1) << t;
  }
}

TEST_F(EmuTest, AThreadWaitingForAWarpThatWaitsForItIsALaunchFailure) {
  float* y = Device(std::vector<float>(64, 0.0f));
  cuda_emu::Launch(1, 64, 0, stream_).Run("DeadlockedWarp", DeadlockedWarp, y);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);  // sticky, as a fault on a GPU
}

TEST_F(EmuTest, LaunchConfigurationsAGpuRejectsAreErrorsThatDoNotStick) {
  cuda_emu::Launch(1, 2048, 0, stream_).Run("Nothing", Nothing);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cuda_emu::Launch(0, 32, 0, stream_).Run("Nothing", Nothing);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cuda_emu::Launch(dim3(1, 70000), 32, 0, stream_).Run("Nothing", Nothing);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cuda_emu::Launch(1, dim3(8, 8, 65), 0, stream_).Run("Nothing", Nothing);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cuda_emu::Launch(1, 32, 64 * 1024, stream_).Run("Nothing", Nothing);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
}

TEST_F(EmuTest, AHostPointerGivenToAKernelIsAnIllegalAddress) {
  std::vector<float> host(8, 1.0f);
  cuda_emu::Launch(1, 32, 0, stream_).Run("AddScalar", AddScalar, host.data(), 1.0f, 8);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorIllegalAddress);
  EXPECT_EQ(host[0], 1.0f);  // the kernel did not run
}

TEST_F(EmuTest, HostCodeTouchingDeviceMemoryCrashesAndSaysSo) {
  EXPECT_DEATH(
      {
        void* p = nullptr;
        cudaMalloc(&p, 64);
        static_cast<volatile float*>(p)[3] = 1.0f;
      },
      "host code touched emulated device memory");
}

TEST_F(EmuTest, FreshAllocationsHoldNaNNotZeros) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  device_.push_back(p);
  std::vector<float> got = Host(static_cast<const float*>(p), 4);
  for (float v : got) EXPECT_TRUE(std::isnan(v));
}

// ---- Copies and streams -----------------------------------------------------------------------------------

TEST_F(EmuTest, CopiesCheckTheirKindAndTheirRange) {
  float* d = Device(std::vector<float>(4, 0.0f));
  std::vector<float> h(8, 1.0f);
  EXPECT_EQ(cudaMemcpyAsync(h.data(), d, 16, cudaMemcpyHostToDevice, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(d, h.data(), 16, cudaMemcpyDeviceToHost, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(d, h.data(), 32, cudaMemcpyHostToDevice, stream_), cudaErrorInvalidValue);  // 16 bytes
  EXPECT_EQ(cudaMemcpyAsync(d + 1, h.data(), 16, cudaMemcpyHostToDevice, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(d, 0, 17, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemsetAsync(h.data(), 0, 4, stream_), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpyAsync(d + 1, h.data(), 12, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  EXPECT_EQ(Host(d, 4), (std::vector<float>{0, 1, 1, 1}));
}

TEST_F(EmuTest, StreamWorkRunsWhenTheHostSynchronizes) {
  float* d = Device(std::vector<float>{1, 2, 3, 4});
  float* pinned = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 16, cudaHostAllocDefault), cudaSuccess);
  // To pinned memory: the destination holds NaN until the host waits.
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, 16, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
  EXPECT_TRUE(std::isnan(pinned[0]));
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(pinned[3], 4.0f);
  // From pinned memory: the copy reads the buffer when it runs, so a write before the host waits is seen
  // (the reason a staging buffer may be reused only after its copy's event).
  pinned[0] = 10.0f;
  ASSERT_EQ(cudaMemcpyAsync(d, pinned, 4, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  pinned[0] = 20.0f;
  EXPECT_EQ(Host(d, 1)[0], 20.0f);
  // From pageable memory the source is staged at the call.
  std::vector<float> pageable{30.0f};
  ASSERT_EQ(cudaMemcpyAsync(d, pageable.data(), 4, cudaMemcpyHostToDevice, stream_), cudaSuccess);
  pageable[0] = 40.0f;
  EXPECT_EQ(Host(d, 1)[0], 30.0f);
  // To pageable memory the call returns with the copy done.
  std::vector<float> out(1, 0.0f);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), d, 4, cudaMemcpyDeviceToHost, stream_), cudaSuccess);
  EXPECT_EQ(out[0], 30.0f);
  cudaFreeHost(pinned);
}

// ---- Capture ----------------------------------------------------------------------------------------------

TEST_F(EmuTest, CapturedLaunchesReplayWithTheirRecordedArguments) {
  float* d = Device(std::vector<float>{0, 0, 0});
  float s = 1.0f;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), cudaSuccess);
  cudaStreamCaptureStatus status;
  ASSERT_EQ(cudaStreamIsCapturing(stream_, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  cuda_emu::Launch(1, 32, 0, stream_).Run("AddScalar", AddScalar, d, s, 3);
  s = 100.0f;  // a launch's arguments are copied when it is recorded
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  EXPECT_EQ(Host(d, 3), (std::vector<float>{0, 0, 0}));  // recording ran nothing
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(Host(d, 3), (std::vector<float>{2, 2, 2}));
  cudaGraphExecDestroy(exec);
}

TEST_F(EmuTest, CaptureRefusesPageableCopiesAndSynchronization) {
  float* d = Device(std::vector<float>{0});
  std::vector<float> h{1};
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(d, h.data(), 4, cudaMemcpyHostToDevice, stream_), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
}

TEST_F(EmuTest, AReplayThatUsesFreedMemoryIsAnIllegalAddress) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 16), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), cudaSuccess);
  cuda_emu::Launch(1, 32, 0, stream_).Run("AddScalar", AddScalar, static_cast<float*>(p), 1.0f, 4);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  cudaGraphDestroy(graph);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorIllegalAddress);
  cudaGraphExecDestroy(exec);
}

// ---- cuBLAS, cuBLASLt, cuDNN ------------------------------------------------------------------------------

TEST_F(EmuTest, CublasGemmsAreTheirColumnMajorDefinition) {
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasSetStream(h, stream_), CUBLAS_STATUS_SUCCESS);
  // Column-major A (2 x 3) = [[1 3 5], [2 4 6]], B^T given as stored (2 x 3) with op T: B (3 x 2).
  float* a = Device(std::vector<float>{1, 2, 3, 4, 5, 6});
  float* bt = Device(std::vector<float>{1, 0, 0, 1, 1, 1});  // B^T = [[1 0 1], [0 1 1]] column-major 2 x 3
  float* c = Device(std::vector<float>{100, 100, 100, 100});
  const float one = 1.0f, zero = 0.0f, two = 2.0f;
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, a, 2, bt, 2, &zero, c, 2), CUBLAS_STATUS_SUCCESS);
  // A B with B = [[1 0], [0 1], [1 1]]: [[1+5, 3+5], [2+6, 4+6]] column-major.
  EXPECT_EQ(Host(c, 4), (std::vector<float>{6, 8, 8, 10}));
  ASSERT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, a, 2, bt, 2, &two, c, 2), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Host(c, 4), (std::vector<float>{18, 24, 24, 30}));
  EXPECT_EQ(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, 2, 2, 3, &one, a, 1, bt, 2, &zero, c, 2),
            CUBLAS_STATUS_INVALID_VALUE);  // lda < m
  // Two batches of 1 x 1 x 2 products, strides 2.
  float* x = Device(std::vector<float>{1, 2, 3, 4});
  float* y = Device(std::vector<float>{5, 6, 7, 8});
  float* z = Device(std::vector<float>{0, 0});
  ASSERT_EQ(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 2, &one, x, 1, 2, y, 2, 2, &zero, z, 1, 1, 2),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(Host(z, 2), (std::vector<float>{1 * 5 + 2 * 6, 3 * 7 + 4 * 8}));
  cublasDestroy(h);
}

TEST_F(EmuTest, CublasLtBiasEpilogueAddsTheBiasAlongTheRows) {
  cublasLtHandle_t h;
  ASSERT_EQ(cublasLtCreate(&h), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulDescOpaque_t desc;
  ASSERT_EQ(cublasLtMatmulDescInit(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(&desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), CUBLAS_STATUS_SUCCESS);
  float* a = Device(std::vector<float>{1, 2, 3, 4});  // 2 x 2 column-major [[1 3], [2 4]]
  float* b = Device(std::vector<float>{1, 1, 0, 1});  // [[1 0], [1 1]]
  float* bias = Device(std::vector<float>{10, 20});
  float* d = Device(std::vector<float>{0, 0, 0, 0});
  ASSERT_EQ(cublasLtMatmulDescSetAttribute(&desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias),
            CUBLAS_STATUS_SUCCESS);
  cublasLtMatrixLayoutOpaque_t la, lb, ld;
  ASSERT_EQ(cublasLtMatrixLayoutInit(&la, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutInit(&lb, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutInit(&ld, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutInit(&ld, CUDA_R_32F, 3, 2, 2), CUBLAS_STATUS_INVALID_VALUE);  // ld < rows
  cublasLtMatmulPreferenceOpaque_t pref;
  ASSERT_EQ(cublasLtMatmulPreferenceInit(&pref), CUBLAS_STATUS_SUCCESS);
  cublasLtMatmulHeuristicResult_t result;
  int found = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(h, &desc, &la, &lb, &ld, &ld, &pref, 1, &result, &found),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(found, 1);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cublasLtMatmul(h, &desc, &one, a, &la, b, &lb, &zero, d, &ld, d, &ld, &result.algo, nullptr, 0, stream_),
            CUBLAS_STATUS_SUCCESS);
  // A B = [[1+3, 3], [2+4, 4]]; bias[i] added to row i.
  EXPECT_EQ(Host(d, 4), (std::vector<float>{14, 26, 13, 24}));
  // The algorithm was chosen for 256-byte alignment; a pointer off by one float does not fit it.
  EXPECT_EQ(cublasLtMatmul(h, &desc, &one, a + 1, &la, b, &lb, &zero, d, &ld, d, &ld, &result.algo, nullptr, 0,
                           stream_),
            CUBLAS_STATUS_INVALID_VALUE);
  cublasLtDestroy(h);
}

TEST_F(EmuTest, CudnnConvolutionsAreTheirDefinitionAndItsAdjoints) {
  cudnnHandle_t h;
  ASSERT_EQ(cudnnCreate(&h), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetStream(h, stream_), CUDNN_STATUS_SUCCESS);
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&wd);
  cudnnCreateConvolutionDescriptor(&cd);
  // x [1, 2, 5, 4], w [4, 1, 3, 2] in 2 groups, pads (1, 0), strides (2, 1), dilations (1, 2): y [1, 4, 3, 2].
  const int xs[4] = {1, 2, 5, 4}, xst[4] = {40, 20, 4, 1}, ws[4] = {4, 1, 3, 2}, ys[4] = {1, 4, 3, 2},
            yst[4] = {24, 6, 2, 1}, pads[2] = {1, 0}, strides[2] = {2, 1}, dil[2] = {1, 2};
  ASSERT_EQ(cudnnSetTensorNdDescriptor(xd, CUDNN_DATA_FLOAT, 4, xs, xst), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetFilterNdDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 4, ws), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetConvolutionNdDescriptor(cd, 2, pads, strides, dil, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnSetConvolutionGroupCount(cd, 2), CUDNN_STATUS_SUCCESS);
  const int bad[4] = {1, 4, 3, 3}, bad_st[4] = {36, 9, 3, 1};
  ASSERT_EQ(cudnnSetTensorNdDescriptor(yd, CUDNN_DATA_FLOAT, 4, bad, bad_st), CUDNN_STATUS_SUCCESS);
  cudnnConvolutionFwdAlgoPerf_t perf[8];
  int n = 0;
  EXPECT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, &n, perf), CUDNN_STATUS_BAD_PARAM);
  ASSERT_EQ(cudnnSetTensorNdDescriptor(yd, CUDNN_DATA_FLOAT, 4, ys, yst), CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnGetConvolutionForwardAlgorithm_v7(h, xd, wd, cd, yd, 8, &n, perf), CUDNN_STATUS_SUCCESS);
  ASSERT_GE(n, 1);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3);  // small integers: every sum is exact in float
  auto fill = [&](size_t count) {
    std::vector<float> v(count);
    for (float& e : v) e = static_cast<float>(small(rng));
    return v;
  };
  const std::vector<float> x = fill(40), w = fill(24), dy = fill(24);
  // The definition: y[n, k, i, j] = sum over c in k's group, p, q of x[c, 2i - 1 + p, j + 2q] w[k, c', p, q].
  std::vector<float> y_ref(24, 0.0f);
  for (int k = 0; k < 4; ++k) {
    const int c = k / 2;
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 2; ++j) {
        float s = 0;
        for (int p = 0; p < 3; ++p) {
          for (int q = 0; q < 2; ++q) {
            const int r = 2 * i - 1 + p, col = j + 2 * q;
            if (r >= 0 && r < 5 && col >= 0 && col < 4) s += x[c * 20 + r * 4 + col] * w[k * 6 + p * 2 + q];
          }
        }
        y_ref[k * 6 + i * 2 + j] = s;
      }
    }
  }
  float* dx_ = Device(x);
  float* dw_ = Device(w);
  float* ddy = Device(dy);
  float* dyo = Device(std::vector<float>(24, 0.0f));
  float* dxo = Device(std::vector<float>(40, 0.0f));
  float* dwo = Device(std::vector<float>(24, 0.0f));
  void* ws_mem = nullptr;
  ASSERT_EQ(cudaMalloc(&ws_mem, perf[0].memory), cudaSuccess);
  device_.push_back(ws_mem);
  const float one = 1.0f, zero = 0.0f;
  ASSERT_EQ(cudnnConvolutionForward(h, &one, xd, dx_, wd, dw_, cd, perf[0].algo, ws_mem, perf[0].memory, &zero, yd, dyo),
            CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(Host(dyo, 24), y_ref);
  // The adjoints: <conv(x, w), dy> = <x, dX(dy, w)> = <w, dW(x, dy)>, exactly for small integers.
  ASSERT_EQ(cudnnConvolutionBackwardData(h, &one, wd, dw_, yd, ddy, cd, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, ws_mem,
                                         perf[0].memory, &zero, xd, dxo),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(cudnnConvolutionBackwardFilter(h, &one, xd, dx_, yd, ddy, cd, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, ws_mem,
                                           perf[0].memory, &zero, wd, dwo),
            CUDNN_STATUS_SUCCESS);
  const std::vector<float> gx = Host(dxo, 40), gw = Host(dwo, 24);
  double lhs = 0, by_x = 0, by_w = 0;
  for (int i = 0; i < 24; ++i) lhs += static_cast<double>(y_ref[i]) * dy[i];
  for (int i = 0; i < 40; ++i) by_x += static_cast<double>(x[i]) * gx[i];
  for (int i = 0; i < 24; ++i) by_w += static_cast<double>(w[i]) * gw[i];
  EXPECT_EQ(lhs, by_x);
  EXPECT_EQ(lhs, by_w);
  // A workspace smaller than the algorithm asked for is refused.
  EXPECT_EQ(cudnnConvolutionForward(h, &one, xd, dx_, wd, dw_, cd, perf[0].algo, ws_mem, 0, &zero, yd, dyo),
            CUDNN_STATUS_BAD_PARAM);
  // The timed searches: fastest first (here the reverse of the heuristic's order), the output they timed
  // into left as garbage (NaN bytes), an algorithm whose workspace is not covered reported unusable, and a
  // workspace that is not device memory refused.
  cudnnConvolutionFwdAlgoPerf_t timed[8];
  int nt = 0;
  ASSERT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h, xd, dx_, wd, dw_, cd, yd, dyo, 8, &nt, timed, ws_mem,
                                                   perf[0].memory),
            CUDNN_STATUS_SUCCESS);
  ASSERT_EQ(nt, n);
  for (int i = 0; i < nt; ++i) {
    EXPECT_EQ(timed[i].algo, perf[n - 1 - i].algo) << i;
    EXPECT_EQ(timed[i].status, CUDNN_STATUS_SUCCESS) << i;
    if (i > 0) EXPECT_GE(timed[i].time, timed[i - 1].time) << i;
  }
  for (float v : Host(dyo, 24)) EXPECT_TRUE(std::isnan(v));
  ASSERT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h, xd, dx_, wd, dw_, cd, yd, dyo, 8, &nt, timed, ws_mem, 0),
            CUDNN_STATUS_SUCCESS);
  for (int i = 0; i < nt; ++i) EXPECT_NE(timed[i].status, CUDNN_STATUS_SUCCESS) << "no workspace given: " << i;
  float host_ws[4];
  EXPECT_EQ(cudnnFindConvolutionForwardAlgorithmEx(h, xd, dx_, wd, dw_, cd, yd, dyo, 8, &nt, timed, host_ws,
                                                   sizeof host_ws),
            CUDNN_STATUS_BAD_PARAM);
  cudnnConvolutionBwdDataAlgoPerf_t dtimed[8];
  cudnnConvolutionBwdFilterAlgoPerf_t ftimed[8];
  ASSERT_EQ(cudnnFindConvolutionBackwardDataAlgorithmEx(h, wd, dw_, yd, ddy, cd, xd, dxo, 8, &nt, dtimed, ws_mem,
                                                        perf[0].memory),
            CUDNN_STATUS_SUCCESS);
  for (float v : Host(dxo, 40)) EXPECT_TRUE(std::isnan(v));
  ASSERT_EQ(cudnnFindConvolutionBackwardFilterAlgorithmEx(h, xd, dx_, yd, ddy, cd, wd, dwo, 8, &nt, ftimed, ws_mem,
                                                          perf[0].memory),
            CUDNN_STATUS_SUCCESS);
  for (float v : Host(dwo, 24)) EXPECT_TRUE(std::isnan(v));
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wd);
  cudnnDestroyConvolutionDescriptor(cd);
  cudnnDestroy(h);
}

#if defined(__SANITIZE_ADDRESS__)
namespace {
__global__ void WriteOnePast(float* x, int n) {
  if (blockIdx.x == 0 && threadIdx.x == 0) x[n] = 1.0f;
}
}  // namespace

// Under AddressSanitizer device allocations end in poisoned redzones, so device code that writes past its
// tensor is reported there (the build without the sanitizer has no such check: this test exists only in
// the sanitizer build).
TEST_F(EmuTest, DeviceCodeWritingPastAnAllocationIsReportedUnderAddressSanitizer) {
  EXPECT_DEATH(
      {
        float* x = Device(std::vector<float>(64, 0.0f));
        cuda_emu::Launch(1, 32, 0, stream_).Run("WriteOnePast", WriteOnePast, x, 64);
        cudaStreamSynchronize(stream_);
      },
      "use-after-poison");
}
#endif
