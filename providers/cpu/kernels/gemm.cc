// Gemm: float32 on oneDNN's sgemm, except on AVX-512, where small products (at most 128 x 128 x 64) and
// products with B transposed run on sgemm_avx512.h's kernels; float64 on OpenBLAS (both libraries
// single-threaded inside; the intra-op pool runs fixed chunks of rows, or of columns when C is wide and
// short, so one pool serves every kernel and no second set of threads spins beside it); the integer types,
// and floats without those libraries, on Eigen.
#include "providers/cpu/kernels/gemm.h"

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/sgemm_avx512.h"

#include <cblas.h>
#include <dlfcn.h>

#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>

namespace ontrain {
namespace cpu {
namespace {

// The float GEMM libraries, loaded at run time (dlopen) so that their thread pools can be switched off
// first, and so that a missing one falls back to the next:
// - float32: oneDNN's dnnl_sgemm (libdnnl2), which JIT-compiles its kernels for the CPU it runs on
//   (measured on Zen 5, one thread: 211-215 GFLOP/s of a 221 FMA peak on training shapes), else
//   OpenBLAS, else Eigen;
// - float64: OpenBLAS, else Eigen.
// OMP_NUM_THREADS=1 and OPENBLAS_NUM_THREADS=1 (unless the user set them) keep both from starting threads
// of their own: the intra-op pool runs the chunks.
using DnnlSgemm = int (*)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t);

struct BlasApi {
  DnnlSgemm dnnl_sgemm = nullptr;
  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_dgemm) dgemm = nullptr;
};

const BlasApi& BlasLibrary() {
  static const BlasApi* api = [] {
    auto* a = new BlasApi();
    ::setenv("OMP_NUM_THREADS", "1", 0);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 0);
    if (void* h = ::dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL)) {
      a->dnnl_sgemm = reinterpret_cast<DnnlSgemm>(::dlsym(h, "dnnl_sgemm"));
    }
    if (void* h = ::dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL)) {
      a->sgemm = reinterpret_cast<decltype(&cblas_sgemm)>(::dlsym(h, "cblas_sgemm"));
      a->dgemm = reinterpret_cast<decltype(&cblas_dgemm)>(::dlsym(h, "cblas_dgemm"));
      if (auto set_threads = reinterpret_cast<void (*)(int)>(::dlsym(h, "openblas_set_num_threads"))) set_threads(1);
    }
    return a;
  }();
  return *api;
}

template <typename T>
bool HaveBlas() {
  const BlasApi& b = BlasLibrary();
  if constexpr (std::is_same_v<T, float>) return b.dnnl_sgemm != nullptr || b.sgemm != nullptr;
  return b.dgemm != nullptr;
}

void Blas(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  const BlasApi& api = BlasLibrary();
  if (api.dnnl_sgemm != nullptr) {
    api.dnnl_sgemm(ta == CblasTrans ? 'T' : 'N', tb == CblasTrans ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c,
                   ldc);
  } else {
    api.sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
}

void Blas(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  BlasLibrary().dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// Chunks of rows (or columns) whose boundaries depend on the shape only, never on the thread count:
// each element of C is then computed by the same library call whatever the pool's size, so results are
// identical across thread counts (a library's edge handling otherwise depends on where a band starts).
// Extents up to 256 are one chunk, up to 511 two, longer ones four; the boundaries are the nearest
// multiples of `unit` (64, or 32 for the short row splits below) to equal shares, so that each call still
// runs the library's blocked kernels at full width and 2 or 4 threads get equal work. (Fixed chunks of 256
// had split 784 columns into 256, 256, 256 and 16: 512 against 272 on two threads, 63-65% of twice the
// FMA peak.) Extents of 128 to 256 are two chunks where the product has at least kSplitMacs
// multiply-adds: the CNN's [64, 1600] x [1600, 128] layer ran on one thread whatever the pool (0.28 ms at 1
// thread and at 2; split, 0.26-0.29 ms at 2 threads on a VM whose second core was contended, within the
// noise at 1 thread).
struct Chunks {
  int64_t extent, count, unit = 64;
  int64_t Begin(int64_t q) const {
    return q == count ? extent : (q * extent / count + unit / 2) / unit * unit;
  }
};
constexpr double kSplitMacs = 8e6;
Chunks ChunksOf(int64_t extent, double macs) {
  if (extent <= 256) return {extent, extent >= 128 && macs >= kSplitMacs ? 2 : 1};
  return {extent, extent < 512 ? 2 : 4};
}

// Short wide products, 64 to 256 rows by at most 256 columns over a depth of at most 1024 (mlp_small's
// forward layer [64, 784] x [784, 128]), split their rows in two from kShortSplitMacs: oneDNN (2.6, Zen 5,
// one thread) ran [64, 784] x [784, 128] as two column halves in 74 us against 57 us whole (its 64-column
// products of depth up to 1024 take a slower path, and their bits differ from the whole product's) but as
// two row halves in 64 us; with the halves on two threads, mlp_small's step at two threads went 0.121 ->
// 0.100 ms. From depth 1200 up the column halves cost what the whole did and the row halves up to 30%
// more (B packed twice), so deeper products keep the column split.
constexpr double kShortSplitMacs = 4e6;
bool SplitsShortRows(int64_t m, int64_t n, int64_t k, double macs) {
  return m >= 64 && m <= 256 && n <= 256 && k <= 1024 && macs >= kShortSplitMacs;
}

// The epilogue on C's rows i0 .. i1 at columns j0 .. j1, one pass: plus `bias` [n] (when given), element by
// element as Add, then (relu) Relu's expression v > 0 ? v : 0.
template <typename T>
void Finish(const T* bias, bool relu, int64_t n, int64_t i0, int64_t i1, int64_t j0, int64_t j1, T* c) {
  if (bias == nullptr && !relu) return;
  for (int64_t i = i0; i < i1; ++i) {
    T* row = c + i * n;
    for (int64_t j = j0; j < j1; ++j) {
      T v = bias != nullptr ? static_cast<T>(row[j] + bias[j]) : row[j];
      row[j] = relu ? (v > T(0) ? v : T(0)) : v;
    }
  }
}

// Splits C into the chunks above and calls block(i0, i1, j0, j1) for each (rows i0 .. i1, columns j0 .. j1)
// on the pool. By rows whenever there are rows enough for two chunks: a weight gradient [out, in] is then
// split by output rows (as the optimizer splits each parameter, training_optimizers.cc), not by columns.
template <typename F>
void SplitProduct(int64_t m, int64_t n, int64_t k, ThreadPool* pool, F&& block) {
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const bool short_rows = SplitsShortRows(m, n, k, macs);
  const bool by_rows = short_rows || m >= n || m > 256;
  const Chunks chunks = short_rows ? Chunks{m, 2, 32} : ChunksOf(by_rows ? m : n, macs);
  const double cost = 2.0 * static_cast<double>(chunks.extent / chunks.count) * static_cast<double>(by_rows ? n : m) *
                      static_cast<double>(k);
  ParallelFor(pool, chunks.count, cost, [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t s0 = chunks.Begin(q), s1 = chunks.Begin(q + 1);
      if (by_rows) block(s0, s1, int64_t{0}, n);
      else block(int64_t{0}, m, s0, s1);
    }
  });
}

template <typename T>
void BlasGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta,
              T* c, ThreadPool* pool, const T* bias, bool relu) {
  CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  const int lda = static_cast<int>(trans_a ? m : k), ldb = static_cast<int>(trans_b ? k : n), ldc = static_cast<int>(n);
  SplitProduct(m, n, k, pool, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    // Rows i0..i1 of A (columns when A is stored transposed), columns j0..j1 of B (rows when transposed).
    const T* ab = trans_a ? a + i0 : a + i0 * k;
    const T* bb = trans_b ? b + j0 * k : b + j0;
    Blas(ta, tb, static_cast<int>(i1 - i0), static_cast<int>(j1 - j0), static_cast<int>(k), alpha, ab, lda, bb, ldb,
         beta, c + i0 * n + j0, ldc);
    Finish(bias, relu, n, i0, i1, j0, j1, c);  // while the block is in cache
  });
}

// A B^T on sgemm_avx512.h's panels: B packed into the scratch (64-byte aligned within it), then the tiles,
// split by whole panels of columns: each chunk packs its own panels and computes all rows at them, so a
// product is one hand-over to the pool (a row split would pack every panel first, a second one: under a
// busy second core, mlp_small at two threads measured pooled 0.172 ms per step against serial 0.145). Up to
// four chunks of at least two panels each, from kShortSplitMacs multiply-adds; a single panel of many rows
// is packed first and its rows split in halves. Each element is one FMA chain over k, so the bits depend
// on neither the split nor the pool.
void PanelGemm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, const float* b, float beta, float* c,
               ThreadPool* pool, void* scratch, const TileEpilogue& ep) {
  float* bp = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(scratch) + 63) / 64 * 64);
  const int64_t panels = (n + kPanelColumns - 1) / kPanelColumns;
  const double macs = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if ((pool == nullptr || pool->num_threads() <= 1) && PanelGemmSwaps(m, n)) {
    // One thread: A's rows packed instead of B's (fewer floats; B's scratch holds them). With more, B's
    // panels are packed by the chunks in parallel, and A's packed by one thread first measured slower
    // (mlp_small at two threads on Zen 4: 0.211 against 0.197 ms a step).
    PackPanels(m, k, a, k, bp, 0, m / kPanelColumns);
    SwappedPanelTiles(m, 0, n, k, alpha, bp, b, k, beta, ep, c, n);
    return;
  }
  if (panels == 1 && m >= 64 && macs >= kShortSplitMacs) {
    PackPanels(n, k, b, k, bp, 0, 1);
    const Chunks rows{m, 2, 32};
    ParallelFor(pool, 2, macs, [&](int64_t q0, int64_t q1) {
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t i0 = rows.Begin(q), i1 = rows.Begin(q + 1);
        PanelTiles(i1 - i0, 0, n, k, alpha, a + i0 * k, k, bp, beta, ep, c + i0 * n, n);
      }
    });
    return;
  }
  const int64_t chunks = macs < kShortSplitMacs ? 1 : std::max<int64_t>(1, std::min<int64_t>(4, panels / 2));
  ParallelFor(pool, chunks, 2.0 * macs / static_cast<double>(chunks), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const int64_t p0 = q * panels / chunks, p1 = (q + 1) * panels / chunks;
      PackPanels(n, k, b, k, bp, p0, p1);
      PanelTiles(m, p0 * kPanelColumns, std::min(n, p1 * kPanelColumns), k, alpha, a, k, bp, beta, ep, c, n);
    }
  });
}

template <typename T>
void EigenGemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta,
               T* c, ThreadPool* pool) {
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using CMap = Eigen::Map<const Mat>;
  Eigen::Map<Mat> C(c, m, n);
  CMap A(a, trans_a ? k : m, trans_a ? m : k);
  CMap B(b, trans_b ? n : k, trans_b ? k : n);
  auto band = [&](int64_t r0, int64_t r1) {
    int64_t rows = r1 - r0;
    auto Cb = C.middleRows(r0, rows);
    if (beta == T(0)) Cb.setZero();
    else Cb *= beta;
    if (!trans_a && !trans_b) Cb.noalias() += alpha * (A.middleRows(r0, rows) * B);
    else if (!trans_a) Cb.noalias() += alpha * (A.middleRows(r0, rows) * B.transpose());
    else if (!trans_b) Cb.noalias() += alpha * (A.middleCols(r0, rows).transpose() * B);
    else Cb.noalias() += alpha * (A.middleCols(r0, rows).transpose() * B.transpose());
  };
  ParallelFor(pool, m, 2.0 * static_cast<double>(n) * static_cast<double>(k), band);
}

// Whether a product runs on sgemm_avx512.h's panels: float, and the panels take it (B transposed, A not).
template <typename T>
bool UsesPanels(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    return PanelGemmFits(trans_a, trans_b, m, n, k);
  }
}

}  // namespace

void InitBlas() { BlasLibrary(); }

template <typename T>
size_t GemmScratchBytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k) {
  return UsesPanels<T>(trans_a, trans_b, m, n, k) ? static_cast<size_t>(PanelFloats(n, k)) * sizeof(T) + 64 : 0;
}

template <typename T>
void Gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, const T* b, T beta, T* c,
          ThreadPool* pool, void* scratch, const T* bias, bool relu) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, 1>> C(c, m * n);
    if (beta == T(0)) C.setZero();
    else C *= beta;
    Finish(bias, relu, n, 0, m, 0, n, c);
    return;
  }
  constexpr bool kBlas = std::is_same_v<T, float> || std::is_same_v<T, double>;
  constexpr int64_t kMaxInt = 0x7fffffff;
  if constexpr (std::is_same_v<T, float>) {
    if (SmallGemmFits(trans_b, m, n, k)) {
      SmallSgemm(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c, n);
      Finish(bias, relu, n, 0, m, 0, n, c);
      return;
    }
    if (scratch != nullptr && UsesPanels<T>(trans_a, trans_b, m, n, k)) {
      PanelGemm(m, n, k, alpha, a, b, beta, c, pool, scratch, TileEpilogue{bias, relu});
      return;
    }
  }
  if constexpr (kBlas) {
    if (HaveBlas<T>() && m <= kMaxInt && n <= kMaxInt && k <= kMaxInt && m * k <= kMaxInt * 8) {
      BlasGemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, pool, bias, relu);
      return;
    }
  }
  EigenGemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c, pool);
  Finish(bias, relu, n, 0, m, 0, n, c);
}

template <typename T>
void GemmLd(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (SmallGemmFits(trans_b, m, n, k)) {
      SmallSgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
      return;
    }
  }
  constexpr int64_t kMaxInt = 0x7fffffff;
  if (k > 0 && HaveBlas<T>() && m <= kMaxInt && n <= kMaxInt && k <= kMaxInt && lda <= kMaxInt && ldb <= kMaxInt &&
      ldc <= kMaxInt) {
    Blas(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
         static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
         static_cast<int>(ldc));
    return;
  }
  using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<Mat, 0, Stride> C(c, m, n, Stride(ldc));
  if (beta == T(0)) C.setZero();
  else C *= beta;
  if (k == 0) return;
  Eigen::Map<const Mat, 0, Stride> A(a, trans_a ? k : m, trans_a ? m : k, Stride(lda));
  Eigen::Map<const Mat, 0, Stride> B(b, trans_b ? n : k, trans_b ? k : n, Stride(ldb));
  if (!trans_a && !trans_b) C.noalias() += alpha * (A * B);
  else if (!trans_a) C.noalias() += alpha * (A * B.transpose());
  else if (!trans_b) C.noalias() += alpha * (A.transpose() * B);
  else C.noalias() += alpha * (A.transpose() * B.transpose());
}

template void GemmLd<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                            float, float*, int64_t);
template void GemmLd<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                             int64_t, double, double*, int64_t);

template void Gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, const float*, float, float*,
                          ThreadPool*, void*, const float*, bool);
template size_t GemmScratchBytes<float>(bool, bool, int64_t, int64_t, int64_t);
template void Gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, const double*, double,
                           double*, ThreadPool*, void*, const double*, bool);
template size_t GemmScratchBytes<double>(bool, bool, int64_t, int64_t, int64_t);
template void Gemm<int32_t>(bool, bool, int64_t, int64_t, int64_t, int32_t, const int32_t*, const int32_t*, int32_t,
                            int32_t*, ThreadPool*, void*, const int32_t*, bool);
template size_t GemmScratchBytes<int32_t>(bool, bool, int64_t, int64_t, int64_t);
template void Gemm<int64_t>(bool, bool, int64_t, int64_t, int64_t, int64_t, const int64_t*, const int64_t*, int64_t,
                            int64_t*, ThreadPool*, void*, const int64_t*, bool);
template size_t GemmScratchBytes<int64_t>(bool, bool, int64_t, int64_t, int64_t);
template void Gemm<uint32_t>(bool, bool, int64_t, int64_t, int64_t, uint32_t, const uint32_t*, const uint32_t*,
                             uint32_t, uint32_t*, ThreadPool*, void*, const uint32_t*, bool);
template size_t GemmScratchBytes<uint32_t>(bool, bool, int64_t, int64_t, int64_t);
template void Gemm<uint64_t>(bool, bool, int64_t, int64_t, int64_t, uint64_t, const uint64_t*, const uint64_t*,
                             uint64_t, uint64_t*, ThreadPool*, void*, const uint64_t*, bool);
template size_t GemmScratchBytes<uint64_t>(bool, bool, int64_t, int64_t, int64_t);

}  // namespace cpu
}  // namespace ontrain
