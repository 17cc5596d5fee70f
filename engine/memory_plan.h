// Arena planning: given every buffer a run needs (the device it is on, its size and the steps over which
// it is alive), places buffers that are never alive at the same time at overlapping offsets, in one arena
// per device. The executor measures the buffers during the first run at a set of input shapes and serves
// every later run at those shapes from the arenas, so a steady-state run allocates nothing.
#pragma once

#include <cstddef>
#include <vector>

namespace ontrain {

constexpr size_t kArenaAlign = 64;
inline size_t AlignUp(size_t n) { return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

struct BufferUse {
  int device = 0;    // an index chosen by the caller (the executor uses provider indices)
  size_t bytes = 0;  // 0: no buffer
  int first = 0;     // first and last step (inclusive) at which the buffer is alive
  int last = 0;
};

struct MemoryPlan {
  std::vector<size_t> offset;       // by buffer: offset in its device's arena
  std::vector<size_t> arena_bytes;  // by device index
};

MemoryPlan PlanMemory(const std::vector<BufferUse>& buffers, int num_devices);

}  // namespace ontrain
