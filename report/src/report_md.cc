#include <string>

#include "ladder/report/report.h"

namespace ladder::report {
namespace {

std::string MdCell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out.empty() ? " " : out;
}

}  // namespace

std::string RenderMarkdown(const Report& report) {
  std::string out;
  for (const auto& s : BuildSections(report)) {
    out += std::string(static_cast<size_t>(s.level), '#') + " " + s.title + "\n\n";
    for (const auto& p : s.paragraphs) out += p + "\n\n";
    if (s.chart == ChartKind::kHistory) {
      out +=
          "(The chart of this series is in the HTML report: `ladder report RUN --history -o "
          "report.html`.)\n\n";
    } else if (s.chart == ChartKind::kLadder) {
      out += "(The ladder chart is in the HTML report: `ladder report RUN -o report.html`.)\n\n";
    } else if (s.chart != ChartKind::kNone) {
      out +=
          "(The chart of this table is in the HTML report: `ladder report RUN -o "
          "report.html`.)\n\n";
    }
    if (s.table.header.empty()) continue;
    out += "|";
    for (const auto& h : s.table.header) out += " " + MdCell(h) + " |";
    out += "\n|";
    for (size_t i = 0; i < s.table.header.size(); ++i) out += " --- |";
    out += "\n";
    for (const auto& row : s.table.rows) {
      out += "|";
      for (const auto& cell : row) out += " " + MdCell(cell) + " |";
      out += "\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace ladder::report
