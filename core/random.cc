// Global seed bookkeeping.
#include "core/random.h"

#include <atomic>
#include <mutex>
#include <random>

namespace ontrain {

namespace {
std::mutex mu;
bool seeded = false;
std::mt19937_64 generator;
}  // namespace

void SetGlobalSeed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(mu);
  generator.seed(seed);
  seeded = true;
}

uint64_t NextKernelSeed() {
  std::lock_guard<std::mutex> lock(mu);
  if (!seeded) return std::random_device{}();
  return generator();
}

}  // namespace ontrain
