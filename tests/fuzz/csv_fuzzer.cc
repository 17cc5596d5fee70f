// Fuzz target: CSV training data (tools/cli/table_data), read against the training model of a small built-in
// MLP (user inputs: float features [batch, 4], int64 labels [batch]) and batched once.
#include <algorithm>
#include <cstdlib>

#include "graph/artifacts.h"
#include "engine/session_plan.h"
#include "graph/model_zoo.h"
#include "tests/fuzz/fuzz_util.h"
#include "tools/cli/table_data.h"

namespace {

struct Fixture {
  ontrain::Model train;
  std::vector<std::string> inputs;  // features, labels
};

const Fixture& TrainingModel() {
  static const Fixture f = [] {
    auto a = ontrain::GenerateArtifacts(ontrain::MakeMlpClassifier(4, {8}, 3, 1), ontrain::ArtifactOptions());
    if (!a.ok()) std::abort();
    Fixture x{a->training, {}};
    for (const ontrain::ValueInfo& v : x.train.graph.inputs) {
      if (!a->checkpoint.FindParameter(v.name) && v.name != "lazy_reset_grad" && !ontrain::IsGradientName(v.name)) {
        x.inputs.push_back(v.name);
      }
    }
    if (x.inputs.size() != 2) std::abort();
    return x;
  }();
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Fixture& f = TrainingModel();
  std::string path = ontrain::fuzz::WriteScratchFile("data.csv", std::string(reinterpret_cast<const char*>(data), size));
  auto table = ontrain::cli::LoadTable(path, "", f.train, f.inputs);
  if (!table.ok()) return 0;
  ontrain::cli::Batcher b;
  if (b.Init(&table.value(), 4).ok()) {
    std::vector<int64_t> order(static_cast<size_t>(table->rows));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    (void)b.Fill(order, 0, std::min<int64_t>(4, table->rows));
  }
  return 0;
}
