// Helpers shared by the CPU kernels: dtype dispatch, broadcasting, axis handling, reading index inputs.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"
#include "providers/cpu/kernels/vrows.h"  // LaneSum
#include "providers/cpu/thread_pool.h"
#include "providers/kernel.h"

namespace ontrain {
namespace cpu {

// Asks for every cache line of a rows x cols block of floats (row stride ld) ahead of its use, for kernels
// whose operands come from memory in a pattern the hardware prefetcher follows late: a max pool's next
// input rows, the operands of attention's small products (a softmax output re-read by the backward pass).
inline void PrefetchRows(const float* p, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t f = 0; f < cols; f += 16) __builtin_prefetch(p + r * ld + f);
    __builtin_prefetch(p + r * ld + cols - 1);
  }
}

// The first `count` of 16 lanes (none for count <= 0, all from 16 on): the mask of a row's last vector.
__attribute__((target("avx512f"))) inline __mmask16 FirstLanes(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1);
}

// out[c * ldo + r] = in[r * ldi + c] for a 16 x 16 block: unpacks of row pairs, then of pairs of pairs,
// then 128-bit lanes gathered across the four groups of four rows. Callers check for AVX-512F first.
__attribute__((target("avx512f"))) inline void Transpose16x16(const float* in, int64_t ldi, float* out, int64_t ldo) {
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(in + i * ldi);
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + j], 128-bit lane l: column 4l + j of rows 4i .. 4i + 3.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d t0 = _mm512_castps_pd(t[4 * i]), t1 = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * i + 2]), t3 = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512 v0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88), w0 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    const __m512 v1 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd), w1 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
    _mm512_storeu_ps(out + j * ldo, _mm512_shuffle_f32x4(v0, w0, 0x88));
    _mm512_storeu_ps(out + (8 + j) * ldo, _mm512_shuffle_f32x4(v0, w0, 0xdd));
    _mm512_storeu_ps(out + (4 + j) * ldo, _mm512_shuffle_f32x4(v1, w1, 0x88));
    _mm512_storeu_ps(out + (12 + j) * ldo, _mm512_shuffle_f32x4(v1, w1, 0xdd));
  }
}

// Whether this CPU has the x86-64-v4 features (AVX-512 F/VL/BW/DQ with AVX2, FMA, BMI): the
// elementwise loops of elementwise.h run their AVX-512 copies there. Checked once.
bool CpuHasAvx512();

template <typename T> struct Tag { using type = T; };

// Calls f(Tag<T>{}) for the C++ type of `t` among floating types (float, double, half, bfloat16).
template <typename F>
Status DispatchFloat(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(Tag<float>{});
    case DType::kFloat64: return f(Tag<double>{});
    case DType::kFloat16: return f(Tag<Float16>{});
    case DType::kBFloat16: return f(Tag<BFloat16>{});
    default: return Unimplemented("dtype ", DTypeName(t), " (expected a floating-point type)");
  }
}

// float32 and float64 only (kernels built on Gemm/Eigen for those two).
template <typename F>
Status DispatchFloat32Or64(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(Tag<float>{});
    case DType::kFloat64: return f(Tag<double>{});
    default: return Unimplemented("dtype ", DTypeName(t), " (this kernel supports float32 and float64)");
  }
}

// Every numeric type plus bool.
template <typename F>
Status DispatchAll(DType t, F&& f) {
  switch (t) {
    case DType::kFloat32: return f(Tag<float>{});
    case DType::kFloat64: return f(Tag<double>{});
    case DType::kFloat16: return f(Tag<Float16>{});
    case DType::kBFloat16: return f(Tag<BFloat16>{});
    case DType::kInt8: return f(Tag<int8_t>{});
    case DType::kInt16: return f(Tag<int16_t>{});
    case DType::kInt32: return f(Tag<int32_t>{});
    case DType::kInt64: return f(Tag<int64_t>{});
    case DType::kUInt8: return f(Tag<uint8_t>{});
    case DType::kUInt16: return f(Tag<uint16_t>{});
    case DType::kUInt32: return f(Tag<uint32_t>{});
    case DType::kUInt64: return f(Tag<uint64_t>{});
    case DType::kBool: return f(Tag<bool>{});
    default: return Unimplemented("dtype ", DTypeName(t));
  }
}

// Element-size dispatch for ops that only move bytes.
template <typename F>
Status DispatchBySize(DType t, F&& f) {
  switch (DTypeSize(t)) {
    case 1: return f(Tag<uint8_t>{});
    case 2: return f(Tag<uint16_t>{});
    case 4: return f(Tag<uint32_t>{});
    case 8: return f(Tag<uint64_t>{});
    default: return Unimplemented("dtype ", DTypeName(t));
  }
}

// The numpy broadcast of several shapes, or an error naming both offending shapes.
StatusOr<Shape> BroadcastShapes(const std::vector<Shape>& shapes);
// The same for a braced list ({a, b}), without building a vector.
StatusOr<Shape> BroadcastShapes(std::initializer_list<Shape> shapes);

// Strides (in elements) that read `in` as if it had shape `out` (broadcast dims get stride 0).
Shape BroadcastStrides(const Shape& in, const Shape& out);

// Batch index bi of a batched matrix product over `batch` -> the batch offsets of A and B (in matrices, from
// their BroadcastStrides over the batch dims: 0 along broadcast dims).
inline void BatchOffsets(const Shape& batch, const Shape& a_strides, const Shape& b_strides, int64_t bi, int64_t* oa,
                         int64_t* ob) {
  int64_t rem = bi;
  *oa = *ob = 0;
  for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
    const int64_t i = rem % batch[d];
    rem /= batch[d];
    *oa += i * a_strides[d];
    *ob += i * b_strides[d];
  }
}

// Row-major strides of a shape.
Shape Strides(const Shape& shape);

// Visits the output of a broadcast in rows along the last dimension. For each row, fn(out_offset, offsets,
// inner) is called with the element offset of each input, and each input's stride within the row
// (0 or 1) is given by inner_stride(k).
class BroadcastRows {
 public:
  static constexpr int kMaxInputs = 3;
  // At most kMaxInputs inputs (a braced list; nothing is allocated for shapes of up to Shape::kInline dims).
  BroadcastRows(std::initializer_list<Shape> inputs, const Shape& out);
  int64_t num_rows() const { return rows_; }
  int64_t row_length() const { return inner_; }
  int64_t inner_stride(int k) const { return inner_strides_[k]; }
  // Input offsets of row `r`.
  void Offsets(int64_t r, int64_t* offsets) const;

 private:
  Shape outer_;                      // output dims except the last
  Shape strides_[kMaxInputs];        // per input, over outer_
  int num_inputs_ = 0;
  Shape inner_strides_;
  int64_t rows_ = 1, inner_ = 1;
};

// A tensor of `shape` seen as [outer, len, inner] around `axis` (which must be in range).
struct AxisSplit {
  int64_t outer = 1, len = 1, inner = 1;
};
AxisSplit SplitAtAxis(const Shape& shape, int64_t axis);

// axis in [-rank, rank) -> [0, rank).
StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const char* what = "axis");

// Reads an int32 or int64 tensor of any shape as int64 values.
StatusOr<Shape> ReadInts(const Tensor& t, const char* what);

// Reads a one-element numeric tensor as double.
StatusOr<double> ReadScalar(const Tensor& t, const char* what);

// Requires input i to be present.
StatusOr<const Tensor*> RequireInput(const KernelContext& ctx, int i, const char* name);

// Requires `t` (named `name`) to have the dtype of `like` (named `like_name`): kernels read inputs that
// share a type parameter with one element type.
Status RequireSameDType(const Tensor& t, const char* name, const Tensor& like, const char* like_name);
// The same over the inputs numbered in `inputs` that are present: each has the first present one's dtype.
Status RequireSameDTypes(const KernelContext& ctx, std::initializer_list<int> inputs);

// Checks a classification loss's scores [N, C, d...] against its labels [N, d...] (int32 or int64); fills
// the labels' expected shape.
Status CheckScoresAndLabels(const Tensor& scores, const Tensor& labels, const char* scores_name, Shape* label_shape);

// Where a slice of a tensor of shape `in` lies: its shape, the element offset of its first element, and the
// stride (in elements, possibly negative) of each of its dims. Starts and ends are clamped as numpy does.
struct SliceGeometry {
  Shape out;
  int64_t offset = 0;
  Shape strides;
};
StatusOr<SliceGeometry> ComputeSlice(const Shape& in, const Shape& starts, const Shape& ends, Shape axes,
                                     Shape steps);

// Slice's index inputs (opset >= 10: starts, ends, axes?, steps?) starting at input `first`.
Status ReadSliceInputs(const KernelContext& ctx, int first, Shape* starts, Shape* ends, Shape* axes, Shape* steps);

// Converts between element types (numeric <-> numeric, via double for floats).

template <typename To, typename From>
inline To ConvertValue(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return static_cast<float>(v) != 0.0f;
  } else if constexpr (std::is_same_v<To, Float16> || std::is_same_v<To, BFloat16>) {
    return To(static_cast<float>(v));
  } else if constexpr (std::is_same_v<From, Float16> || std::is_same_v<From, BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace cpu
}  // namespace ontrain

namespace ontrain {
namespace cpu {

// dst (contiguous, shape `out`) = src read with `src_strides` (elements, may be 0 or negative) from
// `src_base`. Elements are moved as opaque `elem_size`-byte values.
void StridedCopy(const void* src_base, const Shape& src_strides, const Shape& out, size_t elem_size,
                 void* dst, ThreadPool* pool);

// Copies input 0 to output 0 byte for byte (for Identity and the reshaping ops).
void CopyBytes(const Tensor& src, Tensor* dst);

}  // namespace cpu
}  // namespace ontrain
