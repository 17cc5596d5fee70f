// AdamW and SGD update loops (float32, as ONNX Runtime's CPU kernels compute them).
#include "optimizer/update_rules.h"

#include <cmath>

namespace ontrain {

void AdamWUpdate(const AdamWConfig& c, float lr, int64_t t, int64_t n, float* w, const float* g, float* m, float* v) {
  float ac = 1.0f, bc = 1.0f;
  if (c.correct_bias) {
    ac = 1.0f - static_cast<float>(std::pow(static_cast<double>(c.alpha), static_cast<double>(t)));
    bc = 1.0f - static_cast<float>(std::pow(static_cast<double>(c.beta), static_cast<double>(t)));
  }
  const float a = c.alpha, b = c.beta, eps = c.epsilon;
  if (c.adam_mode == 0) {
    for (int64_t i = 0; i < n; ++i) {
      w[i] -= w[i] * lr * c.weight_decay;
      m[i] = a * m[i] + (1.0f - a) * g[i];
      v[i] = b * v[i] + (1.0f - b) * g[i] * g[i];
      w[i] -= lr * m[i] / (ac * (std::sqrt(v[i] / bc) + eps));
    }
  } else {
    const float lr_c = lr * std::sqrt(bc) / ac;
    for (int64_t i = 0; i < n; ++i) {
      m[i] = a * m[i] + (1.0f - a) * g[i];
      v[i] = b * v[i] + (1.0f - b) * g[i] * g[i];
      w[i] -= lr_c * m[i] / (std::sqrt(v[i]) + eps);
      w[i] -= lr * c.weight_decay * w[i];
    }
  }
}

void SgdUpdate(float lr, int64_t n, float* w, const float* g) {
  for (int64_t i = 0; i < n; ++i) w[i] -= lr * g[i];
}

}  // namespace ontrain
