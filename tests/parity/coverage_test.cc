// The CUDA provider's coverage target, checked on any machine (placement needs the kernel list, not a
// device): for the built-in MLP and CNN, every PyTorch fixture of tests/data/torch/ made into artifacts by
// the generator, and ONNX Runtime's artifact sets, the training, eval and optimizer graphs placed on
// "cuda,cpu" leave no floating-point computation on the CPU. Nodes the planner keeps on the host because
// they only compute shapes and axes are fine; so are integer-only nodes (Shape, Size, shape arithmetic).
// The ops still missing from the CUDA kernel list are listed below with why; a set that needs any other
// op on the CPU fails, naming the node.
#include <map>
#include <set>

#include "engine/partition.h"
#include "graph/model_io.h"
#include "graph/tensor_proto.h"
#include "gtest/gtest.h"
#include "tests/ort_artifacts.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace parity {
namespace {

// Ops that still run on the CPU with float data, and why.
const std::map<std::string, std::string>& KnownGaps() {
  static const auto* m = new std::map<std::string, std::string>{
  };
  return *m;
}

StatusOr<Model> LoadSource(const ModelSource& s) {
  if (!s.path.empty()) return LoadModel(s.path);
  return LoadModelFromBuffer(s.bytes.data(), s.bytes.size());
}

std::vector<testing::ArtifactSet> CoveredSets() {
  std::vector<testing::ArtifactSet> sets;
  for (const char* name : {"gen-mlp", "gen-cnn", "ort-testdata-mlp", "carzh-web-mnist", "srij-lora",
                           "srij-transformer-lora", "seizureguard-cnn1d"}) {
    sets.push_back(testing::FindSet(name));
  }
  for (const char* fixture : {"mlp", "cnn", "bn_dropout", "causal_mask", "densenet", "einsum_attention", "encoder_layer", "gru", "lstm", "pad_pool", "rnn", "transformer", "unet", "unet_interp"}) {
    testing::ArtifactSet s;
    s.name = std::string("torch-") + fixture;
    s.model = std::string("tests/data/torch/") + fixture + "/forward.onnx";
    sets.push_back(s);
  }
  return sets;
}

// "domain::op" or "op".
std::string OpName(const Node& n) { return n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type; }

class CudaCoverageTest : public ::testing::TestWithParam<testing::ArtifactSet> {};

TEST_P(CudaCoverageTest, NoFloatComputationLeftOnTheCpu) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();
  std::string why;
  auto loaded = testing::LoadSet(GetParam(), &why);
  if (!loaded.ok() && !why.empty()) GTEST_SKIP() << why;
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ProviderListOptions o;
  o.plan_only = true;
  auto providers = CreateProviders("cuda,cpu", o);
  ASSERT_TRUE(providers.ok()) << providers.status().ToString();
  std::set<std::string> gaps;
  for (const auto& [graph, source] : {std::make_pair("training", &loaded->train), std::make_pair("eval", &loaded->eval),
                                      std::make_pair("optimizer", &loaded->optimizer)}) {
    auto model = LoadSource(*source);
    ASSERT_TRUE(model.ok()) << graph << ": " << model.status().ToString();
    FoldConstantNodes(&model->graph);  // as the executor does
    auto part = PartitionGraph(model.value(), providers->ordered);
    ASSERT_TRUE(part.ok()) << graph << ": " << part.status().ToString();
    for (size_t i = 0; i < model->graph.nodes.size(); ++i) {
      const Node& n = model->graph.nodes[i];
      const NodePlacement& p = part->nodes[i];
      if (p.provider == 0 || p.why_fallback.find("host-side") != std::string::npos) continue;
      // Float data read or written; inputs whose shape alone is read (Shape, Size) do not count.
      auto is_float = [&](const std::string& v) {
        auto it = part->dtypes.find(v);
        return !v.empty() && it != part->dtypes.end() && IsFloatingPoint(it->second);
      };
      bool floats = false;
      for (const std::string& v : n.outputs) floats = floats || is_float(v);
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        bool shape_only = p.def != nullptr && p.def->is_shape_only_input(static_cast<int>(k));
        floats = floats || (!shape_only && is_float(n.inputs[k]));
      }
      if (!floats) continue;
      if (KnownGaps().count(OpName(n))) {
        gaps.insert(OpName(n));
        continue;
      }
      ADD_FAILURE() << graph << " graph: " << OpName(n) << " \"" << n.name << "\" computes floats on the CPU ("
                    << p.why_fallback << ")";
    }
  }
  for (const std::string& g : gaps) std::printf("known gap: %s: %s\n", g.c_str(), KnownGaps().at(g).c_str());
}

INSTANTIATE_TEST_SUITE_P(Sets, CudaCoverageTest, ::testing::ValuesIn(CoveredSets()),
                         [](const ::testing::TestParamInfo<testing::ArtifactSet>& info) {
                           std::string n = info.param.name;
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace parity
}  // namespace ontrain
