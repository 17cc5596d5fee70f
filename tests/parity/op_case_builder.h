// What the op-case files share (op_cases.cc, op_cases_indexing.cc): the dtype lists and the Builder that
// appends cases and numbers their seeds, plus the families defined outside op_cases.cc.
#pragma once

#include <string>
#include <vector>

#include "tests/parity/op_cases.h"

namespace ontrain {
namespace parity {
namespace cases {

inline const std::vector<DType> kAllTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                             DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                             DType::kUInt8,   DType::kUInt16,  DType::kUInt32,  DType::kUInt64,
                                             DType::kBool};
inline const std::vector<DType> kF32F64 = {DType::kFloat32, DType::kFloat64};

class Builder {
 public:
  explicit Builder(std::vector<OpCase>* out) : out_(out) {}
  OpCase& Add(const std::string& name, const std::string& domain, const std::string& op, int opset,
              std::vector<Value> inputs, std::vector<DType> outputs, std::vector<onnx::AttributeProto> attrs = {}) {
    OpCase c;
    c.name = name;
    c.domain = domain;
    c.op = op;
    c.opset = opset;
    c.inputs = std::move(inputs);
    c.outputs = std::move(outputs);
    c.attrs = std::move(attrs);
    out_->push_back(std::move(c));
    return out_->back();
  }
  uint64_t seed() { return ++seed_; }
  // Seeds of family k's cases start from k << 20, so adding a case moves the inputs of later cases of its
  // own family only.
  void StartFamily(uint64_t k) { seed_ = k << 20; }

 private:
  std::vector<OpCase>* out_;
  uint64_t seed_ = 0;
};

// op_cases_conv.cc
void ConvPoolCases(Builder& b);     // Conv, FusedConv, ConvGrad, ConvTranspose, pooling and their gradients
void BatchNormCases(Builder& b);    // BatchNormalization, BatchNormInternal and the gradient

// op_cases_activations.cc
void ActivationCases(Builder& b);   // activations, trigonometry, IsNaN/IsInf/Not, PRelu, ArgMax/ArgMin, OneHot, NLL

// op_cases_indexing.cc
void IndexOpCases(Builder& b);      // ConstantOfShape, Einsum, Resize, ResizeGrad, Upsample
void RecurrentCases(Builder& b);    // RNN, GRU, LSTM and their training and gradient ops
void IndexCases(Builder& b);        // Trilu, CumSum, gathers, scatters, TopK, DepthToSpace, Pad 18/19

}  // namespace cases
}  // namespace parity
}  // namespace ontrain
