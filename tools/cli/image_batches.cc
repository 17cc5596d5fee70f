// Image batches and evaluation for the CLI.
#include "tools/cli/image_batches.h"

#include <algorithm>
#include <cstring>
#include <numeric>

namespace ontrain {
namespace cli {

Status Batcher::Init(int64_t batch) {
  Shape s = {batch};
  s.insert(s.end(), image_shape.begin(), image_shape.end());
  ONT_ASSIGN_OR_RETURN(images, Tensor::Allocate(DType::kFloat32, s, HostAllocator()));
  ONT_ASSIGN_OR_RETURN(labels, Tensor::Allocate(label_dtype, {batch}, HostAllocator()));
  return Status::OK();
}

std::vector<Tensor> Batcher::Fill(const std::vector<int64_t>& order, int64_t begin, int64_t n) {
  int64_t pixels = data->rows * data->cols;
  for (int64_t i = 0; i < n; ++i) {
    int64_t e = order[begin + i];
    std::memcpy(images.data<float>() + i * pixels, data->images.data() + e * pixels, pixels * sizeof(float));
    if (label_dtype == DType::kInt64) labels.data<int64_t>()[i] = data->labels[e];
    else labels.data<int32_t>()[i] = static_cast<int32_t>(data->labels[e]);
  }
  Shape s = images.shape();
  s[0] = n;
  return {Tensor::View(DType::kFloat32, s, images.raw_data()), Tensor::View(label_dtype, {n}, labels.raw_data())};
}

Status DescribeInputs(const Model& train, const TrainingSession& s, Shape* image_shape, DType* label_dtype) {
  const std::vector<std::string>& names = s.training_input_names();
  if (names.size() != 2) {
    return InvalidArgument("the training model has ", names.size(), " user inputs; image classification data feeds 2 "
                           "(images and labels)");
  }
  const ValueInfo* img = train.graph.FindInput(names[0]);
  const ValueInfo* lab = train.graph.FindInput(names[1]);
  if (img->dtype != DType::kFloat32 || !img->has_shape) {
    return InvalidArgument("model input \"", img->name, "\" is ", img->TypeString(), "; the data are float32 images");
  }
  if (img->dims.size() == 2 && (!img->dims[1].known() || img->dims[1].value == 784)) {
    *image_shape = {784};
  } else if (img->dims.size() == 4 && img->dims[1].value == 1 && img->dims[2].value == 28 && img->dims[3].value == 28) {
    *image_shape = {1, 28, 28};
  } else {
    return InvalidArgument("model input \"", img->name, "\" is ", img->TypeString(),
                           " but the data are 28x28 images: expected [N,784] or [N,1,28,28]");
  }
  if (lab->dtype != DType::kInt64 && lab->dtype != DType::kInt32) {
    return InvalidArgument("model input \"", lab->name, "\" is ", lab->TypeString(), " but the data have integer labels");
  }
  *label_dtype = lab->dtype;
  return Status::OK();
}

StatusOr<EvalResult> Evaluate(TrainingSession& s, Batcher& b, int64_t batch) {
  EvalResult r;
  int64_t n = b.data->count, correct = 0;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  int logits_index = -1;
  for (size_t i = 0; i < s.eval_output_names().size(); ++i) if (i > 0) { logits_index = static_cast<int>(i); break; }
  for (int64_t start = 0; start < n; start += batch) {
    int64_t m = std::min(batch, n - start);
    std::vector<Tensor> out;
    ONT_RETURN_IF_ERROR(s.EvalStep(b.Fill(order, start, m), &out));
    r.loss += static_cast<double>(out[0].data<float>()[0]) * m;
    if (logits_index < 0) continue;
    const Tensor& logits = out[logits_index];
    int64_t classes = logits.NumElements() / m;
    for (int64_t i = 0; i < m; ++i) {
      const float* row = logits.data<float>() + i * classes;
      int64_t arg = std::max_element(row, row + classes) - row;
      correct += arg == b.data->labels[order[start + i]];
    }
  }
  r.loss /= static_cast<double>(n);
  if (logits_index >= 0) r.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  return r;
}

}  // namespace cli
}  // namespace ontrain
