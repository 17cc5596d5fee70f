// Training reports: the JSON-lines metrics log written while training, the history a checkpoint carries so
// that a resumed run reports the whole run, and at the end a metrics CSV and an SVG chart of train/eval loss
// and accuracy by epoch.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace ontrain {
namespace cli {

struct EpochRecord {
  int64_t epoch = 0;
  double train_loss = 0;   // mean over the epoch's steps
  double eval_loss = -1;   // < 0: not evaluated
  double accuracy = -1;    // < 0: unknown
  int64_t step = 0;        // the last step of the epoch (where the chart puts its evaluation)
};

// What a run has reported so far, kept in the checkpoints `ontrain train` saves (a string property,
// kTrainingHistoryProperty), so that a resumed run's metrics.csv has every epoch and the epoch it resumes
// in has the mean loss of all its steps: the finished epochs, and the sum and count of the losses of the
// epoch in progress at `step` (optimizer steps done) with `per_epoch` steps an epoch.
struct TrainingHistory {
  int64_t step = 0;
  int64_t per_epoch = 0;
  int64_t epoch_steps = 0;
  double epoch_loss_sum = 0;
  std::vector<EpochRecord> epochs;
};
constexpr const char* kTrainingHistoryProperty = "ontrain.train.history";
// Lines of text; the doubles are written with 17 significant digits, so they read back exactly.
std::string EncodeTrainingHistory(const TrainingHistory& h);
// False (and *h unchanged) where `text` is not a history EncodeTrainingHistory wrote.
bool DecodeTrainingHistory(const std::string& text, TrainingHistory* h);

// One training step's loss, for the chart.
struct StepLoss {
  int64_t step = 0;
  double loss = 0;
};

// `--metrics FILE`: one JSON object per line, each line written by one write() to a file opened for
// appending, so that a kill leaves whole lines only. Reopening for a resumed run first cuts off a partial
// last line (left by an older writer or a full disk). Non-finite numbers are written as null (JSON has no
// NaN).
class MetricsLog {
 public:
  ~MetricsLog();
  // `append`: keep what the file holds (a resumed run), cutting a partial last line; and when
  // `resume_step` >= 0, also every line from the first {"step":N,...} line with N > resume_step on: those
  // steps came after the checkpoint being resumed, and the resumed run writes them again.
  Status Open(const std::string& path, bool append, int64_t resume_step = -1);
  // After Open with append: the {"step":N,"loss":X,...} lines it kept, in order (a resumed run's chart
  // draws the steps before it from them).
  const std::vector<StepLoss>& kept_steps() const { return kept_steps_; }
  // `fields`: "key":value pairs without braces; a write error is reported once, then the log stops.
  Status Write(const std::string& fields);
  static std::string Number(double v);  // %.9g, or null when not finite
  bool is_open() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
  std::string path_;
  std::vector<StepLoss> kept_steps_;
};

Status WriteMetricsCsv(const std::vector<EpochRecord>& epochs, const std::string& path);
// The training chart: every step's training loss (a thin line) and its moving average (a thick one), each
// epoch's evaluation loss as points at its last step, against steps (a resumed run has its own steps' losses
// and says from which step, and every epoch's points); accuracy (0-100%) on a right axis when
// known. Axes carry ticks at round values and their units; non-finite losses are left out (and counted in
// the caption). Over 2000 steps, the raw line keeps the extremes of every bucket of steps.
Status WriteChartSvg(const std::vector<StepLoss>& steps, const std::vector<EpochRecord>& epochs, const std::string& path);

}  // namespace cli
}  // namespace ontrain
