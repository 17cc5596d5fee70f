// cuDNN on the emulated device (cudnn.h): descriptors, the algorithm queries and the three convolution
// calls as reference loops (cross-correlation, float32, NCHW, 1 to 3 spatial dims after cuDNN's minimum
// of 4-D tensors), queued on the handle's stream, with cuDNN's shape checks.
#include <cstring>
#include <vector>

#include "providers/cuda/host_emu/emu_internal.h"
#include "providers/cuda/host_emu/include/cudnn.h"

struct cudnnContext {
  cudaStream_t stream = nullptr;
};
struct cudnnTensorStruct {
  bool set = false;
  std::vector<int> dims, strides;
};
struct cudnnFilterStruct {
  bool set = false;
  std::vector<int> dims;
};
struct cudnnConvolutionStruct {
  bool set = false;
  std::vector<int> pads, strides, dilations;
  int groups = 1;
};

namespace {

#define EMU_LOCK std::lock_guard<std::recursive_mutex> emu_lock_(cuda_emu::ApiLock())

// The workspace each algorithm asks for, so that the caller's workspace handling runs.
constexpr size_t kWorkspace = 1024;

// A convolution's geometry, checked as cuDNN checks it: x [N, C, spatial...], w [K, C / groups, window...],
// y [N, K, out...] with out = (in + 2 pad - dilation (window - 1) - 1) / stride + 1, packed tensors.
struct Geometry {
  int spatial = 0;
  int n = 0, c = 0, k = 0, groups = 1;
  int in[3] = {1, 1, 1}, win[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int pad[3] = {}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
};

bool Packed(const cudnnTensorStruct& t) {
  long long s = 1;
  for (int i = static_cast<int>(t.dims.size()) - 1; i >= 0; --i) {
    if (t.strides[i] != s) return false;
    s *= t.dims[i];
  }
  return true;
}

cudnnStatus_t MakeGeometry(const cudnnTensorStruct* x, const cudnnFilterStruct* w, const cudnnConvolutionStruct* conv,
                           const cudnnTensorStruct* y, Geometry* g) {
  if (x == nullptr || w == nullptr || conv == nullptr || y == nullptr || !x->set || !w->set || !conv->set || !y->set) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  const int rank = static_cast<int>(x->dims.size());
  g->spatial = rank - 2;
  if (rank < 4 || rank > 5 || static_cast<int>(y->dims.size()) != rank || static_cast<int>(w->dims.size()) != rank ||
      static_cast<int>(conv->pads.size()) != rank - 2) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  if (!Packed(*x) || !Packed(*y)) return CUDNN_STATUS_NOT_SUPPORTED;
  g->n = x->dims[0];
  g->c = x->dims[1];
  g->k = w->dims[0];
  g->groups = conv->groups;
  if (g->groups < 1 || g->c % g->groups != 0 || g->k % g->groups != 0 || w->dims[1] * g->groups != g->c ||
      y->dims[0] != g->n || y->dims[1] != g->k) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  for (int s = 0; s < g->spatial; ++s) {
    g->in[s] = x->dims[2 + s];
    g->win[s] = w->dims[2 + s];
    g->pad[s] = conv->pads[s];
    g->stride[s] = conv->strides[s];
    g->dil[s] = conv->dilations[s];
    if (g->pad[s] < 0 || g->stride[s] < 1 || g->dil[s] < 1 || g->win[s] < 1) return CUDNN_STATUS_BAD_PARAM;
    const int span = g->dil[s] * (g->win[s] - 1) + 1;
    const int padded = g->in[s] + 2 * g->pad[s];
    const int expected = padded < span ? 0 : (padded - span) / g->stride[s] + 1;
    if (expected < 1 || y->dims[2 + s] != expected) return CUDNN_STATUS_BAD_PARAM;
    g->out[s] = expected;
  }
  return CUDNN_STATUS_SUCCESS;
}

size_t Elements(const std::vector<int>& dims) {
  size_t n = 1;
  for (int d : dims) n *= static_cast<size_t>(d);
  return n;
}

// Calls f(n, co, ci, y_index, x_index, w_index) for every product term of the convolution, in a fixed
// order, where x_index is inside x (padding skipped).
template <typename F>
void ForEachTerm(const Geometry& g, F&& f) {
  const int cg = g.c / g.groups, kg = g.k / g.groups;
  const int o0 = g.out[0], o1 = g.out[1], o2 = g.out[2];
  const int i0 = g.in[0], i1 = g.in[1], i2 = g.in[2];
  const int w0 = g.win[0], w1 = g.win[1], w2 = g.win[2];
  for (int n = 0; n < g.n; ++n) {
    for (int co = 0; co < g.k; ++co) {
      const int grp = co / kg;
      for (int a = 0; a < o0; ++a) {
        for (int b = 0; b < o1; ++b) {
          for (int c = 0; c < o2; ++c) {
            const size_t yi = ((static_cast<size_t>(n) * g.k + co) * o0 + a) * o1 * o2 + static_cast<size_t>(b) * o2 + c;
            for (int cl = 0; cl < cg; ++cl) {
              const int ci = grp * cg + cl;
              for (int p = 0; p < w0; ++p) {
                const int xa = a * g.stride[0] - g.pad[0] + p * g.dil[0];
                if (xa < 0 || xa >= i0) continue;
                for (int q = 0; q < w1; ++q) {
                  const int xb = b * g.stride[1] - g.pad[1] + q * g.dil[1];
                  if (xb < 0 || xb >= i1) continue;
                  for (int r = 0; r < w2; ++r) {
                    const int xc = c * g.stride[2] - g.pad[2] + r * g.dil[2];
                    if (xc < 0 || xc >= i2) continue;
                    const size_t xi = ((static_cast<size_t>(n) * g.c + ci) * i0 + xa) * i1 * i2 +
                                      static_cast<size_t>(xb) * i2 + xc;
                    const size_t wi = ((static_cast<size_t>(co) * cg + cl) * w0 + p) * w1 * w2 +
                                      static_cast<size_t>(q) * w2 + r;
                    f(yi, xi, wi);
                  }
                }
              }
            }
          }
        }
      }
    }
  }
}

enum class Pass { kForward, kData, kFilter };

cudnnStatus_t Convolve(cudnnHandle_t h, Pass pass, const cudnnTensorStruct* xd, const cudnnFilterStruct* wd,
                       const cudnnConvolutionStruct* cd, const cudnnTensorStruct* yd, const void* alpha,
                       const void* beta, const void* in1, const void* in2, void* out, void* workspace,
                       size_t workspace_bytes, const char* name) {
  EMU_LOCK;
  if (h == nullptr) return CUDNN_STATUS_BAD_PARAM;
  Geometry g;
  if (cudnnStatus_t s = MakeGeometry(xd, wd, cd, yd, &g); s != CUDNN_STATUS_SUCCESS) return s;
  if (workspace_bytes < kWorkspace || !cuda_emu::DeviceRange(workspace, kWorkspace)) return CUDNN_STATUS_BAD_PARAM;
  const size_t nx = Elements(xd->dims), nw = Elements(wd->dims), ny = Elements(yd->dims);
  float al, be;
  std::memcpy(&al, alpha, sizeof al);
  std::memcpy(&be, beta, sizeof be);
  // Operands per pass: forward (x, w) -> y; data (w, dy) -> dx; filter (x, dy) -> dw.
  const size_t n1 = pass == Pass::kData ? nw : nx, n2 = pass == Pass::kForward ? nw : ny,
               no = pass == Pass::kForward ? ny : pass == Pass::kData ? nx : nw;
  cuda_emu::Enqueue(h->stream, [=] {
    if (!cuda_emu::DeviceRange(in1, 4 * n1) || !cuda_emu::DeviceRange(in2, 4 * n2) ||
        !cuda_emu::DeviceRange(out, 4 * no)) {
      cuda_emu::Fault(cudaErrorIllegalAddress, name, "an operand is not inside one device allocation");
      return;
    }
    static std::vector<double>* sums = new std::vector<double>;  // reused: work runs under the API lock
    std::vector<double>& acc = *sums;
    acc.assign(no, 0.0);
    const float* a = static_cast<const float*>(in1);
    const float* b = static_cast<const float*>(in2);
    if (pass == Pass::kForward) {
      ForEachTerm(g, [&](size_t yi, size_t xi, size_t wi) { acc[yi] += static_cast<double>(a[xi]) * b[wi]; });
    } else if (pass == Pass::kData) {
      ForEachTerm(g, [&](size_t yi, size_t xi, size_t wi) { acc[xi] += static_cast<double>(a[wi]) * b[yi]; });
    } else {
      ForEachTerm(g, [&](size_t yi, size_t xi, size_t wi) { acc[wi] += static_cast<double>(a[xi]) * b[yi]; });
    }
    float* o = static_cast<float*>(out);
    for (size_t i = 0; i < no; ++i) {
      const float v = al * static_cast<float>(acc[i]);
      o[i] = be == 0.0f ? v : v + be * o[i];
    }
  });
  return CUDNN_STATUS_SUCCESS;
}

// The algorithm lists: first one that uses tensor cores, then a nondeterministic one, then a deterministic
// FMA one; a caller that wants float32 arithmetic and, in deterministic mode, determinism must skip the
// first ones.
template <typename Perf>
cudnnStatus_t Algorithms(int requested, int* returned, Perf* perf) {
  if (requested < 1 || returned == nullptr || perf == nullptr) return CUDNN_STATUS_BAD_PARAM;
  const int n = requested < 3 ? requested : 3;
  for (int i = 0; i < n; ++i) {
    std::memset(&perf[i], 0, sizeof perf[i]);
    perf[i].algo = static_cast<decltype(perf[i].algo)>(i);
    perf[i].status = CUDNN_STATUS_SUCCESS;
    perf[i].memory = kWorkspace;
    perf[i].mathType = i == 0 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
    perf[i].determinism = i == 1 ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
  }
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
}


// A timed search (cudnnFind*AlgorithmEx): the pass is run for real on the caller's buffers (so a bad pointer
// faults as it would), its output then overwritten with NaN bytes, as the last algorithm timed leaves an
// output that the caller must compute again; the stream is waited for, as the search is blocking. The
// "times" put the deterministic FMA algorithm first, then the nondeterministic one, then the tensor-core
// one: the reverse of the heuristic's order, so that a caller taking the first usable result must filter
// as it does for the heuristic. An algorithm whose workspace the caller's does not cover is reported with
// a status other than success, as cuDNN does (which code cuDNN 9 uses is not relied on).
template <typename Perf>
cudnnStatus_t TimedSearch(cudnnHandle_t h, Pass pass, const cudnnTensorStruct* xd, const cudnnFilterStruct* wd,
                          const cudnnConvolutionStruct* cd, const cudnnTensorStruct* yd, const void* in1,
                          const void* in2, void* out, int requested, int* returned, Perf* perf, void* workspace,
                          size_t workspace_bytes, const char* name) {
  EMU_LOCK;
  if (h == nullptr || requested < 1 || returned == nullptr || perf == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (workspace_bytes > 0 && !cuda_emu::DeviceRange(workspace, workspace_bytes)) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = Algorithms(requested, returned, perf); s != CUDNN_STATUS_SUCCESS) return s;
  for (int i = 0, j = *returned - 1; i < j; ++i, --j) std::swap(perf[i], perf[j]);
  for (int i = 0; i < *returned; ++i) {
    perf[i].time = 0.5f * static_cast<float>(i + 1);
    if (perf[i].memory > workspace_bytes) perf[i].status = CUDNN_STATUS_NOT_SUPPORTED;
  }
  const float one = 1.0f, zero = 0.0f;
  void* spare = nullptr;  // the pass's own workspace where the caller's is too small for it
  if (workspace_bytes < kWorkspace && cudaMalloc(&spare, kWorkspace) != cudaSuccess) return CUDNN_STATUS_INTERNAL_ERROR;
  cudnnStatus_t s = Convolve(h, pass, xd, wd, cd, yd, &one, &zero, in1, in2, out, spare ? spare : workspace,
                             kWorkspace, name);
  if (s == CUDNN_STATUS_SUCCESS) {
    const size_t no = Elements(pass == Pass::kForward ? yd->dims : pass == Pass::kData ? xd->dims : wd->dims);
    cuda_emu::Enqueue(h->stream, [out, no] { std::memset(out, 0xff, 4 * no); });
    cudaStreamSynchronize(h->stream);
    if (cuda_emu::StickyFault() != cudaSuccess) s = CUDNN_STATUS_EXECUTION_FAILED;
  }
  if (spare != nullptr) cudaFree(spare);
  return s;
}

}  // namespace

cudnnStatus_t cudnnCreate(cudnnHandle_t* handle) {
  *handle = new cudnnContext;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

const char* cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_INTERNAL_ERROR: return "CUDNN_STATUS_INTERNAL_ERROR";
    case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
  }
  return "CUDNN_STATUS_UNKNOWN";
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* desc) {
  *desc = new cudnnTensorStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t type, int rank,
                                         const int dims[], const int strides[]) {
  if (desc == nullptr || type != CUDNN_DATA_FLOAT || rank < 3 || rank > 8) return CUDNN_STATUS_BAD_PARAM;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 1 || strides[i] < 1) return CUDNN_STATUS_BAD_PARAM;
  }
  desc->dims.assign(dims, dims + rank);
  desc->strides.assign(strides, strides + rank);
  desc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* desc) {
  *desc = new cudnnFilterStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int rank, const int dims[]) {
  if (desc == nullptr || type != CUDNN_DATA_FLOAT || format != CUDNN_TENSOR_NCHW || rank < 3 || rank > 8) {
    return CUDNN_STATUS_BAD_PARAM;
  }
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 1) return CUDNN_STATUS_BAD_PARAM;
  }
  desc->dims.assign(dims, dims + rank);
  desc->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* desc) {
  *desc = new cudnnConvolutionStruct;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc) {
  delete desc;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t desc, int spatial, const int pads[],
                                              const int strides[], const int dilations[],
                                              cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  if (desc == nullptr || spatial < 1 || spatial > 3 || compute != CUDNN_DATA_FLOAT) return CUDNN_STATUS_BAD_PARAM;
  if (mode != CUDNN_CROSS_CORRELATION) return CUDNN_STATUS_NOT_SUPPORTED;
  for (int i = 0; i < spatial; ++i) {
    if (pads[i] < 0 || strides[i] < 1 || dilations[i] < 1) return CUDNN_STATUS_BAD_PARAM;
  }
  desc->pads.assign(pads, pads + spatial);
  desc->strides.assign(strides, strides + spatial);
  desc->dilations.assign(dilations, dilations + spatial);
  desc->set = true;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups) {
  if (desc == nullptr || groups < 1) return CUDNN_STATUS_BAD_PARAM;
  desc->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t) {
  return desc == nullptr ? CUDNN_STATUS_BAD_PARAM : CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                     const cudnnFilterDescriptor_t w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y, int requested, int* returned,
                                                     cudnnConvolutionFwdAlgoPerf_t* perf) {
  Geometry g;
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = MakeGeometry(x, w, conv, y, &g); s != CUDNN_STATUS_SUCCESS) return s;
  return Algorithms(requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
                                                          const cudnnTensorDescriptor_t dy,
                                                          const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx, int requested,
                                                          int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  Geometry g;
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = MakeGeometry(dx, w, conv, dy, &g); s != CUDNN_STATUS_SUCCESS) return s;
  return Algorithms(requested, returned, perf);
}
cudnnStatus_t cudnnGetConvolutionBackwardFilterAlgorithm_v7(cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
                                                            const cudnnTensorDescriptor_t dy,
                                                            const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw, int requested,
                                                            int* returned, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
  Geometry g;
  if (handle == nullptr) return CUDNN_STATUS_BAD_PARAM;
  if (cudnnStatus_t s = MakeGeometry(x, dw, conv, dy, &g); s != CUDNN_STATUS_SUCCESS) return s;
  return Algorithms(requested, returned, perf);
}

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha, const cudnnTensorDescriptor_t x_desc,
                                      const void* x, const cudnnFilterDescriptor_t w_desc, const void* w,
                                      const cudnnConvolutionDescriptor_t conv, cudnnConvolutionFwdAlgo_t,
                                      void* workspace, size_t workspace_bytes, const void* beta,
                                      const cudnnTensorDescriptor_t y_desc, void* y) {
  return Convolve(handle, Pass::kForward, x_desc, w_desc, conv, y_desc, alpha, beta, x, w, y, workspace,
                  workspace_bytes, "cudnnConvolutionForward");
}
cudnnStatus_t cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                           const cudnnFilterDescriptor_t w_desc, const void* w,
                                           const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                           const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdDataAlgo_t,
                                           void* workspace, size_t workspace_bytes, const void* beta,
                                           const cudnnTensorDescriptor_t dx_desc, void* dx) {
  return Convolve(handle, Pass::kData, dx_desc, w_desc, conv, dy_desc, alpha, beta, w, dy, dx, workspace,
                  workspace_bytes, "cudnnConvolutionBackwardData");
}
cudnnStatus_t cudnnConvolutionBackwardFilter(cudnnHandle_t handle, const void* alpha,
                                             const cudnnTensorDescriptor_t x_desc, const void* x,
                                             const cudnnTensorDescriptor_t dy_desc, const void* dy,
                                             const cudnnConvolutionDescriptor_t conv, cudnnConvolutionBwdFilterAlgo_t,
                                             void* workspace, size_t workspace_bytes, const void* beta,
                                             const cudnnFilterDescriptor_t dw_desc, void* dw) {
  return Convolve(handle, Pass::kFilter, x_desc, dw_desc, conv, dy_desc, alpha, beta, x, dy, dw, workspace,
                  workspace_bytes, "cudnnConvolutionBackwardFilter");
}

cudnnStatus_t cudnnFindConvolutionForwardAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
                                                     const void* x, const cudnnFilterDescriptor_t w_desc, const void* w,
                                                     const cudnnConvolutionDescriptor_t conv,
                                                     const cudnnTensorDescriptor_t y_desc, void* y, int requested,
                                                     int* returned, cudnnConvolutionFwdAlgoPerf_t* perf,
                                                     void* workspace, size_t workspace_bytes) {
  return TimedSearch(handle, Pass::kForward, x_desc, w_desc, conv, y_desc, x, w, y, requested, returned, perf,
                     workspace, workspace_bytes, "cudnnFindConvolutionForwardAlgorithmEx");
}
cudnnStatus_t cudnnFindConvolutionBackwardDataAlgorithmEx(cudnnHandle_t handle, const cudnnFilterDescriptor_t w_desc,
                                                          const void* w, const cudnnTensorDescriptor_t dy_desc,
                                                          const void* dy, const cudnnConvolutionDescriptor_t conv,
                                                          const cudnnTensorDescriptor_t dx_desc, void* dx,
                                                          int requested, int* returned,
                                                          cudnnConvolutionBwdDataAlgoPerf_t* perf, void* workspace,
                                                          size_t workspace_bytes) {
  return TimedSearch(handle, Pass::kData, dx_desc, w_desc, conv, dy_desc, w, dy, dx, requested, returned, perf,
                     workspace, workspace_bytes, "cudnnFindConvolutionBackwardDataAlgorithmEx");
}
cudnnStatus_t cudnnFindConvolutionBackwardFilterAlgorithmEx(cudnnHandle_t handle, const cudnnTensorDescriptor_t x_desc,
                                                            const void* x, const cudnnTensorDescriptor_t dy_desc,
                                                            const void* dy, const cudnnConvolutionDescriptor_t conv,
                                                            const cudnnFilterDescriptor_t dw_desc, void* dw,
                                                            int requested, int* returned,
                                                            cudnnConvolutionBwdFilterAlgoPerf_t* perf, void* workspace,
                                                            size_t workspace_bytes) {
  return TimedSearch(handle, Pass::kFilter, x_desc, dw_desc, conv, dy_desc, x, dy, dw, requested, returned, perf,
                     workspace, workspace_bytes, "cudnnFindConvolutionBackwardFilterAlgorithmEx");
}
