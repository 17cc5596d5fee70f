// A provider's kernel list: one row per (domain, op, opset range, dtypes). Rows are written out by hand in
// one sorted array per provider (e.g. providers/cpu/cpu_kernel_list.cc); the registry checks them for
// overlaps at start-up and answers "which kernel runs this node with these input dtypes?".
#pragma once

#include <string>
#include <vector>

#include "engine/dtype.h"
#include "engine/status.h"
#include "providers/kernel.h"

namespace ontrain {

constexpr int kMaxOpset = 1000;  // "until the newest version"

struct KernelDef {
  const char* domain;        // "" for ONNX, "com.microsoft", "ai.onnx.preview.training"
  const char* op;
  int since;                 // first opset version served (inclusive)
  int until;                 // last opset version served (inclusive)
  std::vector<DType> types;  // accepted dtypes of input `type_input`
  KernelFactory create;
  int type_input = 0;        // which input's dtype selects the row; -1 when no input has a type (Constant)
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
  const std::vector<KernelDef>& defs() const { return defs_; }

 private:
  std::vector<KernelDef> defs_;
};

}  // namespace ontrain
