// The model and one-node runners and tensor makers that the CPU kernel tests share (grad_kernels_test,
// float_kernels_test, conv_grad_paths_test, winograd_test, cpu_kernels_test, conv_kernels_test): run through
// the executor on the CPU provider, at a chosen thread count.
#pragma once

#include <random>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace kernel_test {

constexpr const char* kMs = "com.microsoft";

struct Io {
  std::string name;
  Tensor value;
};

// A float64 tensor's values rounded to float32, and a float32 tensor's values widened to float64.
inline Tensor AsFloat(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<double>()[i]);
  return Tensor::FromVector(v, t.shape());
}
inline Tensor AsDouble(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.NumElements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<float>()[i];
  return Tensor::FromVector(v, t.shape());
}

// Runs `m` on the CPU provider at `threads` threads and returns `fetch` (all its outputs when empty), copied
// so that they outlive the executor; an error fails the test.
inline std::vector<Tensor> RunModel(const Model& m, const NamedTensors& feeds, std::vector<std::string> fetch = {},
                                    int threads = 2) {
  auto cpu = CpuExecutionProvider::Create({threads}).value();
  auto ex = Executor::Create(m, cpu.get());
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  if (!ex.ok()) return {};
  if (fetch.empty()) fetch = ex.value()->output_names();
  std::vector<Tensor> out;
  Status s = ex.value()->Run(ToNamedValues(feeds), fetch, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  for (Tensor& t : out) t = t.Clone();
  return out;
}

// A model of one node with the given inputs (named in order; their values go to *feeds) and outputs "o<i>".
inline Model NodeModel(const std::string& op, const std::string& domain, const std::vector<Io>& inputs,
                       int num_outputs, const std::vector<onnx::AttributeProto>& attrs, int64_t opset,
                       const std::vector<ValueInfo>& output_infos, NamedTensors* feeds, std::vector<std::string>* outs) {
  Model m;
  m.opset_imports[""] = opset;
  m.opset_imports[kMs] = 1;
  std::vector<std::string> in_names;
  for (const Io& io : inputs) {
    in_names.push_back(io.name);
    if (io.name.empty()) continue;
    ValueInfo v;
    v.name = io.name;
    v.dtype = io.value.dtype();
    m.graph.inputs.push_back(v);
    feeds->push_back({io.name, io.value});
  }
  for (int i = 0; i < num_outputs; ++i) {
    outs->push_back("o" + std::to_string(i));
    ValueInfo v;
    v.name = outs->back();
    for (const ValueInfo& oi : output_infos) if (oi.name == v.name) v = oi;
    m.graph.outputs.push_back(v);
  }
  m.graph.nodes.push_back(MakeNode(op, in_names, *outs, attrs, "node", domain));
  return m;
}

// Runs one node with the given inputs (named in order) and returns its outputs (all named "o<i>").
inline std::vector<Tensor> RunNode(const std::string& op, const std::string& domain, const std::vector<Io>& inputs,
                            int num_outputs, const std::vector<onnx::AttributeProto>& attrs = {}, int64_t opset = 17,
                            const std::vector<ValueInfo>& output_infos = {}, int threads = 1) {
  NamedTensors feeds;
  std::vector<std::string> outs;
  Model m = NodeModel(op, domain, inputs, num_outputs, attrs, opset, output_infos, &feeds, &outs);
  SCOPED_TRACE(op);
  return RunModel(m, feeds, outs, threads);
}

// The status of running one node as RunNode does (creation or run), for inputs a kernel must refuse.
inline Status TryRunNode(const std::string& op, const std::string& domain, const std::vector<Io>& inputs,
                         int num_outputs, const std::vector<onnx::AttributeProto>& attrs = {}, int64_t opset = 17) {
  NamedTensors feeds;
  std::vector<std::string> outs;
  Model m = NodeModel(op, domain, inputs, num_outputs, attrs, opset, {}, &feeds, &outs);
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get());
  if (!ex.ok()) return ex.status();
  std::vector<Tensor> out;
  return ex.value()->Run(ToNamedValues(feeds), outs, &out);
}

inline Tensor Random(const Shape& shape, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (double& x : v) x = u(rng);
  return Tensor::FromVector(v, shape);
}

// n floats in [-1, 1) from a linear congruential sequence: the same values on every platform and library.
inline std::vector<float> Uniform(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) {
    seed = seed * 1664525u + 1013904223u;
    f = static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  }
  return v;
}

}  // namespace kernel_test
}  // namespace ontrain
