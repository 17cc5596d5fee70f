// Kernel lookup and the start-up overlap check.
#include "providers/kernel_registry.h"

#include <algorithm>

namespace ontrain {

namespace {
uint32_t Mask(std::initializer_list<int> inputs) {
  uint32_t m = 0;
  for (int i : inputs) m |= 1u << i;
  return m;
}
}  // namespace

InputRoles Host(std::initializer_list<int> inputs) { return {Mask(inputs), 0, 0}; }
InputRoles ShapeOnly(std::initializer_list<int> inputs) { return {0, Mask(inputs), 0}; }
InputRoles InPlace(std::initializer_list<int> inputs) { return {0, 0, Mask(inputs)}; }
InputRoles operator|(InputRoles a, InputRoles b) {
  return {a.host | b.host, a.shape_only | b.shape_only, a.in_place | b.in_place};
}

StatusOr<KernelRegistry> KernelRegistry::Create(std::vector<KernelDef> defs) {
  for (size_t i = 0; i < defs.size(); ++i) {
    const KernelDef& a = defs[i];
    if (a.since > a.until) return Internal("kernel row ", a.op, ": empty opset range ", a.since, "..", a.until);
    for (size_t j = i + 1; j < defs.size(); ++j) {
      const KernelDef& b = defs[j];
      if (std::string(a.domain) != b.domain || std::string(a.op) != b.op) continue;
      if (a.until < b.since || b.until < a.since) continue;
      for (DType t : a.types) {
        if (std::find(b.types.begin(), b.types.end(), t) != b.types.end()) {
          return Internal("duplicate kernel rows for ", a.domain, "::", a.op, " dtype ", DTypeName(t),
                          ": opsets ", a.since, "..", a.until, " and ", b.since, "..", b.until);
        }
      }
    }
  }
  KernelRegistry r;
  r.defs_ = std::move(defs);
  return r;
}

bool KernelRegistry::HasOp(const std::string& domain, const std::string& op, int64_t opset) const {
  return FindAnyType(domain, op, opset) != nullptr;
}

const KernelDef* KernelRegistry::FindAnyType(const std::string& domain, const std::string& op, int64_t opset) const {
  for (const KernelDef& d : defs_) {
    if (d.domain == domain && d.op == op && d.since <= opset && opset <= d.until) return &d;
  }
  return nullptr;
}

StatusOr<const KernelDef*> KernelRegistry::Find(const std::string& domain, const std::string& op, int64_t opset,
                                                const std::vector<DType>& input_dtypes) const {
  std::string supported;
  for (const KernelDef& d : defs_) {
    if (d.domain != domain || d.op != op || opset < d.since || opset > d.until) continue;
    if (d.type_input < 0) return &d;
    DType t = d.type_input < static_cast<int>(input_dtypes.size()) ? input_dtypes[d.type_input] : DType::kUndefined;
    if (std::find(d.types.begin(), d.types.end(), t) != d.types.end()) return &d;
    for (DType s : d.types) supported += StrCat(supported.empty() ? "" : ", ", DTypeName(s));
  }
  std::string dom = domain.empty() ? "ai.onnx" : domain;
  if (supported.empty()) {
    return NotFound("no kernel for op ", op, " (domain ", dom, ", opset ", opset, ")");
  }
  return NotFound("no kernel for op ", op, " (domain ", dom, ", opset ", opset, ") with input dtype ",
                  DTypeName(input_dtypes.empty() ? DType::kUndefined : input_dtypes[0]), "; supported: ", supported);
}

}  // namespace ontrain
