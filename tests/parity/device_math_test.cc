// The CUDA kernels' per-element bodies (providers/cuda/kernels/device_math.h), run on the host over every
// output with the arguments the CUDA kernels build (device_plans.h), against the CPU kernels: Einsum's
// direct sum, Resize and ResizeGrad. This checks their index arithmetic, tables and summation order on any
// machine; the launches themselves are checked by op_parity_test on a GPU. Runs without a CUDA toolkit.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/value.h"
#include "graph/builder.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/plans.h"
#include "providers/cuda/kernels/device_math.h"
#include "providers/cuda/kernels/device_plans.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace {

using cuda::EinsumArgs;
using cuda::ResizeArgs;

using Ran = parity::KernelRun;

Ran RunCpu(KernelFactory factory, const Node& node, int64_t opset, const std::vector<Tensor>& inputs) {
  Ran r = parity::RunCpuKernel(factory, node, opset, inputs);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  return r;
}

Node MakeNode(const std::string& op, const std::string& domain, int inputs, std::vector<onnx::AttributeProto> attrs) {
  Node n;
  n.op_type = op;
  n.domain = domain;
  n.name = op;
  for (int i = 0; i < inputs; ++i) n.inputs.push_back("x" + std::to_string(i));
  n.outputs = {"y"};
  for (auto& a : attrs) n.attributes[a.name()] = a;
  return n;
}

// Einsum: every equation through the direct loop's plan, against the CPU kernel. Equations the CPU runs by
// its own direct loop must match bit for bit; the GEMM-path ones (two operands, no diagonal, no
// broadcast) within float rounding of a different summation.
struct EinsumCase {
  std::string equation;
  std::vector<Shape> shapes;
  bool cpu_direct;
};

template <typename T>
void CheckEinsum(const EinsumCase& c, DType dt) {
  SCOPED_TRACE(c.equation + " " + DTypeName(dt));
  std::vector<Tensor> inputs;
  uint64_t seed = 1;
  for (const Shape& s : c.shapes) inputs.push_back(parity::Random(dt, s, seed++));
  Node node = MakeNode("Einsum", "", static_cast<int>(inputs.size()), {AttrString("equation", c.equation)});
  Ran r = RunCpu(cpu::kEinsum, node, 12, inputs);
  ASSERT_EQ(r.outputs.size(), 1u);
  const cpu::EinsumDirectPlan* plan = cpu::EinsumPlanOf(*r.kernel);
  ASSERT_NE(plan, nullptr);
  EinsumArgs a;
  ASSERT_TRUE(cuda::MakeEinsumArgs(*plan, &a).ok());
  cuda::EinsumOperands<T> ops = {};
  for (size_t k = 0; k < inputs.size(); ++k) ops.op[k] = inputs[k].data<T>();
  const Tensor& y = r.outputs[0];
  int mismatches = 0;
  for (int64_t o = 0; o < y.NumElements(); ++o) {
    const T got = cuda::EinsumElement<T>(a, ops, o), want = y.data<T>()[o];
    if (c.cpu_direct) {
      if (std::memcmp(&got, &want, sizeof(T)) != 0 && mismatches++ < 5) ADD_FAILURE() << "output " << o << ": " << got << " vs " << want;
    } else if (std::abs(static_cast<double>(got) - static_cast<double>(want)) > 1e-5 * (1 + std::abs(static_cast<double>(want))) &&
               mismatches++ < 5) {
      ADD_FAILURE() << "output " << o << ": " << got << " vs " << want;
    }
  }
}

TEST(DeviceMathTest, EinsumMatchesCpu) {
  const std::vector<EinsumCase> cases = {
      {"bhid,bhjd->bhij", {{2, 3, 5, 4}, {2, 3, 6, 4}}, false},  // attention scores
      {"bhij,bhjd->bhid", {{2, 3, 5, 6}, {2, 3, 6, 4}}, false},
      {"ij,jk->ik", {{7, 5}, {5, 3}}, false},
      {"ij->ji", {{4, 6}}, true},
      {"ii->i", {{5, 5}}, true},                                   // diagonal
      {"bii->b", {{3, 4, 4}}, true},                               // batched trace
      {"iij,jk->ik", {{3, 3, 4}, {4, 2}}, true},                   // diagonal in a product
      {"ij,jk,kl->il", {{3, 4}, {4, 5}, {5, 2}}, true},            // three operands
      {"...ij,...jk->...ik", {{2, 3, 4}, {1, 4, 5}}, true},        // broadcast under an ellipsis
      {"i,i->", {{9}, {9}}, false},                                // dot product: a scalar output
      {"ij", {{3, 4}}, true},                                      // implicit output
      {"bij->", {{0, 3, 4}}, true},                                // an empty sum
  };
  for (const EinsumCase& c : cases) {
    CheckEinsum<float>(c, DType::kFloat32);
    CheckEinsum<double>(c, DType::kFloat64);
  }
}

// Resize and ResizeGrad over the modes and transformations that matter, against the CPU kernels (the same
// sums: Resize bit for bit; ResizeGrad's gather adds an input's contributions in a slightly different
// order where edge clamping gives one output two taps on the same input, so within double rounding).
struct ResizeCase {
  std::string name;
  Shape x;
  std::vector<float> scales;  // empty: sizes
  std::vector<int64_t> sizes;
  std::vector<onnx::AttributeProto> attrs;
  std::vector<float> roi;
};

void CheckResize(const ResizeCase& c) {
  SCOPED_TRACE(c.name);
  const Tensor x = parity::Random(DType::kFloat32, c.x, 7);
  const Tensor roi = c.roi.empty() ? Tensor() : Tensor::FromVector<float>(c.roi, {static_cast<int64_t>(c.roi.size())});
  const Tensor scales =
      c.scales.empty() ? Tensor() : Tensor::FromVector<float>(c.scales, {static_cast<int64_t>(c.scales.size())});
  const Tensor sizes =
      c.sizes.empty() ? Tensor() : Tensor::FromVector<int64_t>(c.sizes, {static_cast<int64_t>(c.sizes.size())});
  Node fwd = MakeNode("Resize", "", 4, c.attrs);
  Ran r = RunCpu(cpu::kResize, fwd, 13, {x, roi, scales, sizes});
  ASSERT_EQ(r.outputs.size(), 1u);
  const Tensor& y = r.outputs[0];
  cpu::ResizePlanView view;
  ASSERT_TRUE(cpu::ResizePlanOf(*r.kernel, &view));
  ResizeArgs a;
  cuda::ResizeHostTables tables;
  ASSERT_TRUE(cuda::MakeResizeArgs(view, &a, &tables).ok());
  int bad = 0;
  for (int64_t o = 0; o < y.NumElements(); ++o) {
    const float got = cuda::ResizeElement<float>(a, tables.View(), x.data<float>(), o), want = y.data<float>()[o];
    if (std::memcmp(&got, &want, sizeof(float)) != 0 && bad++ < 5) ADD_FAILURE() << "Resize output " << o << ": " << got << " vs " << want;
  }
  // The gradient of a random dY, with the scales the forward pass used (dY's shape over X's without them).
  const Tensor dy = parity::Random(DType::kFloat32, y.shape(), 11);
  Node grad = MakeNode("ResizeGrad", "com.microsoft", 4, c.attrs);
  Ran g = RunCpu(cpu::kResizeGrad, grad, 1, {dy, x, roi, scales});
  ASSERT_EQ(g.outputs.size(), 1u);
  const Tensor& dx = g.outputs[0];
  ASSERT_TRUE(cpu::ResizePlanOf(*g.kernel, &view));
  ASSERT_TRUE(cuda::MakeResizeArgs(view, &a, &tables).ok());
  bad = 0;
  for (int64_t i = 0; i < dx.NumElements(); ++i) {
    const float got = cuda::ResizeGradElement<float>(a, tables.View(), dy.data<float>(), i), want = dx.data<float>()[i];
    if (std::abs(got - want) > 1e-6f * (1 + std::abs(want)) && bad++ < 5) {
      ADD_FAILURE() << "ResizeGrad element " << i << ": " << got << " vs " << want;
    }
  }
}

TEST(DeviceMathTest, ResizeAndItsGradientMatchCpu) {
  auto mode = [](const char* m) { return AttrString("mode", m); };
  auto ct = [](const char* t) { return AttrString("coordinate_transformation_mode", t); };
  const std::vector<ResizeCase> cases = {
      {"nearest_x2", {2, 3, 4, 5}, {1, 1, 2, 2}, {}, {mode("nearest")}, {}},
      {"nearest_asymmetric_floor", {1, 2, 5, 3}, {1, 1, 2, 3}, {}, {mode("nearest"), ct("asymmetric"), AttrString("nearest_mode", "floor")}, {}},
      {"bilinear_half_pixel_up", {2, 2, 4, 5}, {1, 1, 2, 2}, {}, {mode("linear")}, {}},
      {"bilinear_align_corners", {1, 3, 5, 4}, {}, {1, 3, 9, 7}, {mode("linear"), ct("align_corners")}, {}},
      {"bilinear_pytorch_half_pixel_down", {1, 2, 8, 6}, {}, {1, 2, 3, 4}, {mode("linear"), ct("pytorch_half_pixel")}, {}},
      {"cubic", {1, 1, 6, 5}, {1, 1, 1.5f, 2}, {}, {mode("cubic")}, {}},
      {"cubic_exclude_outside", {1, 1, 4, 4}, {1, 1, 2, 2}, {}, {mode("cubic"), AttrInt("exclude_outside", 1)}, {}},
      {"trilinear", {1, 1, 3, 4, 2}, {1, 1, 2, 1.5f, 2}, {}, {mode("linear")}, {}},
      {"tf_crop_and_resize", {1, 1, 6, 6}, {}, {1, 1, 5, 4},
       {mode("linear"), ct("tf_crop_and_resize"), AttrFloat("extrapolation_value", 2.5f)},
       {0, 0, -0.2f, 0.3f, 1, 1, 0.8f, 1.3f}},
  };
  for (const ResizeCase& c : cases) CheckResize(c);
}

// The tables' transpose is checked on its own: every (input coordinate, output coordinate, weight) of the
// forward taps appears exactly once in the inverse lists, in output order.
TEST(DeviceMathTest, ResizeInverseTapsAreTheTranspose) {
  const Tensor x = parity::Random(DType::kFloat32, {1, 1, 5, 7}, 3);
  Node fwd = MakeNode("Resize", "", 4, {AttrString("mode", "cubic")});
  Ran r = RunCpu(cpu::kResize, fwd, 13, {x, Tensor(), Tensor::FromVector<float>({1, 1, 1.7f, 0.6f}, {4}), Tensor()});
  cpu::ResizePlanView view;
  ASSERT_TRUE(cpu::ResizePlanOf(*r.kernel, &view));
  ResizeArgs a;
  cuda::ResizeHostTables t;
  ASSERT_TRUE(cuda::MakeResizeArgs(view, &a, &t).ok());
  for (int d = 0; d < a.rank; ++d) {
    const cpu::AxisTaps& taps = (*view.taps)[d];
    std::vector<std::tuple<int64_t, int64_t, double>> fwd_list, inv_list;
    for (int64_t j = 0; j < a.out[d]; ++j)
      for (int64_t p = taps.begin[j]; p < taps.begin[j + 1]; ++p) fwd_list.emplace_back(taps.index[p], j, taps.weight[p]);
    for (int64_t i = 0; i < a.in[d]; ++i) {
      for (int64_t p = t.ints[a.inv_begin[d] + i]; p < t.ints[a.inv_begin[d] + i + 1]; ++p) {
        inv_list.emplace_back(i, t.ints[a.inv_out[d] + p], t.weights[a.inv_weight[d] + p]);
        if (p > t.ints[a.inv_begin[d] + i]) {
          EXPECT_LE(t.ints[a.inv_out[d] + p - 1], t.ints[a.inv_out[d] + p]);
        }
      }
    }
    std::stable_sort(fwd_list.begin(), fwd_list.end(),
                     [](const auto& l, const auto& r) { return std::get<0>(l) < std::get<0>(r); });
    EXPECT_EQ(fwd_list, inv_list) << "axis " << d;
  }
}


// ---- Index ops -------------------------------------------------------------------------------------------

bool SameBits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw_data(), b.raw_data(), a.SizeInBytes()) == 0;
}

Tensor Like(const Tensor& t, float fill) {
  Tensor out = Tensor::FromVector<float>(std::vector<float>(static_cast<size_t>(t.NumElements()), fill), t.shape());
  return out;
}

TEST(DeviceMathTest, TriluAndCumSumMatchCpu) {
  const Tensor x = parity::Random(DType::kFloat32, {2, 4, 5}, 21);
  for (int upper : {0, 1}) {
    for (int64_t k : {-2, 0, 3}) {
      Node n = MakeNode("Trilu", "", 2, {AttrInt("upper", upper)});
      Ran r = RunCpu(cpu::kTrilu, n, 14, {x, Tensor::FromVector<int64_t>({k}, {})});
      cuda::TriluArgs a;
      a.upper = upper != 0, a.rows = 4, a.cols = 5, a.k = k;
      Tensor got = Like(x, 9);
      for (int64_t o = 0; o < x.NumElements(); ++o) got.data<float>()[o] = cuda::TriluKeeps(a, o) ? x.data<float>()[o] : 0.0f;
      EXPECT_TRUE(SameBits(got, r.outputs[0])) << "upper " << upper << " k " << k;
    }
  }
  for (int64_t axis : {0, 1, 2}) {
    for (int flags = 0; flags < 4; ++flags) {
      const bool exclusive = flags & 1, reverse = flags & 2;
      Node n = MakeNode("CumSum", "", 2, {AttrInt("exclusive", exclusive), AttrInt("reverse", reverse)});
      Ran r = RunCpu(cpu::kCumSum, n, 14, {x, Tensor::FromVector<int64_t>({axis}, {})});
      const cpu::AxisSplit sp = cpu::SplitAtAxis(x.shape(), axis);
      Tensor got = Like(x, 9);
      for (int64_t line = 0; line < sp.outer * sp.inner; ++line) {
        cuda::CumSumLine<float>(x.data<float>(), got.data<float>(), line, sp.len, sp.inner, exclusive, reverse);
      }
      EXPECT_TRUE(SameBits(got, r.outputs[0])) << "axis " << axis << " flags " << flags;
    }
  }
}

TEST(DeviceMathTest, ElementsOpsMatchCpu) {
  const Tensor data = parity::Random(DType::kFloat32, {3, 4, 5}, 31);
  // indices along axis 1 with repeats and negative values
  std::vector<int64_t> iv;
  for (int64_t i = 0; i < 3 * 3 * 5; ++i) iv.push_back((i * 7) % 4 - (i % 3 == 0 ? 4 : 0));
  const Tensor idx = Tensor::FromVector<int64_t>(iv, {3, 3, 5});
  cuda::ElementsArgs a;
  ASSERT_TRUE(cuda::MakeElementsArgs(data.shape(), idx.shape(), 1, &a).ok());
  {
    Node n = MakeNode("GatherElements", "", 2, {AttrInt("axis", 1)});
    Ran r = RunCpu(cpu::kGatherElements, n, 13, {data, idx});
    Tensor got = Like(r.outputs[0], 9);
    for (int64_t o = 0; o < idx.NumElements(); ++o) {
      const int64_t off = cuda::ElementsOffset(a, idx.raw_data(), true, o);
      got.data<float>()[o] = off >= 0 ? data.data<float>()[off] : 0.0f;
    }
    EXPECT_TRUE(SameBits(got, r.outputs[0]));
  }
  const Tensor updates = parity::Random(DType::kFloat32, idx.shape(), 32);
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    Node n = MakeNode("ScatterElements", "", 3, {AttrInt("axis", 1), AttrString("reduction", red)});
    Ran r = RunCpu(cpu::kScatterElements, n, 18, {data, idx, updates});
    Tensor got = data.Clone();
    const int code = std::string(red) == "none" ? cuda::kScatterNone : std::string(red) == "add" ? cuda::kScatterAdd
                   : std::string(red) == "mul" ? cuda::kScatterMul : std::string(red) == "max" ? cuda::kScatterMax
                                                                       : cuda::kScatterMin;
    // lines in reverse order: the result must not depend on the order lines run in
    const int64_t lines = idx.NumElements() / idx.dim(1);
    for (int64_t line = lines - 1; line >= 0; --line) {
      cuda::ScatterElementsLine<float>(a, idx.raw_data(), true, updates.data<float>(), got.data<float>(), code, line);
    }
    EXPECT_TRUE(SameBits(got, r.outputs[0])) << red;
  }
}

TEST(DeviceMathTest, NdOpsMatchCpu) {
  const Tensor data = parity::Random(DType::kFloat32, {2, 3, 4, 5}, 41);
  // batch_dims 1: indices [2, 4, 2] address [3, 4] and gather slices of 5; repeats and a negative index
  const Tensor idx = Tensor::FromVector<int32_t>({0, 1, 2, 3, 0, 1, -1, 0, 1, 1, 1, 1, 2, -4, 0, 0}, {2, 4, 2});
  cuda::NdArgs a;
  ASSERT_TRUE(cuda::MakeNdArgs(data.shape(), idx.shape(), 1, &a).ok());
  Node g = MakeNode("GatherND", "", 2, {AttrInt("batch_dims", 1)});
  Ran r = RunCpu(cpu::kGatherND, g, 13, {data, idx});
  const Tensor& y = r.outputs[0];
  Tensor got = Like(y, 9);
  for (int64_t o = 0; o < y.NumElements(); ++o) {
    const int64_t e = o % a.slice, tuple = o / a.slice;
    const int64_t off = cuda::NdOffset(a, idx.raw_data(), false, tuple / a.per_batch, tuple % a.per_batch);
    got.data<float>()[o] = off >= 0 ? data.data<float>()[off + e] : 0.0f;
  }
  EXPECT_TRUE(SameBits(got, y));
  // GatherNDGrad: the repeated tuple adds twice
  const Tensor dy = parity::Random(DType::kFloat32, y.shape(), 42);
  Node gg = MakeNode("GatherNDGrad", "com.microsoft", 3, {AttrInt("batch_dims", 1)});
  Ran rg = RunCpu(cpu::kGatherNDGrad, gg, 1, {Tensor::FromVector<int64_t>({2, 3, 4, 5}, {4}), idx, dy});
  Tensor dx = Like(data, 0);
  for (int64_t col = a.batch * a.slice - 1; col >= 0; --col) {
    cuda::NdScatterColumn<float>(a, idx.raw_data(), false, dy.data<float>(), dx.data<float>(), cuda::kScatterAdd, col);
  }
  EXPECT_TRUE(SameBits(dx, rg.outputs[0]));
  // ScatterND (batch_dims 0) with a duplicate tuple: the last update wins, or both add
  const Tensor sidx = Tensor::FromVector<int64_t>({1, 2, 0, 0, 1, 2, -1, -3}, {4, 2});
  const Tensor up = parity::Random(DType::kFloat32, {4, 4, 5}, 43);
  cuda::NdArgs s;
  ASSERT_TRUE(cuda::MakeNdArgs(data.shape(), sidx.shape(), 0, &s).ok());
  for (const char* red : {"none", "add"}) {
    Node n = MakeNode("ScatterND", "", 3, {AttrString("reduction", red)});
    Ran rs = RunCpu(cpu::kScatterND, n, 18, {data, sidx, up});
    Tensor out = data.Clone();
    for (int64_t col = 0; col < s.batch * s.slice; ++col) {
      cuda::NdScatterColumn<float>(s, sidx.raw_data(), true, up.data<float>(), out.data<float>(),
                                   std::string(red) == "add" ? cuda::kScatterAdd : cuda::kScatterNone, col);
    }
    EXPECT_TRUE(SameBits(out, rs.outputs[0])) << red;
  }
}

TEST(DeviceMathTest, TopKMatchesCpu) {
  Tensor x = parity::Random(DType::kFloat32, {3, 7, 4}, 51);
  float* px = x.data<float>();
  px[0] = px[4] = px[8];  // ties along axis 1
  px[12] = std::nanf("");
  px[30] = std::nanf("");
  for (int largest : {0, 1}) {
    for (int sorted : {0, 1}) {
      for (int64_t k : {0, 1, 3, 7}) {
        Node n = MakeNode("TopK", "", 2, {AttrInt("axis", 1), AttrInt("largest", largest), AttrInt("sorted", sorted)});
        n.outputs = {"values", "indices"};
        Ran r = RunCpu(cpu::kTopK, n, 11, {x, Tensor::FromVector<int64_t>({k}, {1})});
        ASSERT_EQ(r.outputs.size(), 2u);
        Tensor values = Like(r.outputs[0], 9);
        Tensor indices = Tensor::FromVector<int64_t>(std::vector<int64_t>(static_cast<size_t>(r.outputs[1].NumElements()), -5),
                                                     r.outputs[1].shape());
        for (int64_t line = 0; line < 3 * 4; ++line) {
          cuda::TopKLine<float>(x.data<float>(), values.data<float>(), indices.data<int64_t>(), 7, 4, k, largest, sorted, line);
        }
        EXPECT_TRUE(SameBits(values, r.outputs[0])) << "largest " << largest << " sorted " << sorted << " k " << k;
        EXPECT_TRUE(SameBits(indices, r.outputs[1])) << "largest " << largest << " sorted " << sorted << " k " << k;
      }
    }
  }
}

}  // namespace
}  // namespace ontrain
