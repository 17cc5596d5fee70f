// A CUDA device emulated on the host, so that the CUDA provider's own code (its kernel classes, its
// device code in providers/cuda/kernels/*.cu and the way it drives the CUDA runtime, cuBLAS, cuBLASLt and
// cuDNN) runs and is tested on machines without a GPU. The files named like the toolkit's headers
// (cuda_runtime.h, cublas_v2.h, cublasLt.h, cudnn.h) include this one; a build of the provider against
// them (libontrain_cuda_emu.so) is the real provider's code with these declarations underneath.
//
// What is emulated, and how far:
// - Device code: a launch runs every block in turn and every thread of a block as a fiber (its own stack,
//   switched in place), so __syncthreads and the warp shuffles synchronize as on a GPU; launches with a
//   configuration a GPU rejects fail as it does. Device math is the host's (<cmath>), so the results
//   are not the GPU's to the last bit where CUDA's math library rounds differently (exp, log, pow, erf).
// - Memory: device allocations are host memory, registered by address; copies, memsets, cuBLAS and cuDNN
//   calls and every pointer argument of a kernel are checked against the registry (a host pointer given
//   as device memory, a copy past the end of an allocation, a use after free: errors, as on a GPU they
//   would be faults). Fresh allocations hold NaN bytes, as uninitialized device memory holds garbage.
// - Streams run their work at once, in order; copies to the host land at the next synchronization (the
//   destination holds NaN bytes until then). Stream capture records work into graphs that replay it with
//   the arguments frozen at recording, and refuses what CUDA refuses while capturing (synchronizing the
//   stream, copies between the device and pageable host memory).
// - cuBLAS, cuBLASLt (the bias, ReLU and ReLU-bias epilogues) and cuDNN's convolutions are reference loops
//   with the argument checks the libraries document.
// Environment: ONTRAIN_CUDA_EMU_DEVICES (the device count, default 1; 0 for no device, "nodriver" for a
// machine without a driver) and ONTRAIN_CUDA_EMU_FAULT_AT=N (the N-th kernel to run faults with an illegal
// address, to rehearse fault handling). Only the API the provider uses is declared.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- The CUDA runtime ------------------------------------------------------------------------------------

#define CUDART_VERSION 13000

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchTimeout = 702,
  cudaErrorAssert = 710,
  cudaErrorHardwareStackError = 714,
  cudaErrorIllegalInstruction = 715,
  cudaErrorMisalignedAddress = 716,
  cudaErrorInvalidAddressSpace = 717,
  cudaErrorInvalidPc = 718,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostAllocDefault 0x00

typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
typedef struct CUgraph_st* cudaGraph_t;
typedef struct CUgraphExec_st* cudaGraphExec_t;

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t e);
const char* cudaGetErrorString(cudaError_t e);

cudaError_t cudaMalloc(void** p, size_t bytes);
cudaError_t cudaFree(void* p);
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream);

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// ---- Device code -----------------------------------------------------------------------------------------

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// One instance per block: blocks run one at a time, under the emulator's lock.
#define __shared__ static

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
};

extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;

void __syncthreads();

namespace cuda_emu {

// Exchanges 8 bytes among the 32 lanes of the calling warp: every lane gives `mine` and gets lane
// `source`'s (its own where source is outside the warp). All 32 lanes must take part (mask all ones).
uint64_t WarpExchange(unsigned int mask, uint64_t mine, int source);

template <typename T>
T Shuffle(unsigned int mask, T v, int source) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffles move up to 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = WarpExchange(mask, bits, source);
  T out;
  std::memcpy(&out, &bits, sizeof(T));
  return out;
}

int LaneId();

// The bits of the calling warp's 32 predicates (bit k: lane k's). All 32 lanes must take part.
unsigned int WarpBallot(unsigned int mask, bool predicate);

}  // namespace cuda_emu

inline unsigned int __ballot_sync(unsigned int mask, int predicate) { return cuda_emu::WarpBallot(mask, predicate != 0); }
// The position of the lowest set bit counting from 1, 0 for none.
inline int __ffs(unsigned int x) { return __builtin_ffs(static_cast<int>(x)); }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }

template <typename T>
T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32) {
  (void)width;
  return cuda_emu::Shuffle(mask, v, cuda_emu::LaneId() + static_cast<int>(delta));
}
template <typename T>
T __shfl_xor_sync(unsigned int mask, T v, int lane_mask, int width = 32) {
  (void)width;
  return cuda_emu::Shuffle(mask, v, cuda_emu::LaneId() ^ lane_mask);
}
template <typename T>
T __shfl_sync(unsigned int mask, T v, int lane, int width = 32) {
  (void)width;
  return cuda_emu::Shuffle(mask, v, lane);
}

namespace cuda_emu {

// The memory registry: what kind of memory an address is in.
enum class MemoryKind { kHost, kDevice, kPinned };
// The kind of memory holding [p, p + bytes) and, for device or pinned memory, whether the whole range lies
// inside one live allocation (*inside); a pointer into freed device memory reads as host memory.
MemoryKind KindOf(const void* p, size_t bytes, bool* inside);

// Tests of the emulator itself: forgets a sticky fault and the last error, and drops queued work (a GPU
// needs a new process for that).
void ResetForTesting();

// Records a launch error (returned by cudaGetLastError), with a message printed to stderr once.
void LaunchFailed(cudaError_t e, const char* kernel, const char* what);

// A unit of device work on a stream: a callable kept in memory from malloc, not operator new, so that the
// emulator adds nothing to the heap allocations a step counts (tools/cli/heap_count.cc counts operator
// new, as the real CUDA libraries' own allocations are not counted either). Owning, or a reference to
// work a graph owns (replays queue references).
class Work {
 public:
  Work() = default;
  template <typename F>
  static Work Make(F&& f) {
    using Fn = std::decay_t<F>;
    void* mem = std::malloc(sizeof(Fn));
    if (mem == nullptr) std::abort();
    Work w;
    w.state_ = new (mem) Fn(std::forward<F>(f));
    w.run_ = [](void* s) { (*static_cast<Fn*>(s))(); };
    w.destroy_ = [](void* s) {
      static_cast<Fn*>(s)->~Fn();
      std::free(s);
    };
    return w;
  }
  Work(Work&& o) noexcept { *this = std::move(o); }
  Work& operator=(Work&& o) noexcept {
    if (this != &o) {
      Reset();
      run_ = o.run_;
      destroy_ = o.destroy_;
      state_ = o.state_;
      o.run_ = nullptr;
      o.destroy_ = nullptr;
      o.state_ = nullptr;
    }
    return *this;
  }
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;
  ~Work() { Reset(); }

  Work Ref() const {
    Work w;
    w.run_ = run_;
    w.state_ = state_;
    return w;
  }
  void operator()() const { run_(state_); }

 private:
  void Reset() {
    if (destroy_ != nullptr) destroy_(state_);
    destroy_ = nullptr;
  }
  void (*run_)(void*) = nullptr;
  void (*destroy_)(void*) = nullptr;  // null for a reference
  void* state_ = nullptr;
};

// Queues work on `stream`: it runs when the host synchronizes, or is recorded while the stream captures.
cudaError_t EnqueueWork(cudaStream_t stream, Work work);
template <typename F>
cudaError_t Enqueue(cudaStream_t stream, F&& f) {
  return EnqueueWork(stream, Work::Make(std::forward<F>(f)));
}
// Whether `stream` is capturing (queued work is recorded, not run).
bool Capturing(cudaStream_t stream);
// Whether a sticky fault has happened (later work does not run).
bool Faulted();

// Whether a GPU would accept the launch configuration; if not, records cudaErrorInvalidConfiguration.
bool LaunchConfigOk(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, const char* kernel);
// Runs a grid now (from queued work): body(state) once for every thread of every block.
void ExecuteGrid(dim3 grid, dim3 block, const char* kernel, const void* key, void (*body)(void*), void* state);

template <typename P>
bool CheckPointerArg(const P& p, int index, const char* kernel) {
  if constexpr (std::is_pointer_v<P>) {
    if (p == nullptr) return true;
    bool inside = false;
    if (KindOf(p, 1, &inside) == MemoryKind::kHost) {
      char what[96];
      std::snprintf(what, sizeof what, "argument %d is not device memory (a host pointer, or freed)", index);
      LaunchFailed(cudaErrorIllegalAddress, kernel, what);
      return false;
    }
  }
  return true;
}

template <typename Tuple, size_t... I>
bool CheckPointerArgs(const Tuple& t, const char* kernel, std::index_sequence<I...>) {
  return (CheckPointerArg(std::get<I>(t), static_cast<int>(I), kernel) && ...);
}

// kernel<<<grid, block, shared, stream>>>(args...) is compiled as Launch(grid, block, shared,
// stream).Run("kernel", kernel, args...) (the BUILD file rewrites the .cu sources).
class Launch {
 public:
  Launch(dim3 grid, dim3 block, size_t shared = 0, cudaStream_t stream = nullptr)
      : grid_(grid), block_(block), shared_(shared), stream_(stream) {}

  // `name` is the kernel's expression in the source, for messages.
  template <typename... P, typename... A>
  void Run(const char* name, void (*kernel)(P...), A&&... args) {
    static_assert(sizeof...(P) == sizeof...(A), "a kernel launch with the wrong number of arguments");
    if (!LaunchConfigOk(grid_, block_, shared_, stream_, name)) return;
    struct Call {
      void (*kernel)(P...);
      std::tuple<std::decay_t<P>...> params;
    };
    // Kernel arguments are copied at the launch, as CUDA copies them into the launch's parameter space.
    Enqueue(stream_, [grid = grid_, block = block_, name,
                      call = Call{kernel, std::tuple<std::decay_t<P>...>(static_cast<std::decay_t<P>>(args)...)}] {
      if (Faulted() || !CheckPointerArgs(call.params, name, std::index_sequence_for<P...>{})) return;
      ExecuteGrid(
          grid, block, name, reinterpret_cast<const void*>(call.kernel),
          [](void* c) {
            const Call* x = static_cast<const Call*>(c);
            std::apply(x->kernel, x->params);
          },
          const_cast<Call*>(&call));
    });
  }

 private:
  dim3 grid_, block_;
  size_t shared_;
  cudaStream_t stream_;
};

}  // namespace cuda_emu

// The host's math stands in for the device's: CUDA's device functions of these names (expf, erff, pow...)
// are the <cmath> ones here.
using std::isinf;
using std::isnan;
