#include "ladder/report/analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "internal.h"
#include "ladder/matrices/matrix.h"
#include "ladder/stats/ratio.h"
#include "ladder/stats/sample.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

nlohmann::json ParseOr(const std::string& text, nlohmann::json fallback) {
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  return parsed.is_discarded() ? fallback : parsed;
}

// One valid measurement as read.
struct Row {
  int64_t session = 0;  // index into the session id table
  int64_t process = 0;
  int64_t round = 0;
  double value = 0.0;
};

double Median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void AddFlag(std::vector<Flag>& flags, const std::string& kind, const std::string& detail) {
  for (auto& f : flags) {
    if (f.kind == kind) {
      if (!detail.empty() && f.detail.find(detail) == std::string::npos) {
        f.detail = f.detail.empty() ? detail : absl::StrCat(f.detail, "; ", detail);
      }
      return;
    }
  }
  flags.push_back({kind, detail});
}

std::vector<stats::Observation> ToObservations(const std::vector<Row>& rows) {
  std::vector<stats::Observation> out;
  out.reserve(rows.size());
  for (const auto& r : rows) out.push_back({r.session, r.process, r.round, r.value});
  return out;
}

bool ParsePositiveNumber(const std::string& text, double* out) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v) || v <= 0) return false;
  *out = v;
  return true;
}

}  // namespace

Direction DirectionOfUnit(const std::string& unit) {
  static const std::set<std::string> kTimes = {"us",  "µs",      "ms",       "s",       "ns",
                                               "sec", "seconds", "us/token", "ms/token"};
  if (kTimes.count(unit)) return Direction::kLowerIsBetter;
  if (unit.size() > 2 && unit.substr(unit.size() - 2) == "/s") return Direction::kHigherIsBetter;
  return Direction::kUnknown;
}

Direction DirectionOfMetric(db::Database& db, int64_t run_id, const std::string& metric,
                            const std::string& unit) {
  auto stmt =
      db.Prepare("SELECT m.yaml FROM runs r JOIN matrices m ON m.id = r.matrix_id WHERE r.id = ?1");
  if (stmt.ok()) {
    stmt->Bind(1, run_id);
    auto row = stmt->Step();
    if (row.ok() && *row) {
      auto matrix = matrices::ParseMatrix(stmt->Text(0), "stored matrix");
      if (matrix.ok()) {
        for (const auto& d : matrix->metrics) {
          if (d.name != metric) continue;
          return d.better == matrices::MetricDeclaration::Better::kHigher
                     ? Direction::kHigherIsBetter
                     : Direction::kLowerIsBetter;
        }
      }
    }
  }
  return DirectionOfUnit(unit);
}

std::string DirectionText(Direction direction) {
  switch (direction) {
    case Direction::kHigherIsBetter:
      return "higher is better";
    case Direction::kLowerIsBetter:
      return "lower is better";
    case Direction::kUnknown:
      break;
  }
  return "direction unknown";
}

std::string VerdictText(stats::ChangeClass change, Direction direction) {
  switch (change) {
    case stats::ChangeClass::kWithin:
      return "no change";
    case stats::ChangeClass::kStraddles:
      return "inconclusive";
    case stats::ChangeClass::kAbove:
      if (direction == Direction::kLowerIsBetter) return "slower";
      if (direction == Direction::kHigherIsBetter) return "faster";
      return "higher";
    case stats::ChangeClass::kBelow:
      if (direction == Direction::kLowerIsBetter) return "faster";
      if (direction == Direction::kHigherIsBetter) return "slower";
      return "lower";
  }
  return "inconclusive";
}

bool IsClaimFlag(const std::string& kind) {
  return kind == "backend_mismatch" || kind == "probe_silent" ||
         kind == "speculation_not_engaged" || kind == "speculation_while_off" ||
         kind == "speculation_not_verifiable";
}

std::string RepeatText(int repeats, stats::RepeatBound bound) {
  switch (bound) {
    case stats::RepeatBound::kAtCap:
      return absl::StrCat("≥ ", repeats, " (the cap)");
    case stats::RepeatBound::kNoVariance:
      return absl::StrCat(repeats, " (no variance at this level)");
    case stats::RepeatBound::kOptimum:
      break;
  }
  return absl::StrCat(repeats);
}

std::string SessionsNeededText(const stats::SessionsNeeded& needed) {
  return needed.verdict == stats::SessionsVerdict::kExceedsMax
             ? absl::StrCat("≥ ", needed.sessions, " (the cap)")
             : absl::StrCat(needed.sessions);
}

absl::Status AnalysisOptions::Validate() const {
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence must be in (0, 1), got ", confidence));
  }
  if (bootstrap_draws < 0) {
    return absl::InvalidArgumentError("bootstrap draws must be >= 0");
  }
  RETURN_IF_ERROR(steady_rule.Validate());
  RETURN_IF_ERROR(locate.Validate());
  if (costs) RETURN_IF_ERROR(costs->Validate());
  if (!(threshold >= 0 && threshold < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("threshold must be in [0, 1), got ", threshold));
  }
  return absl::OkStatus();
}

double Comparison::Ratio() const { return t.interval ? t.interval->estimate : kNaN; }

const CellStats* RunAnalysis::FindCell(const std::string& key) const {
  for (const auto& c : cells) {
    if (c.key == key) return &c;
  }
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> SplitKey(const std::string& key) {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& part : matrices::ParseCellKey(key)) {
    out.emplace_back(std::move(part.axis), std::move(part.value));
  }
  return out;
}

namespace {

// What `locate` did on each line: its decisions (adaptive_decisions, option 'locate', keyed by
// the line) and what its probes cost. A database older than schema v4 has no locate decisions.
absl::Status AddLocated(db::Database& db, RunAnalysis& out) {
  const int64_t run_id = out.info.run_id;
  auto stmt = db.Prepare(
      "SELECT group_key, decision, COALESCE(outcome, ''), reason, depth, bracket_lower, "
      "bracket_upper FROM adaptive_decisions WHERE run_id = ?1 AND option = 'locate' "
      "ORDER BY id");
  if (!stmt.ok()) return absl::OkStatus();
  stmt->Bind(1, run_id);
  std::map<std::string, LadderLine::Located> by_line;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    LadderLine::Located& l = by_line[stmt->Text(0)];
    const std::string decision = stmt->Text(1);
    l.decisions++;
    l.reason = stmt->Text(3);
    if (decision == "probe" && !stmt->IsNull(4)) l.probes.push_back(stmt->Double(4));
    if (decision == "add_session") l.added_sessions++;
    if (decision == "stop") l.outcome = stmt->Text(2);
    if (!stmt->IsNull(5) && !stmt->IsNull(6)) {
      l.bracket_lower = stmt->Double(5);
      l.bracket_upper = stmt->Double(6);
    }
  }
  for (LadderLine& line : out.lines) {
    auto found = by_line.find(line.key);
    if (found == by_line.end()) continue;
    LadderLine::Located located = std::move(found->second);
    if (located.outcome.empty()) located.outcome = "in progress";
    // The probes' cells: both arms of this line at each probed depth.
    std::vector<int64_t> cells;
    for (size_t k = 0; k < line.points.size(); ++k) {
      if (std::find(located.probes.begin(), located.probes.end(), line.depths[k]) ==
          located.probes.end()) {
        continue;
      }
      const Comparison& cmp = out.comparisons[line.points[k]];
      for (const std::string& key : {cmp.baseline_key, cmp.treatment_key}) {
        if (const CellStats* cell = out.FindCell(key)) {
          cells.push_back(cell->cell_id);
          located.measurements += cell->n;
        }
      }
    }
    located.cells = static_cast<int64_t>(cells.size());
    if (!cells.empty()) {
      ASSIGN_OR_RETURN(db::Statement units,
                       db.Prepare(absl::StrCat(
                           "SELECT COUNT(DISTINCT unit_id) FROM unit_cells WHERE cell_id IN (",
                           absl::StrJoin(cells, ","), ")")));
      ASSIGN_OR_RETURN(bool row, units.Step());
      if (row) located.units = units.Int(0);
    }
    line.located = std::move(located);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MeasuredCosts> MeasureLevelCosts(db::Database& db, int64_t run_id) {
  // The end of each (attempt, process, round): its last measurement.
  ASSIGN_OR_RETURN(
      db::Statement ends,
      db.Prepare("SELECT attempt_id, process, round, MAX(measured_at) FROM valid_measurements "
                 "WHERE run_id = ?1 GROUP BY attempt_id, process, round ORDER BY attempt_id, "
                 "process, round"));
  ends.Bind(1, run_id);
  struct End {
    int64_t attempt, process, round, at_ms;
  };
  std::vector<End> rows;
  while (true) {
    ASSIGN_OR_RETURN(bool row, ends.Step());
    if (!row) break;
    rows.push_back(End{ends.Int(0), ends.Int(1), ends.Int(2), ends.Int(3)});
  }
  std::vector<double> rounds, process_gaps;
  for (size_t i = 1; i < rows.size(); ++i) {
    const End& a = rows[i - 1];
    const End& b = rows[i];
    if (a.attempt != b.attempt) continue;
    if (a.process == b.process && b.round == a.round + 1) {
      rounds.push_back(static_cast<double>(b.at_ms - a.at_ms) / 1000.0);
    } else if (b.process == a.process + 1) {
      process_gaps.push_back(static_cast<double>(b.at_ms - a.at_ms) / 1000.0);
    }
  }
  auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  // What the runners measured with their steady clocks: process starts and the time of each
  // cell measurement (one round of one cell). The engine runner's process is an engine server
  // start; the kernel runner's is a fresh draw of the data inside the agent.
  // A program the command runner started reports its rounds when it ends: the runner sees a
  // start's total time, never a round's, so the two costs cannot be told apart.
  {
    ASSIGN_OR_RETURN(
        db::Statement command,
        db.Prepare("SELECT json_extract(value, '$.seconds') FROM evidence WHERE run_id = ?1 AND "
                   "stale = 0 AND kind = 'command_start' AND json_extract(value, '$.failure') "
                   "IS NULL AND json_extract(value, '$.round') IS NULL"));
    command.Bind(1, run_id);
    std::vector<double> seconds;
    while (true) {
      ASSIGN_OR_RETURN(bool row, command.Step());
      if (!row) break;
      if (!command.IsNull(0)) seconds.push_back(command.Double(0));
    }
    if (!seconds.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the command runner sees each program start whole (median ",
                       absl::StrFormat("%.3g", median_of(seconds)),
                       " s, its rounds included), not a round's time apart from the start's; give "
                       "--cost-round, --cost-process and --cost-session to plan"));
    }
  }
  ASSIGN_OR_RETURN(db::Statement starts,
                   db.Prepare("SELECT kind, value FROM evidence WHERE run_id = ?1 AND stale = 0 "
                              "AND kind IN ('engine_process', 'kernel_process')"));
  starts.Bind(1, run_id);
  std::vector<double> measured_starts, measured_rounds;
  std::string clock_runner;  // which runner's steady clock the costs come from
  while (true) {
    ASSIGN_OR_RETURN(bool row, starts.Step());
    if (!row) break;
    clock_runner = starts.Text(0) == "kernel_process" ? "kernel runner" : "engine runner";
    auto value = nlohmann::json::parse(starts.Text(1), nullptr, false);
    if (!value.is_object()) continue;
    if (value.contains("start_us") && value["start_us"].is_number()) {
      measured_starts.push_back(value["start_us"].get<double>() / 1e6);
    } else if (value.contains("start_ms") && value["start_ms"].is_number()) {
      measured_starts.push_back(value["start_ms"].get<double>() / 1000.0);
    }
    if (value.contains("measure_us") && value["measure_us"].is_array()) {
      for (const auto& us : value["measure_us"]) {
        if (us.is_number() && us.get<double>() > 0)
          measured_rounds.push_back(us.get<double>() / 1e6);
      }
    }
  }
  MeasuredCosts costs;
  std::vector<std::string> sources;
  if (!measured_rounds.empty()) {
    costs.round = median_of(measured_rounds);
    sources.push_back(absl::StrCat("round: ", clock_runner, ", steady clock (µs)"));
  } else {
    if (rounds.empty()) {
      return absl::FailedPreconditionError(
          "no process has two rounds: a round's cost cannot be measured");
    }
    costs.round = median_of(rounds);
    if (!(costs.round > 0)) {
      return absl::FailedPreconditionError(
          "rounds take less than the 1 ms resolution of the results' time stamps; give "
          "--cost-round (with --cost-process and --cost-session)");
    }
    sources.push_back("round: result time stamps (1 ms)");
  }
  // Process start: what the engine reported, else the gap between processes less a round.
  if (!measured_starts.empty() && clock_runner == "kernel runner") {
    // The kernel runner's "process" is a fresh draw of inputs inside the agent, which costs
    // microseconds: a plan trading it against rounds would ask for the cap of processes, a
    // design no one should follow (the start it stands for is never paid).
    return absl::FailedPreconditionError(absl::StrCat(
        "the kernel runner starts no process (a process is a fresh draw of inputs inside the "
        "agent, ",
        absl::StrFormat("%.3g", median_of(measured_starts) * 1e6),
        " µs), so there is no start to trade against rounds; give --cost-process (with "
        "--cost-round and --cost-session) to plan for a cost you know"));
  }
  if (!measured_starts.empty()) {
    costs.process = median_of(measured_starts);
    sources.push_back(absl::StrCat("process start: ", clock_runner, ", steady clock (µs)"));
  } else if (!process_gaps.empty()) {
    const double gap = median_of(process_gaps) - costs.round;
    costs.process = std::max(0.0, gap);
    if (gap < 0.001) {
      costs.process_below_resolution = true;
      sources.push_back("process start: below the 1 ms resolution of the time stamps");
    } else {
      sources.push_back("process start: result time stamps (1 ms)");
    }
  } else {
    sources.push_back("process start: not measured (one process per session)");
  }
  // Session set-up: registration to first result, less a process start and a round.
  ASSIGN_OR_RETURN(
      db::Statement first,
      db.Prepare(
          "SELECT s.started_at, MIN(m.measured_at) FROM sessions s "
          "JOIN valid_measurements m ON m.session_id = s.id WHERE m.run_id = ?1 GROUP BY s.id"));
  first.Bind(1, run_id);
  std::vector<double> setups;
  while (true) {
    ASSIGN_OR_RETURN(bool row, first.Step());
    if (!row) break;
    setups.push_back(static_cast<double>(first.Int(1) - first.Int(0)) / 1000.0);
  }
  if (!setups.empty()) {
    costs.session = std::max(0.0, median_of(setups) - costs.process - costs.round);
    sources.push_back("session set-up: registration and result time stamps (1 ms)");
  }
  costs.note = absl::StrJoin(sources, "; ");
  RETURN_IF_ERROR(costs.Validate());
  return costs;
}

absl::StatusOr<RunAnalysis> AnalyzeRun(db::Database& db, int64_t run_id,
                                       const AnalysisOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  RunAnalysis out;
  RunInfo& info = out.info;
  info.run_id = run_id;
  out.threshold = options.threshold;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT m.name, m.sha256, m.yaml, r.state, r.runner, r.metric, r.axes, r.pair_axes, "
            "r.sessions, r.processes, r.rounds FROM runs r JOIN matrices m ON m.id = r.matrix_id "
            "WHERE r.id = ?1"));
    stmt.Bind(1, run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) {
      return absl::NotFoundError(absl::StrCat("run ", run_id, " not found in ", db.path()));
    }
    info.matrix_name = stmt.Text(0);
    info.matrix_sha256 = stmt.Text(1);
    const std::string yaml = stmt.Text(2);
    info.state = stmt.Text(3);
    info.runner = stmt.Text(4);
    info.metric = options.metric.empty() ? stmt.Text(5) : options.metric;
    for (const auto& a : ParseOr(stmt.Text(6), nlohmann::json::array())) {
      if (a.is_string()) info.axes.push_back(a.get<std::string>());
    }
    for (const auto& a : ParseOr(stmt.Text(7), nlohmann::json::array())) {
      if (a.is_string()) info.pair_axes.push_back(a.get<std::string>());
    }
    info.sessions = stmt.Int(8);
    info.processes = stmt.Int(9);
    info.rounds = stmt.Int(10);
    // aa_control is not a column: read it back from the stored matrix. A matrix that no longer
    // parses (stored by an older ladder) simply has no A/A arm here.
    auto matrix = matrices::ParseMatrix(yaml, "stored matrix");
    if (matrix.ok() && matrix->aa_control) {
      info.aa_control =
          AAControlInfo{matrix->aa_control->axis, matrices::ValueToString(matrix->aa_control->of),
                        matrix->aa_control->as};
    }
    if (matrix.ok() && matrix->locate) {
      info.locate = LocateInfo{matrix->locate->axis, matrix->locate->resolution_octaves,
                               matrix->locate->min_step, matrix->locate->max_sessions};
    }
  }
  info.axis_values.resize(info.axes.size());

  // Metrics present, and the unit of ours.
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT metric, MIN(unit) FROM measurements WHERE run_id = ?1 GROUP BY metric "
                   "ORDER BY metric"));
    stmt.Bind(1, run_id);
    std::vector<std::string> metrics;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      metrics.push_back(stmt.Text(0));
      if (metrics.back() == info.metric) info.unit = stmt.Text(1);
      if (metrics.back() == "gpu_clock_mhz") out.clock_recorded = true;
    }
    if (!metrics.empty() &&
        std::find(metrics.begin(), metrics.end(), info.metric) == metrics.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--metric: run ", run_id,
                                                     " has no measurements of '", info.metric,
                                                     "'; it has: ", absl::StrJoin(metrics, ", ")));
    }
  }
  info.direction = DirectionOfMetric(db, run_id, info.metric, info.unit);

  // Cells, with failure state and reasons.
  std::map<int64_t, size_t> cell_index;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT c.id, c.key, c.axes, MAX(u.state = 'failed'), "
            "GROUP_CONCAT(DISTINCT u.fail_reason) FROM cells c "
            "LEFT JOIN unit_cells uc ON uc.cell_id = c.id LEFT JOIN units u ON u.id = uc.unit_id "
            "WHERE c.run_id = ?1 GROUP BY c.id ORDER BY c.idx"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      CellStats cell;
      cell.cell_id = stmt.Int(0);
      cell.key = stmt.Text(1);
      cell.axes = ParseOr(stmt.Text(2), nlohmann::json::object());
      std::map<std::string, std::string> rendered;
      for (auto& [k, v] : SplitKey(cell.key)) rendered[k] = v;
      for (size_t a = 0; a < info.axes.size(); ++a) {
        const std::string v = rendered[info.axes[a]];
        cell.values.push_back(v);
        auto& values = info.axis_values[a];
        if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
      }
      if (!stmt.IsNull(3) && stmt.Int(3)) {
        AddFlag(cell.flags, "failed", stmt.IsNull(4) ? "" : stmt.Text(4));
      }
      cell_index[cell.cell_id] = out.cells.size();
      out.cells.push_back(std::move(cell));
    }
  }
  // The declared order of each axis's values is the order of first appearance in cell order,
  // except that an axis whose first cells were excluded could be out of order; the matrix's
  // cell order is the declared order for every axis, so this holds.

  // Valid measurements of the metric and of the side metrics.
  std::map<std::string, int64_t> session_ids;
  std::vector<std::string> session_names;
  auto session_index = [&](const std::string& id) {
    auto [it, inserted] = session_ids.try_emplace(id, static_cast<int64_t>(session_names.size()));
    if (inserted) session_names.push_back(id);
    return it->second;
  };
  std::vector<std::vector<Row>> rows(out.cells.size());
  std::vector<std::vector<double>> acceptance(out.cells.size()), acceptance_len(out.cells.size());
  using Index = std::tuple<size_t, int64_t, int64_t, int64_t>;  // cell, session, process, round
  std::map<Index, std::pair<double, double>> clocks;            // (clock, default)
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT cell_id, session_id, process, round, metric, value FROM valid_measurements "
            "WHERE run_id = ?1 AND metric IN (?2, 'acceptance_rate', 'mean_acceptance_length', "
            "'gpu_clock_mhz', 'gpu_clock_default_mhz') ORDER BY id"));
    stmt.Bind(1, run_id).Bind(2, info.metric);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto it = cell_index.find(stmt.Int(0));
      if (it == cell_index.end()) continue;
      const size_t c = it->second;
      const int64_t s = session_index(stmt.Text(1));
      const std::string metric = stmt.Text(4);
      const double value = stmt.Double(5);
      if (metric == info.metric) {
        rows[c].push_back({s, stmt.Int(2), stmt.Int(3), value});
      } else if (metric == "acceptance_rate") {
        acceptance[c].push_back(value);
      } else if (metric == "mean_acceptance_length") {
        acceptance_len[c].push_back(value);
      } else if (metric == "gpu_clock_mhz") {
        clocks[{c, s, stmt.Int(2), stmt.Int(3)}].first = value;
      } else if (metric == "gpu_clock_default_mhz") {
        clocks[{c, s, stmt.Int(2), stmt.Int(3)}].second = value;
      }
    }
  }

  // Throttled clocks.
  if (!clocks.empty()) {
    std::map<size_t, std::pair<int, int>> counts;  // cell -> (throttled, known)
    // The lowest clock against its reference over the run: a clean run says so, in numbers.
    double lowest_ratio = kNaN, lowest_mhz = kNaN, lowest_reference = kNaN;
    int known = 0, throttled = 0;
    for (const auto& [index, clock] : clocks) {
      const auto state = stats::ClassifyClock(clock.first > 0 ? clock.first : kNaN,
                                              clock.second > 0 ? clock.second : kNaN);
      auto& count = counts[std::get<0>(index)];
      if (state != stats::ClockState::kUnknown) {
        ++count.second, ++known;
        const double ratio = clock.first / clock.second;
        if (known == 1 || ratio < lowest_ratio) {
          lowest_ratio = ratio, lowest_mhz = clock.first, lowest_reference = clock.second;
        }
      }
      if (state == stats::ClockState::kThrottled) ++count.first, ++throttled;
    }
    if (known > 0) {
      out.notes.push_back(absl::StrCat(
          "GPU clocks recorded for ", known, " measurements: lowest ", absl::SixDigits(lowest_mhz),
          " MHz, ", absl::SixDigits(std::round(100 * lowest_ratio)), " % of its reference (",
          absl::SixDigits(lowest_reference), " MHz); ", throttled, " under 75 %",
          throttled > 0 ? " (cells flagged throttled)" : ""));
    }
    for (const auto& [c, count] : counts) {
      if (count.first > 0) {
        AddFlag(out.cells[c].flags, "throttled",
                absl::StrCat(count.first, " of ", count.second,
                             " measurements under 75 % of the default GPU clock"));
      }
    }
  } else {
    out.notes.push_back(
        "GPU clocks were not recorded (no gpu_clock_mhz / gpu_clock_default_mhz): throttling "
        "is unknown, not ruled out");
  }

  // Evidence that contradicts the request.
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT e.cell_id, e.kind, e.value FROM evidence e JOIN attempts a ON a.id = "
            "e.attempt_id "
            "WHERE e.run_id = ?1 AND a.state = 'done' AND e.stale = 0 "
            "AND e.kind IN ('backend_mismatch', 'throttled', 'probe_silent', "
            "'speculation_not_engaged', 'speculation_while_off', 'speculation_not_verifiable') "
            "ORDER BY e.id"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto value = ParseOr(stmt.Text(2), nlohmann::json());
      if (value == false || value.is_null()) continue;
      auto it = cell_index.find(stmt.Int(0));
      if (it == cell_index.end()) continue;
      std::string detail = value.is_string() ? value.get<std::string>() : value.dump();
      if (value == true) detail.clear();
      if (detail.size() > 120) detail = detail.substr(0, 117) + "...";
      AddFlag(out.cells[it->second].flags, stmt.Text(1), detail);
    }
  }

  // Warm-up.
  if (options.warmup == WarmupPolicy::kDiscardWarmup) {
    out.notes.push_back(absl::StrCat(
        "warm-up discarded: per process, rounds before the first window of ",
        options.steady_rule.window,
        " consecutive rounds with CV <= ", FormatNumber(100 * options.steady_rule.max_cv), " %"));
    for (size_t c = 0; c < rows.size(); ++c) {
      std::map<std::pair<int64_t, int64_t>, std::vector<Row>> series;
      for (const auto& r : rows[c]) series[{r.session, r.process}].push_back(r);
      std::vector<Row> kept;
      int never = 0;
      for (auto& [sp, list] : series) {
        std::sort(list.begin(), list.end(),
                  [](const Row& x, const Row& y) { return x.round < y.round; });
        std::vector<double> values;
        for (const auto& r : list) values.push_back(r.value);
        auto steady = stats::FindSteadyState(values, options.steady_rule);
        size_t first = 0;
        if (steady.ok() && steady->verdict == stats::SteadyVerdict::kSteady) {
          first = steady->first_steady;
        } else {
          ++never;
        }
        out.cells[c].discarded_warmup += static_cast<int64_t>(first);
        kept.insert(kept.end(), list.begin() + static_cast<std::ptrdiff_t>(first), list.end());
      }
      if (never > 0) {
        AddFlag(out.cells[c].flags, "never steady",
                absl::StrCat(never, " of ", series.size(), " processes kept whole"));
      }
      rows[c] = std::move(kept);
    }
  }

  // Per cell.
  for (size_t c = 0; c < out.cells.size(); ++c) {
    CellStats& cell = out.cells[c];
    std::set<int64_t> sessions;
    std::vector<double> values;
    for (const auto& r : rows[c]) {
      sessions.insert(r.session);
      values.push_back(r.value);
    }
    cell.n = static_cast<int64_t>(values.size());
    cell.sessions = static_cast<int64_t>(sessions.size());
    if (!acceptance[c].empty()) cell.acceptance_rate = Median(acceptance[c]);
    if (!acceptance_len[c].empty()) cell.mean_acceptance_length = Median(acceptance_len[c]);
    if (values.empty()) {
      AddFlag(cell.flags, "no data", "");
      continue;
    }
    auto summary = stats::Summarize(values);
    if (summary.ok()) cell.summary = *summary;
    stats::IntervalOptions interval_options;
    interval_options.confidence = options.confidence;
    auto interval = stats::CellMeanInterval(ToObservations(rows[c]), interval_options);
    if (interval.ok()) {
      cell.interval = *interval;
    } else {
      cell.interval_error = std::string(interval.status().message());
    }
    CellVariance variance{cell.key, std::nullopt, ""};
    auto components = stats::EstimateVarianceComponents(ToObservations(rows[c]));
    if (components.ok()) {
      variance.components = *components;
    } else {
      variance.error = std::string(components.status().message());
    }
    out.variance.push_back(std::move(variance));
  }

  // Per-level summary.
  {
    std::array<std::vector<double>, stats::kNumLevels> t, share, t2;
    for (const auto& v : out.variance) {
      if (!v.components) continue;
      ++out.levels.cells;
      for (size_t l = 0; l < stats::kNumLevels; ++l) {
        if (std::isnan(v.components->t2[l])) continue;
        t[l].push_back(std::sqrt(v.components->t2[l]));
        t2[l].push_back(v.components->t2[l]);
        share[l].push_back(v.components->share[l]);
      }
      if (out.levels.note.empty()) out.levels.note = v.components->note;
      if (out.levels.cells == 1) out.levels.df = v.components->df;
    }
    stats::VarianceComponents median;
    for (size_t l = 0; l < stats::kNumLevels; ++l) {
      out.levels.median_t[l] = Median(t[l]);
      out.levels.median_share[l] = Median(share[l]);
      median.t2[l] = t2[l].empty() ? kNaN : Median(t2[l]);
    }
    if (out.levels.cells > 0) {
      // An unidentified level is held by the level above it; counting it as 0 is exact then.
      stats::VarianceComponents for_plan = median;
      for (auto& x : for_plan.t2) {
        if (std::isnan(x)) x = 0;
      }
      const stats::RepeatPlan design{static_cast<int>(std::max<int64_t>(1, info.rounds)),
                                     static_cast<int>(std::max<int64_t>(1, info.processes))};
      stats::SessionsNeededOptions two, five;
      two.target_relative_half_width = 0.02;
      two.confidence = options.confidence;
      five.target_relative_half_width = 0.05;
      five.confidence = options.confidence;
      if (auto n = stats::SessionsNeededFor(for_plan, design, two); n.ok()) {
        out.levels.sessions_for_2pct = *n;
        out.levels.sessions_for_2pct_text = SessionsNeededText(*n);
      }
      if (auto n = stats::SessionsNeededFor(for_plan, design, five); n.ok()) {
        out.levels.sessions_for_5pct = *n;
        out.levels.sessions_for_5pct_text = SessionsNeededText(*n);
      }
      bool process_below_resolution = false;
      if (options.costs) {
        out.levels.costs = *options.costs;
        out.levels.costs_source = "given";
      } else if (auto measured = MeasureLevelCosts(db, run_id); measured.ok()) {
        out.levels.costs = static_cast<const stats::LevelCosts&>(*measured);
        out.levels.costs_source = "measured";
        out.levels.costs_note = measured->note;
        process_below_resolution = measured->process_below_resolution;
      } else {
        out.levels.costs_note = std::string(measured.status().message());
      }
      if (out.levels.costs) {
        if (auto plan = stats::OptimalRepeats(median, *out.levels.costs); plan.ok()) {
          out.levels.optimal = *plan;
          out.levels.rounds_text = RepeatText(plan->rounds_per_process, plan->rounds_bound);
          out.levels.processes_text =
              RepeatText(plan->processes_per_session, plan->processes_bound);
          if (process_below_resolution &&
              plan->processes_bound != stats::RepeatBound::kNoVariance) {
            out.levels.warnings.push_back(
                "the process start is below the 1 ms resolution of the time stamps, so "
                "processes per session is a lower bound and rounds per process an upper one; "
                "give --cost-process to plan with a known cost");
          }
        }
      }
      // Few degrees of freedom: a variance component from a handful of units is uncertain by a
      // large factor (with 2 df its 95 % range spans ~40x), and everything planned from it is too.
      constexpr double kFewDf = 5;
      const char* names[] = {"round", "process", "session"};
      for (size_t l = 0; l < stats::kNumLevels; ++l) {
        const double df = out.levels.df[l];
        if (df > 0 && df < kFewDf) {
          out.levels.warnings.push_back(absl::StrCat(
              "the ", names[l], " component rests on ", df, " degree", df == 1 ? "" : "s",
              " of freedom", l == stats::kSession ? " (sessions − 1)" : "",
              ": the sessions needed and the plan can be off by a factor of several"));
        }
      }
    }
  }

  // Sessions of this run.
  {
    std::map<int64_t, std::pair<int64_t, std::set<size_t>>> per_session;
    for (size_t c = 0; c < rows.size(); ++c) {
      for (const auto& r : rows[c]) {
        ++per_session[r.session].first;
        per_session[r.session].second.insert(c);
      }
    }
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT hostname, state, cpu_model FROM sessions WHERE id = ?1"));
    ASSIGN_OR_RETURN(
        db::Statement gpus,
        db.Prepare(
            "SELECT name, arch, driver FROM session_gpus WHERE session_id = ?1 ORDER BY idx"));
    for (size_t s = 0; s < session_names.size(); ++s) {
      SessionInfo si;
      si.session_id = session_names[s];
      stmt.Reset();
      stmt.Bind(1, si.session_id);
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (row) {
        si.hostname = stmt.Text(0);
        si.state = stmt.Text(1);
        si.cpu_model = stmt.Text(2);
      }
      gpus.Reset();
      gpus.Bind(1, si.session_id);
      while (true) {
        ASSIGN_OR_RETURN(bool g, gpus.Step());
        if (!g) break;
        std::string text = gpus.Text(0);
        std::vector<std::string> extra;
        if (!gpus.Text(1).empty()) extra.push_back(gpus.Text(1));
        if (!gpus.Text(2).empty()) extra.push_back("driver " + gpus.Text(2));
        if (!extra.empty()) text += " (" + absl::StrJoin(extra, ", ") + ")";
        si.gpus.push_back(text);
      }
      auto it = per_session.find(static_cast<int64_t>(s));
      if (it != per_session.end()) {
        si.measurements = it->second.first;
        si.cells = static_cast<int64_t>(it->second.second.size());
      }
      if (si.measurements > 0) out.sessions.push_back(std::move(si));
    }
  }
  if (!out.cells.empty()) {
    int64_t max_sessions = 0;
    for (const auto& c : out.cells) max_sessions = std::max(max_sessions, c.sessions);
    if (max_sessions == 1) {
      out.notes.push_back(absl::StrCat("one session only: every ",
                                       std::string(stats::kWithinSessionNote),
                                       "; it says how well this machine was measured, nothing "
                                       "about another"));
    }
  }

  // Paired comparisons.
  std::map<std::vector<std::string>, size_t> by_values;
  for (size_t c = 0; c < out.cells.size(); ++c) by_values[out.cells[c].values] = c;
  for (size_t c = 0; c < out.cells.size(); ++c) {
    const CellStats& treatment = out.cells[c];
    for (const auto& pair_axis : info.pair_axes) {
      const auto axis_it = std::find(info.axes.begin(), info.axes.end(), pair_axis);
      if (axis_it == info.axes.end()) continue;
      const size_t p = static_cast<size_t>(axis_it - info.axes.begin());
      if (info.axis_values[p].empty()) continue;
      std::string baseline_value = info.axis_values[p].front();
      bool aa = false;
      if (info.aa_control && info.aa_control->axis == pair_axis &&
          treatment.values[p] == info.aa_control->as) {
        baseline_value = info.aa_control->of;  // the copy is judged against its source
        aa = true;
      }
      if (treatment.values[p] == baseline_value) continue;
      std::vector<std::string> key = treatment.values;
      key[p] = baseline_value;
      auto base_it = by_values.find(key);
      if (base_it == by_values.end()) continue;
      const CellStats& baseline = out.cells[base_it->second];

      Comparison cmp;
      cmp.pair_axis = pair_axis;
      cmp.baseline_value = baseline_value;
      cmp.treatment_value = treatment.values[p];
      cmp.baseline_key = baseline.key;
      cmp.treatment_key = treatment.key;
      cmp.aa = aa;
      cmp.context = nlohmann::json::object();
      std::vector<std::string> context_parts;
      for (size_t a = 0; a < info.axes.size(); ++a) {
        if (a == p) continue;
        context_parts.push_back(info.axes[a] + "=" + treatment.values[a]);
        cmp.context[info.axes[a]] = treatment.axes.value(info.axes[a], nlohmann::json());
      }
      cmp.context_key = absl::StrJoin(context_parts, ",");
      for (const auto& f : baseline.flags) AddFlag(cmp.flags, f.kind, f.detail);
      for (const auto& f : treatment.flags) AddFlag(cmp.flags, f.kind, f.detail);

      // Only sessions that measured both arms form pairs.
      std::set<int64_t> sa, sb;
      for (const auto& r : rows[base_it->second]) sa.insert(r.session);
      for (const auto& r : rows[c]) sb.insert(r.session);
      std::set<int64_t> both;
      std::set_intersection(sa.begin(), sa.end(), sb.begin(), sb.end(),
                            std::inserter(both, both.begin()));
      stats::PairedSample sample;
      for (const auto& r : rows[base_it->second]) {
        if (both.count(r.session)) sample.a.push_back({r.session, r.process, r.round, r.value});
      }
      for (const auto& r : rows[c]) {
        if (both.count(r.session)) sample.b.push_back({r.session, r.process, r.round, r.value});
      }
      cmp.sessions = static_cast<int64_t>(both.size());
      cmp.n_a = static_cast<int64_t>(sample.a.size());
      cmp.n_b = static_cast<int64_t>(sample.b.size());
      if (both.size() < std::max(sa.size(), sb.size())) {
        AddFlag(cmp.flags, "unpaired sessions",
                absl::StrCat(std::max(sa.size(), sb.size()) - both.size(),
                             " session(s) measured one arm only and are left out"));
      }
      if (both.empty()) {
        cmp.t.error = cmp.bootstrap.error = cmp.fieller.error = "no session measured both arms";
        out.comparisons.push_back(std::move(cmp));
        continue;
      }
      if (auto per_session = stats::SessionRatios(sample); per_session.ok()) {
        double ma = 0, mb = 0;
        for (const auto& s : *per_session) {
          ma += s.mean_a;
          mb += s.mean_b;
        }
        cmp.mean_a = ma / static_cast<double>(per_session->size());
        cmp.mean_b = mb / static_cast<double>(per_session->size());
      }
      stats::RatioOptions ratio_options;
      ratio_options.confidence = options.confidence;
      if (auto r = stats::PairedRatioInterval(sample, ratio_options); r.ok()) {
        cmp.t.interval = *r;
        cmp.change = stats::ClassifyChange(*r, options.threshold);
        cmp.verdict = VerdictText(cmp.change, info.direction);
        if (r->scope == stats::IntervalScope::kWithinSessionOnly) {
          cmp.verdict += " (this session only)";
        } else if (cmp.change == stats::ChangeClass::kWithin ||
                   cmp.change == stats::ChangeClass::kStraddles) {
          stats::PowerOptions power;
          power.threshold = options.threshold;
          power.confidence = options.confidence;
          if (auto d = stats::AchievedDetectableChange(*r, power); d.ok()) cmp.detectable = *d;
        }
        // An arm whose evidence says it is not what it claims (speculation that never drafted,
        // another backend, a probe that never fired) is not that arm: its ratio stays on screen
        // with the flag, and no verdict is drawn from it.
        for (const Flag& f : cmp.flags) {
          if (IsClaimFlag(f.kind)) {
            cmp.verdict = "withheld (" + f.kind + ")";
            break;
          }
        }
      } else {
        cmp.t.error = std::string(r.status().message());
      }
      if (options.bootstrap_draws > 0 && both.size() < stats::kMinSessionsForInterval) {
        // Four resamples of two sessions cover ~92 % (docs/statistics.md): not shown.
        cmp.bootstrap.error =
            stats::SessionsNeededNote(stats::kMinSessionsForInterval, both.size());
      } else if (options.bootstrap_draws > 0) {
        stats::BootstrapOptions boot;
        boot.confidence = options.confidence;
        boot.draws = options.bootstrap_draws;
        if (auto r = stats::BootstrapRatioInterval(sample, boot); r.ok()) {
          cmp.bootstrap.interval = *r;
        } else {
          cmp.bootstrap.error = std::string(r.status().message());
        }
      } else {
        cmp.bootstrap.error = "bootstrap skipped";
      }
      if (auto r = stats::FiellerRatioInterval(sample, ratio_options); r.ok()) {
        cmp.fieller.interval = *r;
      } else {
        cmp.fieller.error = std::string(r.status().message());
      }
      if (auto r = stats::DecomposeArmBySession(sample); r.ok()) {
        cmp.arm_session = *r;
      } else {
        cmp.arm_session_error = std::string(r.status().message());
      }
      out.comparisons.push_back(std::move(cmp));
    }
  }
  for (const auto& cmp : out.comparisons) {
    if (cmp.aa && cmp.t.interval && !cmp.t.interval->Contains(1.0)) {
      out.notes.push_back(absl::StrCat(
          "A/A control ", cmp.treatment_key, " vs ", cmp.baseline_key,
          ": the interval excludes 1 — the pipeline reports a difference between identical "
          "arms; treat other ratios of this size with suspicion"));
    }
  }

  // The depth axis and the ladder lines.
  for (size_t a = 0; a < info.axes.size(); ++a) {
    if (std::find(info.pair_axes.begin(), info.pair_axes.end(), info.axes[a]) !=
        info.pair_axes.end()) {
      continue;
    }
    bool numeric = !info.axis_values[a].empty();
    for (const auto& v : info.axis_values[a]) {
      double x = 0;
      if (!ParsePositiveNumber(v, &x)) numeric = false;
    }
    // The axis a crossover was located along is the chart's axis.
    if (info.locate && info.axes[a] == info.locate->axis && numeric) {
      out.depth_axis = info.axes[a];
      break;
    }
    if (info.axes[a] == "depth" && numeric && !info.locate) {
      out.depth_axis = info.axes[a];
      break;
    }
    if (numeric && out.depth_axis.empty()) out.depth_axis = info.axes[a];
  }
  {
    std::map<std::string, size_t> line_index;
    for (size_t i = 0; i < out.comparisons.size(); ++i) {
      const Comparison& cmp = out.comparisons[i];
      std::vector<std::string> parts;
      double depth = static_cast<double>(i);
      for (auto& [k, v] : SplitKey(cmp.context_key)) {
        if (k == out.depth_axis) {
          ParsePositiveNumber(v, &depth);
        } else {
          parts.push_back(k + "=" + v);
        }
      }
      const std::string line_key = absl::StrJoin(parts, ",");
      std::string label = absl::StrJoin(parts, " ");
      label += std::string(label.empty() ? "" : " · ") + cmp.pair_axis + " " + cmp.treatment_value +
               " vs " + cmp.baseline_value;
      auto [it, inserted] = line_index.try_emplace(label, out.lines.size());
      if (inserted) {
        LadderLine line;
        line.label = label;
        line.pair_axis = cmp.pair_axis;
        line.treatment_value = cmp.treatment_value;
        line.baseline_value = cmp.baseline_value;
        line.aa = cmp.aa;
        line.key = line_key;
        out.lines.push_back(std::move(line));
      }
      out.lines[it->second].points.push_back(i);
      out.lines[it->second].depths.push_back(depth);
    }
    for (auto& line : out.lines) {
      std::vector<size_t> order(line.points.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      std::sort(order.begin(), order.end(),
                [&](size_t x, size_t y) { return line.depths[x] < line.depths[y]; });
      std::vector<size_t> points;
      std::vector<double> depths;
      for (size_t k : order) {
        points.push_back(line.points[k]);
        depths.push_back(line.depths[k]);
      }
      line.points = std::move(points);
      line.depths = std::move(depths);
      if (out.depth_axis.empty()) continue;
      stats::LocateOptions locate = options.locate;
      if (info.locate) {  // the bracket the coordinator worked to, not the reader's default
        locate.resolution_octaves = info.locate->resolution_octaves;
        locate.min_step = static_cast<double>(info.locate->min_step);
      }
      CrossingFit found =
          FitCrossing(out, line.points, line.depths, locate, options.confidence, "depths");
      line.crossing = std::move(found.crossing);
      line.crossover_fit = std::move(found.fit);
      line.crossover_error = std::move(found.error);
    }
  }
  if (info.locate) RETURN_IF_ERROR(AddLocated(db, out));
  RETURN_IF_ERROR(AddStartsSaid(db, run_id, out));
  RETURN_IF_ERROR(AddLoad(db, options, out));
  return out;
}

CrossingFit FitCrossing(const RunAnalysis& a, const std::vector<size_t>& points,
                        const std::vector<double>& xs, const stats::LocateOptions& locate,
                        double confidence, const std::string& axis_plural) {
  CrossingFit out;
  std::vector<stats::LadderPoint> ladder;
  std::vector<double> x, diff;
  for (size_t k = 0; k < points.size(); ++k) {
    const Comparison& cmp = a.comparisons[points[k]];
    if (!cmp.t.interval || !(cmp.t.interval->estimate > 0)) continue;
    ladder.push_back({xs[k], *cmp.t.interval});
    x.push_back(xs[k]);
    // Per-token latency difference B − A: the time itself for times, 1/rate for rates.
    if (a.info.direction == Direction::kHigherIsBetter) {
      diff.push_back(1.0 / cmp.mean_b - 1.0 / cmp.mean_a);
    } else {
      diff.push_back(cmp.mean_b - cmp.mean_a);
    }
  }
  if (ladder.size() < 2) {
    out.too_few_ratios = true;
    out.error = absl::StrCat(ladder.size(), " of ", points.size(), " ", axis_plural,
                             " have a ratio with an interval; a sign change needs 2");
    return out;
  }
  auto plan = stats::PlanCrossoverProbe(ladder, locate);
  if (!plan.ok()) {
    out.error = std::string(plan.status().message());
    return out;
  }
  if (plan->status == stats::LocateStatus::kNoCrossing) return out;
  out.crossing = *plan;
  if (x.size() >= 3) {
    auto fit = stats::CrossoverFromLinearFit(x, diff, confidence);
    if (fit.ok()) {
      out.fit = *fit;
    } else {
      out.error = std::string(fit.status().message());
    }
  } else {
    out.error = "a linear fit needs 3 " + axis_plural;
  }
  return out;
}

absl::StatusOr<RunReproducibility> CompareRunAnalyses(const RunAnalysis& a, const RunAnalysis& b) {
  RunReproducibility out;
  out.run_a = a.info.run_id;
  out.run_b = b.info.run_id;
  out.same_matrix = a.info.matrix_sha256 == b.info.matrix_sha256;
  if (a.info.metric != b.info.metric) {
    return absl::InvalidArgumentError(absl::StrCat("runs ", a.info.run_id, " and ", b.info.run_id,
                                                   " report different metrics (", a.info.metric,
                                                   ", ", b.info.metric, ")"));
  }
  std::vector<double> va, vb;
  for (const auto& cell : a.cells) {
    const CellStats* other = b.FindCell(cell.key);
    if (!other || !cell.summary || !other->summary) continue;
    if (!(cell.summary->mean > 0) || !(other->summary->mean > 0)) continue;
    out.rows.push_back({cell.key, cell.summary->mean, other->summary->mean, 0.0});
    va.push_back(cell.summary->mean);
    vb.push_back(other->summary->mean);
  }
  if (out.rows.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "runs ", a.info.run_id, " and ", b.info.run_id, " share no measured cell key"));
  }
  ASSIGN_OR_RETURN(stats::Reproducibility repro, stats::CompareRuns(va, vb));
  for (size_t i = 0; i < out.rows.size(); ++i) out.rows[i].percent = repro.percent_difference[i];
  out.summary = repro.summary;
  out.note = out.same_matrix ? "same matrix (sha256): every cell matched by key"
                             : absl::StrCat("different matrices: ", out.rows.size(),
                                            " cells matched by equal keys");
  return out;
}

}  // namespace ladder::report
