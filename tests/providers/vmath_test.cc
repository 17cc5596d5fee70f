// The CPU provider's vectorized float math (providers/cpu/kernels/vmath.h) against the C library's double
// functions rounded to float: over a stride through every float bit pattern, at most 1 ulp apart and equal
// in all but a few cases, plus the special values.
#include "providers/cpu/kernels/vmath.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ontrain {
namespace cpu {
namespace {

int64_t Ordered(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

int64_t UlpDistance(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  int64_t d = Ordered(a) - Ordered(b);
  return d < 0 ? -d : d;
}

// Every 251st float bit pattern (all signs and exponents, NaNs included), then the specials.
std::vector<float> Inputs() {
  std::vector<float> xs;
  for (uint64_t b = 0; b <= 0xffffffffull; b += 251) {
    uint32_t u = static_cast<uint32_t>(b);
    float f;
    std::memcpy(&f, &u, sizeof f);
    xs.push_back(f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float f : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f, 88.7f, 88.8f,
                  -87.0f, -100.0f, -103.9f, -104.5f, 3.9f, 3.95f, 0.5f, -0.5f, 1.0f, 4.0f, 9.0f, 20.0f}) {
    xs.push_back(f);
  }
  return xs;
}

void ExpectClose(const char* name, const std::vector<float>& xs, const std::vector<float>& got,
                 const std::function<double(double)>& ref) {
  int64_t differ = 0, worst = 0;
  float worst_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float want = static_cast<float>(ref(xs[i]));
    int64_t d = UlpDistance(got[i], want);
    if (d > 0) ++differ;
    if (d > worst) worst = d, worst_x = xs[i];
  }
  EXPECT_LE(worst, 1) << name << "(" << worst_x << ") is " << worst << " ulp from the C library's";
  EXPECT_LE(differ, static_cast<int64_t>(xs.size() / 100000)) << name << ": " << differ << " of " << xs.size()
                                                              << " results not the C library's";
}

TEST(VMathTest, ExpMatchesTheCLibrary) {
  std::vector<float> xs = Inputs(), y(xs.size());
  VExp(xs.data(), y.data(), xs.size());
  ExpectClose("exp", xs, y, [](double x) { return std::exp(x); });
  EXPECT_EQ(y[0], 1.0f);
}

TEST(VMathTest, ExpGivesDenormalsAndOverflow) {
  std::vector<float> xs = {-90.0f, -100.0f, -103.0f, -104.0f, -200.0f, 88.72f, 88.73f, 1000.0f};
  std::vector<float> y(xs.size());
  VExp(xs.data(), y.data(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(y[i], static_cast<float>(std::exp(static_cast<double>(xs[i])))) << "exp(" << xs[i] << ")";
  }
  EXPECT_GT(y[1], 0.0f);  // exp(-100) = 3.7e-44: a denormal, not flushed to zero
  EXPECT_TRUE(std::isinf(y[7]));
}

TEST(VMathTest, ErfMatchesTheCLibrary) {
  std::vector<float> xs = Inputs(), y(xs.size());
  VErf(xs.data(), y.data(), xs.size());
  ExpectClose("erf", xs, y, [](double x) { return std::erf(x); });
  float neg_zero = -0.0f, out;
  VErf(&neg_zero, &out, 1);
  EXPECT_TRUE(std::signbit(out));
}

TEST(VMathTest, TanhMatchesTheCLibrary) {
  std::vector<float> xs = Inputs(), y(xs.size());
  VTanh(xs.data(), y.data(), xs.size());
  ExpectClose("tanh", xs, y, [](double x) { return std::tanh(x); });
}

TEST(VMathTest, SigmoidMatchesDoubleFormula) {
  std::vector<float> xs = Inputs(), y(xs.size());
  VSigmoid(xs.data(), y.data(), xs.size());
  ExpectClose("sigmoid", xs, y, [](double x) { return 1.0 / (1.0 + std::exp(-x)); });
}

TEST(VMathTest, GeluAndItsGradientMatchDoubleFormulas) {
  std::vector<float> xs = Inputs(), y(xs.size()), dy(xs.size()), dx(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) dy[i] = static_cast<float>(std::sin(0.37 * i));
  VGelu(xs.data(), y.data(), xs.size());
  VGeluGrad(dy.data(), xs.data(), dx.data(), xs.size());
  // The references take Phi from erfc, as the kernels do, so that they do not cancel for negative x.
  int64_t worst = 0, worst_grad = 0;
  float worst_x = 0, worst_grad_x = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    double x = xs[i];
    if (std::isinf(x) || std::isnan(x)) continue;  // inf * 0 in the formulas; NaN is checked below
    double cdf = 0.5 * std::erfc(-x * M_SQRT1_2);
    double want = x * cdf, want_grad = dy[i] * (cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI));
    int64_t d = UlpDistance(y[i], static_cast<float>(want)), dg = UlpDistance(dx[i], static_cast<float>(want_grad));
    if (d > worst) worst = d, worst_x = xs[i];
    if (dg > worst_grad) worst_grad = dg, worst_grad_x = xs[i];
  }
  EXPECT_LE(worst, 1) << "gelu(" << worst_x << ")";
  EXPECT_LE(worst_grad, 1) << "gelu'(" << worst_grad_x << ")";
  float nan = std::numeric_limits<float>::quiet_NaN(), out;
  VGelu(&nan, &out, 1);
  EXPECT_TRUE(std::isnan(out));
}

// Whether vmath.cc's hand-vectorized AVX-512 blocks run here (its UseAvx512's test; a ThreadSanitizer
// build runs the compiled loops only, and these tests then compare them with themselves).
bool HasAvx512Blocks() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl");
}

// Long arrays go through the hand-vectorized AVX-512 blocks where the CPU has them, single elements through
// the compiled loop: both must give the same bits (and so must in-place calls).
TEST(VMathTest, GeluBlocksAgreeWithSingleElements) {
  if (!HasAvx512Blocks()) GTEST_SKIP() << "no AVX-512 here: long and short arrays take the same compiled loop";
  std::vector<float> xs = Inputs(), dy(xs.size()), y(xs.size()), dx(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) dy[i] = static_cast<float>(std::cos(0.91 * i) * 3);
  VGelu(xs.data(), y.data(), xs.size());
  VGeluGrad(dy.data(), xs.data(), dx.data(), xs.size());
  int64_t differ = 0, differ_grad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float one, one_grad;
    VGelu(&xs[i], &one, 1);
    VGeluGrad(&dy[i], &xs[i], &one_grad, 1);
    if (std::memcmp(&one, &y[i], sizeof one) != 0) ++differ;
    if (std::memcmp(&one_grad, &dx[i], sizeof one) != 0) ++differ_grad;
  }
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(differ_grad, 0);
  std::vector<float> in_place = xs, grad_in_place = dy;
  VGelu(in_place.data(), in_place.data(), in_place.size());
  VGeluGrad(grad_in_place.data(), xs.data(), grad_in_place.data(), grad_in_place.size());
  EXPECT_EQ(std::memcmp(in_place.data(), y.data(), y.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(grad_in_place.data(), dx.data(), dx.size() * sizeof(float)), 0);
}

// Which NaN GELU's gradient gives is pinned, in the AVX-512 blocks, the compiled loop and GeluMulSlope of
// GeluAndSlope's slope alike: x quieted where x is NaN (whatever dy is), dy quieted where only dy is (x
// infinite included: its slope is infinite, not NaN). A product of two NaNs passes on the one its operand
// order picks, which the compiler chooses: under -O1 the loop gave +NaN where the blocks gave -NaN for the
// same NaN inputs.
TEST(VMathTest, GeluGradientOfNaNIsPinned) {
  auto from_bits = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
  };
  auto bits = [](float f) {
    uint32_t b;
    std::memcpy(&b, &f, sizeof b);
    return b;
  };
  const float inf = std::numeric_limits<float>::infinity();
  // (x, dy): signaling and quiet NaNs of both signs meeting NaN dy of the other sign, then infinities.
  const std::vector<std::pair<float, float>> pairs = {
      {from_bits(0xff800001u), from_bits(0x7fc00007u)}, {from_bits(0x7fc00005u), from_bits(0xffc00003u)},
      {from_bits(0x7f800009u), 2.0f},                   {1.5f, from_bits(0xff800011u)},
      {inf, from_bits(0x7fc00013u)},                    {-inf, from_bits(0xffc00015u)},
      {inf, 3.0f},                                      {0.25f, -0.5f}};
  const size_t reps = 64;  // long enough for the blocks
  std::vector<float> x, dy;
  for (size_t r = 0; r < reps; ++r) {
    for (const auto& [a, b] : pairs) {
      x.push_back(a);
      dy.push_back(b);
    }
  }
  std::vector<float> dx(x.size()), y(x.size()), dx_slope(x.size());
  std::vector<double> d(x.size());
  VGeluGrad(dy.data(), x.data(), dx.data(), x.size());
  VGeluAndSlope(x.data(), y.data(), d.data(), x.size());
  VGeluMulSlope(dy.data(), d.data(), dx_slope.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE("element " + std::to_string(i));
    float one;
    VGeluGrad(&dy[i], &x[i], &one, 1);
    EXPECT_EQ(bits(one), bits(dx[i]));
    EXPECT_EQ(bits(dx_slope[i]), bits(dx[i]));
    const size_t k = i % pairs.size();
    if (k <= 2) EXPECT_EQ(bits(dx[i]), bits(x[i]) | 0x00400000u);  // x quieted
    if (k >= 3 && k <= 5) EXPECT_EQ(bits(dx[i]), bits(dy[i]) | 0x00400000u);  // dy quieted
    if (k == 6) EXPECT_EQ(dx[i], inf);
    if (k == 7) EXPECT_FALSE(std::isnan(dx[i]));
  }
}

// VGeluAndSlope's Y is VGelu's, and its derivative D, multiplied by dY in VGeluMulSlope, is VGeluGrad: bit
// for bit over the inputs, long arrays (the AVX-512 blocks where the CPU has them) and single elements (the
// compiled loop) alike; and D of the blocks is D of the loop to the last bit of its double, which a
// reordered product there would change even where no float result does.
TEST(VMathTest, GeluAndSlopeAgreeWithGeluAndItsGradient) {
  std::vector<float> xs = Inputs(), dy(xs.size()), y(xs.size()), dx(xs.size()), y2(xs.size()), dx2(xs.size());
  std::vector<double> d(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) dy[i] = static_cast<float>(std::cos(0.53 * i) * 5);
  VGelu(xs.data(), y.data(), xs.size());
  VGeluGrad(dy.data(), xs.data(), dx.data(), xs.size());
  VGeluAndSlope(xs.data(), y2.data(), d.data(), xs.size());
  VGeluMulSlope(dy.data(), d.data(), dx2.data(), xs.size());
  EXPECT_EQ(std::memcmp(y.data(), y2.data(), y.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(dx.data(), dx2.data(), dx.size() * sizeof(float)), 0);
  int64_t differ = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    float one;
    double one_d;
    VGeluAndSlope(&xs[i], &one, &one_d, 1);
    if (std::memcmp(&one, &y2[i], sizeof one) != 0 || std::memcmp(&one_d, &d[i], sizeof one_d) != 0) ++differ;
  }
  EXPECT_EQ(differ, 0);
}

// Sigmoid and tanh of long arrays (AVX-512 blocks where the CPU has them) against single elements (the
// compiled loop): the same bits, NaNs aside (both give a NaN).
TEST(VMathTest, SigmoidAndTanhBlocksAgreeWithSingleElements) {
  if (!HasAvx512Blocks()) GTEST_SKIP() << "no AVX-512 here: long and short arrays take the same compiled loop";
  std::vector<float> xs = Inputs();
  for (int f = 0; f < 2; ++f) {
    auto fn = f == 0 ? VSigmoid : VTanh;
    std::vector<float> y(xs.size());
    fn(xs.data(), y.data(), xs.size());
    int64_t differ = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      float one;
      fn(&xs[i], &one, 1);
      if (std::isnan(one) && std::isnan(y[i])) continue;
      if (std::memcmp(&one, &y[i], sizeof one) != 0) ++differ;
    }
    EXPECT_EQ(differ, 0) << (f == 0 ? "sigmoid" : "tanh");
    std::vector<float> in_place = xs;
    fn(in_place.data(), in_place.data(), in_place.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      ASSERT_TRUE(std::memcmp(&in_place[i], &y[i], sizeof(float)) == 0 || (std::isnan(in_place[i]) && std::isnan(y[i])))
          << (f == 0 ? "sigmoid" : "tanh") << " in place at " << i;
    }
  }
}

// The exp of a long row (AVX-512 blocks where the CPU has them) against single elements (the compiled
// loop), and the sum in the documented order: 16 float lanes block by block, the lanes in order, the tail.
TEST(VMathTest, ExpShiftSumBlocksAgreeWithSingleElements) {
  for (int64_t n : {5, 16, 63, 64, 100, 1000, 4099}) {
    std::vector<float> x(n), y(n), one(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::sin(0.7 * i) * 40 + (i % 7 == 0 ? -70 : 0));
    float sum = VExpShiftSum(x.data(), 1.25f, y.data(), n);
    for (int64_t i = 0; i < n; ++i) VExpShiftSum(&x[i], 1.25f, &one[i], 1);
    EXPECT_EQ(std::memcmp(one.data(), y.data(), n * sizeof(float)), 0) << "n = " << n;
    float lane[16] = {}, want = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) for (int j = 0; j < 16; ++j) lane[j] += one[i + j];
    for (float l : lane) want += l;
    for (; i < n; ++i) want += one[i];
    EXPECT_EQ(sum, want) << "n = " << n;
    std::vector<float> soft(n);
    VSoftmaxRow(x.data(), soft.data(), n);
    float mx = x[0];
    for (float v : x) mx = std::max(mx, v);
    std::vector<float> e(n);
    float total = 0;
    for (int64_t k = 0; k < n; ++k) VExpShiftSum(&x[k], mx, &e[k], 1);
    std::fill(lane, lane + 16, 0.0f);
    for (i = 0; i + 16 <= n; i += 16) for (int j = 0; j < 16; ++j) lane[j] += e[i + j];
    for (float l : lane) total += l;
    for (; i < n; ++i) total += e[i];
    for (int64_t k = 0; k < n; ++k) ASSERT_EQ(soft[k], e[k] / total) << "softmax element " << k << " of " << n;
  }
}

TEST(VMathTest, ExpShiftSumAddsTheResultsInPlace) {
  std::vector<float> x(1000), y(1000);
  for (int i = 0; i < 1000; ++i) x[i] = static_cast<float>(std::cos(0.1 * i) * 5);
  std::vector<float> copy = x;
  float sum = VExpShiftSum(x.data(), 2.5f, x.data(), x.size());  // in place
  double want = 0;
  for (int i = 0; i < 1000; ++i) {
    float e = static_cast<float>(std::exp(static_cast<double>(copy[i] - 2.5f)));
    EXPECT_LE(UlpDistance(x[i], e), 1) << i;
    want += e;
  }
  EXPECT_NEAR(sum, want, want * 1e-6);
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
