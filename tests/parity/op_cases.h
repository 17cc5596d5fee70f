// The op-level parity table: seeded single-node cases for every (op, dtype) row of the CUDA kernel list,
// each run on the CPU provider alone and on CUDA (with the CPU as fallback), outputs compared within the
// case's tolerance. Shapes cover broadcasting, odd sizes and empty dims.
#pragma once

#include <string>
#include <vector>

#include "core/value.h"
#include "graph/builder.h"
#include "tests/parity/parity_util.h"

namespace ontrain {
namespace parity {

struct OpCase {
  std::string name;  // unique, a gtest name
  std::string domain, op;
  int opset = 17;
  std::vector<onnx::AttributeProto> attrs;
  std::vector<Value> inputs;     // an undefined Value is an omitted optional input
  std::vector<DType> outputs;    // the node's outputs and their dtypes
  std::vector<Shape> output_shapes;  // declared output shapes, where a kernel reads them (pooling gradients)
  Tolerance tol;
  // Why this tolerance, when it is not the default (float32 rounding of a few operations).
  std::string tol_reason;
};

const std::vector<OpCase>& OpCases();

}  // namespace parity
}  // namespace ontrain
