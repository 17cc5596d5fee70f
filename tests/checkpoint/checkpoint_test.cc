// Checkpoint format: round trips, ONNX Runtime's writing rules, real ONNX Runtime checkpoints, external
// data, every kind of damaged input, and atomic saves under SIGKILL.
#include "checkpoint/checkpoint_io.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>

#include "checkpoint/ort_checkpoint_generated.h"
#include "core/file_io.h"
#include "gmock/gmock.h"
#include "graph/model_io.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }
bool FileExists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

Tensor Filled(const Shape& shape, float start) {
  std::vector<float> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i) * 0.5f;
  return Tensor::FromVector(v, shape);
}

CheckpointState SampleState() {
  CheckpointState s;
  s.AddParameter("fc2.weight", Filled({3, 2}, 1), true);
  s.AddParameter("fc1.bias", Filled({2}, -1), true);
  s.AddParameter("embed", Filled({4}, 7), false);
  OptimizerGroup& g = s.optimizer_groups["group0"];
  g.step = 12;
  g.initial_learning_rate = 0.25f;
  g.param_states["fc2.weight"].momentums["momentum0"] = Filled({3, 2}, 0.1f);
  g.param_states["fc2.weight"].momentums["momentum1"] = Filled({3, 2}, 0.2f);
  g.param_states["fc1.bias"].momentums["momentum0"] = Filled({2}, 0.3f);
  g.param_states["fc1.bias"].momentums["momentum1"] = Filled({2}, 0.4f);
  s.properties.Set("hours in a year", int64_t{365 * 24});
  s.properties.Set("pi", 3.14f);
  s.properties.Set("framework", std::string("onnxruntime"));
  return s;
}

void ExpectSameTensor(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(testing::ToVector(a), testing::ToVector(b));
}

TEST(CheckpointTest, RoundTripEverything) {
  CheckpointState s = SampleState();
  std::string path = TempPath("roundtrip.ckpt");
  ASSERT_TRUE(SaveCheckpoint(s, path).ok());
  auto back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->parameters.size(), 3u);
  for (const auto& [name, p] : s.parameters) {
    ExpectSameTensor(p.data, back->parameters.at(name).data);
    EXPECT_EQ(p.requires_grad, back->parameters.at(name).requires_grad) << name;
  }
  const OptimizerGroup& g = back->optimizer_groups.at("group0");
  EXPECT_EQ(g.step, 12);
  EXPECT_EQ(g.initial_learning_rate, 0.25f);
  ExpectSameTensor(g.param_states.at("fc1.bias").momentums.at("momentum1"), Filled({2}, 0.4f));
  EXPECT_EQ(back->properties.size(), 3u);
  EXPECT_EQ(back->properties.Get<int64_t>("hours in a year").value(), 8760);
  EXPECT_EQ(back->properties.Get<float>("pi").value(), 3.14f);
  EXPECT_EQ(back->properties.Get<std::string>("framework").value(), "onnxruntime");
  EXPECT_FALSE(back->properties.Get<float>("framework").ok());
  EXPECT_FALSE(back->properties.Get<int64_t>("missing").ok());
}

TEST(CheckpointTest, FollowsOnnxRuntimeWritingRules) {
  CheckpointState s = SampleState();
  auto bytes = SerializeCheckpoint(s);
  ASSERT_TRUE(bytes.ok());
  const fbs::Checkpoint* c = fbs::GetCheckpoint(bytes->data());
  EXPECT_EQ(c->version(), 2);
  ASSERT_TRUE(c->module_state()->frozen_params());
  // Trainable parameters sorted by name, frozen ones apart.
  ASSERT_EQ(c->module_state()->requires_grad_params()->size(), 2u);
  EXPECT_EQ(c->module_state()->requires_grad_params()->Get(0)->name()->str(), "fc1.bias");
  EXPECT_EQ(c->module_state()->requires_grad_params()->Get(1)->name()->str(), "fc2.weight");
  EXPECT_EQ(c->module_state()->frozen_params()->Get(0)->name()->str(), "embed");
  EXPECT_EQ(c->property_bag()->ints()->size(), 1u);
  // Without optimizer state the groups vector is present and empty.
  CheckpointSaveOptions no_opt;
  no_opt.include_optimizer_state = false;
  auto b2 = SerializeCheckpoint(s, no_opt);
  const fbs::Checkpoint* c2 = fbs::GetCheckpoint(b2->data());
  ASSERT_TRUE(c2->optimizer_groups());
  EXPECT_EQ(c2->optimizer_groups()->size(), 0u);
  // An empty property bag is omitted; frozen params are present even when empty.
  CheckpointState bare;
  bare.AddParameter("w", Filled({1}, 0), true);
  std::string bare_bytes = SerializeCheckpoint(bare).value();
  const fbs::Checkpoint* c3 = fbs::GetCheckpoint(bare_bytes.data());
  EXPECT_EQ(c3->property_bag(), nullptr);
  ASSERT_TRUE(c3->module_state()->frozen_params());
  EXPECT_EQ(c3->module_state()->frozen_params()->size(), 0u);
}

TEST(CheckpointTest, EveryTruncationIsAnError) {
  CheckpointState s = SampleState();
  std::string bytes = SerializeCheckpoint(s).value();
  int loaded = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = LoadCheckpointFromBuffer(bytes.data(), n);
    if (!r.ok()) continue;
    // Only the builder's trailing alignment padding may be cut without losing anything.
    loaded++;
    EXPECT_GE(n + 8, bytes.size()) << "prefix of " << n << " bytes loaded";
    ExpectSameTensor(r->parameters.at("fc2.weight").data, s.parameters.at("fc2.weight").data);
  }
  EXPECT_LE(loaded, 7);
  EXPECT_TRUE(LoadCheckpointFromBuffer(bytes.data(), bytes.size()).ok());
}

TEST(CheckpointTest, CorruptBytesNeverCrash) {
  std::string bytes = SerializeCheckpoint(SampleState()).value();
  std::mt19937 rng(1);
  int errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = bytes;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    auto r = LoadCheckpointFromBuffer(bad.data(), bad.size());
    errors += !r.ok();
  }
  EXPECT_GT(errors, 0);
}

TEST(CheckpointTest, WrongIdentifierAndVersion) {
  std::string bytes = SerializeCheckpoint(SampleState()).value();
  std::string wrong = bytes;
  wrong[4] = 'X';
  auto r = LoadCheckpointFromBuffer(wrong.data(), wrong.size());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("ODTC"));
  // Patch the version field in place to 3.
  std::string v3 = bytes;
  auto* c = fbs::GetMutableCheckpoint(&v3[0]);
  ASSERT_TRUE(c->mutate_version(3));
  auto r3 = LoadCheckpointFromBuffer(v3.data(), v3.size());
  ASSERT_FALSE(r3.ok());
  EXPECT_THAT(r3.status().message(), HasSubstr("version 3 is not supported"));
  auto missing = LoadCheckpoint("/nonexistent/checkpoint");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/checkpoint"));
}

TEST(CheckpointTest, ExternalDataRoundTrip) {
  CheckpointState s = SampleState();
  CheckpointSaveOptions opt;
  opt.external_data_threshold = 16;  // everything goes to the side file
  std::string path = TempPath("external.ckpt");
  ASSERT_TRUE(SaveCheckpoint(s, path, opt).ok());
  std::ifstream side(ExternalCheckpointDataPath(path), std::ios::binary | std::ios::ate);
  ASSERT_TRUE(side.good());
  EXPECT_GE(static_cast<int64_t>(side.tellg()), 4 * (6 + 2 + 4 + 6 + 6 + 2 + 2));
  auto back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameTensor(back->parameters.at("fc2.weight").data, Filled({3, 2}, 1));
  ExpectSameTensor(back->optimizer_groups.at("group0").param_states.at("fc2.weight").momentums.at("momentum1"),
                   Filled({3, 2}, 0.2f));
  std::remove(ExternalCheckpointDataPath(path).c_str());
  auto gone = LoadCheckpoint(path);
  ASSERT_FALSE(gone.ok());
  EXPECT_THAT(gone.status().message(), HasSubstr(".data"));
}

// A save interrupted between its two renames leaves the previous main file beside the new data file: the
// fingerprint property refuses the pair (instead of reading tensors at the old offsets), and it is not shown
// as one of the state's properties.
TEST(CheckpointTest, ExternalDataFromAnotherSaveIsRefused) {
  CheckpointSaveOptions opt;
  opt.external_data_threshold = 16;
  CheckpointState a = SampleState();
  a.properties.Set("epoch", int64_t{3});
  std::string path = TempPath("external_pair.ckpt"), other = TempPath("external_other.ckpt");
  ASSERT_TRUE(SaveCheckpoint(a, path, opt).ok());
  auto back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->properties.size(), a.properties.size()) << "the fingerprint is not one of the user's properties";
  // Another save of the same layout with different values: same size, different bytes.
  CheckpointState b = SampleState();
  b.parameters.at("fc2.weight").data = Filled({3, 2}, 7);
  ASSERT_TRUE(SaveCheckpoint(b, other, opt).ok());
  ASSERT_EQ(std::rename(ExternalCheckpointDataPath(other).c_str(), ExternalCheckpointDataPath(path).c_str()), 0);
  auto mixed = LoadCheckpoint(path);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(mixed.status().message(), HasSubstr("does not belong to this checkpoint"));
  EXPECT_THAT(mixed.status().message(), HasSubstr("interrupted"));
  // Saving the loaded state again writes a fresh fingerprint (not the loaded one).
  ASSERT_TRUE(SaveCheckpoint(back.value(), path, opt).ok());
  ASSERT_TRUE(LoadCheckpoint(path).ok());
}

// What SaveCheckpoint leaves when it is killed between its two renames: the previous main file, the new
// data file, and the previous data file kept as "<path>.data.prev". The previous checkpoint loads whole.
// A save that fails (full disk) leaves the previous pair and no ".prev" behind.
TEST(CheckpointTest, ExternalDataSaveInterruptedBetweenRenamesKeepsThePreviousCheckpoint) {
  CheckpointSaveOptions opt;
  opt.external_data_threshold = 16;
  std::string path = TempPath("external_window.ckpt"), other = TempPath("external_window_b.ckpt");
  std::string data = ExternalCheckpointDataPath(path), prev = data + ".prev";
  CheckpointState a = SampleState();
  ASSERT_TRUE(SaveCheckpoint(a, path, opt).ok());
  EXPECT_FALSE(FileExists(prev)) << "a completed save leaves no .prev";
  ASSERT_TRUE(SaveCheckpoint(a, path, opt).ok());  // over an existing pair too
  EXPECT_FALSE(FileExists(prev));
  CheckpointState b = SampleState();
  b.parameters.at("fc2.weight").data = Filled({3, 2}, 7);
  ASSERT_TRUE(SaveCheckpoint(b, other, opt).ok());
  ASSERT_EQ(::link(data.c_str(), prev.c_str()), 0);
  ASSERT_EQ(std::rename(ExternalCheckpointDataPath(other).c_str(), data.c_str()), 0);
  auto back = LoadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameTensor(back->parameters.at("fc2.weight").data, Filled({3, 2}, 1));
  // The next save completes the pair and drops the stale .prev.
  ASSERT_TRUE(SaveCheckpoint(b, path, opt).ok());
  EXPECT_FALSE(FileExists(prev));
  ExpectSameTensor(LoadCheckpoint(path)->parameters.at("fc2.weight").data, Filled({3, 2}, 7));
  // A full disk while writing the data file: an error, the previous checkpoint (b) intact, no .prev.
  WriteFaultsForTesting full;
  full.fail_after_bytes = 0;
  SetWriteFaultsForTesting(&full);
  Status failed = SaveCheckpoint(a, path, opt);
  SetWriteFaultsForTesting(nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(FileExists(prev));
  ExpectSameTensor(LoadCheckpoint(path)->parameters.at("fc2.weight").data, Filled({3, 2}, 7));
  // A full disk while writing the main file, after the new data file is in place (the fault fails any file
  // larger than the data file, and the main file is larger): the previous data file is put back.
  std::string data_bytes = ReadFileToString(data).value(), main_bytes = ReadFileToString(path).value();
  ASSERT_GT(main_bytes.size(), data_bytes.size());
  full.fail_after_bytes = static_cast<int64_t>(data_bytes.size());
  SetWriteFaultsForTesting(&full);
  failed = SaveCheckpoint(a, path, opt);
  SetWriteFaultsForTesting(nullptr);
  ASSERT_FALSE(failed.ok());
  EXPECT_FALSE(FileExists(prev));
  EXPECT_EQ(ReadFileToString(data).value(), data_bytes) << "the previous data file is back";
  ExpectSameTensor(LoadCheckpoint(path)->parameters.at("fc2.weight").data, Filled({3, 2}, 7));
}

TEST(CheckpointTest, StringTensorsAreRejected) {
  CheckpointState s;
  s.AddParameter("w", Tensor::View(DType::kString, {1}, nullptr), true);
  auto r = SerializeCheckpoint(s);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("\"w\""));
}

// A child process saves alternating checkpoints of ~24 MB in a loop; the parent kills it at random points.
// The file on disk must always load, with one version's values throughout.
TEST(CheckpointTest, SaveIsAtomicUnderSigkill) {
  std::string path = TempPath("atomic.ckpt");
  const int64_t n = 6 * 1000 * 1000;
  auto make = [&](float v) {
    CheckpointState s;
    s.AddParameter("big", Tensor::FromVector(std::vector<float>(n, v), {n}), true);
    return s;
  };
  ASSERT_TRUE(SaveCheckpoint(make(1.0f), path).ok());
  std::mt19937 rng(7);
  for (int trial = 0; trial < 6; ++trial) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int i = 0;; ++i) (void)SaveCheckpoint(make(i % 2 ? 2.0f : 3.0f), path);
    }
    usleep(20000 + rng() % 200000);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    auto s = LoadCheckpoint(path);
    ASSERT_TRUE(s.ok()) << "trial " << trial << ": " << s.status().ToString();
    const Tensor& t = s->parameters.at("big").data;
    ASSERT_EQ(t.NumElements(), n);
    float first = t.data<float>()[0];
    EXPECT_EQ(t.data<float>()[n - 1], first);
    EXPECT_EQ(t.data<float>()[n / 2], first);
  }
}

// ONNX Runtime's own checkpoints, when ../shared/ort-artifacts is available.
TEST(CheckpointTest, ReadsOnnxRuntimeCheckpoints) {
  const char* dir = std::getenv("ONTRAIN_ORT_ARTIFACTS");
  if (dir == nullptr || std::ifstream(std::string(dir) + "/ort-testdata-mlp/checkpoint").fail()) {
    GTEST_SKIP() << "ONNX Runtime artifact sets not found (set ONTRAIN_ORT_ARTIFACTS; tools/test.sh does when "
                    "../shared/ort-artifacts exists)";
  }
  std::string root = dir;
  auto v2 = LoadCheckpoint(root + "/ort-testdata-mlp/checkpoint");
  ASSERT_TRUE(v2.ok()) << v2.status().ToString();
  int64_t total = 0;
  for (const auto& kv : v2->parameters) total += kv.second.data.NumElements();
  EXPECT_EQ(total, 397510);
  EXPECT_EQ(v2->parameters.at("fc1.weight").data.shape(), (Shape{500, 784}));
  auto v1 = LoadCheckpoint(root + "/carzh-web-mnist/checkpoint");
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->parameters.size(), 4u);
  auto nominal = LoadCheckpoint(root + "/ort-testdata-mlp/nominal_checkpoint");
  ASSERT_TRUE(nominal.ok()) << nominal.status().ToString();
  EXPECT_TRUE(nominal->is_nominal);
  EXPECT_EQ(nominal->parameters.size(), 4u);
  auto frozen = LoadCheckpoint(root + "/seizureguard-cnn1d/checkpoint");
  ASSERT_TRUE(frozen.ok());
  int trainable = 0;
  for (const auto& kv : frozen->parameters) trainable += kv.second.requires_grad;
  EXPECT_EQ(trainable, 4);
  EXPECT_EQ(frozen->parameters.size(), 10u);
  // Re-saving an ONNX Runtime checkpoint and reading it back keeps every byte of every tensor.
  std::string path = TempPath("resaved.ckpt");
  ASSERT_TRUE(SaveCheckpoint(v2.value(), path).ok());
  auto again = LoadCheckpoint(path);
  ASSERT_TRUE(again.ok());
  for (const auto& kv : v2->parameters) ExpectSameTensor(kv.second.data, again->parameters.at(kv.first).data);
}

}  // namespace
}  // namespace ontrain
