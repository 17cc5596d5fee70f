// `ontrain bench --gemm`: the CPU's measured FP32 peak and what ontrain's GEMM reaches of it, on one thread
// and on the pool. The peak comes from a register-only loop of fused multiply-adds in the widest vector
// ISA this CPU has (AVX-512, else AVX2 + FMA, else SSE multiply-add), chosen at run time; the GEMM is the
// CPU provider's (providers/cpu/kernels/gemm.h) on training-sized shapes.
#include <immintrin.h>

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

// GFLOP/s of one core's FMA peak, and the ISA measured.
double MeasurePeak(const char** isa) {
  __builtin_cpu_init();
  int lanes = 4;
  float (*fn)() = PeakSse;
  *isa = "SSE";
  if (__builtin_cpu_supports("avx512f")) {
    fn = PeakAvx512, lanes = 16, *isa = "AVX-512";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    fn = PeakAvx2, lanes = 8, *isa = "AVX2+FMA";
  }
  auto t0 = Clock::now();
  volatile float sink = fn();
  (void)sink;
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 2.0 * 12.0 * lanes * static_cast<double>(kIters) / s / 1e9;
}

double GemmRate(int64_t m, int64_t n, int64_t k, ThreadPool* pool) {
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  cpu::Gemm<float>(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data(), pool);
  int reps = static_cast<int>(std::max<int64_t>(3, 4000000000LL / (2 * m * n * k)));
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) cpu::Gemm<float>(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data(), pool);
  double s = std::chrono::duration<double>(Clock::now() - t0).count();
  return 2.0 * static_cast<double>(m * n * k) * reps / s / 1e9;
}

}  // namespace

Status BenchGemm(int threads) {
  const char* isa = "";
  double peak = MeasurePeak(&isa);
  ThreadPool pool(threads);
  std::printf("FP32 peak of one core (%s FMA loop): %.1f GFLOP/s; GEMM on 1 and %d threads:\n", isa, peak, threads);
  const int64_t shapes[][3] = {{1024, 1024, 1024}, {1024, 384, 128}, {128, 512, 784}, {256, 784, 512}, {64, 3136, 128}};
  for (const auto& s : shapes) {
    double one = GemmRate(s[0], s[1], s[2], nullptr), many = GemmRate(s[0], s[1], s[2], &pool);
    std::printf("  %5lld x %5lld x %5lld: %6.1f GFLOP/s (%3.0f%% of peak), %6.1f on %d threads (%3.0f%% of %d x peak)\n",
                static_cast<long long>(s[0]), static_cast<long long>(s[1]), static_cast<long long>(s[2]), one,
                100.0 * one / peak, many, threads, 100.0 * many / (peak * threads), threads);
  }
  return Status::OK();
}

}  // namespace cli
}  // namespace ontrain
