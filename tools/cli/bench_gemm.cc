// `ontrain bench --gemm`: the CPU's measured FP32 peak and what ontrain's GEMM reaches of it, on one thread
// and on the pool. The peak comes from a register-only loop of fused multiply-adds in the widest vector
// ISA this CPU has (AVX-512, else AVX2 + FMA, else SSE multiply-add), chosen at run time; the GEMM is the
// CPU provider's (providers/cpu/kernels/gemm.h) on training-sized shapes.
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/thread_pool.h"
#include "tools/cli/commands.h"
#include "tools/cli/flags.h"

namespace ontrain {
namespace cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kIters = 20000000;

// 12 independent accumulators hide the FMA latency; the result is returned so nothing is optimized away.
__attribute__((target("avx512f"))) float PeakAvx512() {
  __m512 acc[12], m = _mm512_set1_ps(0.9999f), a = _mm512_set1_ps(1e-7f);
  for (auto& r : acc) r = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, a);
  }
  float s = 0;
  for (auto& r : acc) s += _mm512_reduce_add_ps(r);
  return s;
}

__attribute__((target("avx2,fma"))) float PeakAvx2() {
  __m256 acc[12], m = _mm256_set1_ps(0.9999f), a = _mm256_set1_ps(1e-7f);
  for (auto& r : acc) r = _mm256_set1_ps(1.0f);
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, a);
  }
  float out[8], s = 0;
  for (auto& r : acc) {
    _mm256_storeu_ps(out, r);
    for (float v : out) s += v;
  }
  return s;
}

float PeakSse() {
  __m128 acc[12], m = _mm_set1_ps(0.9999f), a = _mm_set1_ps(1e-7f);
  for (auto& r : acc) r = _mm_set1_ps(1.0f);
  for (int64_t i = 0; i < kIters; ++i) {
#pragma GCC unroll 12
    for (int j = 0; j < 12; ++j) acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], m), a);
  }
  float out[4], s = 0;
  for (auto& r : acc) {
    _mm_storeu_ps(out, r);
    for (float v : out) s += v;
  }
  return s;
}

// The FMA-peak loop of the widest ISA this CPU has, its vector width and its name.
struct PeakLoop {
  float (*fn)() = PeakSse;
  int lanes = 4;
  const char* isa = "SSE";
};

PeakLoop ChoosePeakLoop() {
  __builtin_cpu_init();
  PeakLoop p;
  if (__builtin_cpu_supports("avx512f")) {
    p = {PeakAvx512, 16, "AVX-512"};
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p = {PeakAvx2, 8, "AVX2+FMA"};
  }
  return p;
}

// GFLOP/s of one core's FMA peak, measured once (~30 ms).
double MeasurePeak(const PeakLoop& p) {
  auto t0 = Clock::now();
  volatile float sink = p.fn();
  (void)sink;
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 2.0 * 12.0 * p.lanes * static_cast<double>(kIters) / s / 1e9;
}

// The products measured: A B; A B^T (a layer's X W^T) with the scratch a kernel would give it (on
// AVX-512, sgemm_avx512.h's panels); and A B^T without it (the library), to compare the two on this CPU.
enum class Product { kAB, kABt, kABtLibrary };

double GemmRate(int64_t m, int64_t n, int64_t k, Product product, ThreadPool* pool) {
  const bool trans_b = product != Product::kAB;
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  std::vector<float> scratch(cpu::GemmScratchBytes<float>(false, trans_b, m, n, k) / sizeof(float) + 1);
  float* work = product == Product::kABtLibrary ? nullptr : scratch.data();
  auto run = [&] { cpu::Gemm<float>(false, trans_b, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data(), pool, work); };
  run();
  int reps = static_cast<int>(std::max<int64_t>(3, 4000000000LL / (2 * m * n * k)));
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) run();
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 2.0 * static_cast<double>(m * n * k) * reps / s / 1e9;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One shape's GEMM rate as a share of the peak, on a VM whose speed moves by 20-30% within minutes: each
// of kRounds GEMM measurements (~20 ms) is bracketed by peak measurements, the share taken against the
// mean of the two around it, and the median share and median rate reported. A single peak measured at
// the start had read 69% at 1024^3 in one run and 99-106% in another.
constexpr int kRounds = 5;
struct Share {
  double gflops, share;
};
Share MeasureShare(const PeakLoop& p, int64_t m, int64_t n, int64_t k, Product product, ThreadPool* pool,
                   int threads) {
  std::vector<double> rates, shares;
  double before = MeasurePeak(p);
  for (int r = 0; r < kRounds; ++r) {
    double rate = GemmRate(m, n, k, product, pool), after = MeasurePeak(p);
    rates.push_back(rate);
    shares.push_back(rate / (0.5 * (before + after) * threads));
    before = after;
  }
  return {Median(rates), Median(shares)};
}

}  // namespace

double FmaPeakGflops(const char** isa) {
  const PeakLoop loop = ChoosePeakLoop();
  std::vector<double> peaks;
  for (int r = 0; r < kRounds; ++r) peaks.push_back(MeasurePeak(loop));
  if (isa != nullptr) *isa = loop.isa;
  return Median(peaks);
}

Status BenchGemm(int threads) {
  const PeakLoop loop = ChoosePeakLoop();
  const double peak = FmaPeakGflops(nullptr);
  ThreadPool pool(threads);
  std::printf("FP32 peak of one core (%s FMA loop): %.1f GFLOP/s (median of %d; each share below is against the "
              "peak measured around it); GEMM on 1 and %d threads:\n",
              loop.isa, peak, kRounds, threads);
  struct Shape3 {
    int64_t m, n, k;
    Product product;
  };
  const Shape3 shapes[] = {{1024, 1024, 1024, Product::kAB}, {1024, 384, 128, Product::kAB},
                           {128, 512, 784, Product::kAB},    {256, 784, 512, Product::kAB},
                           {64, 3136, 128, Product::kAB},    {128, 512, 784, Product::kABt},
                           {128, 512, 784, Product::kABtLibrary}, {1024, 512, 128, Product::kABt},
                           {1024, 512, 128, Product::kABtLibrary}};
  for (const Shape3& s : shapes) {
    Share one = MeasureShare(loop, s.m, s.n, s.k, s.product, nullptr, 1);
    Share many = MeasureShare(loop, s.m, s.n, s.k, s.product, &pool, threads);
    const char* what = s.product == Product::kAB ? "" : s.product == Product::kABt ? " B^T" : " B^T, library";
    std::printf("  %5lld x %5lld x %5lld%-13s: %6.1f GFLOP/s (%3.0f%% of peak), %6.1f on %d threads (%3.0f%% of %d x "
                "peak)\n",
                static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k), what, one.gflops,
                100.0 * one.share, many.gflops, threads, 100.0 * many.share, threads);
  }
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
