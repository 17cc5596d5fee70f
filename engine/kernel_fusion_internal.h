// What the kernel fusions' source files share (not part of kernel_fusion.h): the Fuser, which scans the
// partitioned graph once per pattern, rewrites each match in place and finally drops the nodes a fusion
// absorbed. kernel_fusion.cc: the scans, the helpers, and the convolution, pooling, GELU and linear-layer
// fusions; kernel_fusion_norm.cc: Clip's gradient, and batch normalization with its activation;
// kernel_fusion_softmax.cc: the attention softmax's scaling and mask.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/kernel_fusion.h"

namespace ontrain {
namespace fusion {

constexpr const char* kMs = "com.microsoft";
constexpr const char* kOntrain = "ai.ontrain";

// Input `input` of node `node` reads a value.
struct Use {
  size_t node;
  size_t input;
};

class Fuser {
 public:
  Fuser(Model* model, const GraphPartition& partition, const std::vector<IExecutionProvider*>& providers);
  KernelFusionCounts Run();

 private:
  // Whether node i is (domain, op) and has not been fused away.
  bool Is(size_t i, const char* domain, const char* op) const;
  int Provider(size_t i) const;              // the provider the partition gave node i
  DType TypeOf(const std::string& v) const;  // value v's dtype, as the partition inferred it
  // Whether provider p has a kernel for (domain, op) at opset 1 whose type input has dtype t.
  bool Runs(int p, const char* domain, const char* op, DType t) const;
  // The readers of `v` that are still in the graph (uses_ follows every rewiring), or nullptr when it is a
  // graph output or has none.
  const std::vector<Use>* Readers(const std::string& v);
  // Points input k of node i at `v`, keeping uses_ current.
  void Rewire(size_t i, size_t k, const std::string& v);
  void Import(const char* domain);  // imports `domain` at version 1 if the model does not already
  // The node producing `v` (kept current as fusions move outputs), or -1.
  int ProducerOf(const std::string& v) const;
  // The declared dims of graph input or initializer `v`, all known; false otherwise.
  bool DeclaredDims(const std::string& v, std::vector<int64_t>* dims) const;
  // A scalar (rank 0) initializer that no feed can replace, or nullptr.
  const Tensor* ScalarConstant(const std::string& v) const;

  // The fusions, each described where it is defined (kernel_fusion.cc; Clip's gradient and batch
  // normalization with its activation: kernel_fusion_norm.cc). Each returns whether it rewrote the match.
  bool FuseActivation(size_t conv, const char* fused);
  bool FuseMaxPoolReluGrad(size_t grad);
  bool FuseMaxPoolReluConvGrad(size_t grad);
  bool FuseConvMaxPool(size_t conv);
  bool FuseGeluSlope(size_t gelu);
  bool FuseMatMulBias(size_t mm);
  bool CompactPoolIndices(size_t conv);
  bool FuseClipGrad(size_t where);
  bool FuseSoftmaxPrologue(size_t softmax);
  bool FuseSoftmaxGradEpilogue(size_t softmax_grad);
  bool FuseBatchNormActivation(size_t bn);
  // FuseBatchNormActivation's parts.
  bool FindActivationPair(const Node& b, int* act, int* grad);
  bool ClipBounds(const Node& a, const Node& gr, std::vector<onnx::AttributeProto>* attrs);
  // The softmax fusions' parts (kernel_fusion_softmax.cc).
  bool RankZero(const std::string& v, int depth) const;
  bool ScaleOf(int node, int p, const std::string& v, std::string* x, std::string* s, int64_t* op) const;
  bool MaskOf(int node, int p, const std::string& w, std::string* v, std::string* c, std::string* f,
              bool* fill_where) const;
  bool ReadOnlyBy(const std::string& v, size_t reader, std::vector<Use>* shapes);
  void BecomeFusedSoftmax(size_t i, const char* op, int64_t scale_op, bool fill_where, int mask_node, int scale_node);
  void RewriteBatchNormActivation(size_t bn, size_t act, size_t grad, size_t bg,
                                  const std::vector<onnx::AttributeProto>& attrs);

  Model& m_;
  Graph& g_;
  const GraphPartition& part_;
  const std::vector<IExecutionProvider*>& providers_;
  std::map<std::string, std::vector<Use>> uses_;
  std::vector<Use> live_;  // Readers' answer
  std::set<std::string> outputs_;
  std::map<std::string, size_t> producer_;
  std::set<size_t> removed_;
};

}  // namespace fusion
}  // namespace ontrain
