// NumPy's .npy and .npz files: reading (stored or deflated zip entries, zip64 sizes) and writing
// (stored entries), for the CLI's `run` command and .npz/.npy training data.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ontrain {
namespace cli {

StatusOr<Tensor> ParseNpy(const std::string& bytes, const std::string& where);
// Every dtype a Tensor holds has a numpy form: bfloat16 (which numpy lacks) is written as float32, exactly.
StatusOr<std::string> SerializeNpy(const Tensor& t);

StatusOr<Tensor> LoadNpy(const std::string& path);
// Arrays by name (the entry names without ".npy"), in file order.
StatusOr<std::vector<std::pair<std::string, Tensor>>> LoadNpz(const std::string& path);
Status SaveNpz(const std::vector<std::pair<std::string, Tensor>>& arrays, const std::string& path);

}  // namespace cli
}  // namespace ontrain
