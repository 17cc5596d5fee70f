// `ontrain generate` and `ontrain train` end to end on a small synthetic image set written as IDX files,
// plus the CLI's bad-input errors. `ontrain bench`: bench_cli_test.cc.
#include <sys/stat.h>
#include <zlib.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <csignal>
#include <thread>
#include <fstream>
#include <sstream>

#include "checkpoint/checkpoint_io.h"
#include "gmock/gmock.h"
#include "graph/builder.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "tools/cli/commands.h"
#include "tools/cli/dataset.h"
#include "tools/cli/npz.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::string Tmp(const std::string& name) {
  std::string p = ::testing::TempDir() + "/" + name;
  ::mkdir(p.c_str(), 0755);
  return p;
}

void WriteGz(const std::string& path, const std::string& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), static_cast<int>(bytes.size()));
  gzclose(f);
}

void PutBe(std::string* s, uint32_t v) {
  for (int k = 3; k >= 0; --k) s->push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

// `count` 28x28 images: class c lights rows 2c..2c+2, with noise; files named like Fashion-MNIST's.
void WriteSplit(const std::string& dir, const std::string& split, int count, uint32_t seed) {
  std::string img, lab;
  PutBe(&img, 0x803);
  PutBe(&img, count);
  PutBe(&img, 28);
  PutBe(&img, 28);
  PutBe(&lab, 0x801);
  PutBe(&lab, count);
  uint32_t r = seed;
  for (int i = 0; i < count; ++i) {
    int c = i % 10;
    lab.push_back(static_cast<char>(c));
    for (int p = 0; p < 28 * 28; ++p) {
      r = r * 1664525u + 1013904223u;
      int row = p / 28;
      int v = (row >= 2 * c && row < 2 * c + 3) ? 200 : 0;
      img.push_back(static_cast<char>(std::min(255, v + static_cast<int>(r >> 27))));
    }
  }
  WriteGz(dir + "/" + split + "-images-idx3-ubyte.gz", img);
  WriteGz(dir + "/" + split + "-labels-idx1-ubyte.gz", lab);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    data_ = Tmp("cli_data");
    WriteSplit(data_, "train", 640, 1);
    WriteSplit(data_, "t10k", 200, 2);
  }
  std::string data_;
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// generate names, in one warning, every op of the models that the CPU provider has no kernel for (here an
// output computed by Det, off the gradient's path).
TEST(CliGenerateTest, WarnsOfOpsWithoutACpuKernel) {
  Model m = MakeMlpClassifier(4, {}, 3, 1);
  m.graph.AddInitializer("mats", Tensor::FromVector<float>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2}));
  m.graph.nodes.push_back(MakeNode("Det", {"mats"}, {"dets"}, {}, "det"));
  m.graph.outputs.push_back(TensorInfo("dets", DType::kFloat32, {2}));
  const std::string model = ::testing::TempDir() + "/det_model.onnx";
  ASSERT_TRUE(SaveModel(m, model).ok());
  ::testing::internal::CaptureStdout();
  Status g = cli::Generate({"--model", model, "--out", ::testing::TempDir() + "/det_artifacts"});
  const std::string said = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(g.ok()) << g.ToString();
  EXPECT_THAT(said, HasSubstr("warning: the CPU provider has no kernel for 1 op of these models: Det-"));
  EXPECT_THAT(said, HasSubstr("(\"det\")"));
}

TEST_F(CliTest, GenerateTrainEvaluateExport) {
  std::string dir = Tmp("cli_mlp");
  ::testing::internal::CaptureStdout();
  Status g = cli::Generate({"--builtin", "mlp", "--out", dir, "--extra-outputs", "logits"});
  const std::string said = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(g.ok()) << g.ToString();
  // generate says which initializers it made parameters, and how to change that
  EXPECT_THAT(said, HasSubstr("trainable: 4 initializers"));
  EXPECT_THAT(said, HasSubstr("fc1.weight, fc1.bias, fc2.weight, fc2.bias"));
  EXPECT_THAT(said, HasSubstr("--requires-grad a,b trains exactly the named initializers"));
  std::string metrics = dir + "/metrics.jsonl", exported = dir + "/inference.onnx";
  Status t = cli::Train({"--artifacts", dir, "--data", "fashion-mnist", "--data-root", data_, "--epochs", "2",
                         "--batch-size", "32", "--lr", "3e-3", "--metrics", metrics, "--export", exported});
  ASSERT_TRUE(t.ok()) << t.ToString();
  std::string m = Slurp(metrics);
  EXPECT_THAT(m, HasSubstr("{\"step\":1,\"loss\":"));
  EXPECT_THAT(m, HasSubstr("{\"step\":40,\"loss\":"));
  EXPECT_THAT(m, HasSubstr("{\"epoch\":2,\"eval_loss\":"));
  size_t acc = m.rfind("\"accuracy\":");
  ASSERT_NE(acc, std::string::npos);
  EXPECT_GT(std::stod(m.substr(acc + 11)), 0.9) << "the synthetic classes are easy to separate";
  auto ckpt = LoadCheckpoint(dir + "/run/checkpoint");
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->optimizer_groups.at("group0").step, 40);
  EXPECT_FALSE(LoadCheckpoint(dir + "/checkpoint")->optimizer_groups.count("group0"))
      << "the artifacts' own checkpoint stays the starting point";
  auto inf = LoadModel(exported);
  ASSERT_TRUE(inf.ok());
  EXPECT_EQ(inf->graph.inputs.size(), 1u);
}

std::vector<std::string> StepLosses(const std::string& metrics) {
  std::vector<std::string> out;
  std::istringstream in(Slurp(metrics));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("{\"step\":", 0) == 0) out.push_back(line);
  }
  return out;
}

TEST_F(CliTest, ResumeReproducesAnUninterruptedRunBitForBit) {
  std::string a = Tmp("cli_resume_a"), b = Tmp("cli_resume_b");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", a}).ok());
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", b}).ok());
  std::vector<std::string> common = {"--data-root", data_, "--batch-size", "32", "--lr", "3e-3", "--scheduler",
                                     "cosine", "--warmup", "5", "--seed", "7"};
  auto run = [&](const std::string& dir, const std::string& stop_after, bool resume) {
    std::vector<std::string> args = {"--artifacts", dir, "--steps", "50", "--metrics", dir + "/metrics.jsonl"};
    if (!stop_after.empty()) {
      args.push_back("--stop-after");
      args.push_back(stop_after);
    }
    args.insert(args.end(), common.begin(), common.end());
    if (resume) args.push_back("--resume");
    return cli::Train(args);
  };
  ASSERT_TRUE(run(a, "", false).ok());
  ASSERT_TRUE(run(b, "23", false).ok());  // stops mid-epoch (20 steps per epoch)
  // What a run killed 3 steps after its last checkpoint leaves in the log: steps the resumed run repeats,
  // and a partial line. Resuming cuts them.
  std::ofstream(b + "/metrics.jsonl", std::ios::app) << "{\"step\":24,\"loss\":9,\"lr\":1}\n{\"step\":25,\"loss\":9,\"lr\":1}\n"
                                                     << "{\"epoch\":2,\"eval_loss\":9,\"accuracy\":null}\n{\"step\":26,\"lo";
  Status r = run(b, "", true);
  ASSERT_TRUE(r.ok()) << r.ToString();
  std::vector<std::string> la = StepLosses(a + "/metrics.jsonl"), lb = StepLosses(b + "/metrics.jsonl");
  ASSERT_EQ(la.size(), 50u);
  EXPECT_EQ(la, lb);  // step, loss and learning rate printed with 9 significant digits; no step twice
  EXPECT_EQ(Slurp(b + "/metrics.jsonl").find("\"loss\":9,"), std::string::npos) << "the killed run's later steps were cut";
  EXPECT_EQ(Slurp(a + "/run/checkpoint"), Slurp(b + "/run/checkpoint")) << "identical final state, byte for byte";
  EXPECT_THAT(Slurp(a + "/run/metrics.csv"), HasSubstr("epoch,train_loss,eval_loss,accuracy"));
  // The report covers the whole run: the epoch finished before the interruption, and each epoch's mean
  // training loss over all its steps (the checkpoint carries the history).
  const std::string csv = Slurp(b + "/run/metrics.csv");
  EXPECT_EQ(Slurp(a + "/run/metrics.csv"), csv);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;  // the header and three epochs
  // And the chart: the steps before the interruption come back from the metrics log (9 significant digits,
  // which the chart's 0.01-pixel coordinates do not resolve).
  EXPECT_EQ(Slurp(a + "/run/training.svg"), Slurp(b + "/run/training.svg"));
  // A finished run extended to more steps (--resume with a larger --steps; a constant learning rate, as a
  // schedule's length is --steps) reports as one run too, the epoch it ended inside included.
  std::string c = Tmp("cli_extend_c"), d = Tmp("cli_extend_d");
  for (const std::string& dir : {c, d}) ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  auto constant = [&](const std::string& dir, const char* steps, bool resume) {
    std::vector<std::string> args = {"--artifacts", dir, "--steps", steps, "--data-root", data_, "--batch-size", "32",
                                     "--lr", "3e-3", "--seed", "7"};
    if (resume) args.push_back("--resume");
    return cli::Train(args);
  };
  ASSERT_TRUE(constant(d, "50", false).ok());
  ASSERT_TRUE(constant(c, "30", false).ok());
  ASSERT_TRUE(constant(c, "50", true).ok());
  EXPECT_EQ(Slurp(d + "/run/checkpoint"), Slurp(c + "/run/checkpoint"));
  EXPECT_EQ(Slurp(d + "/run/metrics.csv"), Slurp(c + "/run/metrics.csv"));
  EXPECT_THAT(Slurp(a + "/run/training.svg"), HasSubstr("<svg"));
}

TEST_F(CliTest, SigintSavesACheckpointAndStops) {
  std::string dir = Tmp("cli_sigint");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  // SIGINT once training has started (the handler is installed for the training loop only): when the metrics
  // log has its first line. A fixed delay raced the setup in slow (sanitizer) builds.
  const std::string metrics = dir + "/sigint_metrics.jsonl";
  std::thread killer([metrics] {
    for (int i = 0; i < 6000 && Slurp(metrics).find('\n') == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::raise(SIGINT);
  });
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "100000", "--batch-size", "32",
                         "--metrics", metrics});
  killer.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(cli::InterruptedBySignal());
  auto ckpt = LoadCheckpoint(dir + "/run/checkpoint");
  ASSERT_TRUE(ckpt.ok());
  int64_t step = ckpt->optimizer_groups.at("group0").step;
  EXPECT_GT(step, 0);
  EXPECT_LT(step, 100000);
  // And it resumes from there.
  Status r = cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", std::to_string(step + 3), "--batch-size",
                         "32", "--resume"});
  ASSERT_TRUE(r.ok()) << r.ToString();
  EXPECT_FALSE(cli::InterruptedBySignal());
  EXPECT_EQ(LoadCheckpoint(dir + "/run/checkpoint")->optimizer_groups.at("group0").step, step + 3);
}

TEST_F(CliTest, EvalExportInfo) {
  std::string dir = Tmp("cli_inspect");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir, "--extra-outputs", "logits"}).ok());
  ASSERT_TRUE(cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "30", "--lr", "3e-3"}).ok());
  EXPECT_TRUE(cli::Eval({"--artifacts", dir, "--data-root", data_}).ok());
  EXPECT_TRUE(cli::Info({"--artifacts", dir}).ok());
  std::string to = dir + "/exported.onnx";
  ASSERT_TRUE(cli::Export({"--artifacts", dir, "--outputs", "logits", "--to", to}).ok());
  auto m = LoadModel(to);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->graph.outputs[0].name, "logits");
  Status bad = cli::Export({"--artifacts", dir, "--outputs", "nonexistent", "--to", to});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.message(), HasSubstr("nonexistent"));
  EXPECT_FALSE(cli::Export({"--artifacts", dir, "--to", to}).ok());
  EXPECT_FALSE(cli::Info({"--artifacts", "/nonexistent"}).ok());
}

// A strict JSON syntax check (objects, arrays, strings, numbers, true/false/null), enough to know that
// `info --json` prints one well-formed value.
bool JsonValue(const std::string& s, size_t* i);
void SkipWs(const std::string& s, size_t* i) {
  while (*i < s.size() && std::isspace(static_cast<unsigned char>(s[*i]))) ++*i;
}
bool JsonString(const std::string& s, size_t* i) {
  if (s[*i] != '"') return false;
  for (++*i; *i < s.size(); ++*i) {
    if (s[*i] == '\\') ++*i;
    else if (s[*i] == '"') return ++*i, true;
    else if (static_cast<unsigned char>(s[*i]) < 0x20) return false;
  }
  return false;
}
bool JsonValue(const std::string& s, size_t* i) {
  SkipWs(s, i);
  if (*i >= s.size()) return false;
  char c = s[*i];
  if (c == '"') return JsonString(s, i);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    ++*i;
    SkipWs(s, i);
    if (s[*i] == close) return ++*i, true;
    while (true) {
      if (c == '{') {
        SkipWs(s, i);
        if (!JsonString(s, i)) return false;
        SkipWs(s, i);
        if (s[(*i)++] != ':') return false;
      }
      if (!JsonValue(s, i)) return false;
      SkipWs(s, i);
      if (s[*i] == ',') ++*i;
      else if (s[*i] == close) return ++*i, true;
      else return false;
    }
  }
  for (const char* word : {"true", "false", "null"}) {
    if (s.compare(*i, std::strlen(word), word) == 0) return *i += std::strlen(word), true;
  }
  size_t start = *i;
  while (*i < s.size() && (std::isdigit(static_cast<unsigned char>(s[*i])) || std::strchr("+-.eE", s[*i]))) ++*i;
  return *i > start;
}

TEST_F(CliTest, SimulatedDeviceTrainsAsTheCpuAndInfoShowsThePlacement) {
  std::string a = Tmp("cli_cpu"), b = Tmp("cli_sim");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", a}).ok());
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", b}).ok());
  for (const auto& [dir, providers] : {std::make_pair(a, "cpu"), std::make_pair(b, "sim,cpu")}) {
    Status t = cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "25", "--batch-size", "32", "--metrics",
                           dir + "/metrics.jsonl", "--provider", providers, "--threads", "2"});
    ASSERT_TRUE(t.ok()) << providers << ": " << t.ToString();
  }
  EXPECT_EQ(StepLosses(a + "/metrics.jsonl"), StepLosses(b + "/metrics.jsonl"));
  EXPECT_EQ(Slurp(a + "/run/checkpoint"), Slurp(b + "/run/checkpoint")) << "saved from the simulated device";
  EXPECT_TRUE(cli::Eval({"--artifacts", b, "--data-root", data_, "--provider", "sim"}).ok());
  // info --json: the training, eval and optimizer graphs, each with its nodes and copies.
  ::testing::internal::CaptureStdout();
  Status info = cli::Info({"--artifacts", b, "--provider", "sim,cpu", "--json", "--batch-size", "32"});
  std::string json = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(info.ok()) << info.ToString();
  size_t at = 0;
  EXPECT_TRUE(JsonValue(json, &at)) << "not JSON at byte " << at << ": " << json;
  SkipWs(json, &at);
  EXPECT_EQ(at, json.size()) << "more than one JSON value";
  EXPECT_THAT(json, HasSubstr("\"providers\": [\"SIM\", \"CPU\"]"));
  for (const char* key : {"\"training\": {\"nodes\": [", "\"eval\": {\"nodes\": [", "\"optimizer\": {\"nodes\": ["}) {
    EXPECT_THAT(json, HasSubstr(key));
  }
  EXPECT_THAT(json, HasSubstr("{\"name\": \"fc1\", \"op\": \"Gemm\", \"domain\": \"\", \"provider\": \"SIM\"}"));
  EXPECT_THAT(json, HasSubstr("\"op\": \"SoftmaxCrossEntropyLoss\", \"domain\": \"\", \"provider\": \"CPU\", "
                              "\"why\": \"SIM: no kernel\""));
  // The images go to the device once per step: 32 x 784 float32.
  EXPECT_THAT(json, HasSubstr("{\"value\": \"input\", \"from\": \"CPU\", \"to\": \"SIM:0\", \"bytes\": 100352}"));
  EXPECT_THAT(json, HasSubstr("\"state_bytes\": {\"SIM:0\": "));
  // The same as text.
  ::testing::internal::CaptureStdout();
  ASSERT_TRUE(cli::Info({"--artifacts", b, "--provider", "sim,cpu"}).ok());
  std::string text = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(text, HasSubstr("training graph: SIM "));
  EXPECT_THAT(text, HasSubstr("on CPU: SoftmaxCrossEntropyLoss"));
}

TEST_F(CliTest, ProviderListErrorsSayWhatIsMissing) {
  std::string dir = Tmp("cli_providers");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  // With the CUDA provider library in the runfiles: on a machine without a GPU, the error says whether the
  // driver or the device is missing (with a GPU, training works).
  Status cuda = cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "1", "--provider", "cuda,cpu"});
  if (!cuda.ok()) {
    EXPECT_THAT(cuda.message(), HasSubstr("--provider: provider \"cuda\": "));
    EXPECT_THAT(cuda.message(), ::testing::AnyOf(HasSubstr("driver"), HasSubstr("device"),
                                                 HasSubstr("libontrain_cuda.so was not found")));
  }
  Status unknown = cli::Info({"--artifacts", dir, "--provider", "tpu"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.message(), HasSubstr("unknown provider \"tpu\"; expected one of: cpu, sim"));
  Status order = cli::Info({"--artifacts", dir, "--provider", "cpu,sim"});
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.message(), HasSubstr("\"cpu\" must come last"));
}

TEST_F(CliTest, NpzCsvAndIdxData) {
  std::string dir = Tmp("cli_formats");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir, "--extra-outputs", "logits"}).ok());
  // The same synthetic examples as .npz (images [N,28,28] reshape to the model's [N,784]) and as CSV.
  auto idx = cli::LoadDataset("fashion-mnist", data_);
  ASSERT_TRUE(idx.ok());
  int64_t n = 100;
  std::vector<float> img(idx->images.begin(), idx->images.begin() + n * 784);
  std::vector<int64_t> lab(idx->labels.begin(), idx->labels.begin() + n);
  std::string npz = dir + "/train.npz";
  ASSERT_TRUE(cli::SaveNpz({{"input", Tensor::FromVector(img, {n, 28, 28})}, {"labels", Tensor::FromVector(lab, {n})}},
                           npz).ok());
  std::string metrics = dir + "/m.jsonl";
  Status a = cli::Train({"--artifacts", dir, "--data", npz, "--eval-data", npz, "--batch-size", "20", "--epochs", "1",
                         "--metrics", metrics});
  ASSERT_TRUE(a.ok()) << a.ToString();
  EXPECT_THAT(Slurp(metrics), HasSubstr("\"accuracy\":"));
  std::ofstream csv(dir + "/train.csv");
  csv << "features...,label\n";
  for (int64_t i = 0; i < n; ++i) {
    for (int p = 0; p < 784; ++p) csv << img[i * 784 + p] << ",";
    csv << lab[i] << "\n";
  }
  csv.close();
  Status b = cli::Train({"--artifacts", dir, "--data", dir + "/train.csv", "--batch-size", "20", "--steps", "5"});
  ASSERT_TRUE(b.ok()) << b.ToString();
  Status c = cli::Train({"--artifacts", dir, "--data", "idx:" + data_ + "/t10k-images-idx3-ubyte.gz," + data_ +
                                                        "/t10k-labels-idx1-ubyte.gz", "--steps", "3"});
  ASSERT_TRUE(c.ok()) << c.ToString();
  // Misnamed arrays and wrong dtypes are named in the error.
  ASSERT_TRUE(cli::SaveNpz({{"pixels", Tensor::FromVector(img, {n, 784})}, {"labels", Tensor::FromVector(lab, {n})}},
                           npz).ok());
  Status d = cli::Train({"--artifacts", dir, "--data", npz, "--steps", "1"});
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.message(), HasSubstr("no array named \"input\""));
  std::vector<double> img64(img.begin(), img.end());
  ASSERT_TRUE(cli::SaveNpz({{"input", Tensor::FromVector(img64, {n, 784})}, {"labels", Tensor::FromVector(lab, {n})}},
                           npz).ok());
  Status e = cli::Train({"--artifacts", dir, "--data", npz, "--steps", "1"});
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.message(), HasSubstr("float64"));
  EXPECT_THAT(e.message(), HasSubstr("float32"));
  // A truncated gzip file (the fuzz campaign's input: its error message was read after gzclose freed it).
  std::ofstream(dir + "/cut-images.gz", std::ios::binary) << "\x1f\x8b";
  auto cut = cli::LoadIdxPair(dir + "/cut-images.gz", data_ + "/t10k-labels-idx1-ubyte.gz");
  ASSERT_FALSE(cut.ok());
  EXPECT_THAT(cut.status().message(), HasSubstr("cut-images.gz\" is corrupt: "));
  EXPECT_THAT(cut.status().message(), HasSubstr("unexpected end of file"));
  Status g = cli::Train({"--artifacts", dir, "--data", "weird-spec", "--steps", "1"});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.message(), HasSubstr("weird-spec"));
}

// The real data: a short run on Fashion-MNIST from Debian's dataset-fashion-mnist (tools/setup.sh installs
// it), 60 steps of 64 examples, evaluated on the test split.
TEST_F(CliTest, FashionMnistSlice) {
  if (!cli::LoadDataset("fashion-mnist:test").ok()) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (Debian package dataset-fashion-mnist)";
  }
  std::string dir = Tmp("cli_fashion");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir, "--extra-outputs", "logits"}).ok());
  std::string metrics = dir + "/m.jsonl";
  Status s = cli::Train({"--artifacts", dir, "--data", "fashion-mnist", "--steps", "60", "--lr", "3e-3", "--metrics",
                         metrics});
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::string m = Slurp(metrics);
  size_t acc = m.rfind("\"accuracy\":");
  ASSERT_NE(acc, std::string::npos);
  EXPECT_GT(std::stod(m.substr(acc + 11)), 0.6) << "60 steps already separate the 10 classes well above chance";
}

TEST_F(CliTest, MissingDatasetNamesThePackage) {
  std::string dir = Tmp("cli_nodata");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  Status s = cli::Train({"--artifacts", dir, "--data-root", "/nonexistent"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("dataset-fashion-mnist"));
}

TEST_F(CliTest, IncompleteArtifactsNameTheMissingFile) {
  std::string dir = Tmp("cli_incomplete");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  std::remove((dir + "/optimizer_model.onnx").c_str());
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("optimizer_model.onnx"));
}

TEST_F(CliTest, CorruptCheckpointIsAnError) {
  std::string dir = Tmp("cli_corrupt");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  std::ofstream(dir + "/checkpoint", std::ios::binary) << "not a checkpoint at all";
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("checkpoint"));
}

TEST_F(CliTest, MemoryLimitRefusesASessionThatWouldPassIt) {
  std::string dir = Tmp("cli_memory_limit");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  // The 784-256-10 MLP's parameters and gradients need 1.6 MB: over 1 MiB.
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "1", "--memory-limit-mb", "1"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("over the session's memory limit of 1048576"));
  EXPECT_FALSE(cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "1", "--memory-limit-mb", "-5"}).ok());
  EXPECT_TRUE(cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "1", "--memory-limit-mb", "64"}).ok());
}

TEST_F(CliTest, DataThatDoesNotFitTheModel) {
  std::string dir = Tmp("cli_shape");
  // A forward model whose input is [batch, 100]: the data are 28x28 images.
  std::string fwd = Tmp("cli_shape_fwd") + "/forward.onnx";
  {
    Model f;
    f.opset_imports[""] = 17;
    ValueInfo in;
    in.name = "x";
    in.dtype = DType::kFloat32;
    in.has_shape = true;
    in.dims = {Dim{-1, "batch"}, Dim{100, ""}};
    f.graph.inputs.push_back(in);
    f.graph.AddInitializer("w", Tensor::FromVector(std::vector<float>(1000, 0.01f), {10, 100}));
    Node n;
    n.name = "fc";
    n.op_type = "Gemm";
    n.inputs = {"x", "w"};
    n.outputs = {"logits"};
    onnx::AttributeProto tb;
    tb.set_name("transB");
    tb.set_type(onnx::AttributeProto::INT);
    tb.set_i(1);
    n.attributes["transB"] = tb;
    f.graph.nodes.push_back(n);
    ValueInfo out;
    out.name = "logits";
    out.dtype = DType::kFloat32;
    out.has_shape = true;
    out.dims = {Dim{-1, "batch"}, Dim{10, ""}};
    f.graph.outputs.push_back(out);
    ASSERT_TRUE(SaveModel(f, fwd).ok());
  }
  ASSERT_TRUE(cli::Generate({"--model", fwd, "--out", dir}).ok());
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("\"x\""));
  EXPECT_THAT(s.message(), HasSubstr("28x28"));
}

TEST_F(CliTest, NanLossStopsWithTheStepAndKeepsTheCheckpoint) {
  std::string dir = Tmp("cli_nan");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  ASSERT_TRUE(cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "2"}).ok());
  std::string before = Slurp(dir + "/run/checkpoint");
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_, "--lr", "1e30", "--steps", "20", "--resume"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("at step"));
  EXPECT_EQ(Slurp(dir + "/run/checkpoint"), before) << "the last good checkpoint is kept";
}

TEST_F(CliTest, UnwritableOutIsAnError) {
  std::string dir = Tmp("cli_out");
  ASSERT_TRUE(cli::Generate({"--builtin", "mlp", "--out", dir}).ok());
  Status s = cli::Train({"--artifacts", dir, "--data-root", data_, "--steps", "2", "--out", "/proc/ontrain-no"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("/proc/ontrain-no"));
}

TEST_F(CliTest, GenerateErrorsLeaveNothingBehind) {
  std::string dir = ::testing::TempDir() + "/cli_gen_bad";
  Status s = cli::Generate({"--builtin", "mlp", "--out", dir, "--requires-grad", "fc9.weight"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("fc9.weight"));
  EXPECT_TRUE(std::ifstream(dir + "/checkpoint").fail());
  Status u = cli::Generate({"--builtin", "mlp", "--out", dir, "--colour", "red"});
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.message(), HasSubstr("--colour"));
  Status m = cli::Generate({"--model", "/nonexistent.onnx", "--out", dir});
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.message(), HasSubstr("/nonexistent.onnx"));
  Status l = cli::Generate({"--builtin", "mlp", "--out", dir, "--loss-output", "nope"});
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.message(), HasSubstr("nope"));
}

TEST_F(CliTest, GenerateBatchNormRunningStatsModes) {
  const std::string fwd = "tests/data/torch/bn_dropout/forward.onnx";
  std::string updated = ::testing::TempDir() + "/cli_gen_bn", fixed = ::testing::TempDir() + "/cli_gen_bn_const";
  ASSERT_TRUE(cli::Generate({"--model", fwd, "--out", updated}).ok());
  auto a = LoadCheckpoint(updated + "/checkpoint");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_NE(a->FindParameter("bn.running_var"), nullptr) << "updated statistics are checkpoint state";
  EXPECT_FALSE(a->FindParameter("bn.running_var")->requires_grad);
  ASSERT_TRUE(cli::Generate({"--model", fwd, "--out", fixed, "--bn-running-stats", "constant"}).ok());
  auto b = LoadCheckpoint(fixed + "/checkpoint");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->FindParameter("bn.running_var"), nullptr) << "constant statistics stay in the models";
  std::string bad = ::testing::TempDir() + "/cli_gen_bn_bad";
  Status s = cli::Generate({"--model", fwd, "--out", bad, "--bn-running-stats", "sometimes"});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("sometimes"));
  EXPECT_TRUE(std::ifstream(bad + "/checkpoint").fail());
}

TEST_F(CliTest, TruncatedIdxIsAnError) {
  std::string dir = Tmp("cli_trunc");
  WriteGz(dir + "/train-images-idx3-ubyte.gz", std::string("\x00\x00\x08\x03\x00\x00\x00\x05", 8));
  WriteGz(dir + "/train-labels-idx1-ubyte.gz", std::string("\x00\x00\x08\x01\x00\x00\x00\x05", 8));
  auto d = cli::LoadDataset("fashion-mnist", dir);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("not an IDX image file"));
}

}  // namespace
}  // namespace ontrain
