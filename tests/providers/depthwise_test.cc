// The depthwise kernels' one-pass backward (DepthwiseBackward: dX and dW together where the AVX-512 vector
// kernels run) gives the bits of the separate dX and dW passes, at 1 and 2 threads; those are checked
// against the definition in cpu_kernels_test.cc (ConvFloat32MatchesDefinition).
#include "providers/cpu/kernels/depthwise.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "providers/cpu/thread_pool.h"

namespace ontrain {
namespace cpu {
namespace {

std::vector<float> Uniform(int64_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& f : v) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return v;
}

TEST(DepthwiseTest, OnePassBackwardGivesTheBitsOfTheSeparatePasses) {
  struct Case {
    int64_t n, c, h, w, k, stride, pad, dil, pad_end = -1;  // pad_end -1: pad on both sides
  };
  // MobileNet's layers (same windows, stride 2), a 4x4 plane (one vector), odd rows, a dilated 5x5 window,
  // uneven pads (dX's window geometry then differs from dW's), and pads wider than the stride-2 grid (the
  // plane loops, for both paths).
  const Case cases[] = {{4, 32, 16, 16, 3, 1, 1, 1},   {3, 24, 16, 16, 3, 2, 1, 1},   {5, 40, 4, 4, 3, 1, 1, 1},
                        {2, 7, 9, 37, 3, 1, 1, 1},     {2, 6, 11, 10, 5, 1, 4, 2},    {2, 8, 12, 12, 3, 1, 0, 1, 2},
                        {2, 8, 12, 12, 3, 2, 0, 1, 1}, {2, 3, 4, 4, 3, 2, 2, 1}};
  for (const Case& t : cases) {
    SCOPED_TRACE("n " + std::to_string(t.n) + " c " + std::to_string(t.c) + " " + std::to_string(t.h) + "x" +
                 std::to_string(t.w) + " k " + std::to_string(t.k) + " stride " + std::to_string(t.stride));
    WindowAttrs geo;
    geo.kernel = {t.k, t.k};
    geo.strides = {t.stride, t.stride};
    geo.dilations = {t.dil, t.dil};
    const int64_t end = t.pad_end < 0 ? t.pad : t.pad_end;
    geo.pads = {t.pad, t.pad, end, end};
    const int64_t in[2] = {t.h, t.w};
    const int64_t out[2] = {(t.h + t.pad + end - (t.k - 1) * t.dil - 1) / t.stride + 1,
                            (t.w + t.pad + end - (t.k - 1) * t.dil - 1) / t.stride + 1};
    const std::vector<float> x = Uniform(t.n * t.c * t.h * t.w, 1), w = Uniform(t.c * t.k * t.k, 2),
                             dy = Uniform(t.n * t.c * out[0] * out[1], 3);
    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      ThreadPool pool(threads, false);
      std::vector<float> dx1(x.size()), dw1(w.size()), dx2(x.size(), 7.0f), dw2(w.size(), 7.0f);
      DepthwiseBackwardData<float>(dy.data(), w.data(), dx1.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackwardWeights<float>(dy.data(), x.data(), dw1.data(), t.n, t.c, in, out, geo, &pool);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), dx2.data(), dw2.data(), t.n, t.c, in, out, geo, &pool);
      EXPECT_EQ(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float)), 0) << "dX differs";
      EXPECT_EQ(std::memcmp(dw1.data(), dw2.data(), dw1.size() * sizeof(float)), 0) << "dW differs";
      // Either output alone.
      std::vector<float> dx3(x.size(), 7.0f), dw3(w.size(), 7.0f);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), dx3.data(), nullptr, t.n, t.c, in, out, geo, &pool);
      DepthwiseBackward<float>(dy.data(), x.data(), w.data(), nullptr, dw3.data(), t.n, t.c, in, out, geo, &pool);
      EXPECT_EQ(dx3, dx1);
      EXPECT_EQ(dw3, dw1);
    }
  }
}

}  // namespace
}  // namespace cpu
}  // namespace ontrain
