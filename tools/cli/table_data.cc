// Loading data tables from the supported SPECs, batching and evaluation.
#include "tools/cli/table_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>
#include <sstream>

#include "tools/cli/dataset.h"
#include "tools/cli/npz.h"

namespace ontrain {
namespace cli {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Checks `data` ([rows, ...]) against model input `info` and reshapes it to [rows, per-example dims].
StatusOr<Tensor> FitToInput(Tensor data, const ValueInfo& info, const std::string& source) {
  if (info.dtype != DType::kUndefined && data.dtype() != info.dtype) {
    return InvalidArgument("data \"", source, "\" is ", DTypeName(data.dtype()), " but model input \"", info.name,
                           "\" is ", info.TypeString());
  }
  if (data.rank() == 0) return InvalidArgument("data \"", source, "\" is a scalar; rows go along axis 0");
  if (!info.has_shape || info.dims.empty()) return data;
  Shape per;
  for (size_t d = 1; d < info.dims.size(); ++d) {
    if (!info.dims[d].known()) return data;  // symbolic: take the data's shape as it is
    per.push_back(info.dims[d].value);
  }
  Shape want = {data.dim(0)};
  want.insert(want.end(), per.begin(), per.end());
  if (ShapeNumElements(want) != data.NumElements()) {
    return InvalidArgument("data \"", source, "\" has shape ", ShapeToString(data.shape()), " but model input \"",
                           info.name, "\" is ", info.TypeString());
  }
  return data.Reshaped(want);
}

// Images and labels (IDX or Fashion-MNIST) for a model whose user inputs are (images, labels).
StatusOr<Table> FromImages(const ImageDataset& d, const Model& train, const std::vector<std::string>& inputs) {
  if (inputs.size() != 2) {
    return InvalidArgument("the training model has ", inputs.size(), " user inputs; image data feed 2 (images, labels)");
  }
  Table t;
  t.rows = d.count;
  Tensor images = Tensor::FromVector(d.images, {d.count, d.rows * d.cols});
  const ValueInfo* img = train.graph.FindInput(inputs[0]);
  const ValueInfo* lab = train.graph.FindInput(inputs[1]);
  auto fit = FitToInput(images, *img, "images");
  if (!fit.ok()) {
    return InvalidArgument("model input \"", img->name, "\" is ", img->TypeString(), " but the data are ", d.rows, "x",
                           d.cols, " images: expected [N,", d.rows * d.cols, "] or [N,1,", d.rows, ",", d.cols, "]");
  }
  t.columns.push_back({inputs[0], fit.value()});
  if (lab->dtype == DType::kInt32) {
    std::vector<int32_t> v(d.labels.begin(), d.labels.end());
    t.columns.push_back({inputs[1], Tensor::FromVector(v, {d.count})});
  } else if (lab->dtype == DType::kInt64 || lab->dtype == DType::kUndefined) {
    t.columns.push_back({inputs[1], Tensor::FromVector(d.labels, {d.count})});
  } else {
    return InvalidArgument("model input \"", lab->name, "\" is ", lab->TypeString(), " but the data have integer labels");
  }
  t.label_column = 1;
  return t;
}

StatusOr<Table> FromCsv(const std::string& path, const Model& train, const std::vector<std::string>& inputs) {
  if (inputs.size() != 2) return InvalidArgument("CSV data feed 2 inputs (features, label); the model has ", inputs.size());
  std::ifstream f(path);
  if (!f) return NotFound("cannot open data file \"", path, "\"");
  std::vector<float> features;
  std::vector<int64_t> labels;
  std::string line;
  int64_t width = -1, line_no = 0;
  while (std::getline(f, line)) {
    line_no++;
    if (line.empty()) continue;
    std::vector<double> v;
    std::stringstream ss(line);
    std::string cell;
    bool numeric = true;
    while (std::getline(ss, cell, ',')) {
      char* end = nullptr;
      double x = std::strtod(cell.c_str(), &end);
      if (end == cell.c_str()) numeric = false;
      v.push_back(x);
    }
    if (!numeric) {
      if (line_no == 1) continue;  // a header
      return InvalidArgument("\"", path, "\" line ", line_no, " is not numeric");
    }
    if (v.size() < 2) return InvalidArgument("\"", path, "\" line ", line_no, " needs features and a label");
    if (width >= 0 && static_cast<int64_t>(v.size()) != width + 1) {
      return InvalidArgument("\"", path, "\" line ", line_no, " has ", v.size(), " columns, expected ", width + 1);
    }
    width = static_cast<int64_t>(v.size()) - 1;
    for (int64_t i = 0; i < width; ++i) features.push_back(static_cast<float>(v[i]));
    const double label = v.back();
    if (!(label >= -9.0e15 && label <= 9.0e15) || label != std::floor(label)) {
      return InvalidArgument("\"", path, "\" line ", line_no, ": the label (last column) ", label, " is not an integer");
    }
    labels.push_back(static_cast<int64_t>(label));
  }
  ImageDataset d;  // reuse the (features, labels) path with a 1 x width "image"
  d.count = static_cast<int64_t>(labels.size());
  if (d.count == 0) return InvalidArgument("\"", path, "\" holds no rows");
  d.rows = 1;
  d.cols = width;
  d.images = std::move(features);
  d.labels = std::move(labels);
  return FromImages(d, train, inputs);
}

StatusOr<Table> FromArrays(std::vector<std::pair<std::string, Tensor>> arrays, const std::string& source,
                           const Model& train, const std::vector<std::string>& inputs) {
  Table t;
  for (size_t i = 0; i < inputs.size(); ++i) {
    auto it = std::find_if(arrays.begin(), arrays.end(), [&](const auto& a) { return a.first == inputs[i]; });
    if (it == arrays.end()) {
      std::string have;
      for (const auto& a : arrays) have += (have.empty() ? "" : ", ") + a.first;
      return InvalidArgument("\"", source, "\" has no array named \"", inputs[i], "\" (a model input); it has: ", have);
    }
    ONT_ASSIGN_OR_RETURN(Tensor fit, FitToInput(it->second, *train.graph.FindInput(inputs[i]), source + ":" + it->first));
    if (i > 0 && fit.dim(0) != t.rows) {
      return InvalidArgument("\"", source, "\": array \"", inputs[i], "\" has ", fit.dim(0), " rows, others ", t.rows);
    }
    t.rows = fit.dim(0);
    t.columns.push_back({inputs[i], fit});
  }
  const Tensor& last = t.columns.back().data;
  if (last.rank() == 1 && (last.dtype() == DType::kInt64 || last.dtype() == DType::kInt32) && t.columns.size() > 1) {
    t.label_column = static_cast<int>(t.columns.size()) - 1;
  }
  return t;
}

}  // namespace

StatusOr<Table> LoadTable(const std::string& spec, const std::string& fashion_root, const Model& train,
                          const std::vector<std::string>& user_inputs) {
  if (spec == "fashion-mnist" || spec == "fashion-mnist:test") {
    ONT_ASSIGN_OR_RETURN(ImageDataset d, LoadDataset(spec, fashion_root));
    return FromImages(d, train, user_inputs);
  }
  if (spec.rfind("idx:", 0) == 0) {
    size_t comma = spec.find(',');
    if (comma == std::string::npos) return InvalidArgument("idx data: expected idx:IMAGES,LABELS, got \"", spec, "\"");
    ONT_ASSIGN_OR_RETURN(ImageDataset d, LoadIdxPair(spec.substr(4, comma - 4), spec.substr(comma + 1)));
    return FromImages(d, train, user_inputs);
  }
  if (EndsWith(spec, ".npz")) {
    ONT_ASSIGN_OR_RETURN(auto arrays, LoadNpz(spec));
    return FromArrays(std::move(arrays), spec, train, user_inputs);
  }
  if (EndsWith(spec, ".npy")) {
    if (user_inputs.size() != 1) {
      return InvalidArgument("a .npy file holds one array but the model has ", user_inputs.size(),
                             " user inputs; use a .npz with one array per input");
    }
    ONT_ASSIGN_OR_RETURN(Tensor t, LoadNpy(spec));
    return FromArrays({{user_inputs[0], t}}, spec, train, user_inputs);
  }
  if (EndsWith(spec, ".csv")) return FromCsv(spec, train, user_inputs);
  return InvalidArgument("unknown data spec \"", spec,
                         "\"; expected fashion-mnist, fashion-mnist:test, idx:IMAGES,LABELS, FILE.npz, FILE.npy or FILE.csv");
}

Status Batcher::Init(const Table* table, int64_t batch) {
  table_ = table;
  buffers_.clear();
  for (const Column& c : table->columns) {
    Shape s = c.data.shape();
    s[0] = batch;
    ONT_ASSIGN_OR_RETURN(Tensor b, Tensor::Allocate(c.data.dtype(), s, HostAllocator()));
    buffers_.push_back(b);
  }
  return Status::OK();
}

std::vector<Tensor> Batcher::Fill(const std::vector<int64_t>& order, int64_t begin, int64_t n) {
  std::vector<Tensor> out;
  for (size_t c = 0; c < table_->columns.size(); ++c) {
    const Tensor& src = table_->columns[c].data;
    Tensor& dst = buffers_[c];
    size_t row = src.SizeInBytes() / static_cast<size_t>(std::max<int64_t>(1, src.dim(0)));
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(static_cast<uint8_t*>(dst.raw_data()) + i * row,
                  static_cast<const uint8_t*>(src.raw_data()) + order[begin + i] * row, row);
    }
    Shape s = dst.shape();
    s[0] = n;
    out.push_back(Tensor::View(dst.dtype(), s, dst.raw_data()));
  }
  return out;
}

StatusOr<EvalResult> Evaluate(TrainingSession& s, Batcher& b, int64_t batch) {
  EvalResult r;
  const Table& t = *b.table();
  std::vector<int64_t> order(t.rows);
  std::iota(order.begin(), order.end(), 0);
  bool logits = s.eval_output_names().size() > 1 && t.label_column >= 0;
  int64_t correct = 0;
  for (int64_t start = 0; start < t.rows; start += batch) {
    int64_t m = std::min(batch, t.rows - start);
    std::vector<Tensor> in = b.Fill(order, start, m), out;
    ONT_RETURN_IF_ERROR(s.EvalStep(in, &out));
    r.loss += static_cast<double>(out[0].data<float>()[0]) * m;
    if (!logits || out[1].dtype() != DType::kFloat32 || out[1].NumElements() % m != 0) continue;
    int64_t classes = out[1].NumElements() / m;
    const Tensor& labels = in[t.label_column];
    for (int64_t i = 0; i < m; ++i) {
      const float* row = out[1].data<float>() + i * classes;
      int64_t arg = std::max_element(row, row + classes) - row;
      int64_t label = labels.dtype() == DType::kInt64 ? labels.data<int64_t>()[i] : labels.data<int32_t>()[i];
      correct += arg == label;
    }
  }
  r.loss /= static_cast<double>(std::max<int64_t>(1, t.rows));
  if (logits) r.accuracy = static_cast<double>(correct) / static_cast<double>(t.rows);
  return r;
}

}  // namespace cli
}  // namespace ontrain
