// The CUDA provider's recurrent passes (providers/cuda/kernels/recurrent_math.h) run on the host through a
// backend of plain loops and the CPU's GEMM, against the CPU kernels: RNN, GRU (both reset orders), LSTM
// (input_forget too), forward and gradient, both directions with sequence_lens, initial states, clip and a
// non-default activation, in float32 and float64. This checks the passes' arithmetic, indexing and step
// order on any machine; what only a GPU can show (cuBLAS calls, launches) is left to op_parity_test there.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/value.h"
#include "graph/builder.h"
#include "graph/graph.h"
#include "gtest/gtest.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/recurrent.h"
#include "providers/cuda/kernels/recurrent_passes.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace {

using cuda::RecurrentCall;
using cuda::RecurrentPass;

template <typename T>
struct HostBackend {
  bool Gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b, int64_t ldb,
            T beta, T* c, int64_t ldc) {
    if (m == 0 || n == 0) return true;
    if (k == 0) {
      if (beta == T(0)) for (int64_t i = 0; i < m; ++i) for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = T(0);
      return true;
    }
    cpu::GemmLd<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return true;
  }
  template <class F>
  bool ForEach(int64_t n, const F& f) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return true;
  }
};

// Runs a CPU kernel once (parity::RunCpuKernel), kept alive in *runs while its outputs are read.
std::vector<Tensor> RunCpu(KernelFactory factory, const Node& node, const std::vector<Tensor>& inputs,
                           std::vector<parity::KernelRun>* runs) {
  runs->push_back(parity::RunCpuKernel(factory, node, 17, inputs));
  EXPECT_TRUE(runs->back().status.ok()) << runs->back().status.ToString();
  return runs->back().outputs;
}

struct Config {
  std::string name;
  std::string op;  // RNN, GRU, LSTM
  int64_t S = 5, B = 3, I = 4, H = 6;
  std::string direction = "forward";
  bool lens = false, h0 = false, c0 = false, bias = true;
  float clip = 0;
  bool linear_before_reset = false, input_forget = false;
  std::vector<std::string> activations;  // empty: the defaults
};

Node MakeNode(const std::string& op, const std::string& domain, const Config& c, int inputs, int outputs) {
  Node n;
  n.op_type = op;
  n.domain = domain;
  n.name = op;
  for (int i = 0; i < inputs; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (int i = 0; i < outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  auto add = [&](onnx::AttributeProto a) { n.attributes[a.name()] = a; };
  add(AttrInt("hidden_size", c.H));
  add(AttrString("direction", c.direction));
  if (c.clip > 0) add(AttrFloat("clip", c.clip));
  if (c.linear_before_reset) add(AttrInt("linear_before_reset", 1));
  if (c.input_forget) add(AttrInt("input_forget", 1));
  if (!c.activations.empty()) add(AttrStrings("activations", c.activations));
  return n;
}

// Compares two tensors within atol + rtol |want|.
void Expect(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  int bad = 0;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double g = got.dtype() == DType::kFloat32 ? got.data<float>()[i] : got.data<double>()[i];
    const double w = want.dtype() == DType::kFloat32 ? want.data<float>()[i] : want.data<double>()[i];
    if (!(std::abs(g - w) <= tol * (1 + std::abs(w))) && bad++ < 3) ADD_FAILURE() << what << "[" << i << "]: " << g << " vs " << w;
  }
}

template <typename T>
Tensor Zeros(const Shape& s) {
  return Tensor::FromVector<T>(std::vector<T>(static_cast<size_t>(ShapeNumElements(s)), T(0)), s);
}

template <typename T>
void CheckConfig(const Config& c, DType dt, double tol) {
  SCOPED_TRACE(c.name + " " + DTypeName(dt));
  const int64_t D = c.direction == "bidirectional" ? 2 : 1, S = c.S, B = c.B, I = c.I, H = c.H;
  const int64_t G = c.op == "RNN" ? 1 : c.op == "GRU" ? 3 : 4;
  uint64_t seed = 100;
  const Tensor x = parity::Random(dt, {S, B, I}, seed++);
  const Tensor w = parity::Random(dt, {D, G * H, I}, seed++, -0.6, 0.6);
  const Tensor r = parity::Random(dt, {D, G * H, H}, seed++, -0.6, 0.6);
  const Tensor b = c.bias ? parity::Random(dt, {D, 2 * G * H}, seed++, -0.3, 0.3) : Tensor();
  const Tensor sl = c.lens ? Tensor::FromVector<int32_t>({static_cast<int32_t>(S), 2, 0}, {B}) : Tensor();
  const Tensor h0 = c.h0 ? parity::Random(dt, {D, B, H}, seed++) : Tensor();
  const Tensor c0 = c.c0 ? parity::Random(dt, {D, B, H}, seed++) : Tensor();
  std::vector<parity::KernelRun> storage;
  std::vector<int64_t> lens;
  if (c.lens) lens = {S, 2, 0};

  RecurrentCall<T> call;
  call.S = S, call.B = B, call.I = I, call.H = H, call.D = D;
  auto attrs = cpu::recurrent::RecurrentAttrs::FromNode(
      MakeNode(c.op, "", c, 1, 1), static_cast<int>(G == 1 ? 1 : G == 3 ? 2 : 3),
      G == 1 ? std::vector<std::string>{"Tanh"} : G == 3 ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                          : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"});
  ASSERT_TRUE(attrs.ok()) << attrs.status().ToString();
  call.reverse_only = attrs->reverse_only;
  call.input_forget = attrs->input_forget;
  call.linear_before_reset = attrs->linear_before_reset;
  call.clip = attrs->clip;
  for (int d = 0; d < 2; ++d)
    for (int q = 0; q < 3; ++q) call.act[d][q] = {static_cast<int>(attrs->act[d][q].kind), attrs->act[d][q].alpha, attrs->act[d][q].beta};
  call.lens = c.lens ? lens.data() : nullptr;
  call.x = x.data<T>(), call.w = w.data<T>(), call.r = r.data<T>();
  call.b = c.bias ? b.data<T>() : nullptr;
  call.h0 = c.h0 ? h0.data<T>() : nullptr;
  call.c0 = c.c0 ? c0.data<T>() : nullptr;
  HostBackend<T> be;

  // Forward: the training op (all its outputs), then ours.
  const std::string fwd_op = c.op == "RNN" ? "RNN" : c.op + "Training";
  const std::string fwd_domain = c.op == "RNN" ? "" : "com.microsoft";
  const int fwd_outputs = c.op == "RNN" ? 2 : c.op == "GRU" ? 3 : 5;
  KernelFactory fwd_factory = c.op == "RNN" ? cpu::kRnn : c.op == "GRU" ? cpu::kGruTraining : cpu::kLstmTraining;
  std::vector<Tensor> fin = {x, w, r, b, sl, h0};
  if (c.op == "LSTM") fin.push_back(c0);
  const Node fnode = MakeNode(fwd_op, fwd_domain, c, static_cast<int>(fin.size()), fwd_outputs);
  const std::vector<Tensor> want = RunCpu(fwd_factory, fnode, fin, &storage);
  ASSERT_EQ(want.size(), static_cast<size_t>(fwd_outputs));
  const RecurrentPass fpass = c.op == "RNN" ? RecurrentPass::kRnn : c.op == "GRU" ? RecurrentPass::kGru : RecurrentPass::kLstm;
  std::vector<Tensor> got;
  for (const Tensor& t : want) got.push_back(parity::Random(dt, t.shape(), seed++, 7, 9));  // garbage the pass must overwrite
  std::vector<T> work(static_cast<size_t>(cuda::RecurrentWorkElements(fpass, S, B, H, D)) + 1, T(-3));
  RecurrentCall<T> f = call;
  f.work = work.data();
  f.y = got[0].data<T>();
  f.yh = got[1].data<T>();
  if (c.op == "GRU") f.gates = got[2].data<T>();
  if (c.op == "LSTM") f.yc = got[2].data<T>(), f.call = got[3].data<T>(), f.gates = got[4].data<T>();
  ASSERT_TRUE(cuda::RunRecurrentPass(be, fpass, f));
  for (size_t i = 0; i < want.size(); ++i) Expect(got[i], want[i], tol, fwd_op + " output " + std::to_string(i));

  // Gradient, from the CPU forward outputs and random output gradients.
  const Tensor dy = parity::Random(dt, {S, D, B, H}, seed++);
  const Tensor dyh = parity::Random(dt, {D, B, H}, seed++);
  const Tensor dyc = parity::Random(dt, {D, B, H}, seed++);
  std::vector<Tensor> gin;
  std::string grad_op;
  KernelFactory grad_factory;
  RecurrentPass gpass;
  RecurrentCall<T> g = call;
  g.hall = want[0].data<T>();
  g.dy = dy.data<T>();
  g.dyh = dyh.data<T>();
  if (c.op == "RNN") {
    grad_op = "RNNGrad", grad_factory = cpu::kRnnGrad, gpass = RecurrentPass::kRnnGrad;
    gin = {x, w, r, b, sl, h0, want[0], dy, dyh};
  } else if (c.op == "GRU") {
    grad_op = "GRUGrad", grad_factory = cpu::kGruGrad, gpass = RecurrentPass::kGruGrad;
    gin = {x, w, r, b, sl, h0, want[0], want[2], dy, dyh};
    g.gates_in = want[2].data<T>();
  } else {
    grad_op = "LSTMGrad", grad_factory = cpu::kLstmGrad, gpass = RecurrentPass::kLstmGrad;
    gin = {x, w, r, sl, h0, c0, want[0], want[3], want[4], dy, dyh, dyc};
    g.call_in = want[3].data<T>();
    g.gates_in = want[4].data<T>();
    g.dyc = dyc.data<T>();
  }
  const int grad_outputs = c.op == "LSTM" ? 6 : 5;
  const Node gnode = MakeNode(grad_op, "com.microsoft", c, static_cast<int>(gin.size()), grad_outputs);
  const std::vector<Tensor> gwant = RunCpu(grad_factory, gnode, gin, &storage);
  ASSERT_EQ(gwant.size(), static_cast<size_t>(grad_outputs));
  std::vector<Tensor> ggot;
  for (const Tensor& t : gwant) ggot.push_back(parity::Random(dt, t.shape(), seed++, 7, 9));
  std::vector<T> gwork(static_cast<size_t>(cuda::RecurrentWorkElements(gpass, S, B, H, D)) + 1, T(-3));
  g.work = gwork.data();
  g.dx = ggot[0].data<T>(), g.dw = ggot[1].data<T>(), g.dr = ggot[2].data<T>(), g.db = ggot[3].data<T>();
  g.dh0 = ggot[4].data<T>();
  if (c.op == "LSTM") g.dc0 = ggot[5].data<T>();
  ASSERT_TRUE(cuda::RunRecurrentPass(be, gpass, g));
  const char* names[] = {"dX", "dW", "dR", "dB", "dH0", "dC0"};
  for (size_t i = 0; i < gwant.size(); ++i) Expect(ggot[i], gwant[i], tol, grad_op + " " + names[i]);
}

std::vector<Config> Configs() {
  std::vector<Config> v;
  for (const char* op : {"RNN", "GRU", "LSTM"}) {
    Config plain;
    plain.name = std::string(op) + "_plain";
    plain.op = op;
    v.push_back(plain);
    Config full = plain;
    full.name = std::string(op) + "_bidirectional_lens_states_clip";
    full.direction = "bidirectional";
    full.lens = full.h0 = true;
    full.c0 = std::string(op) == "LSTM";
    full.clip = 0.9f;
    v.push_back(full);
    Config rev = plain;
    rev.name = std::string(op) + "_reverse_lens_no_bias";
    rev.direction = "reverse";
    rev.lens = true;
    rev.bias = false;
    v.push_back(rev);
  }
  Config lbr;
  lbr.name = "GRU_linear_before_reset_bidirectional_lens";
  lbr.op = "GRU";
  lbr.linear_before_reset = true;
  lbr.direction = "bidirectional";
  lbr.lens = lbr.h0 = true;
  v.push_back(lbr);
  Config acts;
  acts.name = "GRU_other_activations";
  acts.op = "GRU";
  acts.activations = {"HardSigmoid", "Softsign"};
  acts.h0 = true;
  v.push_back(acts);
  Config rnn_acts;
  rnn_acts.name = "RNN_relu";
  rnn_acts.op = "RNN";
  rnn_acts.activations = {"Relu"};
  v.push_back(rnn_acts);
  Config forget;
  forget.name = "LSTM_input_forget_lens";
  forget.op = "LSTM";
  forget.input_forget = true;
  forget.lens = forget.h0 = forget.c0 = true;
  v.push_back(forget);
  Config lstm_acts;
  lstm_acts.name = "LSTM_other_activations";
  lstm_acts.op = "LSTM";
  lstm_acts.activations = {"HardSigmoid", "Elu", "Softplus"};
  v.push_back(lstm_acts);
  return v;
}

class RecurrentMathTest : public ::testing::TestWithParam<Config> {};

TEST_P(RecurrentMathTest, Float32MatchesCpu) { CheckConfig<float>(GetParam(), DType::kFloat32, 2e-5); }
TEST_P(RecurrentMathTest, Float64MatchesCpu) { CheckConfig<double>(GetParam(), DType::kFloat64, 1e-12); }

INSTANTIATE_TEST_SUITE_P(Passes, RecurrentMathTest, ::testing::ValuesIn(Configs()),
                         [](const ::testing::TestParamInfo<Config>& info) { return info.param.name; });

}  // namespace
}  // namespace ontrain
