// Learning-rate schedules as pure functions of the optimizer step: lr(step) = initial_lr * LrFactor(step).
//
// kLinear is ONNX Runtime's LinearLRScheduler, computed in float32 as it does:
//   step < warmup: step / max(1, warmup); else max(0, (total - step) / max(1, total - warmup)).
// The others share the same linear warmup and then: kConstant 1; kCosine 0.5 (1 + cos(pi p)) scaled into
// [min_ratio, 1] with p = (step - warmup) / (total - warmup) clamped to [0, 1]; kStep
// gamma^floor((step - warmup) / step_size); kExponential gamma^(step - warmup).
// A schedule is stored in a checkpoint's property bag (with the step kept by the optimizer group) so that a
// resumed run continues the same curve.
#pragma once

#include <optional>
#include <string>

#include "checkpoint/checkpoint_state.h"
#include "core/status.h"

namespace ontrain {

enum class ScheduleKind { kConstant, kLinear, kCosine, kStep, kExponential };

struct LrSchedule {
  ScheduleKind kind = ScheduleKind::kLinear;
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;  // kLinear, kCosine
  int64_t step_size = 1;    // kStep
  float gamma = 0.1f;       // kStep, kExponential
  float min_ratio = 0.0f;   // kCosine floor, as a fraction of the initial rate
};

const char* ScheduleKindName(ScheduleKind kind);
StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name);
Status ValidateSchedule(const LrSchedule& s);

float LrFactor(const LrSchedule& s, int64_t step);

// Property-bag persistence under the "ontrain.lr_schedule." prefix.
void StoreSchedule(const LrSchedule& s, PropertyBag* bag);
// No schedule stored: nullopt. A partial or malformed one: an error naming the property.
StatusOr<std::optional<LrSchedule>> LoadSchedule(const PropertyBag& bag);

}  // namespace ontrain
