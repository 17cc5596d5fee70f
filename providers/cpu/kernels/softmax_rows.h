// Softmax's and LogSoftmax's gradients over contiguous rows, shared by SoftmaxGrad (grad_softmax_loss.cc)
// and the fused ScaledMaskedSoftmaxGrad (softmax_fused.cc), so that the two give the same bits.
#pragma once

#include <cstdint>

namespace ontrain {
namespace cpu {

constexpr int64_t kSoftmaxGradRowGroup = 8;

// `rows` rows of `len` (dY pd, Y py, dX out, each contiguous). Softmax: dX = Y (dY - sum(Y dY)); LogSoftmax
// (`log`): dX = dY - exp(Y) sum(dY). Each row's sum is added in the row's order; rows go kSoftmaxGradRowGroup
// at a time so that the group's sums advance side by side instead of each add waiting on the one before it
// (the transformer's [16, 4, 64, 64] gradient: 0.20 ms, four cycles per element, one row at a time). The
// grouping changes no bit. Compiled once (softmax_rows.cc) for float32, float64, float16 and bfloat16, so
// that every caller runs the same code: inlined into another kernel's loop, with `log` a constant, GCC
// vectorized the group's sums over strided loads instead, and the transformer's gradient took twice as long.
template <typename T>
void SoftmaxGradRows(bool log, const T* pd, const T* py, T* out, int64_t rows, int64_t len);

}  // namespace cpu
}  // namespace ontrain
