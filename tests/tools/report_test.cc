// The report writers against the tools that read them: the JSON-lines metrics log through Python's json
// module (NaN written as null, a partial last line cut when a resumed run reopens it), the CSV through
// Python's csv module, and the training chart through an XML parser (structure, ticks, labels inside the
// canvas) and a real SVG renderer (rsvg-convert, from librsvg2-bin) to PNG. Each external reader that is
// missing is a skip that says so; ontrain's own checks run regardless.
#include "tools/cli/report.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ontrain {
namespace {

using ::testing::HasSubstr;

bool HavePython() { return std::system("/usr/bin/python3 -c 'import json, csv, xml.etree.ElementTree' >/dev/null 2>&1") == 0; }

int RunPython(const std::string& script, const std::string& arg) {
  std::string path = ::testing::TempDir() + "/report_check.py";
  std::ofstream(path) << script;
  return std::system(("/usr/bin/python3 " + path + " " + arg).c_str());
}

TEST(ReportTest, MetricsLinesAreJsonAndSurviveAPartialLine) {
  const std::string path = ::testing::TempDir() + "/metrics.jsonl";
  {
    cli::MetricsLog log;
    ASSERT_TRUE(log.Open(path, false).ok());
    ASSERT_TRUE(log.Write("\"step\":1,\"loss\":" + cli::MetricsLog::Number(0.5)).ok());
    ASSERT_TRUE(log.Write("\"step\":2,\"loss\":" + cli::MetricsLog::Number(std::nan(""))).ok());
    ASSERT_TRUE(log.Write("\"step\":3,\"loss\":" + cli::MetricsLog::Number(-std::numeric_limits<double>::infinity())).ok());
  }
  std::ofstream(path, std::ios::app) << "{\"step\":4,\"lo";  // what a full disk or an old writer left
  {
    cli::MetricsLog log;
    ASSERT_TRUE(log.Open(path, true).ok());
    ASSERT_TRUE(log.Write("\"step\":4,\"loss\":" + cli::MetricsLog::Number(0.25)).ok());
  }
  std::string text = ReadFileToString(path).value();
  EXPECT_EQ(text, "{\"step\":1,\"loss\":0.5}\n{\"step\":2,\"loss\":null}\n{\"step\":3,\"loss\":null}\n{\"step\":4,\"loss\":0.25}\n");
  if (!HavePython()) GTEST_SKIP() << "/usr/bin/python3 is missing: Python's json module did not read the log";
  EXPECT_EQ(0, RunPython("import json, sys\n"
                         "rows = [json.loads(l) for l in open(sys.argv[1])]\n"
                         "assert [r['step'] for r in rows] == [1, 2, 3, 4], rows\n"
                         "assert rows[1]['loss'] is None and rows[3]['loss'] == 0.25, rows\n",
                         path));
}

// A run resumed from its step-2 checkpoint: the lines the interrupted run wrote after step 2 (steps 3 and 4,
// the eval line between them, a partial line) go; lines up to step 2, and what follows them before step 3,
// stay.
TEST(ReportTest, ResumedLogIsCutBackToTheCheckpointsStep) {
  const std::string path = ::testing::TempDir() + "/resumed.jsonl";
  std::ofstream(path) << "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"epoch\":1,\"eval_loss\":2}\n"
                         "{\"step\":3,\"loss\":3}\n{\"epoch\":2,\"eval_loss\":3}\n{\"step\":4,\"loss\":4}\n{\"step\":5,";
  {
    cli::MetricsLog log;
    ASSERT_TRUE(log.Open(path, true, 2).ok());
    ASSERT_TRUE(log.Write("\"step\":3,\"loss\":0.5").ok());
  }
  EXPECT_EQ(ReadFileToString(path).value(),
            "{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":2}\n{\"epoch\":1,\"eval_loss\":2}\n{\"step\":3,\"loss\":0.5}\n");
  // Resumed from step 0 (a checkpoint saved before any step): nothing of the old steps stays.
  {
    cli::MetricsLog log;
    ASSERT_TRUE(log.Open(path, true, 0).ok());
  }
  EXPECT_EQ(ReadFileToString(path).value(), "");
}

TEST(ReportTest, CsvReadsWithPythonsCsvModule) {
  const std::string path = ::testing::TempDir() + "/metrics.csv";
  ASSERT_TRUE(cli::WriteMetricsCsv({{1, 0.75, 0.5, 0.8125, 20}, {2, 0.5, -1, -1, 40}}, path).ok());
  if (!HavePython()) GTEST_SKIP() << "/usr/bin/python3 is missing";
  EXPECT_EQ(0, RunPython("import csv, sys\n"
                         "rows = list(csv.DictReader(open(sys.argv[1])))\n"
                         "assert len(rows) == 2 and float(rows[0]['accuracy']) == 0.8125, rows\n"
                         "assert rows[1]['eval_loss'] == '' and float(rows[1]['train_loss']) == 0.5, rows\n",
                         path));
}

// The chart of a one-epoch run of 3 steps (once drawn as three dots), of 5000 steps with a NaN, and of a run
// resumed at step 24 (its own steps' losses, every epoch's evaluation inside the plot, and a caption).
TEST(ReportTest, ChartHasPerStepLossTicksLabelsAndRenders) {
  const std::string dir = ::testing::TempDir();
  ASSERT_TRUE(cli::WriteChartSvg({{1, 2.3}, {2, 1.9}, {3, 1.7}}, {{1, 1.96, 1.8, 0.42, 3}}, dir + "/short.svg").ok());
  std::vector<cli::StepLoss> many;
  for (int64_t s = 1; s <= 5000; ++s) many.push_back({s, 2.0 * std::exp(-s / 1500.0) + 0.1 * std::sin(s * 0.7)});
  many[2500].loss = std::nan("");
  std::vector<cli::EpochRecord> epochs;
  for (int64_t e = 1; e <= 5; ++e) epochs.push_back({e, 1.0, 1.5 / e, 0.5 + 0.08 * e, e * 1000});
  ASSERT_TRUE(cli::WriteChartSvg(many, epochs, dir + "/long.svg").ok());
  std::string long_svg = ReadFileToString(dir + "/long.svg").value();
  EXPECT_THAT(long_svg, HasSubstr("1 non-finite losses not drawn"));
  EXPECT_THAT(long_svg, HasSubstr(">training step<"));
  std::vector<cli::StepLoss> resumed;
  for (int64_t s = 24; s <= 50; ++s) resumed.push_back({s, 1.0 / s});
  ASSERT_TRUE(cli::WriteChartSvg(resumed, {{1, 0.9, 0.8, -1, 20}, {2, 0.05, 0.04, -1, 40}, {3, 0.03, 0.02, -1, 50}},
                                 dir + "/resumed.svg")
                  .ok());
  EXPECT_THAT(ReadFileToString(dir + "/resumed.svg").value(), HasSubstr("training losses from step 24 (resumed there)"));
  if (!HavePython()) GTEST_SKIP() << "/usr/bin/python3 is missing: the charts were not parsed";
  // Structure: the raw line with a point per step and a dot per step (short), or bounded, under a moving
  // average (long); round tick
  // labels on both axes, every evaluation as a circle, and no text starting or ending off the canvas
  // (text width estimated at 0.6 em per character).
  const char* check =
      "import sys, xml.etree.ElementTree as ET\n"
      "ns = '{http://www.w3.org/2000/svg}'\n"
      "def check(path, steps, evals):\n"
      "  root = ET.parse(path).getroot()\n"
      "  W, H = float(root.get('width')), float(root.get('height'))\n"
      "  lines = root.findall(ns + 'polyline')\n"
      "  assert len(lines) == (2 if steps >= 100 else 1), len(lines)\n"
      "  raw = lines[0].get('points').split()\n"
      "  assert (len(raw) == steps) if steps <= 2000 else (len(raw) <= 2100), len(raw)\n"
      "  dots = steps if steps < 100 else 0\n"
      "  assert len(root.findall(ns + 'circle')) == evals + 1 + dots, 'eval points, legend, a dot per step when few'\n"
      "  texts = [(t.text or '', float(t.get('x', 0)), t.get('text-anchor', 'start')) for t in root.iter(ns + 'text') if t.get('x')]\n"
      "  numbers = [s for s, x, a in texts if s.replace('.', '', 1).replace('%', '').isdigit()]\n"
      "  assert len(numbers) >= 6, numbers\n"
      "  for s, x, a in texts:\n"
      "    wid = 0.6 * 13 * len(s)\n"
      "    lo = x - (wid if a == 'end' else wid / 2 if a == 'middle' else 0)\n"
      "    assert lo >= 0 and lo + wid <= W, ('label off the canvas', s, x, a)\n"
      "check(sys.argv[1] + '/short.svg', 3, 1)\n"
      "check(sys.argv[1] + '/long.svg', 4999, 5)\n"
      "check(sys.argv[1] + '/resumed.svg', 27, 3)\n"
      "root = ET.parse(sys.argv[1] + '/resumed.svg').getroot()\n"
      "xs = sorted(float(c.get('cx')) for c in root.iter(ns + 'circle') if c.get('r') != '4')\n"
      "assert min(xs) >= 78 and max(xs) <= float(root.get('width')) - 78, ('a point off the plot', xs[:3], xs[-3:])\n";
  EXPECT_EQ(0, RunPython(check, dir));
  if (std::system("command -v rsvg-convert >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "rsvg-convert is missing (librsvg2-bin): the charts were parsed but not rendered";
  }
  for (const char* name : {"short", "long"}) {
    SCOPED_TRACE(name);
    std::string png = dir + "/" + name + ".png";
    ASSERT_EQ(0, std::system(("rsvg-convert -o " + png + " " + dir + "/" + name + ".svg").c_str()));
    std::string bytes = ReadFileToString(png).value();
    ASSERT_GT(bytes.size(), 24u);
    EXPECT_EQ(bytes.substr(1, 3), "PNG");
    auto be32 = [&](size_t at) {
      return (static_cast<uint8_t>(bytes[at]) << 24) | (static_cast<uint8_t>(bytes[at + 1]) << 16) |
             (static_cast<uint8_t>(bytes[at + 2]) << 8) | static_cast<uint8_t>(bytes[at + 3]);
    };
    EXPECT_EQ(be32(16), 800u);  // IHDR width, height
    EXPECT_EQ(be32(20), 450u);
  }
}

}  // namespace
}  // namespace ontrain
