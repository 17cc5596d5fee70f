// The training-model fusions of graph/fusion.h: PyTorch's opset-14 LayerNorm and GELU sequences become one
// node each and compute what the sequences compute; near misses stay as they are.
#include "graph/fusion.h"

#include <cmath>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

// x [2,3,4] -> LayerNorm over the last axis (as torch.onnx.export writes it at opset 14, constants as
// Constant nodes) -> GELU through Erf -> y.
Model LayerNormGelu() {
  Model m;
  m.opset_imports[""] = 14;
  Graph& g = m.graph;
  g.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 4})};
  g.AddInitializer("gamma", Tensor::FromVector<float>({1.0f, 0.5f, -2.0f, 1.5f}, {4}));
  g.AddInitializer("beta", Tensor::FromVector<float>({0.1f, 0.0f, -0.3f, 0.2f}, {4}));
  auto constant = [&](const std::string& name, float v) {
    g.nodes.push_back(MakeNode("Constant", {}, {name}, {AttrTensor("value", Tensor::FromVector<float>({v}, {}))}, name));
  };
  constant("two", 2.0f);
  constant("eps", 1e-5f);
  constant("sqrt2", 1.4142135381698608f);
  constant("one", 1.0f);
  constant("half", 0.5f);
  g.nodes.push_back(MakeNode("ReduceMean", {"x"}, {"mean"}, {AttrInts("axes", {-1})}, "mean"));
  g.nodes.push_back(MakeNode("Sub", {"x", "mean"}, {"d"}, {}, "sub"));
  g.nodes.push_back(MakeNode("Pow", {"d", "two"}, {"d2"}, {}, "pow"));
  g.nodes.push_back(MakeNode("ReduceMean", {"d2"}, {"var"}, {AttrInts("axes", {-1})}, "var"));
  g.nodes.push_back(MakeNode("Add", {"var", "eps"}, {"var_eps"}, {}, "add_eps"));
  g.nodes.push_back(MakeNode("Sqrt", {"var_eps"}, {"std"}, {}, "sqrt"));
  g.nodes.push_back(MakeNode("Div", {"d", "std"}, {"normed"}, {}, "div"));
  g.nodes.push_back(MakeNode("Mul", {"normed", "gamma"}, {"scaled"}, {}, "scale"));
  g.nodes.push_back(MakeNode("Add", {"scaled", "beta"}, {"ln"}, {}, "shift"));
  g.nodes.push_back(MakeNode("Div", {"ln", "sqrt2"}, {"ln_s"}, {}, "gelu_div"));
  g.nodes.push_back(MakeNode("Erf", {"ln_s"}, {"erf"}, {}, "gelu_erf"));
  g.nodes.push_back(MakeNode("Add", {"erf", "one"}, {"erf1"}, {}, "gelu_add"));
  g.nodes.push_back(MakeNode("Mul", {"ln", "erf1"}, {"gx"}, {}, "gelu_mul"));
  g.nodes.push_back(MakeNode("Mul", {"gx", "half"}, {"y"}, {}, "gelu_half"));
  g.outputs = {TensorInfo("y", DType::kFloat32, {2, 3, 4})};
  return m;
}

std::vector<float> RunModel(const Model& m, const std::vector<float>& x) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get());
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  if (!ex.ok()) return {};
  std::vector<Tensor> out;
  Status s = ex.value()->Run(ToNamedValues({{"x", Tensor::FromVector(x, {2, 3, 4})}}), {"y"}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return {};
  return std::vector<float>(out[0].data<float>(), out[0].data<float>() + out[0].NumElements());
}

std::vector<std::string> Ops(const Model& m) {
  std::vector<std::string> ops;
  for (const Node& n : m.graph.nodes) ops.push_back(n.op_type);
  return ops;
}

TEST(FusionTest, LayerNormAndGeluBecomeOneNodeEachAndComputeTheSame) {
  Model plain = LayerNormGelu(), fused = plain;
  FusionCounts c = FuseForTraining(&fused);
  EXPECT_EQ(c.layer_norms, 1);
  EXPECT_EQ(c.gelus, 1);
  ASSERT_EQ(Ops(fused), (std::vector<std::string>{"LayerNormalization", "Gelu"})) << "constants that fed only the "
                                                                                    "sequences are gone too";
  EXPECT_EQ(fused.graph.nodes[0].GetFloat("epsilon", 0), 1e-5f);
  EXPECT_EQ(fused.graph.nodes[0].GetInt("axis", 0), -1);
  EXPECT_EQ(fused.graph.nodes[0].inputs, (std::vector<std::string>{"x", "gamma", "beta"}));
  EXPECT_EQ(fused.graph.nodes[1].domain, "com.microsoft");
  EXPECT_EQ(fused.OpsetFor("com.microsoft"), 1);
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(std::sin(1.7 * i) * 3.0);
  std::vector<float> want = RunModel(plain, x), got = RunModel(fused, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::fabs(want[i]))) << i;
}

// The other spellings of GELU: x scaled by Mul(1/sqrt 2) with the constant first, and 0.5 applied to x
// before the product with (1 + erf).
TEST(FusionTest, GeluInItsOtherOrder) {
  Model plain;
  plain.opset_imports[""] = 14;
  Graph& g = plain.graph;
  g.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 4})};
  g.AddInitializer("inv_sqrt2", Tensor::FromVector<float>({0.70710676908493042f}, {}));
  g.AddInitializer("one", Tensor::FromVector<float>({1.0f}, {}));
  g.AddInitializer("half", Tensor::FromVector<float>({0.5f}, {}));
  g.nodes = {MakeNode("Mul", {"inv_sqrt2", "x"}, {"s"}, {}, "scale"), MakeNode("Erf", {"s"}, {"e"}, {}, "erf"),
             MakeNode("Add", {"one", "e"}, {"e1"}, {}, "add"), MakeNode("Mul", {"x", "half"}, {"hx"}, {}, "half"),
             MakeNode("Mul", {"hx", "e1"}, {"y"}, {}, "product")};
  g.outputs = {TensorInfo("y", DType::kFloat32, {2, 3, 4})};
  Model fused = plain;
  EXPECT_EQ(FuseForTraining(&fused).gelus, 1);
  ASSERT_EQ(Ops(fused), (std::vector<std::string>{"Gelu"}));
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(std::cos(0.9 * i) * 4.0);
  std::vector<float> want = RunModel(plain, x), got = RunModel(fused, x);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-6 * (1 + std::fabs(want[i]))) << i;
}

TEST(FusionTest, NearMissesStayUnfused) {
  struct Case {
    const char* what;
    void (*edit)(Model*);
  };
  const Case cases[] = {
      {"normalized over a middle axis",
       [](Model* m) {
         for (Node& n : m->graph.nodes) if (n.op_type == "ReduceMean") n.attributes["axes"] = AttrInts("axes", {1});
       }},
      {"the centred value is also a graph output",
       [](Model* m) { m->graph.outputs.push_back(TensorInfo("d", DType::kFloat32, {2, 3, 4})); }},
      {"a cube instead of a square",
       [](Model* m) {
         for (Node& n : m->graph.nodes) if (n.name == "two") n.attributes["value"] = AttrTensor("value", Tensor::FromVector<float>({3.0f}, {}));
       }},
      {"the mean is not kept as a dimension",
       [](Model* m) {
         for (Node& n : m->graph.nodes) if (n.name == "mean") n.attributes["keepdims"] = AttrInt("keepdims", 0);
       }},
  };
  for (const Case& k : cases) {
    Model m = LayerNormGelu();
    k.edit(&m);
    FusionCounts c = FuseForTraining(&m);
    EXPECT_EQ(c.layer_norms, 0) << k.what;
    EXPECT_EQ(c.gelus, 1) << k.what << ": the GELU is still whole";
  }
  // GELU with another constant than sqrt 2, or with its Erf read elsewhere.
  Model m = LayerNormGelu();
  for (Node& n : m.graph.nodes) if (n.name == "sqrt2") n.attributes["value"] = AttrTensor("value", Tensor::FromVector<float>({1.5f}, {}));
  EXPECT_EQ(FuseForTraining(&m).gelus, 0);
  m = LayerNormGelu();
  m.graph.outputs.push_back(TensorInfo("erf", DType::kFloat32, {2, 3, 4}));
  EXPECT_EQ(FuseForTraining(&m).gelus, 0);
}

// nn.Linear exported without constant folding: MatMul(x, Transpose(W)) becomes FusedMatMul(x, W, transB=1)
// and computes the same; a Transpose that something else reads too, or another perm, stays.
TEST(FusionTest, MatMulByTransposedWeightBecomesFusedMatMul) {
  auto linear = [](std::vector<int64_t> perm, bool shared) {
    Model m;
    m.opset_imports[""] = 14;
    Graph& g = m.graph;
    g.inputs = {TensorInfo("x", DType::kFloat32, {2, 3, 4})};
    std::vector<float> w(20);
    for (int i = 0; i < 20; ++i) w[i] = static_cast<float>(std::sin(0.37 * i));
    g.AddInitializer("w", Tensor::FromVector<float>(w, perm == std::vector<int64_t>{1, 0} ? Shape{5, 4} : Shape{4, 5}));
    g.nodes = {MakeNode("Transpose", {"w"}, {"wt"}, {AttrInts("perm", perm)}, "t"),
               MakeNode("MatMul", {"x", "wt"}, {"y"}, {}, "mm")};
    g.outputs = {TensorInfo("y", DType::kFloat32, {2, 3, 5})};
    if (shared) g.outputs.push_back(TensorInfo("wt", DType::kFloat32, {4, 5}));
    return m;
  };
  Model plain = linear({1, 0}, false), fused = plain;
  EXPECT_EQ(FuseForTraining(&fused).matmul_transposes, 1);
  ASSERT_EQ(Ops(fused), (std::vector<std::string>{"FusedMatMul"}));
  EXPECT_EQ(fused.graph.nodes[0].inputs, (std::vector<std::string>{"x", "w"}));
  EXPECT_EQ(fused.graph.nodes[0].GetInt("transB", 0), 1);
  EXPECT_EQ(fused.OpsetFor("com.microsoft"), 1);
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(std::cos(0.9 * i) * 2.0);
  auto run = [&](const Model& m) {
    auto cpu = CpuExecutionProvider::Create({1}).value();
    auto ex = Executor::Create(m, cpu.get());
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    std::vector<Tensor> out;
    EXPECT_TRUE(ex.value()->Run(ToNamedValues({{"x", Tensor::FromVector(x, {2, 3, 4})}}), {"y"}, &out).ok());
    return std::vector<float>(out[0].data<float>(), out[0].data<float>() + out[0].NumElements());
  };
  std::vector<float> want = run(plain), got = run(fused);
  ASSERT_EQ(got.size(), 30u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::fabs(want[i]))) << i;
  Model shared = linear({1, 0}, true);
  EXPECT_EQ(FuseForTraining(&shared).matmul_transposes, 0) << "the transposed weight is also a graph output";
  Model other = linear({0, 1}, false);
  EXPECT_EQ(FuseForTraining(&other).matmul_transposes, 0) << "perm [0, 1] is no transpose";
}

}  // namespace
}  // namespace ontrain
