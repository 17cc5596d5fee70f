// Broadcasting and input-reading helpers for CPU kernels.
#include "providers/cpu/kernels/common.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ontrain {
namespace cpu {

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                          __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
  return has;
}

namespace {
StatusOr<Shape> BroadcastShapesOf(const Shape* first, const Shape* last) {
  const auto shapes = [&] { return std::vector<Shape>(first, last); };
  size_t rank = 0;
  for (const Shape* s = first; s != last; ++s) rank = std::max(rank, s->size());
  Shape out(rank, 1);
  for (const Shape* sp = first; sp != last; ++sp) {
    const Shape& s = *sp;
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t d = s[i];
      int64_t& o = out[off + i];
      if (d == o || d == 1) continue;
      if (o == 1) {
        o = d;
        continue;
      }
      std::string all;
      for (const Shape& x : shapes()) all += ShapeToString(x) + " ";
      return InvalidArgument("shapes cannot be broadcast together: ", all);
    }
  }
  return out;
}
}  // namespace

StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes) {
  return BroadcastShapesOf(shapes.data(), shapes.data() + shapes.size());
}

StatusOr<Shape> BroadcastShapes(std::initializer_list<Shape> shapes) {
  return BroadcastShapesOf(shapes.begin(), shapes.end());
}

Shape Strides(const Shape& shape) {
  Shape st(shape.size(), 1);
  for (int64_t i = static_cast<int64_t>(shape.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * shape[i + 1];
  return st;
}

Shape BroadcastStrides(const Shape& in, const Shape& out) {
  Shape st(out.size(), 0);
  Shape own = Strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : own[i];
  return st;
}

BroadcastRows::BroadcastRows(std::initializer_list<Shape> inputs, const Shape& out) {
  num_inputs_ = static_cast<int>(std::min<size_t>(inputs.size(), kMaxInputs));
  if (out.empty()) {
    inner_strides_.assign(static_cast<size_t>(num_inputs_), 0);
    return;
  }
  inner_ = out.back();
  outer_.assign(out.begin(), out.end() - 1);
  rows_ = ShapeNumElements(outer_);
  int k = 0;
  for (const Shape& in : inputs) {
    if (k == num_inputs_) break;
    Shape st = BroadcastStrides(in, out);
    inner_strides_.push_back(st.back());
    st.pop_back();
    strides_[k++] = std::move(st);
  }
  // Outer dims that continue every input's rows (stride = inner stride * row length, or 0 where both are)
  // join the rows: a causal mask [64, 64] against scores [16, 4, 64, 64] is 64 rows of 4096, not 4096 of
  // 64 (the per-row offsets had cost as much as the selects).
  while (!outer_.empty()) {
    const size_t d = outer_.size() - 1;
    bool joins = true;
    for (int j = 0; j < num_inputs_ && joins; ++j) joins = strides_[j][d] == inner_strides_[j] * inner_;
    if (!joins) break;
    inner_ *= outer_[d];
    outer_.pop_back();
    for (int j = 0; j < num_inputs_; ++j) strides_[j].pop_back();
  }
  rows_ = ShapeNumElements(outer_);
}

void BroadcastRows::Offsets(int64_t r, int64_t* offsets) const {
  for (int k = 0; k < num_inputs_; ++k) offsets[k] = 0;
  for (int64_t d = static_cast<int64_t>(outer_.size()) - 1; d >= 0; --d) {
    int64_t idx = r % outer_[d];
    r /= outer_[d];
    for (int k = 0; k < num_inputs_; ++k) offsets[k] += idx * strides_[k][d];
  }
}

AxisSplit SplitAtAxis(const Shape& shape, int64_t axis) {
  AxisSplit a;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) a.outer *= shape[d];
    else if (d == axis) a.len = shape[d];
    else a.inner *= shape[d];
  }
  return a;
}

StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank) {
    return InvalidArgument(what, " ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<Shape> ReadInts(const Tensor& t, const char* what) {
  if (!t.device().is_host()) return InvalidArgument(what, " must be on the host");
  Shape v(static_cast<size_t>(t.NumElements()));
  if (t.dtype() == DType::kInt64) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<int64_t>()[i];
  } else if (t.dtype() == DType::kInt32) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = t.data<int32_t>()[i];
  } else {
    return InvalidArgument(what, " must be int32 or int64, got ", DTypeName(t.dtype()));
  }
  return v;
}

StatusOr<double> ReadScalar(const Tensor& t, const char* what) {
  if (t.NumElements() != 1) {
    return InvalidArgument(what, " must have one element, got shape ", ShapeToString(t.shape()));
  }
  double out = 0;
  Status s = DispatchAll(t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    out = ConvertValue<double>(t.data<T>()[0]);
    return Status::OK();
  });
  ONT_RETURN_IF_ERROR(s);
  return out;
}

Status RequireSameDType(const Tensor& t, const char* name, const Tensor& like, const char* like_name) {
  if (t.dtype() == like.dtype()) return Status::OK();
  return InvalidArgument(name, " is ", DTypeName(t.dtype()), " but ", like_name, " is ", DTypeName(like.dtype()),
                         "; they must have the same dtype");
}

Status RequireSameDTypes(const KernelContext& ctx, std::initializer_list<int> inputs) {
  const Tensor* first = nullptr;
  int first_i = -1;
  for (int i : inputs) {
    const Tensor* t = i < ctx.num_inputs() ? ctx.input(i) : nullptr;
    if (t == nullptr) continue;
    if (first == nullptr) {
      first = t;
      first_i = i;
    } else if (t->dtype() != first->dtype()) {
      return InvalidArgument("input ", i, " is ", DTypeName(t->dtype()), " but input ", first_i, " is ",
                             DTypeName(first->dtype()), "; they must have the same dtype");
    }
  }
  return Status::OK();
}

Status CheckScoresAndLabels(const Tensor& scores, const Tensor& labels, const char* scores_name, Shape* label_shape) {
  if (scores.rank() < 2) return InvalidArgument(scores_name, " must be [N, C, ...], got ", ShapeToString(scores.shape()));
  Shape expect = scores.shape();
  expect.erase(expect.begin() + 1);
  if (labels.shape() != expect) {
    return InvalidArgument("labels have shape ", ShapeToString(labels.shape()), ", expected ", ShapeToString(expect),
                           " for ", scores_name, " ", ShapeToString(scores.shape()));
  }
  if (labels.dtype() != DType::kInt32 && labels.dtype() != DType::kInt64) {
    return InvalidArgument("labels must be int32 or int64, got ", DTypeName(labels.dtype()));
  }
  *label_shape = expect;
  return Status::OK();
}

StatusOr<const Tensor*> RequireInput(const KernelContext& ctx, int i, const char* name) {
  const Tensor* t = ctx.input(i);
  if (t == nullptr) return InvalidArgument("required input ", i, " (", name, ") is missing");
  return t;
}

}  // namespace cpu
}  // namespace ontrain

namespace ontrain {
namespace cpu {

namespace {
// One kTile-row strip of a tiled transpose of 4-byte elements: the whole 16 x 16 blocks through
// Transpose16x16 (o[i * dq + j] = s[i + j * inner], i < 16), the last columns (len % 16) element by element.
__attribute__((target("avx512f"))) void TransposeStrip16(const uint32_t* s, int64_t inner, uint32_t* o, int64_t dq,
                                                        int64_t len) {
  int64_t j0 = 0;
  for (; j0 + 16 <= len; j0 += 16) {
    Transpose16x16(reinterpret_cast<const float*>(s + j0 * inner), inner, reinterpret_cast<float*>(o + j0), dq);
  }
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t j = j0; j < len; ++j) o[i * dq + j] = s[i + j * inner];
  }
}

// Adjacent output dims d, d + 1 that the source walks as one (strides[d] = strides[d + 1] * out[d + 1]:
// contiguous runs, or broadcast dims side by side) merged, and dims of size 1 dropped: the same copy with
// fewer, longer rows (Expand [32,256,1,1] -> [32,256,4,4] made rows of 4 floats, each with its odometer
// step; merged, rows of 16).
void CoalesceDims(const Shape& strides, const Shape& out, Shape* cs, Shape* co) {
  cs->clear();
  co->clear();
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] == 1) continue;
    if (!co->empty() && cs->back() == strides[d] * out[d]) {
      co->back() *= out[d];
      cs->back() = strides[d];
      continue;
    }
    cs->push_back(strides[d]);
    co->push_back(out[d]);
  }
}

template <typename T>
void StridedCopyTyped(const T* src, const Shape& src_strides, const Shape& out_dims, T* dst, ThreadPool* pool) {
  Shape strides, out;
  CoalesceDims(src_strides, out_dims, &strides, &out);
  if (out.empty()) {
    dst[0] = src[0];
    return;
  }
  int64_t len = out.back(), inner = strides.back();
  Shape outer(out.begin(), out.end() - 1);
  int64_t rows = ShapeNumElements(outer);
  // A transpose that moves the source's contiguous dim q away from the end: row by row, every element read
  // would come from another cache line. Tiles of kTile x kTile (q by the last dim) read kTile source lines
  // and write kTile destination lines instead.
  int64_t q = -1;
  for (int64_t d = static_cast<int64_t>(outer.size()) - 1; d >= 0 && inner != 1; --d) {
    if (strides[d] == 1 && outer[d] > 1) {
      q = d;
      break;
    }
  }
  if (q >= 0 && len > 1) {
    constexpr int64_t kTile = 16;
    int64_t dq = 1;  // destination stride of dim q
    for (size_t d = q + 1; d < out.size(); ++d) dq *= out[d];
    int64_t qn = outer[q], qblocks = (qn + kTile - 1) / kTile, others = rows / qn;
    ParallelFor(pool, others * qblocks, static_cast<double>(kTile * len), [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        int64_t rest = t / qblocks, i0 = (t % qblocks) * kTile, ni = std::min(kTile, qn - i0);
        int64_t src_off = 0, dst_off = 0;
        for (int64_t d = static_cast<int64_t>(outer.size()) - 1; d >= 0; --d) {
          if (d == q) continue;
          int64_t k = rest % outer[d];
          rest /= outer[d];
          src_off += k * strides[d];
          int64_t ds = len;
          for (size_t e = d + 1; e + 1 < out.size(); ++e) ds *= out[e];
          dst_off += k * ds;
        }
        const T* s = src + src_off + i0;
        T* o = dst + dst_off + i0 * dq;
        if constexpr (sizeof(T) == 4) {
          static const bool avx512 = __builtin_cpu_supports("avx512f");
          if (avx512 && ni == kTile) {  // the same copies, 16 x 16 blocks through registers
            TransposeStrip16(reinterpret_cast<const uint32_t*>(s), inner, reinterpret_cast<uint32_t*>(o), dq, len);
            continue;
          }
        }
        for (int64_t j0 = 0; j0 < len; j0 += kTile) {
          int64_t nj = std::min(kTile, len - j0);
          for (int64_t i = 0; i < ni; ++i) {
            for (int64_t j = 0; j < nj; ++j) o[i * dq + j0 + j] = s[i + (j0 + j) * inner];
          }
        }
      }
    });
    return;
  }
  const int64_t rank = static_cast<int64_t>(outer.size());
  // Four units a copied element, as an elementwise op costs about four per float in ParallelFor's terms: at
  // one per element a GPT's head transposes ([16, 64, 4, 32] <-> [16, 4, 64, 32], 512 KB) never split and
  // took 0.40-0.43 ms a step at two threads against 0.37 at one; split, 0.23.
  ParallelFor(pool, rows, 4.0 * static_cast<double>(len), [&](int64_t r0, int64_t r1) {
    // The source offset of row r0 by division, then an odometer over the outer dims row by row.
    int64_t idx_small[8];
    Shape idx_big;
    int64_t* idx = idx_small;
    if (rank > 8) {
      idx_big.resize(static_cast<size_t>(rank));
      idx = idx_big.data();
    }
    int64_t off = 0, rem = r0;
    for (int64_t d = rank - 1; d >= 0; --d) {
      idx[d] = rem % outer[d];
      off += idx[d] * strides[d];
      rem /= outer[d];
    }
    for (int64_t r = r0; r < r1; ++r) {
      T* o = dst + r * len;
      const T* s = src + off;
      if (inner == 0) {  // a broadcast along the row
        std::fill(o, o + len, *s);
      } else if (inner == 1 && len * static_cast<int64_t>(sizeof(T)) <= 256) {
        // Short runs (an attention head's 32 floats): a call to memcpy per row cost more than the copy
        // (Transpose [16,64,4,32] -> [16,4,64,32]: 4096 rows of 128 bytes).
        for (int64_t i = 0; i < len; ++i) o[i] = s[i];
      } else if (inner == 1) {
        std::memcpy(o, s, static_cast<size_t>(len) * sizeof(T));
      } else {
        for (int64_t i = 0; i < len; ++i) o[i] = s[i * inner];
      }
      for (int64_t d = rank - 1; d >= 0; --d) {
        off += strides[d];
        if (++idx[d] < outer[d]) break;
        off -= strides[d] * outer[d];
        idx[d] = 0;
      }
    }
  });
}
}  // namespace

void StridedCopy(const void* src_base, const Shape& src_strides, const Shape& out, size_t elem_size,
                 void* dst, ThreadPool* pool) {
  if (ShapeNumElements(out) == 0) return;
  switch (elem_size) {
    case 1: StridedCopyTyped(static_cast<const uint8_t*>(src_base), src_strides, out, static_cast<uint8_t*>(dst), pool); break;
    case 2: StridedCopyTyped(static_cast<const uint16_t*>(src_base), src_strides, out, static_cast<uint16_t*>(dst), pool); break;
    case 4: StridedCopyTyped(static_cast<const uint32_t*>(src_base), src_strides, out, static_cast<uint32_t*>(dst), pool); break;
    default: StridedCopyTyped(static_cast<const uint64_t*>(src_base), src_strides, out, static_cast<uint64_t*>(dst), pool); break;
  }
}

void CopyBytes(const Tensor& src, Tensor* dst) {
  if (src.SizeInBytes() > 0 && src.raw_data() != dst->raw_data()) {
    std::memcpy(dst->raw_data(), src.raw_data(), src.SizeInBytes());
  }
}

StatusOr<SliceGeometry> ComputeSlice(const Shape& in, const Shape& starts, const Shape& ends, Shape axes,
                                     Shape steps) {
  if (axes.empty()) for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return InvalidArgument("starts, ends, axes and steps must have the same length");
  }
  int64_t rank = static_cast<int64_t>(in.size());
  SliceGeometry g;
  g.out = in;
  Shape in_strides = Strides(in);
  g.strides = in_strides;
  Shape seen;  // a Shape keeps small ranks inline: Prepare runs every step and must not allocate
  seen.assign(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < starts.size(); ++i) {
    ONT_ASSIGN_OR_RETURN(int64_t a, NormalizeAxis(axes[i], rank));
    if (seen[a]) return InvalidArgument("axis ", axes[i], " is repeated");
    seen[a] = 1;
    int64_t dim = in[a], step = steps[i];
    if (step == 0) return InvalidArgument("step must not be 0");
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0 && e > std::numeric_limits<int64_t>::min() + dim) e += dim;
    else if (e < 0) e = -1;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      g.out[a] = e > s ? (e - s + step - 1) / step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      g.out[a] = s > e ? (s - e - step - 1) / (-step) : 0;
    }
    g.offset += (g.out[a] > 0 ? s : 0) * in_strides[a];
    g.strides[a] = in_strides[a] * step;
  }
  return g;
}

Status ReadSliceInputs(const KernelContext& ctx, int first, Shape* starts, Shape* ends, Shape* axes, Shape* steps) {
  ONT_ASSIGN_OR_RETURN(const Tensor* s, RequireInput(ctx, first, "starts"));
  ONT_ASSIGN_OR_RETURN(const Tensor* e, RequireInput(ctx, first + 1, "ends"));
  ONT_ASSIGN_OR_RETURN(*starts, ReadInts(*s, "starts"));
  ONT_ASSIGN_OR_RETURN(*ends, ReadInts(*e, "ends"));
  if (ctx.input(first + 2)) {
    ONT_ASSIGN_OR_RETURN(*axes, ReadInts(*ctx.input(first + 2), "axes"));
  }
  if (ctx.input(first + 3)) {
    ONT_ASSIGN_OR_RETURN(*steps, ReadInts(*ctx.input(first + 3), "steps"));
  }
  return Status::OK();
}

}  // namespace cpu
}  // namespace ontrain
