// Training data for the CLI: Fashion-MNIST from Debian's dataset-fashion-mnist (IDX files, gzip), as
// float images in [0, 1] and int64 labels.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace ontrain {
namespace cli {

struct ImageDataset {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<float> images;   // [count, rows * cols], values / 255
  std::vector<int64_t> labels; // [count]
};

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Reads an IDX image file and its label file (gzip or plain); sizes and magic numbers are checked.
StatusOr<ImageDataset> LoadIdxPair(const std::string& images_path, const std::string& labels_path);

// "fashion-mnist" (the 60000 training images) or "fashion-mnist:test" (10000 test images). `root` overrides
// the install folder (tests).
StatusOr<ImageDataset> LoadDataset(const std::string& spec, const std::string& root = kFashionMnistDir);

}  // namespace cli
}  // namespace ontrain
