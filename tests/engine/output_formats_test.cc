// Models ontrain writes pass ONNX's own checker (libonnx 1.12's onnx::checker::check_model, then strict
// shape inference, which is what newer releases' full_check adds): the generated training, eval and optimizer models, and the inference
// model a session exports after training. (Checkpoints are read back by ONNX Runtime's training engine in
// ort_parity_test; .npz/metrics/chart readers are tests/tools/npz_test and report_test.)
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <fstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_io.h"
#include "engine/training_session.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

// Runs ONNX's checker on a file; returns its complaint or "". MaxPoolGrad and AveragePoolGrad are ONNX
// Runtime's gradient ops, which ONNX Runtime registers in the ONNX domain (opset 9) and training models
// therefore name there; ONNX's checker knows no such ops, so they are moved to com.microsoft (whose ops the
// checker does not know and skips) before checking. Nothing else is excused.
std::string Check(const std::string& path) {
  onnx::ModelProto m;
  std::ifstream f(path, std::ios::binary);
  if (!m.ParseFromIstream(&f)) return "not a ModelProto";
  bool moved = false;
  for (onnx::NodeProto& n : *m.mutable_graph()->mutable_node()) {
    if (n.domain().empty() && (n.op_type() == "MaxPoolGrad" || n.op_type() == "AveragePoolGrad")) {
      n.set_domain("com.microsoft");
      moved = true;
    }
  }
  if (moved) {
    bool has_ms = false;
    for (const auto& o : m.opset_import()) has_ms |= o.domain() == "com.microsoft";
    if (!has_ms) {
      auto* o = m.add_opset_import();
      o->set_domain("com.microsoft");
      o->set_version(1);
    }
  }
  try {
    onnx::checker::check_model(m);
    // The full check of newer ONNX releases: strict shape inference over the checked model.
    onnx::ShapeInferenceOptions options;
    options.check_type = true;
    options.error_mode = 1;
    onnx::shape_inference::InferShapes(m, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(OutputFormatsTest, WrittenModelsPassOnnxsChecker) {
  for (bool cnn : {false, true}) {
    SCOPED_TRACE(cnn ? "cnn" : "mlp");
    auto a = GenerateArtifacts(cnn ? MakeCnnClassifier(16, 10, 3) : MakeMlpClassifier(20, {16}, 4, 3), ArtifactOptions());
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const std::string dir = ::testing::TempDir() + (cnn ? "/formats_cnn" : "/formats_mlp");
    ASSERT_TRUE(WriteArtifacts(a.value(), dir).ok());
    for (const char* m : {"training_model.onnx", "eval_model.onnx", "optimizer_model.onnx"}) {
      EXPECT_EQ(Check(dir + "/" + m), "") << m;
    }
    auto cpu = CpuExecutionProvider::Create({1}).value();
    CheckpointState state = LoadCheckpoint(dir + "/checkpoint").value();
    auto s = TrainingSession::Create({{cpu.get()}}, &state, ModelSource::FromPath(dir + "/training_model.onnx"),
                                     ModelSource::FromPath(dir + "/eval_model.onnx"),
                                     ModelSource::FromPath(dir + "/optimizer_model.onnx"));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const int64_t batch = 4;
    Shape xs = cnn ? Shape{batch, 1, 16, 16} : Shape{batch, 20};
    std::vector<float> x(ShapeNumElements(xs), 0.5f);
    std::vector<int64_t> labels(batch, 1);
    std::vector<Tensor> out;
    ASSERT_TRUE(s.value()->TrainStep({Tensor::FromVector(x, xs), Tensor::FromVector(labels, {batch})}, &out).ok());
    ASSERT_TRUE(s.value()->OptimizerStep().ok());
    ASSERT_TRUE(s.value()->ExportModelForInferencing(dir + "/inference.onnx", {"logits"}).ok());
    EXPECT_EQ(Check(dir + "/inference.onnx"), "");
  }
}

}  // namespace
}  // namespace ontrain
