// The README's C++ example trains: a few steps on artifacts made with ontrain's generator lower the loss,
// and each step's checkpoint is saved.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>

#include "checkpoint/checkpoint_io.h"
#include "graph/artifacts.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "readme_example.h"

TEST(ReadmeExampleTest, TrainsFromAnotherWorkspace) {
  std::string root = ::testing::TempDir() + "/readme";
  ::mkdir(root.c_str(), 0755);
  std::string dir = root + "/artifacts";
  auto artifacts = ontrain::GenerateArtifacts(ontrain::MakeMlpClassifier(12, {16}, 3, 0), ontrain::ArtifactOptions());
  ASSERT_TRUE(artifacts.ok()) << artifacts.status().ToString();
  ASSERT_TRUE(ontrain::WriteArtifacts(artifacts.value(), dir).ok());
  std::vector<float> x(8 * 12);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.3f * i);
  std::vector<int64_t> y(8);
  for (size_t i = 0; i < y.size(); ++i) y[i] = static_cast<int64_t>(i % 3);
  ontrain::Tensor images = ontrain::Tensor::FromVector(x, {8, 12}), labels = ontrain::Tensor::FromVector(y, {8});
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) {
    auto loss = TrainOneStep(dir, images, labels);
    ASSERT_TRUE(loss.ok()) << loss.status().ToString();
    losses.push_back(loss.value());
  }
  EXPECT_LT(losses.back(), losses.front() * 0.97) << losses.front() << " -> " << losses.back();
  auto ckpt = ontrain::LoadCheckpoint(dir + "/checkpoint");
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->optimizer_groups.at("group0").step, 20);
}
