// What the CUDA-vs-CPU parity tests share: whether this machine can run the CUDA provider (and why not),
// provider lists for each side, seeded random tensors of any dtype, and comparisons with a stated
// tolerance that report the worst element.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "engine/provider_list.h"
#include "graph/graph.h"
#include "providers/kernel.h"

namespace ontrain {
namespace parity {

// "" when a CUDA device can be used; otherwise why not (no provider library in this build, no driver, no
// device), for GTEST_SKIP.
const std::string& CudaUnavailableReason();

// {cpu} or {cuda, cpu}; deterministic mode, two CPU threads, graph capture on.
StatusOr<ProviderList> MakeProviders(bool cuda);
// {device, cpu} for a provider name ("cuda", "sim"), or {cpu} for "".
StatusOr<ProviderList> MakeProviders(const std::string& device, bool graph_capture = true, bool deterministic = true);

// Seeded random values: floats uniform in [lo, hi); integers in [lo, hi); bools half true; other dtypes
// (float16, bfloat16) from float values. The same (dtype, shape, seed) always gives the same tensor.
Tensor Random(DType dtype, const Shape& shape, uint64_t seed, double lo = -1.0, double hi = 1.0);

// An int64 (or int32) tensor of the given values.
Tensor Ints(const std::vector<int64_t>& values, const Shape& shape, DType dtype = DType::kInt64);

struct Tolerance {
  double atol = 1e-5;
  double rtol = 1e-4;
};

// "" when `actual` matches `expected` (same dtype and shape; integers and bools exactly; floats within
// atol + rtol |expected|, NaN matching NaN); else the count of mismatches and the worst one.
std::string Compare(const Tensor& expected, const Tensor& actual, const Tolerance& tol);

// Element i as double.
double At(const Tensor& t, int64_t i);

// One CPU kernel made by `factory` for `node`, run once on `inputs` (an undefined tensor is an omitted
// input) with every output requested; the outputs live in `storage`, and the kernel is kept for what it
// planned. `status` is the first failure (creation, Prepare or Compute), outputs empty then.
struct KernelRun {
  Status status;
  std::unique_ptr<OpKernel> kernel;
  std::vector<Tensor> outputs;
  std::vector<std::vector<uint8_t>> storage;
};
KernelRun RunCpuKernel(KernelFactory factory, const Node& node, int64_t opset, const std::vector<Tensor>& inputs);

}  // namespace parity
}  // namespace ontrain
