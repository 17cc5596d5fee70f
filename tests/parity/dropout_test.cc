// Dropout on CUDA draws its own masks (a counter-based generator, not the CPU's), so instead of parity
// this checks what a mask must satisfy: kept elements scaled by 1 / (1 - ratio), dropped ones zero, the
// kept fraction near 1 - ratio, a fresh mask each step (replayed steps of a recorded run too), the same
// masks again from the same seed and with graph capture off, and a DropoutGrad that applies the same mask.
#include <cmath>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace parity {
namespace {

Model DropoutModel(int64_t seed) {
  Model m;
  m.opset_imports[""] = 13;
  m.opset_imports["com.microsoft"] = 1;
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, {64, 100}), TensorInfo("ratio", DType::kFloat32, {}),
                    TensorInfo("training", DType::kBool, {}), TensorInfo("dy", DType::kFloat32, {64, 100})};
  m.graph.outputs = {TensorInfo("y", DType::kFloat32, {64, 100}), TensorInfo("mask", DType::kBool, {64, 100}),
                     TensorInfo("dx", DType::kFloat32, {64, 100})};
  m.graph.nodes.push_back(MakeNode("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, {AttrInt("seed", seed)}, "drop"));
  m.graph.nodes.push_back(
      MakeNode("DropoutGrad", {"dy", "mask", "ratio", "training"}, {"dx"}, {}, "drop_grad", "com.microsoft"));
  return m;
}

struct Step {
  Tensor y, mask, dx;
};

constexpr int kSteps = 8;  // with graph capture, runs 5 to 8 replay a recording

std::vector<Step> RunDropout(int64_t seed, int steps, bool graph_capture, std::string* capture_status = nullptr,
                             int64_t* replayed = nullptr) {
  auto providers = MakeProviders("cuda", graph_capture);
  EXPECT_TRUE(providers.ok()) << providers.status().ToString();
  auto ex = Executor::Create(DropoutModel(seed), {providers->ordered, {}});
  EXPECT_TRUE(ex.ok()) << ex.status().ToString();
  EXPECT_EQ(ex.value()->plan().partition.nodes[0].provider, 0) << "Dropout did not run on CUDA";
  std::vector<Step> out;
  for (int s = 0; s < steps; ++s) {
    NamedTensors feeds = {{"x", Random(DType::kFloat32, {64, 100}, 1, 0.5, 1.5)},
                          {"ratio", Tensor::FromVector<float>({0.3f}, {})},
                          {"training", Tensor::FromVector<bool>({true}, {})},
                          {"dy", Random(DType::kFloat32, {64, 100}, 2, 0.5, 1.5)}};
    std::vector<Tensor> f;
    Status st = ex.value()->Run(ToNamedValues(feeds), {"y", "mask", "dx"}, &f);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    Step step;
    step.y = ex.value()->ToHost(f[0]).value().Clone();
    step.mask = ex.value()->ToHost(f[1]).value().Clone();
    step.dx = ex.value()->ToHost(f[2]).value().Clone();
    out.push_back(step);
  }
  if (capture_status) *capture_status = ex.value()->CaptureStatus();
  if (replayed) *replayed = ex.value()->capture_stats().replayed;
  return out;
}

TEST(CudaDropout, MasksAreScaledFreshAndReproducible) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  std::string status;
  int64_t replayed = 0;
  std::vector<Step> a = RunDropout(7, kSteps, true, &status, &replayed), b = RunDropout(7, kSteps, true);
  ASSERT_EQ(a.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(b.size(), static_cast<size_t>(kSteps));
  // The draws' counter lives on the device: replayed steps draw fresh masks too.
  EXPECT_GE(replayed, kSteps - 4) << status;
  Tensor x = Random(DType::kFloat32, {64, 100}, 1, 0.5, 1.5), dy = Random(DType::kFloat32, {64, 100}, 2, 0.5, 1.5);
  const float scale = 1.0f / 0.7f;
  for (int s = 0; s < kSteps; ++s) {
    int64_t kept = 0, same_as_previous = 0;
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      bool k = a[s].mask.data<bool>()[i];
      kept += k;
      EXPECT_EQ(a[s].y.data<float>()[i], k ? x.data<float>()[i] * scale : 0.0f) << i;
      EXPECT_EQ(a[s].dx.data<float>()[i], k ? dy.data<float>()[i] * scale : 0.0f) << i;
      EXPECT_EQ(k, b[s].mask.data<bool>()[i]) << "the same seed gave another mask at step " << s;
      if (s > 0) same_as_previous += k == a[s - 1].mask.data<bool>()[i];
    }
    double frac = static_cast<double>(kept) / static_cast<double>(x.NumElements());
    EXPECT_NEAR(frac, 0.7, 0.03) << "step " << s;  // 6400 draws: 4.7 standard deviations
    if (s > 0) {
      EXPECT_LT(same_as_previous, x.NumElements() * 0.7) << "step " << s << " reused the mask";
    }
  }
}

// Recording and replaying changes nothing: the same masks, step for step, as eager runs.
TEST(CudaDropout, ReplayedStepsDrawTheEagerMasks) {
  if (!CudaUnavailableReason().empty()) GTEST_SKIP() << CudaUnavailableReason();
  std::vector<Step> replayed = RunDropout(11, kSteps, true), eager = RunDropout(11, kSteps, false);
  ASSERT_EQ(replayed.size(), eager.size());
  for (size_t s = 0; s < eager.size(); ++s) {
    EXPECT_EQ(Compare(eager[s].mask, replayed[s].mask, {0, 0}), "") << "step " << s;
    EXPECT_EQ(Compare(eager[s].y, replayed[s].y, {0, 0}), "") << "step " << s;
  }
}

}  // namespace
}  // namespace parity
}  // namespace ontrain
