#include "ladder/report/history.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "internal.h"
#include "ladder/stats/changepoint.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/summary.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

struct SeriesRunRow {
  int64_t id = 0, created_at = 0;
  std::string state, sha, metric;
};

absl::StatusOr<std::vector<SeriesRunRow>> RunsOfMatrix(db::Database& db,
                                                       const std::string& matrix_name) {
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db.Prepare("SELECT r.id, r.created_at, r.state, m.sha256, r.metric FROM runs r "
                              "JOIN matrices m ON m.id = r.matrix_id WHERE m.name = ?1 "
                              "ORDER BY r.id"));
  stmt.Bind(1, matrix_name);
  std::vector<SeriesRunRow> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back({stmt.Int(0), stmt.Int(1), stmt.Text(2), stmt.Text(3), stmt.Text(4)});
  }
  if (out.empty()) {
    ASSIGN_OR_RETURN(db::Statement names,
                     db.Prepare("SELECT DISTINCT name FROM matrices ORDER BY name LIMIT 20"));
    std::vector<std::string> known;
    while (true) {
      ASSIGN_OR_RETURN(bool row, names.Step());
      if (!row) break;
      known.push_back(names.Text(0));
    }
    return absl::NotFoundError(absl::StrCat(
        "no matrix named '", matrix_name, "' in ", db.path(),
        known.empty() ? " (it holds no run)" : "; its matrices: " + absl::StrJoin(known, ", ")));
  }
  return out;
}

// What the sessions of a run recorded, attribute -> distinct values.
absl::StatusOr<std::map<std::string, std::set<std::string>>> Recorded(db::Database& db,
                                                                      int64_t run_id,
                                                                      int64_t* sessions) {
  std::map<std::string, std::set<std::string>> out;
  std::vector<std::string> ids;
  {
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT DISTINCT s.id, s.hostname, s.software, s.labels FROM units "
                                "u JOIN attempts a ON a.unit_id = u.id AND a.state = 'done' JOIN "
                                "sessions s ON s.id = a.session_id WHERE u.run_id = ?1"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      ids.push_back(stmt.Text(0));
      out["host"].insert(stmt.Text(1));
      auto software = nlohmann::json::parse(stmt.Text(2), nullptr, false);
      if (software.is_object()) {
        std::string ladder;
        if (software.contains("ladder") && software["ladder"].is_string()) {
          ladder = software["ladder"].get<std::string>();
        }
        if (software.contains("ladder_commit") && software["ladder_commit"].is_string()) {
          const std::string commit = software["ladder_commit"].get<std::string>();
          if (!commit.empty() && ladder.find(commit) == std::string::npos) {
            ladder += ladder.empty() ? commit : " (" + commit + ")";
          }
        }
        if (!ladder.empty()) out["ladder"].insert(ladder);
        if (software.contains("nvidia_driver") && software["nvidia_driver"].is_string()) {
          out["driver"].insert(software["nvidia_driver"].get<std::string>());
        }
      }
      auto labels = nlohmann::json::parse(stmt.Text(3), nullptr, false);
      if (labels.is_object()) {
        for (const auto& [k, v] : labels.items()) {
          out["label." + k].insert(v.is_string() ? v.get<std::string>() : v.dump());
        }
      }
    }
  }
  *sessions = static_cast<int64_t>(ids.size());
  {
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT DISTINCT g.name, g.driver FROM units u JOIN attempts a ON "
                                "a.unit_id = u.id AND a.state = 'done' JOIN session_gpus g ON "
                                "g.session_id = a.session_id WHERE u.run_id = ?1"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      if (!stmt.Text(0).empty()) out["gpu"].insert(stmt.Text(0));
      if (!stmt.Text(1).empty()) out["driver"].insert(stmt.Text(1));
    }
  }
  {
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT DISTINCT e.value FROM cells c JOIN evidence e ON "
                                "e.cell_id = c.id AND e.kind = 'engine_version' WHERE c.run_id = "
                                "?1 AND e.stale = 0"));
    stmt.Bind(1, run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto v = nlohmann::json::parse(stmt.Text(0), nullptr, false);
      out["engine"].insert(v.is_string() ? v.get<std::string>() : stmt.Text(0));
    }
  }
  return out;
}

bool KeyMatches(const std::string& key, const std::vector<std::string>& wanted) {
  const auto pairs = SplitKey(key);
  for (const auto& item : wanted) {
    bool found = false;
    for (const auto& [k, v] : pairs) found = found || item == k + "=" + v;
    if (!found) return false;
  }
  return true;
}

// What differs between two runs: tags first, then what their sessions recorded.
std::vector<std::string> Differences(const HistoryRun& before, const HistoryRun& at) {
  std::vector<std::string> out;
  auto diff = [&](const std::map<std::string, std::string>& a,
                  const std::map<std::string, std::string>& b, const std::string& prefix) {
    std::set<std::string> keys;
    for (const auto& [k, v] : a) keys.insert(k);
    for (const auto& [k, v] : b) keys.insert(k);
    for (const auto& k : keys) {
      auto ia = a.find(k), ib = b.find(k);
      const std::string va = ia == a.end() ? "(none)" : ia->second;
      const std::string vb = ib == b.end() ? "(none)" : ib->second;
      if (va != vb) out.push_back(absl::StrCat(prefix, k, ": ", va, " → ", vb));
    }
  };
  diff(before.tags, at.tags, "tag ");
  diff(before.recorded, at.recorded, "");
  if (before.matrix_sha256 != at.matrix_sha256) out.push_back("the matrix file changed");
  return out;
}

std::string Pct(double log_ratio) { return FormatChange(std::exp(log_ratio)); }

std::string PValue(double p) { return p < 0.001 ? "< 0.001" : absl::StrFormat("%.3f", p); }

size_t DisplayWidth(const std::string& t) {
  size_t w = 0;
  for (unsigned char c : t) w += (c & 0xC0) != 0x80;
  return w;
}

// `text` word-wrapped to 100 columns, continuation lines indented by `indent` spaces.
std::string Wrap(const std::string& text, size_t indent = 2) {
  std::string out, line(std::min(text.find_first_not_of(' '), text.size()), ' ');
  for (const auto& word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    const std::string w(word);
    if (line.find_first_not_of(' ') != std::string::npos &&
        DisplayWidth(line) + 1 + DisplayWidth(w) > 100) {
      out += line + "\n";
      line = std::string(indent, ' ') + w;
    } else {
      line += (line.empty() || line.back() == ' ' ? "" : " ") + w;
    }
  }
  return out + line + "\n";
}

// The change-point over one series, from the baseline's point to the latest run's.
void Locate(const MatrixHistory& h, const std::map<int64_t, const HistoryRun*>& runs,
            const HistoryOptions& options, HistorySeries& s) {
  ChangeLocation& c = s.change;
  c.searched = true;
  std::vector<stats::SeriesPoint> points;
  std::vector<size_t> index;  // into s.points
  int64_t without_interval = 0;
  bool from_baseline = false;
  for (size_t i = 0; i < s.points.size(); ++i) {
    const HistoryPoint& p = s.points[i];
    if (p.run_id == h.baseline_run) from_baseline = true;
    if (!from_baseline) continue;
    if (!p.interval || p.interval->scope != stats::IntervalScope::kBetweenSessions ||
        !(p.interval->lower > 0)) {
      ++without_interval;
      continue;
    }
    const double t = stats::TwoSidedT(p.interval->confidence, p.interval->df);
    const double se = (std::log(p.interval->upper) - std::log(p.interval->lower)) / (2 * t);
    points.push_back({std::log(p.interval->estimate), std::isfinite(se) ? se : 0.0});
    index.push_back(i);
  }
  const std::string skipped = without_interval > 0
                                  ? absl::StrCat(" (", without_interval,
                                                 " run(s) without a between-session interval left "
                                                 "out)")
                                  : "";
  stats::ChangePointOptions cp_options;
  cp_options.alpha = 1 - options.confidence;
  cp_options.draws = options.change_point_draws;
  auto cp = stats::FindChangePoint(points, cp_options);
  if (!cp.ok()) {
    c.text = absl::StrCat("cannot locate where it began: ", cp.status().message(), skipped);
    return;
  }
  c.p_value = cp->p_value;
  c.step = cp->step;
  c.drift_sd = cp->drift_sd;
  c.first_run = s.points[index[cp->index]].run_id;
  for (size_t k : cp->plausible) c.plausible_runs.push_back(s.points[index[k]].run_id);
  const std::string drift = absl::StrCat("run-to-run drift estimated from the series ±",
                                         FormatNumber(100 * cp->drift_sd), " %");
  if (!cp->detected) {
    c.text = absl::StrCat(
        "cannot locate where it began: no single step stands out of the "
        "series' run-to-run variation (best: ",
        Pct(cp->step), " at run ", c.first_run, ", p = ", PValue(cp->p_value), "; ", drift, ")",
        skipped);
    return;
  }
  auto at = runs.find(c.first_run);
  const size_t k = index[cp->index];
  if (at != runs.end() && k > 0) {
    auto before = runs.find(s.points[index[cp->index - 1]].run_id);
    if (before != runs.end()) c.changes = Differences(*before->second, *at->second);
  }
  if (cp->plausible.size() == 1) {
    c.located = true;
    for (size_t i = k; i < s.points.size(); ++i) s.points[i].moved = true;
    c.text = absl::StrCat("began at run ", c.first_run, ": ", Pct(cp->step),
                          " from there on (p = ", PValue(cp->p_value), "; ", drift, ")", skipped);
  } else {
    c.text = absl::StrCat("cannot locate it to one run: it began at one of runs ",
                          absl::StrJoin(c.plausible_runs, ", "),
                          " (their intervals overlap; most likely run ", c.first_run, ", ",
                          Pct(cp->step), ", p = ", PValue(cp->p_value), "; ", drift, ")", skipped);
  }
  if (c.changes.empty() && at != runs.end()) {
    c.changes.push_back("no tag or recorded build, driver, GPU, engine or host changed there");
  }
}

}  // namespace

std::string DateText(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof(buffer), "%Y-%m-%d %H:%M", &tm);
  return buffer;
}

std::string TagsText(const db::RunTags& tags) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : tags) parts.push_back(k + "=" + v);
  return absl::StrJoin(parts, " ");
}

absl::Status HistoryOptions::Validate() const {
  CompareOptions compare;
  compare.threshold = threshold;
  compare.confidence = confidence;
  compare.host_drift = host_drift;
  RETURN_IF_ERROR(compare.Validate());
  if (change_point_draws < 19) {
    return absl::InvalidArgumentError("change_point_draws must be >= 19");
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ResolveSeriesRun(db::Database& db, const std::string& matrix_name,
                                         const std::string& text) {
  ASSIGN_OR_RETURN(std::vector<SeriesRunRow> runs, RunsOfMatrix(db, matrix_name));
  if (text == "latest") return runs.back().id;
  if (!text.empty() &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    const int64_t id = std::stoll(text);
    for (const auto& r : runs) {
      if (r.id == id) return id;
    }
    auto other = db::MatrixNameOfRun(db, id);
    if (!other.ok()) return other.status();
    return absl::InvalidArgumentError(
        absl::StrCat("run ", id, " is a run of matrix '", *other, "', not of '", matrix_name, "'"));
  }
  return ResolveBaseline(db, matrix_name, text == "baseline" ? db::kDefaultBaseline : text);
}

absl::StatusOr<int64_t> ResolveBaseline(db::Database& db, const std::string& matrix_name,
                                        const std::string& name) {
  RETURN_IF_ERROR(RunsOfMatrix(db, matrix_name).status());
  ASSIGN_OR_RETURN(std::optional<db::Baseline> found, db::FindBaseline(db, matrix_name, name));
  if (found) return found->run_id;
  ASSIGN_OR_RETURN(std::vector<db::Baseline> all, db::ListBaselines(db, matrix_name));
  std::vector<std::string> names;
  for (const auto& b : all) names.push_back(b.name);
  return absl::NotFoundError(
      absl::StrCat("matrix '", matrix_name, "' has no baseline named '", name, "'",
                   names.empty() ? "; set one with `ladder baseline set RUN`"
                                 : "; its baselines: " + absl::StrJoin(names, ", ")));
}

absl::StatusOr<MatrixHistory> ReadHistory(db::Database& db, const std::string& matrix_name,
                                          const HistoryOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::vector<SeriesRunRow> rows, RunsOfMatrix(db, matrix_name));
  MatrixHistory h;
  h.matrix_name = matrix_name;
  h.threshold = options.threshold;
  h.confidence = options.confidence;
  h.metric = options.metric.empty() ? rows.back().metric : options.metric;
  // The baseline.
  if (options.baseline_run) {
    ASSIGN_OR_RETURN(h.baseline_run,
                     ResolveSeriesRun(db, matrix_name, std::to_string(*options.baseline_run)));
    h.baseline_source = absl::StrCat("run ", h.baseline_run, " (given)");
  } else {
    ASSIGN_OR_RETURN(std::optional<db::Baseline> named,
                     db::FindBaseline(db, matrix_name, options.baseline));
    if (named) {
      h.baseline_run = named->run_id;
      h.baseline_name = named->name;
      h.baseline_source = absl::StrCat("baseline '", named->name, "' (run ", named->run_id, ")");
    } else if (options.baseline == db::kDefaultBaseline) {
      h.baseline_source = "the first run (no baseline set: `ladder baseline set RUN`)";
    } else {
      RETURN_IF_ERROR(ResolveSeriesRun(db, matrix_name, options.baseline).status());
    }
  }
  // Each run, read once.
  std::vector<HistoryRun> runs;
  std::vector<CompareRunData> data;
  std::vector<std::vector<std::string>> bys;
  int64_t without_metric = 0;
  for (const auto& row : rows) {
    RunRef ref{&db, row.id, absl::StrCat("run ", row.id)};
    std::vector<std::string> by = options.by;
    auto read = ReadCompareRun(ref, h.metric, &by, CellMatch::kAxesAndFixedParameters);
    if (!read.ok()) {
      if (read.status().code() == absl::StatusCode::kInvalidArgument &&
          absl::StrContains(read.status().message(), "--by")) {
        return read.status();
      }
      ++without_metric;  // no measurement of the metric (yet): not part of the series
      continue;
    }
    HistoryRun run;
    run.run_id = row.id;
    run.created_at_ms = row.created_at;
    run.state = row.state;
    run.matrix_sha256 = row.sha;
    ASSIGN_OR_RETURN(run.tags, db::GetRunTags(db, row.id));
    ASSIGN_OR_RETURN(auto recorded, Recorded(db, row.id, &run.sessions));
    for (const auto& [k, values] : recorded) {
      run.recorded[k] = absl::StrJoin(values, ", ");
    }
    runs.push_back(std::move(run));
    data.push_back(*std::move(read));
    bys.push_back(std::move(by));
  }
  if (runs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("matrix '", matrix_name, "': no run has measurements of '", h.metric, "'"));
  }
  if (without_metric > 0) {
    h.notes.push_back(absl::StrCat(without_metric, " run(s) of the matrix have no measurement of ",
                                   h.metric, " and are left out"));
  }
  if (h.baseline_run == 0) h.baseline_run = runs.front().run_id;
  size_t base = runs.size();
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].run_id == h.baseline_run) base = i;
  }
  if (base == runs.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the baseline, run ", h.baseline_run, ", has no measurement of ", h.metric));
  }
  h.latest_run = runs.back().run_id;
  h.unit = data[base].unit;
  // Every run against the baseline, as `ladder compare` would.
  CompareOptions compare;
  compare.threshold = options.threshold;
  compare.confidence = options.confidence;
  compare.host_drift = options.host_drift;
  compare.direction = options.direction;
  compare.detectable = false;  // not shown by a history, and costly over a series
  RunRef base_ref{&db, h.baseline_run, absl::StrCat("run ", h.baseline_run)};
  // On one host, without a given allowance: the host's drift between runs estimated once from the
  // series itself — its runs on that host grouped by equal tags (the same build run again) — as
  // `ladder compare` estimates it per comparison.
  std::map<std::string, DriftEstimate> drift_by_machine;
  if (!options.host_drift) {
    std::vector<DriftCandidate> candidates;
    std::set<std::string> machines;
    for (size_t i = 0; i < runs.size(); ++i) {
      if (data[i].hosts.size() == 1) machines.insert(data[i].hosts.begin()->first);
      candidates.push_back({runs[i].run_id, RunTagsKey(db, runs[i].run_id), &data[i]});
    }
    for (const std::string& machine : machines) {
      drift_by_machine[machine] = EstimateDriftFromRuns(machine, candidates);
    }
  }
  std::set<std::string> drift_sources;  // of the one-host comparisons made
  std::map<std::string, HistorySeries> by_key;
  std::vector<std::string> order;
  bool mixed_params = false;
  double one_host_band = 0;  // the widened band of a comparison whose runs shared one host
  for (size_t i = 0; i < runs.size(); ++i) {
    std::map<std::string, const CompareRow*> rows_of;
    std::optional<RunComparison> comparison;
    if (i != base) {
      RunRef ref{&db, runs[i].run_id, absl::StrCat("run ", runs[i].run_id)};
      auto compared =
          CompareReadRuns(base_ref, data[base], ref, data[i], compare, bys[i], AxesMustAgree::kNo,
                          options.host_drift ? nullptr : &drift_by_machine);
      if (compared.ok()) {
        comparison = *std::move(compared);
        for (const auto& row : comparison->rows) rows_of[row.key] = &row;
        runs[i].matrix_verdicts = comparison->matrix_verdicts;
        if (!comparison->one_host.empty()) {
          one_host_band = comparison->band;
          drift_sources.insert(comparison->drift_source);
        }
        if (h.direction == Direction::kUnknown) h.direction = comparison->direction;
      } else if (compared.status().code() == absl::StatusCode::kFailedPrecondition) {
        runs[i].note = "shares no cell with the baseline";
      } else {
        return compared.status();
      }
    }
    for (const auto& key : data[i].order) {
      const auto cut = key.find(kFixedSeparator);
      const std::string shown = key.substr(0, cut);
      if (!options.cells.empty() && !KeyMatches(shown, options.cells)) continue;
      auto [it, fresh] = by_key.try_emplace(key);
      if (fresh) {
        order.push_back(key);
        it->second.key = shown;
        if (cut != std::string::npos) {
          it->second.fixed_params = key.substr(cut + kFixedSeparator.size());
        }
      }
      const CompareGroup& g = data[i].groups.at(key);
      HistoryPoint p;
      p.run_id = runs[i].run_id;
      p.sessions = static_cast<int64_t>(g.sessions.size());
      p.value = kNaN;
      auto interval = stats::CellMeanInterval(g.observations, {.confidence = options.confidence});
      if (interval.ok()) {
        p.interval = *interval;
        p.value = interval->estimate;
      } else {
        p.interval_error = std::string(interval.status().message());
        auto h_all = stats::BuildHierarchy(g.observations, stats::ValueDomain::kPositive);
        if (h_all.ok()) {
          double sum = 0;
          for (const auto& s : h_all->sessions) sum += std::log(stats::SessionMean(s));
          p.value = std::exp(sum / static_cast<double>(h_all->sessions.size()));
        }
      }
      if (i == base) {
        p.verdict = p.matrix_verdict = "baseline";
      } else if (auto r = rows_of.find(key); r != rows_of.end()) {
        p.ratio = r->second->ratio;
        p.verdict = r->second->verdict;
        p.matrix_verdict = r->second->matrix_verdict;
      } else {
        p.verdict = p.matrix_verdict = "-";
      }
      it->second.points.push_back(std::move(p));
    }
  }
  if (h.direction == Direction::kUnknown) {
    h.direction = options.direction != Direction::kUnknown
                      ? options.direction
                      : DirectionOfMetric(db, h.baseline_run, h.metric, h.unit);
  }
  if (order.empty()) {
    return absl::InvalidArgumentError(
        options.cells.empty()
            ? absl::StrCat("matrix '", matrix_name, "' has no measured cell")
            : absl::StrCat("--cells: no cell holds ", absl::StrJoin(options.cells, ",")));
  }
  if (drift_sources.count("estimated")) {
    h.notes.push_back(
        "every session of the runs compared ran on one host: as `ladder compare` does, each "
        "verdict's interval carries that host's drift between runs, estimated per cell from the "
        "series' runs with equal tags (the same build run again) with its df");
  }
  if (drift_sources.count("unknown")) {
    h.notes.push_back(
        "⚠ one host and no two runs with equal tags (--tag build=…): between-run drift unknown, "
        "so the one-host comparisons are inconclusive; run the same build again with the same "
        "tag, pair the builds in one run (`compare --arms`), or state --host-drift");
  }
  if (drift_sources.count("given") && one_host_band > 0) {
    h.notes.push_back(absl::StrCat(
        "every session of the runs compared ran on one host: as `ladder compare` does, their "
        "verdicts judge against ±",
        FormatDf(100 * one_host_band),
        " % (the band widened by the --host-drift allowance), since no run's interval sees that "
        "host's drift between runs; the change-point instead estimates it from the series"));
  }
  std::set<std::string> shown_keys;
  for (const auto& key : order) {
    if (!shown_keys.insert(by_key[key].key).second) mixed_params = true;
  }
  if (!mixed_params) {
    for (auto& [k, s] : by_key) s.fixed_params.clear();
  }
  std::map<int64_t, const HistoryRun*> run_index;
  for (const auto& r : runs) run_index[r.run_id] = &r;
  for (const auto& key : order) {
    HistorySeries& s = by_key[key];
    const HistoryPoint& last = s.points.back();
    if (last.run_id == h.latest_run && last.matrix_verdict == "slower") {
      Locate(h, run_index, options, s);
    }
    h.series.push_back(std::move(s));
  }
  h.runs = std::move(runs);
  return h;
}

std::string RenderHistoryText(const MatrixHistory& h) {
  std::string out = Wrap(absl::StrCat("History of ", h.matrix_name, ": ", h.metric,
                                      h.unit.empty() ? "" : " (" + h.unit + ", ",
                                      h.unit.empty() ? "" : DirectionText(h.direction) + ")", ", ",
                                      h.runs.size(), " runs, ", h.series.size(), " cells"));
  out += Wrap(absl::StrCat("Baseline: ", h.baseline_source, ". Latest: run ", h.latest_run, "."));
  out += Wrap(absl::StrCat(
      "Value: geometric mean of session means with its ", FormatDf(100 * h.confidence),
      " % interval; change and verdict against the baseline as `ladder compare` gives them "
      "(band ±",
      FormatDf(100 * h.threshold), " %, matrix verdict by Holm over the cells two runs share)."));
  // The runs: what distinguishes each (tags, then what the sessions recorded).
  out += "\nRuns\n";
  std::map<std::string, std::string> previous;
  for (const auto& r : h.runs) {
    std::string line = absl::StrCat(r.run_id == h.baseline_run ? "* " : "  ", "run ", r.run_id,
                                    "  ", DateText(r.created_at_ms), "  ", r.sessions, " sessions");
    if (r.state != "done") line += "  (" + r.state + ")";
    const std::string tags = TagsText(r.tags);
    if (!tags.empty()) line += "  " + tags;
    std::vector<std::string> changed;
    for (const auto& [k, v] : r.recorded) {
      auto it = previous.find(k);
      if (previous.empty() || it == previous.end() || it->second != v) {
        changed.push_back(k + "=" + v);
      }
    }
    if (!changed.empty()) {
      line += absl::StrCat(r.run_id == h.runs.front().run_id ? "  " : "  changed: ",
                           absl::StrJoin(changed, " "));
    }
    if (line.size() > 100) line = line.substr(0, 97) + "...";
    out += line + "\n";
    previous = r.recorded;
  }
  out += "(* the baseline)\n";
  const std::string unit = h.unit.empty() ? "" : " " + h.unit;
  for (const auto& s : h.series) {
    out += absl::StrCat("\n", s.key, s.fixed_params.empty() ? "" : "  " + s.fixed_params, "\n");
    const std::string header = absl::StrCat("  run  date              ", "value", unit);
    std::vector<std::vector<std::string>> rows;
    rows.push_back(
        {"run", "date", "value" + unit, "95 % interval", "sess", "vs base", "verdict", "", "tags"});
    for (const auto& p : s.points) {
      std::string mark;
      if (p.run_id == h.baseline_run) mark = "◀ baseline";
      if (s.change.located && p.run_id == s.change.first_run)
        mark = "◀ began here";
      else if (p.moved)
        mark = "moved";
      rows.push_back({std::to_string(p.run_id),
                      [&] {
                        for (const auto& r : h.runs) {
                          if (r.run_id == p.run_id) return DateText(r.created_at_ms);
                        }
                        return std::string("-");
                      }(),
                      FormatNumber(p.value), p.interval ? FormatInterval(*p.interval) : "-",
                      std::to_string(p.sessions), p.ratio ? FormatChange(p.ratio->estimate) : "",
                      p.matrix_verdict == "baseline" ? "" : p.matrix_verdict, mark,
                      [&] {
                        for (const auto& r : h.runs) {
                          if (r.run_id == p.run_id) return TagsText(r.tags);
                        }
                        return std::string();
                      }()});
    }
    // Column widths (display width: the marks hold one multi-byte glyph).
    auto width = [](const std::string& t) {
      size_t w = 0;
      for (unsigned char c : t) w += (c & 0xC0) != 0x80;
      return w;
    };
    std::vector<size_t> widths(rows[0].size(), 0);
    for (const auto& row : rows) {
      for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], width(row[c]));
    }
    (void)header;
    // The tags take what is left of 100 columns, cut with an ellipsis.
    size_t used = 1;
    for (size_t c = 0; c + 1 < widths.size(); ++c) used += widths[c] + 1;
    const size_t room = used + 5 < 100 ? 100 - used - 1 : 4;
    for (auto& row : rows) {
      std::string& tags = row.back();
      if (width(tags) > room) {
        size_t keep = 0, w = 0;
        while (keep < tags.size() && w + 1 < room) {
          ++keep;
          while (keep < tags.size() && (static_cast<unsigned char>(tags[keep]) & 0xC0) == 0x80) {
            ++keep;
          }
          ++w;
        }
        tags = tags.substr(0, keep) + "…";
      }
    }
    widths.back() = std::min(widths.back(), room);
    for (const auto& row : rows) {
      std::string line = " ";
      for (size_t c = 0; c < row.size(); ++c) {
        const bool right = c == 0 || c == 2 || c == 4 || c == 5;
        const std::string pad(widths[c] - width(row[c]), ' ');
        line += " " + (right ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : ""));
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
    if (s.change.searched) {
      out += Wrap("  Where it began: " + s.change.text + ".", 4);
      if (!s.change.changes.empty()) {
        out += Wrap("  Changed at run " + std::to_string(s.change.first_run) + ": " +
                        absl::StrJoin(s.change.changes, "; ") + ".",
                    4);
      }
    }
  }
  for (const auto& n : h.notes) out += Wrap("Note: " + n + ".");
  return out;
}

std::string RenderHistoryCsv(const MatrixHistory& h) {
  auto quote = [](const std::string& t) {
    if (t.find_first_of(",\"\n") == std::string::npos) return t;
    std::string out = "\"";
    for (char c : t) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + "\"";
  };
  auto num = [](double x) { return std::isfinite(x) ? absl::StrCat(x) : std::string(); };
  std::string out =
      "cell,run_id,created_at_ms,tags,sessions,value,lower,upper,df,ratio,ratio_lower,"
      "ratio_upper,verdict,matrix_verdict,baseline,moved,began_here\n";
  std::map<int64_t, const HistoryRun*> runs;
  for (const auto& r : h.runs) runs[r.run_id] = &r;
  for (const auto& s : h.series) {
    for (const auto& p : s.points) {
      const HistoryRun* r = runs[p.run_id];
      out += absl::StrCat(
          quote(s.key + (s.fixed_params.empty() ? "" : " " + s.fixed_params)), ",", p.run_id, ",",
          r->created_at_ms, ",", quote(TagsText(r->tags)), ",", p.sessions, ",", num(p.value), ",",
          p.interval ? num(p.interval->lower) : "", ",", p.interval ? num(p.interval->upper) : "",
          ",", p.interval ? num(p.interval->df) : "", ",", p.ratio ? num(p.ratio->estimate) : "",
          ",", p.ratio ? num(p.ratio->lower) : "", ",", p.ratio ? num(p.ratio->upper) : "", ",",
          quote(p.verdict), ",", quote(p.matrix_verdict), ",", p.run_id == h.baseline_run ? 1 : 0,
          ",", p.moved ? 1 : 0, ",", s.change.located && s.change.first_run == p.run_id ? 1 : 0,
          "\n");
    }
  }
  return out;
}

nlohmann::json ToJson(const MatrixHistory& h) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  auto interval = [&](const std::optional<stats::Interval>& i) {
    if (!i) return nlohmann::json();
    return nlohmann::json{{"estimate", num(i->estimate)}, {"lower", num(i->lower)},
                          {"upper", num(i->upper)},       {"df", num(i->df)},
                          {"confidence", i->confidence},  {"estimand", i->estimand}};
  };
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& r : h.runs) {
    runs.push_back({{"run_id", r.run_id},
                    {"created_at_ms", r.created_at_ms},
                    {"state", r.state},
                    {"matrix_sha256", r.matrix_sha256},
                    {"tags", r.tags},
                    {"recorded", r.recorded},
                    {"sessions", r.sessions},
                    {"baseline", r.run_id == h.baseline_run},
                    {"matrix_verdicts", r.matrix_verdicts},
                    {"note", r.note}});
  }
  nlohmann::json series = nlohmann::json::array();
  for (const auto& s : h.series) {
    nlohmann::json points = nlohmann::json::array();
    for (const auto& p : s.points) {
      nlohmann::json point = {{"run_id", p.run_id},
                              {"sessions", p.sessions},
                              {"value", num(p.value)},
                              {"interval", interval(p.interval)},
                              {"ratio", interval(p.ratio)},
                              {"verdict", p.verdict},
                              {"matrix_verdict", p.matrix_verdict},
                              {"moved", p.moved}};
      if (!p.interval_error.empty()) point["interval_error"] = p.interval_error;
      points.push_back(std::move(point));
    }
    nlohmann::json change;
    if (s.change.searched) {
      change = {{"located", s.change.located},
                {"first_run",
                 s.change.first_run == 0 ? nlohmann::json() : nlohmann::json(s.change.first_run)},
                {"plausible_runs", s.change.plausible_runs},
                {"p_value", num(s.change.p_value)},
                {"step", num(std::exp(s.change.step))},
                {"drift_sd", num(s.change.drift_sd)},
                {"changes", s.change.changes},
                {"text", s.change.text}};
    }
    series.push_back({{"cell", s.key},
                      {"fixed_params", s.fixed_params},
                      {"points", points},
                      {"change_point", change}});
  }
  return {{"matrix", h.matrix_name},
          {"metric", h.metric},
          {"unit", h.unit},
          {"direction", DirectionText(h.direction)},
          {"threshold", h.threshold},
          {"confidence", h.confidence},
          {"baseline",
           {{"run_id", h.baseline_run},
            {"name", h.baseline_name.empty() ? nlohmann::json() : nlohmann::json(h.baseline_name)},
            {"source", h.baseline_source}}},
          {"latest_run", h.latest_run},
          {"runs", runs},
          {"series", series},
          {"notes", h.notes}};
}

}  // namespace ladder::report
