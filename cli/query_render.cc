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
       {"n", "sessions", "median", "mean", "sd", "cv%", "95% CI", "df", "min", "max", "flags"}) {
    header.push_back(column);
  }
  std::vector<std::vector<std::string>> rows;
  bool within_session = false;
  bool too_few_sessions = false;
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
    // No printed bound of a time or a rate is <= 0: an interval whose lower bound is not
    // positive for a positive metric is not shown (ladder::stats gives positive data a log-t
    // interval, so this only guards against a coordinator of an older version).
    const bool positive = !empty && row.value("min", 0.0) > 0;
    const auto& ci = row.contains("ci95") ? row["ci95"] : nlohmann::json();
    if (ci.is_object() && !(positive && !(ci.value("lower", 0.0) > 0))) {
      cells.push_back("[" + FormatNumber(ci.value("lower", 0.0)) + ", " +
                      FormatNumber(ci.value("upper", 0.0)) + "]" +
                      (ci.value("within_session_only", false) ? " *" : ""));
      cells.push_back(ci["df"].is_number() ? FormatShortest(ci["df"].get<double>()) : "-");
      within_session |= ci.value("within_session_only", false);
    } else if (!empty && row.value("sessions", 0) >= 2 && row.value("sessions", 0) < 3) {
      cells.push_back("needs 3 sessions");
      cells.push_back("-");
      too_few_sessions = true;
    } else {
      cells.push_back("-");
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
  out +=
      "95% CI: of the geometric mean of session means when every value is > 0 (log-t, "
      "df = sessions - 1), else of their mean\n";
  if (within_session) {
    out += "* one session: the interval covers only within-session noise\n";
  }
  if (too_few_sessions) {
    out +=
        "no interval below 3 sessions: with 2, t(1) = 12.7 makes it say only that more "
        "sessions are needed\n";
  }
  for (const auto& note : result.value("notes", nlohmann::json::array())) {
    out += "note: " + note.get<std::string>() + "\n";
  }
  return out;
}

namespace {

// A CSV field: quoted when it holds a comma, quote or line break.
std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A JSON value as a CSV field: numbers with round-trip precision, null as empty.
std::string CsvValue(const nlohmann::json& v) {
  if (v.is_null()) return "";
  if (v.is_number_float()) return FormatRoundTrip(v.get<double>());
  if (v.is_number() || v.is_boolean()) return v.dump();
  if (v.is_string()) return CsvField(v.get<std::string>());
  return CsvField(v.dump());
}

}  // namespace

std::string RenderQueryCsv(const nlohmann::json& result) {
  std::string out;
  const auto by = result.value("by", nlohmann::json::array());
  for (const auto& axis : by) out += CsvField(axis.get<std::string>()) + ",";
  out +=
      "n,sessions,median,mean,sd,cv,min,max,ci95_lower,ci95_upper,ci95_df,"
      "ci95_within_session_only,flags\n";
  for (const auto& row : result.value("rows", nlohmann::json::array())) {
    for (const auto& axis : by) {
      out += CsvValue(row["group"].value(axis.get<std::string>(), nlohmann::json())) + ",";
    }
    for (const char* key : {"n", "sessions", "median", "mean", "sd", "cv", "min", "max"}) {
      out += CsvValue(row.value(key, nlohmann::json())) + ",";
    }
    const auto ci = row.value("ci95", nlohmann::json::object());
    for (const char* key : {"lower", "upper", "df", "within_session_only"}) {
      out += CsvValue(ci.value(key, nlohmann::json())) + ",";
    }
    std::string flags;
    for (const auto& f : row.value("flags", nlohmann::json::array())) {
      flags += (flags.empty() ? "" : ";") + f.get<std::string>();
    }
    out += CsvField(flags) + "\n";
  }
  return out;
}

std::string RenderExportCsv(const nlohmann::json& exported) {
  static const char* const kColumns[] = {
      "uuid",  "cell_id", "cell",  "attempt_id", "session_id",     "hostname", "process",
      "round", "metric",  "value", "unit",       "measured_at_ms", "valid",    "attempt_state"};
  std::string out;
  for (const char* c : kColumns) out += std::string(out.empty() ? "" : ",") + c;
  out += "\n";
  for (const auto& m : exported.value("measurements", nlohmann::json::array())) {
    std::string line;
    for (const char* c : kColumns) {
      nlohmann::json v = m.value(c, nlohmann::json());
      if (v.is_boolean()) v = v.get<bool>() ? 1 : 0;
      line += (line.empty() ? "" : ",") + CsvValue(v);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace ladder::cli
