// The operator table of docs/operators.md, generated from the providers' kernel lists (never written by
// hand): every op, grouped into forward ops, gradient ops and optimizer/accumulation ops, with the opset
// range and dtypes each provider serves. //tools:operator_table prints it; a test fails when the
// checked-in file differs.
#pragma once

#include <string>
#include <vector>

#include "providers/kernel_registry.h"

namespace ontrain {

std::string MakeOperatorTable(const std::vector<KernelDef>& cpu, const std::vector<KernelDef>& cuda);

}  // namespace ontrain
