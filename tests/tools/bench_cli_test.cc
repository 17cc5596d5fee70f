// `ontrain bench` on the built-in MLP (allocations per step, the profile's matrix FLOPs and floor, by op type
// and by shape) and `ontrain bench --gemm`'s report.
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/cli/commands.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A number after `"key": ` in a one-line JSON record; NaN when absent.
double JsonNumber(const std::string& json, const std::string& key) {
  size_t at = json.find("\"" + key + "\": ");
  return at == std::string::npos ? std::nan("") : std::stod(json.substr(at + key.size() + 4));
}

// `ontrain bench` on the built-in MLP (784-256-10, batch 16): a step allocates nothing after warm-up, and
// --profile counts the step's matrix FLOPs as worked out by hand and sets the floor from them.
TEST(BenchCliTest, TimesStepsAndCountsTheirMatrixWork) {
  const std::string dir = ::testing::TempDir() + "/cli_bench";
  ::mkdir(dir.c_str(), 0755);
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  const std::string plain = dir + "/plain.json", profiled = dir + "/profiled.json", shaped = dir + "/shaped.json";
  ::testing::internal::CaptureStdout();
  Status a = cli::Bench({"--artifacts", dir, "--threads", "1", "--batch-size", "16", "--steps", "5", "--warmup", "3",
                         "--json", plain});
  Status b = cli::Bench({"--artifacts", dir, "--threads", "1", "--batch-size", "16", "--steps", "5", "--warmup", "3",
                         "--profile", "--json", profiled});
  Status c = cli::Bench({"--artifacts", dir, "--threads", "1", "--batch-size", "16", "--steps", "5", "--warmup", "3",
                         "--profile-shapes", "--json", shaped});
  const std::string said = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(a.ok()) << a.ToString();
  ASSERT_TRUE(b.ok()) << b.ToString();
  ASSERT_TRUE(c.ok()) << c.ToString();
  const std::string j = ReadAll(plain), p = ReadAll(profiled);
  EXPECT_GT(JsonNumber(j, "steps_per_s"), 0.0) << j;
  EXPECT_EQ(JsonNumber(j, "allocs_per_step"), 0.0) << j;
  EXPECT_EQ(j.find("floor_ms"), std::string::npos) << "the floor needs --profile";
  // Forward: 16x784 by 784x256 and 16x256 by 256x10. Backward: both weight gradients and the hidden
  // layer's input gradient (16x10 by 10x256); none for the data input.
  const double flops = 2.0 * 16 * (784 * 256 + 256 * 10) + 2.0 * 16 * (784 * 256 + 256 * 10) + 2.0 * 16 * 10 * 256;
  EXPECT_NEAR(JsonNumber(p, "matrix_gflop_per_step"), flops / 1e9, flops / 1e9 * 1e-5) << p;
  // Profiling by op type makes its tally's entries before the timed steps: it allocates nothing in them;
  // by shape, each step's keys are kept while the shapes stay (they had cost 57 allocations per CNN step).
  EXPECT_EQ(JsonNumber(p, "allocs_per_step"), 0.0) << p;
  EXPECT_EQ(JsonNumber(ReadAll(shaped), "allocs_per_step"), 0.0) << ReadAll(shaped);
  EXPECT_THAT(said, HasSubstr("Gemm [16,784] [256,784] [256]"));
  const double peak = JsonNumber(p, "peak_gflops_per_core");
  EXPECT_GT(peak, 0.1) << p;
  EXPECT_EQ(JsonNumber(p, "cores"), 1.0) << p;
  EXPECT_NEAR(JsonNumber(p, "floor_ms"), flops / 1e9 / peak * 1e3, flops / 1e9 / peak * 1e3 * 1e-4) << p;
  EXPECT_THAT(said, HasSubstr("matrix ops (MatMul, Gemm, convolutions, their gradients)"));
  EXPECT_THAT(said, HasSubstr("GFLOP/s"));
}

// `ontrain bench --gemm`: the peak line and one line per product, the products with B transposed both on
// the kernel a layer gets and on the library, so the two can be compared on any CPU (no speed is asserted).
TEST(BenchCliTest, GemmReportsEveryProductAgainstThePeak) {
  ::testing::internal::CaptureStdout();
  Status s = cli::Bench({"--gemm", "--threads", "1"});
  const std::string said = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(said, HasSubstr("FP32 peak of one core"));
  EXPECT_THAT(said, HasSubstr("1024 x  1024 x  1024"));
  EXPECT_THAT(said, HasSubstr("  128 x   512 x   784 B^T         :"));
  EXPECT_THAT(said, HasSubstr(" 1024 x   512 x   128 B^T, library:"));
  size_t lines = 0;
  for (size_t at = said.find("% of peak)"); at != std::string::npos; at = said.find("% of peak)", at + 1)) ++lines;
  EXPECT_EQ(lines, 9u) << said;
}

}  // namespace
}  // namespace ontrain
