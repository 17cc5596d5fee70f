// .npy/.npz: numpy's own files (stored with zip64 headers, and deflated), round trips, damaged archives,
// and `ontrain run` on .npz inputs.
#include "tools/cli/npz.h"

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "gmock/gmock.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "tools/cli/commands.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

TEST(NpzTest, ReadsNumpysFiles) {
  for (const char* file : {"tests/data/npz/stored.npz", "tests/data/npz/compressed.npz"}) {
    SCOPED_TRACE(file);
    auto arrays = cli::LoadNpz(file);
    ASSERT_TRUE(arrays.ok()) << arrays.status().ToString();
    ASSERT_EQ(arrays->size(), 4u);
    std::map<std::string, Tensor> by;
    for (auto& [n, t] : arrays.value()) by[n] = t;
    EXPECT_EQ(by["input"].shape(), (Shape{3, 4}));
    EXPECT_FLOAT_EQ(by["input"].data<float>()[5], 5.0f / 7);
    EXPECT_EQ(by["labels"].dtype(), DType::kInt64);
    EXPECT_EQ(by["labels"].data<int64_t>()[0], 2);
    EXPECT_EQ(by["mask"].dtype(), DType::kBool);
    EXPECT_FALSE(by["mask"].data<bool>()[1]);
    EXPECT_EQ(by["scalar"].shape(), Shape{});
    EXPECT_EQ(by["scalar"].data<double>()[0], 2.5);
  }
}

TEST(NpzTest, RoundTripAndDamage) {
  std::string path = ::testing::TempDir() + "/round.npz";
  std::vector<std::pair<std::string, Tensor>> in = {{"a", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3})},
                                                    {"b", Tensor::FromVector<int32_t>({7}, {1})}};
  ASSERT_TRUE(cli::SaveNpz(in, path).ok());
  auto out = cli::LoadNpz(path);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), 2u);
  EXPECT_EQ(out.value()[0].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(out.value()[0].second.data<float>()[4], 5.0f);
  EXPECT_EQ(out.value()[1].second.data<int32_t>()[0], 7);
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::string cut = ::testing::TempDir() + "/cut.npz";
  for (size_t n = 0; n < bytes.size(); n += 7) {
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, n);
    EXPECT_FALSE(cli::LoadNpz(cut).ok()) << "prefix " << n;
  }
  EXPECT_FALSE(cli::LoadNpz("/nonexistent.npz").ok());
}

// Every dtype a tensor holds, written by SaveNpz, read back by ontrain and (where numpy is installed) by
// numpy itself: same dtype (bfloat16 as float32), shape and values.
TEST(NpzTest, EveryDtypeIsReadableByNumpy) {
  std::vector<std::pair<std::string, Tensor>> in = {
      {"f32", Tensor::FromVector<float>({1.5f, -2.25f}, {2})},
      {"f64", Tensor::FromVector<double>({0.1}, {1, 1})},
      {"i8", Tensor::FromVector<int8_t>({-7}, {})},
      {"i16", Tensor::FromVector<int16_t>({-300}, {1})},
      {"i32", Tensor::FromVector<int32_t>({1 << 20}, {1})},
      {"i64", Tensor::FromVector<int64_t>({int64_t{1} << 40}, {1})},
      {"u8", Tensor::FromVector<uint8_t>({200}, {1})},
      {"u16", Tensor::FromVector<uint16_t>({60000}, {1})},
      {"u32", Tensor::FromVector<uint32_t>({4000000000u}, {1})},
      {"u64", Tensor::FromVector<uint64_t>({uint64_t{1} << 63}, {1})},
      {"b", Tensor::FromVector<bool>({true, false, true}, {3})},
      {"f16", Tensor::FromVector<uint16_t>({0x3e00}, {1})},    // 1.5, relabelled below
      {"bf16", Tensor::FromVector<uint16_t>({0x3fc0, 0xc0a0}, {2})},  // 1.5, -5
  };
  Tensor f16_bits = in[11].second, bf16_bits = in[12].second;  // own the bytes the views read
  in[11].second = Tensor::View(DType::kFloat16, {1}, f16_bits.raw_data());
  in[12].second = Tensor::View(DType::kBFloat16, {2}, bf16_bits.raw_data());
  std::string path = ::testing::TempDir() + "/dtypes.npz";
  ASSERT_TRUE(cli::SaveNpz(in, path).ok());
  auto out = cli::LoadNpz(path);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    SCOPED_TRACE(in[i].first);
    const Tensor& a = in[i].second;
    const Tensor& b = out.value()[i].second;
    EXPECT_EQ(b.shape(), a.shape());
    if (a.dtype() == DType::kBFloat16) {
      ASSERT_EQ(b.dtype(), DType::kFloat32);
      EXPECT_EQ(b.data<float>()[0], 1.5f);
      EXPECT_EQ(b.data<float>()[1], -5.0f);
    } else {
      ASSERT_EQ(b.dtype(), a.dtype());
      EXPECT_EQ(0, std::memcmp(a.raw_data(), b.raw_data(), a.SizeInBytes()));
    }
  }
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "numpy is not installed (/usr/bin/python3 with python3-numpy): ontrain's own reader passed";
  }
  std::string script = ::testing::TempDir() + "/check.py";
  std::ofstream(script) << "import numpy as np, sys\n"
                           "z = np.load(sys.argv[1])\n"
                           "want = {'f32': ('float32', [1.5, -2.25]), 'f64': ('float64', [[0.1]]), 'i8': ('int8', -7),\n"
                           "  'i16': ('int16', [-300]), 'i32': ('int32', [1 << 20]), 'i64': ('int64', [1 << 40]),\n"
                           "  'u8': ('uint8', [200]), 'u16': ('uint16', [60000]), 'u32': ('uint32', [4000000000]),\n"
                           "  'u64': ('uint64', [1 << 63]), 'b': ('bool', [True, False, True]), 'f16': ('float16', [1.5]),\n"
                           "  'bf16': ('float32', [1.5, -5.0])}\n"
                           "assert sorted(z.files) == sorted(want), z.files\n"
                           "for k, (dt, v) in want.items():\n"
                           "  a = z[k]; e = np.array(v, dtype=dt)\n"
                           "  assert a.dtype == e.dtype and a.shape == e.shape and (a == e).all(), (k, a.dtype, a.shape, a)\n";
  EXPECT_EQ(0, std::system(("/usr/bin/python3 " + script + " " + path).c_str())) << "numpy disagreed (see above)";
}

TEST(NpzTest, RunCommandOnNpzInputs) {
  std::string model = ::testing::TempDir() + "/mlp.onnx";
  ASSERT_TRUE(SaveModel(MakeMlpClassifier(12, {8}, 3, 0), model).ok());
  std::string in = ::testing::TempDir() + "/in.npz", out = ::testing::TempDir() + "/out.npz";
  ASSERT_TRUE(cli::SaveNpz({{"input", Tensor::FromVector(std::vector<float>(24, 0.5f), {2, 12})}}, in).ok());
  Status s = cli::Run({"--model", model, "--inputs", in, "--outputs", out});
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto logits = cli::LoadNpz(out);
  ASSERT_TRUE(logits.ok());
  EXPECT_EQ(logits->at(0).first, "logits");
  EXPECT_EQ(logits->at(0).second.shape(), (Shape{2, 3}));
  ASSERT_TRUE(cli::SaveNpz({{"wrong_name", Tensor::FromVector(std::vector<float>(24, 0.5f), {2, 12})}}, in).ok());
  Status bad = cli::Run({"--model", model, "--inputs", in});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("wrong_name"));
  Status cuda = cli::Run({"--model", model, "--inputs", in, "--provider", "cuda"});
  ASSERT_FALSE(cuda.ok());
  EXPECT_THAT(cuda.message(), HasSubstr("CUDA"));
}

}  // namespace
}  // namespace ontrain
