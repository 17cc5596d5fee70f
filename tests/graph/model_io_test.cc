// Model loading and saving: round trips through files and buffers, external data, opset imports,
// symbolic shapes, topological order and ONNX shape inference.
#include "graph/model_io.h"

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "graph/builder.h"
#include "graph/shape_inference.h"
#include "graph/tensor_proto.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/" + name;
  std::string cmd = "rm -rf " + dir + " && mkdir -p " + dir;
  EXPECT_EQ(system(cmd.c_str()), 0);
  return dir;
}

TEST(ModelIoTest, SaveAndLoadRoundTrip) {
  Model m = testing::MakeMlpModel();
  m.opset_imports["com.microsoft"] = 1;
  std::string path = TempDir("roundtrip") + "/mlp.onnx";
  ASSERT_TRUE(SaveModel(m, path).ok());
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->opset_imports, m.opset_imports);
  ASSERT_EQ(back->graph.nodes.size(), m.graph.nodes.size());
  for (size_t i = 0; i < m.graph.nodes.size(); ++i) {
    EXPECT_EQ(back->graph.nodes[i].name, m.graph.nodes[i].name);
    EXPECT_EQ(back->graph.nodes[i].op_type, m.graph.nodes[i].op_type);
    EXPECT_EQ(back->graph.nodes[i].inputs, m.graph.nodes[i].inputs);
  }
  EXPECT_EQ(back->graph.nodes[4].GetInt("axis", 0), -1);
  EXPECT_EQ(back->graph.initializer_order, m.graph.initializer_order);
  EXPECT_EQ(testing::ToVector(back->graph.initializers.at("w1")), testing::ToVector(m.graph.initializers.at("w1")));
  ASSERT_EQ(back->graph.inputs.size(), 1u);
  EXPECT_EQ(back->graph.inputs[0].TypeString(), "float32[batch,4]");
  // The same bytes load from memory.
  std::string bytes;
  ASSERT_TRUE(ModelToProto(m).SerializeToString(&bytes));
  auto mem = LoadModelFromBuffer(bytes.data(), bytes.size());
  ASSERT_TRUE(mem.ok());
  EXPECT_EQ(mem->graph.nodes.size(), 5u);
}

TEST(ModelIoTest, SaveReplacesAtomically) {
  std::string path = TempDir("atomic") + "/m.onnx";
  ASSERT_TRUE(SaveModel(testing::MakeMlpModel(), path).ok());
  ASSERT_TRUE(SaveModel(testing::MakeSingleOpModel("Relu", {{2}}, {2}), path).ok());
  auto back = LoadModel(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->graph.nodes.size(), 1u);
  EXPECT_FALSE(SaveModel(testing::MakeMlpModel(), "/nonexistent-dir/m.onnx").ok());
}

// Writes the MLP with w1 stored in an external file (with an offset), as large ONNX models are.
std::string WriteExternalModel(const std::string& dir, int64_t truncate_to = -1) {
  Model m = testing::MakeMlpModel();
  onnx::ModelProto p = ModelToProto(m);
  auto* init = p.mutable_graph()->mutable_initializer(0);
  std::string payload = init->raw_data();
  init->clear_raw_data();
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* kv = init->add_external_data();
    kv->set_key(k);
    kv->set_value(v);
  };
  add("location", "weights.bin");
  add("offset", "16");
  add("length", std::to_string(payload.size()));
  std::string file = std::string(16, 'x') + payload;
  if (truncate_to >= 0) file.resize(truncate_to);
  std::ofstream(dir + "/weights.bin", std::ios::binary) << file;
  std::ofstream(dir + "/model.onnx", std::ios::binary) << p.SerializeAsString();
  return dir + "/model.onnx";
}

TEST(ModelIoTest, ExternalData) {
  std::string path = WriteExternalModel(TempDir("external"));
  auto m = LoadModel(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(testing::ToVector(m->graph.initializers.at("w1")),
            testing::ToVector(testing::MakeMlpModel().graph.initializers.at("w1")));
}

TEST(ModelIoTest, TruncatedExternalData) {
  std::string path = WriteExternalModel(TempDir("external_short"), 30);
  auto m = LoadModel(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(m.status().message(), HasSubstr("weights.bin"));
  EXPECT_THAT(m.status().message(), HasSubstr("w1"));
}

TEST(ModelIoTest, ExternalDataMustStayInsideModelDir) {
  onnx::TensorProto t = TensorToProto(Tensor::FromVector<float>({1, 2}, {2}), "w");
  t.clear_raw_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = t.add_external_data();
  kv->set_key("location");
  kv->set_value("../../etc/passwd");
  auto r = TensorFromProto(t, "/tmp");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("relative path inside"));
}

TEST(ModelIoTest, TensorProtoSizeMismatch) {
  onnx::TensorProto t = TensorToProto(Tensor::FromVector<float>({1, 2, 3}, {3}), "w");
  t.set_raw_data(t.raw_data().substr(0, 8));
  auto r = TensorFromProto(t, "");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("raw_data has 8 bytes, but float32[3] needs 12"));
  onnx::TensorProto typed;
  typed.set_name("v");
  typed.set_data_type(onnx::TensorProto::INT64);
  typed.add_dims(3);
  typed.add_int64_data(4);
  auto r2 = TensorFromProto(typed, "");
  ASSERT_FALSE(r2.ok());
  EXPECT_THAT(r2.status().message(), HasSubstr("holds 1 values but its shape [3] needs 3"));
}

TEST(ModelIoTest, TypedFieldsDecode) {
  onnx::TensorProto h;
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(2);
  h.add_int32_data(0x3c00);  // 1.0
  h.add_int32_data(0xc000);  // -2.0
  auto t = TensorFromProto(h, "");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(static_cast<float>(t->data<Float16>()[0]), 1.0f);
  EXPECT_EQ(static_cast<float>(t->data<Float16>()[1]), -2.0f);
}

// A bool tensor's raw bytes other than 0 and 1 (a damaged or hostile file: session_fuzzer's UBSan run read
// a byte of 5 as a bool) become 1, as every nonzero byte is true.
TEST(ModelIoTest, BoolRawBytesBecomeZeroOrOne) {
  onnx::TensorProto b;
  b.set_name("flags");
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(4);
  b.set_raw_data(std::string("\x00\x05\x01\xff", 4));
  auto t = TensorFromProto(b, "");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const uint8_t* bytes = static_cast<const uint8_t*>(t->raw_data());
  EXPECT_EQ(std::vector<int>(bytes, bytes + 4), (std::vector<int>{0, 1, 1, 1}));
}

TEST(GraphTest, TopologicalOrderFixesFileOrder) {
  Model m = testing::MakeMlpModel();
  std::swap(m.graph.nodes[0], m.graph.nodes[3]);  // fc2/MatMul now comes first in the file
  auto order = TopologicalOrder(m.graph);
  ASSERT_TRUE(order.ok());
  std::vector<std::string> names;
  for (size_t i : order.value()) names.push_back(m.graph.nodes[i].name);
  EXPECT_EQ(names, (std::vector<std::string>{"fc1/MatMul", "fc1/Add", "relu", "fc2/MatMul", "softmax"}));
}

TEST(GraphTest, DuplicateProducerIsAnError) {
  Model m = testing::MakeMlpModel();
  m.graph.nodes[1].outputs[0] = "h0";
  auto order = TopologicalOrder(m.graph);
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("produced twice"));
}

TEST(ShapeInferenceTest, InfersIntermediateShapesWithSymbols) {
  Model m = testing::MakeMlpModel();
  ASSERT_TRUE(InferShapes(&m).ok());
  std::map<std::string, std::string> types;
  for (const ValueInfo& v : m.graph.value_infos) types[v.name] = v.TypeString();
  EXPECT_EQ(types["h0"], "float32[batch,3]");
  EXPECT_EQ(types["h2"], "float32[batch,3]");
  EXPECT_EQ(types["h3"], "float32[batch,2]");
}

// Where ONNX's rules stop (Slice with run-time bounds, Reshape to a run-time shape), ranks still flow:
// Transpose permutes the dims, MatMul keeps its operands' last dims, broadcasting takes the known ones.
TEST(ShapeInferenceTest, RanksFlowPastRuntimeSliceAndReshape) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {-1, 6, 12}, {"batch", "", ""}),
                    TensorInfo("s", DType::kInt64, {1}), TensorInfo("e", DType::kInt64, {1}),
                    TensorInfo("shape", DType::kInt64, {4}), TensorInfo("w", DType::kFloat32, {5, 7}),
                    TensorInfo("b", DType::kFloat32, {7})};
  m.graph.AddInitializer("axes", Tensor::FromVector<int64_t>({2}, {1}));
  m.graph.nodes = {MakeNode("Slice", {"x", "s", "e", "axes"}, {"sl"}, {}, "slice"),
                   MakeNode("Reshape", {"sl", "shape"}, {"r"}, {}, "reshape"),
                   MakeNode("Transpose", {"r"}, {"t"}, {AttrInts("perm", {0, 2, 1, 3})}, "transpose"),
                   MakeNode("MatMul", {"t", "w"}, {"mm"}, {}, "matmul"),
                   MakeNode("Add", {"mm", "b"}, {"y"}, {}, "add"),
                   MakeNode("Less", {"y", "b"}, {"mask"}, {}, "less")};
  m.graph.outputs = {ValueInfo{"mask"}};
  ASSERT_TRUE(InferShapes(&m).ok());
  std::map<std::string, const ValueInfo*> v;
  for (const ValueInfo& i : m.graph.value_infos) v[i.name] = &i;
  for (const ValueInfo& i : m.graph.outputs) v[i.name] = &i;
  auto rank = [&](const char* name) { return v.count(name) && v[name]->has_shape ? static_cast<int>(v[name]->dims.size()) : -1; };
  EXPECT_EQ(rank("sl"), 3);
  EXPECT_EQ(rank("r"), 4);
  EXPECT_EQ(rank("t"), 4);
  ASSERT_EQ(rank("mm"), 4);
  EXPECT_EQ(v["mm"]->dims[3].value, 7);
  ASSERT_EQ(rank("y"), 4);
  EXPECT_EQ(v["y"]->dims[3].value, 7);
  EXPECT_FALSE(v["y"]->dims[0].known());
  ASSERT_EQ(rank("mask"), 4);
  EXPECT_EQ(v["mask"]->dtype, DType::kBool);
}

TEST(ShapeInferenceTest, ReportsContradictions) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("a", DType::kFloat32, {2, 3}));
  m.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, {4, 5}));
  m.graph.outputs.push_back(TensorInfo("c", DType::kFloat32, {-1, -1}));
  m.graph.nodes.push_back(MakeNode("MatMul", {"a", "b"}, {"c"}, {}, "mm"));
  Status s = InferShapes(&m);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("MatMul"));
}

// A zero stride made libonnx 1.12's Conv/pool rule divide by zero (SIGFPE, found by model_fuzzer): it is an
// error naming the node, also inside a subgraph.
TEST(ShapeInferenceTest, RefusesZeroStridesBeforeOnnxDividesByThem) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {1, 1, 5, 5}));
  m.graph.inputs.push_back(TensorInfo("w", DType::kFloat32, {1, 1, 3, 3}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {-1, -1, -1, -1}));
  m.graph.nodes.push_back(MakeNode("Conv", {"x", "w"}, {"y"}, {AttrInts("strides", {2, 0})}, "strided"));
  Status s = InferShapes(&m);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("node \"strided\" (Conv): strides must be positive, got 0"));
}

// libonnx 1.12's ConvTranspose rule reads W's dims without checking W's rank (a segfault found by
// model_fuzzer): such a model is an error naming the node and both inputs' types.
TEST(ShapeInferenceTest, RefusesConvTransposeWhoseWeightRankIsNotTheInputs) {
  for (const std::vector<int64_t>& w_dims : {std::vector<int64_t>{2}, std::vector<int64_t>{2, 3}, std::vector<int64_t>{2, 3, 1, 1, 1}}) {
    Model m;
    m.opset_imports[""] = 17;
    m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {1, 2, 4, 4}));
    int64_t n = 1;
    for (int64_t d : w_dims) n *= d;
    m.graph.AddInitializer("w", Tensor::FromVector<float>(std::vector<float>(n, 0.5f), Shape(w_dims)));
    m.graph.outputs.push_back(ValueInfo{"y"});
    m.graph.nodes.push_back(MakeNode("ConvTranspose", {"x", "w"}, {"y"}, {}, "up"));
    Status s = InferShapes(&m);
    ASSERT_FALSE(s.ok()) << w_dims.size();
    EXPECT_THAT(s.message(), HasSubstr("node \"up\" (ConvTranspose): X must have rank 3 or more and W the same rank"));
    EXPECT_THAT(s.message(), HasSubstr("float32[1,2,4,4] (x)"));
  }
}

// A decoder's ConvTranspose reads another's output: each is checked once its inputs have shapes, then ONNX's
// rule shapes it. 2*(4-1)+3 = 9, then (9-1)+2 = 10.
TEST(ShapeInferenceTest, ShapesChainedConvTransposes) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {1, 2, 4, 4}));
  m.graph.inputs.push_back(TensorInfo("w2", DType::kFloat32, {3, 1, 2, 2}));
  m.graph.AddInitializer("w1", Tensor::FromVector<float>(std::vector<float>(54, 0.5f), {2, 3, 3, 3}));
  m.graph.outputs.push_back(ValueInfo{"y"});
  m.graph.nodes = {MakeNode("ConvTranspose", {"x", "w1"}, {"h"}, {AttrInts("strides", {2, 2})}, "up1"),
                   MakeNode("Relu", {"h"}, {"r"}, {}, "relu"),
                   MakeNode("ConvTranspose", {"r", "w2"}, {"y"}, {}, "up2")};
  ASSERT_TRUE(InferShapes(&m).ok());
  std::map<std::string, const ValueInfo*> v;
  for (const ValueInfo& i : m.graph.value_infos) v[i.name] = &i;
  for (const ValueInfo& i : m.graph.outputs) v[i.name] = &i;
  ASSERT_TRUE(v.count("r") && v["r"]->has_shape);
  EXPECT_EQ(v["r"]->TypeString(), "float32[1,3,9,9]");
  ASSERT_TRUE(v.count("y") && v["y"]->has_shape);
  EXPECT_EQ(v["y"]->TypeString(), "float32[1,1,10,10]");
}

// Inside a subgraph (which ontrain does not type) a ConvTranspose is kept from ONNX's rule: a rank-1 W there
// crashed libonnx's inference of the If node's branch.
TEST(ShapeInferenceTest, KeepsSubgraphConvTransposeFromOnnxsRule) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs.push_back(TensorInfo("c", DType::kBool, {}));
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {1, 2, 4, 4}));
  m.graph.AddInitializer("w", Tensor::FromVector<float>({0.5f, 0.5f}, {2}));
  m.graph.outputs.push_back(ValueInfo{"y"});
  onnx::AttributeProto branch;
  branch.set_name("then_branch");
  branch.set_type(onnx::AttributeProto::GRAPH);
  onnx::NodeProto* ct = branch.mutable_g()->add_node();
  ct->set_op_type("ConvTranspose");
  ct->set_name("inner");
  ct->add_input("x");
  ct->add_input("w");
  ct->add_output("t");
  branch.mutable_g()->add_output()->set_name("t");
  onnx::AttributeProto other = branch;
  other.set_name("else_branch");
  m.graph.nodes.push_back(MakeNode("If", {"c"}, {"y"}, {branch, other}, "if"));
  Status s = InferShapes(&m);
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace ontrain
