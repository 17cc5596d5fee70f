// The CPU provider's row loops (providers/cpu/kernels/vrows.h): the strided gathers and scatters, the
// normalizations' sums (AVX-512 intrinsics and compiled per-ISA loops, each against its written order bit
// for bit), batch normalization's input gradient, and the unpooling by window codes.
#include "providers/cpu/kernels/vrows.h"

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

// VRowsGather2 and VRowsScatterAdd2 (AVX-512 where the CPU has it) against their scalar definitions, for
// every row length up to 50 (whole vectors, tails, the last element at a vector's edge) over 3 rows: the
// elements between and after the strided ones keep their bits (a negative zero among them too), and
// nothing past element 2 (n - 1) of a row is touched (a guard region filled with a marker).
TEST(VRowsTest, StrideTwoRowsMatchTheirDefinitions) {
  const int64_t rows = 3;
  for (int64_t n = 1; n <= 50; ++n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const int64_t len = 2 * n - 1, ld = len + 7, sld = n + 5, total = rows * ld + 40;
    std::vector<float> x(total), d(total), s(rows * sld);
    for (int64_t i = 0; i < total; ++i) {
      x[i] = static_cast<float>(i) * 0.25f - 3.0f;
      const bool strided = i < rows * ld && i % ld < len && i % ld % 2 == 0;
      d[i] = strided ? static_cast<float>(i) * -0.125f + 1.0f : (i % 3 ? -0.0f : 12345.0f);
    }
    for (int64_t i = 0; i < rows * sld; ++i) s[i] = i % sld < n ? static_cast<float>(i) * 0.5f + 0.1f : 777.0f;
    std::vector<float> g(rows * sld, -9.0f), gwant = g;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) gwant[r * sld + j] = x[r * ld + 2 * j];
    }
    VRowsGather2(x.data(), ld, g.data(), sld, rows, n);
    for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(g[i], gwant[i]) << "gather at " << i;
    std::vector<float> want = d;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t j = 0; j < n; ++j) want[r * ld + 2 * j] += s[r * sld + j];
    }
    VRowsScatterAdd2(s.data(), sld, d.data(), ld, rows, n);
    for (int64_t i = 0; i < total; ++i) {
      ASSERT_EQ(std::memcmp(&d[i], &want[i], sizeof(float)), 0) << "scatter at " << i << ": " << d[i] << " vs " << want[i];
    }
  }
}

// LaneSum's order with the accumulation spelled out: add(lane, i) adds element i into its lane (for the
// sums whose terms are fused into the lane's add), the lanes totalled as LaneSum totals them.
template <int L>
double LanesOf(int64_t n, const std::function<void(double&, int64_t)>& add) {
  double part[L] = {};
  ForLanes<L>(n, [&](int64_t i, int j) { add(part[j], i); });
  return LaneTotal<L>(part);
}
double LaneAccumulate(int64_t n, const std::function<void(double&, int64_t)>& add) {
  return n >= kLongRow ? LanesOf<kSumLanes>(n, add) : LanesOf<8>(n, add);
}

// Runs check with the normalization sums' AVX-512 intrinsics (where the CPU has them), then with their
// compiled per-ISA loops (VRowsUseIntrinsics(false)): both must give the bits the check expects.
void WithAndWithoutIntrinsics(void (*check)()) {
  for (bool intrinsics : {true, false}) {
    SCOPED_TRACE(intrinsics ? "intrinsics" : "compiled loops");
    VRowsUseIntrinsics(intrinsics);
    check();
  }
  VRowsUseIntrinsics(true);
}

// Batch normalization's gradient sums (VRowSumAndDotDev; VRowAffineActGradSums with ReLU's and Clip's
// gradients made from x on the way), AVX-512 where the CPU has it and the compiled loops, against their
// definitions: the gradient row element by element, LaneSum of it, and LaneSum's lanes of g (x - mean)
// each fused into its lane's add. Every row length up to 70 and long ones around kLongRow (8 and 32 lanes, their
// tails); y exactly at 0 and at Clip's bounds, a -0 and a NaN in g (kept, or replaced by the fill where y
// is outside), and x outside where nothing may be read.
void CheckBatchNormGradientSums() {
  const float a = 1.5f, b = -0.75f, lo = 0.0f, hi = 6.0f, fill = -0.0f;
  const double mean = 0.3125;
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 70; ++n) lengths.push_back(n);
  for (int64_t n : {255, 256, 257, 271, 272, 287, 288, 300, 1000, 1024}) lengths.push_back(n);
  for (int64_t n : lengths) {
    for (int with_nan = 0; with_nan < 2; ++with_nan) {
      SCOPED_TRACE("n = " + std::to_string(n) + (with_nan ? ", a NaN in g" : ""));
      std::vector<float> x(n + 32, std::nanf("")), g(n + 32, std::nanf(""));  // NaNs past the row
      for (int64_t i = 0; i < n; ++i) {
        x[i] = static_cast<float>(std::sin(0.71 * i) * 5.0);
        g[i] = static_cast<float>(std::cos(0.29 * i) * 2.0);
      }
      x[0] = 0.5f;  // y = 0: ReLU's gradient 0, Clip's g
      if (n > 3) x[3] = 4.5f;  // y = 6: Clip's g
      if (n > 5) g[5] = -0.0f;
      if (with_nan) g[n / 2] = std::nanf("");
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<float> out(n + 32, 99.0f), want(n + 32, 99.0f);
        for (int64_t i = 0; i < n; ++i) {
          const float y = x[i] * a + b;
          want[i] = kind == 0 ? g[i] : kind == 1 ? (y > 0.0f ? g[i] : 0.0f) : ((y >= lo) & (y <= hi) ? g[i] : fill);
        }
        const double want_sum = LaneSum(n, [&](int64_t i) { return static_cast<double>(want[i]); });
        const double want_dot = LaneAccumulate(n, [&](double& l, int64_t i) {
          l = std::fma(static_cast<double>(want[i]), static_cast<double>(x[i]) - mean, l);
        });
        double sum = 0, dot = 0;
        if (kind == 0) VRowSumAndDotDev(g.data(), x.data(), n, mean, &sum, &dot);
        else VRowAffineActGradSums(x.data(), g.data(), out.data(), n, a, b, kind == 1 ? RowAct::kRelu : RowAct::kClip,
                                   lo, hi, fill, mean, &sum, &dot);
        if (kind > 0) {
          for (int64_t i = 0; i < n + 32; ++i) {
            ASSERT_EQ(std::memcmp(&out[i], &want[i], sizeof(float)), 0) << "kind " << kind << " at " << i;
          }
        }
        if (with_nan && (kind == 0 || want[n / 2] != want[n / 2])) {
          EXPECT_TRUE(std::isnan(sum) && std::isnan(dot)) << "kind " << kind;
          continue;
        }
        EXPECT_EQ(std::memcmp(&sum, &want_sum, sizeof sum), 0) << "kind " << kind << ": " << sum << " vs " << want_sum;
        EXPECT_EQ(std::memcmp(&dot, &want_dot, sizeof dot), 0) << "kind " << kind << ": " << dot << " vs " << want_dot;
      }
    }
  }
}

TEST(VRowsTest, BatchNormGradientSumsMatchTheirDefinitions) { WithAndWithoutIntrinsics(CheckBatchNormGradientSums); }

// The normalizations' row sums (VRowMoments, and VRowSum: its sum about 0), AVX-512 where the CPU has it
// and the compiled loops, against LaneSum's lanes of their terms written out (the square fused into its
// lane's add), bit for bit:
// every row length up to 70 and long ones around kLongRow (8 and 32 lanes, the 32-lane tree's total in
// registers), values over exponents 60 apart so that the double sums round.
void CheckRowSums() {
  std::vector<float> x(600);
  for (size_t e = 0; e < x.size(); ++e) {
    const float sig = 1.0f + static_cast<float>((e * 2654435761u) % 8388608u) / 8388608.0f;
    x[e] = std::ldexp(e % 3 ? sig : -sig, static_cast<int>((e * 37) % 61) - 30);
  }
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 70; ++n) lengths.push_back(n);
  for (int64_t n : {255, 256, 257, 271, 288, 300, 511, 600}) lengths.push_back(n);
  const double mean = 0.375;
  for (int64_t n : lengths) {
    const float* r = x.data();
    const double want_sum = LaneSum(n, [r](int64_t i) { return static_cast<double>(r[i]); });
    const double got_sum = VRowSum(r, n);
    EXPECT_EQ(std::memcmp(&got_sum, &want_sum, sizeof got_sum), 0) << "sum, n " << n << ": " << got_sum << " against " << want_sum;
    const double want_ms = LaneAccumulate(n, [&](double& l, int64_t i) { l += static_cast<double>(r[i]) - mean; });
    const double want_mq = LaneAccumulate(n, [&](double& l, int64_t i) {
      const double d = static_cast<double>(r[i]) - mean;
      l = std::fma(d, d, l);
    });
    double got_ms = -1, got_mq = -1;
    VRowMoments(r, n, mean, &got_ms, &got_mq);
    EXPECT_EQ(std::memcmp(&got_ms, &want_ms, sizeof got_ms), 0) << "moments' sum, n " << n;
    EXPECT_EQ(std::memcmp(&got_mq, &want_mq, sizeof got_mq), 0) << "moments' squares, n " << n;
  }
}

TEST(VRowsTest, RowSumsMatchTheirDefinitions) { WithAndWithoutIntrinsics(CheckRowSums); }

// Batch normalization's block sums (VChannelMoments, VChannelGradSums read and with ReLU's and Clip's
// gradients made on the way; AVX-512 where the CPU has it) against their order as vrows.h defines it,
// written out here: rows under kLongRow into eight lanes per channel that run over the images, totalled in
// lane order once; longer rows LaneSum's lanes per row, added in image order; the gradient's dot sum times
// inv once at the end. Blocks of 1 and 3 channels inside
// 5 (rows ld apart), 1 and 5 images, every short length up to 33 and others around kLongRow, magnitudes
// 2^-60 .. 2^60 (so the order shows in the bits), and the gradient rows written where asked, nothing else.
// Both with the AVX-512 intrinsics (where the CPU has them) and with the compiled per-ISA loops
// (VRowsUseIntrinsics(false)): each must follow the order, so they agree bit for bit.
void CheckBatchNormChannelBlockSums() {
  const float lo = 0.0f, hi = 6.0f, fill = -0.0f;
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 33; ++n) lengths.push_back(n);
  for (int64_t n : {48, 64, 100, 255, 256, 257, 300}) lengths.push_back(n);
  for (int64_t inner : lengths) {
    for (int64_t images : {1, 5}) {
      for (int64_t nb : {1, 3}) {
        SCOPED_TRACE("inner " + std::to_string(inner) + ", " + std::to_string(images) + " images, " +
                     std::to_string(nb) + " channels");
        const int64_t c = 5, c0 = 1, ld = c * inner, total = images * ld;
        std::vector<float> x(total), g(total);
        for (int64_t i = 0; i < total; ++i) {
          const double scale = std::exp2(static_cast<double>((i * 13) % 121 - 60));
          x[i] = static_cast<float>(std::sin(0.71 * static_cast<double>(i)) * 5.0);
          g[i] = static_cast<float>(std::cos(0.29 * static_cast<double>(i)) * scale);
        }
        const ChannelRows r{images, ld, nb, inner};
        const float* xb = x.data() + c0 * inner;
        const float* gb = g.data() + c0 * inner;
        auto at = [&](const float* p, int64_t b, int64_t j, int64_t i) { return p[b * ld + j * inner + i]; };
        // The definition: add(lane, b, i) adds element (b, i) into its lane in the order above.
        auto ordered = [&](const std::function<void(double&, int64_t, int64_t)>& add) {
          if (inner >= kLongRow) {
            double s = 0;
            for (int64_t b = 0; b < images; ++b) {
              s += LaneAccumulate(inner, [&](double& l, int64_t i) { add(l, b, i); });
            }
            return s;
          }
          double lanes[8] = {};
          for (int64_t b = 0; b < images; ++b) {
            for (int64_t i = 0; i < inner; ++i) add(lanes[i % 8], b, i);
          }
          double s = 0;
          for (double l : lanes) s += l;
          return s;
        };
        double mean[3], inv[3];
        float a[3], bb[3];
        for (int64_t j = 0; j < nb; ++j) {
          mean[j] = 0.25 + 0.125 * static_cast<double>(j);
          inv[j] = 1.7 - 0.1 * static_cast<double>(j);
          a[j] = 1.5f - 0.25f * static_cast<float>(j);
          bb[j] = -0.75f;
        }
        double sum[3], want[3], sq[3];
        VChannelMoments(gb, r, mean, sum, sq);
        for (int64_t j = 0; j < nb; ++j) {
          want[j] = ordered([&](double& l, int64_t b, int64_t i) { l += static_cast<double>(at(gb, b, j, i)) - mean[j]; });
          EXPECT_EQ(std::memcmp(&sum[j], &want[j], sizeof(double)), 0) << "moments' sum, channel " << j << ": " << sum[j];
          want[j] = ordered([&](double& l, int64_t b, int64_t i) {
            const double d = static_cast<double>(at(gb, b, j, i)) - mean[j];
            l = std::fma(d, d, l);
          });
          EXPECT_EQ(std::memcmp(&sq[j], &want[j], sizeof(double)), 0) << "moments' squares, channel " << j;
        }
        for (int kind = 0; kind < 3; ++kind) {
          // The gradient rows go to a buffer of nb rows per image with a gap of one row after them.
          const int64_t out_ld = (nb + 1) * inner;
          std::vector<float> out(images * out_ld, 99.0f), want_out = out;
          auto grad = [&](int64_t b, int64_t j, int64_t i) {
            const float gv = at(gb, b, j, i), y = at(xb, b, j, i) * a[j] + bb[j];
            return kind == 0 ? gv : kind == 1 ? (y > 0.0f ? gv : 0.0f) : ((y >= lo) & (y <= hi) ? gv : fill);
          };
          for (int64_t b = 0; b < images && kind > 0; ++b) {
            for (int64_t j = 0; j < nb; ++j) {
              for (int64_t i = 0; i < inner; ++i) want_out[b * out_ld + j * inner + i] = grad(b, j, i);
            }
          }
          const ChannelAct act{kind == 1 ? RowAct::kRelu : RowAct::kClip, lo, hi, fill, a, bb, out.data(), out_ld};
          double dot[3], want_dot[3];
          VChannelGradSums(gb, xb, r, kind == 0 ? nullptr : &act, mean, inv, sum, dot);
          for (int64_t j = 0; j < nb; ++j) {
            want[j] = ordered([&](double& l, int64_t b, int64_t i) { l += static_cast<double>(grad(b, j, i)); });
            want_dot[j] = inv[j] * ordered([&](double& l, int64_t b, int64_t i) {
              l = std::fma(static_cast<double>(grad(b, j, i)), static_cast<double>(at(xb, b, j, i)) - mean[j], l);
            });
            EXPECT_EQ(std::memcmp(&sum[j], &want[j], sizeof(double)), 0) << "kind " << kind << ", channel " << j;
            EXPECT_EQ(std::memcmp(&dot[j], &want_dot[j], sizeof(double)), 0) << "kind " << kind << ", channel " << j;
          }
          EXPECT_EQ(std::memcmp(out.data(), want_out.data(), out.size() * sizeof(float)), 0) << "kind " << kind;
        }
      }
    }
  }
}

TEST(VRowsTest, BatchNormChannelBlockSumsFollowTheirOrder) { WithAndWithoutIntrinsics(CheckBatchNormChannelBlockSums); }

// One pass about a shift keeps the variance to double precision where the sum of squares minus the squared
// sum loses it: a channel of 4096 values 10^4 + U(-0.01, 0.01) (the mean 10^6 standard deviations from 0),
// the shift its first value (as BatchNormalization picks it), against a two-pass variance in long double.
// The same sums about 0 lose about 1e-4 of it (the cancellation grows with (mean - shift)^2 / variance,
// here 3e12), which shows the data is a test of the shift.
TEST(VRowsTest, MomentsAboutAShiftGiveTheVariance) {
  const int64_t images = 4, inner = 1024;
  std::vector<float> x(images * inner);
  uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = 10000.0f + (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * 0.02f;
  }
  long double mean = 0, var = 0;
  for (float v : x) mean += v;
  mean /= static_cast<long double>(x.size());
  for (float v : x) var += (v - mean) * (v - mean);
  var /= static_cast<long double>(x.size());
  const ChannelRows r{images, inner, 1, inner};
  const double cnt = static_cast<double>(x.size());
  for (double shift : {static_cast<double>(x[0]), 0.0}) {
    double sum, sq;
    VChannelMoments(x.data(), r, &shift, &sum, &sq);
    const double d = sum / cnt, got_mean = shift + d, got_var = (sq - sum * d) / cnt;
    const double rel = std::fabs(got_var - static_cast<double>(var)) / static_cast<double>(var);
    if (shift == 0.0) {
      EXPECT_GT(rel, 1e-6) << "about 0";
      continue;
    }
    EXPECT_NEAR(got_mean, static_cast<double>(mean), 1e-12 * 1e4);
    EXPECT_LT(rel, 1e-12);
  }
}

// Batch normalization's input gradient row (VRowBatchNormGrad, compiled per ISA) against its definition
// written out with the same fused multiply-adds, bit for bit, every length to 40 and long ones; and against
// coef (m g - db - (x - mean) inv ds) in long double, within one float rounding (half an ulp of the
// result) plus a hair, so the rewritten form is the formula.
TEST(VRowsTest, BatchNormInputGradientMatchesItsDefinition) {
  const double mean = 0.3125, inv = 1.7, coef = 0.02, m = 64, db = 3.25, ds = -1.5;
  const double a = coef * m, b = -coef * inv * ds, c = -coef * db;
  for (int64_t n : {1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 40, 255, 256, 257, 1000}) {
    std::vector<float> g(n), x(n), dx(n + 16, 99.0f);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = static_cast<float>(std::cos(0.29 * static_cast<double>(i)) * 2.0);
      x[i] = static_cast<float>(std::sin(0.71 * static_cast<double>(i)) * 5.0);
    }
    VRowBatchNormGrad(g.data(), x.data(), dx.data(), n, mean, a, b, c);
    for (int64_t i = 0; i < n; ++i) {
      const float want = static_cast<float>(std::fma(a, static_cast<double>(g[i]),
                                                     std::fma(b, static_cast<double>(x[i]) - mean, c)));
      ASSERT_EQ(std::memcmp(&dx[i], &want, sizeof want), 0) << "n " << n << ", element " << i;
      const long double exact = static_cast<long double>(coef) *
                                (static_cast<long double>(m) * g[i] - db - (x[i] - static_cast<long double>(mean)) * inv * ds);
      EXPECT_LE(std::fabs(static_cast<double>(dx[i] - exact)), 0.5000001 * std::fabs(std::nextafter(dx[i], INFINITY) - dx[i]))
          << "n " << n << ", element " << i;
    }
    for (int64_t i = n; i < n + 16; ++i) EXPECT_EQ(dx[i], 99.0f) << "written past the row, n " << n;
  }
}

// LayerNormalizationGrad's row pass (VRowLayerNormGradSums, AVX-512 where the CPU has it) against its
// definition: xh = (x - mean) inv and b = g scale inv in float, ds += g xh and db += g into running float
// sums, and LaneSum of b and of b xh, compiled here without contraction; every row length to 70 and long
// ones around kLongRow (every tail of the 32 lanes' last step), a -0 and a NaN in g, and nothing past the row
// written.
void CheckLayerNormGradientSums() {
  const float mean = 0.375f, inv = 1.3f;
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 70; ++n) lengths.push_back(n);
  for (int64_t n : {128, 255, 256, 257, 271, 272, 276, 287, 288, 300, 1000, 1020}) lengths.push_back(n);
  for (int64_t n : lengths) {
    for (int with_nan = 0; with_nan < 2; ++with_nan) {
      SCOPED_TRACE("n = " + std::to_string(n) + (with_nan ? ", a NaN in g" : ""));
      std::vector<float> g(n + 32, std::nanf("")), x(n + 32, std::nanf("")), sc(n + 32, std::nanf(""));
      std::vector<float> ds(n + 32), db(n + 32);
      for (int64_t i = 0; i < n + 32; ++i) {
        ds[i] = static_cast<float>(std::sin(0.13 * i));
        db[i] = static_cast<float>(std::cos(0.17 * i));
      }
      for (int64_t i = 0; i < n; ++i) {
        // Magnitudes 2^-60 .. 2^60, so that the double sums round and their order shows.
        g[i] = static_cast<float>(std::cos(0.29 * i) * std::exp2(static_cast<double>((i * 13) % 121 - 60)));
        x[i] = static_cast<float>(std::sin(0.71 * i) * 5.0);
        sc[i] = static_cast<float>(0.5 + std::sin(0.05 * i) * 0.25);
      }
      if (n > 5) g[5] = -0.0f;
      if (with_nan) g[n / 2] = std::nanf("");
      std::vector<float> want_ds = ds, want_db = db;
      for (int64_t i = 0; i < n; ++i) {
        const float xh = (x[i] - mean) * inv;
        want_ds[i] += g[i] * xh;
        want_db[i] += g[i];
      }
      auto bv = [&](int64_t i) { return g[i] * sc[i] * inv; };
      const double want_mb = LaneSum(n, [&](int64_t i) { return static_cast<double>(bv(i)); });
      const double want_mbx = LaneSum(n, [&](int64_t i) {
        const float xh = (x[i] - mean) * inv;
        return static_cast<double>(bv(i)) * xh;
      });
      double mb = 0, mbx = 0;
      VRowLayerNormGradSums(g.data(), x.data(), sc.data(), n, mean, inv, ds.data(), db.data(), &mb, &mbx);
      for (int64_t i = 0; i < n + 32; ++i) {
        ASSERT_EQ(std::memcmp(&ds[i], &want_ds[i], sizeof(float)), 0) << "ds at " << i;
        ASSERT_EQ(std::memcmp(&db[i], &want_db[i], sizeof(float)), 0) << "db at " << i;
      }
      if (with_nan) {
        EXPECT_TRUE(std::isnan(mb) && std::isnan(mbx));
        continue;
      }
      EXPECT_EQ(std::memcmp(&mb, &want_mb, sizeof mb), 0) << mb << " vs " << want_mb;
      EXPECT_EQ(std::memcmp(&mbx, &want_mbx, sizeof mbx), 0) << mbx << " vs " << want_mbx;
    }
  }
}

TEST(VRowsTest, LayerNormGradientSumsMatchTheirDefinition) { WithAndWithoutIntrinsics(CheckLayerNormGradientSums); }

// VPlanesMaxUnpool2x2Codes by its lane tables (pooled rows of fewer than 8 windows) and by pooled rows,
// against the definition written out: every element +0, then the element each code names +0 + g where the
// code's positive bit is set. Bits compared, so -0 (which becomes +0) and NaN count; every code 0..7; odd
// planes (a row and a column no window covers); plane ranges that start and end inside the tensor, where
// the tables' whole loads must stop at the range's end (planes of 4 and 9 windows, under one load of 32),
// and planes of fewer than 16 elements, whose vector spans several planes: no store may reach past the
// range (a 3x3 activation pooled to 1x1 wrote into the next thread's planes and past the tensor's end).
TEST(VRowsTest, UnpoolingByWindowCodesMatchesItsDefinition) {
  struct Case {
    int64_t h, wd, oh, ow;
  };
  const Case cases[] = {{4, 4, 2, 2},   {6, 6, 3, 3}, {11, 11, 5, 5}, {12, 14, 6, 7}, {7, 9, 3, 4},
                        {26, 26, 13, 13}, {2, 2, 1, 1}, {3, 3, 1, 1},   {3, 5, 1, 2},   {5, 3, 2, 1}};
  for (const Case& t : cases) {
    const int64_t planes = 7, isize = t.h * t.wd, osize = t.oh * t.ow;
    std::vector<float> g(planes * osize);
    std::vector<uint8_t> codes(planes * osize);
    for (int64_t e = 0; e < planes * osize; ++e) {
      g[e] = static_cast<float>((e * 37) % 23) - 11.0f;
      codes[e] = static_cast<uint8_t>((e * 5 + e / 3) % 8);
    }
    g[1] = -0.0f;
    codes[1] = 4;
    g[2] = std::numeric_limits<float>::quiet_NaN();
    codes[2] = 7;
    const Unpool2x2Lanes lanes(t.h, t.wd, t.oh, t.ow);
    EXPECT_EQ(lanes.usable(), t.ow < 8) << t.h << "x" << t.wd;
    for (int64_t p0 : {0, 2}) {
      for (int64_t p1 : {planes, int64_t{5}}) {
        SCOPED_TRACE(std::to_string(t.h) + "x" + std::to_string(t.wd) + " planes " + std::to_string(p0) + ".." +
                     std::to_string(p1));
        std::vector<float> want(planes * isize, 7.0f);  // planes outside the range keep their 7s
        for (int64_t p = p0; p < p1; ++p) {
          std::fill(want.begin() + p * isize, want.begin() + (p + 1) * isize, 0.0f);
          for (int64_t i = 0; i < t.oh; ++i) {
            for (int64_t j = 0; j < t.ow; ++j) {
              const int64_t o = p * osize + i * t.ow + j, code = codes[o];
              const float v = (code & kWindowCodePositive) ? g[o] : 0.0f;
              want[p * isize + (2 * i + (code >> 1 & 1)) * t.wd + 2 * j + (code & 1)] = 0.0f + v;
            }
          }
        }
        for (const Unpool2x2Lanes* l : {&lanes, static_cast<const Unpool2x2Lanes*>(nullptr)}) {
          std::vector<float> got(planes * isize, 7.0f);
          if (!VPlanesMaxUnpool2x2Codes(g.data(), codes.data(), t.h, t.wd, t.oh, t.ow, p0, p1, got.data(), l)) {
            GTEST_SKIP() << "no AVX-512F on this CPU: the caller scatters (UnpoolWindowCodes)";
          }
          ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
              << (l ? "lane tables" : "pooled rows");
        }
      }
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
