// A process-wide tally of kernel time per op type, for `ontrain bench --profile`. Off by default; when on,
// the executor times each kernel's run. On a device provider it synchronizes the device before and after
// each kernel, so the time is the kernel's work plus one launch and one synchronization, and graph capture
// stays off (a profiled step is slower than an unprofiled one). Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ontrain {

struct OpTime {
  std::string op;      // "domain::Op" or "Op"
  int64_t calls = 0;
  int64_t nanos = 0;
  int64_t flops = 0;  // matrix FLOPs of all calls (op_flops.h); 0 for other ops
};

// by_shape: tally per op type and input shapes ("MatMul [64,784] [784,128]") instead of per op type.
void EnableOpProfile(bool on, bool by_shape = false);
bool OpProfileEnabled();
bool OpProfileByShape();
void AddOpTime(const std::string& op, int64_t nanos, int64_t flops = 0);
// Every op seen, by total time, largest first.
std::vector<OpTime> OpProfile();
// Zeroes the tally, keeping its entries (so that a run profiled again after it allocates nothing).
void ResetOpProfile();

}  // namespace ontrain
