#include "ladder/db/query.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ladder/common/utf8.h"
#include "ladder/stats/summary.h"
#include "ladder/status_macros.h"

namespace ladder::db {
namespace {

nlohmann::json ParseOr(const std::string& text, nlohmann::json fallback) {
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  return parsed.is_discarded() ? fallback : parsed;
}

absl::Status RunExists(db::Database& db, int64_t run_id) {
  ASSIGN_OR_RETURN(db::Statement stmt, db.Prepare("SELECT 1 FROM runs WHERE id = ?1"));
  stmt.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, " not found in ", db.path()));
  }
  return absl::OkStatus();
}

std::string CsvField(const std::string& value) {
  if (value.find_first_of(",\"\n") == std::string::npos) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string JsonScalarText(const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

}  // namespace

absl::StatusOr<RunSummary> GetRunSummary(db::Database& db, int64_t run_id) {
  RunSummary s;
  s.run_id = run_id;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT m.name, m.sha256, r.state, r.runner, r.metric, r.created_at, "
                   "COALESCE(r.started_at, 0), COALESCE(r.finished_at, 0) "
                   "FROM runs r JOIN matrices m ON m.id = r.matrix_id WHERE r.id = ?1"));
    stmt.Bind(1, run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return absl::NotFoundError(absl::StrCat("run ", run_id, " not found"));
    s.matrix_name = stmt.Text(0);
    s.matrix_sha256 = stmt.Text(1);
    ASSIGN_OR_RETURN(s.state, ParseRunState(stmt.Text(2)));
    s.runner = stmt.Text(3);
    s.metric = stmt.Text(4);
    s.created_at_ms = stmt.Int(5);
    s.started_at_ms = stmt.Int(6);
    s.finished_at_ms = stmt.Int(7);
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT state, COUNT(*) FROM units WHERE run_id = ?1 GROUP BY state"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(const UnitState state, ParseUnitState(stmt.Text(0)));
      const int64_t count = stmt.Int(1);
      s.units_total += count;
      switch (state) {
        case UnitState::kDone:
          s.units_done = count;
          break;
        case UnitState::kLeased:
          s.units_leased = count;
          break;
        case UnitState::kQueued:
          s.units_queued = count;
          break;
        case UnitState::kFailed:
          s.units_failed = count;
          break;
        case UnitState::kCancelled:
          s.units_cancelled = count;
          break;
      }
    }
  }
  {
    // A cell is done when every unit holding it is done, failed when any of them failed.
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT COUNT(*), SUM(all_done), SUM(any_failed) FROM ("
            " SELECT c.id, MIN(u.state = 'done') AS all_done, MAX(u.state = 'failed') AS any_failed"
            " FROM cells c JOIN unit_cells uc ON uc.cell_id = c.id JOIN units u ON u.id = "
            "uc.unit_id"
            " WHERE c.run_id = ?1 GROUP BY c.id)"));
    stmt.Bind(1, run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row) {
      s.cells_total = stmt.Int(0);
      s.cells_done = stmt.Int(1);
      s.cells_failed = stmt.Int(2);
    }
  }
  {
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT COUNT(*) FROM valid_measurements WHERE run_id = ?1"));
    stmt.Bind(1, run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row) s.measurements = stmt.Int(0);
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT AVG(a.ended_at - a.leased_at) FROM attempts a JOIN units u ON u.id = a.unit_id "
            "WHERE u.run_id = ?1 AND a.state = 'done'"));
    stmt.Bind(1, run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row && !stmt.IsNull(0)) s.mean_unit_seconds = stmt.Double(0) / 1000.0;
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT DISTINCT fail_reason FROM units WHERE run_id = ?1 AND state = 'failed' "
                   "AND fail_reason IS NOT NULL LIMIT 10"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      s.failure_reasons.push_back(stmt.Text(0));
    }
  }
  return s;
}

absl::StatusOr<std::vector<RunSummary>> ListRuns(db::Database& db, int limit) {
  ASSIGN_OR_RETURN(db::Statement stmt, db.Prepare("SELECT id FROM runs ORDER BY id DESC LIMIT ?1"));
  stmt.Bind(1, static_cast<int64_t>(limit > 0 ? limit : 20));
  std::vector<int64_t> ids;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    ids.push_back(stmt.Int(0));
  }
  std::vector<RunSummary> runs;
  for (int64_t id : ids) {
    ASSIGN_OR_RETURN(RunSummary s, GetRunSummary(db, id));
    runs.push_back(std::move(s));
  }
  return runs;
}

absl::StatusOr<std::vector<SessionSummary>> ListSessions(db::Database& db) {
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db.Prepare(
          "SELECT s.id, s.hostname, s.state, s.started_at, s.last_seen_at, "
          "(SELECT COUNT(*) FROM attempts a WHERE a.session_id = s.id AND a.state = 'done'), "
          "(SELECT COUNT(*) FROM attempts a WHERE a.session_id = s.id AND a.state = 'leased'), "
          "s.machine_id, s.boot_id, s.cloud_instance_id, s.cpu_model, s.cpu_cores, s.memory_mib, "
          "s.software, s.features, s.labels, s.agent_version, "
          "(SELECT COUNT(*) FROM attempts a WHERE a.session_id = s.id "
          "AND a.state IN ('failed', 'expired')) "
          "FROM sessions s ORDER BY s.started_at"));
  ASSIGN_OR_RETURN(
      db::Statement gpus,
      db.Prepare("SELECT vendor, name, arch, uuid, memory_mib, driver FROM session_gpus "
                 "WHERE session_id = ?1 ORDER BY idx"));
  ASSIGN_OR_RETURN(
      db::Statement links,
      db.Prepare("SELECT a, b, kind FROM session_gpu_links WHERE session_id = ?1 ORDER BY a, b"));
  std::vector<SessionSummary> sessions;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    SessionSummary s;
    s.session_id = stmt.Text(0);
    s.hostname = stmt.Text(1);
    ASSIGN_OR_RETURN(s.state, ParseSessionState(stmt.Text(2)));
    s.started_at_ms = stmt.Int(3);
    s.last_seen_ms = stmt.Int(4);
    s.attempts_done = stmt.Int(5);
    s.attempts_live = stmt.Int(6);
    s.attempts_failed = stmt.Int(17);
    s.inventory = {{"hostname", s.hostname},
                   {"machine_id", stmt.Text(7)},
                   {"boot_id", stmt.Text(8)},
                   {"cloud_instance_id", stmt.Text(9)},
                   {"cpu_model", stmt.Text(10)},
                   {"cpu_cores", stmt.Int(11)},
                   {"memory_mib", stmt.Int(12)},
                   {"software", ParseOr(stmt.Text(13), nlohmann::json::object())},
                   {"features", ParseOr(stmt.Text(14), nlohmann::json::array())},
                   {"labels", ParseOr(stmt.Text(15), nlohmann::json::object())},
                   {"agent_version", stmt.Text(16)},
                   {"gpus", nlohmann::json::array()},
                   {"gpu_links", nlohmann::json::array()}};
    gpus.Reset();
    gpus.Bind(1, s.session_id);
    while (true) {
      ASSIGN_OR_RETURN(bool gpu_row, gpus.Step());
      if (!gpu_row) break;
      s.inventory["gpus"].push_back({{"vendor", gpus.Text(0)},
                                     {"name", gpus.Text(1)},
                                     {"arch", gpus.Text(2)},
                                     {"uuid", gpus.Text(3)},
                                     {"memory_mib", gpus.Int(4)},
                                     {"driver", gpus.Text(5)}});
    }
    links.Reset();
    links.Bind(1, s.session_id);
    while (true) {
      ASSIGN_OR_RETURN(bool link_row, links.Step());
      if (!link_row) break;
      s.inventory["gpu_links"].push_back(
          {{"a", links.Int(0)}, {"b", links.Int(1)}, {"kind", links.Text(2)}});
    }
    sessions.push_back(std::move(s));
  }
  return sessions;
}

namespace {

// Names echo into JSON output, which must be valid UTF-8.
bool ValidUtf8(const std::string& s) { return IsValidUtf8(s); }

}  // namespace

absl::StatusOr<QueryResult> QueryRun(db::Database& db, const QueryOptions& options) {
  if (!ValidUtf8(options.metric)) {
    return absl::InvalidArgumentError("--metric: not valid UTF-8");
  }
  for (const auto& axis : options.by) {
    if (!ValidUtf8(axis)) return absl::InvalidArgumentError("--by: not valid UTF-8");
  }
  RETURN_IF_ERROR(RunExists(db, options.run_id));
  QueryResult result;
  result.run_id = options.run_id;
  std::vector<std::string> axes;
  {
    ASSIGN_OR_RETURN(db::Statement stmt, db.Prepare("SELECT axes, metric FROM runs WHERE id = ?1"));
    stmt.Bind(1, options.run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    (void)row;
    for (const auto& a : ParseOr(stmt.Text(0), nlohmann::json::array())) {
      axes.push_back(a.get<std::string>());
    }
    result.metric = options.metric.empty() ? stmt.Text(1) : options.metric;
  }
  result.by = options.by.empty() ? axes : options.by;
  for (const auto& axis : result.by) {
    if (std::find(axes.begin(), axes.end(), axis) == axes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--by: run ", options.run_id, " has no axis '", axis,
                       "'; its axes are: ", absl::StrJoin(axes, ", ")));
    }
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT DISTINCT metric FROM measurements WHERE run_id = ?1 ORDER BY metric"));
    stmt.Bind(1, options.run_id);
    std::vector<std::string> metrics;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      metrics.push_back(stmt.Text(0));
    }
    if (!metrics.empty() &&
        std::find(metrics.begin(), metrics.end(), result.metric) == metrics.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--metric: run ", options.run_id,
                                                     " has no measurements of '", result.metric,
                                                     "'; it has: ", absl::StrJoin(metrics, ", ")));
    }
  }

  // Gather per cell, then fold cells into groups, so groups with no data still show.
  struct Group {
    nlohmann::json key;
    std::vector<double> values;
    std::vector<stats::Observation> observations;
    std::set<std::string> sessions;
    bool failed = false;
    std::set<std::string> flags;
  };
  std::map<std::string, Group> groups;
  std::vector<std::string> order;
  std::map<int64_t, std::string> cell_group;
  std::map<std::string, int64_t> session_index;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT c.id, c.axes, MAX(u.state = 'failed') FROM cells c "
                   "JOIN unit_cells uc ON uc.cell_id = c.id JOIN units u ON u.id = uc.unit_id "
                   "WHERE c.run_id = ?1 GROUP BY c.id ORDER BY c.idx"));
    stmt.Bind(1, options.run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      nlohmann::json cell_axes = ParseOr(stmt.Text(1), nlohmann::json::object());
      nlohmann::json key = nlohmann::json::object();
      for (const auto& axis : result.by) key[axis] = cell_axes.value(axis, nlohmann::json());
      std::string key_text = key.dump();
      auto [it, inserted] = groups.try_emplace(key_text);
      if (inserted) {
        it->second.key = key;
        order.push_back(key_text);
      }
      if (stmt.Int(2)) it->second.failed = true;
      cell_group[stmt.Int(0)] = key_text;
    }
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT cell_id, value, session_id, unit, process, round FROM valid_measurements "
            "WHERE run_id = ?1 AND metric = ?2"));
    stmt.Bind(1, options.run_id).Bind(2, result.metric);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto it = cell_group.find(stmt.Int(0));
      if (it == cell_group.end()) continue;
      Group& g = groups[it->second];
      g.values.push_back(stmt.Double(1));
      g.sessions.insert(stmt.Text(2));
      // Sessions by index; a process is identified by (cell, process) so that the cells of a
      // group are distinct processes of the session rather than duplicates.
      auto [sit, fresh] =
          session_index.try_emplace(stmt.Text(2), static_cast<int64_t>(session_index.size()));
      (void)fresh;
      g.observations.push_back(
          {sit->second, stmt.Int(0) * 1'000'000 + stmt.Int(4), stmt.Int(5), stmt.Double(1)});
      if (result.unit.empty()) result.unit = stmt.Text(3);
    }
  }
  {
    // Evidence that contradicts the request is surfaced next to the figures it affects.
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT e.cell_id, e.kind, e.value FROM evidence e JOIN attempts a "
                                "ON a.id = e.attempt_id "
                                "WHERE e.run_id = ?1 AND a.state = 'done' AND e.stale = 0 "
                                "AND e.kind IN ('backend_mismatch', 'throttled', 'probe_silent', "
                                "'speculation_not_engaged', 'speculation_while_off', "
                                "'speculation_not_verifiable')"));
    stmt.Bind(1, options.run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto value = ParseOr(stmt.Text(2), nlohmann::json());
      if (value == false || value.is_null()) continue;
      auto it = cell_group.find(stmt.Int(0));
      if (it != cell_group.end()) groups[it->second].flags.insert(stmt.Text(1));
    }
  }
  for (const auto& key_text : order) {
    Group& g = groups[key_text];
    QueryRow row;
    row.group = g.key;
    row.n = static_cast<int64_t>(g.values.size());
    row.sessions = static_cast<int64_t>(g.sessions.size());
    if (!g.values.empty()) {
      std::vector<double> v = g.values;
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      row.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
      double sum = 0;
      for (double x : v) sum += x;
      row.mean = sum / static_cast<double>(n);
      double ss = 0;
      for (double x : v) ss += (x - row.mean) * (x - row.mean);
      row.sd = n > 1 ? std::sqrt(ss / static_cast<double>(n - 1)) : 0;
      row.cv = row.mean != 0 ? row.sd / std::fabs(row.mean) : 0;
      row.min = v.front();
      row.max = v.back();
      if (auto ci = stats::CellMeanInterval(g.observations); ci.ok()) {
        row.ci_lower = ci->lower;
        row.ci_upper = ci->upper;
        row.ci_df = ci->df;
        row.ci_within_session = ci->scope == stats::IntervalScope::kWithinSessionOnly;
      }
    } else {
      row.flags.push_back("no data");
    }
    if (g.failed) row.flags.push_back("failed");
    for (const auto& f : g.flags) row.flags.push_back(f);
    result.rows.push_back(std::move(row));
  }
  return result;
}

nlohmann::json ToJson(const QueryResult& result) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : result.rows) {
    rows.push_back({{"group", r.group},
                    {"n", r.n},
                    {"sessions", r.sessions},
                    {"median", r.median},
                    {"mean", r.mean},
                    {"sd", r.sd},
                    {"cv", r.cv},
                    {"min", r.min},
                    {"max", r.max},
                    {"flags", r.flags}});
    if (std::isfinite(r.ci_lower) && std::isfinite(r.ci_upper)) {
      rows.back()["ci95"] = {{"lower", r.ci_lower},
                             {"upper", r.ci_upper},
                             {"df", r.ci_df},
                             {"within_session_only", r.ci_within_session}};
    }
  }
  return {{"run_id", result.run_id},
          {"metric", result.metric},
          {"unit", result.unit},
          {"by", result.by},
          {"rows", rows},
          {"notes", result.notes}};
}

std::string ToCsv(const QueryResult& result) {
  std::ostringstream out;
  for (const auto& axis : result.by) out << CsvField(axis) << ',';
  out << "n,sessions,median,mean,sd,cv,min,max,flags\n";
  for (const auto& r : result.rows) {
    for (const auto& axis : result.by) out << CsvField(JsonScalarText(r.group[axis])) << ',';
    out << r.n << ',' << r.sessions << ',' << r.median << ',' << r.mean << ',' << r.sd << ','
        << r.cv << ',' << r.min << ',' << r.max << ',' << CsvField(absl::StrJoin(r.flags, ";"))
        << '\n';
  }
  return out.str();
}

namespace {

constexpr const char* kExportSql =
    "SELECT m.uuid, m.cell_id, c.key, c.params, m.attempt_id, m.session_id, s.hostname, "
    "m.process, m.round, m.metric, m.value, m.unit, m.measured_at, "
    "(a.state = 'done' AND m.stale = 0) AS valid, a.state "
    "FROM measurements m JOIN cells c ON c.id = m.cell_id JOIN attempts a ON a.id = m.attempt_id "
    "JOIN sessions s ON s.id = m.session_id WHERE m.run_id = ?1 ORDER BY m.id";

}  // namespace

absl::StatusOr<nlohmann::json> ExportRunJson(db::Database& db, int64_t run_id) {
  RETURN_IF_ERROR(RunExists(db, run_id));
  ASSIGN_OR_RETURN(db::Statement stmt, db.Prepare(kExportSql));
  stmt.Bind(1, run_id);
  nlohmann::json rows = nlohmann::json::array();
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    rows.push_back({{"uuid", stmt.Text(0)},
                    {"cell_id", stmt.Int(1)},
                    {"cell", stmt.Text(2)},
                    {"params", ParseOr(stmt.Text(3), nlohmann::json::object())},
                    {"attempt_id", stmt.Int(4)},
                    {"session_id", stmt.Text(5)},
                    {"hostname", stmt.Text(6)},
                    {"process", stmt.Int(7)},
                    {"round", stmt.Int(8)},
                    {"metric", stmt.Text(9)},
                    {"value", stmt.Double(10)},
                    {"unit", stmt.Text(11)},
                    {"measured_at_ms", stmt.Int(12)},
                    {"valid", stmt.Int(13) != 0},
                    {"attempt_state", stmt.Text(14)}});
  }
  return nlohmann::json{{"run_id", run_id}, {"measurements", rows}};
}

absl::StatusOr<std::string> ExportRunCsv(db::Database& db, int64_t run_id) {
  RETURN_IF_ERROR(RunExists(db, run_id));
  ASSIGN_OR_RETURN(db::Statement stmt, db.Prepare(kExportSql));
  stmt.Bind(1, run_id);
  std::ostringstream out;
  out << "uuid,cell_id,cell,attempt_id,session_id,hostname,process,round,metric,value,unit,"
         "measured_at_ms,valid,attempt_state\n";
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out << stmt.Text(0) << ',' << stmt.Int(1) << ',' << CsvField(stmt.Text(2)) << ',' << stmt.Int(4)
        << ',' << stmt.Text(5) << ',' << CsvField(stmt.Text(6)) << ',' << stmt.Int(7) << ','
        << stmt.Int(8) << ',' << CsvField(stmt.Text(9)) << ',' << stmt.Double(10) << ','
        << CsvField(stmt.Text(11)) << ',' << stmt.Int(12) << ',' << stmt.Int(13) << ','
        << stmt.Text(14) << '\n';
  }
  return out.str();
}

absl::StatusOr<std::vector<SessionAttempt>> ListSessionAttempts(db::Database& db,
                                                                const std::string& session_id,
                                                                int limit) {
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db.Prepare("SELECT a.id, u.run_id, u.idx, u.group_key, a.state, a.leased_at, "
                              "COALESCE(a.ended_at, 0), COALESCE(a.reason, '') "
                              "FROM attempts a JOIN units u ON u.id = a.unit_id "
                              "WHERE a.session_id = ?1 ORDER BY a.id DESC LIMIT ?2"));
  stmt.Bind(1, session_id).Bind(2, static_cast<int64_t>(limit));
  std::vector<SessionAttempt> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back(SessionAttempt{stmt.Int(0), stmt.Int(1), stmt.Int(2), stmt.Text(3), stmt.Text(4),
                                 stmt.Int(5), stmt.Int(6), stmt.Text(7)});
  }
  return out;
}

absl::StatusOr<StateCounts> CountByState(db::Database& db) {
  StateCounts counts;
  auto count = [&](const char* sql,
                   std::vector<std::pair<std::string, int64_t>>* out) -> absl::Status {
    ASSIGN_OR_RETURN(db::Statement * stmt, db.Cached(sql));
    stmt->Reset();
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt->Step());
      if (!row) break;
      out->emplace_back(stmt->Text(0), stmt->Int(1));
    }
    stmt->Reset();
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(count("SELECT state, COUNT(*) FROM sessions GROUP BY state ORDER BY state",
                        &counts.sessions));
  RETURN_IF_ERROR(
      count("SELECT state, COUNT(*) FROM runs GROUP BY state ORDER BY state", &counts.runs));
  RETURN_IF_ERROR(
      count("SELECT u.state, COUNT(*) FROM units u JOIN runs r ON r.id = u.run_id "
            "WHERE r.state IN ('queued', 'running') GROUP BY u.state ORDER BY u.state",
            &counts.units_of_open_runs));
  return counts;
}

}  // namespace ladder::db
