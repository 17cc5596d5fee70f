// Shared pieces of the recurrent-layer kernels (lstm.cc, gru.cc, rnn.cc): ONNX's RNN activations with their
// derivatives, the attributes every recurrent op takes, its shapes in layout 0, the checks of the inputs they
// share, and the layout-1 transposes.
#pragma once

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <string>
#include <vector>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/gemm.h"
#include "providers/kernel.h"

namespace ontrain {
namespace cpu {
namespace recurrent {

// One of ONNX's RNN activations, with its derivative from the pre-activation.
struct Activation {
  enum Kind { kSigmoid, kTanh, kRelu, kHardSigmoid, kLeakyRelu, kThresholdedRelu, kScaledTanh, kAffine, kElu,
              kSoftsign, kSoftplus } kind = kSigmoid;
  double alpha = 0, beta = 0;

  double operator()(double x) const {
    switch (kind) {
      case kSigmoid: return 1.0 / (1.0 + std::exp(-x));
      case kTanh: return std::tanh(x);
      case kRelu: return x > 0 ? x : 0;
      case kHardSigmoid: return std::min(1.0, std::max(0.0, alpha * x + beta));
      case kLeakyRelu: return x >= 0 ? x : alpha * x;
      case kThresholdedRelu: return x > alpha ? x : 0;
      case kScaledTanh: return alpha * std::tanh(beta * x);
      case kAffine: return alpha * x + beta;
      case kElu: return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case kSoftsign: return x / (1 + std::abs(x));
      case kSoftplus: return std::log1p(std::exp(-std::abs(x))) + std::max(x, 0.0);
    }
    return 0;
  }
  double Derivative(double x) const {
    switch (kind) {
      case kSigmoid: {
        const double s = 1.0 / (1.0 + std::exp(-x));
        return s * (1 - s);
      }
      case kTanh: {
        const double t = std::tanh(x);
        return 1 - t * t;
      }
      case kRelu: return x > 0 ? 1 : 0;
      case kHardSigmoid: {
        const double v = alpha * x + beta;
        return v > 0 && v < 1 ? alpha : 0;
      }
      case kLeakyRelu: return x >= 0 ? 1 : alpha;
      case kThresholdedRelu: return x > alpha ? 1 : 0;
      case kScaledTanh: {
        const double t = std::tanh(beta * x);
        return alpha * beta * (1 - t * t);
      }
      case kAffine: return alpha;
      case kElu: return x >= 0 ? 1 : alpha * std::exp(x);
      case kSoftsign: {
        const double d = 1 + std::abs(x);
        return 1 / (d * d);
      }
      case kSoftplus: return 1.0 / (1.0 + std::exp(-x));
    }
    return 0;
  }
};

// The attributes of a recurrent node (LSTM, GRU or RNN), checked.
struct RecurrentAttrs {
  int64_t hidden = 0, directions = 1, layout = 0;
  bool reverse_only = false, input_forget = false;
  double clip = 0;  // 0: none
  Activation act[2][3];  // per direction: LSTM f, g, h; GRU f, g; RNN f
  bool linear_before_reset = false;  // GRU

  // `count` activations per direction, by default `defaults` (LSTM: Sigmoid, Tanh, Tanh; GRU: Sigmoid, Tanh;
  // RNN: Tanh).
  static StatusOr<RecurrentAttrs> FromNode(const Node& n, int count = 3,
                                      std::vector<std::string> defaults = {"Sigmoid", "Tanh", "Tanh"}) {
    RecurrentAttrs a;
    a.linear_before_reset = n.GetInt("linear_before_reset", 0) != 0;
    a.hidden = n.GetInt("hidden_size", 0);
    if (a.hidden <= 0) return InvalidArgument("hidden_size must be set and positive");
    const std::string dir = n.GetString("direction", "forward");
    if (dir == "bidirectional") a.directions = 2;
    else if (dir == "reverse") a.reverse_only = true;
    else if (dir != "forward") return InvalidArgument("direction \"", dir, "\" is not forward, reverse or bidirectional");
    a.layout = n.GetInt("layout", 0);
    if (a.layout != 0 && a.layout != 1) return InvalidArgument("layout must be 0 or 1");
    a.input_forget = n.GetInt("input_forget", 0) != 0;
    if (n.HasAttribute("clip")) {
      a.clip = n.GetFloat("clip", 0.0f);
      if (!(a.clip > 0)) return InvalidArgument("clip must be positive, got ", a.clip);
    }
    std::vector<std::string> names;
    if (n.HasAttribute("activations")) {
      for (const std::string& s : n.attributes.at("activations").strings()) names.push_back(s);
    }
    if (names.empty()) names = defaults;
    if (static_cast<int>(names.size()) == count && a.directions == 2) {  // one list for both directions
      const std::vector<std::string> once = names;
      names.insert(names.end(), once.begin(), once.end());
    }
    if (static_cast<int64_t>(names.size()) != count * a.directions) {
      return InvalidArgument("activations lists ", names.size(), " functions, expected ", count * a.directions);
    }
    std::vector<float> alphas, betas;
    if (n.HasAttribute("activation_alpha")) for (float v : n.attributes.at("activation_alpha").floats()) alphas.push_back(v);
    if (n.HasAttribute("activation_beta")) for (float v : n.attributes.at("activation_beta").floats()) betas.push_back(v);
    size_t ai = 0, bi = 0;
    for (int64_t k = 0; k < count * a.directions; ++k) {
      Activation& f = a.act[k / count][k % count];
      const std::string& s = names[k];
      auto take = [](const std::vector<float>& v, size_t* i, double dflt) { return *i < v.size() ? v[(*i)++] : dflt; };
      if (s == "Sigmoid") f.kind = Activation::kSigmoid;
      else if (s == "Tanh") f.kind = Activation::kTanh;
      else if (s == "Relu") f.kind = Activation::kRelu;
      else if (s == "Softsign") f.kind = Activation::kSoftsign;
      else if (s == "Softplus") f.kind = Activation::kSoftplus;
      else if (s == "HardSigmoid") {
        f.kind = Activation::kHardSigmoid;
        f.alpha = take(alphas, &ai, 0.2);
        f.beta = take(betas, &bi, 0.5);
      } else if (s == "LeakyRelu") {
        f.kind = Activation::kLeakyRelu;
        f.alpha = take(alphas, &ai, 0.01);
      } else if (s == "ThresholdedRelu") {
        f.kind = Activation::kThresholdedRelu;
        f.alpha = take(alphas, &ai, 1.0);
      } else if (s == "ScaledTanh") {
        f.kind = Activation::kScaledTanh;
        f.alpha = take(alphas, &ai, 1.0);
        f.beta = take(betas, &bi, 1.0);
      } else if (s == "Affine") {
        f.kind = Activation::kAffine;
        f.alpha = take(alphas, &ai, 1.0);
        f.beta = take(betas, &bi, 0.0);
      } else if (s == "Elu") {
        f.kind = Activation::kElu;
        f.alpha = take(alphas, &ai, 1.0);
      } else {
        return InvalidArgument("activation \"", s, "\" is not one of ONNX's RNN activations");
      }
    }
    return a;
  }
};

// Shapes of one recurrent call in layout 0: X [seq, batch, input], W [dirs, gates * H, input], R [dirs, gates * H, H].
struct RecurrentDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1;

  // `gates`: 4 for LSTM, 3 for GRU, 1 for RNN.
  Status Check(const RecurrentAttrs& a, const Tensor& x, const Tensor& w, const Tensor& r, int64_t gates = 4) {
    if (x.rank() != 3) return InvalidArgument("X must have rank 3, got ", ShapeToString(x.shape()));
    seq = a.layout ? x.dim(1) : x.dim(0);
    batch = a.layout ? x.dim(0) : x.dim(1);
    input = x.dim(2);
    hidden = a.hidden;
    dirs = a.directions;
    if (w.shape() != Shape{dirs, gates * hidden, input}) {
      return InvalidArgument("W has shape ", ShapeToString(w.shape()), ", expected [", dirs, ",", gates * hidden, ",", input, "]");
    }
    if (r.shape() != Shape{dirs, gates * hidden, hidden}) {
      return InvalidArgument("R has shape ", ShapeToString(r.shape()), ", expected [", dirs, ",", gates * hidden, ",", hidden, "]");
    }
    return Status::OK();
  }
};

inline const Tensor* Optional(const KernelContext& ctx, int i) {
  const Tensor* t = ctx.input(i);
  return t && t->NumElements() > 0 ? t : nullptr;
}

// Sequence length of batch row b: sequence_lens[b], or every step without that input.
inline int64_t SeqLen(const Tensor* sl, int64_t b, int64_t steps) {
  if (!sl) return steps;
  return sl->dtype() == DType::kInt64 ? sl->data<int64_t>()[b] : sl->data<int32_t>()[b];
}

// Every input of a recurrent op or its gradient but sequence_lens (input `lens`: int32 or int64) has X's
// dtype: the kernels read them with X's element type.
inline Status CheckRecurrentDTypes(const KernelContext& ctx, int lens = 4) {
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    const Tensor* t = ctx.input(i);
    if (t == nullptr || t->NumElements() == 0) continue;
    if (i == lens) {
      if (t->dtype() != DType::kInt32 && t->dtype() != DType::kInt64) {
        return InvalidArgument("sequence_lens (input ", i, ") must be int32 or int64, got ", DTypeName(t->dtype()));
      }
    } else if (t->dtype() != ctx.input(0)->dtype()) {
      return InvalidArgument("input ", i, " is ", DTypeName(t->dtype()), " but X is ", DTypeName(ctx.input(0)->dtype()),
                             "; they must have the same dtype");
    }
  }
  return Status::OK();
}

// sequence_lens (Optional: null or int32/int64, CheckRecurrentDTypes): [batch], each within [0, seq].
inline Status CheckSequenceLens(const Tensor* sl, int64_t batch, int64_t seq) {
  if (sl == nullptr) return Status::OK();
  if (sl->shape() != Shape{batch}) {
    return InvalidArgument("sequence_lens has shape ", ShapeToString(sl->shape()), ", expected [", batch, "]");
  }
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = SeqLen(sl, b, seq);
    if (len < 0 || len > seq) return InvalidArgument("sequence_lens[", b, "] = ", len, " is outside [0, ", seq, "]");
  }
  return Status::OK();
}

// A recurrent gradient's optional inputs, where present: sequence_lens at `lens` and the tensors of `shaped`
// (input, expected shape).
inline Status CheckRecurrentGradInputs(const KernelContext& ctx, int64_t batch, int64_t seq, int lens,
                                       std::initializer_list<std::pair<int, Shape>> shaped) {
  ONT_RETURN_IF_ERROR(CheckSequenceLens(Optional(ctx, lens), batch, seq));
  for (const auto& [i, shape] : shaped) {
    const Tensor* t = ctx.input(i);
    if (t != nullptr && t->NumElements() > 0 && t->shape() != shape) {
      return InvalidArgument("input ", i, " has shape ", ShapeToString(t->shape()), ", expected ", ShapeToString(shape));
    }
  }
  return Status::OK();
}

// The inputs every recurrent op shares: B [D, bias] (input 3), sequence_lens [batch] within [0, seq] (input
// 4), and the initial states at `states` ([D, batch, H], or [batch, D, H] in layout 1); and their dtypes.
inline Status CheckRecurrentInputs(const KernelContext& ctx, const RecurrentAttrs& a, const RecurrentDims& n, int64_t bias,
                            std::initializer_list<int> states) {
  const int64_t D = n.dirs, B = n.batch, H = n.hidden, S = n.seq;
  ONT_RETURN_IF_ERROR(CheckRecurrentDTypes(ctx));
  if (const Tensor* b = Optional(ctx, 3); b && b->shape() != Shape{D, bias}) {
    return InvalidArgument("B has shape ", ShapeToString(b->shape()), ", expected [", D, ",", bias, "]");
  }
  ONT_RETURN_IF_ERROR(CheckSequenceLens(Optional(ctx, 4), B, S));
  const Shape state = a.layout ? Shape{B, D, H} : Shape{D, B, H};
  for (int i : states) {
    if (const Tensor* st = Optional(ctx, i); st && st->shape() != state) {
      return InvalidArgument(i == 5 ? "initial_h" : "initial_c", " has shape ", ShapeToString(st->shape()), ", expected ",
                             ShapeToString(state));
    }
  }
  return Status::OK();
}

// [a, b, inner] -> [b, a, inner]: layout 1's X and initial states into layout 0, and final states back.
template <typename T>
void SwapOuter(const T* src, int64_t a, int64_t b, int64_t inner, T* dst) {
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j) std::copy_n(src + (i * b + j) * inner, inner, dst + (j * a + i) * inner);
}

// Y [S, D, B, H] (layout 0) -> [B, S, D, H] (layout 1).
template <typename T>
void YToBatchFirst(const T* y, int64_t S, int64_t D, int64_t B, int64_t H, T* out) {
  for (int64_t s = 0; s < S; ++s)
    for (int64_t d = 0; d < D; ++d)
      for (int64_t bb = 0; bb < B; ++bb) std::copy_n(y + ((s * D + d) * B + bb) * H, H, out + ((bb * S + s) * D + d) * H);
}

// The state a batch row starts step s from, in processing order (the reverse direction runs each row from its
// own last step, len - 1): the initial state's row at s == 0 (null when there is none), else the stored state
// of the step processed before. `all` is [S, D, B, H], `init` [D, B, H] or null.
template <typename T>
struct PrevState {
  const T* all;
  const T* init;
  int64_t D, d, B, H;
  bool reverse;
  const T* operator()(int64_t s, int64_t bb, int64_t len) const {
    if (s == 0) return init ? init + (d * B + bb) * H : nullptr;
    const int64_t tp = reverse ? len - s : s - 1;
    return all + ((tp * D + d) * B + bb) * H;
  }
};

// What a recurrent gradient kernel's step functions share for one direction d: the dims, the direction's
// order and whether the gates take the vectorized float path (fast), its activations f and g, the
// sequence lengths, dHAll (or null) and the previous hidden states.
template <typename T>
struct GradDirection {
  const RecurrentAttrs& a;
  int64_t D, B, H, S, d;
  bool reverse, fast;
  const Activation& f;
  const Activation& g;
  const Tensor* sl;
  const Tensor* dyall;
  PrevState<T> hprev;

  int64_t Len(int64_t bb) const { return SeqLen(sl, bb, S); }
  // Row bb's time index at step s, which runs only while s < Len(bb).
  int64_t Time(int64_t s, int64_t bb) const { return reverse ? Len(bb) - 1 - s : s; }
  bool Clipped(double z) const { return a.clip > 0 && (z >= a.clip || z <= -a.clip); }
};

// One step's share of a recurrent weight gradient: dR [q_rows, H] += dPre' Hp, where dPre [B, >= q_rows]
// (rows lda apart) holds the step's gate gradients and Hp [B, H] the batch rows' previous hidden states,
// copied into `hp` with zero rows for batch rows that did not run this step or start from no state (their
// dPre rows must be finite). One GEMM per step: it replaced a loop of rank-1 updates per batch row.
template <typename T, typename PrevOf>
void AccumulateRecurrentWeights(const T* dpre, int64_t lda, int64_t q_rows, int64_t B, int64_t H, PrevOf prev_of,
                                T* hp, T* dr) {
  bool any = false;
  for (int64_t bb = 0; bb < B; ++bb) {
    const T* src = prev_of(bb);  // null: the row did not run, or has no previous state
    if (src != nullptr) std::copy_n(src, H, hp + bb * H);
    else std::fill(hp + bb * H, hp + (bb + 1) * H, T(0));
    any = any || src != nullptr;
  }
  if (any) GemmLd<T>(true, false, q_rows, H, B, T(1), dpre, lda, hp, H, T(1), dr, H);
}

// How every recurrent gradient kernel ends a direction d, from dG [rows, G] (the gradients of the gate
// pre-activations over all steps and batch rows): dX += dG W_d, dW_d += dG' X, and the bias gradient, whose
// W half gets dG's column sums and whose R half gets the first `r_columns` of them (all G for LSTM and RNN;
// GRU's R half of the hidden gate is computed by the kernel). Any of dx, dw, db may be null.
template <typename T>
void InputAndBiasGradients(const T* dg, const Tensor& x, const Tensor& w, int64_t rows, int64_t I, int64_t G,
                           int64_t d, int64_t r_columns, Tensor* dx, Tensor* dw, Tensor* db) {
  if (dx) Gemm<T>(false, false, rows, I, G, T(1), dg, w.data<T>() + d * G * I, T(1), dx->data<T>(), nullptr);
  if (dw) Gemm<T>(true, false, G, I, rows, T(1), dg, x.data<T>(), T(1), dw->data<T>() + d * G * I, nullptr);
  if (db == nullptr) return;
  T* dbd = db->data<T>() + d * 2 * G;
  for (int64_t q = 0; q < G; ++q) {
    double sum = 0;
    for (int64_t row = 0; row < rows; ++row) sum += dg[row * G + q];
    dbd[q] = static_cast<T>(sum);
    if (q < r_columns) dbd[G + q] = static_cast<T>(sum);
  }
}

}  // namespace recurrent
}  // namespace cpu
}  // namespace ontrain
