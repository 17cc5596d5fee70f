// CSV and SVG writers for training reports.
#include "tools/cli/report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include "graph/model_io.h"

namespace ontrain {
namespace cli {

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status MetricsLog::Open(const std::string& path, bool append) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd_ < 0) return IoError("cannot write metrics file \"", path, "\": ", std::strerror(errno));
  if (append) {
    // Cut a partial last line: everything after the last newline.
    struct stat st;
    if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
      std::ifstream f(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      size_t keep = bytes.rfind('\n');
      keep = keep == std::string::npos ? 0 : keep + 1;
      if (keep < bytes.size() && ::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
        return IoError("cannot repair the partial last line of metrics file \"", path, "\": ", std::strerror(errno));
      }
    }
  }
  return Status::OK();
}

Status MetricsLog::Write(const std::string& fields) {
  if (fd_ < 0) return Status::OK();
  std::string line = "{" + fields + "}\n";
  ssize_t w = ::write(fd_, line.data(), line.size());
  if (w == static_cast<ssize_t>(line.size())) return Status::OK();
  int err = w < 0 ? errno : ENOSPC;
  if (w > 0) (void)::ftruncate(fd_, ::lseek(fd_, 0, SEEK_END) - w);  // no partial line
  ::close(fd_);
  fd_ = -1;
  return IoError("writing metrics file \"", path_, "\" failed: ", std::strerror(err));
}

std::string MetricsLog::Number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

Status WriteMetricsCsv(const std::vector<EpochRecord>& epochs, const std::string& path) {
  std::ostringstream s;
  s << "epoch,train_loss,eval_loss,accuracy\n";
  for (const EpochRecord& e : epochs) {
    s << e.epoch << "," << e.train_loss << ",";
    if (e.eval_loss >= 0) s << e.eval_loss;
    s << ",";
    if (e.accuracy >= 0) s << e.accuracy;
    s << "\n";
  }
  return WriteFileAtomically(path, s.str());
}

Status WriteChartSvg(const std::vector<EpochRecord>& epochs, const std::string& path) {
  const double w = 640, h = 360, left = 60, right = 60, top = 30, bottom = 40;
  double max_loss = 1e-9;
  for (const EpochRecord& e : epochs) max_loss = std::max({max_loss, e.train_loss, e.eval_loss});
  size_t n = epochs.size();
  auto x = [&](size_t i) { return left + (n <= 1 ? 0.5 : static_cast<double>(i) / (n - 1)) * (w - left - right); };
  auto y_loss = [&](double v) { return top + (1 - v / max_loss) * (h - top - bottom); };
  auto y_acc = [&](double a) { return top + (1 - a) * (h - top - bottom); };
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" font-family=\"sans-serif\" "
    << "font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s << "<line x1=\"" << left << "\" y1=\"" << h - bottom << "\" x2=\"" << w - right << "\" y2=\"" << h - bottom
    << "\" stroke=\"black\"/>\n<line x1=\"" << left << "\" y1=\"" << top << "\" x2=\"" << left << "\" y2=\"" << h - bottom
    << "\" stroke=\"black\"/>\n<line x1=\"" << w - right << "\" y1=\"" << top << "\" x2=\"" << w - right << "\" y2=\""
    << h - bottom << "\" stroke=\"black\"/>\n";
  s << "<text x=\"" << left - 5 << "\" y=\"" << top - 8 << "\" text-anchor=\"end\">loss " << max_loss << "</text>\n";
  s << "<text x=\"" << w - right + 5 << "\" y=\"" << top - 8 << "\">accuracy 100%</text>\n";
  s << "<text x=\"" << w / 2 << "\" y=\"" << h - 10 << "\" text-anchor=\"middle\">epoch</text>\n";
  auto series = [&](const char* colour, const char* name, auto value, auto ypos) {
    std::ostringstream pts;
    int count = 0;
    for (size_t i = 0; i < n; ++i) {
      double v = value(epochs[i]);
      if (v < 0) continue;
      pts << x(i) << "," << ypos(v) << " ";
      s << "<circle cx=\"" << x(i) << "\" cy=\"" << ypos(v) << "\" r=\"3\" fill=\"" << colour << "\"/>\n";
      count++;
    }
    if (count > 1) s << "<polyline fill=\"none\" stroke=\"" << colour << "\" points=\"" << pts.str() << "\"/>\n";
    return count;
  };
  int legend = 0;
  auto label = [&](const char* colour, const char* name) {
    s << "<text x=\"" << left + 10 + 150 * legend++ << "\" y=\"" << top + 14 << "\" fill=\"" << colour << "\">" << name
      << "</text>\n";
  };
  if (series("steelblue", "train loss", [](const EpochRecord& e) { return e.train_loss; }, y_loss)) label("steelblue", "train loss");
  if (series("darkorange", "eval loss", [](const EpochRecord& e) { return e.eval_loss; }, y_loss)) label("darkorange", "eval loss");
  if (series("seagreen", "accuracy", [](const EpochRecord& e) { return e.accuracy; }, y_acc)) label("seagreen", "accuracy");
  for (size_t i = 0; i < n; ++i) {
    s << "<text x=\"" << x(i) << "\" y=\"" << h - bottom + 15 << "\" text-anchor=\"middle\">" << epochs[i].epoch << "</text>\n";
  }
  s << "</svg>\n";
  return WriteFileAtomically(path, s.str());
}

}  // namespace cli
}  // namespace ontrain
