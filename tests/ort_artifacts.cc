// ONNX Runtime artifact lookup and the shared synthetic batches.
#include "tests/ort_artifacts.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "checkpoint/checkpoint_io.h"
#include "graph/artifacts.h"
#include "graph/model_io.h"
#include "graph/model_zoo.h"
#include "gtest/gtest.h"

namespace ontrain {
namespace testing {

std::string OrtArtifactDir(const std::string& set, std::string* why) {
  const char* root = std::getenv("ONTRAIN_ORT_ARTIFACTS");
  if (root == nullptr) {
    *why = "ONTRAIN_ORT_ARTIFACTS is not set (tools/test.sh sets it when ../shared/ort-artifacts exists)";
    return "";
  }
  std::string dir = std::string(root) + "/" + set;
  if (std::ifstream(dir + "/training_model.onnx").fail() && std::ifstream(dir + "/checkpoint").fail()) {
    *why = "artifact set " + dir + " not found";
    return "";
  }
  return dir;
}

Tensor SyntheticFloats(const Shape& shape, int step) {
  std::vector<float> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * step) * 0.8);
  return Tensor::FromVector(v, shape);
}

Tensor SyntheticTargets(const Shape& shape, int step) {
  std::vector<float> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::cos(0.11 * i + 0.7 * step) * 0.5);
  return Tensor::FromVector(v, shape);
}

Tensor SyntheticLabels(const Shape& shape, int step, int classes, DType dtype) {
  int64_t n = ShapeNumElements(shape);
  if (dtype == DType::kInt32) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>((7 * i + 3 * step) % classes);
    return Tensor::FromVector(v, shape);
  }
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = (7 * i + 3 * step) % classes;
  return Tensor::FromVector(v, shape);
}

const std::vector<ArtifactSet>& ReferenceSets() {
  static auto* sets = new std::vector<ArtifactSet>{
      {"ort-testdata-mlp", {{"input-0", "float", {4, 784}}, {"labels", "int32", {4}, 10}}, {}},
      {"carzh-web-mnist", {{"input", "float", {4, 784}}, {"labels", "int64", {4}, 10}}, {}},
      {"srij-lora", {{"input", "float", {4, 10}}, {"target", "target", {4, 2}}}, {}},
      {"srij-transformer-lora", {{"input", "float", {4, 32}}, {"labels", "int64", {4}, 32}},
       {"/dropout/Constant_output_0"}},
      {"seizureguard-cnn1d", {{"input", "float", {2, 18, 1024}}, {"labels", "int64", {2}, 2}}, {}},
      {"ort_mlp", {{"input", "float", {8, 6}}, {"labels", "int64", {8}, 3}}, {}, "tests/data/ort_mlp"},
      {"gen-mlp", {{"input", "float", {4, 784}}, {"labels", "int64", {4}, 10}}, {}, "", "mlp"},
      {"gen-cnn", {{"input", "float", {2, 1, 28, 28}}, {"labels", "int64", {2}, 10}}, {}, "", "cnn"},
      {"gen-bn", {{"input", "float", {8, 3, 6, 6}}, {"labels", "int64", {8}, 5}}, {}, "", "",
       "tests/data/torch/bn_dropout/forward.onnx"},
      {"gen-encoder", {{"input", "float", {4, 6, 16}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/encoder_layer/forward.onnx"},
      {"gen-padpool", {{"input", "float", {4, 2, 16}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/pad_pool/forward.onnx"},
      {"gen-unet", {{"input", "float", {2, 1, 8, 8}}, {"labels", "int64", {2, 8, 8}, 5}}, {}, "", "",
       "tests/data/torch/unet/forward.onnx"},
      // LayerNorm and GELU as PyTorch exports them at opset 14: the generator fuses both in the training model.
      {"gen-transformer", {{"input", "float", {4, 6, 8}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/transformer/forward.onnx"},
      // A -inf mask buffer (a constant, not a parameter) and attention written with Einsum. (The U-Net with
      // Resize and the recurrent fixtures are not here: onnxruntime-web 1.19.2 has no ResizeGrad,
      // LSTMTraining or GRUTraining kernels, and ontrain's RNNGrad is its own.)
      {"gen-causal-mask", {{"input", "float", {4, 6, 8}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/causal_mask/forward.onnx"},
      {"gen-einsum-attention", {{"input", "float", {4, 6, 8}}, {"labels", "int64", {4}, 5}}, {}, "", "",
       "tests/data/torch/einsum_attention/forward.onnx"},
  };
  // The built-in MLP with optimizer models that surround the optimizer node with other nodes.
  for (const char* name : {"lr-scaled", "warmup", "clip", "sequence-ops", "sgd-clip-lr"}) {
    std::string file = std::string(name) == "sgd-clip-lr" ? "sgd_clip_lr" : "adamw_" + std::string(name);
    for (char& c : file) if (c == '-') c = '_';
    sets->push_back({std::string("opt-") + name, {{"input", "float", {4, 784}}, {"labels", "int64", {4}, 10}}, {}, "",
                     "mlp", "", "tests/data/optimizer_models/" + file + ".onnx"});
  }
  return *sets;
}

const ArtifactSet& FindSet(const std::string& name) {
  for (const ArtifactSet& s : ReferenceSets()) {
    if (s.name == name) return s;
  }
  std::abort();  // a test names a set that does not exist: the test itself is broken
}

std::vector<Tensor> MakeBatch(const ArtifactSet& set, int step) {
  std::vector<Tensor> batch;
  for (const InputSpec& in : set.inputs) {
    if (in.kind == "float") batch.push_back(SyntheticFloats(in.shape, step));
    else if (in.kind == "target") batch.push_back(SyntheticTargets(in.shape, step));
    else batch.push_back(SyntheticLabels(in.shape, step, in.classes, in.kind == "int32" ? DType::kInt32 : DType::kInt64));
  }
  return batch;
}

namespace {

// The model at `path` with the named initializers set to zero (those it has; `required` ones must exist).
StatusOr<ModelSource> PatchedModel(const std::string& path, const std::vector<std::string>& zero, bool required) {
  if (zero.empty()) return ModelSource::FromPath(path);
  ONT_ASSIGN_OR_RETURN(Model m, LoadModel(path));
  for (const std::string& name : zero) {
    auto it = m.graph.initializers.find(name);
    if (it == m.graph.initializers.end()) {
      if (required) return NotFound("initializer ", name, " in ", path);
      continue;
    }
    Tensor z = it->second.Clone();
    std::memset(z.raw_data(), 0, z.SizeInBytes());
    it->second = z;
  }
  std::string bytes;
  ModelToProto(m).SerializeToString(&bytes);
  return ModelSource::FromBytes(bytes);
}

}  // namespace

StatusOr<LoadedSet> LoadSet(const ArtifactSet& set, std::string* why) {
  std::string dir = set.local_dir;
  if (set.generate.empty() && set.model.empty() && dir.empty()) {
    dir = OrtArtifactDir(set.name, why);
    if (dir.empty()) return NotFound(*why);
  }
  if (!set.generate.empty() || !set.model.empty()) {  // what `ontrain generate --builtin/--model` writes
    dir = ::testing::TempDir() + "/" + set.name;
    Model forward;
    if (!set.model.empty()) {
      ONT_ASSIGN_OR_RETURN(forward, LoadModel(set.model));
    } else {
      forward = set.generate == "mlp" ? MakeMlpClassifier(784, {256}, 10, 0) : MakeCnnClassifier(28, 10, 0);
    }
    ONT_ASSIGN_OR_RETURN(Artifacts artifacts, GenerateArtifacts(forward, ArtifactOptions()));
    ONT_RETURN_IF_ERROR(WriteArtifacts(artifacts, dir));
  }
  LoadedSet out;
  ONT_ASSIGN_OR_RETURN(out.state, LoadCheckpoint(dir + "/checkpoint"));
  ONT_ASSIGN_OR_RETURN(out.train, PatchedModel(dir + "/training_model.onnx", set.zero_dropout, true));
  // The eval model runs Dropout in inference mode and may not have the initializer.
  ONT_ASSIGN_OR_RETURN(out.eval, PatchedModel(dir + "/eval_model.onnx", set.zero_dropout, false));
  out.optimizer = ModelSource::FromPath(set.optimizer_model.empty() ? dir + "/optimizer_model.onnx" : set.optimizer_model);
  return out;
}

}  // namespace testing
}  // namespace ontrain
