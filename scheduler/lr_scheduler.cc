// Learning-rate schedule formulas and their persistence.
#include "scheduler/lr_scheduler.h"

#include <algorithm>
#include <cmath>

namespace ontrain {

namespace {
const char* kPrefix = "ontrain.lr_schedule.";
std::string Key(const char* field) { return std::string(kPrefix) + field; }
}  // namespace

const char* ScheduleKindName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kConstant: return "constant";
    case ScheduleKind::kLinear: return "linear";
    case ScheduleKind::kCosine: return "cosine";
    case ScheduleKind::kStep: return "step";
    case ScheduleKind::kExponential: return "exponential";
  }
  return "unknown";
}

StatusOr<ScheduleKind> ParseScheduleKind(const std::string& name) {
  for (ScheduleKind k : {ScheduleKind::kConstant, ScheduleKind::kLinear, ScheduleKind::kCosine, ScheduleKind::kStep,
                         ScheduleKind::kExponential}) {
    if (name == ScheduleKindName(k)) return k;
  }
  return InvalidArgument("unknown learning-rate schedule \"", name,
                         "\"; expected constant, linear, cosine, step or exponential");
}

Status ValidateSchedule(const LrSchedule& s) {
  if (s.warmup_steps < 0) return InvalidArgument("warmup steps must be >= 0, got ", s.warmup_steps);
  if ((s.kind == ScheduleKind::kLinear || s.kind == ScheduleKind::kCosine) && s.total_steps < 0) {
    return InvalidArgument("total steps must be >= 0, got ", s.total_steps);
  }
  if (s.kind == ScheduleKind::kStep && s.step_size <= 0) return InvalidArgument("step size must be > 0");
  if ((s.kind == ScheduleKind::kStep || s.kind == ScheduleKind::kExponential) && !(s.gamma > 0.0f)) {
    return InvalidArgument("gamma must be > 0, got ", s.gamma);
  }
  if (!(s.min_ratio >= 0.0f && s.min_ratio <= 1.0f)) return InvalidArgument("min_ratio must be in [0, 1]");
  return Status::OK();
}

float LrFactor(const LrSchedule& s, int64_t step) {
  if (step < s.warmup_steps) {
    return static_cast<float>(step) / static_cast<float>(std::max<int64_t>(1, s.warmup_steps));
  }
  int64_t after = step - s.warmup_steps;
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return 1.0f;
    case ScheduleKind::kLinear:
      return std::max(0.0f, static_cast<float>(s.total_steps - step) /
                                static_cast<float>(std::max<int64_t>(1, s.total_steps - s.warmup_steps)));
    case ScheduleKind::kCosine: {
      double p = static_cast<double>(after) / static_cast<double>(std::max<int64_t>(1, s.total_steps - s.warmup_steps));
      p = std::min(1.0, std::max(0.0, p));
      double c = 0.5 * (1.0 + std::cos(M_PI * p));
      return static_cast<float>(s.min_ratio + (1.0 - s.min_ratio) * c);
    }
    case ScheduleKind::kStep:
      return static_cast<float>(std::pow(static_cast<double>(s.gamma), static_cast<double>(after / s.step_size)));
    case ScheduleKind::kExponential:
      return static_cast<float>(std::pow(static_cast<double>(s.gamma), static_cast<double>(after)));
  }
  return 1.0f;
}

void StoreSchedule(const LrSchedule& s, PropertyBag* bag) {
  bag->Set(Key("kind"), std::string(ScheduleKindName(s.kind)));
  bag->Set(Key("warmup_steps"), s.warmup_steps);
  bag->Set(Key("total_steps"), s.total_steps);
  bag->Set(Key("step_size"), s.step_size);
  bag->Set(Key("gamma"), s.gamma);
  bag->Set(Key("min_ratio"), s.min_ratio);
}

StatusOr<std::optional<LrSchedule>> LoadSchedule(const PropertyBag& bag) {
  if (!bag.Contains(Key("kind"))) return std::optional<LrSchedule>();
  LrSchedule s;
  auto kind = bag.Get<std::string>(Key("kind"));
  if (!kind.ok()) return kind.status();
  ONT_ASSIGN_OR_RETURN(s.kind, ParseScheduleKind(kind.value()));
  auto ints = {std::make_pair("warmup_steps", &s.warmup_steps), std::make_pair("total_steps", &s.total_steps),
               std::make_pair("step_size", &s.step_size)};
  for (auto [name, field] : ints) {
    auto v = bag.Get<int64_t>(Key(name));
    if (!v.ok()) return v.status().WithContext("stored learning-rate schedule");
    *field = v.value();
  }
  for (auto [name, field] : {std::make_pair("gamma", &s.gamma), std::make_pair("min_ratio", &s.min_ratio)}) {
    auto v = bag.Get<float>(Key(name));
    if (!v.ok()) return v.status().WithContext("stored learning-rate schedule");
    *field = v.value();
  }
  ONT_RETURN_IF_ERROR(ValidateSchedule(s));
  return std::optional<LrSchedule>(s);
}

}  // namespace ontrain
