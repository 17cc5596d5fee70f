// The parameter update rules of ONNX Runtime's optimizer ops, on flat float32 buffers, in place:
// AdamWOptimizer (adam_mode 0: PyTorch's AdamW; 1: Hugging Face's) and SGDOptimizerV2.
#pragma once

#include <cstdint>

namespace ontrain {

struct AdamWConfig {
  float alpha = 0.9f;     // beta1
  float beta = 0.999f;    // beta2
  float epsilon = 1e-8f;
  float weight_decay = 0.0f;
  int64_t adam_mode = 0;
  bool correct_bias = true;
};

// One AdamW step at step count t (>= 1) with learning rate lr on n elements:
//   m = alpha m + (1 - alpha) g;  v = beta v + (1 - beta) g^2, and with ac = 1 - alpha^t, bc = 1 - beta^t
//   (1 when correct_bias is off):
//   mode 0: w -= w lr wd (first); w -= lr m / (ac (sqrt(v / bc) + eps))
//   mode 1: w -= lr sqrt(bc) / ac * m / (sqrt(v) + eps); w -= lr wd w (last)
void AdamWUpdate(const AdamWConfig& c, float lr, int64_t t, int64_t n, float* w, const float* g, float* m, float* v);

// w -= lr g
void SgdUpdate(float lr, int64_t n, float* w, const float* g);

}  // namespace ontrain
