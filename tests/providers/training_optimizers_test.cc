// ONNX Runtime's optimizer kernels (AdamWOptimizer, SGDOptimizerV2, InplaceClipGradNorm) on the CPU
// provider, against their formulas written out in double precision (and in float, bit for bit, where values
// go subnormal): in-place updates of sequences, the update signal, ONNX Runtime's errors, results that do
// not depend on the thread count, and the provider's flush-to-zero option.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "engine/executor.h"
#include "gmock/gmock.h"
#include "graph/builder.h"
#include "gtest/gtest.h"
#include "providers/cpu/cpu_provider.h"
#include "tests/test_util.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;
constexpr const char* kMs = "com.microsoft";

Tensor Floats(std::vector<float> v, Shape s) { return Tensor::FromVector(v, std::move(s)); }

// Runs one node whose inputs are the graph inputs `inputs`, fed `feeds`; `flag` (when given) receives its
// first output. `flush_denormals`: the CPU provider's option of that name.
Status RunOne(const Node& node, const std::vector<ValueInfo>& inputs, const NamedValues& feeds, int threads,
              Tensor* flag, bool flush_denormals = false) {
  Model m;
  m.opset_imports[""] = 17;
  m.opset_imports[kMs] = 1;
  m.graph.inputs = inputs;
  ValueInfo out;
  out.name = node.outputs[0];
  m.graph.outputs.push_back(out);
  m.graph.nodes.push_back(node);
  CpuProviderOptions options;
  options.intra_op_threads = threads;
  options.flush_denormals = flush_denormals;
  auto cpu = CpuExecutionProvider::Create(options).value();
  auto ex = Executor::Create(m, cpu.get());
  if (!ex.ok()) return ex.status();
  std::vector<Tensor> fetched;
  std::vector<std::string> fetch;
  if (flag) fetch.push_back(node.outputs[0]);
  ONT_RETURN_IF_ERROR(ex.value()->Run(feeds, fetch, &fetched));
  if (flag) *flag = fetched[0].Clone();
  return Status::OK();
}

std::vector<ValueInfo> AdamWInputs() {
  return {TensorInfo("lr", DType::kFloat32, {1}), TensorInfo("step", DType::kInt64, {1}), SequenceInfo("w"), SequenceInfo("g"),
          SequenceInfo("m"), SequenceInfo("v")};
}

Node AdamWNode(float alpha, float beta, float eps, float wd, int mode) {
  return MakeNode("AdamWOptimizer", {"lr", "step", "w", "g", "m", "v"}, {"flag"},
                  {AttrFloat("alpha", alpha), AttrFloat("beta", beta), AttrFloat("epsilon", eps),
                   AttrFloat("weight_decay", wd), AttrInt("adam_mode", mode)},
                  "adamw", kMs);
}

TEST(TrainingOptimizersTest, AdamWBothModesMatchFormulasOverSeveralTensors) {
  for (int mode : {0, 1}) {
    SCOPED_TRACE(mode);
    std::vector<float> w0 = {0.5f, -1.0f, 2.0f}, w1 = {0.25f, 3.0f};
    std::vector<float> m0 = {0.1f, 0.0f, -0.2f}, m1 = {0.05f, 0.5f};
    std::vector<float> v0 = {0.01f, 0.0f, 0.04f}, v1 = {0.02f, 0.3f};
    const std::vector<float> g0 = {0.3f, -0.6f, 0.0f}, g1 = {-1.5f, 0.125f};
    Tensor tw0 = Floats(w0, {3}), tw1 = Floats(w1, {2}), tm0 = Floats(m0, {3}), tm1 = Floats(m1, {2});
    Tensor tv0 = Floats(v0, {3}), tv1 = Floats(v1, {2});
    const float lr = 0.05f;
    const int64_t t = 3;
    Tensor flag;
    Status s = RunOne(AdamWNode(0.8f, 0.95f, 1e-4f, 0.1f, mode), AdamWInputs(),
                      {{"lr", Floats({lr}, {1})}, {"step", Tensor::FromVector<int64_t>({t}, {1})},
                       {"w", Value::Sequence({tw0, tw1})}, {"g", Value::Sequence({Floats(g0, {3}), Floats(g1, {2})})},
                       {"m", Value::Sequence({tm0, tm1})}, {"v", Value::Sequence({tv0, tv1})}},
                      1, &flag);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(flag.data<bool>()[0]);
    double ac = 1 - std::pow(0.8, t), bc = 1 - std::pow(0.95, t);
    auto check = [&](const std::vector<float>& w, const std::vector<float>& m, const std::vector<float>& v,
                     const std::vector<float>& g, const Tensor& tw, const Tensor& tm, const Tensor& tv) {
      for (size_t i = 0; i < w.size(); ++i) {
        double wd = w[i], md = m[i], vd = v[i];
        if (mode == 0) wd -= wd * lr * 0.1;
        md = 0.8 * md + 0.2 * g[i];
        vd = 0.95 * vd + 0.05 * g[i] * g[i];
        if (mode == 0) {
          wd -= lr * md / (ac * (std::sqrt(vd / bc) + 1e-4));
        } else {
          wd -= lr * std::sqrt(bc) / ac * md / (std::sqrt(vd) + 1e-4);
          wd -= lr * 0.1 * wd;
        }
        EXPECT_NEAR(tw.data<float>()[i], wd, 1e-6) << i;
        EXPECT_NEAR(tm.data<float>()[i], md, 1e-7) << i;
        EXPECT_NEAR(tv.data<float>()[i], vd, 1e-7) << i;
      }
    };
    check(w0, m0, v0, g0, tw0, tm0, tv0);  // the fed tensors themselves were updated
    check(w1, m1, v1, g1, tw1, tm1, tv1);
  }
}

TEST(TrainingOptimizersTest, AdamWUpdateSignalFalseChangesNothing) {
  std::vector<ValueInfo> in = AdamWInputs();
  in.push_back(TensorInfo("signal", DType::kBool, {1}));
  Node n = AdamWNode(0.9f, 0.999f, 1e-8f, 0.0f, 0);
  n.inputs.push_back("signal");
  Tensor w = Floats({1, 2}, {2});
  Tensor flag;
  Status s = RunOne(n, in,
                    {{"lr", Floats({0.1f}, {1})}, {"step", Tensor::FromVector<int64_t>({1}, {1})},
                     {"w", Value::Sequence({w})}, {"g", Value::Sequence({Floats({1, 1}, {2})})},
                     {"m", Value::Sequence({Floats({0, 0}, {2})})}, {"v", Value::Sequence({Floats({0, 0}, {2})})},
                     {"signal", Tensor::FromVector<bool>({false}, {1})}},
                    1, &flag);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(flag.data<bool>()[0]);
  EXPECT_EQ(testing::ToVector(w), (std::vector<float>{1, 2}));
}

TEST(TrainingOptimizersTest, AdamWErrorsLeaveTheStateUntouched) {
  Tensor w = Floats({1, 2}, {2});
  auto feeds = [&](TensorSequence g, TensorSequence m) -> NamedValues {
    return {{"lr", Floats({0.1f}, {1})}, {"step", Tensor::FromVector<int64_t>({1}, {1})}, {"w", Value::Sequence({w})},
            {"g", Value::Sequence(std::move(g))}, {"m", Value::Sequence(std::move(m))},
            {"v", Value::Sequence({Floats({0, 0}, {2})})}};
  };
  Node n = AdamWNode(0.9f, 0.999f, 1e-8f, 0.0f, 0);
  Status shape = RunOne(n, AdamWInputs(), feeds({Floats({1, 1, 1}, {3})}, {Floats({0, 0}, {2})}), 1, nullptr);
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.message(), HasSubstr("gradients[0] has shape [3]"));
  Status count = RunOne(n, AdamWInputs(), feeds({Floats({1, 1}, {2})}, {Floats({0, 0}, {2}), Floats({0}, {1})}), 1, nullptr);
  ASSERT_FALSE(count.ok());
  EXPECT_THAT(count.message(), HasSubstr("mismatch"));
  Status empty = RunOne(n, AdamWInputs(), feeds({}, {}), 1, nullptr);
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(empty.message(), HasSubstr("empty"));
  Node bad = AdamWNode(0.9f, 0.999f, 1e-8f, 0.0f, 0);
  bad.attributes["correct_bias"] = AttrInt("correct_bias", 0);
  Status cb = RunOne(bad, AdamWInputs(), feeds({Floats({1, 1}, {2})}, {Floats({0, 0}, {2})}), 1, nullptr);
  ASSERT_FALSE(cb.ok());
  EXPECT_THAT(cb.message(), HasSubstr("adam_mode 0 requires correct_bias 1"));
  EXPECT_EQ(testing::ToVector(w), (std::vector<float>{1, 2}));
}

TEST(TrainingOptimizersTest, AdamWIsIndependentOfTheThreadCount) {
  // Many tensors of odd sizes, so that thread blocks straddle tensor boundaries, and enough elements (460k)
  // that the pool splits the update at all (below ~85k it runs on one thread): a block boundary that is not
  // a multiple of the vector width moves elements between a loop's vector body and its scalar remainder.
  // (These values did not expose the FMA contraction that once made a ResNet's AdamW thread-dependent;
  // docs/notes.md.)
  std::mt19937 rng(7);
  std::normal_distribution<float> d;
  std::vector<std::vector<float>> w, g;
  for (int k = 0; k < 9; ++k) {
    int n = 20001 + 7777 * k;
    w.emplace_back(n);
    g.emplace_back(n);
    for (int i = 0; i < n; ++i) w.back()[i] = d(rng), g.back()[i] = d(rng);
  }
  for (int mode : {0, 1}) {
  SCOPED_TRACE(mode);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 4}) {
    TensorSequence tw, tg, tm, tv;
    for (size_t k = 0; k < w.size(); ++k) {
      Shape s = {static_cast<int64_t>(w[k].size())};
      tw.push_back(Floats(w[k], s));
      tg.push_back(Floats(g[k], s));
      tm.push_back(Floats(std::vector<float>(w[k].size(), 0.1f), s));
      tv.push_back(Floats(std::vector<float>(w[k].size(), 0.2f), s));
    }
    Status st = RunOne(AdamWNode(0.9f, 0.999f, 1e-6f, 0.01f, mode), AdamWInputs(),
                       {{"lr", Floats({1e-3f}, {1})}, {"step", Tensor::FromVector<int64_t>({5}, {1})},
                        {"w", Value::Sequence(tw)}, {"g", Value::Sequence(tg)}, {"m", Value::Sequence(tm)},
                        {"v", Value::Sequence(tv)}},
                       threads, nullptr);
    ASSERT_TRUE(st.ok()) << st.ToString();
    std::vector<float> all;
    for (const Tensor& t : tw) for (float x : testing::ToVector(t)) all.push_back(x);
    results.push_back(all);
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
  }
}

// The float operations of AdamWOptimizer's formula, one element at a time, in the kernel's order (tests
// build with -ffp-contract=off, so no FMA contraction either): the reference for bit-for-bit checks where
// moments go subnormal, so that a flush-to-zero or a faster path for such values cannot change the bits
// unnoticed (docs/notes.md: Intel's assists for subnormal floats).
void AdamWReference(float& w, float& m, float& v, float g, float a, float b, float eps, float lr, float wd,
                    float ac, float bc, int mode) {
  if (mode == 0) {
    w -= w * lr * wd;
    m = a * m + (1.0f - a) * g;
    v = b * v + (1.0f - b) * g * g;
    w -= lr * m / (ac * (std::sqrt(v / bc) + eps));
  } else {
    m = a * m + (1.0f - a) * g;
    v = b * v + (1.0f - b) * g * g;
    w -= lr * std::sqrt(bc) / ac * m / (std::sqrt(v) + eps);
    w -= lr * wd * w;
  }
}

bool SameFloat(float x, float y) { return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, sizeof x) == 0; }

// Runs AdamW (alpha `a`, beta 0.999, eps 1e-8, weight decay 0.01, the given step) over one tensor of w, m, v
// and g on `threads` threads and expects AdamWReference's bits in every output element (the first five
// mismatches reported). Returns the reference's second moments.
std::vector<float> ExpectAdamWBitsOfReference(const std::vector<float>& w, const std::vector<float>& m,
                                              const std::vector<float>& v, const std::vector<float>& g, float a,
                                              float lr, int64_t step, int mode, int threads) {
  const float b = 0.999f, eps = 1e-8f, wd = 0.01f;
  const int n = static_cast<int>(w.size());
  // As the kernel makes them: from the float attributes widened to double.
  const float ac = 1.0f - static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(step)));
  const float bc = 1.0f - static_cast<float>(std::pow(static_cast<double>(b), static_cast<double>(step)));
  std::vector<float> rw = w, rm = m, rv = v;
  for (int i = 0; i < n; ++i) AdamWReference(rw[i], rm[i], rv[i], g[i], a, b, eps, lr, wd, ac, bc, mode);
  Tensor tw = Floats(w, {n}), tm = Floats(m, {n}), tv = Floats(v, {n});
  Status st = RunOne(AdamWNode(a, b, eps, wd, mode), AdamWInputs(),
                     {{"lr", Floats({lr}, {1})}, {"step", Tensor::FromVector<int64_t>({step}, {1})},
                      {"w", Value::Sequence({tw})}, {"g", Value::Sequence({Floats(g, {n})})},
                      {"m", Value::Sequence({tm})}, {"v", Value::Sequence({tv})}},
                     threads, nullptr);
  EXPECT_TRUE(st.ok()) << st.ToString();
  if (!st.ok()) return rv;
  const float *ow = tw.data<float>(), *om = tm.data<float>(), *ov = tv.data<float>();
  int mismatches = 0;
  for (int i = 0; i < n && mismatches < 5; ++i) {
    if (!SameFloat(ow[i], rw[i]) || !SameFloat(om[i], rm[i]) || !SameFloat(ov[i], rv[i])) {
      ++mismatches;
      ADD_FAILURE() << "element " << i << " (g " << g[i] << ", m " << m[i] << ", v " << v[i] << "): w " << ow[i]
                    << " vs " << rw[i] << ", m " << om[i] << " vs " << rm[i] << ", v " << ov[i] << " vs " << rv[i];
    }
  }
  return rv;
}

TEST(TrainingOptimizersTest, AdamWMatchesFloatArithmeticBitForBitWhereMomentsGoSubnormal) {
  // Gradients from 1e-2 down to float's smallest subnormal (so (1 - beta) g^2 and (1 - alpha) g are
  // subnormal or round to zero), zeros of both signs, moments that are themselves tiny or subnormal, and an
  // infinity and a NaN; an odd count, so that the loop's remainder runs too.
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f), expo(-2.0f, -45.5f);
  const int n = 20011;
  std::vector<float> w(n), m(n), v(n), g(n);
  for (int i = 0; i < n; ++i) {
    w[i] = unit(rng) * 0.05f;
    g[i] = unit(rng) * std::pow(10.0f, expo(rng));
    // Tiny moments in the second half only: in the first, subnormals come from the gradients alone.
    const bool tiny_moments = i > n / 2;
    m[i] = tiny_moments && i % 5 == 0 ? unit(rng) * std::pow(10.0f, expo(rng)) : unit(rng) * 1e-3f;
    v[i] = tiny_moments && i % 7 == 0 ? std::fabs(unit(rng)) * std::pow(10.0f, expo(rng)) : std::fabs(unit(rng)) * 1e-6f;
    if (i % 13 == 0) m[i] = i % 2 ? -0.0f : 0.0f;  // -0 + (1 - alpha) g stays -0 only where g rounds to -0
    if (i % 97 == 0) g[i] = 0.0f;
    if (i % 101 == 0) g[i] = -0.0f;
  }
  g[5000] = std::numeric_limits<float>::infinity();
  m[7001] = std::numeric_limits<float>::quiet_NaN();
  int subnormal_products = 0, subnormal_moments = 0;
  for (int i = 0; i < n; ++i) {
    subnormal_products += std::fpclassify((1.0f - 0.999f) * g[i] * g[i]) == FP_SUBNORMAL;
  }
  ASSERT_GT(subnormal_products, 1000);
  for (int mode : {0, 1}) {
    SCOPED_TRACE(mode);
    for (float x : ExpectAdamWBitsOfReference(w, m, v, g, 0.9f, 1e-3f, 7, mode, 1)) {
      subnormal_moments += std::fpclassify(x) == FP_SUBNORMAL;
    }
  }
  EXPECT_GT(subnormal_moments, 100);
}

// The AVX-512 update's two exact cases against the float formula, bit for bit: first moments stuck among
// the subnormals (g = +-0; m = +-k 2^-149 for k up to 40, so lr m rounds to zero for some and not others;
// v normal, subnormal, +-0 or NaN; some weights zero or near it), tiny gradients whose (1 - beta) g^2 is
// subnormal beside a b v that is large (covered) or tiny (not), subnormal gradients, and normal lanes,
// shuffled so that blocks of 16 mix them; two alphas, three learning rates, both modes, one and two threads.
TEST(TrainingOptimizersTest, AdamWStuckMomentsAndTinyGradientsMatchFloatArithmeticBitForBit) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> kind(0, 9), small_k(0, 40), large_k(0, 3000);
  const int n = 40009;
  std::vector<float> w(n), m(n), v(n), g(n);
  auto sub = [](int k, bool neg) { return (neg ? -1.0f : 1.0f) * static_cast<float>(k) * 0x1p-149f; };
  int stuck = 0, tiny = 0;
  for (int i = 0; i < n; ++i) {
    w[i] = unit(rng) * 0.05f;
    m[i] = unit(rng) * 1e-3f;
    v[i] = std::fabs(unit(rng)) * 1e-6f;
    g[i] = unit(rng) * 1e-2f;
    const bool neg = rng() % 2;
    switch (kind(rng)) {
      case 0: case 1: case 2:  // a stuck first moment
        g[i] = neg ? -0.0f : 0.0f;
        m[i] = sub(small_k(rng), rng() % 2);
        if (rng() % 3 == 0) v[i] = sub(large_k(rng), false);
        if (rng() % 17 == 0) v[i] = rng() % 2 ? -0.0f : 0.0f;
        if (rng() % 101 == 0) v[i] = std::numeric_limits<float>::quiet_NaN();
        // Weights of zero (either sign) or near it, where a step of one subnormal over the denominator, or
        // the sign of a zero step, shows in the result.
        if (rng() % 4 == 0) w[i] = rng() % 3 == 0 ? (rng() % 2 ? -0.0f : 0.0f) : unit(rng) * 1e-36f;
        ++stuck;
        break;
      case 3: case 4:  // a tiny gradient: (1 - beta) g^2 subnormal or zero
        g[i] = (neg ? -1.0f : 1.0f) * std::ldexp(1.0f + std::fabs(unit(rng)), -100 + static_cast<int>(rng() % 50));
        if (rng() % 20 == 0) v[i] = sub(large_k(rng), false);  // b v tiny too: that block is not covered
        ++tiny;
        break;
      case 5:  // a subnormal gradient
        if (rng() % 4 == 0) g[i] = sub(1 + large_k(rng), neg);
        break;
      case 6:  // g = 0 and a small normal m
        g[i] = 0.0f;
        m[i] = unit(rng) * 1e-37f;
        break;
      default:
        break;
    }
  }
  w[11] = std::numeric_limits<float>::infinity();
  v[12] = std::numeric_limits<float>::infinity();
  ASSERT_GT(stuck, 10000);
  ASSERT_GT(tiny, 6000);
  for (int threads : {1, 2}) {
    for (float alpha : {0.9f, 0.3f}) {  // below 1/2, a moment of one subnormal unit decays to a zero
      for (float lr : {1e-3f, 0.02f, 0.4f}) {
        for (int mode : {0, 1}) {
          SCOPED_TRACE(::testing::Message() << "threads " << threads << ", alpha " << alpha << ", lr " << lr
                                            << ", mode " << mode);
          ExpectAdamWBitsOfReference(w, m, v, g, alpha, lr, 3, mode, threads);
        }
      }
    }
  }
}

uint32_t Bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// CpuProviderOptions::flush_denormals: a first moment stuck among the smallest subnormals (its gradient
// exactly zero: 0.9 * 3 * 2^-149 rounds back to 3 * 2^-149) stays there in IEEE arithmetic and becomes 0
// when flushed, on both threads of the pool (200,000 elements, so the update splits); the calling thread's
// own mode is back after the run. Bits are compared: under DAZ a float comparison reads subnormals as 0.
TEST(TrainingOptimizersTest, FlushDenormalsZeroesSubnormalMomentsOnEveryThreadAndRestoresTheCaller) {
  const int n = 200000;
  const float stuck = 3 * 0x1p-149f;
  for (bool flush : {false, true}) {
    SCOPED_TRACE(flush);
    Tensor tw = Floats(std::vector<float>(n, 0.05f), {n}), tm = Floats(std::vector<float>(n, stuck), {n});
    Tensor tv = Floats(std::vector<float>(n, 1e-6f), {n});
    Status st = RunOne(AdamWNode(0.9f, 0.999f, 1e-8f, 0.01f, 0), AdamWInputs(),
                       {{"lr", Floats({1e-3f}, {1})}, {"step", Tensor::FromVector<int64_t>({100}, {1})},
                        {"w", Value::Sequence({tw})}, {"g", Value::Sequence({Floats(std::vector<float>(n, 0.0f), {n})})},
                        {"m", Value::Sequence({tm})}, {"v", Value::Sequence({tv})}},
                       2, nullptr, flush);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const uint32_t expected = flush ? Bits(0.0f) : Bits(stuck);
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += Bits(tm.data<float>()[i]) != expected;
    EXPECT_EQ(wrong, 0);
    volatile float a = 0x1p-70f, b = 0x1p-70f;
    EXPECT_EQ(Bits(a * b), Bits(0x1p-140f)) << "the test thread computes IEEE subnormals again";
  }
}

TEST(TrainingOptimizersTest, SgdUpdatesInPlace) {
  Tensor w0 = Floats({1, 2}, {2}), w1 = Floats({-3}, {1});
  Tensor flag;
  Status s = RunOne(MakeNode("SGDOptimizerV2", {"lr", "w", "g"}, {"flag"}, {}, "sgd", kMs),
                    {TensorInfo("lr", DType::kFloat32, {1}), SequenceInfo("w"), SequenceInfo("g")},
                    {{"lr", Floats({0.1f}, {1})}, {"w", Value::Sequence({w0, w1})},
                     {"g", Value::Sequence({Floats({0.5f, -1}, {2}), Floats({2}, {1})})}},
                    1, &flag);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(flag.data<bool>()[0]);
  EXPECT_FLOAT_EQ(w0.data<float>()[0], 0.95f);
  EXPECT_FLOAT_EQ(w0.data<float>()[1], 2.1f);
  EXPECT_FLOAT_EQ(w1.data<float>()[0], -3.2f);
}

TEST(TrainingOptimizersTest, ClipGradNormScalesByTheGlobalNorm) {
  // Global norm of {3, 4} and {12}: 13. max_norm 6.5 halves every gradient (up to the 1e-6 in the
  // denominator); max_norm 100 leaves them alone.
  for (float max_norm : {6.5f, 100.0f}) {
    Tensor a = Floats({3, 4}, {2}), b = Floats({12}, {1});
    Node n = MakeNode("InplaceClipGradNorm", {"g"}, {"clipped"}, {AttrFloat("max_norm", max_norm)}, "clip", kMs);
    Status s = RunOne(n, {SequenceInfo("g")}, {{"g", Value::Sequence({a, b})}}, 1, nullptr);
    ASSERT_TRUE(s.ok()) << s.ToString();
    double scale = std::min(1.0, max_norm / (13.0 + 1e-6));
    EXPECT_NEAR(a.data<float>()[0], 3 * scale, 1e-6);
    EXPECT_NEAR(a.data<float>()[1], 4 * scale, 1e-6);
    EXPECT_NEAR(b.data<float>()[0], 12 * scale, 1e-5);
  }
}

}  // namespace
}  // namespace ontrain
