// The flat kernels that depthwise_vector.cc and depthwise_phases.cc share (float32, AVX-512; callers check
// DwVectorApplies first): a plane as one flat array, each tap read at a fixed offset from the output with a
// mask per 16-element vector and tap (depthwise_vector.cc says how every geometry reduces to it), and the
// stride-2 phase planes' entry points.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "providers/cpu/kernels/depthwise_vector.h"

namespace ontrain {
namespace cpu {

constexpr int64_t kDwMaxTaps = 25;
constexpr int64_t kDwFlatMaxElements = int64_t{1} << 18;  // planes of up to 512 x 512

struct DwFlat {
  int64_t vectors = 0, taps = 0;
  int64_t shift[kDwMaxTaps];
  const __mmask16* mask = nullptr;  // [vectors, taps], in the building thread's buffer
  __mmask16 tail = 0;               // the last vector's output lanes
  // Where nonzero, the window is 3x3 at dilation 1 with pads of 1 over a plane of rows_h rows of rows_w
  // floats, rows_w at least 16: the row kernels (depthwise_vector.cc) compute it, the forward form with the
  // same bits, dW's lane sums in their own order (the same bits where rows_w is 16).
  int64_t rows_h = 0, rows_w = 0;
};

// 16 lanes of a dW sum, as memory (a vector type cannot be a std::vector's element without a warning).
struct alignas(64) DwLanes {
  float lane[16];
};

// Whether the flat kernels take this geometry on this CPU.
bool DwVectorApplies(const Geo2D& g);
// Whether the forward pass's output is Y1 itself (stride 1, output the size of x).
bool DwSameSize(const Geo2D& g);

// The register kernels (depthwise_registers.cc) for planes of up to kDwRegVectors vectors whose taps reach
// at most 16 floats, with the flat kernels' sums in their order (the same bits). False, computing nothing,
// where they do not take the geometry: the forward pass over f (stride 1, the output x's size) for all
// channels; dX and dW (the flat kernels' `data` and `weights` forms; strided windows with dY spread) for
// channels [c0, c1).
constexpr int kDwRegVectors = 4;
bool DwForwardInRegisters(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c,
                          const Geo2D& g, const DwFlat& f, ThreadPool* pool);
bool DwBackwardInRegisters(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                           int64_t c0, int64_t c1, const Geo2D& g, const DwFlat& data, const DwFlat& weights);

// Sets the masks of a flat kernel over an hd x wd output plane (`vectors` 16-element vectors, [vectors,
// taps] masks, cleared first): tap t reads inside its source at the outputs (r, o) with r in [rlo[t],
// rhi[t]) and o in [olo[t], ohi[t]) (ranges clipped to the plane).
void FillMasks(int64_t hd, int64_t wd, int64_t taps, const int64_t* rlo, const int64_t* rhi, const int64_t* olo,
               const int64_t* ohi, __mmask16* mask);

// y = bias + the taps of w over x in order, one FMA each, over f's vectors.
void DwForwardFlat(const float* x, const float* w, float bias, float* y, const DwFlat& f);
// acc[t] += z . (x shifted by tap t), lane by lane, over f's vectors.
void DwWeightGradFlat(const float* z, const float* x, __m512* acc, const DwFlat& f);
// The 16 lanes of v added in a fixed order.
__attribute__((target("avx512f"))) float DwLaneTotal(__m512 v);

// Stride 2 in both dims on rows of 16 or more: x's four phase planes (depthwise_phases.cc).
bool DwPhasesApply(const Geo2D& g);
void DwPhaseForward(const float* x, const float* w, const float* bias, float* y, int64_t n, int64_t c, const Geo2D& g,
                    ThreadPool* pool);
void DwPhaseBackwardData(const float* dy, const float* w, float* dx, int64_t n, int64_t c, const Geo2D& g,
                         ThreadPool* pool);
// dW, and dX too where w and dx are given.
void DwPhaseBackward(const float* dy, const float* x, const float* w, float* dx, float* dw, int64_t n, int64_t c,
                     const Geo2D& g, ThreadPool* pool);

}  // namespace cpu
}  // namespace ontrain
