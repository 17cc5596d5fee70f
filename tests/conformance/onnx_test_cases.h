// Locates ONNX's backend test data in the test's runfiles.
#pragma once

#include <string>
#include <vector>

namespace ontrain {

// Folder holding the node cases (…/onnx_testdata/node).
std::string NodeDataDir();
// Names of all node case folders, sorted.
std::vector<std::string> ListNodeCases();

}  // namespace ontrain
