// Parity test helpers.
#include "tests/parity/parity_util.h"

#include <cmath>
#include <cstring>
#include <random>

#include "tests/test_util.h"

namespace ontrain {
namespace parity {

const std::string& CudaUnavailableReason() {
  static const std::string* reason = [] {
    auto api = LoadCudaProviderLibrary();
    if (!api.ok()) return new std::string("no CUDA provider: " + api.status().message());
    int count = 0;
    Status s = api.value()->CountDevices(&count);
    if (!s.ok()) return new std::string("no CUDA device: " + s.message());
    return new std::string();
  }();
  return *reason;
}

StatusOr<ProviderList> MakeProviders(bool cuda) { return MakeProviders(std::string(cuda ? "cuda" : "")); }

StatusOr<ProviderList> MakeProviders(const std::string& device, bool graph_capture, bool deterministic) {
  ProviderListOptions o;
  o.threads = 2;
  o.deterministic = deterministic;
  o.graph_capture = graph_capture;
  return CreateProviders(device.empty() ? std::vector<std::string>{"cpu"} : std::vector<std::string>{device, "cpu"}, o);
}

template <typename T>
void FillFloats(Tensor* t, std::mt19937_64* rng, double lo, double hi) {
  std::uniform_real_distribution<double> d(lo, hi);
  for (int64_t i = 0; i < t->NumElements(); ++i) t->data<T>()[i] = static_cast<T>(static_cast<float>(d(*rng)));
}

template <typename T>
void FillInts(Tensor* t, std::mt19937_64* rng, double lo, double hi) {
  int64_t a = static_cast<int64_t>(std::ceil(lo)), b = static_cast<int64_t>(std::ceil(hi)) - 1;
  if (b < a) b = a;
  std::uniform_int_distribution<int64_t> d(a, b);
  for (int64_t i = 0; i < t->NumElements(); ++i) t->data<T>()[i] = static_cast<T>(d(*rng));
}

Tensor Random(DType dtype, const Shape& shape, uint64_t seed, double lo, double hi) {
  Tensor t = Tensor::Allocate(dtype, shape, HostAllocator()).value();
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
  switch (dtype) {
    case DType::kFloat32: FillFloats<float>(&t, &rng, lo, hi); break;
    case DType::kFloat64: FillFloats<double>(&t, &rng, lo, hi); break;
    case DType::kFloat16: FillFloats<Float16>(&t, &rng, lo, hi); break;
    case DType::kBFloat16: FillFloats<BFloat16>(&t, &rng, lo, hi); break;
    case DType::kInt8: FillInts<int8_t>(&t, &rng, -100, 100); break;
    case DType::kInt16: FillInts<int16_t>(&t, &rng, -1000, 1000); break;
    case DType::kInt32: FillInts<int32_t>(&t, &rng, lo * 100, hi * 100); break;
    case DType::kInt64: FillInts<int64_t>(&t, &rng, lo * 100, hi * 100); break;
    case DType::kUInt8: FillInts<uint8_t>(&t, &rng, 0, 250); break;
    case DType::kUInt16: FillInts<uint16_t>(&t, &rng, 0, 60000); break;
    case DType::kUInt32: FillInts<uint32_t>(&t, &rng, 0, 1e9); break;
    case DType::kUInt64: FillInts<uint64_t>(&t, &rng, 0, 1e12); break;
    case DType::kBool: {
      std::bernoulli_distribution d(0.5);
      for (int64_t i = 0; i < t.NumElements(); ++i) t.data<bool>()[i] = d(rng);
      break;
    }
    default: break;
  }
  return t;
}

Tensor Ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype) {
  if (dtype == DType::kInt32) {
    std::vector<int32_t> v(values.begin(), values.end());
    return Tensor::FromVector(v, shape);
  }
  return Tensor::FromVector(values, shape);
}

double At(const Tensor& t, int64_t i) { return testing::ElementAsDouble(t, i); }

std::string Compare(const Tensor& expected, const Tensor& actual, const Tolerance& tol) {
  if (expected.dtype() != actual.dtype()) {
    return StrCat("dtype: expected ", DTypeName(expected.dtype()), ", got ", DTypeName(actual.dtype()));
  }
  if (expected.shape() != actual.shape()) {
    return StrCat("shape: expected ", ShapeToString(expected.shape()), ", got ", ShapeToString(actual.shape()));
  }
  bool exact = !IsFloatingPoint(expected.dtype());
  int64_t bad = 0, worst = -1;
  double worst_excess = 0;
  for (int64_t i = 0; i < expected.NumElements(); ++i) {
    double e = At(expected, i), a = At(actual, i);
    if ((std::isnan(e) && std::isnan(a)) || e == a) continue;
    double allowed = exact ? 0.0 : tol.atol + tol.rtol * std::abs(e);
    double excess = std::isnan(a) || std::isnan(e) ? INFINITY : std::abs(e - a) - allowed;
    if (excess <= 0) continue;
    ++bad;
    if (worst < 0 || excess > worst_excess) {
      worst = i;
      worst_excess = excess;
    }
  }
  if (bad == 0) return "";
  return StrCat(bad, " of ", expected.NumElements(), " elements differ; worst at ", worst, ": CPU ",
                At(expected, worst), ", CUDA ", At(actual, worst), " (atol ", tol.atol, ", rtol ", tol.rtol, ")");
}

KernelRun RunCpuKernel(KernelFactory factory, const Node& node, int64_t opset, const std::vector<Tensor>& inputs) {
  KernelRun r;
  NodeInfo info;
  info.node = &node;
  info.opset = opset;
  info.output_infos.assign(node.outputs.size(), nullptr);
  auto k = factory(info);
  if (!k.ok()) {
    r.status = k.status();
    return r;
  }
  r.kernel = std::move(k).value();
  std::vector<Value> values;
  values.reserve(inputs.size());
  std::vector<const Value*> ptrs;
  for (const Tensor& t : inputs) values.push_back(t.defined() ? Value(t) : Value());
  for (size_t i = 0; i < inputs.size(); ++i) ptrs.push_back(inputs[i].defined() ? &values[i] : nullptr);
  KernelContext ctx;
  ctx.Reset(ptrs, std::vector<bool>(node.outputs.size(), true), nullptr);
  r.status = r.kernel->Prepare(ctx);
  if (!r.status.ok()) return r;
  r.storage.resize(node.outputs.size() + 1);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const int o = static_cast<int>(i);
    const Shape& shape = ctx.declared_shape(o);
    r.storage[i].assign(static_cast<size_t>(ShapeNumElements(shape)) * DTypeSize(ctx.declared_dtype(o)) + 8, 0);
    ctx.outputs()[i] = Value(Tensor::View(ctx.declared_dtype(o), shape, r.storage[i].data()));
  }
  r.storage.back().assign(ctx.scratch_bytes() + 8, 0);
  ctx.set_scratch(r.storage.back().data());
  r.status = r.kernel->Compute(ctx);
  if (!r.status.ok()) return r;
  for (size_t i = 0; i < node.outputs.size(); ++i) r.outputs.push_back(ctx.outputs()[i].tensor());
  return r;
}

}  // namespace parity
}  // namespace ontrain
