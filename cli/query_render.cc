// Terminal rendering of `ladder query` results.
#include "commands.h"
#include "format.h"

namespace ladder::cli {
namespace {

std::string JsonText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  return v.dump();
}

}  // namespace

std::string RenderQueryTable(const nlohmann::json& result) {
  std::vector<std::string> header;
  const auto by = result.value("by", nlohmann::json::array());
  for (const auto& axis : by) header.push_back(axis.get<std::string>());
  const std::string unit = result.value("unit", "");
  for (const char* column :
       {"n", "sessions", "median", "mean", "sd", "cv%", "95% CI", "min", "max", "flags"}) {
    header.push_back(column);
  }
  std::vector<std::vector<std::string>> rows;
  bool within_session = false;
  for (const auto& row : result.value("rows", nlohmann::json::array())) {
    std::vector<std::string> cells;
    for (const auto& axis : by) cells.push_back(JsonText(row["group"][axis.get<std::string>()]));
    const bool empty = row.value("n", 0) == 0;
    cells.push_back(std::to_string(row.value("n", 0)));
    cells.push_back(std::to_string(row.value("sessions", 0)));
    for (const char* stat : {"median", "mean", "sd"}) {
      cells.push_back(empty ? "-" : FormatNumber(row.value(stat, 0.0)));
    }
    cells.push_back(empty ? "-" : FormatNumber(100.0 * row.value("cv", 0.0)));
    // df come from sessions; "*" marks an interval that covers only within-session noise.
    if (row.contains("ci95")) {
      const auto& ci = row["ci95"];
      cells.push_back("[" + FormatNumber(ci.value("lower", 0.0)) + ", " +
                      FormatNumber(ci.value("upper", 0.0)) + "]" +
                      (ci.value("within_session_only", false) ? " *" : ""));
      within_session |= ci.value("within_session_only", false);
    } else {
      cells.push_back("-");
    }
    for (const char* stat : {"min", "max"}) {
      cells.push_back(empty ? "-" : FormatNumber(row.value(stat, 0.0)));
    }
    std::string flags;
    for (const auto& f : row.value("flags", nlohmann::json::array())) {
      flags += (flags.empty() ? "" : ",") + f.get<std::string>();
    }
    cells.push_back(flags);
    rows.push_back(std::move(cells));
  }
  std::string out = "run " + std::to_string(result.value("run_id", 0)) + "  metric " +
                    result.value("metric", "") + (unit.empty() ? "" : " (" + unit + ")") +
                    "  valid measurements only\n";
  out += RenderTable(header, rows);
  if (within_session) {
    out += "* one session: the interval covers only within-session noise\n";
  }
  for (const auto& note : result.value("notes", nlohmann::json::array())) {
    out += "note: " + note.get<std::string>() + "\n";
  }
  return out;
}

}  // namespace ladder::cli
