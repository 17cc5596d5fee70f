// Gradients written straight into their accumulation buffer (Executor::FindAccumulatorTargets): the buffers
// hold exactly what InPlaceAccumulatorV2's copy or sum would have left, whatever the flag of each run, and
// the executor takes the shortcut only where no other node could see the buffer or the gradient.
#include <cmath>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

constexpr int64_t kRows = 3, kCols = 5;

std::vector<float> Wave(int64_t n, float phase) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.7f * static_cast<float>(i) + phase);
  return v;
}

// grad = Mul(x, w) (through Reshape when `reshaped`), InPlaceAccumulatorV2(buf, grad, flag) -> updated.
// With `reshaped`, Neg(x) runs between the Reshape and the accumulator: when the Reshape's output is a view
// of the product, the memory plan must keep the product alive until the accumulator reads it, rather than
// give its memory to Neg's output.
Model AccumulatorModel(bool reshaped) {
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports["com.microsoft"] = 1;
  const Shape s = {kRows, kCols};
  m.graph.inputs = {TensorInfo("x", DType::kFloat32, s), TensorInfo("w", DType::kFloat32, s),
                    TensorInfo("buf", DType::kFloat32, s), TensorInfo("flag", DType::kBool, {1})};
  if (reshaped) {
    m.graph.AddInitializer("shape", Tensor::FromVector<int64_t>({kRows, kCols}, {2}));
    m.graph.nodes.push_back(MakeNode("Mul", {"x", "w"}, {"flat"}, {}, "mul"));
    m.graph.nodes.push_back(MakeNode("Reshape", {"flat", "shape"}, {"grad"}, {}, "reshape"));
    m.graph.nodes.push_back(MakeNode("Neg", {"x"}, {"neg"}, {}, "neg"));
  } else {
    m.graph.nodes.push_back(MakeNode("Mul", {"x", "w"}, {"grad"}, {}, "mul"));
  }
  m.graph.nodes.push_back(
      MakeNode("InPlaceAccumulatorV2", {"buf", "grad", "flag"}, {"updated"}, {}, "acc", "com.microsoft"));
  m.graph.outputs = {TensorInfo("updated", DType::kBool, {1})};
  if (reshaped) m.graph.outputs.push_back(TensorInfo("neg", DType::kFloat32, s));
  return m;
}

// Runs flag true, false, false, true, true (the arena plan is made after the first run), checking the buffer
// after each against products and sums computed here in the same float order.
void CheckRuns(Executor* ex, Tensor buf) {
  const Shape s = {kRows, kCols};
  std::vector<float> expect(kRows * kCols, 0.0f);
  const bool flags[] = {true, false, false, true, true};
  for (int run = 0; run < 5; ++run) {
    std::vector<float> x = Wave(kRows * kCols, static_cast<float>(run)), w = Wave(kRows * kCols, 0.3f);
    for (size_t i = 0; i < expect.size(); ++i) expect[i] = flags[run] ? x[i] * w[i] : expect[i] + x[i] * w[i];
    std::vector<Tensor> out;
    Status st = ex->Run({{"x", Tensor::FromVector(x, s)},
                         {"w", Tensor::FromVector(w, s)},
                         {"buf", buf},
                         {"flag", Tensor::FromVector<bool>({flags[run]}, {1})}},
                        ex->output_names(), &out);
    ASSERT_TRUE(st.ok()) << st.ToString();
    EXPECT_TRUE(out[0].data<bool>()[0]);
    EXPECT_EQ(testing::ToVector(buf), expect) << "run " << run;
  }
}

TEST(AccumulatorTargetTest, ProducerWritesTheBufferWhenTheFlagIsSet) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(AccumulatorModel(false), cpu.get()).value();
  EXPECT_EQ(ex->num_accumulator_targets(), 1u);
  Tensor buf = Tensor::FromVector(std::vector<float>(kRows * kCols, 100.0f), {kRows, kCols});
  CheckRuns(ex.get(), buf);
}

// A producer whose output would be a view of its input (Reshape) writes a copy into the buffer instead.
TEST(AccumulatorTargetTest, ViewProducerCopiesIntoTheBuffer) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(AccumulatorModel(true), cpu.get()).value();
  EXPECT_EQ(ex->num_accumulator_targets(), 1u);
  Tensor buf = Tensor::FromVector(std::vector<float>(kRows * kCols, -1.0f), {kRows, kCols});
  CheckRuns(ex.get(), buf);
}

TEST(AccumulatorTargetTest, NotWhereAnotherNodeCouldSeeTheDifference) {
  auto cpu = CpuExecutionProvider::Create({1}).value();
  {  // the gradient is also a graph output
    Model m = AccumulatorModel(false);
    m.graph.outputs.push_back(TensorInfo("grad", DType::kFloat32, {kRows, kCols}));
    EXPECT_EQ(Executor::Create(m, cpu.get()).value()->num_accumulator_targets(), 0u);
  }
  {  // the gradient has a second reader
    Model m = AccumulatorModel(false);
    m.graph.nodes.push_back(MakeNode("Neg", {"grad"}, {"neg"}, {}, "neg"));
    m.graph.outputs.push_back(TensorInfo("neg", DType::kFloat32, {kRows, kCols}));
    EXPECT_EQ(Executor::Create(m, cpu.get()).value()->num_accumulator_targets(), 0u);
  }
  {  // the buffer has a second reader, which must see its old contents
    Model m = AccumulatorModel(false);
    m.graph.nodes.insert(m.graph.nodes.begin(), MakeNode("Neg", {"buf"}, {"old"}, {}, "neg"));
    m.graph.outputs.push_back(TensorInfo("old", DType::kFloat32, {kRows, kCols}));
    auto ex = Executor::Create(m, cpu.get()).value();
    EXPECT_EQ(ex->num_accumulator_targets(), 0u);
    Tensor buf = Tensor::FromVector(std::vector<float>(kRows * kCols, 7.0f), {kRows, kCols});
    std::vector<Tensor> out;
    ASSERT_TRUE(ex->Run({{"x", Tensor::FromVector(Wave(kRows * kCols, 0), {kRows, kCols})},
                         {"w", Tensor::FromVector(Wave(kRows * kCols, 1), {kRows, kCols})},
                         {"buf", buf},
                         {"flag", Tensor::FromVector<bool>({true}, {1})}},
                        {"old"}, &out)
                    .ok());
    for (float v : testing::ToVector(out[0])) ASSERT_EQ(v, -7.0f);
  }
  {  // the buffer is an initializer, not the caller's tensor
    Model m = AccumulatorModel(false);
    m.graph.AddInitializer("buf", Tensor::FromVector(std::vector<float>(kRows * kCols, 0.0f), {kRows, kCols}));
    EXPECT_EQ(Executor::Create(m, cpu.get()).value()->num_accumulator_targets(), 0u);
  }
}

// A gradient that broadcasts to the buffer is copied (broadcast) by the accumulator as before.
TEST(AccumulatorTargetTest, BroadcastGradientIsCopied) {
  Model m = AccumulatorModel(false);
  m.graph.inputs[0] = TensorInfo("x", DType::kFloat32, {1, kCols});
  m.graph.inputs[1] = TensorInfo("w", DType::kFloat32, {1, kCols});
  auto cpu = CpuExecutionProvider::Create({1}).value();
  auto ex = Executor::Create(m, cpu.get()).value();
  Tensor buf = Tensor::FromVector(std::vector<float>(kRows * kCols, 3.0f), {kRows, kCols});
  std::vector<float> x = Wave(kCols, 0.5f), w = Wave(kCols, 2.0f);
  for (int run = 0; run < 2; ++run) {
    std::vector<Tensor> out;
    ASSERT_TRUE(ex->Run({{"x", Tensor::FromVector(x, {1, kCols})},
                         {"w", Tensor::FromVector(w, {1, kCols})},
                         {"buf", buf},
                         {"flag", Tensor::FromVector<bool>({true}, {1})}},
                        ex->output_names(), &out)
                    .ok());
    std::vector<float> got = testing::ToVector(buf);
    for (int64_t i = 0; i < kRows * kCols; ++i) ASSERT_EQ(got[i], x[i % kCols] * w[i % kCols]) << i;
  }
}

}  // namespace
}  // namespace ontrain
