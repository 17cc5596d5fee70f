// Elementwise device code: unary math, broadcasting binary arithmetic and activation gradients,
// comparisons, Where, Cast and scaling. Formulas follow the CPU kernels (providers/cpu/kernels/unary.cc,
// grad_elementwise.cc) so the two providers agree to rounding.
#include "providers/cuda/kernels/common.cuh"

namespace ontrain {
namespace cuda {
namespace {

// std::max(a, b) and std::min(a, b) as the CPU kernels call them (the second argument is taken only when
// strictly greater or less, so NaN handling matches theirs: std::min(1, NaN) is 1).
template <typename T>
__device__ __forceinline__ T StdMax(T a, T b) { return a < b ? b : a; }
template <typename T>
__device__ __forceinline__ T StdMin(T a, T b) { return b < a ? b : a; }

template <typename T>
__device__ T ApplyUnary(UnaryOp op, T x, T alpha, T beta) {
  switch (op) {
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return x < T(0) ? -x : x;
    case UnaryOp::kSqrt: return sqrt(x);
    case UnaryOp::kExp: return exp(x);
    case UnaryOp::kLog: return log(x);
    case UnaryOp::kTanh: return tanh(x);
    case UnaryOp::kSigmoid: return T(1) / (T(1) + exp(-x));
    case UnaryOp::kRelu: return x > T(0) ? x : T(0);
    case UnaryOp::kErf: return erf(x);
    case UnaryOp::kReciprocal: return T(1) / x;
    case UnaryOp::kGelu: return T(0.5) * x * (T(1) + erf(x * T(0.70710678118654752440)));
    case UnaryOp::kGeluTanh:
      return T(0.5) * x * (T(1) + tanh(T(0.7978845608028654) * (x + T(0.044715) * x * x * x)));
    case UnaryOp::kLeakyRelu: return x >= T(0) ? x : alpha * x;
    case UnaryOp::kSoftplus: return x > T(0) ? x + log1p(exp(-x)) : log1p(exp(x));
    case UnaryOp::kFloor: return floor(x);
    case UnaryOp::kCeil: return ceil(x);
    case UnaryOp::kSin: return sin(x);
    case UnaryOp::kCos: return cos(x);
    case UnaryOp::kElu: return x >= T(0) ? x : alpha * (exp(x) - T(1));
    case UnaryOp::kCelu: return StdMax(T(0), x) + StdMin(T(0), alpha * (exp(x / alpha) - T(1)));
    case UnaryOp::kSelu: return x > T(0) ? beta * x : beta * (alpha * exp(x) - alpha);  // beta: gamma
    case UnaryOp::kHardSigmoid: {
      // NaN stays NaN, as on the CPU; nvcc turns the clamp to [0, 1] into a saturation, which maps NaN to 0.
      const T v = alpha * x + beta;
      return v != v ? v : StdMax(T(0), StdMin(T(1), v));
    }
    case UnaryOp::kHardSwish: return x * StdMax(T(0), StdMin(T(1), x / T(6) + T(0.5)));
    case UnaryOp::kThresholdedRelu: return x > alpha ? x : T(0);
    case UnaryOp::kSoftsign: return x / (T(1) + fabs(x));
    case UnaryOp::kSign: return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0));
    case UnaryOp::kRound: return rint(x);  // halves to even, as the CPU's nearbyint in the default mode
    case UnaryOp::kTan: return tan(x);
    case UnaryOp::kAsin: return asin(x);
    case UnaryOp::kAcos: return acos(x);
    case UnaryOp::kAtan: return atan(x);
    case UnaryOp::kSinh: return sinh(x);
    case UnaryOp::kCosh: return cosh(x);
    case UnaryOp::kAsinh: return asinh(x);
    case UnaryOp::kAcosh: return acosh(x);
    case UnaryOp::kAtanh: return atanh(x);
    case UnaryOp::kDivBy: return x / alpha;
  }
  return x;
}

template <typename T>
__global__ void UnaryKernel(UnaryOp op, const T* x, T* y, int64_t n, T alpha, T beta) {
  ONT_GRID_STRIDE_LOOP(i, n) y[i] = ApplyUnary(op, x[i], alpha, beta);
}

// IsNaN, IsInf (which signs: detect_negative, detect_positive) and Not, into bytes.
template <typename T>
__global__ void ClassifyKernel(const T* x, uint8_t* y, int64_t n, int what, bool neg, bool pos) {
  ONT_GRID_STRIDE_LOOP(i, n) {
    const T v = x[i];
    if (what == 0) y[i] = v != v;
    else y[i] = isinf(v) && ((v > T(0) && pos) || (v < T(0) && neg));
  }
}
__global__ void NotKernel(const uint8_t* x, uint8_t* y, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) y[i] = x[i] == 0;
}

template <typename T>
__device__ T ApplyBinary(BinaryOp op, T a, T b, T alpha) {
  if constexpr (std::is_floating_point<T>::value) {
    switch (op) {
      case BinaryOp::kPow: return pow(a, b);
      case BinaryOp::kMax: return (a != a || b != b) ? a + b : (a > b ? a : b);
      case BinaryOp::kMin: return (a != a || b != b) ? a + b : (a < b ? a : b);
      case BinaryOp::kReluGrad: return b > T(0) ? a : T(0);
      case BinaryOp::kSigmoidGrad: return a * b * (T(1) - b);
      case BinaryOp::kTanhGrad: return a * (T(1) - b * b);
      case BinaryOp::kLeakyReluGrad: return b > T(0) ? a : alpha * a;
      case BinaryOp::kGeluGrad:
        return a * (T(0.5) * (erf(b * T(0.70710678118654752440)) + T(1)) +
                    b * exp(-b * b / T(2)) * T(0.3989422804014327));
      case BinaryOp::kFastGeluGrad: {
        const T c = T(0.7978845608028654), k = T(0.044715);
        T t = tanh(c * (b + k * b * b * b));
        return a * T(0.5) * (T(1) + t + (T(1) - t * t) * (c * b + T(3) * k * c * b * b * b));
      }
      default: break;
    }
  } else {
    switch (op) {
      case BinaryOp::kPow: {
        T r = 1;
        for (T e = 0; e < b; ++e) r *= a;
        return r;
      }
      case BinaryOp::kMax: return a > b ? a : b;
      case BinaryOp::kMin: return a < b ? a : b;
      default: break;
    }
  }
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kDivBySquare: return a / (b * b);
    case BinaryOp::kNegMul: return -(a * b);
    case BinaryOp::kAddRelu: {
      const T t = a + b;
      return t > T(0) ? t : T(0);
    }
    case BinaryOp::kPRelu: return a < T(0) ? static_cast<T>(a * b) : a;
    default: return a;
  }
}

template <typename T>
__global__ void BinaryKernel(BinaryOp op, const T* a, const T* b, T* out, StridedSpace s, T alpha, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) out[i] = ApplyBinary(op, a[OffsetIn(s, 1, i, n)], b[OffsetIn(s, 2, i, n)], alpha);
}

// Same shapes, no broadcast: no index arithmetic.
template <typename T>
__global__ void BinaryFlatKernel(BinaryOp op, const T* a, const T* b, T* out, T alpha, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) out[i] = ApplyBinary(op, a[i], b[i], alpha);
}

bool IsFlat(const StridedSpace& s) {
  int64_t stride = 1;
  for (int d = s.rank - 1; d >= 0; --d) {
    if (s.dims[d] != 1 && (s.strides[1][d] != stride || s.strides[2][d] != stride)) return false;
    stride *= s.dims[d];
  }
  return true;
}

template <typename T>
cudaError_t LaunchBinary(BinaryOp op, const T* a, const T* b, T* out, const StridedSpace& s, float alpha,
                         cudaStream_t stream) {
  int64_t n = s.count();
  if (n == 0) return cudaSuccess;
  if (IsFlat(s)) {
    BinaryFlatKernel<T><<<Blocks(n), kThreads, 0, stream>>>(op, a, b, out, static_cast<T>(alpha), n);
  } else {
    BinaryKernel<T><<<Blocks(n), kThreads, 0, stream>>>(op, a, b, out, s, static_cast<T>(alpha), n);
  }
  return cudaGetLastError();
}

template <typename T>
__global__ void CompareKernel(CompareOp op, const T* a, const T* b, uint8_t* out, StridedSpace s, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) {
    T x = a[OffsetIn(s, 1, i, n)], y = b[OffsetIn(s, 2, i, n)];
    bool r = false;
    switch (op) {
      case CompareOp::kEqual: r = x == y; break;
      case CompareOp::kLess: r = x < y; break;
      case CompareOp::kGreater: r = x > y; break;
      case CompareOp::kLessOrEqual: r = x <= y; break;
      case CompareOp::kGreaterOrEqual: r = x >= y; break;
      case CompareOp::kAnd: r = (x != T(0)) && (y != T(0)); break;
      case CompareOp::kOr: r = (x != T(0)) || (y != T(0)); break;
      case CompareOp::kXor: r = (x != T(0)) != (y != T(0)); break;
    }
    out[i] = r ? 1 : 0;
  }
}

template <typename T>
cudaError_t LaunchCompare(CompareOp op, const T* a, const T* b, uint8_t* out, const StridedSpace& s,
                          cudaStream_t stream) {
  int64_t n = s.count();
  if (n == 0) return cudaSuccess;
  CompareKernel<T><<<Blocks(n), kThreads, 0, stream>>>(op, a, b, out, s, n);
  return cudaGetLastError();
}

template <typename E>
__global__ void WhereKernel(const uint8_t* c, const E* x, const E* y, E* out, StridedSpace s, int64_t n) {
  // Operand strides: 0 cond, 1 x, 2 y; the output is contiguous.
  ONT_GRID_STRIDE_LOOP(i, n) out[i] = c[OffsetIn(s, 0, i, n)] ? x[OffsetIn(s, 1, i, n)] : y[OffsetIn(s, 2, i, n)];
}

template <typename From, typename To>
__global__ void CastKernel(const From* x, To* y, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) {
    if constexpr (std::is_same<To, bool>::value) {
      y[i] = x[i] != From(0);
    } else {
      y[i] = static_cast<To>(x[i]);
    }
  }
}

template <typename From>
cudaError_t CastFrom(int to, const From* x, void* y, int64_t n, cudaStream_t stream) {
  // DType codes of core/dtype.h: 1 float32, 6 int32, 7 int64, 9 bool, 11 float64.
  switch (to) {
    case 1: CastKernel<From, float><<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<float*>(y), n); break;
    case 6: CastKernel<From, int32_t><<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<int32_t*>(y), n); break;
    case 7: CastKernel<From, int64_t><<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<int64_t*>(y), n); break;
    case 9: CastKernel<From, bool><<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<bool*>(y), n); break;
    case 11: CastKernel<From, double><<<Blocks(n), kThreads, 0, stream>>>(x, static_cast<double*>(y), n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

// splitmix64: a counter-based generator; the top 24 bits make a float uniform in [0, 1).
__device__ __forceinline__ float Uniform(uint64_t seed, uint64_t counter) {
  uint64_t z = seed + (counter + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);
}

__global__ void DropoutKernel(const float* x, float* y, uint8_t* mask, int64_t n, float ratio, float scale,
                              uint64_t seed, const uint64_t* counter) {
  const uint64_t offset = *counter;
  ONT_GRID_STRIDE_LOOP(i, n) {
    bool keep = Uniform(seed, offset + i) >= ratio;
    y[i] = keep ? x[i] * scale : 0.0f;
    if (mask) mask[i] = keep ? 1 : 0;
  }
}

__global__ void AdvanceKernel(uint64_t* counter, uint64_t by) { *counter += by; }

__global__ void DropoutGradKernel(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale) {
  ONT_GRID_STRIDE_LOOP(i, n) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

__global__ void ScaleKernel(const float* x, float* y, int64_t n, float scale) {
  ONT_GRID_STRIDE_LOOP(i, n) y[i] = x[i] * scale;
}

template <typename T>
__global__ void ClipKernel(const T* x, T* y, int64_t n, T lo, T hi) {
  ONT_GRID_STRIDE_LOOP(i, n) {
    T c = x[i];
    if (c < lo) c = lo;
    if (c > hi) c = hi;
    y[i] = c;
  }
}

__global__ void ClipGradKernel(const float* dy, const float* x, float* out, StridedSpace s, float lo, float hi,
                               float fill, int64_t n) {
  ONT_GRID_STRIDE_LOOP(i, n) {
    const float v = x[OffsetIn(s, 2, i, n)];
    out[i] = (v >= lo) & (v <= hi) ? dy[OffsetIn(s, 1, i, n)] : fill;
  }
}

}  // namespace

cudaError_t Unary(UnaryOp op, const float* x, float* y, int64_t n, float alpha, float beta, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<float><<<Blocks(n), kThreads, 0, stream>>>(op, x, y, n, alpha, beta);
  return cudaGetLastError();
}
cudaError_t Unary(UnaryOp op, const double* x, double* y, int64_t n, float alpha, float beta, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<double><<<Blocks(n), kThreads, 0, stream>>>(op, x, y, n, alpha, beta);
  return cudaGetLastError();
}

cudaError_t Classify(const float* x, uint8_t* y, int64_t n, bool is_nan, bool neg, bool pos, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ClassifyKernel<float><<<Blocks(n), kThreads, 0, stream>>>(x, y, n, is_nan ? 0 : 1, neg, pos);
  return cudaGetLastError();
}
cudaError_t Classify(const double* x, uint8_t* y, int64_t n, bool is_nan, bool neg, bool pos, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ClassifyKernel<double><<<Blocks(n), kThreads, 0, stream>>>(x, y, n, is_nan ? 0 : 1, neg, pos);
  return cudaGetLastError();
}
cudaError_t Not(const uint8_t* x, uint8_t* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  NotKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n);
  return cudaGetLastError();
}

// The bounds were read from tensors of x's dtype (or are its lowest and highest values): they convert back
// exactly.
cudaError_t Clip(const float* x, float* y, int64_t n, double lo, double hi, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ClipKernel<float><<<Blocks(n), kThreads, 0, stream>>>(x, y, n, static_cast<float>(lo), static_cast<float>(hi));
  return cudaGetLastError();
}
cudaError_t Clip(const double* x, double* y, int64_t n, double lo, double hi, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ClipKernel<double><<<Blocks(n), kThreads, 0, stream>>>(x, y, n, lo, hi);
  return cudaGetLastError();
}

cudaError_t ClipGrad(const float* dy, const float* x, float* out, const StridedSpace& s, double lo, double hi,
                     double fill, cudaStream_t stream) {
  const int64_t n = s.count();
  if (n == 0) return cudaSuccess;
  ClipGradKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, x, out, s, static_cast<float>(lo), static_cast<float>(hi),
                                                     static_cast<float>(fill), n);
  return cudaGetLastError();
}

cudaError_t Binary(BinaryOp op, const float* a, const float* b, float* out, const StridedSpace& s, float alpha,
                   cudaStream_t stream) {
  return LaunchBinary(op, a, b, out, s, alpha, stream);
}
cudaError_t Binary(BinaryOp op, const double* a, const double* b, double* out, const StridedSpace& s, float alpha,
                   cudaStream_t stream) {
  return LaunchBinary(op, a, b, out, s, alpha, stream);
}
cudaError_t Binary(BinaryOp op, const int32_t* a, const int32_t* b, int32_t* out, const StridedSpace& s, float alpha,
                   cudaStream_t stream) {
  return LaunchBinary(op, a, b, out, s, alpha, stream);
}
cudaError_t Binary(BinaryOp op, const int64_t* a, const int64_t* b, int64_t* out, const StridedSpace& s, float alpha,
                   cudaStream_t stream) {
  return LaunchBinary(op, a, b, out, s, alpha, stream);
}

cudaError_t Compare(CompareOp op, const float* a, const float* b, uint8_t* out, const StridedSpace& s,
                    cudaStream_t stream) {
  return LaunchCompare(op, a, b, out, s, stream);
}
cudaError_t Compare(CompareOp op, const int64_t* a, const int64_t* b, uint8_t* out, const StridedSpace& s,
                    cudaStream_t stream) {
  return LaunchCompare(op, a, b, out, s, stream);
}
cudaError_t Compare(CompareOp op, const uint8_t* a, const uint8_t* b, uint8_t* out, const StridedSpace& s,
                    cudaStream_t stream) {
  return LaunchCompare(op, a, b, out, s, stream);
}

cudaError_t Where(const uint8_t* cond, const void* x, const void* y, void* out, const StridedSpace& s, int elem_size,
                  cudaStream_t stream) {
  int64_t n = s.count();
  if (n == 0) return cudaSuccess;
  switch (elem_size) {
    case 1: WhereKernel<uint8_t><<<Blocks(n), kThreads, 0, stream>>>(cond, (const uint8_t*)x, (const uint8_t*)y, (uint8_t*)out, s, n); break;
    case 2: WhereKernel<uint16_t><<<Blocks(n), kThreads, 0, stream>>>(cond, (const uint16_t*)x, (const uint16_t*)y, (uint16_t*)out, s, n); break;
    case 4: WhereKernel<uint32_t><<<Blocks(n), kThreads, 0, stream>>>(cond, (const uint32_t*)x, (const uint32_t*)y, (uint32_t*)out, s, n); break;
    case 8: WhereKernel<uint64_t><<<Blocks(n), kThreads, 0, stream>>>(cond, (const uint64_t*)x, (const uint64_t*)y, (uint64_t*)out, s, n); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t Cast(int from, int to, const void* x, void* y, int64_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  switch (from) {
    case 1: return CastFrom(to, static_cast<const float*>(x), y, n, stream);
    case 6: return CastFrom(to, static_cast<const int32_t*>(x), y, n, stream);
    case 7: return CastFrom(to, static_cast<const int64_t*>(x), y, n, stream);
    case 9: return CastFrom(to, static_cast<const bool*>(x), y, n, stream);
    case 11: return CastFrom(to, static_cast<const double*>(x), y, n, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t Dropout(const float* x, float* y, uint8_t* mask, int64_t n, float ratio, uint64_t seed, uint64_t* offset,
                    cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DropoutKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, mask, n, ratio, 1.0f / (1.0f - ratio), seed, offset);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  AdvanceKernel<<<1, 1, 0, stream>>>(offset, static_cast<uint64_t>(n));  // after every draw of this launch
  return cudaGetLastError();
}

cudaError_t DropoutGrad(const float* dy, const uint8_t* mask, float* dx, int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  DropoutGradKernel<<<Blocks(n), kThreads, 0, stream>>>(dy, mask, dx, n, scale);
  return cudaGetLastError();
}

cudaError_t ScaleBy(const float* x, float* y, int64_t n, float scale, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ScaleKernel<<<Blocks(n), kThreads, 0, stream>>>(x, y, n, scale);
  return cudaGetLastError();
}

}  // namespace cuda
}  // namespace ontrain
