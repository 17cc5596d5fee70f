// cuBLAS and cuBLASLt on the emulated device (cublas_v2.h, cublasLt.h): column-major GEMMs as reference
// loops, queued on the handle's stream, with the argument checks the libraries document.
#include <cstdio>
#include <cstring>

#include "providers/cuda/host_emu/emu_internal.h"
#include "providers/cuda/host_emu/include/cublasLt.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
struct cublasLtContext {};

namespace {

#define EMU_LOCK std::lock_guard<std::recursive_mutex> emu_lock_(cuda_emu::ApiLock())

// The span of a column-major operand: `cols` columns of `rows`, `ld` apart.
size_t Span(int64_t rows, int64_t cols, int64_t ld, size_t elem) {
  if (rows == 0 || cols == 0) return 0;
  return static_cast<size_t>((cols - 1) * ld + rows) * elem;
}

// D = alpha op(A) op(B) + beta C (+ bias[i] along D's rows when bias is given), column-major; beta 0 does
// not read C, which may be D.
template <typename T>
void Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
          int64_t ldb, T beta, const T* c, int64_t ldc, T* d, int64_t ldd, const T* bias = nullptr) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      T sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const T av = ta ? a[p + i * lda] : a[i + p * lda];
        const T bv = tb ? b[j + p * ldb] : b[p + j * ldb];
        sum += av * bv;
      }
      T out = alpha * sum;
      if (beta != T(0)) out += beta * c[i + j * ldc];
      if (bias != nullptr) out += bias[i];
      d[i + j * ldd] = out;
    }
  }
}

template <typename T>
cublasStatus_t GemmBatched(cublasHandle_t h, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                           const T* alpha, const T* a, int lda, long long sa, const T* b, int ldb, long long sb,
                           const T* beta, T* c, int ldc, long long sc, int batches, const char* name) {
  EMU_LOCK;
  if (h == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batches < 0 || lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) ||
      ldc < std::max(1, m)) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (m == 0 || n == 0 || batches == 0) return CUBLAS_STATUS_SUCCESS;
  const T al = *alpha, be = *beta;  // host pointer mode: read at the call
  const size_t span_a = Span(ta ? k : m, ta ? m : k, lda, sizeof(T)), span_b = Span(tb ? n : k, tb ? k : n, ldb, sizeof(T)),
               span_c = Span(m, n, ldc, sizeof(T));
  cuda_emu::Enqueue(h->stream, [=] {
    for (int i = 0; i < batches; ++i) {
      const T* ai = a + i * sa;
      const T* bi = b + i * sb;
      T* ci = c + i * sc;
      if ((k > 0 && (!cuda_emu::DeviceRange(ai, span_a) || !cuda_emu::DeviceRange(bi, span_b))) ||
          !cuda_emu::DeviceRange(ci, span_c)) {
        char what[128];
        std::snprintf(what, sizeof what, "batch %d: an operand is not inside one device allocation", i);
        cuda_emu::Fault(cudaErrorIllegalAddress, name, what);
        return;
      }
      Gemm<T>(ta, tb, m, n, k, al, ai, lda, bi, ldb, be, ci, ldc, ci, ldc);
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t) {
  return handle == nullptr ? CUBLAS_STATUS_NOT_INITIALIZED : CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes) {
  EMU_LOCK;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (workspace != nullptr && !cuda_emu::DeviceRange(workspace, bytes)) return CUBLAS_STATUS_INVALID_VALUE;
  handle->workspace = workspace;
  handle->workspace_bytes = bytes;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid numeric value was used as an argument";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the functionality requested is not supported";
    default: return "an error (emulated cuBLAS)";
  }
}

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* a, int lda, const float* b, int ldb,
                           const float* beta, float* c, int ldc) {
  return GemmBatched(handle, transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1, "cublasSgemm");
}

cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const double* alpha, const double* a, int lda, const double* b, int ldb,
                           const double* beta, double* c, int ldc) {
  return GemmBatched(handle, transa, transb, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1, "cublasDgemm");
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const float* alpha, const float* a, int lda,
                                         long long stride_a, const float* b, int ldb, long long stride_b,
                                         const float* beta, float* c, int ldc, long long stride_c, int batches) {
  return GemmBatched(handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                     stride_c, batches, "cublasSgemmStridedBatched");
}

cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const double* alpha, const double* a, int lda,
                                         long long stride_a, const double* b, int ldb, long long stride_b,
                                         const double* beta, double* c, int ldc, long long stride_c, int batches) {
  return GemmBatched(handle, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc,
                     stride_c, batches, "cublasDgemmStridedBatched");
}

// ---- cuBLASLt --------------------------------------------------------------------------------------------

namespace {

constexpr uint64_t kDescMagic = 0x4c54444553430001ull, kLayoutMagic = 0x4c544c4159000001ull,
                   kPrefMagic = 0x4c54505245460001ull, kAlgoMagic = 0x4c54414c474f0001ull;

// What the emulator keeps in cuBLASLt's caller-owned opaque structs.
struct Desc {
  uint64_t magic;
  int32_t transa, transb, epilogue;
  const void* bias;
};
struct Layout {
  uint64_t magic;
  int32_t type;
  uint64_t rows, cols;
  int64_t ld;
};
struct Pref {
  uint64_t magic;
  uint64_t max_workspace;
  uint32_t align[4];  // A, B, C, D
};
static_assert(sizeof(Desc) <= sizeof(cublasLtMatmulDescOpaque_t), "Desc fits cuBLASLt's struct");
static_assert(sizeof(Layout) <= sizeof(cublasLtMatrixLayoutOpaque_t), "Layout fits cuBLASLt's struct");
static_assert(sizeof(Pref) <= sizeof(cublasLtMatmulPreferenceOpaque_t), "Pref fits cuBLASLt's struct");

template <typename T, typename O>
T* As(O* o, uint64_t magic) {
  T* t = reinterpret_cast<T*>(o->data);
  return o != nullptr && t->magic == magic ? t : nullptr;
}

// The shapes a matmul's descriptors give: op(A) m x k, op(B) k x n, C and D m x n; false if inconsistent.
bool Shapes(const Desc& d, const Layout& a, const Layout& b, const Layout& c, const Layout& dl, uint64_t* m,
            uint64_t* n, uint64_t* k) {
  const bool ta = d.transa != CUBLAS_OP_N, tb = d.transb != CUBLAS_OP_N;
  *m = ta ? a.cols : a.rows;
  *k = ta ? a.rows : a.cols;
  const uint64_t kb = tb ? b.cols : b.rows;
  *n = tb ? b.rows : b.cols;
  return kb == *k && c.rows == *m && c.cols == *n && dl.rows == *m && dl.cols == *n && a.type == CUDA_R_32F &&
         b.type == CUDA_R_32F && c.type == CUDA_R_32F && dl.type == CUDA_R_32F;
}

}  // namespace

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  *handle = new cublasLtContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescInit(cublasLtMatmulDesc_t desc, cublasComputeType_t compute, cudaDataType_t scale) {
  if (desc == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
  std::memset(desc, 0, sizeof *desc);
  Desc* d = reinterpret_cast<Desc*>(desc->data);
  d->magic = kDescMagic;
  d->transa = CUBLAS_OP_N;
  d->transb = CUBLAS_OP_N;
  d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, size_t bytes) {
  Desc* d = As<Desc>(desc, kDescMagic);
  if (d == nullptr || buf == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
      if (bytes != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
      int32_t v;
      std::memcpy(&v, buf, sizeof v);
      if (attr == CUBLASLT_MATMUL_DESC_EPILOGUE) {
        if (v != CUBLASLT_EPILOGUE_DEFAULT && v != CUBLASLT_EPILOGUE_BIAS && v != CUBLASLT_EPILOGUE_RELU &&
            v != CUBLASLT_EPILOGUE_RELU_BIAS) {
          return CUBLAS_STATUS_NOT_SUPPORTED;
        }
        d->epilogue = v;
      } else {
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T) return CUBLAS_STATUS_INVALID_VALUE;
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb) = v;
      }
      return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
      if (bytes != sizeof(void*)) return CUBLAS_STATUS_INVALID_VALUE;
      std::memcpy(&d->bias, buf, sizeof(void*));
      return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutInit(cublasLtMatrixLayout_t layout, cudaDataType_t type, uint64_t rows,
                                        uint64_t cols, int64_t ld) {
  if (layout == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  // A column-major matrix needs ld >= rows (and at least 1).
  if (ld < 1 || static_cast<uint64_t>(ld) < rows) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(layout, 0, sizeof *layout);
  Layout* l = reinterpret_cast<Layout*>(layout->data);
  *l = Layout{kLayoutMagic, type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceInit(cublasLtMatmulPreference_t pref) {
  if (pref == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  std::memset(pref, 0, sizeof *pref);
  Pref* p = reinterpret_cast<Pref*>(pref->data);
  p->magic = kPrefMagic;
  for (uint32_t& a : p->align) a = 256;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                    size_t bytes) {
  Pref* p = As<Pref>(pref, kPrefMagic);
  if (p == nullptr || buf == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (bytes != sizeof(uint64_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&p->max_workspace, buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  if (attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
    if (bytes != sizeof(uint32_t)) return CUBLAS_STATUS_INVALID_VALUE;
    std::memcpy(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, bytes);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// One algorithm for any consistent float32 problem whose operands are at least 4-byte aligned (as a float
// must be); it needs no workspace. The algorithm is stamped with the alignments it was chosen for, which
// cublasLtMatmul checks (a real algorithm may rely on them).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* returned) {
  *returned = 0;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Desc* dd = As<Desc>(desc, kDescMagic);
  const Layout *la = As<Layout>(a, kLayoutMagic), *lb = As<Layout>(b, kLayoutMagic), *lc = As<Layout>(c, kLayoutMagic),
               *ld = As<Layout>(d, kLayoutMagic);
  const Pref* p = As<Pref>(pref, kPrefMagic);
  if (requested <= 0 || dd == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr ||
      p == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  uint64_t m, n, k;
  if (!Shapes(*dd, *la, *lb, *lc, *ld, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
  for (uint32_t al : p->align) {
    if (al < 4) return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  std::memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = kAlgoMagic;
  std::memcpy(&results[0].algo.data[1], p->align, sizeof p->align);
  results[0].workspaceSize = 0;
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                              cublasLtMatrixLayout_t a_layout, const void* b, cublasLtMatrixLayout_t b_layout,
                              const void* beta, const void* c, cublasLtMatrixLayout_t c_layout, void* d,
                              cublasLtMatrixLayout_t d_layout, const cublasLtMatmulAlgo_t* algo, void*, size_t,
                              cudaStream_t stream) {
  EMU_LOCK;
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const Desc* dd = As<Desc>(desc, kDescMagic);
  const Layout *la = As<Layout>(a_layout, kLayoutMagic), *lb = As<Layout>(b_layout, kLayoutMagic),
               *lc = As<Layout>(c_layout, kLayoutMagic), *ld = As<Layout>(d_layout, kLayoutMagic);
  if (dd == nullptr || la == nullptr || lb == nullptr || lc == nullptr || ld == nullptr || alpha == nullptr ||
      beta == nullptr) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  uint64_t m, n, k;
  if (!Shapes(*dd, *la, *lb, *lc, *ld, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
  if (algo != nullptr) {
    if (algo->data[0] != kAlgoMagic) return CUBLAS_STATUS_INVALID_VALUE;
    uint32_t align[4];
    std::memcpy(align, &algo->data[1], sizeof align);
    const void* ptrs[4] = {a, b, c, d};
    for (int i = 0; i < 4; ++i) {
      if (reinterpret_cast<uintptr_t>(ptrs[i]) % align[i] != 0) return CUBLAS_STATUS_INVALID_VALUE;
    }
  }
  const bool with_bias = dd->epilogue == CUBLASLT_EPILOGUE_BIAS || dd->epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
  if (with_bias && dd->bias == nullptr) return CUBLAS_STATUS_INVALID_VALUE;
  const Desc dv = *dd;  // the descriptor's values at the call (a captured launch keeps them)
  const Layout A = *la, B = *lb, C = *lc, D = *ld;
  float al, be;
  std::memcpy(&al, alpha, sizeof al);
  std::memcpy(&be, beta, sizeof be);
  cuda_emu::Enqueue(stream, [=] {
    const bool ta = dv.transa != CUBLAS_OP_N, tb = dv.transb != CUBLAS_OP_N;
    const bool bias = dv.epilogue == CUBLASLT_EPILOGUE_BIAS || dv.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    const bool relu = dv.epilogue == CUBLASLT_EPILOGUE_RELU || dv.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
    if (!cuda_emu::DeviceRange(a, Span(A.rows, A.cols, A.ld, 4)) || !cuda_emu::DeviceRange(b, Span(B.rows, B.cols, B.ld, 4)) ||
        (be != 0.0f && !cuda_emu::DeviceRange(c, Span(C.rows, C.cols, C.ld, 4))) ||
        !cuda_emu::DeviceRange(d, Span(D.rows, D.cols, D.ld, 4)) || (bias && !cuda_emu::DeviceRange(dv.bias, 4 * m))) {
      cuda_emu::Fault(cudaErrorIllegalAddress, "cublasLtMatmul", "an operand is not inside one device allocation");
      return;
    }
    Gemm<float>(ta, tb, static_cast<int64_t>(m), static_cast<int64_t>(n), static_cast<int64_t>(k), al,
                static_cast<const float*>(a), A.ld, static_cast<const float*>(b), B.ld, be,
                static_cast<const float*>(c), C.ld, static_cast<float*>(d), D.ld,
                bias ? static_cast<const float*>(dv.bias) : nullptr);  // the bias vector runs along D's rows
    if (relu) {  // after the bias; NaN and -0 become +0 (unverified against the library, which says max(x, 0))
      float* out = static_cast<float*>(d);
      for (uint64_t j = 0; j < n; ++j) {
        for (uint64_t i = 0; i < m; ++i) {
          float& v = out[j * D.ld + i];
          v = v > 0.0f ? v : 0.0f;
        }
      }
    }
  });
  return CUBLAS_STATUS_SUCCESS;
}
