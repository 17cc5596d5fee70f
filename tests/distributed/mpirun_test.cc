// `mpirun -np 2 ontrain train` against one process: the built-in MLP and CNN trained on Fashion-MNIST with
// the same global batch give the same losses and parameters (float32 summation order aside: each rank's
// GEMMs sum over half the batch), also with gradient accumulation; a run stopped and resumed at 2 ranks
// reproduces an uninterrupted one bit for bit; ranks that disagree end together with a clear message, and a
// rank killed mid-run ends the job with the last checkpoint intact.
//
// Skips, saying why, where mpirun or the MPI communicator library is missing.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& path) {
  const char* root = std::getenv("TEST_SRCDIR");
  return std::string(root ? root : ".") + "/ontrain/" + path;
}

bool Exists(const std::string& p) { return std::ifstream(p).good(); }

// Runs `cmd` through the shell; returns its exit status and fills `output` with stdout and stderr.
int Shell(const std::string& cmd, std::string* output) {
  std::FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  output->clear();
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output->append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class MpirunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out;
    if (Shell("command -v mpirun", &out) != 0) {
      GTEST_SKIP() << "mpirun is not installed (tools/setup.sh installs openmpi-bin)";
    }
    if (!Exists(Runfile("distributed/mpi/libontrain_mpi.so"))) {
      GTEST_SKIP() << "this build has no MPI communicator library (Open MPI's headers were missing at build time)";
    }
    ontrain_ = Runfile("tools/ontrain");
    dir_ = ::testing::TempDir() + "/dp_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ASSERT_EQ(Shell("rm -rf " + dir_ + " && mkdir -p " + dir_, &out), 0) << out;
  }

  std::string Mpirun(int np) const {
    // Root is allowed (CI runs as root); --oversubscribe, since the launcher may count fewer slots than
    // ranks; shared memory and loopback TCP only. Under --config=asan the ranks check memory errors but not
    // leaks: Open MPI's components leave allocations at exit whose frames LeakSanitizer cannot attribute to
    // any module (so no suppression can name them); ontrain's own code in a rank is leak-checked by the
    // in-process data-parallel tests.
    return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,vader,tcp "
           "OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=detect_leaks=0:detect_odr_violation=0 "
           "mpirun --oversubscribe -np " + std::to_string(np) + " ";
  }

  void Generate(const std::string& model) {
    std::string out;
    ASSERT_EQ(Shell(ontrain_ + " generate --builtin " + model + " --out " + dir_ + "/" + model, &out), 0) << out;
  }

  // Trains; returns the losses of the metrics file.
  std::vector<double> Train(const std::string& launcher, const std::string& model, const std::string& run,
                            const std::string& extra, std::string* output = nullptr) {
    std::string out;
    std::string cmd = launcher + ontrain_ + " train --artifacts " + dir_ + "/" + model + " --out " + dir_ + "/" + run +
                      " --metrics " + dir_ + "/" + run + ".jsonl --no-shuffle --threads 1 " + extra;
    int rc = Shell(cmd, &out);
    if (output) *output = out;
    EXPECT_EQ(rc, 0) << cmd << "\n" << out;
    std::vector<double> losses;
    std::ifstream in(dir_ + "/" + run + ".jsonl");
    std::string line;
    while (std::getline(in, line)) {
      size_t k = line.find("\"loss\":");
      if (k != std::string::npos) losses.push_back(std::atof(line.c_str() + k + 7));
    }
    return losses;
  }

  CheckpointState Load(const std::string& run) {
    auto s = LoadCheckpoint(dir_ + "/" + run + "/checkpoint");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(s).value() : CheckpointState();
  }

  // Losses within `rel` and parameters within `abs_tol` of each other.
  void ExpectSameTraining(const std::string& a, const std::vector<double>& la, const std::string& b,
                          const std::vector<double>& lb, double rel, double abs_tol) {
    ASSERT_EQ(la.size(), lb.size());
    ASSERT_FALSE(la.empty());
    for (size_t i = 0; i < la.size(); ++i) EXPECT_NEAR(la[i], lb[i], rel * std::fabs(la[i])) << "step " << i + 1;
    CheckpointState ca = Load(a), cb = Load(b);
    ASSERT_EQ(ca.parameters.size(), cb.parameters.size());
    ASSERT_FALSE(ca.parameters.empty());
    double worst = 0;
    for (const auto& [name, p] : ca.parameters) {
      const Tensor& q = cb.parameters.at(name).data;
      ASSERT_EQ(p.data.NumElements(), q.NumElements()) << name;
      for (int64_t i = 0; i < q.NumElements(); ++i) {
        worst = std::max(worst, static_cast<double>(std::fabs(p.data.data<float>()[i] - q.data<float>()[i])));
      }
    }
    EXPECT_LE(worst, abs_tol) << "largest parameter difference between " << a << " and " << b;
    EXPECT_EQ(ca.optimizer_groups.at("group0").step, cb.optimizer_groups.at("group0").step);
  }

  std::string ontrain_, dir_;
};

// Tolerances: 20 AdamW steps from the same start, the gradients differing only in summation order.
constexpr double kLossRel = 1e-5, kParamAbs = 2e-5;

TEST_F(MpirunTest, MlpTwoRanksMatchOneProcessWithTheSameGlobalBatch) {
  Generate("mlp");
  std::vector<double> one = Train("", "mlp", "one", "--steps 20 --batch-size 64");
  std::string out;
  std::vector<double> two = Train(Mpirun(2), "mlp", "two", "--steps 20 --batch-size 64", &out);
  EXPECT_THAT(out, HasSubstr("data parallel over MPI: 2 ranks, 32 examples of each batch per rank"));
  EXPECT_THAT(out, HasSubstr("gradient all-reduce: 20 steps"));
  // 0.8 MB of gradients: one bucket, started (MPI_Iallreduce) as soon as the backward pass finished it.
  EXPECT_THAT(out, HasSubstr("in 1 buckets, 1 of them started during the backward pass"));
  ExpectSameTraining("one", one, "two", two, kLossRel, kParamAbs);
}

TEST_F(MpirunTest, MlpWithGradientAccumulation) {
  Generate("mlp");
  std::vector<double> one = Train("", "mlp", "one", "--steps 20 --batch-size 32 --accumulate 3");
  std::vector<double> two = Train(Mpirun(2), "mlp", "two", "--steps 20 --batch-size 32 --accumulate 3");
  ExpectSameTraining("one", one, "two", two, kLossRel, kParamAbs);
  // Small buckets averaged during the backward pass, or all after it: the same bits.
  std::vector<double> small = Train(Mpirun(2), "mlp", "small", "--steps 20 --batch-size 32 --accumulate 3 --bucket-kb 64");
  std::vector<double> after = Train(Mpirun(2), "mlp", "after", "--steps 20 --batch-size 32 --accumulate 3 --no-overlap");
  ExpectSameTraining("two", two, "small", small, 0, 0);
  ExpectSameTraining("two", two, "after", after, 0, 0);
}

TEST_F(MpirunTest, CnnTwoRanksMatchOneProcessWithTheSameGlobalBatch) {
  Generate("cnn");
  std::vector<double> one = Train("", "cnn", "one", "--steps 20 --batch-size 32");
  std::vector<double> two = Train(Mpirun(2), "cnn", "two", "--steps 20 --batch-size 32");
  ExpectSameTraining("one", one, "two", two, kLossRel, kParamAbs);
}

TEST_F(MpirunTest, ResumedTwoRankRunReproducesAnUninterruptedOne) {
  Generate("mlp");
  std::vector<double> whole = Train(Mpirun(2), "mlp", "whole", "--steps 20 --batch-size 64");
  Train(Mpirun(2), "mlp", "parts", "--steps 20 --batch-size 64 --stop-after 10");
  std::vector<double> parts = Train(Mpirun(2), "mlp", "parts", "--steps 20 --batch-size 64 --resume");
  ExpectSameTraining("whole", whole, "parts", parts, 0, 0);  // bit for bit
}

TEST_F(MpirunTest, RanksThatDisagreeEndTogetherWithAClearMessage) {
  Generate("mlp");
  std::string out;
  ASSERT_EQ(Shell(ontrain_ + " generate --builtin cnn --out " + dir_ + "/cnn", &out), 0) << out;
  // MPMD: rank 1 starts from another model's checkpoint.
  std::string common = " train --steps 5 --batch-size 64 --threads 1 --out " + dir_ + "/bad";
  int rc = Shell(Mpirun(1) + ontrain_ + common + " --artifacts " + dir_ + "/mlp : -np 1 " + ontrain_ + common +
                     " --artifacts " + dir_ + "/cnn",
                 &out);
  EXPECT_NE(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("every rank must start from the same checkpoint")) << out;
}

// The pid of the process whose command line holds `needle` and whose environment says it is rank `rank`.
pid_t FindRank(const std::string& needle, int rank) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return -1;
  pid_t found = -1;
  while (dirent* e = ::readdir(proc)) {
    pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    std::ifstream cmd("/proc/" + std::string(e->d_name) + "/cmdline"), env("/proc/" + std::string(e->d_name) + "/environ");
    std::stringstream c, v;
    c << cmd.rdbuf();
    v << env.rdbuf();
    if (c.str().find(needle) != std::string::npos &&  // only ranks carry OMPI_COMM_WORLD_RANK
        v.str().find("OMPI_COMM_WORLD_RANK=" + std::to_string(rank) + '\0') != std::string::npos) {
      found = pid;
      break;
    }
  }
  ::closedir(proc);
  return found;
}

TEST_F(MpirunTest, AKilledRankEndsTheJobAndTheLastCheckpointSurvives) {
  Generate("mlp");
  const std::string run = dir_ + "/killed";
  std::string cmd = Mpirun(2) + ontrain_ + " train --artifacts " + dir_ + "/mlp --out " + run +
                    " --steps 1000000 --batch-size 64 --threads 1 --checkpoint-every 20 > " + dir_ + "/killed.log 2>&1";
  pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for a checkpoint, then kill rank 1 outright.
  pid_t victim = -1;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && (victim < 0 || !Exists(run + "/checkpoint"))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (victim < 0) victim = FindRank(run, 1);
  }
  ASSERT_GT(victim, 0) << "rank 1 never started";
  ASSERT_TRUE(Exists(run + "/checkpoint")) << "no checkpoint within a minute";
  ASSERT_EQ(::kill(victim, SIGKILL), 0);
  // The launcher must end the job (rank 0 included) by itself.
  int status = 0;
  pid_t done = 0;
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && (done = ::waitpid(launcher, &status, WNOHANG)) == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (done == 0) {
    ::kill(launcher, SIGKILL);
    ::waitpid(launcher, &status, 0);
    ::kill(FindRank(run, 0), SIGKILL);
    FAIL() << "the job did not end within a minute of rank 1's death";
  }
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "mpirun reported success";
  EXPECT_EQ(FindRank(run, 0), -1) << "rank 0 outlived the job";
  auto ckpt = LoadCheckpoint(run + "/checkpoint");
  EXPECT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  std::string out;
  Shell("ls -a " + run, &out);
  EXPECT_THAT(out, ::testing::Not(HasSubstr(".tmp"))) << out;
}

}  // namespace
}  // namespace ontrain
