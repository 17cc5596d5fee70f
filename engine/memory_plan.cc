// Greedy-by-size arena placement, per device.
#include "engine/memory_plan.h"

#include <algorithm>
#include <utility>

namespace ontrain {

MemoryPlan PlanMemory(const std::vector<BufferUse>& buffers, int num_devices) {
  MemoryPlan plan;
  plan.offset.assign(buffers.size(), 0);
  plan.arena_bytes.assign(num_devices, 0);
  // 1. The largest buffer first, each at the lowest offset of its device's arena that no buffer alive at
  //    the same time occupies.
  std::vector<size_t> idx;
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].bytes > 0) idx.push_back(i);
  }
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t a, size_t b) { return AlignUp(buffers[a].bytes) > AlignUp(buffers[b].bytes); });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping live buffers
  for (size_t i : idx) {
    const BufferUse& b = buffers[i];
    size_t bytes = AlignUp(b.bytes);
    busy.clear();
    for (size_t j : placed) {
      const BufferUse& o = buffers[j];
      if (o.device == b.device && o.first <= b.last && b.first <= o.last) {
        busy.push_back({plan.offset[j], plan.offset[j] + AlignUp(o.bytes)});
      }
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [s, e] : busy) {
      if (offset + bytes <= s) break;
      offset = std::max(offset, e);
    }
    plan.offset[i] = offset;
    // 2. Each device's arena is as large as its highest placed byte.
    plan.arena_bytes[b.device] = std::max(plan.arena_bytes[b.device], offset + bytes);
    placed.push_back(i);
  }
  return plan;
}

}  // namespace ontrain
