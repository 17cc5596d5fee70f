// .npy/.npz: numpy's own files (stored with zip64 headers, and deflated), round trips, damaged archives,
// and `ontrain run` on .npz inputs.
#include "tools/cli/npz.h"

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
