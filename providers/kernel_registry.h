// A provider's kernel list: one row per (domain, op, opset range, dtypes). Rows are written out by hand in
// one sorted array per provider (e.g. providers/cpu/cpu_kernel_list.cc); the registry checks them for
// overlaps at start-up and answers "which kernel runs this node with these input dtypes?".
//
// A row also says how its kernel uses its inputs, which is what the planner needs to place values:
// - host inputs: read on the host (shapes, axes, pads, starts/ends, repeats, scalars such as the learning
//   rate), so the planner keeps them there and a device kernel never copies a value back to learn a shape;
// - shape-only inputs: only their dtype and shape are read (Shape, Size), so they need no copy at all;
// - in-place inputs: written in place (gradient buffers, optimizer state), so they must already live on
//   the kernel's device: a copy would update the copy.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"
#include "providers/kernel.h"

namespace ontrain {

constexpr int kMaxOpset = 1000;  // "until the newest version"

// Input roles as bit masks over input indices (bit i: input i).
struct InputRoles {
  uint32_t host = 0;
  uint32_t shape_only = 0;
  uint32_t in_place = 0;
};
InputRoles Host(std::initializer_list<int> inputs);
InputRoles ShapeOnly(std::initializer_list<int> inputs);
InputRoles InPlace(std::initializer_list<int> inputs);
InputRoles operator|(InputRoles a, InputRoles b);

struct KernelDef {
  const char* domain;        // "" for ONNX, "com.microsoft", "ai.onnx.preview.training"
  const char* op;
  int since;                 // first opset version served (inclusive)
  int until;                 // last opset version served (inclusive)
  std::vector<DType> types;  // accepted dtypes of input `type_input`
  KernelFactory create;
  int type_input = 0;        // which input's dtype selects the row; -1 when no input has a type (Constant)
  InputRoles roles = {};
  // Attribute cases the kernel cannot run (a device kernel narrower than the op): returns why, or nullptr
  // when it can. The planner then places the node on a later provider and reports the reason.
  const char* (*rejects)(const Node& node) = nullptr;

  bool is_host_input(int i) const { return i < 32 && (roles.host >> i & 1u); }
  bool is_shape_only_input(int i) const { return i < 32 && (roles.shape_only >> i & 1u); }
  bool is_in_place_input(int i) const { return i < 32 && (roles.in_place >> i & 1u); }
};

class KernelRegistry {
 public:
  // Validates the list: an overlapping (domain, op, opset, dtype) pair or an empty range is an error.
  static StatusOr<KernelRegistry> Create(std::vector<KernelDef> defs);

  // True if some row serves (domain, op) at `opset`, whatever the dtype.
  bool HasOp(const std::string& domain, const std::string& op, int64_t opset) const;
  // The row serving the node with these input dtypes, or an error naming the op, domain, opset and dtype.
  StatusOr<const KernelDef*> Find(const std::string& domain, const std::string& op, int64_t opset,
                                  const std::vector<DType>& input_dtypes) const;
  // The first row serving (domain, op) at `opset`, whatever the dtype (nullptr if none).
  const KernelDef* FindAnyType(const std::string& domain, const std::string& op, int64_t opset) const;
  const std::vector<KernelDef>& defs() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

}  // namespace ontrain
