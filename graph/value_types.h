// Static element types of every value of a graph, known before any run: what the planner needs to choose
// a kernel row (rows are per dtype) for each node.
//
// Declared types come first (graph inputs, initializers, value_info, outputs). The rest follow from a rule
// per op: most ops output their first input's type; the exceptions (Shape -> int64, comparisons -> bool,
// Cast -> its `to`, Dropout's mask -> bool, ...) are listed in value_types.cc. A sequence value has its
// items' type. Values no rule reaches stay kUndefined.
#pragma once

#include <map>
#include <string>

#include "core/dtype.h"
#include "graph/graph.h"

namespace ontrain {

// The element type of a value_info (a sequence's item type for seq(tensor)).
DType ElementDType(const ValueInfo& v);

// Value name -> element type, for every value the graph names.
std::map<std::string, DType> InferValueDTypes(const Graph& graph);

}  // namespace ontrain
