// The CPU provider's float32 convolutions checked against their definitions and their input checks: Conv
// and ConvGrad summed in double over every path (direct tiles, depthwise kernels, Winograd, GEMMs), which
// tiling the direct convolution takes, and kernel_shape against the weight for Conv, ConvTranspose and
// ConvGrad.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "providers/cpu/kernels/direct_conv.h"
#include "tests/providers/kernel_test_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using kernel_test::RunModel;

// A kernel_shape attribute that disagrees with the weight's spatial dims is an error naming both, for
// Conv, ConvTranspose and ConvGrad: the kernels index the weight by kernel_shape (a fuzzed model with
// kernel_shape [11, 3] on a [4, 1, 3, 3] weight read past it). ConvTranspose also rejects a dilations list
// of the wrong length and non-positive windows.
TEST(ConvKernelsTest, ConvKernelShapeMustMatchTheWeight) {
  struct Case {
    std::string op, domain;
    std::vector<std::string> inputs;
    Shape w;
    std::vector<onnx::AttributeProto> attrs;
    std::string want;
  };
  const Shape xs = {2, 4, 10, 10};
  const std::vector<Case> cases = {
      {"Conv", "", {"x", "w"}, {6, 4, 3, 3}, {AttrInts("kernel_shape", {11, 3})},
       "kernel_shape [11,3] does not match the weight's spatial dims [3,3]"},
      {"ConvTranspose", "", {"x", "w"}, {4, 6, 3, 3}, {AttrInts("kernel_shape", {3, 5})},
       "kernel_shape [3,5] does not match the weight's spatial dims [3,3]"},
      {"ConvTranspose", "", {"x", "w"}, {4, 6, 3, 3}, {AttrInts("dilations", {1})},
       "window attributes do not match 2 spatial dims"},
      {"ConvTranspose", "", {"x", "w"}, {4, 6, 3, 3}, {AttrInts("strides", {0, 1})},
       "kernel, strides and dilations must be positive"},
      {"ConvGrad", "com.microsoft", {"dy", "x", "w"}, {6, 4, 3, 3}, {AttrInts("kernel_shape", {11, 3})},
       "kernel_shape [11,3] does not match the weight's spatial dims [3,3]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op + " " + c.want);
    Model m;
    m.opset_imports[""] = 17;
    m.opset_imports["com.microsoft"] = 1;
    auto filled = [](const Shape& shape) {
      return Tensor::FromVector(std::vector<float>(static_cast<size_t>(ShapeNumElements(shape)), 0.5f), shape);
    };
    NamedTensors feeds = {{"x", filled(xs)}, {"w", filled(c.w)}, {"dy", filled({2, 6, 10, 10})}};
    for (const auto& [name, t] : feeds) m.graph.inputs.push_back(TensorInfo(name, DType::kFloat32, t.shape()));
    ValueInfo y;
    y.name = "y";
    m.graph.outputs = {y};
    m.graph.nodes.push_back(MakeNode(c.op, c.inputs, {"y"}, c.attrs, "node", c.domain));
    auto cpu = CpuExecutionProvider::Create({1}).value();
    auto ex = Executor::Create(m, cpu.get());
    ASSERT_TRUE(ex.ok()) << ex.status().ToString();
    std::vector<Tensor> out;
    Status s = ex.value()->Run(ToNamedValues(feeds), {"y"}, &out);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.ToString().find(c.want), std::string::npos) << s.ToString();
    EXPECT_NE(s.ToString().find("node"), std::string::npos) << "names the node: " << s.ToString();
  }
}

// Conv and ConvGrad on float32 (the direct kernel of direct_conv.h on AVX-512 CPUs, GEMMs elsewhere) against
// the definitions summed in double: channel counts that do not fill a register tile, output sizes that end
// mid-tile, asymmetric pads, dilations, groups, a one-channel stem, a 5x5 window, and a strided case. On
// AVX-512, dX of the 16-channel, 5x5 grouped and dilated asymmetric cases runs on the direct kernel with
// flipped weights, the others on GEMMs; dW of the dilation-1 3x3 cases (strides 1 and 2) on DirectWeightGrad3x3:
// output channel counts of 16 (its 3-channel tiles), 13 and 17 (padded to 16 and 32), 32 and 48 (tiles of
// 32, then one of 16), input channel counts that leave 1 or 2 channels after the 3-channel tiles, groups.
// The forward passes with 32 and 80 output channels on rows of 10 and 16 take the row tiles (one tile per
// row; tiles of 8), as does dX of the 32-channel input with rows of 15 (8, then 7), and the forward passes
// of the stride-2 cases with 32 and 64 output channels; the row tiles skip products with padding and read
// the image itself where the pads left and right are at most 2. Stride-1 convolutions that the row tiles do
// not take run on the vector-row tiles where whole vectors per output row cost at most a fifth more
// positions: here the one-channel stem on rows of 26 (read from the image itself), rows of 7 to 16, 40 and
// 70, and dX of the 16-channel case and of the 32-channel rows of 28; rows of 5, 6, 8 and 20 keep the
// padded rows. The depthwise cases (group = channels) take the
// vector kernels of depthwise.cc on AVX-512: directly for "same" windows at stride 1, through a dense or
// spread plane for the others (stride 2, no pads, a dilated 5x5 and a dilated 3x2 window, uneven pads; rows
// of 4 to 40, so one to three vectors per row, and a 36x36 plane); pads wider than the stride-2 grid keep
// the plane loops, as does every case elsewhere.
// 3x3 windows at stride 1 with pads of at most 1 and 8 or more channels each side run on Winograd's
// F(2x2, 3x3) instead (winograd.h): here the forward passes and dX of the 16-channel case, the CNN's second
// layer and the 32 -> 8 rows of 15 (dX of the unpadded two by the adjoint transforms; winograd_test.cc
// checks them more closely).
// Everything else on patch matrices and GEMMs.
TEST(ConvKernelsTest, ConvFloat32MatchesDefinition) {
  struct Case {
    int64_t n, c, h, w, m, kh, kw, group, stride, dil;
    std::vector<int64_t> pads;  // top, left, bottom, right
  };
  const Case cases[] = {
      {2, 16, 12, 12, 16, 3, 3, 1, 1, 1, {1, 1, 1, 1}}, {3, 5, 9, 11, 13, 3, 3, 1, 1, 1, {1, 1, 1, 1}},
      {2, 1, 28, 28, 32, 3, 3, 1, 1, 1, {0, 0, 0, 0}},  {1, 3, 10, 7, 9, 3, 2, 1, 1, 2, {2, 0, 1, 1}},
      {2, 8, 8, 8, 12, 5, 5, 2, 1, 1, {2, 2, 2, 2}},    {2, 6, 9, 9, 10, 3, 3, 1, 2, 1, {1, 1, 1, 1}},
      {1, 4, 6, 6, 4, 1, 1, 1, 1, 1, {0, 0, 0, 0}},     {2, 7, 5, 13, 17, 3, 3, 1, 1, 1, {3, 1, 0, 2}},
      {2, 6, 20, 20, 5, 3, 3, 1, 1, 2, {2, 1, 2, 3}},   {1, 4, 6, 5, 48, 3, 3, 1, 1, 1, {1, 0, 1, 2}},
      {2, 6, 8, 7, 20, 3, 3, 2, 1, 1, {1, 1, 1, 1}},    {2, 5, 11, 10, 40, 3, 3, 1, 2, 1, {1, 0, 2, 1}},
      {3, 16, 8, 8, 32, 3, 3, 1, 2, 1, {1, 1, 1, 1}},    {2, 5, 9, 10, 32, 3, 3, 1, 1, 1, {1, 1, 1, 1}},
      {1, 3, 6, 16, 80, 3, 3, 1, 1, 1, {1, 1, 1, 1}},   {2, 32, 7, 15, 8, 3, 3, 1, 1, 1, {0, 0, 0, 0}},
      {2, 3, 17, 20, 64, 3, 3, 1, 2, 1, {1, 0, 0, 1}},
      // row tiles that skip the padding: the benchmark CNN's second layer (dX: 13-wide rows, 2 zero columns
      // each side), asymmetric pads on rows of 21 (tiles 8, 8, 5), pads wider than the tiles skip (a padded
      // copy; an output row whose window is all padding), stride 2 with pads of 2
      {2, 32, 13, 13, 64, 3, 3, 1, 1, 1, {0, 0, 0, 0}}, {1, 32, 8, 20, 32, 3, 3, 1, 1, 1, {1, 2, 1, 0}},
      {1, 4, 6, 9, 32, 3, 3, 1, 1, 1, {3, 3, 2, 3}},    {1, 3, 9, 9, 32, 3, 3, 1, 2, 1, {2, 2, 2, 2}},
      // vector-row tiles at stride 1: a dilated window on rows of 40 (three vectors, the last of 8 lanes),
      // rows of 70 (a tile of three vectors, then one of two), and rows of 13 without pads read from the
      // image itself, three rows to a tile and then one
      {1, 3, 14, 40, 8, 3, 3, 1, 1, 2, {2, 2, 2, 2}},   {1, 2, 5, 70, 11, 3, 3, 1, 1, 1, {1, 1, 1, 1}},
      {2, 2, 9, 15, 10, 3, 3, 1, 1, 1, {0, 0, 0, 0}},
      // 1x1 at stride 2 (a ResNet shortcut): the stride-2 row copies of vrows.h, rows of 6 and of 35
      {2, 16, 12, 12, 32, 1, 1, 1, 2, 1, {0, 0, 0, 0}}, {1, 4, 5, 70, 8, 1, 1, 1, 2, 1, {0, 0, 0, 0}},
      // depthwise (group = channels): the vector kernels of depthwise.cc on AVX-512
      {2, 8, 16, 16, 8, 3, 3, 8, 1, 1, {1, 1, 1, 1}},   {2, 5, 4, 4, 5, 3, 3, 5, 1, 1, {1, 1, 1, 1}},
      {1, 3, 9, 37, 3, 3, 3, 3, 1, 1, {1, 1, 1, 1}},    {2, 6, 16, 16, 6, 3, 3, 6, 2, 1, {1, 1, 1, 1}},
      {1, 4, 11, 40, 4, 3, 3, 4, 2, 1, {1, 0, 1, 2}},   {2, 3, 9, 10, 3, 5, 5, 3, 1, 2, {2, 3, 1, 2}},
      {1, 2, 7, 9, 2, 3, 2, 2, 2, 2, {1, 0, 0, 1}},     {1, 4, 8, 8, 4, 3, 3, 4, 1, 1, {0, 0, 0, 0}},
      {2, 4, 9, 33, 4, 3, 3, 4, 2, 1, {1, 1, 1, 1}},    {1, 3, 5, 6, 3, 3, 3, 3, 2, 1, {2, 2, 2, 2}},
      {1, 2, 36, 36, 2, 3, 3, 2, 2, 1, {1, 1, 1, 1}},    {1, 2, 4, 4, 2, 3, 3, 2, 2, 1, {2, 2, 2, 2}},
  };
  uint32_t seed = 5;
  auto uniform = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  };
  for (const Case& t : cases) {
    SCOPED_TRACE("x [" + std::to_string(t.n) + "," + std::to_string(t.c) + "," + std::to_string(t.h) + "," +
                 std::to_string(t.w) + "] m " + std::to_string(t.m) + " k " + std::to_string(t.kh) + "x" +
                 std::to_string(t.kw) + " group " + std::to_string(t.group));
    const int64_t cg = t.c / t.group, mg = t.m / t.group;
    const int64_t oh = (t.h + t.pads[0] + t.pads[2] - (t.kh - 1) * t.dil - 1) / t.stride + 1;
    const int64_t ow = (t.w + t.pads[1] + t.pads[3] - (t.kw - 1) * t.dil - 1) / t.stride + 1;
    const Shape xs = {t.n, t.c, t.h, t.w}, ws = {t.m, cg, t.kh, t.kw}, ys = {t.n, t.m, oh, ow};
    std::vector<float> x(ShapeNumElements(xs)), w(ShapeNumElements(ws)), b(t.m), dy(ShapeNumElements(ys));
    for (float& v : x) v = uniform();
    for (float& v : w) v = uniform();
    for (float& v : b) v = uniform();
    for (float& v : dy) v = uniform();
    std::vector<onnx::AttributeProto> attrs = {
        AttrInts("kernel_shape", {t.kh, t.kw}), AttrInts("strides", {t.stride, t.stride}),
        AttrInts("dilations", {t.dil, t.dil}), AttrInts("pads", {t.pads[0], t.pads[1], t.pads[2], t.pads[3]}),
        AttrInt("group", t.group)};
    Model fwd;
    fwd.opset_imports[""] = 17;
    fwd.graph.inputs = {TensorInfo("x", DType::kFloat32, xs), TensorInfo("w", DType::kFloat32, ws),
                        TensorInfo("b", DType::kFloat32, {t.m})};
    fwd.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    fwd.graph.nodes.push_back(MakeNode("Conv", {"x", "w", "b"}, {"y"}, attrs, "conv"));
    Model bwd;
    bwd.opset_imports[""] = 17;
    bwd.opset_imports["com.microsoft"] = 1;
    bwd.graph.inputs = {TensorInfo("dy", DType::kFloat32, ys), TensorInfo("x", DType::kFloat32, xs),
                        TensorInfo("w", DType::kFloat32, ws)};
    bwd.graph.outputs = {TensorInfo("dx", DType::kFloat32, xs), TensorInfo("dw", DType::kFloat32, ws),
                         TensorInfo("db", DType::kFloat32, {t.m})};
    bwd.graph.nodes.push_back(MakeNode("ConvGrad", {"dy", "x", "w"}, {"dx", "dw", "db"}, attrs, "grad", "com.microsoft"));
    Tensor tx = Tensor::FromVector(x, xs), tw = Tensor::FromVector(w, ws);
    std::vector<Tensor> y = RunModel(fwd, {{"x", tx}, {"w", tw}, {"b", Tensor::FromVector(b, {t.m})}});
    std::vector<Tensor> g = RunModel(bwd, {{"dy", Tensor::FromVector(dy, ys)}, {"x", tx}, {"w", tw}});
    ASSERT_EQ(y.size(), 1u);
    ASSERT_EQ(g.size(), 3u);
    std::vector<double> ry(dy.size()), rdx(x.size(), 0.0), rdw(w.size(), 0.0), rdb(t.m, 0.0);
    for (int64_t i = 0; i < t.n; ++i) {
      for (int64_t o = 0; o < t.m; ++o) {
        const int64_t grp = o / mg;
        for (int64_t p = 0; p < oh; ++p) {
          for (int64_t q = 0; q < ow; ++q) {
            const int64_t yi = ((i * t.m + o) * oh + p) * ow + q;
            double acc = b[o];
            for (int64_t ci = 0; ci < cg; ++ci) {
              for (int64_t a = 0; a < t.kh; ++a) {
                for (int64_t e = 0; e < t.kw; ++e) {
                  const int64_t r = p * t.stride - t.pads[0] + a * t.dil, s2 = q * t.stride - t.pads[1] + e * t.dil;
                  if (r < 0 || r >= t.h || s2 < 0 || s2 >= t.w) continue;
                  const int64_t xi = ((i * t.c + grp * cg + ci) * t.h + r) * t.w + s2;
                  const int64_t wi = ((o * cg + ci) * t.kh + a) * t.kw + e;
                  acc += static_cast<double>(w[wi]) * x[xi];
                  rdx[xi] += static_cast<double>(w[wi]) * dy[yi];
                  rdw[wi] += static_cast<double>(x[xi]) * dy[yi];
                }
              }
            }
            ry[yi] = acc;
            rdb[o] += dy[yi];
          }
        }
      }
    }
    auto expect_near = [](const Tensor& got, const std::vector<double>& want, const char* what) {
      double scale = 1;
      for (double v : want) scale = std::max(scale, std::abs(v));
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_NEAR(got.data<float>()[k], want[k], 2e-6 * scale * 8) << what << " at " << k;
      }
    };
    expect_near(y[0], ry, "Y");
    expect_near(g[0], rdx, "dX");
    expect_near(g[1], rdw, "dW");
    expect_near(g[2], rdb, "dB");
  }
}

// Which tiling DirectConv2D takes (direct_conv.h): the row tiles for 3x3 windows of at least 32 output
// channels on rows of at most 16, the vector rows elsewhere at stride 1 unless whole vectors per row
// compute a fifth more positions, the padded rows otherwise. Every tiling gives the right results, so
// ConvFloat32MatchesDefinition passes whichever runs: a lost selection (it happened once, in an edit) shows
// only here.
TEST(ConvKernelsTest, DirectConvTilings) {
  if (!cpu::DirectConv2D::Available()) GTEST_SKIP() << "no AVX-512F on this CPU: convolutions run on GEMMs";
  struct Case {
    int64_t h, w, cin, cout, pad;
    bool rows, vec;
  };
  const Case cases[] = {
      {28, 28, 1, 32, 0, false, true},   // the benchmark CNN's stem: rows of 26
      {32, 32, 3, 16, 1, false, true},   // the ResNet's stem
      {32, 32, 16, 16, 1, false, true},  // the ResNet's 16-channel layers
      {13, 13, 32, 64, 0, true, false},  // the CNN's second layer
      {8, 8, 16, 16, 1, false, false},   // rows of 8
  };
  for (const Case& t : cases) {
    cpu::WindowAttrs a;
    a.kernel = {3, 3};
    a.strides = {1, 1};
    a.dilations = {1, 1};
    a.pads = {t.pad, t.pad, t.pad, t.pad};
    const Shape in = {t.h, t.w};
    StatusOr<Shape> out = a.OutputDims(in);
    ASSERT_TRUE(out.ok());
    const cpu::DirectConv2D dc(cpu::PaddedRows(in, out.value(), a), t.cin, t.cout);
    EXPECT_EQ(dc.row_tiles(), t.rows) << t.h << "x" << t.w << " " << t.cin << "->" << t.cout;
    EXPECT_EQ(dc.vector_rows(), t.vec) << t.h << "x" << t.w << " " << t.cin << "->" << t.cout;
  }
}

}  // namespace
}  // namespace ontrain
