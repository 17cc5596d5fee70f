// ai.ontrain ScaledMaskedSoftmax and ScaledMaskedSoftmaxGrad: attention's softmax with the elementwise ops
// around it, which the executor fuses (engine/kernel_fusion.h), so that the scores are read once instead of
// once per op (each op a pass over batch x heads x seq x seq floats, which for long sequences is far larger
// than the caches).
//
// ScaledMaskedSoftmax(X, S?, C?, F?) -> Y = Softmax(V) along the last axis, where V is X, then V / S (attribute
// scale_op 1, Div(X, S)) or V * S (scale_op 2, Mul), then, where C is given, Where(C, F, V) (fill_where 1) or
// Where(C, V, F) (fill_where 0). ScaledMaskedSoftmaxGrad(dY, Y, S?, C?, F?) -> the gradient SoftmaxGrad_13(dY,
// Y) (softmax_rows.h) followed by the same ops in the order the attribute mask_first gives (the backward pass
// masks, then scales). S and F are single values; C (bool) and the other inputs broadcast as the separate ops
// broadcast them, and every element goes through the separate ops' float operations in their order: the bits
// of the unfused nodes. float32, the softmax of each row by vmath.h's VSoftmaxRow, as Softmax's kernel.
#include <immintrin.h>

#include <algorithm>

#include "providers/cpu/kernels/common.h"
#include "providers/cpu/kernels/elementwise.h"
#include "providers/cpu/kernels/kernels.h"
#include "providers/cpu/kernels/softmax_rows.h"
#include "providers/cpu/kernels/vmath.h"

namespace ontrain {
namespace cpu {
namespace {

enum ScaleOp : int64_t { kNoScale = 0, kDivide = 1, kMultiply = 2 };

// Rows a kernel takes at a time (16 rows of attention's 64 scores: 4 KB, in L1 between the two passes).
constexpr int64_t kRowBlock = 2 * kSoftmaxGradRowGroup;

// The elementwise ops of a fused node, read from its attributes and its scalar inputs.
struct RowOps {
  int64_t scale_op = kNoScale;
  float s = 1.0f;
  bool mask = false, fill_where = true, mask_first = false;
  float fill = 0.0f;
};

// y[i] = the ops applied to v[i * sv] with the mask's byte c[i * sc] (strides 0 or 1; kUnit: both 1, so
// that the loop vectorizes). y may be v: each y[i] depends on its own v[i] only (ivdep).
template <int64_t kScale, int kMask, bool kUnit>  // kMask: 0 none, 1 after the scale, 2 before it
__attribute__((always_inline)) inline void OpsBody(const RowOps& ops, const float* v, int64_t sv, const uint8_t* c,
                                                   int64_t sc, float* y, int64_t n) {
  const float s = ops.s, fill = ops.fill;
  const bool fill_where = ops.fill_where;
  if (kUnit) sv = sc = 1;
#pragma GCC ivdep
  for (int64_t i = 0; i < n; ++i) {
    float x = v[i * sv];
    const bool filled = kMask != 0 && (c[i * sc] != 0) == fill_where;
    if (kMask == 2) x = filled ? fill : x;
    if (kScale == kDivide) x = x / s;
    if (kScale == kMultiply) x = x * s;
    if (kMask == 1) x = filled ? fill : x;
    y[i] = x;
  }
}

// OpsBody for AVX-512 (elementwise.h's ONT_LOOP_V4): where both strides are 1, 16 elements a vector, the
// mask's bytes tested into a lane mask and the fill blended in (GCC left the masked loops unvectorized);
// the same IEEE operations in the same order, so the same bits as the baseline loop.
template <int64_t kScale, int kMask, bool kUnit>
ONT_LOOP_V4 void OpsLoopV4(const RowOps& ops, const float* v, int64_t sv, const uint8_t* c, int64_t sc, float* y,
                           int64_t n) {
  int64_t i = 0;
  if (kUnit) {
    const __m512 vs = _mm512_set1_ps(ops.s), vf = _mm512_set1_ps(ops.fill);
    for (; i + 16 <= n; i += 16) {
      __m512 x = _mm512_loadu_ps(v + i);
      __mmask16 filled = 0;
      if (kMask != 0) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i));
        const __mmask16 set = _mm_test_epi8_mask(bytes, bytes);
        filled = ops.fill_where ? set : static_cast<__mmask16>(~set);
      }
      if (kMask == 2) x = _mm512_mask_mov_ps(x, filled, vf);
      if (kScale == kDivide) x = _mm512_div_ps(x, vs);
      if (kScale == kMultiply) x = _mm512_mul_ps(x, vs);
      if (kMask == 1) x = _mm512_mask_mov_ps(x, filled, vf);
      _mm512_storeu_ps(y + i, x);
    }
  }
  OpsBody<kScale, kMask, kUnit>(ops, v + i * sv, sv, kMask != 0 ? c + i * sc : c, sc, y + i, n - i);
}
template <int64_t kScale, int kMask, bool kUnit>
void OpsLoopBase(const RowOps& ops, const float* v, int64_t sv, const uint8_t* c, int64_t sc, float* y, int64_t n) {
  OpsBody<kScale, kMask, kUnit>(ops, v, sv, c, sc, y, n);
}

template <int64_t kScale, int kMask>
void OpsLoopAt(const RowOps& ops, const float* v, int64_t sv, const uint8_t* c, int64_t sc, float* y, int64_t n) {
  const bool unit = sv == 1 && (kMask == 0 || sc == 1);
  if (CpuHasAvx512()) {
    if (unit) OpsLoopV4<kScale, kMask, true>(ops, v, 1, c, 1, y, n);
    else OpsLoopV4<kScale, kMask, false>(ops, v, sv, c, sc, y, n);
  } else {
    if (unit) OpsLoopBase<kScale, kMask, true>(ops, v, 1, c, 1, y, n);
    else OpsLoopBase<kScale, kMask, false>(ops, v, sv, c, sc, y, n);
  }
}

template <int64_t kScale>
void OpsLoopScaled(const RowOps& ops, const float* v, int64_t sv, const uint8_t* c, int64_t sc, float* y, int64_t n) {
  if (!ops.mask) OpsLoopAt<kScale, 0>(ops, v, sv, c, sc, y, n);
  else if (ops.mask_first) OpsLoopAt<kScale, 2>(ops, v, sv, c, sc, y, n);
  else OpsLoopAt<kScale, 1>(ops, v, sv, c, sc, y, n);
}

void ApplyOps(const RowOps& ops, const float* v, int64_t sv, const uint8_t* c, int64_t sc, float* y, int64_t n) {
  switch (ops.scale_op) {
    case kDivide: OpsLoopScaled<kDivide>(ops, v, sv, c, sc, y, n); break;
    case kMultiply: OpsLoopScaled<kMultiply>(ops, v, sv, c, sc, y, n); break;
    default: OpsLoopScaled<kNoScale>(ops, v, sv, c, sc, y, n); break;
  }
}

// The output's rows along its last axis (the softmax's), and for each the offsets of X's (or dY's) and C's
// elements in off[0] and off[1], with their strides along the row (0 or 1). Offsets divide by every outer dim
// (about 100 cycles a row of 64 floats); where X is whole and C a block of the output's last dims
// (attention's [seq, seq] mask under [batch, heads, seq, seq]), a multiplication and a remainder do.
class RowOffsets {
 public:
  RowOffsets(const Shape& x, const Tensor* c, const Shape& out)
      : out_(out), xs_(BroadcastStrides(x, out)), cs_(c ? BroadcastStrides(c->shape(), out) : Shape(out.size(), 0)),
        len_(out.back()), masked_(c != nullptr) {
    rows_ = len_ == 0 ? 0 : ShapeNumElements(out) / len_;
    if (x != out) return;
    if (c == nullptr) {
      direct_ = true;
      return;
    }
    const Shape& cs = c->shape();
    size_t lead = 0;
    while (lead < cs.size() && cs[lead] == 1) ++lead;
    const size_t k = cs.size() - lead;
    if (k == 0 || k > out.size()) return;
    for (size_t i = 0; i < k; ++i) {
      if (cs[lead + i] != out[out.size() - k + i]) return;
    }
    period_ = c->NumElements() / len_;
    direct_ = period_ > 0;
  }
  int64_t rows() const { return rows_; }
  int64_t len() const { return len_; }
  // The end (at most `limit`) of the run of rows from r whose X and C elements are contiguous in memory
  // from row r's on, so that the ops go over the run in one loop: where direct, up to the end of C's block.
  int64_t RunEnd(int64_t r, int64_t limit) const {
    if (!direct_) return r + 1;
    return masked_ ? std::min(limit, r + period_ - r % period_) : limit;
  }
  int64_t x_stride() const { return xs_.back(); }
  int64_t c_stride() const { return cs_.back(); }
  void At(int64_t r, int64_t* off) const {
    if (direct_) {
      off[0] = r * len_;
      off[1] = masked_ ? r % period_ * len_ : 0;
      return;
    }
    off[0] = off[1] = 0;
    for (int64_t d = static_cast<int64_t>(out_.size()) - 2; d >= 0; --d) {
      const int64_t idx = r % out_[d];
      r /= out_[d];
      off[0] += idx * xs_[d];
      off[1] += idx * cs_[d];
    }
  }

 private:
  Shape out_, xs_, cs_;
  int64_t len_, rows_ = 0;
  bool masked_;
  bool direct_ = false;
  int64_t period_ = 0;
};

// The ops of rows [r0, r1) of the output from `src` (laid out as X, or as the output itself when that is X's
// shape) into the same rows of `dst`, a run of rows at a time (RowOffsets::RunEnd): one loop per row of 64
// floats cost about as much again in calls as the divisions.
void ApplyRows(const RowOffsets& at, const RowOps& ops, const float* src, const uint8_t* pc, float* dst, int64_t r0,
               int64_t r1) {
  const int64_t len = at.len();
  int64_t off[2] = {0, 0};
  for (int64_t r = r0; r < r1;) {
    const int64_t end = at.RunEnd(r, r1);
    at.At(r, off);
    const uint8_t* c = pc ? pc + off[1] : nullptr;
    if (end > r + 1) ApplyOps(ops, src + off[0], 1, c, 1, dst + r * len, (end - r) * len);
    else ApplyOps(ops, src + off[0], at.x_stride(), c, at.c_stride(), dst + r * len, len);
    r = end;
  }
}

// Reads the fused node's attributes, checks inputs first .. first + 2 (S?, C?, F?) and declares output 0 as
// the broadcast of `main` (X or dY) with them. `what` names the op in errors.
class FusedSoftmaxBase : public OpKernel {
 protected:
  FusedSoftmaxBase(const NodeInfo& info, const char* what)
      : what_(what),
        scale_op_(info.node->GetInt("scale_op", kNoScale)),
        fill_where_(info.node->GetInt("fill_where", 1) != 0),
        mask_first_(info.node->GetInt("mask_first", 0) != 0) {}

  Status PrepareOps(KernelContext& ctx, const Tensor& main, int first) {
    if (main.dtype() != DType::kFloat32) return InvalidArgument(what_, " takes float32, got ", DTypeName(main.dtype()));
    if (main.rank() == 0) return InvalidArgument(what_, ": input must have rank >= 1");
    if (scale_op_ < kNoScale || scale_op_ > kMultiply) return InvalidArgument(what_, ": scale_op ", scale_op_, " is not 0, 1 or 2");
    const Tensor* s = ctx.input(first);
    const Tensor* c = ctx.input(first + 1);
    const Tensor* f = ctx.input(first + 2);
    if ((scale_op_ != kNoScale) != (s != nullptr)) return InvalidArgument(what_, ": scale_op ", scale_op_, " and input S disagree");
    if ((c == nullptr) != (f == nullptr)) return InvalidArgument(what_, ": the mask C and its fill F come together");
    Shape out = main.shape();
    for (const Tensor* t : {s, f}) {
      if (t == nullptr) continue;
      if (t->dtype() != DType::kFloat32 || t->NumElements() != 1) {
        return InvalidArgument(what_, ": S and F must be single float32 values, got ", DTypeName(t->dtype()), ShapeToString(t->shape()));
      }
      ONT_ASSIGN_OR_RETURN(out, BroadcastShapes({out, t->shape()}));
    }
    if (c != nullptr) {
      if (c->dtype() != DType::kBool) return InvalidArgument(what_, ": the mask C must be bool, got ", DTypeName(c->dtype()));
      ONT_ASSIGN_OR_RETURN(out, BroadcastShapes({out, c->shape()}));
    }
    return ctx.DeclareOutput(0, DType::kFloat32, out);
  }

  // The ops with S's and F's values (inputs first and first + 2), read when the node runs.
  RowOps ReadOps(const KernelContext& ctx, int first) const {
    RowOps ops;
    const Tensor* s = ctx.input(first);
    const Tensor* f = ctx.input(first + 2);
    ops.scale_op = scale_op_;
    ops.s = s ? s->data<float>()[0] : 1.0f;
    ops.mask = ctx.input(first + 1) != nullptr;
    ops.fill = f ? f->data<float>()[0] : 0.0f;
    ops.fill_where = fill_where_;
    ops.mask_first = mask_first_;
    return ops;
  }

  const char* what_;
  int64_t scale_op_;
  bool fill_where_, mask_first_;
};

class ScaledMaskedSoftmaxKernel : public FusedSoftmaxBase {
 public:
  explicit ScaledMaskedSoftmaxKernel(const NodeInfo& info) : FusedSoftmaxBase(info, "ScaledMaskedSoftmax") {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* x, RequireInput(ctx, 0, "X"));
    return PrepareOps(ctx, *x, 1);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor& x = *ctx.input(0);
    const Tensor* c = ctx.input(2);
    Tensor* y = ctx.output(0);
    if (y->NumElements() == 0) return Status::OK();
    const RowOffsets at(x.shape(), c, y->shape());
    const int64_t len = at.len();
    const float* px = x.data<float>();
    const uint8_t* pc = c ? reinterpret_cast<const uint8_t*>(c->data<bool>()) : nullptr;
    float* py = y->data<float>();
    const RowOps ops = ReadOps(ctx, 1);
    // Blocks of rows: V into Y's rows, then each row's softmax in place (VSoftmaxRow accepts y == x).
    ParallelFor(ctx.thread_pool(), at.rows(), 14.0 * len, [&](int64_t s, int64_t e) {
      for (int64_t r0 = s; r0 < e; r0 += kRowBlock) {
        const int64_t r1 = std::min(e, r0 + kRowBlock);
        ApplyRows(at, ops, px, pc, py, r0, r1);
        for (int64_t r = r0; r < r1; ++r) VSoftmaxRow(py + r * len, py + r * len, len);
      }
    });
    return Status::OK();
  }
};

class ScaledMaskedSoftmaxGradKernel : public FusedSoftmaxBase {
 public:
  explicit ScaledMaskedSoftmaxGradKernel(const NodeInfo& info) : FusedSoftmaxBase(info, "ScaledMaskedSoftmaxGrad") {}
  Status Prepare(KernelContext& ctx) override {
    ONT_ASSIGN_OR_RETURN(const Tensor* dy, RequireInput(ctx, 0, "dY"));
    ONT_ASSIGN_OR_RETURN(const Tensor* y, RequireInput(ctx, 1, "Y"));
    if (dy->shape() != y->shape() || y->dtype() != dy->dtype()) {
      return InvalidArgument(what_, ": dY ", DTypeName(dy->dtype()), ShapeToString(dy->shape()), " and Y ",
                             DTypeName(y->dtype()), ShapeToString(y->shape()), " differ");
    }
    return PrepareOps(ctx, *dy, 2);
  }
  Status Compute(KernelContext& ctx) override {
    const Tensor &dy = *ctx.input(0), &y = *ctx.input(1);
    const Tensor* c = ctx.input(3);
    Tensor* out = ctx.output(0);
    if (out->NumElements() == 0) return Status::OK();
    const float *pd = dy.data<float>(), *py = y.data<float>();
    const uint8_t* pc = c ? reinterpret_cast<const uint8_t*>(c->data<bool>()) : nullptr;
    float* po = out->data<float>();
    const RowOps ops = ReadOps(ctx, 2);
    const int64_t glen = dy.shape().back();
    const RowOffsets at(dy.shape(), c, out->shape());
    const int64_t len = at.len(), sg = at.x_stride(), sc = at.c_stride();
    if (out->shape() == dy.shape()) {
      // The gradient's rows as SoftmaxGrad makes them, a group at a time into the output, then the ops on
      // the group while it is in L1.
      ParallelFor(ctx.thread_pool(), at.rows(), 8.0 * len, [&](int64_t s, int64_t e) {
        for (int64_t r0 = s; r0 < e; r0 += kRowBlock) {
          const int64_t r1 = std::min(e, r0 + kRowBlock);
          SoftmaxGradRows<float>(false, pd + r0 * len, py + r0 * len, po + r0 * len, r1 - r0, len);
          ApplyRows(at, ops, po, pc, po, r0, r1);
        }
      });
      return Status::OK();
    }
    // The mask broadcasts the gradient to a larger shape: each output row recomputes the gradient's row it
    // reads (the same bits each time) into its first glen floats, then the ops spread it over the row.
    ParallelFor(ctx.thread_pool(), at.rows(), 8.0 * len, [&](int64_t s, int64_t e) {
      int64_t off[2] = {0, 0};
      for (int64_t r = s; r < e; ++r) {
        at.At(r, off);
        float* row = po + r * len;
        SoftmaxGradRows<float>(false, pd + off[0], py + off[0], row, 1, glen);
        if (sg == 0 && len > 1) {  // a gradient row of one value, read at every position (ApplyOps' sv 0)
          ApplyOps(ops, row, 0, pc ? pc + off[1] + sc : nullptr, sc, row + 1, len - 1);
          ApplyOps(ops, row, 0, pc ? pc + off[1] : nullptr, sc, row, 1);
          continue;
        }
        ApplyOps(ops, row, 1, pc ? pc + off[1] : nullptr, sc, row, len);
      }
    });
    return Status::OK();
  }
};

}  // namespace

KernelFactory kScaledMaskedSoftmax = MakeKernel<ScaledMaskedSoftmaxKernel>;
KernelFactory kScaledMaskedSoftmaxGrad = MakeKernel<ScaledMaskedSoftmaxGradKernel>;

}  // namespace cpu
}  // namespace ontrain
