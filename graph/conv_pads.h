// ConvTranspose's pad resolution, shared by the CPU kernel (which runs it) and the autodiff builder (which
// differentiates it), so that both read output_shape and auto_pad the same way.
#pragma once

#include <cstdint>
#include <string>

namespace ontrain {

// The begin/end pads of one spatial axis. `full` is the uncropped scatter length
// stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1. With output_shape (`target` >= 0) or
// SAME_UPPER/SAME_LOWER (target in * stride), total = full - target is split with floor(total / 2) going
// to the begin (SAME_UPPER) or the end (otherwise); a target above `full` gives negative pads. VALID
// means no pads; NOTSET keeps the explicit ones.
inline void ResolveConvTransposePads(const std::string& auto_pad, int64_t full, int64_t in, int64_t stride,
                                     int64_t target, int64_t* begin, int64_t* end) {
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (target >= 0 || same) {
    if (target < 0) target = in * stride;
    const int64_t total = full - target;
    const int64_t half = total >= 0 ? total / 2 : -((1 - total) / 2);  // floor(total / 2), as ONNX defines it
    *begin = auto_pad == "SAME_UPPER" ? half : total - half;
    *end = total - *begin;
  } else if (auto_pad == "VALID") {
    *begin = *end = 0;
  }
}

}  // namespace ontrain
