// The process-wide seed for random ops that have no seed of their own (Dropout without a `seed`
// attribute). OtSetSeed / SetGlobalSeed make such runs reproducible; without it, seeds come from the OS.
#pragma once

#include <cstdint>

namespace ontrain {

void SetGlobalSeed(uint64_t seed);
// A new seed for one kernel instance: derived from the global seed when set, else random.
uint64_t NextKernelSeed();

}  // namespace ontrain
