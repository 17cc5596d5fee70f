// ONNX's sequence ops on the CPU provider, against values worked out by hand: construction, indexing
// (negative positions), length, insertion and erasure, concatenation (with and without a new axis) and
// splitting (scalar chunk, explicit lengths, unit parts squeezed), plus their errors.
#include "engine/executor.h"
#include "gmock/gmock.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

Tensor F(std::vector<float> v, Shape s) { return Tensor::FromVector(v, std::move(s)); }
Tensor I(int64_t v) { return Tensor::FromVector<int64_t>({v}, {}); }

// A graph of `nodes` from `inputs` to the tensor output `out`; returns it (host copy) or the error.
StatusOr<Tensor> RunGraph(std::vector<Node> nodes, std::vector<ValueInfo> inputs, const NamedValues& feeds,
                     const std::string& out) {
  Model m;
  m.opset_imports[""] = 17;
  m.graph.inputs = std::move(inputs);
  m.graph.nodes = std::move(nodes);
  ValueInfo o;
  o.name = out;
  m.graph.outputs.push_back(o);
  auto cpu = CpuExecutionProvider::Create({1}).value();
  ONT_ASSIGN_OR_RETURN(auto ex, Executor::Create(m, cpu.get()));
  std::vector<Tensor> fetched;
  ONT_RETURN_IF_ERROR(ex->Run(feeds, {out}, &fetched));
  return fetched[0].Clone();
}

const std::vector<ValueInfo> kAbc = {TensorInfo("a", DType::kFloat32, {2}), TensorInfo("b", DType::kFloat32, {2}),
                                     TensorInfo("c", DType::kFloat32, {2})};
const NamedValues kAbcFeeds = {{"a", F({1, 2}, {2})}, {"b", F({3, 4}, {2})}, {"c", F({5, 6}, {2})}};

TEST(SequenceOpsTest, ConstructAtAndLength) {
  Node make = MakeNode("SequenceConstruct", {"a", "b", "c"}, {"s"});
  auto at = RunGraph({make, MakeNode("Constant", {}, {"p"}, {AttrTensor("value", I(-1))}),
                 MakeNode("SequenceAt", {"s", "p"}, {"y"})},
                kAbc, kAbcFeeds, "y");
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  EXPECT_EQ(testing::ToVector(at.value()), (std::vector<float>{5, 6}));
  auto len = RunGraph({make, MakeNode("SequenceLength", {"s"}, {"n"})}, kAbc, kAbcFeeds, "n");
  ASSERT_TRUE(len.ok()) << len.status().ToString();
  EXPECT_EQ(len->data<int64_t>()[0], 3);
  EXPECT_EQ(len->rank(), 0);
  auto bad = RunGraph({make, MakeNode("Constant", {}, {"p"}, {AttrTensor("value", I(3))}),
                  MakeNode("SequenceAt", {"s", "p"}, {"y"})},
                 kAbc, kAbcFeeds, "y");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("position 3 is out of range for a sequence of 3"));
}

TEST(SequenceOpsTest, InsertEraseAndConcat) {
  // [a, b] -> insert c at 1 -> [a, c, b] -> erase position 0 -> [c, b] -> concat axis 0 -> [5,6,3,4]
  auto y = RunGraph({MakeNode("SequenceConstruct", {"a", "b"}, {"s"}),
                MakeNode("Constant", {}, {"one"}, {AttrTensor("value", I(1))}),
                MakeNode("SequenceInsert", {"s", "c", "one"}, {"s2"}),
                MakeNode("Constant", {}, {"zero"}, {AttrTensor("value", I(0))}),
                MakeNode("SequenceErase", {"s2", "zero"}, {"s3"}),
                MakeNode("ConcatFromSequence", {"s3"}, {"y"}, {AttrInt("axis", 0)})},
               kAbc, kAbcFeeds, "y");
  ASSERT_TRUE(y.ok()) << y.status().ToString();
  EXPECT_EQ(testing::ToVector(y.value()), (std::vector<float>{5, 6, 3, 4}));
  // Stacking along a new axis 1: [[1,3],[2,4]].
  auto stacked = RunGraph({MakeNode("SequenceConstruct", {"a", "b"}, {"s"}),
                      MakeNode("ConcatFromSequence", {"s"}, {"y"}, {AttrInt("axis", 1), AttrInt("new_axis", 1)})},
                     kAbc, kAbcFeeds, "y");
  ASSERT_TRUE(stacked.ok()) << stacked.status().ToString();
  EXPECT_EQ(stacked->shape(), (Shape{2, 2}));
  EXPECT_EQ(testing::ToVector(stacked.value()), (std::vector<float>{1, 3, 2, 4}));
  // An empty sequence grows by insertion at the end.
  auto grown = RunGraph({MakeNode("SequenceEmpty", {}, {"e"}), MakeNode("SequenceInsert", {"e", "b"}, {"s"}),
                    MakeNode("SequenceInsert", {"s", "a"}, {"s2"}),
                    MakeNode("ConcatFromSequence", {"s2"}, {"y"}, {AttrInt("axis", 0)})},
                   kAbc, kAbcFeeds, "y");
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(testing::ToVector(grown.value()), (std::vector<float>{3, 4, 1, 2}));
}

TEST(SequenceOpsTest, SplitToSequence) {
  // x [2, 5] split along axis 1 into chunks of 2: [2,2], [2,2], [2,1]; the last chunk back out.
  std::vector<ValueInfo> in = {TensorInfo("x", DType::kFloat32, {2, 5})};
  NamedValues feeds = {{"x", F({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {2, 5})}};
  Node last = MakeNode("SequenceAt", {"s", "p"}, {"y"});
  Node p = MakeNode("Constant", {}, {"p"}, {AttrTensor("value", I(-1))});
  auto chunks = RunGraph({MakeNode("Constant", {}, {"k"}, {AttrTensor("value", I(2))}),
                     MakeNode("SplitToSequence", {"x", "k"}, {"s"}, {AttrInt("axis", 1)}), p, last},
                    in, feeds, "y");
  ASSERT_TRUE(chunks.ok()) << chunks.status().ToString();
  EXPECT_EQ(chunks->shape(), (Shape{2, 1}));
  EXPECT_EQ(testing::ToVector(chunks.value()), (std::vector<float>{4, 9}));
  // Explicit lengths [1, 4]: the second part.
  auto parts = RunGraph({MakeNode("Constant", {}, {"k"}, {AttrTensor("value", Tensor::FromVector<int64_t>({1, 4}, {2}))}),
                    MakeNode("SplitToSequence", {"x", "k"}, {"s"}, {AttrInt("axis", 1)}), p, last},
                   in, feeds, "y");
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  EXPECT_EQ(testing::ToVector(parts.value()), (std::vector<float>{1, 2, 3, 4, 6, 7, 8, 9}));
  // No split input and keepdims 0: unit rows squeezed, so the last item is row 1 as a [5] tensor.
  auto rows = RunGraph({MakeNode("SplitToSequence", {"x"}, {"s"}, {AttrInt("axis", 0), AttrInt("keepdims", 0)}), p, last},
                  in, feeds, "y");
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  EXPECT_EQ(rows->shape(), (Shape{5}));
  EXPECT_EQ(testing::ToVector(rows.value()), (std::vector<float>{5, 6, 7, 8, 9}));
  auto bad = RunGraph({MakeNode("Constant", {}, {"k"}, {AttrTensor("value", Tensor::FromVector<int64_t>({1, 3}, {2}))}),
                  MakeNode("SplitToSequence", {"x", "k"}, {"s"}, {AttrInt("axis", 1)}), p, last},
                 in, feeds, "y");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("does not cover axis size 5"));
}

TEST(SequenceOpsTest, SequenceInputsAreCheckedAtBinding) {
  auto fed_tensor = RunGraph({MakeNode("SequenceLength", {"s"}, {"n"})}, {SequenceInfo("s")}, {{"s", F({1}, {1})}}, "n");
  ASSERT_FALSE(fed_tensor.ok());
  EXPECT_THAT(fed_tensor.status().message(), HasSubstr("is a sequence, but a tensor was fed"));
  auto wrong_type = RunGraph({MakeNode("SequenceLength", {"s"}, {"n"})}, {SequenceInfo("s")},
                        {{"s", Value::Sequence({Tensor::FromVector<int64_t>({1}, {1})})}}, "n");
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_THAT(wrong_type.status().message(), HasSubstr("expected a sequence of float32"));
}

}  // namespace
}  // namespace ontrain
