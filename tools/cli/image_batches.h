// Image-classification batches for the CLI: a dataset shaped to a training model's two user inputs
// (images, labels), and evaluation (loss, and accuracy when the eval model outputs logits).
#pragma once

#include <vector>

#include "engine/training_session.h"
#include "graph/graph.h"
#include "tools/cli/dataset.h"

namespace ontrain {
namespace cli {

struct Batcher {
  const ImageDataset* data = nullptr;
  Shape image_shape;  // per example, e.g. [784] or [1,28,28]
  DType label_dtype = DType::kInt64;
  Tensor images, labels;

  Status Init(int64_t batch);
  // Batch of the examples order[begin, begin + n) (views of reused buffers).
  std::vector<Tensor> Fill(const std::vector<int64_t>& order, int64_t begin, int64_t n);
};

// Reads the model's image and label inputs and checks them against 28x28 images.
Status DescribeInputs(const Model& train, const TrainingSession& s, Shape* image_shape, DType* label_dtype);

struct EvalResult {
  double loss = 0, accuracy = -1;
};
StatusOr<EvalResult> Evaluate(TrainingSession& s, Batcher& b, int64_t batch);

}  // namespace cli
}  // namespace ontrain
