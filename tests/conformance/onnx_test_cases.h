// Locates ONNX's backend test data in the test's runfiles.
#pragma once

#include <string>
#include <vector>

namespace ontrain {

// Folder holding ONNX's backend test data (…/onnx_testdata, with node/ and simple/ inside).
std::string TestDataDir();
// All node and simple cases as "node/<case>" and "simple/<case>", sorted.
std::vector<std::string> ListCases();

}  // namespace ontrain
