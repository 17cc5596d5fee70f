// CSV and SVG writers for training reports.
#include "tools/cli/report.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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

Status MetricsLog::Open(const std::string& path, bool append, int64_t resume_step) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (append ? O_APPEND : O_TRUNC), 0644);
  if (fd_ < 0) return IoError("cannot write metrics file \"", path, "\": ", std::strerror(errno));
  if (append) {
    struct stat st;
    if (::fstat(fd_, &st) == 0 && st.st_size > 0) {
      std::ifstream f(path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      // Whole lines only (a partial last line is cut), up to the first step past the resumed checkpoint.
      size_t keep = 0;
      static const char kStep[] = "{\"step\":";
      while (keep < bytes.size()) {
        size_t end = bytes.find('\n', keep);
        if (end == std::string::npos) break;
        if (bytes.compare(keep, sizeof(kStep) - 1, kStep) == 0) {
          char* stop = nullptr;
          long long n = std::strtoll(bytes.c_str() + keep + sizeof(kStep) - 1, &stop, 10);
          const bool numbered = stop != bytes.c_str() + keep + sizeof(kStep) - 1;
          if (resume_step >= 0 && numbered && n > resume_step) break;
          static const char kLoss[] = ",\"loss\":";
          if (numbered && std::strncmp(stop, kLoss, sizeof(kLoss) - 1) == 0) {
            char* after = nullptr;
            double loss = std::strtod(stop + sizeof(kLoss) - 1, &after);
            if (after != stop + sizeof(kLoss) - 1) kept_steps_.push_back({n, loss});  // "null": left out
          }
        }
        keep = end + 1;
      }
      if (keep < bytes.size() && ::ftruncate(fd_, static_cast<off_t>(keep)) != 0) {
        return IoError("cannot cut metrics file \"", path, "\" back to step ", resume_step, ": ", std::strerror(errno));
      }
    }
  }
  return Status::OK();
}

std::string EncodeTrainingHistory(const TrainingHistory& h) {
  char line[160];
  std::snprintf(line, sizeof line, "progress %lld %lld %lld %.17g\n", static_cast<long long>(h.step),
                static_cast<long long>(h.per_epoch), static_cast<long long>(h.epoch_steps), h.epoch_loss_sum);
  std::string text = line;
  for (const EpochRecord& r : h.epochs) {
    std::snprintf(line, sizeof line, "epoch %lld %lld %.17g %.17g %.17g\n", static_cast<long long>(r.epoch),
                  static_cast<long long>(r.step), r.train_loss, r.eval_loss, r.accuracy);
    text += line;
  }
  return text;
}

bool DecodeTrainingHistory(const std::string& text, TrainingHistory* h) {
  std::istringstream in(text);
  std::string kind;
  TrainingHistory out;
  long long a = 0, b = 0, c = 0;
  if (!(in >> kind >> a >> b >> c >> out.epoch_loss_sum) || kind != "progress" || a < 0 || b < 1 || c < 0 || c > b) {
    return false;
  }
  out.step = a, out.per_epoch = b, out.epoch_steps = c;
  while (in >> kind) {
    EpochRecord r;
    long long epoch = 0, step = 0;
    if (kind != "epoch" || !(in >> epoch >> step >> r.train_loss >> r.eval_loss >> r.accuracy) || step < 1 ||
        step > out.step) {
      return false;
    }
    r.epoch = epoch, r.step = step;
    out.epochs.push_back(r);
  }
  *h = std::move(out);
  return true;
}

Status MetricsLog::Write(const std::string& fields) {
  if (fd_ < 0) return Status::OK();
  std::string line = "{" + fields + "}\n";
  ssize_t w = ::write(fd_, line.data(), line.size());
  if (w == static_cast<ssize_t>(line.size())) return Status::OK();
  int err = w < 0 ? errno : ENOSPC;
  // No partial line: cut back what was written.
  const bool cut = w <= 0 || ::ftruncate(fd_, ::lseek(fd_, 0, SEEK_END) - w) == 0;
  ::close(fd_);
  fd_ = -1;
  return IoError("writing metrics file \"", path_, "\" failed: ", std::strerror(err),
                 cut ? "" : " (and its last line is incomplete: cutting it off failed too)");
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

namespace {

// Round tick values within [lo, hi]: steps of 1, 2 or 5 times a power of ten (at least `min_step`), about
// `want` of them; with `cover`, the last tick is the first at or above hi (an axis that holds the data).
std::vector<double> Ticks(double lo, double hi, int want, double min_step = 0, bool cover = false) {
  if (!(hi > lo)) hi = lo + 1;
  double raw = std::max((hi - lo) / want, min_step), mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  if (cover) hi = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> out;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push_back(std::abs(v) < step * 1e-9 ? 0 : v);
  return out;
}

std::string Fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

std::string Escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

}  // namespace

Status WriteChartSvg(const std::vector<StepLoss>& steps, const std::vector<EpochRecord>& epochs, const std::string& path) {
  const double w = 800, h = 450, left = 78, right = 78, top = 58, bottom = 62;
  const double pw = w - left - right, ph = h - top - bottom;
  // 1. Ranges: steps on x; losses (finite ones) on the left from 0; accuracy 0-100% on the right.
  int64_t first = 0, last = 1;
  double max_loss = 0;
  int skipped = 0;
  bool any_step = false;
  for (const StepLoss& s : steps) {
    if (!std::isfinite(s.loss)) {
      skipped++;
      continue;
    }
    if (!any_step) first = last = s.step;
    any_step = true;
    first = std::min(first, s.step);
    last = std::max(last, s.step);
    max_loss = std::max(max_loss, s.loss);
  }
  bool any_acc = false;
  for (const EpochRecord& e : epochs) {
    if (e.eval_loss >= 0 && std::isfinite(e.eval_loss)) max_loss = std::max(max_loss, e.eval_loss);
    if (e.accuracy >= 0) any_acc = true;
    first = std::min(first, e.step), last = std::max(last, e.step);  // a resumed run's earlier epochs too
  }
  if (last <= first) last = first + 1;
  std::vector<double> ly = Ticks(0, max_loss > 0 ? max_loss : 1, 5, 0, true);
  const double ymax = ly.back() > 0 ? ly.back() : 1;
  auto X = [&](double step) { return left + (step - first) / static_cast<double>(last - first) * pw; };
  auto Y = [&](double loss) { return top + (1 - loss / ymax) * ph; };
  auto YA = [&](double acc) { return top + (1 - acc) * ph; };
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(2);
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w << " " << h
    << "\" font-family=\"DejaVu Sans, Arial, sans-serif\" font-size=\"13\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  // 2. Grid, axes, ticks and their labels.
  for (double v : ly) {
    s << "<line x1=\"" << left << "\" y1=\"" << Y(v) << "\" x2=\"" << w - right << "\" y2=\"" << Y(v)
      << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << left - 8 << "\" y=\"" << Y(v) + 4 << "\" text-anchor=\"end\">" << Fmt(v)
      << "</text>\n";
  }
  for (double v : Ticks(static_cast<double>(first), static_cast<double>(last), 8, 1)) {  // whole steps
    if (v < first || v > last) continue;
    s << "<line x1=\"" << X(v) << "\" y1=\"" << h - bottom << "\" x2=\"" << X(v) << "\" y2=\"" << h - bottom + 5
      << "\" stroke=\"black\"/>\n<text x=\"" << X(v) << "\" y=\"" << h - bottom + 20 << "\" text-anchor=\"middle\">"
      << Fmt(v) << "</text>\n";
  }
  s << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"black\"/>\n";
  s << "<text x=\"" << left + pw / 2 << "\" y=\"" << h - 16 << "\" text-anchor=\"middle\">training step</text>\n";
  s << "<text transform=\"translate(20," << top + ph / 2 << ") rotate(-90)\" text-anchor=\"middle\">loss</text>\n";
  if (any_acc) {
    for (double a = 0; a <= 1.0001; a += 0.2) {
      s << "<text x=\"" << w - right + 8 << "\" y=\"" << YA(a) + 4 << "\">" << Fmt(std::round(a * 100)) << "%</text>\n";
    }
    s << "<text transform=\"translate(" << w - 18 << "," << top + ph / 2
      << ") rotate(90)\" text-anchor=\"middle\">evaluation accuracy</text>\n";
  }
  // 3. Series: raw loss (bucketed extremes beyond 2000 steps), moving average, evaluation points.
  std::vector<StepLoss> finite;
  for (const StepLoss& p : steps) if (std::isfinite(p.loss)) finite.push_back(p);
  if (!finite.empty()) {
    std::ostringstream raw;
    size_t bucket = finite.size() > 2000 ? (finite.size() + 999) / 1000 : 1;  // at most ~2000 points
    for (size_t i = 0; i < finite.size(); i += bucket) {
      size_t end = std::min(finite.size(), i + bucket);
      auto [lo, hi] = std::minmax_element(finite.begin() + i, finite.begin() + end,
                                          [](const StepLoss& a, const StepLoss& b) { return a.loss < b.loss; });
      const StepLoss* pts[2] = {lo->step <= hi->step ? &*lo : &*hi, lo->step <= hi->step ? &*hi : &*lo};
      for (int k = 0; k < (bucket > 1 ? 2 : 1); ++k) raw << X(pts[k]->step) << "," << Y(pts[k]->loss) << " ";
    }
    // A centred moving average over ~2% of the steps (at most 200); under 100 steps there is none, and the
    // raw line is drawn darker, with a dot per step.
    size_t win = std::min<size_t>(200, finite.size() / 50);
    s << "<polyline fill=\"none\" stroke=\"" << (win > 1 ? "#9ecae1" : "#08519c") << "\" stroke-width=\""
      << (win > 1 ? 1 : 2) << "\" points=\"" << raw.str() << "\"/>\n";
    if (win <= 1) {
      for (const StepLoss& p : finite) {
        s << "<circle cx=\"" << X(p.step) << "\" cy=\"" << Y(p.loss) << "\" r=\"2.5\" fill=\"#08519c\"/>\n";
      }
    }
    std::ostringstream avg;
    double sum = 0;
    size_t stride = std::max<size_t>(1, finite.size() / 2000);
    for (size_t i = 0, lo = 0, hi = 0; i < finite.size(); ++i) {
      size_t want_lo = i >= win / 2 ? i - win / 2 : 0, want_hi = std::min(finite.size(), i + win / 2 + 1);
      while (hi < want_hi) sum += finite[hi++].loss;
      while (lo < want_lo) sum -= finite[lo++].loss;
      if (i % stride == 0 || i + 1 == finite.size()) avg << X(finite[i].step) << "," << Y(sum / (hi - lo)) << " ";
    }
    if (win > 1) s << "<polyline fill=\"none\" stroke=\"#08519c\" stroke-width=\"2.5\" points=\"" << avg.str() << "\"/>\n";
  }
  for (const EpochRecord& e : epochs) {
    if (e.eval_loss >= 0 && std::isfinite(e.eval_loss)) {
      s << "<circle cx=\"" << X(e.step) << "\" cy=\"" << Y(e.eval_loss) << "\" r=\"4.5\" fill=\"#e6550d\"><title>epoch " << e.epoch
        << ": eval loss " << Fmt(e.eval_loss) << "</title></circle>\n";
    }
    if (e.accuracy >= 0) {
      s << "<rect x=\"" << X(e.step) - 4 << "\" y=\"" << YA(e.accuracy) - 4 << "\" width=\"8\" height=\"8\" fill=\"#31a354\"><title>epoch "
        << e.epoch << ": accuracy " << Fmt(100 * e.accuracy) << "%</title></rect>\n";
    }
  }
  // 4. Legend above the plot, and what was left out.
  double lx = left;
  auto legend = [&](const std::string& swatch, const std::string& text) {
    s << swatch << "<text x=\"" << lx + 22 << "\" y=\"" << top - 22 << "\">" << Escape(text) << "</text>\n";
    lx += 22 + 7.5 * text.size() + 24;
  };
  auto line_swatch = [&](const char* colour, double width) {
    std::ostringstream o;
    o.setf(std::ios::fixed);
    o.precision(2);
    o << "<line x1=\"" << lx << "\" y1=\"" << top - 26 << "\" x2=\"" << lx + 16 << "\" y2=\"" << top - 26 << "\" stroke=\"" << colour
      << "\" stroke-width=\"" << width << "\"/>";
    return o.str();
  };
  const bool averaged = finite.size() >= 100;
  if (!finite.empty()) legend(line_swatch(averaged ? "#9ecae1" : "#08519c", averaged ? 1 : 2), "training loss per step");
  if (averaged) legend(line_swatch("#08519c", 2.5), "moving average");
  bool any_eval = std::any_of(epochs.begin(), epochs.end(), [](const EpochRecord& e) { return e.eval_loss >= 0; });
  if (any_eval) {
    std::ostringstream c;
    c.setf(std::ios::fixed);
    c.precision(2);
    c << "<circle cx=\"" << lx + 8 << "\" cy=\"" << top - 26 << "\" r=\"4.5\" fill=\"#e6550d\"/>";
    legend(c.str(), "evaluation loss");
  }
  if (any_acc) {
    std::ostringstream c;
    c.setf(std::ios::fixed);
    c.precision(2);
    c << "<rect x=\"" << lx + 4 << "\" y=\"" << top - 30 << "\" width=\"8\" height=\"8\" fill=\"#31a354\"/>";
    legend(c.str(), "accuracy");
  }
  if (skipped > 0) {
    s << "<text x=\"" << w - right << "\" y=\"" << h - 16 << "\" text-anchor=\"end\" fill=\"#b00\">" << skipped
      << " non-finite losses not drawn</text>\n";
  }
  if (!steps.empty() && steps.front().step > 1) {  // a resumed run: its own steps' losses, every epoch's report
    s << "<text x=\"" << left << "\" y=\"" << h - 16 << "\">training losses from step " << steps.front().step
      << " (resumed there)</text>\n";
  }
  s << "</svg>\n";
  return WriteFileAtomically(path, s.str());
}

}  // namespace cli
}  // namespace ontrain
