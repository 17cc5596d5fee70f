// The emulated CUDA runtime (cuda_emu.h): devices and errors, allocations and their registry, copies,
// streams that run their work when the host synchronizes, events, stream capture and graphs. Kernel
// launches run in emu_launch.cc, device memory lives in emu_memory.cc.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "providers/cuda/host_emu/emu_internal.h"

struct CUstream_st {
  bool capturing = false;
  bool invalidated = false;
  CUgraph_st* graph = nullptr;
  // Work queued and not yet run: it runs, in order, when the host synchronizes with the stream (or with
  // everything), so host code that does not wait sees what it would see on a GPU.
  std::vector<cuda_emu::Work> queue;
};
struct CUevent_st {};
// A graph's work, shared by the graph and the executables made from it.
struct CUgraph_st {
  std::shared_ptr<std::vector<cuda_emu::Work>> work = std::make_shared<std::vector<cuda_emu::Work>>();
};
struct CUgraphExec_st {
  std::shared_ptr<std::vector<cuda_emu::Work>> work;
};

namespace cuda_emu {
namespace {

struct Allocation {
  size_t bytes;
  MemoryKind kind;
};

struct State {
  std::recursive_mutex lock;
  std::map<uintptr_t, Allocation> allocations;
  std::vector<CUstream_st*> streams;
  CUstream_st legacy;  // the null stream
  cudaError_t sticky = cudaSuccess;
  int messages = 0;
  // The work of destroyed graph executables, kept until no queue can refer to it.
  std::vector<std::shared_ptr<std::vector<Work>>> retired;
};

State& S() {
  static State* s = new State;  // never destroyed: providers may be torn down at exit
  return *s;
}

thread_local cudaError_t last_error = cudaSuccess;

void Report(const char* kind, const char* call, const char* what) {
  State& s = S();
  if (s.messages++ < 20) std::fprintf(stderr, "cuda_emu: %s in %s: %s\n", kind, call, what);
}

CUstream_st* StreamOf(cudaStream_t stream) { return stream == nullptr ? &S().legacy : stream; }

// Runs the work queued on a stream, in order, with device memory open to it.
void RunQueued(CUstream_st* st) {
  if (st->queue.empty()) return;
  DeviceAccess open;
  // By index, and cleared keeping its capacity: a queue in steady state allocates nothing.
  for (size_t i = 0; i < st->queue.size(); ++i) st->queue[i]();
  st->queue.clear();
  State& s = S();
  if (s.retired.empty() || !s.legacy.queue.empty()) return;
  for (CUstream_st* other : s.streams) {
    if (!other->queue.empty()) return;
  }
  s.retired.clear();
}

void RunAll() {
  State& s = S();
  RunQueued(&s.legacy);
  for (CUstream_st* st : s.streams) RunQueued(st);
}

// Synchronizing a capturing stream is an error that ends its capture as invalid.
cudaError_t SyncStream(CUstream_st* st) {
  if (st->capturing) {
    st->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  RunQueued(st);
  return S().sticky;
}

}  // namespace

// ---- Shared with the libraries --------------------------------------------------------------------------

std::recursive_mutex& ApiLock() { return S().lock; }

cudaError_t StickyFault() { return S().sticky; }

void Fault(cudaError_t e, const char* call, const char* what) {
  if (S().sticky == cudaSuccess) S().sticky = e;
  Report("device fault", call, what);
}

bool DeviceRange(const void* p, size_t bytes) {
  bool inside = false;
  return KindOf(p, bytes, &inside) == MemoryKind::kDevice && inside;
}

MemoryKind KindOf(const void* p, size_t bytes, bool* inside) {
  State& s = S();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  *inside = false;
  auto it = s.allocations.upper_bound(a);
  if (it == s.allocations.begin()) return MemoryKind::kHost;
  --it;
  const uintptr_t base = it->first, end = base + it->second.bytes;
  if (a < base || a >= end) return MemoryKind::kHost;
  *inside = a + bytes <= end;
  return it->second.kind;
}

void LaunchFailed(cudaError_t e, const char* kernel, const char* what) {
  if (e == cudaErrorIllegalAddress || e == cudaErrorLaunchFailure) {
    Fault(e, kernel, what);
    return;
  }
  last_error = e;
  Report("launch error", kernel, what);
}

void ResetForTesting() {
  std::lock_guard<std::recursive_mutex> lock(ApiLock());
  State& s = S();
  s.sticky = cudaSuccess;
  s.messages = 0;
  last_error = cudaSuccess;
  s.legacy.queue.clear();
  for (CUstream_st* st : s.streams) st->queue.clear();
}



bool LaunchConfigOk(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, const char* kernel) {
  std::lock_guard<std::recursive_mutex> lock(ApiLock());
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  const char* bad = nullptr;
  if (threads == 0 || threads > 1024 || block.x > 1024 || block.y > 1024 || block.z > 64) {
    bad = "block dimensions outside 1..1024 threads (x, y <= 1024, z <= 64)";
  } else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535) {
    bad = "grid dimensions outside 1..2^31-1 (x) and 1..65535 (y, z)";
  } else if (shared_bytes > 48 * 1024) {
    bad = "more than 48 KiB of dynamic shared memory";
  }
  if (bad == nullptr) return true;
  char what[192];
  std::snprintf(what, sizeof what, "%s: grid (%u, %u, %u), block (%u, %u, %u)", bad, grid.x, grid.y, grid.z, block.x,
                block.y, block.z);
  LaunchFailed(cudaErrorInvalidConfiguration, kernel, what);
  CUstream_st* st = StreamOf(stream);
  if (st->capturing) st->invalidated = true;
  return false;
}

bool Faulted() { return S().sticky != cudaSuccess; }

cudaError_t EnqueueWork(cudaStream_t stream, Work work) {
  std::lock_guard<std::recursive_mutex> lock(ApiLock());
  CUstream_st* st = StreamOf(stream);
  if (st->capturing) {
    st->graph->work->push_back(std::move(work));
  } else {
    st->queue.push_back(std::move(work));
  }
  return cudaSuccess;
}

bool Capturing(cudaStream_t stream) { return StreamOf(stream)->capturing; }

}  // namespace cuda_emu

using cuda_emu::ApiLock;
using cuda_emu::KindOf;
using cuda_emu::MemoryKind;
using cuda_emu::S;
using cuda_emu::StreamOf;

#define EMU_LOCK std::lock_guard<std::recursive_mutex> emu_lock_(ApiLock())

// ---- Devices and errors ---------------------------------------------------------------------------------

// ONTRAIN_CUDA_EMU_DEVICES: the device count (default 1); "nodriver" emulates a machine without a driver.
cudaError_t cudaGetDeviceCount(int* count) {
  const char* v = std::getenv("ONTRAIN_CUDA_EMU_DEVICES");
  *count = 0;
  if (v != nullptr && std::strcmp(v, "nodriver") == 0) return cudaErrorInsufficientDriver;
  int n = v == nullptr || v[0] == 0 ? 1 : std::atoi(v);
  if (n <= 0) return cudaErrorNoDevice;
  *count = n;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess) return e;
  return device >= 0 && device < n ? cudaSuccess : cudaErrorInvalidDevice;
}

cudaError_t cudaGetLastError() {
  EMU_LOCK;
  cudaError_t e = cuda_emu::last_error;
  cuda_emu::last_error = cudaSuccess;
  return e != cudaSuccess ? e : S().sticky;
}

cudaError_t cudaPeekAtLastError() {
  EMU_LOCK;
  return cuda_emu::last_error != cudaSuccess ? cuda_emu::last_error : S().sticky;
}

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorLaunchTimeout: return "cudaErrorLaunchTimeout";
    case cudaErrorAssert: return "cudaErrorAssert";
    case cudaErrorHardwareStackError: return "cudaErrorHardwareStackError";
    case cudaErrorIllegalInstruction: return "cudaErrorIllegalInstruction";
    case cudaErrorMisalignedAddress: return "cudaErrorMisalignedAddress";
    case cudaErrorInvalidAddressSpace: return "cudaErrorInvalidAddressSpace";
    case cudaErrorInvalidPc: return "cudaErrorInvalidPc";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorLaunchTimeout: return "the launch timed out and was terminated";
    case cudaErrorAssert: return "device-side assert triggered";
    case cudaErrorHardwareStackError: return "hardware stack error";
    case cudaErrorIllegalInstruction: return "an illegal instruction was encountered";
    case cudaErrorMisalignedAddress: return "misaligned address";
    case cudaErrorInvalidAddressSpace: return "operation not supported on global/shared address space";
    case cudaErrorInvalidPc: return "invalid program counter";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
  }
  return "unknown error";
}

// ---- Memory ---------------------------------------------------------------------------------------------

namespace {

cudaError_t Allocate(void** p, size_t bytes, MemoryKind kind) {
  EMU_LOCK;
  *p = nullptr;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes == 0) return cudaSuccess;
    void* m = nullptr;
  if (kind == MemoryKind::kDevice) {
    m = cuda_emu::DeviceAllocate(bytes);
    if (m == nullptr) return cudaErrorMemoryAllocation;
    cuda_emu::DeviceAccess open;
    std::memset(m, 0xff, bytes);  // NaN as float, -1 as integers: uninitialized memory is not zero
  } else {
    m = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (m == nullptr) return cudaErrorMemoryAllocation;
    std::memset(m, 0xff, bytes);
  }
  S().allocations[reinterpret_cast<uintptr_t>(m)] = cuda_emu::Allocation{bytes, kind};
  *p = m;
  return cudaSuccess;
}

cudaError_t Release(void* p, MemoryKind kind) {
  EMU_LOCK;
  if (p == nullptr) return cudaSuccess;
  cuda_emu::RunAll();  // freeing synchronizes the device
  auto it = S().allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == S().allocations.end() || it->second.kind != kind) return cudaErrorInvalidValue;
  const size_t bytes = it->second.bytes;
  S().allocations.erase(it);
  if (kind == MemoryKind::kDevice) {
    cuda_emu::DeviceFree(p, bytes);
  } else {
    std::free(p);
  }
  return S().sticky;
}

}  // namespace

cudaError_t cudaMalloc(void** p, size_t bytes) { return Allocate(p, bytes, MemoryKind::kDevice); }
cudaError_t cudaFree(void* p) { return Release(p, MemoryKind::kDevice); }
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return Allocate(p, bytes, MemoryKind::kPinned); }
cudaError_t cudaFreeHost(void* p) { return Release(p, MemoryKind::kPinned); }

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  EMU_LOCK;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes == 0) return cudaSuccess;
  bool dst_inside = false, src_inside = false;
  const MemoryKind dk = KindOf(dst, bytes, &dst_inside), sk = KindOf(src, bytes, &src_inside);
  const bool dst_dev = dk == MemoryKind::kDevice, src_dev = sk == MemoryKind::kDevice;
  if (kind == cudaMemcpyDefault) {
    kind = src_dev ? (dst_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost)
                   : (dst_dev ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
  }
  const bool want_dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst_dev != want_dst_dev || src_dev != want_src_dev) {
    cuda_emu::Report("error", "cudaMemcpyAsync", "a pointer is not in the memory its kind names");
    return cudaErrorInvalidValue;
  }
  if ((dk != MemoryKind::kHost && !dst_inside) || (sk != MemoryKind::kHost && !src_inside)) {
    cuda_emu::Report("error", "cudaMemcpyAsync", "the range runs past the end of its allocation");
    return cudaErrorInvalidValue;
  }
  CUstream_st* st = StreamOf(stream);
  if (st->capturing && ((kind == cudaMemcpyHostToDevice && sk == MemoryKind::kHost) ||
                        (kind == cudaMemcpyDeviceToHost && dk == MemoryKind::kHost))) {
    st->invalidated = true;  // a copy with pageable host memory cannot be part of a graph
    cuda_emu::Report("error", "cudaMemcpyAsync", "a copy with pageable host memory while the stream captures");
    return cudaErrorStreamCaptureUnsupported;
  }
  if (kind == cudaMemcpyHostToDevice && sk == MemoryKind::kHost) {
    // From pageable memory: the call returns once the source is staged, so later host writes to it do not
    // matter; the copy to the device runs in stream order.
    struct Staged {
      void* p;
      Staged(const void* src, size_t n) : p(std::malloc(n)) { std::memcpy(p, src, n); }
      Staged(Staged&& o) noexcept : p(o.p) { o.p = nullptr; }
      ~Staged() { std::free(p); }
    };
    return cuda_emu::Enqueue(stream, [dst, bytes, staged = Staged(src, bytes)] { std::memcpy(dst, staged.p, bytes); });
  }
  if (kind == cudaMemcpyDeviceToHost && dk == MemoryKind::kPinned && !st->capturing) {
    std::memset(dst, 0xff, bytes);  // until the copy runs, the destination holds NaN bytes, not stale values
  }
  cuda_emu::Enqueue(stream, [dst, src, bytes] { std::memmove(dst, src, bytes); });
  if ((kind == cudaMemcpyDeviceToHost && dk == MemoryKind::kHost) || kind == cudaMemcpyHostToHost) {
    cuda_emu::RunQueued(st);  // to pageable memory the call returns only when the copy is done
  }
  return S().sticky;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t bytes, cudaStream_t stream) {
  EMU_LOCK;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (bytes == 0) return cudaSuccess;
  if (!cuda_emu::DeviceRange(dst, bytes)) {
    cuda_emu::Report("error", "cudaMemsetAsync", "the range is not inside one device allocation");
    return cudaErrorInvalidValue;
  }
  return cuda_emu::Enqueue(stream, [dst, value, bytes] { std::memset(dst, value, bytes); });
}

// ---- Streams and events ---------------------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  EMU_LOCK;
  *stream = new CUstream_st;
  S().streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  EMU_LOCK;
  auto& v = S().streams;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == stream) {
      cuda_emu::RunQueued(stream);
      v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
      delete stream;
      return cudaSuccess;
    }
  }
  return cudaErrorInvalidResourceHandle;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  EMU_LOCK;
  return cuda_emu::SyncStream(StreamOf(stream));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t) {
  EMU_LOCK;
  return event == nullptr ? cudaErrorInvalidResourceHandle : S().sticky;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  EMU_LOCK;
  if (event == nullptr) return cudaErrorInvalidResourceHandle;
  cuda_emu::RunAll();  // events are not tracked: waiting for one waits for all queued work
  return S().sticky;
}

// ---- Capture and graphs ---------------------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  EMU_LOCK;
  if (stream == nullptr) return cudaErrorStreamCaptureUnsupported;  // the legacy stream cannot capture
  if (stream->capturing) return cudaErrorIllegalState;
  stream->capturing = true;
  stream->invalidated = false;
  stream->graph = new CUgraph_st;
  return S().sticky;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  EMU_LOCK;
  *graph = nullptr;
  if (stream == nullptr || !stream->capturing) return cudaErrorIllegalState;
  stream->capturing = false;
  if (stream->invalidated) {
    delete stream->graph;
    stream->graph = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *graph = stream->graph;
  stream->graph = nullptr;
  return S().sticky;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  EMU_LOCK;
  CUstream_st* st = StreamOf(stream);
  *status = !st->capturing ? cudaStreamCaptureStatusNone
                           : st->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  return S().sticky;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  EMU_LOCK;
  if (graph == nullptr) return cudaErrorInvalidValue;
  *exec = new CUgraphExec_st{graph->work};  // shares the recorded work
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  EMU_LOCK;
  if (exec == nullptr) return cudaErrorInvalidValue;
  if (S().sticky != cudaSuccess) return S().sticky;
  if (StreamOf(stream)->capturing) return cudaErrorNotSupported;
  // The graph's work, as it was recorded, queued in stream order (the executable may be destroyed before
  // it runs).
  for (const cuda_emu::Work& w : *exec->work) StreamOf(stream)->queue.push_back(w.Ref());
  return S().sticky;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  EMU_LOCK;
  delete graph;  // executables made from it keep its work
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  EMU_LOCK;
  if (exec == nullptr) return cudaErrorInvalidValue;
  S().retired.push_back(std::move(exec->work));  // replays still queued refer to it until they run
  delete exec;
  return cudaSuccess;
}
