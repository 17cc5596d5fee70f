// Resource limits: files that declare tensors far larger than the bytes behind them, or shapes whose
// element count overflows, are refused with a clear error before anything of that size is allocated; and
// TrainingSessionOptions::memory_limit_bytes caps what a session plans, naming the graph and the value
// that would pass it, while a session under a sufficient cap trains exactly as one without.
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "gmock/gmock.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tools/cli/npz.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kGiB = int64_t{1} << 30;

// The host allocator's peak grows by less than `bytes` while `f` runs (its peak is monotonic, so this
// checks the peak stays below the current use plus `bytes`).
template <typename F>
void ExpectNoAllocationOver(int64_t bytes, F f) {
  const AllocatorStats& st = HostAllocator()->stats();
  int64_t before = st.peak_bytes.load();
  int64_t in_use = st.bytes_in_use.load();
  f();
  int64_t after = st.peak_bytes.load();
  EXPECT_TRUE(after == before || after < in_use + bytes) << "peak host allocation grew to " << after << " bytes";
}

std::string ModelWithInitializer(const onnx::TensorProto& t) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_initializer() = t;
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Identity");
  n->add_input(t.name());
  n->add_output("y");
  onnx::ValueInfoProto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

onnx::TensorProto FloatTensor(std::vector<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

TEST(ResourceLimitsTest, ModelTensorLargerThanItsBytesIsRefusedBeforeAllocation) {
  // 1 GiB declared, 4 bytes present: raw data, typed data, and external data in a 16-byte file.
  onnx::TensorProto raw = FloatTensor({kGiB / 4});
  raw.set_raw_data(std::string(4, '\0'));
  onnx::TensorProto typed = FloatTensor({kGiB / 4});
  typed.add_float_data(1.0f);
  const std::string dir = ::testing::TempDir() + "/resource_limits";
  ASSERT_TRUE(MakeDirectories(dir).ok());
  std::ofstream(dir + "/w.bin", std::ios::binary) << std::string(16, '\0');
  onnx::TensorProto external = FloatTensor({kGiB / 4});
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* kv = external.add_external_data();
  kv->set_key("location");
  kv->set_value("w.bin");
  struct Case {
    const char* what;
    onnx::TensorProto tensor;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{{"raw_data", raw, "raw_data has 4 bytes, but float32[268435456] needs 1073741824"},
                                         {"typed data", typed, "holds 1 values but its shape [268435456] needs 268435456"},
                                         {"external data", external, "is 16 bytes; tensor \"w\" needs 1073741824 bytes"}}) {
    SCOPED_TRACE(c.what);
    std::string bytes = ModelWithInitializer(c.tensor);
    ExpectNoAllocationOver(kGiB / 8, [&] {
      auto m = LoadModelFromBuffer(bytes.data(), bytes.size(), dir);
      ASSERT_FALSE(m.ok());
      EXPECT_THAT(m.status().ToString(), HasSubstr(c.message));
    });
  }
}

TEST(ResourceLimitsTest, OverflowingShapesAreRefused) {
  onnx::TensorProto t = FloatTensor({int64_t{1} << 32, int64_t{1} << 32, 16});
  t.set_raw_data(std::string(4, '\0'));
  std::string bytes = ModelWithInitializer(t);
  auto m = LoadModelFromBuffer(bytes.data(), bytes.size(), "");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().ToString(), HasSubstr("is too large"));
  // A tensor allocation whose byte count would overflow is an error, not a wrapped small allocation.
  auto big = Tensor::Allocate(DType::kFloat64, {int64_t{1} << 31, int64_t{1} << 31}, HostAllocator());
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceExhausted);
  // .npy: a header shape that overflows, or that is merely far larger than the data.
  for (const char* shape : {"(99999999999999999999999,)", "(4611686018427387904, 4)", "(268435456,)"}) {
    SCOPED_TRACE(shape);
    std::string header = std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }";
    header.resize(118, ' ');
    header += '\n';
    std::string npy = std::string("\x93NUMPY\x01\x00", 8) + std::string(1, static_cast<char>(header.size())) +
                      std::string(1, '\0') + header + std::string(4, '\0');
    ExpectNoAllocationOver(kGiB / 8, [&] {
      auto a = cli::ParseNpy(npy, "test.npy");
      ASSERT_FALSE(a.ok());
      EXPECT_EQ(a.status().code(), StatusCode::kDataLoss) << a.status().ToString();
    });
  }
}

TEST(ResourceLimitsTest, CheckpointTensorLargerThanItsBytesIsRefused) {
  // A real checkpoint whose one tensor's dims are rewritten to claim 2^28 floats (the data stays 12345).
  CheckpointState state;
  state.AddParameter("w", Tensor::FromVector(std::vector<float>(12345, 0.5f), {12345}), true);
  std::string bytes = SerializeCheckpoint(state).value();
  int64_t from = 12345, to = kGiB / 4;
  size_t at = bytes.find(std::string(reinterpret_cast<const char*>(&from), 8));
  ASSERT_NE(at, std::string::npos);
  std::memcpy(&bytes[at], &to, 8);
  ExpectNoAllocationOver(kGiB / 8, [&] {
    auto s = LoadCheckpointFromBuffer(bytes.data(), bytes.size());
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().ToString(), HasSubstr("has 49380 bytes of data but float32[268435456] needs 1073741824"));
  });
  // And dims whose byte count overflows 64 bits.
  to = int64_t{1} << 62;
  std::memcpy(&bytes[at], &to, 8);
  auto s = LoadCheckpointFromBuffer(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().ToString(), HasSubstr("invalid dims"));
}

class MemoryLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto a = GenerateArtifacts(MakeMlpClassifier(64, {256}, 10, 5), ArtifactOptions());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    dir_ = ::testing::TempDir() + "/memory_limit";
    ASSERT_TRUE(WriteArtifacts(a.value(), dir_).ok());
    cpu_ = CpuExecutionProvider::Create({1}).value();
  }

  // Creates a session under `limit` and trains 3 steps of batch `batch`; returns the first error, or OK
  // with the final parameters in *params.
  Status Train(int64_t limit, int64_t batch, std::vector<float>* params) {
    CheckpointState state = LoadCheckpoint(dir_ + "/checkpoint").value();
    TrainingSessionOptions o;
    o.providers = {cpu_.get()};
    o.memory_limit_bytes = limit;
    auto s = TrainingSession::Create(o, &state, ModelSource::FromPath(dir_ + "/training_model.onnx"),
                                     ModelSource::FromPath(dir_ + "/eval_model.onnx"),
                                     ModelSource::FromPath(dir_ + "/optimizer_model.onnx"));
    if (!s.ok()) return s.status();
    std::vector<float> x(batch * 64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 37) % 11) / 11.0f;
    std::vector<int64_t> labels(batch);
    for (int64_t i = 0; i < batch; ++i) labels[i] = i % 10;
    for (int step = 0; step < 3; ++step) {
      std::vector<Tensor> out;
      ONT_RETURN_IF_ERROR(s.value()->TrainStep({Tensor::FromVector(x, {batch, 64}), Tensor::FromVector(labels, {batch})}, &out));
      ONT_RETURN_IF_ERROR(s.value()->OptimizerStep());
      s.value()->LazyResetGrad();
    }
    params->clear();
    for (const auto& [name, p] : state.parameters) {
      params->insert(params->end(), p.data.data<float>(), p.data.data<float>() + p.data.NumElements());
    }
    return Status::OK();
  }

  std::string dir_;
  std::unique_ptr<CpuExecutionProvider> cpu_;
};

TEST_F(MemoryLimitTest, CapsStateAndIntermediatesAndNamesWhatWouldPassIt) {
  // Parameters: 64*256 + 256 + 256*10 + 10 floats = 76840 bytes; with gradients 153680; moments 153680 more.
  std::vector<float> unlimited, capped;
  ASSERT_TRUE(Train(0, 8, &unlimited).ok());

  Status state = Train(100000, 8, &capped);
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(state.ToString(), HasSubstr("parameters and gradient buffers need 153680 bytes, over the session's memory limit of 100000"));

  Status moments = Train(200000, 8, &capped);
  ASSERT_FALSE(moments.ok());
  EXPECT_THAT(moments.ToString(), HasSubstr("optimizer model: the moments of 4 parameters need 153680 bytes"));

  // Room for the state and a batch of 8, not for a batch of 4096 (its [4096, 256] activations are 4 MiB).
  const int64_t limit = 307360 + (2 << 20);
  ASSERT_TRUE(Train(limit, 8, &capped).ok());
  EXPECT_EQ(capped, unlimited) << "a cap that is not reached changed the results";
  Status big = Train(limit, 4096, &capped);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(big.ToString(), HasSubstr("training graph: value \""));
  EXPECT_THAT(big.ToString(), HasSubstr("over its limit of " + std::to_string(limit)));

  EXPECT_FALSE(Train(-1, 8, &capped).ok());
}

}  // namespace
}  // namespace ontrain
