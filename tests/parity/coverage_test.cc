// The CUDA provider's coverage target, checked on any machine (placement needs the kernel list, not a
// device): for the built-in MLP and CNN, every PyTorch fixture of tests/data/torch/ made into artifacts by
// the generator, and ONNX Runtime's artifact sets, the training, eval and optimizer graphs placed on
// "cuda,cpu" leave no floating-point computation on the CPU. Nodes the planner keeps on the host because
// they only compute shapes and axes are fine; so are integer-only nodes (Shape, Size, shape arithmetic).
// The ops still missing from the CUDA kernel list are listed below with why; a set that needs any other
// op on the CPU fails, naming the node.
//
// The same sets then train on a simulated device offering exactly the CUDA kernel list's ops (so graphs are
// placed as on CUDA) with graph capture on: each training graph must be recorded and replayed (a CUDA
// placement leaves nothing on the host that would stop it), and so must each optimizer graph, with the CPU
// provider's bits. Without a GPU
// this is how CUDA's capture of these graphs is checked; the simulated device records with CUDA's
// semantics (providers/sim/sim_provider.h).
#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "checkpoint/checkpoint_io.h"
#include "engine/kernel_fusion.h"
#include "engine/partition.h"
#include "graph/builder.h"
#include "engine/training_session.h"
#include "graph/model_io.h"
#include "graph/tensor_proto.h"
#include "gtest/gtest.h"
#include "tests/ort_artifacts.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/sim/sim_provider.h"
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
    PrepareForPlanning(&model.value(), providers->ordered);  // as the executor does
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

// The training inputs of batch `step`: the set's own when it declares them, else at batch size 2 floats from
// the synthetic data and integers 0 (a valid class for any label input).
StatusOr<std::vector<Tensor>> Batch(const testing::ArtifactSet& set, const TrainingSession& s, const Model& training,
                                    int step) {
  if (!set.inputs.empty()) return testing::MakeBatch(set, step);
  std::vector<Tensor> inputs;
  for (const std::string& name : s.training_input_names()) {
    const ValueInfo* info = training.graph.FindInput(name);
    if (info == nullptr || !info->has_shape) return InvalidArgument("training input \"", name, "\" has no shape");
    Shape shape;
    for (const Dim& d : info->dims) shape.push_back(d.known() ? d.value : 2);
    if (info->dtype == DType::kFloat32) {
      inputs.push_back(testing::SyntheticFloats(shape, step));
      continue;
    }
    ONT_ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(info->dtype, shape, HostAllocator()));
    std::memset(t.raw_data(), 0, t.SizeInBytes());
    inputs.push_back(t);
  }
  return inputs;
}

struct Trained {
  std::vector<uint32_t> losses;
  std::string checkpoint;
  Executor::CaptureStats train, optimizer;
  std::string train_status, optimizer_status;
};

constexpr int kCaptureSteps = 10;

// Trains the set on `providers` (a copy of its checkpoint) for kCaptureSteps steps.
void TrainSet(const testing::ArtifactSet& set, const std::vector<IExecutionProvider*>& providers, Trained* r) {
  std::string why;
  auto loaded = testing::LoadSet(set, &why);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  auto training = LoadSource(loaded->train);
  ASSERT_TRUE(training.ok()) << training.status().ToString();
  auto created = TrainingSession::Create({providers}, &loaded->state, loaded->train, loaded->eval, loaded->optimizer);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  TrainingSession& s = *created.value();
  for (int step = 0; step < kCaptureSteps; ++step) {
    auto batch = Batch(set, s, training.value(), step);
    ASSERT_TRUE(batch.ok()) << batch.status().ToString();
    std::vector<Tensor> out;
    Status st = s.TrainStep(batch.value(), &out);
    ASSERT_TRUE(st.ok()) << "step " << step << ": " << st.ToString();
    uint32_t bits;
    std::memcpy(&bits, out[0].raw_data(), sizeof bits);
    r->losses.push_back(bits);
    ASSERT_TRUE(s.OptimizerStep().ok());
    s.LazyResetGrad();
  }
  r->train = s.train_executor().capture_stats();
  r->train_status = s.train_executor().CaptureStatus();
  r->optimizer = s.optimizer()->executor().capture_stats();
  r->optimizer_status = s.optimizer()->executor().CaptureStatus();
  auto bytes = SerializeCheckpoint(loaded->state);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  r->checkpoint = bytes.value();
}

TEST_P(CudaCoverageTest, CudaPlacementRecordsTheTrainingStep) {
  auto api = LoadCudaProviderLibrary();
  if (!api.ok()) GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();
  std::string why;
  if (!testing::LoadSet(GetParam(), &why).ok() && !why.empty()) GTEST_SKIP() << why;
  const std::vector<std::string> cpu_ops = AllCpuOps();
  std::set<std::string> cuda_ops;
  for (const KernelDef& d : api.value()->KernelList()) {
    std::string name = std::string(d.domain).empty() ? d.op : std::string(d.domain) + "::" + d.op;
    if (std::find(cpu_ops.begin(), cpu_ops.end(), name) != cpu_ops.end()) cuda_ops.insert(name);
  }
  SimProviderOptions so;
  so.threads = 2;
  so.graph_capture = true;
  so.ops.assign(cuda_ops.begin(), cuda_ops.end());
  auto sim = SimExecutionProvider::Create(so);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto cpu = CpuExecutionProvider::Create({2});
  ASSERT_TRUE(cpu.ok());
  Trained on_cpu, on_sim;
  ASSERT_NO_FATAL_FAILURE(TrainSet(GetParam(), {cpu.value().get()}, &on_cpu));
  ASSERT_NO_FATAL_FAILURE(TrainSet(GetParam(), {sim.value().get(), cpu.value().get()}, &on_sim));
  EXPECT_EQ(on_sim.losses, on_cpu.losses);
  EXPECT_TRUE(on_sim.checkpoint == on_cpu.checkpoint) << "checkpoints differ";
  // The optimizer graph reads the learning rate and the step count on the device: one recording, replayed.
  EXPECT_EQ(on_sim.optimizer.recorded, 1) << on_sim.optimizer_status;
  EXPECT_EQ(on_sim.optimizer.replayed, kCaptureSteps - 4) << on_sim.optimizer_status;
  // The CPU's Dropout draws on the host at every run, so the simulated device cannot record a graph with
  // one; CUDA's Dropout keeps its counter on the device and can (tests/parity/dropout_test.cc, on a GPU).
  if (on_sim.train_status.find("(Dropout) cannot be recorded") != std::string::npos) {
    std::printf("not recorded here (CUDA records it): %s\n", on_sim.train_status.c_str());
    return;
  }
  EXPECT_EQ(on_sim.train.recorded, 1) << on_sim.train_status;
  EXPECT_EQ(on_sim.train.replayed, kCaptureSteps - 4) << on_sim.train_status;
}

// `m` planned on "cuda,cpu" (without a device) with every node on CUDA, then fused: the fusion counts, the
// fused graph, and whether each of its nodes is placed on CUDA again.
struct CudaFusion {
  KernelFusionCounts counts;
  Model fused;
  std::vector<bool> on_cuda;
};
void FuseOnCuda(Model m, CudaFusion* out) {
  ProviderListOptions o;
  o.plan_only = true;
  auto providers = CreateProviders("cuda,cpu", o);
  ASSERT_TRUE(providers.ok()) << providers.status().ToString();
  PrepareForPlanning(&m, providers->ordered);
  auto part = PartitionGraph(m, providers->ordered);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  for (const NodePlacement& n : part->nodes) ASSERT_EQ(n.provider, 0) << n.why_fallback;
  out->counts = FuseKernels(&m, part.value(), providers->ordered);
  auto again = PartitionGraph(m, providers->ordered);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  for (const NodePlacement& n : again->nodes) out->on_cuda.push_back(n.provider == 0);
  out->fused = std::move(m);
}

#define ONT_SKIP_WITHOUT_CUDA_LIBRARY()                                                                   \
  if (auto api = LoadCudaProviderLibrary(); !api.ok()) {                                                  \
    GTEST_SKIP() << "this build has no CUDA provider library: " << api.status().message();                \
  }

// The executor's fusions follow the CUDA kernel list as they follow the CPU's: a linear layer's FusedMatMul
// + Add of its bias placed on "cuda,cpu" becomes MatMulBias on CUDA (cuBLASLt's bias epilogue) in float32,
// and stays two nodes in float64, which CUDA's MatMulBias row does not take.
TEST(CudaFusionTest, LinearLayerBiasFusesOnCudaInFloat32) {
  ONT_SKIP_WITHOUT_CUDA_LIBRARY();
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(t));
    Model m;
    m.opset_imports[""] = 17;
    m.opset_imports["com.microsoft"] = 1;
    m.graph.inputs = {TensorInfo("a", t, {2, 3, 4}), TensorInfo("w", t, {5, 4}), TensorInfo("bias", t, {5})};
    m.graph.outputs = {TensorInfo("y", t, {2, 3, 5})};
    m.graph.nodes = {MakeNode("FusedMatMul", {"a", "w"}, {"p"}, {AttrInt("transB", 1)}, "mm", "com.microsoft"),
                     MakeNode("Add", {"p", "bias"}, {"y"}, {}, "add")};
    CudaFusion f;
    ASSERT_NO_FATAL_FAILURE(FuseOnCuda(std::move(m), &f));
    if (t == DType::kFloat64) {
      EXPECT_EQ(f.counts.matmul_bias, 0);
      EXPECT_EQ(f.fused.graph.nodes.size(), 2u);
      continue;
    }
    EXPECT_EQ(f.counts.matmul_bias, 1);
    ASSERT_EQ(f.fused.graph.nodes.size(), 1u);
    EXPECT_EQ(f.fused.graph.nodes[0].op_type, "MatMulBias");
    EXPECT_TRUE(f.on_cuda[0]);
  }
}

// Gemm + Relu placed on "cuda,cpu" becomes FusedGemm on CUDA (cuBLASLt's ReLU-bias epilogue), in float32
// and float64 alike (CUDA's FusedGemm row takes both; float64 runs the Gemm then the Relu kernel).
TEST(CudaFusionTest, LinearLayerReluFusesOnCuda) {
  ONT_SKIP_WITHOUT_CUDA_LIBRARY();
  for (DType t : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(t));
    Model m;
    m.opset_imports[""] = 17;
    m.graph.inputs = {TensorInfo("a", t, {3, 4}), TensorInfo("w", t, {5, 4}), TensorInfo("bias", t, {5})};
    m.graph.outputs = {TensorInfo("y", t, {3, 5})};
    m.graph.nodes = {MakeNode("Gemm", {"a", "w", "bias"}, {"h"}, {AttrInt("transB", 1)}, "fc"),
                     MakeNode("Relu", {"h"}, {"y"}, {}, "relu")};
    CudaFusion f;
    ASSERT_NO_FATAL_FAILURE(FuseOnCuda(std::move(m), &f));
    EXPECT_EQ(f.counts.gemm_relu, 1);
    ASSERT_EQ(f.fused.graph.nodes.size(), 1u);
    EXPECT_EQ(f.fused.graph.nodes[0].op_type, "FusedGemm");
    EXPECT_TRUE(f.on_cuda[0]);
  }
}

// Conv + Relu placed on "cuda,cpu" becomes FusedConv on CUDA (the bias and ReLU in one pass after cuDNN).
TEST(CudaFusionTest, ConvReluFusesOnCuda) {
  ONT_SKIP_WITHOUT_CUDA_LIBRARY();
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 8, 8}), TensorInfo("w", DType::kFloat32, {4, 3, 3, 3}),
                    TensorInfo("b", DType::kFloat32, {4})};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {2, 4, 6, 6})};
  m.graph.nodes = {MakeNode("Conv", {"x", "w", "b"}, {"c"}, {}, "conv"), MakeNode("Relu", {"c"}, {"y"}, {}, "relu")};
  CudaFusion f;
  ASSERT_NO_FATAL_FAILURE(FuseOnCuda(std::move(m), &f));
  EXPECT_EQ(f.counts.conv_relu, 1);
  ASSERT_EQ(f.fused.graph.nodes.size(), 1u);
  EXPECT_EQ(f.fused.graph.nodes[0].op_type, "FusedConv");
  EXPECT_TRUE(f.on_cuda[0]);
}

// MaxPoolGrad + ReluGrad (a pooled ReLU layer's gradient) placed on "cuda,cpu" becomes MaxPoolReluGrad on
// CUDA: the mask from the pooled values, in the gradient's one pass.
TEST(CudaFusionTest, MaxPoolReluGradFusesOnCuda) {
  ONT_SKIP_WITHOUT_CUDA_LIBRARY();
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports["com.microsoft"] = 1;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 8, 8}), TensorInfo("dz", DType::kFloat32, {2, 3, 4, 4})};
  m.graph.outputs = {TensorInfo("z", DType::kFloat32, {2, 3, 4, 4}), TensorInfo("dx", DType::kFloat32, {2, 3, 8, 8})};
  const std::vector<onnx::AttributeProto> pool = {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})};
  m.graph.nodes = {MakeNode("Relu", {"x"}, {"p"}, {}, "relu"), MakeNode("MaxPool", {"p"}, {"z", "i"}, pool, "pool"),
                   MakeNode("MaxPoolGrad", {"dz", "i"}, {"g"}, pool, "pool_grad"),
                   MakeNode("ReluGrad", {"g", "x"}, {"dx"}, {}, "relu_grad", "com.microsoft")};
  m.graph.value_infos.push_back(TensorInfo("g", DType::kFloat32, {2, 3, 8, 8}));
  CudaFusion f;
  ASSERT_NO_FATAL_FAILURE(FuseOnCuda(std::move(m), &f));
  EXPECT_EQ(f.counts.maxpool_relu_grad, 1);
  ASSERT_EQ(f.fused.graph.nodes.size(), 3u);
  EXPECT_EQ(f.fused.graph.nodes[2].op_type, "MaxPoolReluGrad");
  for (size_t i = 0; i < f.on_cuda.size(); ++i) EXPECT_TRUE(f.on_cuda[i]) << f.fused.graph.nodes[i].op_type;
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
