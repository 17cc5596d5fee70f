// The sweeps' helpers (sweep_util.h).
#include "tests/engine/sweep_util.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace testing {

// Runs the one-node model at `threads` threads (twice: the second run from the planned arenas).
namespace {

std::vector<Tensor> RunAt(const Model& m, const NamedTensors& feeds, int threads) {
  auto cpu = CpuExecutionProvider::Create({threads}).value();
  auto ex = Executor::Create(m, {{cpu.get()}, {}});
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  if (!ex.ok()) return out;
  for (int run = 0; run < 2; ++run) {
    Status s = ex.value()->Run(ToNamedValues(feeds), ex.value()->output_names(), &out);
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::vector<Tensor> copies;
  for (const Tensor& t : out) copies.push_back(t.Clone());
  return copies;
}

}  // namespace

std::vector<Tensor> RunBothThreadCounts(const Model& m, const NamedTensors& feeds) {
  std::vector<Tensor> one = RunAt(m, feeds, 1), two = RunAt(m, feeds, 2);
  EXPECT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size() && i < two.size(); ++i) {
    EXPECT_EQ(one[i].shape(), two[i].shape());
    EXPECT_EQ(std::memcmp(one[i].raw_data(), two[i].raw_data(), one[i].SizeInBytes()), 0)
        << "output " << i << " differs between 1 and 2 threads";
  }
  return one;
}

void ExpectNear(const Tensor& got, const std::vector<double>& want, const std::vector<double>& scale,
                const char* what) {
  ASSERT_EQ(got.NumElements(), static_cast<int64_t>(want.size())) << what;
  const float* g = got.data<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_LE(std::fabs(g[i] - want[i]), 1e-5 * scale[i] + 1e-30)
        << what << " element " << i << ": " << g[i] << " against " << want[i];
  }
}

Shape RowMajorStrides(const Shape& shape) {
  Shape st(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
  return st;
}

}  // namespace testing
}  // namespace ontrain
