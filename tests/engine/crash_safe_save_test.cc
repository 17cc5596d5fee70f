// Saves survive faults: a process SIGKILLed in a loop while it saves checkpoints, exported models, the
// metrics log and reports always leaves the previous files whole and loadable (and the log whole lines), and its temporary files are removed by the
// next save; a full disk or a read-only folder (simulated through core/file_io's test hook, since tests may
// run as root, which ignores folder permissions) is an error naming the path and the reason, and the
// previous checkpoint survives with its values.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "core/file_io.h"
#include "engine/training_session.h"
#include "gmock/gmock.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tools/cli/report.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = d ? ::readdir(d) : nullptr) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  if (d) ::closedir(d);
  return out;
}

std::vector<std::string> Temporaries(const std::string& dir) {
  std::vector<std::string> out;
  for (const std::string& n : FilesIn(dir)) if (n.find(".tmp.") != std::string::npos) out.push_back(n);
  return out;
}

class CrashSafeSaveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = GenerateArtifacts(MakeMlpClassifier(16, {32}, 4, 7), ArtifactOptions());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    artifacts_ = ::testing::TempDir() + "/crash_safe_artifacts";
    ASSERT_TRUE(WriteArtifacts(a.value(), artifacts_).ok());
  }

  // Trains and saves forever: checkpoint (with the step as a property), exported model, metrics CSV and
  // chart, each after every step, into `dir`. Runs in a forked child until killed.
  [[noreturn]] void SaveForever(const std::string& dir, int ready_fd = -1) {
    CpuProviderOptions o;
    o.intra_op_threads = 1;
    auto cpu = CpuExecutionProvider::Create(o).value();
    CheckpointState state = LoadCheckpoint(artifacts_ + "/checkpoint").value();
    auto s = TrainingSession::Create({{cpu.get()}}, &state, ModelSource::FromPath(artifacts_ + "/training_model.onnx"),
                                     ModelSource::FromPath(artifacts_ + "/eval_model.onnx"),
                                     ModelSource::FromPath(artifacts_ + "/optimizer_model.onnx"));
    if (!s.ok()) ::_exit(3);
    std::vector<float> x(8 * 16, 0.25f);
    std::vector<int64_t> labels(8, 1);
    std::vector<cli::EpochRecord> records;
    std::vector<cli::StepLoss> losses;
    cli::MetricsLog log;  // appended across the killed processes, as `ontrain train --resume` does
    if (!log.Open(dir + "/metrics.jsonl", true).ok()) ::_exit(11);
    for (int64_t step = 1;; ++step) {
      std::vector<Tensor> out;
      if (!s.value()->TrainStep({Tensor::FromVector(x, {8, 16}), Tensor::FromVector(labels, {8})}, &out).ok()) ::_exit(4);
      if (!s.value()->OptimizerStep().ok()) ::_exit(5);
      s.value()->LazyResetGrad();
      state.properties.Set("saved_step", step);
      if (!SaveCheckpoint(state, dir + "/checkpoint").ok()) ::_exit(6);
      if (!s.value()->ExportModelForInferencing(dir + "/inference.onnx", {"logits"}).ok()) ::_exit(7);
      if (!log.Write("\"step\":" + std::to_string(step) + ",\"loss\":" + cli::MetricsLog::Number(1.0 / step)).ok()) ::_exit(12);
      records.push_back({step, 1.0 / step, -1, -1, step});
      losses.push_back({step, 1.0 / step});
      if (!cli::WriteMetricsCsv(records, dir + "/metrics.csv").ok()) ::_exit(8);
      if (!cli::WriteChartSvg(losses, records, dir + "/training.svg").ok()) ::_exit(9);
      // After the first round of saves (the first step is the slow one: memory planning), the parent
      // starts its clock.
      if (step == 1 && ready_fd >= 0 && ::write(ready_fd, "r", 1) != 1) ::_exit(10);
    }
  }

  std::string artifacts_;
};

TEST_F(CrashSafeSaveTest, SigkillDuringSavesLeavesThePreviousFilesWhole) {
  const std::string dir = ::testing::TempDir() + "/crash_safe_kill";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  std::mt19937 rng(12345);
  int64_t last_step = 0;
  int kills = 0, kills_with_temporaries = 0;
  for (int round = 0; round < 60; ++round) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) SaveForever(dir, ready[1]);
    ::close(ready[1]);
    char byte;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the saving child failed before its first round of saves";
    ::close(ready[0]);
    // A step and its four saves (each with two fsyncs) take a few milliseconds: kills land before, inside
    // and between the saves of every file.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30000));
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the saving child exited by itself with " << WEXITSTATUS(status);
    kills++;
    if (!Temporaries(dir).empty()) kills_with_temporaries++;
    if (FilesIn(dir).empty()) continue;  // killed before its first save
    SCOPED_TRACE("after kill " + std::to_string(kills));
    auto state = LoadCheckpoint(dir + "/checkpoint");
    ASSERT_TRUE(state.ok()) << state.status().ToString();
    auto step = state->properties.Get<int64_t>("saved_step");
    ASSERT_TRUE(step.ok());
    EXPECT_GE(step.value(), 1);
    last_step = step.value();
    // Each file is saved after the one before it: whatever exists is whole.
    std::ifstream model_file(dir + "/inference.onnx");
    if (model_file.good()) {
      auto model = LoadModel(dir + "/inference.onnx");
      EXPECT_TRUE(model.ok()) << model.status().ToString();
    }
    auto csv = ReadFileToString(dir + "/metrics.csv");
    if (csv.ok()) {
      EXPECT_EQ(csv->rfind("epoch,train_loss,eval_loss,accuracy\n", 0), 0u);
      EXPECT_EQ(csv->back(), '\n');
    }
    auto jsonl = ReadFileToString(dir + "/metrics.jsonl");
    if (jsonl.ok() && !jsonl->empty()) {
      EXPECT_EQ(jsonl->back(), '\n') << "a metrics line was cut";
      size_t lines = 0;
      for (size_t at = 0; at < jsonl->size(); at = jsonl->find('\n', at) + 1, ++lines) {
        std::string line = jsonl->substr(at, jsonl->find('\n', at) - at);
        ASSERT_TRUE(line.rfind("{\"step\":", 0) == 0 && line.back() == '}') << "torn metrics line: " << line;
      }
      EXPECT_GT(lines, 0u);
    }
    auto svg = ReadFileToString(dir + "/training.svg");
    if (svg.ok()) {
      EXPECT_NE(svg->find("</svg>"), std::string::npos);
    }
  }
  EXPECT_GT(last_step, 0) << "no kill came after a first save: the timing above is off";
  // Temporaries of killed processes never stay: the next save to each path removes them.
  {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) SaveForever(dir, ready[1]);
    ::close(ready[1]);
    char byte;
    ASSERT_EQ(::read(ready[0], &byte, 1), 1);  // it has saved every file once
    ::close(ready[0]);
    ::kill(pid, SIGSTOP);  // between saves or inside one: its own temporaries may exist, others' may not
    for (const std::string& t : Temporaries(dir)) {
      EXPECT_NE(t.find(".tmp." + std::to_string(pid) + "."), std::string::npos) << t << " outlived its process";
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  std::printf("%d kills, %d of them left a temporary file (removed by the next save); last saved step %lld\n", kills,
              kills_with_temporaries, static_cast<long long>(last_step));
}

TEST_F(CrashSafeSaveTest, FullDiskAndReadOnlyFolderKeepThePreviousCheckpoint) {
  const std::string dir = ::testing::TempDir() + "/crash_safe_faults";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  CheckpointState state = LoadCheckpoint(artifacts_ + "/checkpoint").value();
  const std::string path = dir + "/checkpoint";
  ASSERT_TRUE(SaveCheckpoint(state, path).ok());
  const std::string before = ReadFileToString(path).value();
  // Change every parameter, then fail the save in each way.
  for (auto& [name, p] : state.parameters) {
    for (int64_t i = 0; i < p.data.NumElements(); ++i) p.data.data<float>()[i] += 1.0f;
  }
  struct Case {
    const char* what;
    WriteFaultsForTesting faults;
    const char* message;
  };
  std::vector<Case> cases = {
      {"full disk at once", {0, 0, ENOSPC}, "No space left on device"},
      {"full disk halfway", {0, static_cast<int64_t>(before.size() / 2), ENOSPC}, "No space left on device"},
      {"read-only folder", {EROFS, -1, ENOSPC}, "Read-only file system"},
      {"permission denied", {EACCES, -1, ENOSPC}, "Permission denied"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    SetWriteFaultsForTesting(&c.faults);
    Status s = SaveCheckpoint(state, path);
    SetWriteFaultsForTesting(nullptr);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.ToString(), HasSubstr(path));
    EXPECT_THAT(s.ToString(), HasSubstr(c.message));
    EXPECT_EQ(ReadFileToString(path).value(), before) << "the previous checkpoint changed";
    EXPECT_TRUE(LoadCheckpoint(path).ok());
    EXPECT_TRUE(Temporaries(dir).empty()) << Temporaries(dir)[0];
  }
  // And with the fault gone, the save goes through.
  ASSERT_TRUE(SaveCheckpoint(state, path).ok());
  EXPECT_NE(ReadFileToString(path).value(), before);
  // A folder that does not exist is the same kind of error.
  Status missing = SaveCheckpoint(state, dir + "/no/such/folder/checkpoint");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.ToString(), HasSubstr("No such file or directory"));
}

TEST_F(CrashSafeSaveTest, StaleTemporariesOfDeadProcessesAreRemoved) {
  const std::string dir = ::testing::TempDir() + "/crash_safe_stale";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  // A pid that ran and exited, and this process's own pid (alive: its temporaries are left alone).
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = dir + "/report.csv.tmp." + std::to_string(dead) + ".0";
  const std::string live = dir + "/report.csv.tmp." + std::to_string(::getpid()) + ".999";
  std::ofstream(stale) << "torn";
  std::ofstream(live) << "in progress";
  ASSERT_TRUE(WriteFileAtomically(dir + "/report.csv", "a,b\n").ok());
  EXPECT_FALSE(std::ifstream(stale).good()) << "a dead process's temporary file survived the next save";
  EXPECT_TRUE(std::ifstream(live).good()) << "a running process's temporary file was removed";
  EXPECT_EQ(ReadFileToString(dir + "/report.csv").value(), "a,b\n");
}

}  // namespace
}  // namespace ontrain
