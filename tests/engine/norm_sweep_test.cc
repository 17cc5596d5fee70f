// Normalizations over random shapes, against their definitions computed here in double, at 1 and 2 threads
// with the same bits: LayerNormalization, Softmax and LogSoftmax over random axes, BatchNormalization in
// training mode (batch and running statistics) and com.microsoft's BatchNormalizationGrad. Under
// tools/test.sh --config=asan the same cases check every access. Seeds are fixed.
#include <algorithm>
#include <cmath>
#include <cstring>
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
using testing::RunBothThreadCounts;
using testing::Values;

// LayerNormalization, Softmax and LogSoftmax over random shapes (rank 1-4) and axes, against their
// definitions in double.
TEST(NormSweepTest, NormalizationsAndSoftmaxMatchTheirDefinition) {
  Rng r(707);
  for (int it = 0; it < 200; ++it) {
    const int64_t rank = r.In(1, 4);
    Shape shape;
    for (int64_t d = 0; d < rank; ++d) shape.push_back(r.In(0, 5) == 0 ? 1 : r.In(1, d + 1 == rank ? 70 : 12));
    const int64_t axis = r.In(-rank, rank - 1), a = axis < 0 ? axis + rank : axis;
    const int64_t op = r.In(0, 2);  // LayerNormalization, Softmax, LogSoftmax
    const char* ops[] = {"LayerNormalization", "Softmax", "LogSoftmax"};
    SCOPED_TRACE(StrCat("case ", it, ": ", ops[op], " ", ShapeToString(shape), " axis ", axis));
    int64_t outer = 1, inner = 1;  // LayerNormalization: [outer, inner] from the axis on; softmax: one axis
    for (int64_t d = 0; d < rank; ++d) (d < a ? outer : inner) *= shape[d];
    const int64_t len = shape[a], after = inner / len;
    const std::vector<float> x = Values(ShapeNumElements(shape), 71 + it, false);
    Shape norm_shape(shape.begin() + a, shape.end());
    const std::vector<float> scale = Values(inner, 72 + it, false), bias = Values(inner, 73 + it, false);
    Model md;
    md.opset_imports[""] = 17;
    md.graph.inputs = {TensorInfo("x", DType::kFloat32, shape)};
    NamedTensors feeds = {{"x", Tensor::FromVector(x, shape)}};
    std::vector<double> want(x.size()), mag(x.size(), 1.0);
    if (op == 0) {
      md.graph.inputs.push_back(TensorInfo("s", DType::kFloat32, norm_shape));
      md.graph.inputs.push_back(TensorInfo("b", DType::kFloat32, norm_shape));
      feeds.push_back({"s", Tensor::FromVector(scale, norm_shape)});
      feeds.push_back({"b", Tensor::FromVector(bias, norm_shape)});
      md.graph.nodes.push_back(MakeNode("LayerNormalization", {"x", "s", "b"}, {"y"},
                                        {AttrInt("axis", axis), AttrFloat("epsilon", 1e-3f)}, "ln"));
      for (int64_t o = 0; o < outer; ++o) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < inner; ++i) mean += x[o * inner + i];
        mean /= static_cast<double>(inner);
        for (int64_t i = 0; i < inner; ++i) var += (x[o * inner + i] - mean) * (x[o * inner + i] - mean);
        var /= static_cast<double>(inner);
        const double inv = 1.0 / std::sqrt(var + static_cast<double>(1e-3f));
        for (int64_t i = 0; i < inner; ++i) {
          const double nrm = (x[o * inner + i] - mean) * inv;
          want[o * inner + i] = nrm * scale[i] + bias[i];
          mag[o * inner + i] = 10.0 * (std::fabs(nrm * scale[i]) + std::fabs(bias[i]) + 1.0);
        }
      }
    } else {
      md.graph.nodes.push_back(MakeNode(ops[op], {"x"}, {"y"}, {AttrInt("axis", axis)}, "softmax"));
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < after; ++j) {
          auto at = [&](int64_t i) { return (o * len + i) * after + j; };
          double mx = -1e300, sum = 0;
          for (int64_t i = 0; i < len; ++i) mx = std::max(mx, static_cast<double>(x[at(i)]));
          for (int64_t i = 0; i < len; ++i) sum += std::exp(x[at(i)] - mx);
          for (int64_t i = 0; i < len; ++i) {
            want[at(i)] = op == 1 ? std::exp(x[at(i)] - mx) / sum : x[at(i)] - mx - std::log(sum);
            mag[at(i)] = op == 1 ? 10.0 * std::max(want[at(i)], 1e-30) : 10.0 * (std::fabs(x[at(i)] - mx) + 1.0);
          }
        }
      }
    }
    md.graph.outputs = {TensorInfo("y", DType::kFloat32, shape)};
    std::vector<Tensor> out = RunBothThreadCounts(md, feeds);
    ASSERT_EQ(out.size(), 1u);
    ExpectNear(out[0], want, mag, "Y");
    if (HasFailure()) return;
  }
}

// BatchNormalization in training mode (batch statistics, running statistics) and com.microsoft's
// BatchNormalizationGrad over random [N, C, ...] shapes, against their definitions in double.
TEST(NormSweepTest, BatchNormalizationTrainingAndGradientMatchTheirDefinition) {
  Rng r(808);
  for (int it = 0; it < 120; ++it) {
    const int64_t n = r.In(1, 6), c = r.In(1, 40), rank = r.In(2, 4);
    Shape shape = {n, c};
    for (int64_t d = 2; d < rank; ++d) shape.push_back(r.In(1, 17));
    const int64_t inner = ShapeNumElements(shape) / (n * c);
    const double m = static_cast<double>(n * inner);
    SCOPED_TRACE(StrCat("case ", it, ": ", ShapeToString(shape)));
    const std::vector<float> x = Values(ShapeNumElements(shape), 81 + it, false), dy = Values(x.size(), 82 + it),
                             scale = Values(c, 83 + it, false), bias = Values(c, 84 + it, false),
                             rmean = Values(c, 85 + it, false);
    std::vector<float> rvar = Values(c, 86 + it, false);
    for (float& v : rvar) v = v * v + 0.5f;
    const float eps = 1e-5f, momentum = 0.9f;
    std::vector<double> mean(c, 0.0), var(c, 0.0);
    auto at = [&](int64_t b, int64_t ch, int64_t i) { return (b * c + ch) * inner + i; };
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) mean[ch] += x[at(b, ch, i)];
      mean[ch] /= m;
      for (int64_t b = 0; b < n; ++b)
        for (int64_t i = 0; i < inner; ++i) var[ch] += (x[at(b, ch, i)] - mean[ch]) * (x[at(b, ch, i)] - mean[ch]);
      var[ch] /= m;
    }
    // Forward.
    Model fwd;
    fwd.opset_imports[""] = 15;
    fwd.graph.inputs = {TensorInfo("x", DType::kFloat32, shape), TensorInfo("s", DType::kFloat32, {c}),
                        TensorInfo("b", DType::kFloat32, {c}), TensorInfo("m", DType::kFloat32, {c}),
                        TensorInfo("v", DType::kFloat32, {c})};
    fwd.graph.nodes.push_back(
        MakeNode("BatchNormalization", {"x", "s", "b", "m", "v"}, {"y", "rm", "rv"},
                 {AttrInt("training_mode", 1), AttrFloat("epsilon", eps), AttrFloat("momentum", momentum)}, "bn"));
    fwd.graph.outputs = {TensorInfo("y", DType::kFloat32, shape), TensorInfo("rm", DType::kFloat32, {c}),
                         TensorInfo("rv", DType::kFloat32, {c})};
    std::vector<double> y(x.size()), y_mag(x.size()), rm(c), rv(c), stat_mag(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      const double inv = 1.0 / std::sqrt(var[ch] + eps);
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double h = (x[at(b, ch, i)] - mean[ch]) * inv;
          y[at(b, ch, i)] = h * scale[ch] + bias[ch];
          y_mag[at(b, ch, i)] = 10.0 * (std::fabs(h * scale[ch]) + std::fabs(bias[ch]) + 1.0);
        }
      }
      rm[ch] = rmean[ch] * momentum + mean[ch] * (1 - momentum);
      rv[ch] = rvar[ch] * momentum + var[ch] * (1 - momentum);
      stat_mag[ch] = 10.0 * (std::fabs(rm[ch]) + std::fabs(rv[ch]) + 1.0);
    }
    std::vector<Tensor> out = RunBothThreadCounts(fwd, {{"x", Tensor::FromVector(x, shape)},
                                                        {"s", Tensor::FromVector(scale, {c})},
                                                        {"b", Tensor::FromVector(bias, {c})},
                                                        {"m", Tensor::FromVector(rmean, {c})},
                                                        {"v", Tensor::FromVector(rvar, {c})}});
    ASSERT_EQ(out.size(), 3u);
    ExpectNear(out[0], y, y_mag, "Y");
    ExpectNear(out[1], rm, stat_mag, "running_mean");
    ExpectNear(out[2], rv, stat_mag, "running_var");
    // Gradient, from the batch statistics as float (what the forward pass saves).
    std::vector<float> saved_mean(c), saved_inv(c);
    for (int64_t ch = 0; ch < c; ++ch) {
      saved_mean[ch] = static_cast<float>(mean[ch]);
      saved_inv[ch] = static_cast<float>(1.0 / std::sqrt(var[ch] + eps));
    }
    Model grad;
    grad.opset_imports[""] = 17;
    grad.opset_imports["com.microsoft"] = 1;
    grad.graph.inputs = {TensorInfo("dy", DType::kFloat32, shape), TensorInfo("x", DType::kFloat32, shape),
                         TensorInfo("s", DType::kFloat32, {c}), TensorInfo("m", DType::kFloat32, {c}),
                         TensorInfo("i", DType::kFloat32, {c})};
    grad.graph.nodes.push_back(MakeNode("BatchNormalizationGrad", {"dy", "x", "s", "m", "i"}, {"dx", "ds", "db"},
                                        {AttrFloat("epsilon", eps)}, "bng", "com.microsoft"));
    grad.graph.outputs = {TensorInfo("dx", DType::kFloat32, shape), TensorInfo("ds", DType::kFloat32, {c}),
                          TensorInfo("db", DType::kFloat32, {c})};
    std::vector<double> dx(x.size()), dx_mag(x.size()), ds(c, 0.0), db(c, 0.0), ds_mag(c, 0.0), db_mag(c, 0.0);
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double h = (x[at(b, ch, i)] - static_cast<double>(saved_mean[ch])) * saved_inv[ch];
          db[ch] += dy[at(b, ch, i)];
          ds[ch] += dy[at(b, ch, i)] * h;
          db_mag[ch] += std::fabs(dy[at(b, ch, i)]);
          ds_mag[ch] += std::fabs(dy[at(b, ch, i)] * h);
        }
      }
      for (int64_t b = 0; b < n; ++b) {
        for (int64_t i = 0; i < inner; ++i) {
          const double h = (x[at(b, ch, i)] - static_cast<double>(saved_mean[ch])) * saved_inv[ch];
          dx[at(b, ch, i)] = scale[ch] * saved_inv[ch] / m * (m * dy[at(b, ch, i)] - db[ch] - h * ds[ch]);
          dx_mag[at(b, ch, i)] = 10.0 * std::fabs(scale[ch] * saved_inv[ch]) / m *
                                 (m * std::fabs(dy[at(b, ch, i)]) + db_mag[ch] + std::fabs(h) * ds_mag[ch]);
        }
      }
    }
    out = RunBothThreadCounts(grad, {{"dy", Tensor::FromVector(dy, shape)},
                                     {"x", Tensor::FromVector(x, shape)},
                                     {"s", Tensor::FromVector(scale, {c})},
                                     {"m", Tensor::FromVector(saved_mean, {c})},
                                     {"i", Tensor::FromVector(saved_inv, {c})}});
    ASSERT_EQ(out.size(), 3u);
    ExpectNear(out[0], dx, dx_mag, "dX");
    ExpectNear(out[1], ds, ds_mag, "dScale");
    ExpectNear(out[2], db, db_mag, "dBias");
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ontrain
