// Finite-difference gradient checking (see gradient_check.h).
#include "tests/graph/gradient_check.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "graph/autodiff.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace gradcheck {

Tensor Random(const Shape& shape, uint32_t seed, double lo, double hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(static_cast<size_t>(ShapeNumElements(shape)));
  for (double& x : v) x = u(rng);
  return Tensor::FromVector(v, shape);
}

void AddWeightedLoss(Model* m, const Shape& y_shape, uint32_t seed) {
  m->graph.AddInitializer("loss_w", Random(y_shape, seed));
  m->graph.nodes.push_back(MakeNode("Mul", {"y", "loss_w"}, {"wy"}, {}, "loss_mul"));
  m->graph.nodes.push_back(MakeNode("ReduceSum", {"wy"}, {"loss"}, {AttrInt("keepdims", 0)}, "loss_sum"));
  m->graph.outputs = {TensorInfo("loss", DType::kFloat64, {})};
}

namespace {

double RunLoss(const Model& m, const NamedTensors& feeds, CpuExecutionProvider* cpu) {
  auto ex = Executor::Create(m, cpu);
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<Tensor> out;
  Status s = ex.value()->Run(ToNamedValues(feeds), {"loss"}, &out);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return out.empty() ? NAN : (out[0].dtype() == DType::kFloat64 ? out[0].data<double>()[0] : out[0].data<float>()[0]);
}

}  // namespace

void CheckGradients(Case c, double tol) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  ASSERT_TRUE(PrepareForGradients(&c.model).ok());
  Model forward = c.model;
  Model grad = c.model;
  Status built = BuildGradientGraph(&grad, "loss", c.xs);
  ASSERT_TRUE(built.ok()) << built.ToString();
  NamedTensors all = c.feeds;
  all.insert(all.end(), c.fixed.begin(), c.fixed.end());
  auto ex = Executor::Create(grad, cpu.get());
  ASSERT_TRUE(ex.ok()) << ex.status().ToString();
  std::vector<std::string> fetch;
  for (const auto& x : c.xs) fetch.push_back(x + "_grad");
  std::vector<Tensor> grads;
  Status run = ex.value()->Run(ToNamedValues(all), fetch, &grads);
  ASSERT_TRUE(run.ok()) << run.ToString();
  for (size_t k = 0; k < c.xs.size(); ++k) {
    SCOPED_TRACE(c.xs[k]);
    size_t fi = 0;
    while (all[fi].first != c.xs[k]) ++fi;
    const Tensor x = all[fi].second;
    ASSERT_EQ(grads[k].shape(), x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      const double h = 1e-6;
      NamedTensors plus = all, minus = all;
      plus[fi].second = x.Clone();
      minus[fi].second = x.Clone();
      plus[fi].second.data<double>()[i] += h;
      minus[fi].second.data<double>()[i] -= h;
      double fd = (RunLoss(forward, plus, cpu.get()) - RunLoss(forward, minus, cpu.get())) / (2 * h);
      double an = grads[k].data<double>()[i];
      EXPECT_NEAR(an, fd, tol * std::max(1.0, std::abs(fd))) << "element " << i;
    }
  }
}

std::vector<Tensor> BuiltGradients(Case c) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  std::vector<Tensor> grads;
  Status s = PrepareForGradients(&c.model);
  if (s.ok()) s = BuildGradientGraph(&c.model, "loss", c.xs);
  auto ex = Executor::Create(c.model, cpu.get());
  if (s.ok()) s = ex.status();
  NamedTensors all = c.feeds;
  all.insert(all.end(), c.fixed.begin(), c.fixed.end());
  std::vector<std::string> fetch;
  for (const auto& x : c.xs) fetch.push_back(x + "_grad");
  if (s.ok()) s = ex.value()->Run(ToNamedValues(all), fetch, &grads);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return grads;
}

Case ToFloat32(const Case& c) {
  auto convert = [](const Tensor& t) {
    if (t.dtype() != DType::kFloat64) return t;
    std::vector<float> v(static_cast<size_t>(t.NumElements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.data<double>()[i]);
    return Tensor::FromVector(v, t.shape());
  };
  Case f = c;
  for (ValueInfo& v : f.model.graph.inputs) if (v.dtype == DType::kFloat64) v.dtype = DType::kFloat32;
  for (ValueInfo& v : f.model.graph.outputs) if (v.dtype == DType::kFloat64) v.dtype = DType::kFloat32;
  for (auto& [name, t] : f.model.graph.initializers) t = convert(t);
  for (auto& [name, t] : f.feeds) t = convert(t);
  for (auto& [name, t] : f.fixed) t = convert(t);
  return f;
}

void CheckFloat32AgainstFloat64(const Case& c, double tol) {
  std::vector<Tensor> d64 = BuiltGradients(c), f32 = BuiltGradients(ToFloat32(c));
  ASSERT_EQ(d64.size(), c.xs.size());
  ASSERT_EQ(f32.size(), c.xs.size());
  for (size_t k = 0; k < c.xs.size(); ++k) {
    SCOPED_TRACE(c.xs[k]);
    ASSERT_EQ(f32[k].dtype(), DType::kFloat32);
    ASSERT_EQ(f32[k].shape(), d64[k].shape());
    double worst = 0;
    for (int64_t i = 0; i < d64[k].NumElements(); ++i) {
      const double want = d64[k].data<double>()[i], got = f32[k].data<float>()[i];
      worst = std::max(worst, std::abs(got - want) / std::max(1.0, std::abs(want)));
    }
    EXPECT_LT(worst, tol);
  }
}

Model Base() {
  Model m;
  m.opset_imports[""] = 17;
  return m;
}

}  // namespace gradcheck
}  // namespace ontrain
