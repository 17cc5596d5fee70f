// End-of-training reports: a metrics CSV and an SVG chart of train/eval loss and accuracy by epoch.
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
};

Status WriteMetricsCsv(const std::vector<EpochRecord>& epochs, const std::string& path);
// Losses on the left axis, accuracy (0-100%) on the right, one point per epoch.
Status WriteChartSvg(const std::vector<EpochRecord>& epochs, const std::string& path);

}  // namespace cli
}  // namespace ontrain
