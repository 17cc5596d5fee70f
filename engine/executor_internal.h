// What the executor's source files share (not part of its interface): a step's run-time state, a memory
// plan's arenas, and the recorded runs kept with a plan (graph capture, executor_capture.cc).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/executor.h"
#include "engine/pool_tuner.h"

namespace ontrain {

struct Executor::Step {
  PlanStep plan;
  const Node* node = nullptr;  // kernel steps
  int64_t opset = 0;
  std::unique_ptr<OpKernel> kernel;
  const KernelDef* def = nullptr;  // the kernel's row, found when the kernel was made
  KernelContext ctx;
  std::vector<const Value*> in_ptrs;
  std::vector<bool> requested;
  size_t slot_base = 0;  // kernel: output i at slot_base + i, scratch after them; copy: slot_base
  std::vector<std::pair<int, int>> aliases;  // (output value, input value) sharing storage
  std::string profile_key;  // `ontrain bench --profile`: "domain::Op", made on the first profiled run
  // `--profile-shapes`: the key with the input shapes, and the shapes it was made for (remade when they
  // change, so that steps at the same shapes allocate nothing).
  std::string profile_shape_key;
  std::vector<Shape> profile_shapes;
};

// One recorded run at a plan (executor_capture.cc).
struct Executor::Capture {
  std::string key;  // the replay key it was recorded under (ReplayKey)
  // The host sources of the run's copies to the device, in the capturing provider's staging memory.
  std::vector<Tensor> staging;
  // Fed host inputs (value id) and their staging copy, rewritten from the feeds before each replay.
  std::vector<std::pair<int, Tensor>> refresh;
  // The graph outputs (value id) as the recorded run left them: device tensors in the arenas, host ones
  // copied (a later eager run at the same plan may rewrite the host arena).
  std::vector<std::pair<int, Value>> outputs;
  std::unique_ptr<CapturedWork> work;  // declared last: destroyed before the staging it reads
};

struct Executor::MemoryArenas {
  std::vector<size_t> offset;  // by slot
  std::vector<size_t> size;    // by slot
  std::vector<Tensor> arenas;  // by provider
  bool valid = true;           // false once a run needed more than planned: rebuilt after that run
  size_t charged = 0;          // bytes charged to the executor's budget
  PoolTuner tuner;             // with or without the intra-op pool, at these shapes
  // Graph capture at these shapes; declared after the arenas, so that recordings are destroyed before the
  // memory they name.
  int eager_runs = 0;       // eager runs since this plan became the executor's current one
  std::string no_capture;   // why runs at these shapes are no longer recorded ("" while they may be)
  // The replay keys of the last eager runs (a ring): only a key seen again is recorded, so that a host
  // input that changes at every run (an optimizer's step) never makes a recording.
  std::vector<std::string> recent_keys;
  size_t next_recent = 0;
  std::vector<std::unique_ptr<Capture>> captures;
};

}  // namespace ontrain
