// Random shapes through the CPU kernels' fast paths beside the convolutions (conv_sweep_test): matrix
// products (the panels, the small products, the library) and reductions against their definitions in double
// (normalizations: norm_sweep_test); broadcast arithmetic and data movement (Transpose, Slice, Pad, Concat,
// Gather, Expand, Tile) bit for bit; all at 1 and 2 threads with the same bits. Under tools/test.sh --config=asan the same cases check every access (ten
// times these counts ran clean there once). Seeds are fixed, so a failure names a case that reproduces.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/executor.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "tests/engine/fusion_test_util.h"
#include "tests/engine/sweep_util.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using testing::ExpectNear;
using testing::Rng;
using testing::RowMajorStrides;
using testing::RunBothThreadCounts;
using testing::Values;

// MatMul, Gemm and FusedMatMul over random sizes (the panels, the small products and the library),
// transposes and batches.
TEST(KernelSweepTest, MatrixProductsMatchTheirDefinition) {
  Rng r(404);
  for (int it = 0; it < 150; ++it) {
    const int64_t sizes[] = {1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 128, 130, 257};
    const int64_t m = sizes[r.In(0, 17)], n = sizes[r.In(0, 17)], k = sizes[r.In(0, 17)];
    const int64_t batch = r.In(0, 2) == 0 ? r.In(2, 4) : 1;
    const int64_t op = r.In(0, 2);  // MatMul, Gemm, FusedMatMul
    const bool ta = op != 0 && r.In(0, 1), tb = op != 0 && r.In(0, 1);
    const bool gemm = op == 1;
    const int64_t b = gemm ? 1 : batch;
    const bool bias = gemm && r.In(0, 1);
    SCOPED_TRACE(StrCat("case ", it, ": ",
                        gemm      ? "Gemm"
                        : op == 0 ? "MatMul"
                                  : "FusedMatMul",
                        " batch ", b, " m ", m, " n ", n, " k ", k, ta ? " transA" : "", tb ? " transB" : "",
                        bias ? " bias" : ""));
    Shape as = ta ? Shape{k, m} : Shape{m, k}, bs = tb ? Shape{n, k} : Shape{k, n};
    if (b > 1) {
      as.insert(as.begin(), b);
      if (r.In(0, 1)) bs.insert(bs.begin(), b);  // else B shared by every batch
    }
    const bool b_batched = bs.size() == 3;
    Model md;
    md.opset_imports[""] = 17;
    md.opset_imports["com.microsoft"] = 1;
    md.graph.inputs = {TensorInfo("a", DType::kFloat32, as), TensorInfo("b", DType::kFloat32, bs)};
    std::vector<std::string> ins = {"a", "b"};
    std::vector<onnx::AttributeProto> attrs;
    if (op != 0) attrs = {AttrInt("transA", ta), AttrInt("transB", tb), AttrFloat("alpha", 0.5f)};
    if (bias) {
      md.graph.inputs.push_back(TensorInfo("c", DType::kFloat32, {n}));
      ins.push_back("c");
    }
    md.graph.nodes.push_back(MakeNode(op == 0 ? "MatMul"
                                      : gemm  ? "Gemm"
                                              : "FusedMatMul",
                                      ins, {"y"}, attrs, "mm", op == 2 ? "com.microsoft" : ""));
    Shape ys = b > 1 ? Shape{b, m, n} : Shape{m, n};
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    const std::vector<float> av = Values(ShapeNumElements(as), 41 + it), bv = Values(ShapeNumElements(bs), 42 + it),
                             cv = Values(n, 43 + it);
    const double alpha = op == 0 ? 1.0 : 0.5;
    std::vector<double> want(b * m * n), scale(want.size());
    for (int64_t q = 0; q < b; ++q) {
      const float* pa = av.data() + q * m * k;
      const float* pb = bv.data() + (b_batched ? q * k * n : 0);
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < n; ++j) {
          double s = 0, mag = 0;
          for (int64_t l = 0; l < k; ++l) {
            const double p =
                static_cast<double>(ta ? pa[l * m + i] : pa[i * k + l]) * (tb ? pb[j * k + l] : pb[l * n + j]);
            s += p;
            mag += std::fabs(p);
          }
          want[(q * m + i) * n + j] = alpha * s + (bias ? cv[j] : 0.0);
          scale[(q * m + i) * n + j] = alpha * mag + (bias ? std::fabs(cv[j]) : 0.0);
        }
      }
    }
    NamedTensors feeds = {{"a", Tensor::FromVector(av, as)}, {"b", Tensor::FromVector(bv, bs)}};
    if (bias) feeds.push_back({"c", Tensor::FromVector(cv, {n})});
    std::vector<Tensor> out = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, scale, "Y");
    if (HasFailure()) return;
  }
}

// Add, Sub, Mul and Div with NumPy broadcasting over random shapes: each element is one float operation,
// so the result must be that operation's bits.
TEST(KernelSweepTest, BroadcastArithmeticIsTheElementwiseFloatOperation) {
  Rng r(909);
  const char* ops[] = {"Add", "Sub", "Mul", "Div"};
  for (int it = 0; it < 300; ++it) {
    const int64_t rank = r.In(1, 4);
    Shape out;
    for (int64_t d = 0; d < rank; ++d) out.push_back(r.In(1, d + 1 == rank ? 70 : 9));
    auto operand = [&]() {
      Shape s;
      const int64_t skip = r.In(0, rank - 1) == 0 ? r.In(0, rank - 1) : 0;  // fewer dims at times
      for (int64_t d = skip; d < rank; ++d) s.push_back(r.In(0, 2) == 0 ? 1 : out[d]);
      return s;
    };
    const Shape as = operand(), bs = operand();
    const int64_t op = r.In(0, 3);
    Shape ys;
    {
      const size_t yr = std::max(as.size(), bs.size());
      for (size_t d = 0; d < yr; ++d) {
        const int64_t a = d + as.size() >= yr ? as[d + as.size() - yr] : 1,
                      b = d + bs.size() >= yr ? bs[d + bs.size() - yr] : 1;
        ys.push_back(std::max(a, b));
      }
    }
    SCOPED_TRACE(StrCat("case ", it, ": ", ops[op], " ", ShapeToString(as), " ", ShapeToString(bs)));
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("a", DType::kFloat32, as), TensorInfo("b", DType::kFloat32, bs)};
    md.graph.nodes.push_back(MakeNode(ops[op], {"a", "b"}, {"y"}, {}, "op"));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    const std::vector<float> a = Values(ShapeNumElements(as), 91 + it), b = Values(ShapeNumElements(bs), 92 + it);
    std::vector<Tensor> got =
        RunBothThreadCounts(md, {{"a", Tensor::FromVector(a, as)}, {"b", Tensor::FromVector(b, bs)}});
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), ys);
    const float* g = got[0].data<float>();
    const int64_t total = ShapeNumElements(ys);
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e, ia = 0, ib = 0, sa = 1, sb = 1;
      for (int64_t d = static_cast<int64_t>(ys.size()) - 1; d >= 0; --d) {
        const int64_t k = rem % ys[d];
        rem /= ys[d];
        const int64_t da = d - (static_cast<int64_t>(ys.size()) - static_cast<int64_t>(as.size()));
        const int64_t db = d - (static_cast<int64_t>(ys.size()) - static_cast<int64_t>(bs.size()));
        if (da >= 0) {
          if (as[da] != 1) ia += k * sa;
          sa *= as[da];
        }
        if (db >= 0) {
          if (bs[db] != 1) ib += k * sb;
          sb *= bs[db];
        }
      }
      const float x = a[ia], y = b[ib];
      const float want = op == 0 ? x + y : op == 1 ? x - y : op == 2 ? x * y : x / y;
      if (std::memcmp(&want, &g[e], sizeof want) != 0) {
        ADD_FAILURE() << "element " << e << ": " << g[e] << " against " << want;
        return;
      }
    }
  }
}

// ReduceSum, ReduceMean, ReduceMax and ReduceSumSquare over random axes, with and without keepdims.
TEST(KernelSweepTest, ReductionsMatchTheirDefinition) {
  Rng r(1010);
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceSumSquare"};
  for (int it = 0; it < 250; ++it) {
    const int64_t rank = r.In(1, 4);
    Shape shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(r.In(1, d + 1 == rank ? 80 : 10));
    std::vector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      if (r.In(0, 1)) axes.push_back(r.In(0, 1) ? d : d - rank);
    const int64_t op = r.In(0, 3), keep = r.In(0, 1);
    SCOPED_TRACE(StrCat("case ", it, ": ", ops[op], " ", ShapeToString(shape), " axes ",
                        ShapeToString(Shape(axes.begin(), axes.end())), keep ? " keepdims" : ""));
    std::vector<bool> red(rank, axes.empty());
    for (int64_t a : axes) red[a < 0 ? a + rank : a] = true;
    Shape ys, kept;
    for (int64_t d = 0; d < rank; ++d) {
      if (!red[d])
        ys.push_back(shape[d]), kept.push_back(shape[d]);
      else if (keep)
        ys.push_back(1);
    }
    Model md;
    md.opset_imports[""] = 18;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, shape)};
    std::vector<std::string> ins = {"x"};
    NamedTensors feeds;
    const std::vector<float> x = Values(ShapeNumElements(shape), 101 + it, false);
    feeds.push_back({"x", Tensor::FromVector(x, shape)});
    if (!axes.empty()) {
      md.graph.inputs.push_back(TensorInfo("axes", DType::kInt64, {static_cast<int64_t>(axes.size())}));
      ins.push_back("axes");
      feeds.push_back({"axes", Tensor::FromVector(axes, {static_cast<int64_t>(axes.size())})});
    }
    md.graph.nodes.push_back(MakeNode(ops[op], ins, {"y"}, {AttrInt("keepdims", keep)}, "reduce"));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    const int64_t outs = ShapeNumElements(kept);
    std::vector<double> want(outs, op == 2 ? -1e300 : 0.0), mag(outs, 0.0);
    std::vector<int64_t> count(outs, 0);
    for (int64_t e = 0; e < static_cast<int64_t>(x.size()); ++e) {
      int64_t rem = e, o = 0, so = 1;
      for (int64_t d = rank - 1; d >= 0; --d) {
        const int64_t k = rem % shape[d];
        rem /= shape[d];
        if (!red[d]) {
          o += k * so;
          so *= shape[d];
        }
      }
      const double v = x[e];
      if (op == 2)
        want[o] = std::max(want[o], v);
      else
        want[o] += op == 3 ? v * v : v;
      mag[o] += op == 3 ? v * v : std::fabs(v);
      ++count[o];
    }
    for (int64_t o = 0; o < outs; ++o) {
      if (op == 1) {
        want[o] /= static_cast<double>(count[o]);
        mag[o] /= static_cast<double>(count[o]);
      }
      if (op == 2) mag[o] = 1.0;
    }
    std::vector<Tensor> got = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), ys);
    ExpectNear(got[0], want, mag, "Y");
    if (HasFailure()) return;
  }
}

// Transpose, Slice (negative steps too), Pad (constant, edge, reflect), Concat, Gather (negative indices),
// Expand and Tile over random shapes: pure data movement, so every element is compared bit for bit with the
// element its definition picks.
TEST(KernelSweepTest, DataMovementPicksTheElementsItsDefinitionNames) {
  Rng r(1212);
  for (int it = 0; it < 400; ++it) {
    const int64_t rank = r.In(1, 5);
    Shape s;
    for (int64_t d = 0; d < rank; ++d) s.push_back(r.In(1, d + 1 == rank ? 40 : 7));
    const std::vector<float> x = Values(ShapeNumElements(s), 121 + it);
    const int64_t op = r.In(0, 6);
    const char* names[] = {"Transpose", "Slice", "Pad", "Concat", "Gather", "Expand", "Tile"};
    Model md;
    md.opset_imports[""] = 18;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, s)};
    NamedTensors feeds = {{"x", Tensor::FromVector(x, s)}};
    Shape ys;
    // want(i): the flat index of x that output element i copies, or -1 for a constant 0 (Pad).
    std::function<int64_t(const Shape&)> want;
    Shape xstr = RowMajorStrides(s);
    auto ints = [&](const std::string& name, const std::vector<int64_t>& v) {
      md.graph.inputs.push_back(TensorInfo(name, DType::kInt64, {static_cast<int64_t>(v.size())}));
      feeds.push_back({name, Tensor::FromVector(v, {static_cast<int64_t>(v.size())})});
      return name;
    };
    std::string detail;
    if (op == 0) {  // Transpose
      std::vector<int64_t> perm(rank);
      for (int64_t d = 0; d < rank; ++d) perm[d] = d;
      for (int64_t d = rank - 1; d > 0; --d) std::swap(perm[d], perm[r.In(0, d)]);
      for (int64_t d = 0; d < rank; ++d) ys.push_back(s[perm[d]]);
      md.graph.nodes.push_back(MakeNode("Transpose", {"x"}, {"y"}, {AttrInts("perm", perm)}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += o[d] * xstr[perm[d]];
        return e;
      };
      detail = "perm " + ShapeToString(Shape(perm.begin(), perm.end()));
    } else if (op == 1) {  // Slice on every axis
      std::vector<int64_t> starts, ends, axes, steps;
      std::vector<int64_t> first(rank), step(rank);
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t st = r.In(0, 2) ? r.In(1, 3) : -r.In(1, 3);
        int64_t b = r.In(-s[d] - 2, s[d] + 1), e = r.In(-s[d] - 2, s[d] + 1);
        starts.push_back(b), ends.push_back(e), axes.push_back(d), steps.push_back(st);
        // ONNX's clamping: negative + dim, then [0, dim] for positive steps, [-1, dim - 1] for negative.
        auto norm = [&](int64_t v, bool start) {
          if (v < 0) v += s[d];
          if (st > 0) return std::clamp<int64_t>(v, 0, s[d]);
          return std::clamp<int64_t>(v, -1, s[d] - 1) + (start ? 0 : 0);
        };
        const int64_t b0 = norm(b, true), e0 = norm(e, false);
        const int64_t len = st > 0 ? std::max<int64_t>(0, (e0 - b0 + st - 1) / st)
                                   : std::max<int64_t>(0, (b0 - e0 + (-st) - 1) / (-st));
        ys.push_back(len);
        first[d] = b0;
        step[d] = st;
      }
      md.graph.nodes.push_back(
          MakeNode("Slice", {"x", ints("starts", starts), ints("ends", ends), ints("axes", axes), ints("steps", steps)},
                   {"y"}, {}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (first[d] + o[d] * step[d]) * xstr[d];
        return e;
      };
      detail = "starts " + ShapeToString(Shape(starts.begin(), starts.end())) + " ends " +
               ShapeToString(Shape(ends.begin(), ends.end())) + " steps " +
               ShapeToString(Shape(steps.begin(), steps.end()));
    } else if (op == 2) {               // Pad
      const int64_t mode = r.In(0, 2);  // constant, edge, reflect
      std::vector<int64_t> pads(2 * rank);
      for (int64_t d = 0; d < rank; ++d) {
        const int64_t lim = mode == 2 ? s[d] - 1 : 3;
        pads[d] = r.In(0, std::max<int64_t>(lim, 0));
        pads[d + rank] = r.In(0, std::max<int64_t>(lim, 0));
        ys.push_back(s[d] + pads[d] + pads[d + rank]);
      }
      const char* modes[] = {"constant", "edge", "reflect"};
      md.graph.nodes.push_back(
          MakeNode("Pad", {"x", ints("pads", pads)}, {"y"}, {AttrString("mode", modes[mode])}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) {
          int64_t k = o[d] - pads[d];
          if (k < 0 || k >= s[d]) {
            if (mode == 0) return int64_t{-1};
            if (mode == 1)
              k = k < 0 ? 0 : s[d] - 1;
            else
              k = k < 0 ? -k : 2 * (s[d] - 1) - k;
          }
          e += k * xstr[d];
        }
        return e;
      };
      detail = std::string(modes[mode]) + " pads " + ShapeToString(Shape(pads.begin(), pads.end()));
    } else if (op == 3) {  // Concat of x with itself and a slice of it along an axis: x, x
      const int64_t axis = r.In(0, rank - 1);
      ys = s;
      ys[axis] *= 2;
      md.graph.nodes.push_back(MakeNode("Concat", {"x", "x"}, {"y"}, {AttrInt("axis", axis)}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (d == axis ? o[d] % s[d] : o[d]) * xstr[d];
        return e;
      };
      detail = StrCat("axis ", axis);
    } else if (op == 4) {  // Gather
      const int64_t axis = r.In(0, rank - 1), k = r.In(1, 9);
      std::vector<int64_t> idx(k);
      for (int64_t& v : idx) v = r.In(-s[axis], s[axis] - 1);
      for (int64_t d = 0; d < rank; ++d) {
        if (d == axis)
          ys.push_back(k);
        else
          ys.push_back(s[d]);
      }
      md.graph.nodes.push_back(MakeNode("Gather", {"x", ints("idx", idx)}, {"y"}, {AttrInt("axis", axis)}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) {
          int64_t v = d == axis ? idx[o[d]] : o[d];
          if (v < 0) v += s[d];
          e += v * xstr[d];
        }
        return e;
      };
      detail = StrCat("axis ", axis, " indices ", ShapeToString(Shape(idx.begin(), idx.end())));
    } else if (op == 5) {  // Expand: x with some dims 1, broadcast to a shape with an extra leading dim
      Shape xs1 = s;
      for (int64_t& d : xs1)
        if (r.In(0, 1)) d = 1;
      const std::vector<float> x1 = Values(ShapeNumElements(xs1), 131 + it);
      feeds[0] = {"x", Tensor::FromVector(x1, xs1)};
      md.graph.inputs[0] = TensorInfo("x", DType::kFloat32, xs1);
      const int64_t lead = r.In(1, 3);
      std::vector<int64_t> target = {lead};
      for (int64_t d : s) target.push_back(d);
      ys = Shape(target.begin(), target.end());
      md.graph.nodes.push_back(MakeNode("Expand", {"x", ints("shape", target)}, {"y"}, {}, "op"));
      Shape str1 = RowMajorStrides(xs1);
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (xs1[d] == 1 ? 0 : o[d + 1]) * str1[d];
        return e;
      };
      detail = "from " + ShapeToString(xs1);
      s = xs1;  // for the element lookup below
    } else {    // Tile
      std::vector<int64_t> reps(rank);
      for (int64_t d = 0; d < rank; ++d) {
        reps[d] = r.In(1, 3);
        ys.push_back(s[d] * reps[d]);
      }
      md.graph.nodes.push_back(MakeNode("Tile", {"x", ints("reps", reps)}, {"y"}, {}, "op"));
      want = [=](const Shape& o) {
        int64_t e = 0;
        for (int64_t d = 0; d < rank; ++d) e += (o[d] % s[d]) * xstr[d];
        return e;
      };
      detail = "repeats " + ShapeToString(Shape(reps.begin(), reps.end()));
    }
    SCOPED_TRACE(StrCat("case ", it, ": ", names[op], " ", ShapeToString(s), " ", detail));
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, ys)};
    std::vector<Tensor> got = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(got[0].shape(), ys);
    const float* src = feeds[0].second.data<float>();
    const float* g = got[0].data<float>();
    const int64_t total = ShapeNumElements(ys);
    Shape o(ys.size(), 0);
    for (int64_t e = 0; e < total; ++e) {
      int64_t rem = e;
      for (int64_t d = static_cast<int64_t>(ys.size()) - 1; d >= 0; --d) {
        o[d] = rem % ys[d];
        rem /= ys[d];
      }
      const int64_t from = want(o);
      const float expect = from < 0 ? 0.0f : src[from];
      if (std::memcmp(&expect, &g[e], sizeof expect) != 0) {
        ADD_FAILURE() << "element " << e << " " << ShapeToString(o) << ": " << g[e] << " against " << expect;
        return;
      }
    }
  }
}

}  // namespace
}  // namespace ontrain
