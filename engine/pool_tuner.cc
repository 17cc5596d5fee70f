// PoolTuner: warm-up, a trial of pooled and serial blocks, decision, and new trials: every kRetuneRuns runs
// after choosing the pool, sooner after choosing serial runs.
#include "engine/pool_tuner.h"

#include <algorithm>
#include <cstdio>

namespace ontrain {
namespace {

template <size_t N>
double Median(std::array<double, N> v) {
  std::sort(v.begin(), v.end());
  return N % 2 == 1 ? v[N / 2] : 0.5 * (v[N / 2 - 1] + v[N / 2]);
}

}  // namespace

bool PoolTuner::BeginRun() {
  if (open_) Record(pending_);
  open_ = true;
  pending_ = 0;
  pooled_now_ = NextRunPooled();
  return pooled_now_;
}

bool PoolTuner::NextRunPooled() const {
  if (trial_ >= 0) return (trial_ / kBlockRuns) % 2 == 0;  // a pooled block first: the arenas were planned pooled
  return choice_ != Choice::kSerial;
}

void PoolTuner::Record(double seconds) {
  if (trial_ < 0) {
    if (++runs_ >= wait_) trial_ = 0;
    return;
  }
  if (trial_ % kBlockRuns != 0) {  // the block's first run settles the caches
    if ((trial_ / kBlockRuns) % 2 == 0) pooled_[timed_pooled_++] = seconds;
    else serial_[timed_serial_++] = seconds;
  }
  if (++trial_ < kTrialLength) return;
  timed_pooled_ = timed_serial_ = 0;
  pooled_median_ = Median(pooled_);
  serial_median_ = Median(serial_);
  choice_ = serial_median_ < pooled_median_ * (1.0 - kMinGain) ? Choice::kSerial : Choice::kPool;
  if (choice_ == Choice::kSerial) {
    wait_ = serial_wait_;
    serial_wait_ = std::min(2 * serial_wait_, kRetuneRuns);
  } else {
    wait_ = kRetuneRuns;
    serial_wait_ = kFirstRecheckRuns;
  }
  trial_ = -1;
  runs_ = 0;
}

std::string PoolTuner::Describe() const {
  if (choice_ == Choice::kUndecided) return "undecided";
  char buf[96];
  std::snprintf(buf, sizeof(buf), "%s (pooled %.3f ms, serial %.3f ms)", choice_ == Choice::kPool ? "pool" : "serial",
                pooled_median_ * 1e3, serial_median_ * 1e3);
  return buf;
}

}  // namespace ontrain
