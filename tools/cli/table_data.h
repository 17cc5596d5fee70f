// Training and evaluation data for the CLI as a table: one column per user input of the training model
// (rows along axis 0), loaded from a data SPEC:
//   fashion-mnist | fashion-mnist:test      Debian's dataset-fashion-mnist (images in [0, 1], labels)
//   idx:IMAGES,LABELS                        an IDX image file and its label file (gzip or plain)
//   FILE.npz                                 arrays named like the model's user inputs
//   FILE.npy                                 one array, for a model with one user input
//   FILE.csv                                 rows of features then a label
// Image and feature columns are reshaped to the model's per-example shape when the element counts agree.
#pragma once

#include <string>
#include <vector>

#include "engine/training_session.h"
#include "graph/graph.h"

namespace ontrain {
namespace cli {

struct Column {
  std::string input;  // the model input it feeds
  Tensor data;        // [rows, per-example shape...]
};

struct Table {
  int64_t rows = 0;
  std::vector<Column> columns;
  // The column holding integer class labels (the last input when it is an integer [rows] column), or -1.
  int label_column = -1;
};

StatusOr<Table> LoadTable(const std::string& spec, const std::string& fashion_root, const Model& train,
                          const std::vector<std::string>& user_inputs);

// Reusable batch buffers over a table.
class Batcher {
 public:
  Status Init(const Table* table, int64_t batch);
  // The rows order[begin, begin + n) as one tensor per column (views of the buffers).
  std::vector<Tensor> Fill(const std::vector<int64_t>& order, int64_t begin, int64_t n);
  const Table* table() const { return table_; }

 private:
  const Table* table_ = nullptr;
  std::vector<Tensor> buffers_;
};

struct EvalResult {
  double loss = 0, accuracy = -1;  // accuracy < 0: no labels or no logits output
};
StatusOr<EvalResult> Evaluate(TrainingSession& s, Batcher& b, int64_t batch);

}  // namespace cli
}  // namespace ontrain
