// The op-time tally.
#include "engine/op_profile.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace ontrain {
namespace {

std::atomic<bool> enabled{false}, by_shape{false};
std::mutex mu;
std::map<std::string, OpTime>& Tally() {
  static auto* t = new std::map<std::string, OpTime>();
  return *t;
}

}  // namespace

void EnableOpProfile(bool on, bool shapes) {
  by_shape = shapes;
  enabled = on;
}
bool OpProfileEnabled() { return enabled.load(std::memory_order_relaxed); }
bool OpProfileByShape() { return by_shape.load(std::memory_order_relaxed); }

void AddOpTime(const std::string& op, int64_t nanos, int64_t flops) {
  std::lock_guard<std::mutex> lock(mu);
  OpTime& t = Tally()[op];
  t.op = op;
  t.calls++;
  t.nanos += nanos;
  t.flops += flops;
}

std::vector<OpTime> OpProfile() {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<OpTime> out;
  for (const auto& [op, t] : Tally()) {
    if (t.calls > 0) out.push_back(t);
  }
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.nanos > b.nanos; });
  return out;
}

void ResetOpProfile() {
  std::lock_guard<std::mutex> lock(mu);
  for (auto& [op, t] : Tally()) t.calls = t.nanos = t.flops = 0;  // the entries stay: no allocation to re-add them
}

}  // namespace ontrain
