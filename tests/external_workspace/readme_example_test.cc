// The README's C++ example trains: a few steps on artifacts made with ontrain's generator lower the loss,
// and each step's checkpoint is saved. And readme_example.cc holds the README's code, line for line.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>

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

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ReadmeExampleTest, IsTheReadmesCode) {
  const char* runfiles = std::getenv("TEST_SRCDIR");
  ASSERT_NE(runfiles, nullptr);
  std::string readme = Slurp(std::string(runfiles) + "/ontrain/README.md");
  ASSERT_FALSE(readme.empty()) << "README.md not in the runfiles";
  std::string code = Slurp(std::string(runfiles) + "/trainer_project/readme_example.cc");
  size_t b = code.find("// README begin\n"), e = code.find("  // README end");
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  std::istringstream lines(code.substr(b + 16, e - b - 16));
  std::string line, body;
  while (std::getline(lines, line)) body += line.substr(std::min<size_t>(2, line.size())) + "\n";  // one indent less
  EXPECT_NE(readme.find(body), std::string::npos) << "the README's C++ example differs from:\n" << body;
}
