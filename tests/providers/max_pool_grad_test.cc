// MaxPoolGrad and ai.ontrain MaxPoolReluGrad on 2x2 windows at stride 2, where the CPU provider writes each
// window whole (vrows.h, VPlanesMaxUnpool2x2) instead of zeroing dX and scattering: the same bits as the
// scatter, checked against a naive one.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"

namespace ontrain {
namespace {

// 2x2 windows at stride 2, as MaxPool writes their indices: MaxPoolGrad and ai.ontrain MaxPoolReluGrad write
// each window by a select per element (AVX-512) and must give the bits of zeroing dX and adding each dY (or,
// where the pooled value Y is not positive, +0) at its index: -0 becomes +0, NaN passes, the rows and
// columns of an odd dX that no window covers are +0. Pooled rows of 21 cross a 16-lane vector. An index
// outside its own window (still inside its plane) sends the planes to the scatter, with the same result.
TEST(MaxPoolGradTest, TwoByTwoWindowsGiveTheScatterBits) {
  const int64_t planes = 6, h = 9, w = 43, oh = 4, ow = 21, isize = h * w, osize = oh * ow;
  const Shape xs = {2, 3, h, w}, ys = {2, 3, oh, ow};
  ValueInfo dx_info;
  dx_info.name = "dx";
  dx_info.dtype = DType::kFloat32;
  dx_info.has_shape = true;
  for (int64_t d : xs) dx_info.dims.push_back(Dim{d, ""});
  std::vector<float> g(planes * osize), y(planes * osize);
  std::vector<int64_t> idx(planes * osize);
  uint32_t r = 7;
  auto next = [&r] { return (r = r * 1664525u + 1013904223u) >> 8; };
  for (int64_t q = 0; q < planes; ++q) {
    for (int64_t i = 0; i < oh; ++i) {
      for (int64_t j = 0; j < ow; ++j) {
        const int64_t e = q * osize + i * ow + j, corner = q * isize + 2 * i * w + 2 * j;
        const uint32_t pick = next() % 4;
        idx[e] = corner + (pick & 1) + (pick >> 1) * w;
        g[e] = static_cast<float>(next() % 200) * 0.125f - 12.5f;
        y[e] = static_cast<float>(next() % 5) - 2.0f;  // negative, zero and positive pooled values
      }
    }
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  g[3] = -0.0f;
  g[40] = nan;
  g[41] = -0.0f;
  y[41] = 1.0f;  // an open window passing -0, which must land as +0
  y[57] = nan;   // a NaN pooled value shuts its window
  const std::vector<onnx::AttributeProto> attrs = {AttrInts("kernel_shape", {2, 2}), AttrInts("strides", {2, 2})};
  auto run = [&](const std::string& op, const std::vector<int64_t>& ix, int threads) {
    const bool relu = op == "MaxPoolReluGrad";
    Model m;
    m.opset_imports[""] = 17;
    m.opset_imports["ai.ontrain"] = 1;
    m.graph.inputs = {TensorInfo("dy", DType::kFloat32, ys), TensorInfo("idx", DType::kInt64, ys)};
    std::vector<std::string> in = {"dy", "idx"};
    NamedTensors feeds = {{"dy", Tensor::FromVector(g, ys)}, {"idx", Tensor::FromVector(ix, ys)}};
    if (relu) {
      m.graph.inputs.push_back(TensorInfo("y", DType::kFloat32, ys));
      in.push_back("y");
      feeds.push_back({"y", Tensor::FromVector(y, ys)});
    }
    m.graph.outputs.push_back(dx_info);
    m.graph.nodes.push_back(MakeNode(op, in, {"dx"}, attrs, "grad", relu ? "ai.ontrain" : ""));
    auto cpu = CpuExecutionProvider::Create({threads}).value();
    auto ex = Executor::Create(m, cpu.get());
    EXPECT_TRUE(ex.ok()) << ex.status().ToString();
    std::vector<Tensor> out;
    Status st = ex.value()->Run(ToNamedValues(feeds), {"dx"}, &out);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return out.empty() ? Tensor() : out[0];
  };
  auto want = [&](bool relu, const std::vector<int64_t>& ix) {
    std::vector<float> dx(planes * isize, 0.0f);
    for (size_t e = 0; e < ix.size(); ++e) dx[ix[e]] = dx[ix[e]] + (relu && !(y[e] > 0.0f) ? 0.0f : g[e]);
    return dx;
  };
  std::vector<int64_t> strays = idx;
  strays[planes * osize - 2] = (planes - 1) * isize + 5;  // the last plane's row 0, far from its window
  for (const std::string op : {"MaxPoolGrad", "MaxPoolReluGrad"}) {
    for (const std::vector<int64_t>* ix : {&idx, &strays}) {
      const std::vector<float> expect = want(op == "MaxPoolReluGrad", *ix);
      for (int threads : {1, 2}) {
        Tensor dx = run(op, *ix, threads);
        ASSERT_EQ(dx.NumElements(), planes * isize);
        EXPECT_EQ(std::memcmp(dx.data<float>(), expect.data(), expect.size() * sizeof(float)), 0)
            << op << (ix == &strays ? " with a stray index" : "") << ", threads " << threads;
      }
    }
  }
}

}  // namespace
}  // namespace ontrain
