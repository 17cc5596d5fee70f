// CPU kernels and helpers checked against hand-computed values, for what ONNX's conformance data does not
// cover: com.microsoft Gelu/FastGelu, Dropout in training mode, BatchNormalization running statistics,
// half-precision conversion, Transpose's tiled path on sizes that leave partial tiles, MaxPool's vectorized
// rows against a naive loop, Where's flat and broadcast selects, Pad. The convolutions: conv_kernels_test.cc;
// the thread pool's tests: thread_pool_test.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/providers/kernel_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using kernel_test::RunModel;

TEST(CpuKernelsTest, MicrosoftGeluAndFastGeluWithBias) {
  std::vector<float> x = {-3.0f, -1.0f, -0.25f, 0.0f, 0.5f, 2.0f};
  std::vector<float> bias = {0.1f, -0.2f, 0.3f};
  for (bool fast : {false, true}) {
    Model m;
    m.opset_imports[""] = 17;
    m.opset_imports["com.microsoft"] = 1;
    m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {2, 3}));
    if (fast) m.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, {3}));
    m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2, 3}));
    std::vector<std::string> ins = fast ? std::vector<std::string>{"x", "b"} : std::vector<std::string>{"x"};
    m.graph.nodes.push_back(MakeNode(fast ? "FastGelu" : "Gelu", ins, {"y"}, {}, "g", "com.microsoft"));
    NamedTensors feeds = {{"x", Tensor::FromVector(x, {2, 3})}};
    if (fast) feeds.push_back({"b", Tensor::FromVector(bias, {3})});
    std::vector<Tensor> out = RunModel(m, feeds);
    for (int i = 0; i < 6; ++i) {
      double v = x[i] + (fast ? bias[i % 3] : 0.0);
      double expect = fast ? 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)))
                           : 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
      EXPECT_NEAR(out[0].data<float>()[i], expect, 1e-6) << (fast ? "FastGelu " : "Gelu ") << i;
    }
  }
}

// Every permutation of a [37, 19, 21] tensor (and one of a 4-D one) against index arithmetic: the perms
// that move the contiguous dim away from the end take the tiled path, whose 16 x 16 tiles do not divide
// these sizes.
TEST(CpuKernelsTest, TransposeEveryPermutation) {
  auto check = [](const Shape& in, const std::vector<int64_t>& perm) {
    Model m;
    m.opset_imports[""] = 17;
    Shape out(in.size());
    for (size_t d = 0; d < in.size(); ++d) out[d] = in[perm[d]];
    m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, in));
    m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, out));
    m.graph.nodes.push_back(MakeNode("Transpose", {"x"}, {"y"}, {AttrInts("perm", perm)}, "t"));
    int64_t n = ShapeNumElements(in);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i);
    std::vector<Tensor> y = RunModel(m, {{"x", Tensor::FromVector(x, in)}});
    ASSERT_EQ(y[0].shape(), out);
    std::vector<int64_t> in_strides(in.size(), 1);
    for (int64_t d = static_cast<int64_t>(in.size()) - 2; d >= 0; --d) in_strides[d] = in_strides[d + 1] * in[d + 1];
    for (int64_t o = 0; o < n; ++o) {
      int64_t rem = o, src = 0;
      for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
        src += (rem % out[d]) * in_strides[perm[d]];
        rem /= out[d];
      }
      ASSERT_EQ(y[0].data<float>()[o], static_cast<float>(src)) << ShapeToString(perm) << " at " << o;
    }
  };
  std::vector<int64_t> perm = {0, 1, 2};
  do {
    check({37, 19, 21}, perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
  check({3, 40, 5, 33}, {0, 3, 1, 2});
  check({3, 40, 5, 33}, {2, 3, 0, 1});
  check({2, 48, 4, 32}, {0, 2, 3, 1});  // attention's K transposed: whole 16 x 16 blocks only
}

// MaxPool's float paths (vectorized interior rows, scalar borders; narrow planes by gathers; 2x2 windows at
// stride 2 by whole planes) against a naive
// loop over each window:
// the first maximum in visiting order, NaNs passed over, ties common (values are small integers).
TEST(CpuKernelsTest, MaxPoolMatchesNaiveWindows) {
  struct Case {
    int64_t h, w, k, s, pad, dil, storage_order;
  };
  const Case cases[] = {{26, 26, 2, 2, 0, 1, 0}, {11, 11, 2, 2, 0, 1, 0}, {32, 35, 3, 2, 1, 1, 0},
                        {9, 70, 3, 1, 1, 1, 0},  {7, 300, 2, 1, 0, 1, 1}, {12, 13, 3, 3, 2, 1, 0},
                        {10, 10, 3, 2, 1, 2, 0}, {5, 4, 5, 1, 2, 1, 0},
                        // no padding and outputs narrower than 8: whole planes by gathers, 16 outputs
                        // across row ends, the last vector of a plane partial
                        {9, 9, 3, 1, 0, 1, 0},   {14, 6, 3, 3, 0, 1, 0}, {20, 7, 2, 1, 0, 1, 0},
                        {13, 13, 3, 2, 0, 1, 0},
                        // 2x2 at stride 2 without padding: whole planes by VPlanesMaxPool2x2 (rows of 35 outputs:
                        // two whole vectors and a tail; 32: whole vectors only, the last column unread; odd
                        // heights; one output per row)
                        {9, 70, 2, 2, 0, 1, 0},  {8, 65, 2, 2, 0, 1, 0}, {7, 7, 2, 2, 0, 1, 0}, {5, 3, 2, 2, 0, 1, 0}};
  uint32_t seed = 7;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  for (const Case& c : cases) {
    const int64_t n = 2, ch = 3, ek = (c.k - 1) * c.dil + 1;
    const int64_t oh = (c.h + 2 * c.pad - ek) / c.s + 1, ow = (c.w + 2 * c.pad - ek) / c.s + 1;
    Model m;
    m.opset_imports[""] = 12;
    m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {n, ch, c.h, c.w}));
    m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {n, ch, oh, ow}));
    m.graph.outputs.push_back(TensorInfo("i", DType::kInt64, {n, ch, oh, ow}));
    m.graph.nodes.push_back(MakeNode("MaxPool", {"x"}, {"y", "i"},
                                     {AttrInts("kernel_shape", {c.k, c.k}), AttrInts("strides", {c.s, c.s}),
                                      AttrInts("pads", {c.pad, c.pad, c.pad, c.pad}),
                                      AttrInts("dilations", {c.dil, c.dil}), AttrInt("storage_order", c.storage_order)},
                                     "pool"));
    std::vector<float> x(n * ch * c.h * c.w);
    for (float& v : x) v = next() % 97 == 0 ? NAN : static_cast<float>(static_cast<int>(next() % 7) - 3);
    std::vector<Tensor> got = RunModel(m, {{"x", Tensor::FromVector(x, {n, ch, c.h, c.w})}});
    ASSERT_EQ(got.size(), 2u);
    for (int64_t p = 0; p < n * ch; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          float best = std::numeric_limits<float>::lowest();
          int64_t arg = -1;
          for (int64_t a = 0; a < c.k; ++a) {
            for (int64_t b = 0; b < c.k; ++b) {
              int64_t r = i * c.s - c.pad + a * c.dil, q = j * c.s - c.pad + b * c.dil;
              if (r < 0 || r >= c.h || q < 0 || q >= c.w) continue;
              float v = x[p * c.h * c.w + r * c.w + q];
              if (arg < 0) arg = r * c.w + q;
              if (v > best) {
                best = v;
                arg = r * c.w + q;
              }
            }
          }
          if (c.storage_order == 1) arg = (arg % c.w) * c.h + arg / c.w;
          int64_t o = (p * oh + i) * ow + j;
          ASSERT_EQ(got[0].data<float>()[o], best) << c.h << "x" << c.w << " k" << c.k << " at " << o;
          ASSERT_EQ(got[1].data<int64_t>()[o], p * c.h * c.w + arg) << c.h << "x" << c.w << " k" << c.k << " at " << o;
        }
      }
    }
  }
}

// Where's flat paths (each input whole or a single value; the branchless 4-byte select and the generic
// one for other sizes) against the definition, on a random mask long enough to be split across threads,
// with mask bytes other than 0 and 1 read as true.
TEST(CpuKernelsTest, WhereFlatPathsMatchDefinition) {
  const int64_t n = 70001;
  uint32_t seed = 11;
  auto next = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return seed >> 8;
  };
  std::vector<uint8_t> mask(n);
  for (uint8_t& b : mask) b = next() % 3 == 0 ? 0 : static_cast<uint8_t>(1 + next() % 3);
  auto run = [&](DType dt, bool c_whole, bool x_whole, bool y_whole) {
    SCOPED_TRACE(std::string(DTypeName(dt)) + " c " + (c_whole ? "whole" : "single") + " x " +
                 (x_whole ? "whole" : "single") + " y " + (y_whole ? "whole" : "single"));
    const Shape full = {n}, one = {1};
    Model m;
    m.opset_imports[""] = 16;
    m.graph.inputs.push_back(TensorInfo("c", DType::kBool, c_whole ? full : one));
    m.graph.inputs.push_back(TensorInfo("x", dt, x_whole ? full : one));
    m.graph.inputs.push_back(TensorInfo("y", dt, y_whole ? full : one));
    m.graph.outputs.push_back(TensorInfo("o", dt, full));
    m.graph.nodes.push_back(MakeNode("Where", {"c", "x", "y"}, {"o"}, {}, "w"));
    Tensor c = Tensor::Allocate(DType::kBool, c_whole ? full : one, HostAllocator()).value();
    std::copy(mask.begin(), mask.begin() + c.NumElements(), reinterpret_cast<uint8_t*>(c.data<bool>()));
    auto values = [&](int64_t count, int64_t base) {
      Tensor t = Tensor::Allocate(dt, {count}, HostAllocator()).value();
      for (int64_t i = 0; i < count; ++i) {
        if (dt == DType::kFloat32) t.data<float>()[i] = static_cast<float>(base + i) * 0.5f;
        if (dt == DType::kInt64) t.data<int64_t>()[i] = (base + i) * 1000003;
        if (dt == DType::kInt8) t.data<int8_t>()[i] = static_cast<int8_t>(base + i);
      }
      return t;
    };
    Tensor x = values(x_whole ? n : 1, 3), y = values(y_whole ? n : 1, -5 * n);
    std::vector<Tensor> got = RunModel(m, {{"c", c}, {"x", x}, {"y", y}});
    ASSERT_EQ(got[0].shape(), full);
    const size_t es = DTypeSize(dt);
    const auto* px = static_cast<const uint8_t*>(x.raw_data());
    const auto* py = static_cast<const uint8_t*>(y.raw_data());
    const auto* po = static_cast<const uint8_t*>(got[0].raw_data());
    for (int64_t i = 0; i < n; ++i) {
      const bool take_x = mask[c_whole ? i : 0] != 0;
      const uint8_t* want = take_x ? px + (x_whole ? i : 0) * es : py + (y_whole ? i : 0) * es;
      ASSERT_TRUE(std::equal(want, want + es, po + i * es)) << "at " << i;
    }
  };
  for (DType dt : {DType::kFloat32, DType::kInt64, DType::kInt8}) {
    for (int k = 1; k < 8; ++k) run(dt, k & 1, k & 2, k & 4);  // at least one input whole
  }
}

// Where's broadcast rows: a causal-style mask [L, L] or [H, L, L] against [B, H, L, L] values (rows joined), and a
// mask [B, 1, L, 1] constant along each row, for 4-byte and 8-byte elements.
TEST(CpuKernelsTest, WhereBroadcastRowsMatchDefinition) {
  const int64_t b = 3, h = 2, l = 37;
  const Shape full = {b, h, l, l};
  for (DType dt : {DType::kFloat32, DType::kInt64}) {
    // Masks whose trailing dims join the output's rows into longer ones ([l, l]: rows of l * l; [h, l, l]:
    // rows of h * l * l), and one whose rows stay l long.
    for (const Shape& cshape : {Shape{l, l}, Shape{h, l, l}, Shape{b, 1, l, 1}}) {
      SCOPED_TRACE(std::string(DTypeName(dt)) + " mask " + ShapeToString(cshape));
      Model m;
      m.opset_imports[""] = 16;
      m.graph.inputs.push_back(TensorInfo("c", DType::kBool, cshape));
      m.graph.inputs.push_back(TensorInfo("x", dt, {}));
      m.graph.inputs.push_back(TensorInfo("y", dt, full));
      m.graph.outputs.push_back(TensorInfo("o", dt, full));
      m.graph.nodes.push_back(MakeNode("Where", {"c", "x", "y"}, {"o"}, {}, "w"));
      Tensor c = Tensor::Allocate(DType::kBool, cshape, HostAllocator()).value();
      auto* mask = reinterpret_cast<uint8_t*>(c.data<bool>());
      for (int64_t i = 0; i < c.NumElements(); ++i) mask[i] = static_cast<uint8_t>((i * 7919) % 5 < 2 ? 0 : 1 + i % 2);
      Tensor x = Tensor::Allocate(dt, {}, HostAllocator()).value();
      Tensor y = Tensor::Allocate(dt, full, HostAllocator()).value();
      auto put = [dt](Tensor& t, int64_t i, int64_t v) {
        if (dt == DType::kFloat32) t.data<float>()[i] = static_cast<float>(v);
        if (dt == DType::kInt64) t.data<int64_t>()[i] = v;
      };
      auto get = [dt](const Tensor& t, int64_t i) -> int64_t {
        return dt == DType::kFloat32 ? static_cast<int64_t>(t.data<float>()[i]) : t.data<int64_t>()[i];
      };
      put(x, 0, -1000000);
      for (int64_t i = 0; i < y.NumElements(); ++i) put(y, i, i);
      std::vector<Tensor> got = RunModel(m, {{"c", c}, {"x", x}, {"y", y}});
      ASSERT_EQ(got[0].shape(), full);
      for (int64_t i = 0; i < y.NumElements(); ++i) {
        const int64_t bi = i / (h * l * l), row = (i / l) % l, col = i % l;
        const int64_t ci = cshape.size() == 2 ? row * l + col : cshape.size() == 3 ? i % (h * l * l) : bi * l + row;
        ASSERT_EQ(get(got[0], i), mask[ci] ? -1000000 : i) << "at " << i;
      }
    }
  }
}

// Pad's opset 18 axes input (negative axis included) against the same pads written out for every axis, and
// wrap mode (opset 19) against its definition (x[(i - begin) mod n] along each axis), cropping included.
TEST(CpuKernelsTest, PadAxesAndWrap) {
  const Shape xs = {2, 3, 4};
  std::vector<float> x(24);
  for (int i = 0; i < 24; ++i) x[i] = static_cast<float>(i);
  auto pad = [&](int64_t opset, const std::string& mode, const std::vector<int64_t>& pads,
                 const std::vector<int64_t>& axes, const Shape& ys) {
    Model m;
    m.opset_imports[""] = opset;
    m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, xs));
    m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, ys));
    m.graph.AddInitializer("pads", Tensor::FromVector<int64_t>(pads, {static_cast<int64_t>(pads.size())}));
    std::vector<std::string> ins = {"x", "pads"};
    if (!axes.empty()) {
      m.graph.AddInitializer("axes", Tensor::FromVector<int64_t>(axes, {static_cast<int64_t>(axes.size())}));
      ins = {"x", "pads", "", "axes"};
    }
    m.graph.nodes.push_back(MakeNode("Pad", ins, {"y"}, {AttrString("mode", mode)}, "pad"));
    return RunModel(m, {{"x", Tensor::FromVector(x, xs)}})[0];
  };
  for (const char* mode : {"constant", "reflect", "edge", "wrap"}) {
    SCOPED_TRACE(mode);
    Tensor with_axes = pad(19, mode, {1, 2, 2, 1}, {-1, 1}, {2, 6, 7});
    Tensor full = pad(19, mode, {0, 2, 1, 0, 1, 2}, {}, {2, 6, 7});
    ASSERT_EQ(with_axes.shape(), full.shape());
    for (int64_t i = 0; i < full.NumElements(); ++i) ASSERT_EQ(with_axes.data<float>()[i], full.data<float>()[i]) << i;
  }
  const std::vector<int64_t> pads = {1, -1, 5, 0, 2, 1};  // begin (1, -1, 5), end (0, 2, 1)
  Tensor y = pad(19, "wrap", pads, {}, {3, 4, 10});
  ASSERT_EQ(y.shape(), (Shape{3, 4, 10}));
  auto wrap = [](int64_t i, int64_t n) { return ((i % n) + n) % n; };
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 4; ++b) {
      for (int64_t c = 0; c < 10; ++c) {
        const int64_t src = (wrap(a - 1, 2) * 3 + wrap(b + 1, 3)) * 4 + wrap(c - 5, 4);
        ASSERT_EQ(y.data<float>()[(a * 4 + b) * 10 + c], x[src]) << a << "," << b << "," << c;
      }
    }
  }
}

Model DropoutModel(int64_t seed) {
  Model m;
  m.opset_imports[""] = 13;
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {10000}));
  m.graph.inputs.push_back(TensorInfo("ratio", DType::kFloat32, {}));
  m.graph.inputs.push_back(TensorInfo("training", DType::kBool, {}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {10000}));
  m.graph.outputs.push_back(TensorInfo("mask", DType::kBool, {10000}));
  m.graph.nodes.push_back(MakeNode("Dropout", {"x", "ratio", "training"}, {"y", "mask"}, {AttrInt("seed", seed)}));
  return m;
}

TEST(CpuKernelsTest, DropoutTrainingKeepRateScalingAndSeed) {
  NamedTensors feeds = {{"x", Tensor::FromVector(std::vector<float>(10000, 2.0f), {10000})},
                        {"ratio", Tensor::FromVector<float>({0.25f}, {})},
                        {"training", Tensor::FromVector<bool>({true}, {})}};
  std::vector<Tensor> a = RunModel(DropoutModel(7), feeds);
  std::vector<Tensor> b = RunModel(DropoutModel(7), feeds);
  std::vector<Tensor> c = RunModel(DropoutModel(8), feeds);
  int kept = 0, same_as_b = 0, same_as_c = 0;
  for (int i = 0; i < 10000; ++i) {
    bool k = a[1].data<bool>()[i];
    kept += k;
    EXPECT_FLOAT_EQ(a[0].data<float>()[i], k ? 2.0f / 0.75f : 0.0f);
    same_as_b += k == b[1].data<bool>()[i];
    same_as_c += k == c[1].data<bool>()[i];
  }
  EXPECT_NEAR(kept / 10000.0, 0.75, 0.02);  // binomial sd is 0.0043
  EXPECT_EQ(same_as_b, 10000) << "same seed, same mask";
  EXPECT_LT(same_as_c, 9000) << "another seed, another mask";
  // Inference mode passes the input through with an all-true mask.
  feeds[2].second = Tensor::FromVector<bool>({false}, {});
  std::vector<Tensor> inf = RunModel(DropoutModel(7), feeds);
  for (int i = 0; i < 10000; i += 101) {
    EXPECT_EQ(inf[0].data<float>()[i], 2.0f);
    EXPECT_TRUE(inf[1].data<bool>()[i]);
  }
}

TEST(CpuKernelsTest, BatchNormTrainingModeRunningStats) {
  // x [2, 1, 2]: channel values {1, 2, 3, 6}: mean 3, population variance 3.5.
  Model m;
  m.opset_imports[""] = 15;
  m.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {2, 1, 2}));
  for (const char* p : {"scale", "bias", "mean", "var"}) m.graph.inputs.push_back(TensorInfo(p, DType::kFloat32, {1}));
  m.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2, 1, 2}));
  m.graph.outputs.push_back(TensorInfo("rm", DType::kFloat32, {1}));
  m.graph.outputs.push_back(TensorInfo("rv", DType::kFloat32, {1}));
  m.graph.nodes.push_back(MakeNode("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "rm", "rv"},
                                   {AttrInt("training_mode", 1), AttrFloat("momentum", 0.8f), AttrFloat("epsilon", 0.5f)}));
  std::vector<Tensor> out = RunModel(m, {{"x", Tensor::FromVector<float>({1, 2, 3, 6}, {2, 1, 2})},
                                          {"scale", Tensor::FromVector<float>({2}, {1})},
                                          {"bias", Tensor::FromVector<float>({1}, {1})},
                                          {"mean", Tensor::FromVector<float>({10}, {1})},
                                          {"var", Tensor::FromVector<float>({20}, {1})}});
  const float xs[] = {1, 2, 3, 6};
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(out[0].data<float>()[i], (xs[i] - 3) / 2.0f * 2 + 1, 1e-6);  // sqrt(3.5+.5)=2
  EXPECT_NEAR(out[1].data<float>()[0], 10 * 0.8 + 3 * 0.2, 1e-6);
  EXPECT_NEAR(out[2].data<float>()[0], 20 * 0.8 + 3.5 * 0.2, 1e-6);
}

TEST(CpuKernelsTest, Float16Conversion) {
  const float exact[] = {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f /* min normal */, 5.960464477539063e-08f};
  for (float f : exact) EXPECT_EQ(static_cast<float>(Float16(f)), f) << f;
  EXPECT_TRUE(std::isinf(static_cast<float>(Float16(65520.0f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(Float16(NAN))));
  EXPECT_EQ(Float16(1.0f + 1.0f / 2048).bits, Float16(1.0f).bits);  // tie to even, downwards
  EXPECT_EQ(Float16(1.0f + 3.0f / 2048).bits, Float16(1.0f).bits + 2);  // tie to even, upwards
  EXPECT_EQ(Float16(1.0f + 3.0f / 4096).bits, Float16(1.0f).bits + 1);  // nearest
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);       // tie to even
  EXPECT_EQ(static_cast<float>(BFloat16(1.01171875f)), 1.015625f);  // tie to even, upwards
}

// Opset-1 forms that ONNX's test data no longer covers: Cast with a string `to`, Tile(input, tiles, axis).
TEST(CpuKernelsTest, OldOpsetForms) {
  Model cast;
  cast.opset_imports[""] = 1;
  cast.graph.inputs.push_back(TensorInfo("x", DType::kFloat32, {3}));
  cast.graph.outputs.push_back(TensorInfo("y", DType::kInt32, {3}));
  cast.graph.nodes.push_back(MakeNode("Cast", {"x"}, {"y"}, {AttrString("to", "INT32")}));
  std::vector<Tensor> c = RunModel(cast, {{"x", Tensor::FromVector<float>({1.7f, -2.2f, 3.0f}, {3})}});
  EXPECT_EQ(std::vector<int32_t>(c[0].data<int32_t>(), c[0].data<int32_t>() + 3), (std::vector<int32_t>{1, -2, 3}));
  Model tile;
  tile.opset_imports[""] = 1;
  tile.graph.inputs = {TensorInfo("x", DType::kFloat32, {2, 2}), TensorInfo("t", DType::kInt64, {}),
                       TensorInfo("a", DType::kInt64, {})};
  tile.graph.outputs.push_back(TensorInfo("y", DType::kFloat32, {2, 6}));
  tile.graph.nodes.push_back(MakeNode("Tile", {"x", "t", "a"}, {"y"}));
  std::vector<Tensor> t = RunModel(tile, {{"x", Tensor::FromVector<float>({1, 2, 3, 4}, {2, 2})},
                                          {"t", Tensor::FromVector<int64_t>({3}, {})},
                                          {"a", Tensor::FromVector<int64_t>({1}, {})}});
  ASSERT_EQ(t[0].shape(), (Shape{2, 6}));
  EXPECT_EQ(testing::ToVector(t[0]), (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
}

}  // namespace
}  // namespace ontrain
