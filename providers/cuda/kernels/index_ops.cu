// Trilu, CumSum, GatherElements, ScatterElements, GatherND, GatherNDGrad / ScatterND, TopK and OneHot on the device:
// launches of the per-element and per-line bodies of device_math.h (checked on the host by
// tests/parity/device_math_test.cc). The scatters give each thread every update of its targets, in order.
#include "providers/cuda/kernels/common.cuh"
#include "providers/cuda/kernels/device_math.h"

namespace ontrain {
namespace cuda {
namespace {

template <typename E>
__global__ void TriluKernel(const E* x, E* y, TriluArgs a, int64_t n) {
  ONT_GRID_STRIDE_LOOP(o, n) y[o] = TriluKeeps(a, o) ? x[o] : E(0);
}

template <typename T>
__global__ void CumSumKernel(const T* x, T* y, int64_t lines, int64_t len, int64_t inner, bool exclusive, bool reverse) {
  ONT_GRID_STRIDE_LOOP(line, lines) CumSumLine<T>(x, y, line, len, inner, exclusive, reverse);
}

template <typename E>
__global__ void GatherElementsKernel(const E* data, const void* idx, bool idx64, E* out, ElementsArgs a, int64_t n) {
  ONT_GRID_STRIDE_LOOP(o, n) {
    const int64_t off = ElementsOffset(a, idx, idx64, o);
    out[o] = off >= 0 ? data[off] : E(0);
  }
}

__global__ void ScatterElementsKernel(const float* updates, const void* idx, bool idx64, float* out, ElementsArgs a, int red,
                                      int64_t lines) {
  ONT_GRID_STRIDE_LOOP(line, lines) ScatterElementsLine<float>(a, idx, idx64, updates, out, red, line);
}

template <typename E>
__global__ void GatherNDKernel(const E* data, const void* idx, bool idx64, E* out, NdArgs a, int64_t n) {
  ONT_GRID_STRIDE_LOOP(o, n) {
    const int64_t e = o % a.slice, tuple = o / a.slice;
    const int64_t off = NdOffset(a, idx, idx64, tuple / a.per_batch, tuple % a.per_batch);
    out[o] = off >= 0 ? data[off + e] : E(0);
  }
}

__global__ void NdScatterKernel(const float* updates, const void* idx, bool idx64, float* out, NdArgs a, int red,
                                int64_t columns) {
  ONT_GRID_STRIDE_LOOP(column, columns) NdScatterColumn<float>(a, idx, idx64, updates, out, red, column);
}

__global__ void TopKKernel(const float* x, float* values, int64_t* indices, int64_t lines, int64_t len, int64_t inner,
                           int64_t k, bool largest, bool sorted) {
  ONT_GRID_STRIDE_LOOP(line, lines) TopKLine<float>(x, values, indices, len, inner, k, largest, sorted, line);
}

template <typename E>
__global__ void OneHotKernel(const void* idx, bool idx64, const E* values, E* y, int64_t depth, int64_t inner, int64_t n) {
  ONT_GRID_STRIDE_LOOP(t, n) {
    const int64_t i = t % inner, k = (t / inner) % depth, o = t / (inner * depth), j = o * inner + i;
    int64_t v = idx64 ? static_cast<const int64_t*>(idx)[j] : static_cast<const int32_t*>(idx)[j];
    if (v < 0) v += depth;
    y[t] = values[v == k ? 1 : 0];
  }
}

template <template <typename> class K, typename... Args>
cudaError_t BySize(int elem_size, int64_t n, cudaStream_t stream, Args... args) {
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: K<uint8_t>::Launch(n, stream, args...); break;
    case 2: K<uint16_t>::Launch(n, stream, args...); break;
    case 4: K<uint32_t>::Launch(n, stream, args...); break;
    case 8: K<uint64_t>::Launch(n, stream, args...); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

template <typename E>
struct TriluLaunch {
  static void Launch(int64_t n, cudaStream_t s, const void* x, void* y, TriluArgs a) {
    TriluKernel<E><<<Blocks(n), kThreads, 0, s>>>(static_cast<const E*>(x), static_cast<E*>(y), a, n);
  }
};
template <typename E>
struct GatherElementsLaunch {
  static void Launch(int64_t n, cudaStream_t s, const void* data, const void* idx, bool idx64, void* out, ElementsArgs a) {
    GatherElementsKernel<E><<<Blocks(n), kThreads, 0, s>>>(static_cast<const E*>(data), idx, idx64, static_cast<E*>(out), a, n);
  }
};
template <typename E>
struct GatherNDLaunch {
  static void Launch(int64_t n, cudaStream_t s, const void* data, const void* idx, bool idx64, void* out, NdArgs a) {
    GatherNDKernel<E><<<Blocks(n), kThreads, 0, s>>>(static_cast<const E*>(data), idx, idx64, static_cast<E*>(out), a, n);
  }
};

template <typename E>
struct OneHotLaunch {
  static void Launch(int64_t n, cudaStream_t s, const void* idx, bool idx64, const void* values, void* y, int64_t depth,
                     int64_t inner) {
    OneHotKernel<E><<<Blocks(n), kThreads, 0, s>>>(idx, idx64, static_cast<const E*>(values), static_cast<E*>(y), depth,
                                                   inner, n);
  }
};

}  // namespace

cudaError_t OneHot(const void* indices, bool indices64, const void* values, void* y, int64_t outer, int64_t depth,
                   int64_t inner, int elem_size, cudaStream_t stream) {
  return BySize<OneHotLaunch>(elem_size, outer * depth * inner, stream, indices, indices64, values, y, depth, inner);
}

cudaError_t Trilu(const void* x, void* y, const TriluArgs& a, int64_t n, int elem_size, cudaStream_t stream) {
  return BySize<TriluLaunch>(elem_size, n, stream, x, y, a);
}

cudaError_t CumSum(const float* x, float* y, int64_t lines, int64_t len, int64_t inner, bool exclusive, bool reverse,
                   cudaStream_t stream) {
  if (lines == 0 || len == 0) return cudaSuccess;
  CumSumKernel<float><<<Blocks(lines), kThreads, 0, stream>>>(x, y, lines, len, inner, exclusive, reverse);
  return cudaGetLastError();
}
cudaError_t CumSum(const double* x, double* y, int64_t lines, int64_t len, int64_t inner, bool exclusive, bool reverse,
                   cudaStream_t stream) {
  if (lines == 0 || len == 0) return cudaSuccess;
  CumSumKernel<double><<<Blocks(lines), kThreads, 0, stream>>>(x, y, lines, len, inner, exclusive, reverse);
  return cudaGetLastError();
}

cudaError_t GatherElements(const void* data, const void* idx, bool idx64, void* out, const ElementsArgs& a, int64_t n,
                           int elem_size, cudaStream_t stream) {
  return BySize<GatherElementsLaunch>(elem_size, n, stream, data, idx, idx64, out, a);
}

cudaError_t ScatterElements(const float* updates, const void* idx, bool idx64, float* out, const ElementsArgs& a, int red,
                            int64_t lines, cudaStream_t stream) {
  if (lines == 0) return cudaSuccess;
  ScatterElementsKernel<<<Blocks(lines), kThreads, 0, stream>>>(updates, idx, idx64, out, a, red, lines);
  return cudaGetLastError();
}

cudaError_t GatherND(const void* data, const void* idx, bool idx64, void* out, const NdArgs& a, int64_t n, int elem_size,
                     cudaStream_t stream) {
  return BySize<GatherNDLaunch>(elem_size, n, stream, data, idx, idx64, out, a);
}

cudaError_t NdScatter(const float* updates, const void* idx, bool idx64, float* out, const NdArgs& a, int red,
                      cudaStream_t stream) {
  const int64_t columns = a.batch * a.slice;
  if (columns == 0 || a.per_batch == 0) return cudaSuccess;
  NdScatterKernel<<<Blocks(columns), kThreads, 0, stream>>>(updates, idx, idx64, out, a, red, columns);
  return cudaGetLastError();
}

cudaError_t TopK(const float* x, float* values, int64_t* indices, int64_t lines, int64_t len, int64_t inner, int64_t k,
                 bool largest, bool sorted, cudaStream_t stream) {
  if (lines == 0 || k == 0) return cudaSuccess;
  TopKKernel<<<Blocks(lines), kThreads, 0, stream>>>(x, values, indices, lines, len, inner, k, largest, sorted);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
