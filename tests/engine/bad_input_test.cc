// Bad input: each case returns a Status that names what was wrong and where; nothing crashes.
#include <fstream>

#include "engine/executor.h"
#include "graph/builder.h"
#include "graph/model_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::string Serialized(const Model& m) {
  std::string bytes;
  EXPECT_TRUE(ModelToProto(m).SerializeToString(&bytes));
  return bytes;
}

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cpu_ = CpuExecutionProvider::Create({1}).value();
    ex_ = Executor::Create(testing::MakeMlpModel(), cpu_.get()).value();
  }
  Status RunWith(const NamedTensors& feeds) {
    std::vector<Tensor> out;
    return ex_->Run(ToNamedValues(feeds), {"y"}, &out);
  }
  std::unique_ptr<CpuExecutionProvider> cpu_;
  std::unique_ptr<Executor> ex_;
};

TEST_F(BadInputTest, TruncatedModelBytesNeverCrash) {
  std::string bytes = Serialized(testing::MakeMlpModel());
  int errors = 0;
  for (size_t n = 1; n < bytes.size(); ++n) {
    auto m = LoadModelFromBuffer(bytes.data(), n, "");
    if (!m.ok()) {
      errors++;
      continue;
    }
    // A prefix that happens to parse is a smaller, possibly inconsistent model: creating and running an
    // executor on it must fail cleanly or succeed, never crash.
    auto ex = Executor::Create(m.value(), cpu_.get());
    if (ex.ok()) {
      std::vector<Tensor> out;
      (void)ex.value()->Run({{"x", Tensor::FromVector<float>(std::vector<float>(8, 1.0f), {2, 4})}},
                            ex.value()->output_names(), &out);
    }
  }
  EXPECT_GT(errors, 0);
  auto bad = LoadModelFromBuffer(bytes.data(), bytes.size() / 2, "");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a valid ONNX ModelProto"));
}

TEST_F(BadInputTest, GarbageModelBytes) {
  std::string garbage(200, '\xff');
  auto m = LoadModelFromBuffer(garbage.data(), garbage.size(), "");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  EXPECT_FALSE(LoadModelFromBuffer(nullptr, 0, "").ok());
}

TEST_F(BadInputTest, MissingModelFile) {
  auto m = LoadModel("/nonexistent/model.onnx");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("/nonexistent/model.onnx"));
}

TEST_F(BadInputTest, MissingExternalDataFile) {
  onnx::ModelProto p = ModelToProto(testing::MakeMlpModel());
  auto* init = p.mutable_graph()->mutable_initializer(0);
  init->clear_raw_data();
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = init->add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  std::string dir = ::testing::TempDir() + "/missing_ext";
  std::string cmd = "mkdir -p " + dir;
  ASSERT_EQ(system(cmd.c_str()), 0);
  std::ofstream(dir + "/model.onnx", std::ios::binary) << p.SerializeAsString();
  auto m = LoadModel(dir + "/model.onnx");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("weights.bin"));
  EXPECT_THAT(m.status().message(), HasSubstr("w1"));
}

TEST_F(BadInputTest, UnknownOpNamesOpDomainAndOpset) {
  Model m = testing::MakeSingleOpModel("FancyOp", {{2}}, {2}, "com.example");
  m.graph.nodes[0].domain = "com.example";
  auto ex = Executor::Create(m, cpu_.get());
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(ex.status().message(), HasSubstr("FancyOp"));
  EXPECT_THAT(ex.status().message(), HasSubstr("com.example"));
  EXPECT_THAT(ex.status().message(), HasSubstr("opset 1"));
  EXPECT_THAT(ex.status().message(), HasSubstr("the_FancyOp"));
}

TEST_F(BadInputTest, KnownOpAtUnsupportedOpset) {
  Model m = testing::MakeSingleOpModel("Gelu", {{2}}, {2}, "", 17);  // ONNX Gelu exists from opset 20
  auto ex = Executor::Create(m, cpu_.get());
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(ex.status().message(), HasSubstr("Gelu (domain ai.onnx, opset 17)"));
}

TEST_F(BadInputTest, MissingFeed) {
  Status s = RunWith({});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("missing feed for input \"x\""));
  EXPECT_THAT(s.message(), HasSubstr("float32[batch,4]"));
}

TEST_F(BadInputTest, MisnamedFeed) {
  Status s = RunWith({{"input", Tensor::FromVector<float>({1, 2, 3, 4}, {1, 4})}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("\"input\" is not an input of the graph"));
  EXPECT_THAT(s.message(), HasSubstr("expected: x"));
}

TEST_F(BadInputTest, WrongDtype) {
  Status s = RunWith({{"x", Tensor::FromVector<int64_t>({1, 2, 3, 4}, {1, 4})}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("input \"x\": expected dtype float32, got int64"));
}

TEST_F(BadInputTest, WrongShape) {
  Status s = RunWith({{"x", Tensor::FromVector<float>({1, 2, 3}, {1, 3})}});
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("expected shape float32[batch,4], got float32[1,3]"));
  Status r = RunWith({{"x", Tensor::FromVector<float>({1, 2, 3, 4}, {4})}});
  EXPECT_THAT(r.message(), HasSubstr("got float32[4]"));
}

TEST_F(BadInputTest, InconsistentSymbolicDim) {
  Model m = testing::MakeMlpModel();
  m.graph.inputs.push_back(TensorInfo("labels", DType::kInt64, {-1}, {"batch"}));
  auto ex = Executor::Create(m, cpu_.get()).value();
  std::vector<Tensor> out;
  Status s = ex->Run({{"x", Tensor::FromVector<float>(std::vector<float>(8, 0.f), {2, 4})},
                      {"labels", Tensor::FromVector<int64_t>({1, 2, 3}, {3})}},
                     {"y"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("\"batch\""));
}

TEST_F(BadInputTest, KernelShapeErrorNamesNode) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("a", DType::kFloat32, {-1, -1}));
  m.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, {-1, -1}));
  m.graph.outputs.push_back(TensorInfo("c", DType::kFloat32, {-1, -1}));
  m.graph.nodes.push_back(MakeNode("MatMul", {"a", "b"}, {"c"}, {}, "fc1/MatMul"));
  auto ex = Executor::Create(m, cpu_.get()).value();
  std::vector<Tensor> out;
  Status s = ex->Run({{"a", Tensor::FromVector<float>(std::vector<float>(2 * 784, 0.f), {2, 784})},
                      {"b", Tensor::FromVector<float>(std::vector<float>(500 * 784, 0.f), {500, 784})}},
                     {"c"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "node \"fc1/MatMul\" (MatMul): inner dimensions differ: [2,784] x [500,784]");
}

TEST_F(BadInputTest, DanglingInputAndCycle) {
  Model m = testing::MakeMlpModel();
  m.graph.nodes[2].inputs[0] = "nowhere";
  auto ex = Executor::Create(m, cpu_.get());
  ASSERT_FALSE(ex.ok());
  EXPECT_THAT(ex.status().message(), HasSubstr("\"nowhere\""));
  EXPECT_THAT(ex.status().message(), HasSubstr("relu"));
  Model c = testing::MakeMlpModel();
  c.graph.nodes[0].inputs[0] = "h2";  // fc1/MatMul reads relu's output, which depends on it
  auto cyc = Executor::Create(c, cpu_.get());
  ASSERT_FALSE(cyc.ok());
  EXPECT_THAT(cyc.status().message(), HasSubstr("cycle"));
}

TEST_F(BadInputTest, IntegerDivisionByZero) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("a", DType::kInt32, {2}));
  m.graph.inputs.push_back(TensorInfo("b", DType::kInt32, {2}));
  m.graph.outputs.push_back(TensorInfo("c", DType::kInt32, {2}));
  m.graph.nodes.push_back(MakeNode("Div", {"a", "b"}, {"c"}, {}, "div"));
  auto ex = Executor::Create(m, cpu_.get()).value();
  std::vector<Tensor> out;
  Status s = ex->Run({{"a", Tensor::FromVector<int32_t>({1, 2}, {2})}, {"b", Tensor::FromVector<int32_t>({1, 0}, {2})}},
                     {"c"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("division by zero"));
}

TEST_F(BadInputTest, OutOfRangeGatherIndex) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("data", DType::kFloat32, {3}));
  m.graph.inputs.push_back(TensorInfo("idx", DType::kInt64, {2}));
  m.graph.outputs.push_back(TensorInfo("out", DType::kFloat32, {2}));
  m.graph.nodes.push_back(MakeNode("Gather", {"data", "idx"}, {"out"}, {}, "gather"));
  auto ex = Executor::Create(m, cpu_.get()).value();
  std::vector<Tensor> out;
  Status s = ex->Run({{"data", Tensor::FromVector<float>({1, 2, 3}, {3})}, {"idx", Tensor::FromVector<int64_t>({0, 7}, {2})}},
                     {"out"}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("index 7"));
  EXPECT_THAT(s.message(), HasSubstr("gather"));
}

}  // namespace
}  // namespace ontrain
