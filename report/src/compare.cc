#include "ladder/report/compare.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/db/series.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/sample.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

using Group = CompareGroup;
using RunData = CompareRunData;

}  // namespace

absl::StatusOr<CompareRunData> ReadCompareRun(const RunRef& ref, const std::string& metric_wanted,
                                              std::vector<std::string>* by, CellMatch match) {
  RunData out;
  db::Database& db = *ref.db;
  {
    ASSIGN_OR_RETURN(db::Statement stmt, db.Prepare("SELECT metric, axes FROM runs WHERE id = ?1"));
    stmt.Bind(1, ref.run_id);
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return absl::NotFoundError(absl::StrCat(ref.label, ": no such run in ", db.path()));
    out.metric = metric_wanted.empty() ? stmt.Text(0) : metric_wanted;
    auto axes = nlohmann::json::parse(stmt.Text(1), nullptr, false);
    if (axes.is_array()) {
      for (const auto& a : axes) {
        if (a.is_string()) out.axes.push_back(a.get<std::string>());
      }
    }
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT metric, MIN(unit) FROM measurements WHERE run_id = ?1 GROUP BY metric "
                   "ORDER BY metric"));
    stmt.Bind(1, ref.run_id);
    std::vector<std::string> metrics;
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      metrics.push_back(stmt.Text(0));
      if (metrics.back() == out.metric) out.unit = stmt.Text(1);
    }
    if (std::find(metrics.begin(), metrics.end(), out.metric) == metrics.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metric: ", ref.label, " has no measurements of '", out.metric, "'",
                       metrics.empty() ? "" : "; it has: " + absl::StrJoin(metrics, ", ")));
    }
  }
  {
    ASSIGN_OR_RETURN(db::Statement stmt,
                     db.Prepare("SELECT DISTINCT s.machine_id, s.hostname FROM sessions s JOIN "
                                "valid_measurements m ON m.session_id = s.id WHERE m.run_id = ?1"));
    stmt.Bind(1, ref.run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      out.hosts.emplace(stmt.Text(0), stmt.Text(1));
    }
  }
  if (by->empty()) *by = out.axes;
  for (const auto& axis : *by) {
    if (std::find(out.axes.begin(), out.axes.end(), axis) == out.axes.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--by: ", ref.label, " has no axis '", axis,
                       "'; its axes are: ", absl::StrJoin(out.axes, ", ")));
    }
  }
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db.Prepare("SELECT c.id, c.key, m.session_id, m.process, m.round, m.value, c.params FROM "
                 "valid_measurements m JOIN cells c ON c.id = m.cell_id WHERE m.run_id = ?1 AND "
                 "m.metric = ?2 ORDER BY c.idx, m.id"));
  stmt.Bind(1, ref.run_id).Bind(2, out.metric);
  std::map<std::string, int64_t> session_index;
  std::map<int64_t, std::string> key_of_cell;  // each cell's key and params parsed once
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    auto known = key_of_cell.find(stmt.Int(0));
    if (known == key_of_cell.end()) {
      std::map<std::string, std::string> values;
      for (auto& [k, v] : SplitKey(stmt.Text(1))) values[k] = v;
      std::vector<std::string> parts;
      for (const auto& axis : *by) parts.push_back(axis + "=" + values[axis]);
      std::string key = absl::StrJoin(parts, ",");
      if (match == CellMatch::kAxesAndFixedParameters) {
        // What the cell ran with beyond its axes: a matrix whose fixed parameters changed
        // measures other cells under the same axis values.
        auto params = nlohmann::json::parse(stmt.Text(6), nullptr, false);
        if (params.is_object()) {
          for (const auto& axis : out.axes) params.erase(axis);
          if (!params.empty()) key += std::string(kFixedSeparator) + params.dump();
        }
      }
      known = key_of_cell.emplace(stmt.Int(0), std::move(key)).first;
    }
    const std::string& key = known->second;
    auto [it, inserted] = out.groups.try_emplace(key);
    if (inserted) out.order.push_back(key);
    const std::string session = stmt.Text(2);
    auto [sit, fresh] =
        session_index.try_emplace(session, static_cast<int64_t>(session_index.size()));
    (void)fresh;
    it->second.sessions.insert(session);
    // Cells pooled into one group are distinct processes of the session.
    it->second.observations.push_back(
        {sit->second, stmt.Int(0) * 1'000'000 + stmt.Int(3), stmt.Int(4), stmt.Double(5)});
  }
  // What the cells' own evidence says against their claim (the flags `report` withholds a
  // verdict for): a cell that measured something else must not get a verdict here either.
  ASSIGN_OR_RETURN(
      db::Statement flags,
      db.Prepare("SELECT e.cell_id, e.kind, e.value FROM evidence e JOIN attempts a ON a.id = "
                 "e.attempt_id WHERE e.run_id = ?1 AND a.state = 'done' AND e.stale = 0 AND "
                 "e.kind IN ('backend_mismatch', 'probe_silent', 'speculation_not_engaged', "
                 "'speculation_while_off', 'speculation_not_verifiable')"));
  flags.Bind(1, ref.run_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, flags.Step());
    if (!row) break;
    auto cell = key_of_cell.find(flags.Int(0));
    if (cell == key_of_cell.end()) continue;  // no measurement of the metric: nothing to judge
    const auto value = nlohmann::json::parse(flags.Text(2), nullptr, false);
    if (value.is_discarded() || value.is_null() || value == false) continue;
    const std::string kind = flags.Text(1);
    if (IsClaimFlag(kind)) out.groups[cell->second].claim_flags.insert(kind);
  }
  return out;
}

namespace {

// Session means (arithmetic means of process means) of one group, or why there are none.
absl::StatusOr<std::vector<double>> SessionMeans(const Group& g) {
  ASSIGN_OR_RETURN(stats::Hierarchy h,
                   stats::BuildHierarchy(g.observations, stats::ValueDomain::kPositive));
  std::vector<double> means;
  for (const auto& s : h.sessions) means.push_back(stats::SessionMean(s));
  return means;
}

void LogMoments(const std::vector<double>& values, double* geo, double* sd) {
  double sum = 0;
  for (double v : values) sum += std::log(v);
  const double n = static_cast<double>(values.size());
  const double mean = values.empty() ? kNaN : sum / n;
  *geo = std::exp(mean);
  if (values.size() < 2) {
    *sd = kNaN;
    return;
  }
  double ss = 0;
  for (double v : values) ss += (std::log(v) - mean) * (std::log(v) - mean);
  *sd = std::sqrt(ss / (n - 1));
}

std::string PercentText(double x) { return std::isfinite(x) ? FormatNumber(100 * x) + " %" : "-"; }

std::string SpreadFlag(const CompareRow& r, const std::string& label_a,
                       const std::string& label_b) {
  if (!r.spread_exceeds_difference || !r.ratio) return "";
  const double diff = std::fabs(std::log(r.ratio->estimate));
  const bool a = r.spread_a > diff;
  return absl::StrCat("⚠ session-to-session spread in ", a ? label_a : label_b, " (",
                      PercentText(a ? r.spread_a : r.spread_b),
                      ") is larger than the difference between the runs (", PercentText(diff), ")");
}

// ClassifyChange with the host's drift added to the band: beyond ±(h + drift) for a change,
// within ±(h − drift) for none (impossible once drift ≥ h).
stats::ChangeClass ClassifyAllowingDrift(const stats::Interval& ratio, double threshold,
                                         double drift) {
  const stats::ChangeClass wide = stats::ClassifyChange(ratio, threshold + drift);
  if (wide == stats::ChangeClass::kAbove || wide == stats::ChangeClass::kBelow) return wide;
  if (drift < threshold &&
      stats::ClassifyChange(ratio, threshold - drift) == stats::ChangeClass::kWithin) {
    return stats::ChangeClass::kWithin;
  }
  return stats::ChangeClass::kStraddles;
}

}  // namespace

std::string DetectableText(const std::optional<stats::DetectableChange>& d) {
  if (!d) return "";
  return absl::StrCat("+", FormatDf(100 * d->up), " % / -", FormatDf(100 * d->down), " %");
}

namespace {

bool IsChange(const std::string& verdict) {
  return verdict == "slower" || verdict == "faster" || verdict == "higher" || verdict == "lower";
}

// Holm over the rows' band tests gives each row's matrix verdict (a faster/slower that does not
// survive it is inconclusive over the matrix); then, where options.detectable, each "no change"
// or inconclusive row's achieved detectable change under that verdict.
void JudgeOverTheMatrix(const CompareOptions& options, RunComparison& out) {
  std::vector<double> p;
  for (const auto& row : out.rows) p.push_back(row.p_band);
  const std::vector<double> holm = stats::HolmAdjust(p);
  for (std::size_t i = 0; i < out.rows.size(); ++i) {
    CompareRow& row = out.rows[i];
    row.p_holm = holm[i];
    out.cells_judged += row.ratio.has_value();
    row.matrix_verdict = row.verdict;
    if (IsChange(row.verdict) && !(row.p_holm < 1 - options.confidence)) {
      row.matrix_verdict = "inconclusive";
    }
    ++out.matrix_verdicts[row.matrix_verdict];
  }
  for (CompareRow& row : out.rows) {
    if (!options.detectable || !row.ratio ||
        (row.matrix_verdict != "no change" && row.matrix_verdict != "inconclusive")) {
      continue;
    }
    stats::PowerOptions power;
    power.threshold = out.band;
    power.confidence = options.confidence;
    power.family = static_cast<std::size_t>(std::max<int64_t>(1, out.cells_judged));
    auto d = stats::AchievedDetectableChange(*row.ratio, power);
    if (d.ok()) row.detectable = *d;
  }
}

// A row with a claim flag keeps its ratio on screen and gets no verdict (as `report` does).
void WithholdForClaims(CompareRow& row) {
  if (row.claim_flags.empty() || !row.ratio) return;
  row.change = stats::ChangeClass::kStraddles;
  row.verdict = absl::StrCat("withheld (", absl::StrJoin(row.claim_flags, ", "), ")");
  row.p_band = 1;
}

// Log session means' mean and variance of the mean (se²) of one group; false with < 2 sessions.
bool LogMeanAndSe2(const Group& g, double* mean, double* se2) {
  auto means = SessionMeans(g);
  if (!means.ok() || means->size() < 2) return false;
  double sum = 0;
  for (double v : *means) sum += std::log(v);
  const double n = static_cast<double>(means->size());
  *mean = sum / n;
  double ss = 0;
  for (double v : *means) ss += (std::log(v) - *mean) * (std::log(v) - *mean);
  *se2 = ss / (n - 1) / n;
  return true;
}

}  // namespace

DriftEstimate EstimateDriftFromRuns(const std::string& machine,
                                    const std::vector<DriftCandidate>& candidates) {
  DriftEstimate out;
  // Runs on that host only, grouped by their tags (equal tags: the same build). The runs compared
  // count too when they belong to a group of equal tags: a run that is far from its group's others
  // only widens the estimate (conservative).
  std::map<std::string, std::vector<const DriftCandidate*>> groups;
  for (const DriftCandidate& c : candidates) {
    const CompareRunData& data = *c.data;
    if (data.hosts.size() != 1 || data.hosts.begin()->first != machine) continue;
    // Untagged runs cannot be told to be the same build: they are no A/A evidence.
    if (c.tags.empty()) continue;
    groups[c.tags].push_back(&c);
  }
  std::map<std::string, std::pair<double, double>> sums;  // key -> (Σ (k−1)(var − se²), Σ (k−1))
  for (const auto& [tags, runs] : groups) {
    if (runs.size() < 2) continue;
    ++out.groups;
    for (const DriftCandidate* r : runs) out.runs.push_back(r->run_id);
    std::map<std::string, std::vector<std::pair<double, double>>> per_key;  // (y, se²)
    for (const DriftCandidate* r : runs) {
      for (const auto& [key, g] : r->data->groups) {
        double y = 0, se2 = 0;
        if (LogMeanAndSe2(g, &y, &se2)) per_key[key].emplace_back(y, se2);
      }
    }
    for (const auto& [key, points] : per_key) {
      if (points.size() < 2) continue;
      const double k = static_cast<double>(points.size());
      double my = 0, mse2 = 0;
      for (const auto& [y, se2] : points) {
        my += y / k;
        mse2 += se2 / k;
      }
      double var = 0;
      for (const auto& [y, se2] : points) var += (y - my) * (y - my) / (k - 1);
      sums[key].first += (k - 1) * (var - mse2);
      sums[key].second += k - 1;
    }
  }
  std::sort(out.runs.begin(), out.runs.end());
  for (const auto& [key, s] : sums) {
    out.by_key[key] = {std::max(0.0, s.first / s.second), s.second};
  }
  return out;
}

std::string RunTagsKey(db::Database& db, int64_t run_id) {
  auto tags = db::GetRunTags(db, run_id);
  std::string key;
  if (tags.ok()) {
    for (const auto& [k, v] : *tags) key += k + "=" + v + "\n";
  }
  return key;
}

namespace {

// The A/A evidence on one host from the database: every run of run A's matrix, read as compare
// reads it (CompareOptions::host_drift).
absl::StatusOr<DriftEstimate> EstimateHostDrift(const RunRef& a, const std::string& machine,
                                                const std::string& metric,
                                                std::vector<std::string> by) {
  db::Database& db = *a.db;
  std::vector<int64_t> ids;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT r.id FROM runs r JOIN matrices m ON m.id = r.matrix_id WHERE m.name = "
                   "(SELECT m2.name FROM runs r2 JOIN matrices m2 ON m2.id = r2.matrix_id WHERE "
                   "r2.id = ?1) ORDER BY r.id"));
    stmt.Bind(1, a.run_id);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      ids.push_back(stmt.Int(0));
    }
  }
  std::vector<CompareRunData> data;
  data.reserve(ids.size());
  std::vector<DriftCandidate> candidates;
  for (int64_t id : ids) {
    std::vector<std::string> by_copy = by;
    auto read =
        ReadCompareRun({&db, id, absl::StrCat("run ", id)}, metric, &by_copy, CellMatch::kAxes);
    if (!read.ok()) continue;
    data.push_back(*std::move(read));
    candidates.push_back({id, RunTagsKey(db, id), nullptr});
  }
  for (std::size_t i = 0; i < candidates.size(); ++i) candidates[i].data = &data[i];
  return EstimateDriftFromRuns(machine, candidates);
}

// Welch's interval on log session means with the drift term 2τ̂² (df `drift_df`) added.
stats::Interval IntervalWithDrift(const std::vector<double>& ma, const std::vector<double>& mb,
                                  double tau2, double drift_df, double confidence) {
  auto moments = [](const std::vector<double>& v, double* mean, double* var) {
    double sum = 0;
    for (double x : v) sum += std::log(x);
    const double n = static_cast<double>(v.size());
    *mean = sum / n;
    double ss = 0;
    for (double x : v) ss += (std::log(x) - *mean) * (std::log(x) - *mean);
    *var = ss / (n - 1);
  };
  double ya = 0, va = 0, yb = 0, vb = 0;
  moments(ma, &ya, &va);
  moments(mb, &yb, &vb);
  const double na = static_cast<double>(ma.size()), nb = static_cast<double>(mb.size());
  const double ta = va / na, tb = vb / nb, td = 2 * tau2;
  const double v = ta + tb + td;
  double den = ta * ta / (na - 1) + tb * tb / (nb - 1) + (td > 0 ? td * td / drift_df : 0.0);
  const double df = den > 0 ? v * v / den : std::numeric_limits<double>::infinity();
  const double d = yb - ya;
  const double half = v > 0 ? stats::TwoSidedT(confidence, df) * std::sqrt(v) : 0.0;
  stats::Interval out;
  out.estimate = std::exp(d);
  out.lower = std::exp(d - half);
  out.upper = std::exp(d + half);
  out.confidence = confidence;
  out.df = df;
  out.n_units = ma.size() + mb.size();
  out.estimand = "B/A: ratio of the runs' geometric means of session means";
  out.note = "with the host's run-to-run drift estimated from A/A history";
  return out;
}

}  // namespace

absl::Status CompareOptions::Validate() const {
  if (!(threshold >= 0 && threshold < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--threshold must be in [0, 1), got ", threshold));
  }
  if (host_drift && !(*host_drift >= 0 && *host_drift < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--host-drift must be in [0, 1), got ", *host_drift));
  }
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence must be in (0, 1), got ", confidence));
  }
  return absl::OkStatus();
}

absl::StatusOr<RunComparison> CompareTwoRuns(const RunRef& a, const RunRef& b,
                                             const CompareOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  std::vector<std::string> by = options.by;
  ASSIGN_OR_RETURN(RunData da, ReadCompareRun(a, options.metric, &by, CellMatch::kAxes));
  ASSIGN_OR_RETURN(RunData rb, ReadCompareRun(b, da.metric, &by, CellMatch::kAxes));
  return CompareReadRuns(a, da, b, rb, options, by, AxesMustAgree::kUnlessByGiven);
}

absl::StatusOr<RunComparison> CompareReadRuns(
    const RunRef& a, const CompareRunData& da, const RunRef& b, const CompareRunData& rb,
    const CompareOptions& options, const std::vector<std::string>& by,
    AxesMustAgree axes_must_agree, const std::map<std::string, DriftEstimate>* drift_by_machine) {
  RETURN_IF_ERROR(options.Validate());
  const bool by_given = !options.by.empty();
  if (!by_given && axes_must_agree == AxesMustAgree::kUnlessByGiven) {
    std::set<std::string> sa(da.axes.begin(), da.axes.end());
    std::set<std::string> sb(rb.axes.begin(), rb.axes.end());
    if (sa != sb) {
      std::vector<std::string> common;
      std::set_intersection(sa.begin(), sa.end(), sb.begin(), sb.end(), std::back_inserter(common));
      return absl::InvalidArgumentError(absl::StrCat(
          "the runs have different axes (", a.label, ": ", absl::StrJoin(da.axes, ", "), "; ",
          b.label, ": ", absl::StrJoin(rb.axes, ", "), "); match on common ones with --by ",
          absl::StrJoin(common, ",")));
    }
  }
  if (da.unit != rb.unit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the runs record ", da.metric, " in different units (", da.unit, ", ", rb.unit, ")"));
  }
  RunComparison out;
  out.label_a = a.label;
  out.label_b = b.label;
  out.run_a = a.run_id;
  out.run_b = b.run_id;
  out.metric = da.metric;
  out.unit = da.unit;
  out.threshold = options.threshold;
  out.confidence = options.confidence;
  out.by = by;
  out.direction = options.direction;
  out.direction_source = "given";
  if (out.direction == Direction::kUnknown) {
    out.direction = DirectionOfMetric(*a.db, a.run_id, out.metric, out.unit);
    out.direction_source = DirectionOfUnit(out.unit) == out.direction ? "unit" : "matrix";
    if (out.direction == Direction::kUnknown) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot tell whether higher or lower ", out.metric, " (unit '", out.unit,
                       "') is better: pass --higher-is-better or --lower-is-better"));
    }
  }
  // Sessions on one host ran side by side (`ladder local`, or agents sharing a machine): their
  // spread is not what changes on that host between two runs minutes apart (load, clocks,
  // temperature), so the interval is too narrow for a verdict between runs. The band widens by
  // the drift allowance instead.
  DriftEstimate drift;
  if (da.hosts.size() == 1 && rb.hosts.size() == 1 &&
      da.hosts.begin()->first == rb.hosts.begin()->first) {
    out.one_host = da.hosts.begin()->second;
    if (options.host_drift) {
      out.host_drift = *options.host_drift;
      out.drift_source = "given";
    } else {
      const std::string& machine = da.hosts.begin()->first;
      if (drift_by_machine != nullptr) {
        auto known = drift_by_machine->find(machine);
        if (known != drift_by_machine->end()) drift = known->second;
      } else {
        ASSIGN_OR_RETURN(drift, EstimateHostDrift(a, machine, out.metric, by));
      }
      out.drift_source = drift.by_key.empty() ? "unknown" : "estimated";
      out.drift_runs = drift.runs;
      out.drift_groups = drift.groups;
    }
  }
  out.band = options.threshold + out.host_drift;
  for (const auto& key : da.order) {
    auto other = rb.groups.find(key);
    if (other == rb.groups.end()) {
      out.only_a.push_back(key);
      continue;
    }
    const Group& ga = da.groups.at(key);
    const Group& gb = other->second;
    CompareRow row;
    row.key = key;
    row.sessions_a = static_cast<int64_t>(ga.sessions.size());
    row.sessions_b = static_cast<int64_t>(gb.sessions.size());
    row.n_a = static_cast<int64_t>(ga.observations.size());
    row.n_b = static_cast<int64_t>(gb.observations.size());
    row.mean_a = row.mean_b = row.spread_a = row.spread_b = kNaN;
    row.p_band = row.p_holm = kNaN;
    auto ma = SessionMeans(ga);
    auto mb = SessionMeans(gb);
    if (!ma.ok() || !mb.ok()) {
      row.error = std::string((!ma.ok() ? ma : mb).status().message());
    } else {
      LogMoments(*ma, &row.mean_a, &row.spread_a);
      LogMoments(*mb, &row.mean_b, &row.spread_b);
      auto ratio = stats::UnpairedLogRatioInterval(*ma, *mb, options.confidence);
      if (ratio.ok() && out.drift_source == "estimated") {
        auto it = drift.by_key.find(key);
        if (it == drift.by_key.end()) {
          ratio = absl::FailedPreconditionError(
              "one host, no A/A history of this cell: between-run drift unknown");
        } else {
          row.drift_sd = std::sqrt(it->second.first);
          row.drift_df = it->second.second;
          ratio =
              IntervalWithDrift(*ma, *mb, it->second.first, it->second.second, options.confidence);
        }
      }
      if (ratio.ok()) {
        row.ratio = *ratio;
        row.change = ClassifyAllowingDrift(*ratio, options.threshold, out.host_drift);
        row.p_band = stats::BandExceedancePValue(*ratio, out.band);
        const double diff = std::fabs(std::log(ratio->estimate));
        row.spread_exceeds_difference = (std::isfinite(row.spread_a) && row.spread_a > diff) ||
                                        (std::isfinite(row.spread_b) && row.spread_b > diff);
      } else {
        row.error = std::string(ratio.status().message());
      }
    }
    row.verdict = row.ratio ? VerdictText(row.change, out.direction) : "n/a";
    if (row.ratio && out.drift_source == "unknown") {
      // No estimate of the host's drift: no verdict either way, and the p-value cannot fire.
      row.change = stats::ChangeClass::kStraddles;
      row.verdict = "inconclusive";
      row.p_band = 1;
    }
    std::set<std::string> claims = ga.claim_flags;
    claims.insert(gb.claim_flags.begin(), gb.claim_flags.end());
    row.claim_flags.assign(claims.begin(), claims.end());
    WithholdForClaims(row);
    ++out.verdicts[row.verdict];
    out.rows.push_back(std::move(row));
  }
  for (const auto& key : rb.order) {
    if (!da.groups.count(key)) out.only_b.push_back(key);
  }
  JudgeOverTheMatrix(options, out);
  if (out.rows.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(a.label, " and ", b.label,
                                                      " share no measured cell (matched on ",
                                                      absl::StrJoin(by, ", "), ")"));
  }
  if (!out.only_a.empty() || !out.only_b.empty()) {
    out.notes.push_back(absl::StrCat(out.only_a.size(), " cell(s) measured only in ", a.label, ", ",
                                     out.only_b.size(), " only in ", b.label, ": not compared"));
  }
  if (out.drift_source == "given") {
    out.notes.push_back(absl::StrCat(
        "⚠ every session of both runs ran on one host (", out.one_host,
        "): the interval covers the spread between sessions within a run, not the drift of that "
        "host between the runs (load, clocks, temperature), so the verdicts judge against ±",
        FormatDf(100 * out.band), " % (the ±", FormatDf(100 * options.threshold),
        " % band widened by the given ", FormatDf(100 * out.host_drift),
        " % drift allowance, --host-drift). For a verdict on one host without an allowance, run "
        "both variants as a paired axis of one run, interleaved in every session (`pair:` in the "
        "matrix, docs/matrix-format.md), and read it with `ladder report`"));
  } else if (out.drift_source == "estimated") {
    std::vector<std::string> ids;
    for (int64_t r : out.drift_runs) ids.push_back(absl::StrCat(r));
    out.notes.push_back(absl::StrCat(
        "every session of both runs ran on one host (", out.one_host,
        "): its drift between runs is estimated per cell from A/A history on that host — runs ",
        absl::StrJoin(ids, ", "), " (", out.drift_groups,
        " group(s) of equal tags) — as their spread beyond their own intervals, and carried into "
        "each interval with its df (drift column in --json). A paired axis of one run "
        "(`pair:`) removes the drift instead"));
  } else if (out.drift_source == "unknown") {
    out.notes.push_back(absl::StrCat(
        "⚠ one host (", out.one_host,
        "), no A/A history: between-run drift unknown — pair the builds in one run (`pair:`, "
        "read with `ladder report`), or run the same build again (equal --tag) so that its "
        "spread can be measured; every verdict is inconclusive until then (--host-drift X "
        "states an allowance instead)"));
  }
  if (by_given) {
    out.notes.push_back(absl::StrCat("cells matched on ", absl::StrJoin(by, ", "),
                                     "; cells that agree on these are pooled"));
  }
  return out;
}

absl::StatusOr<RunComparison> ComparePairedArms(const RunRef& run, const PairedArms& arms,
                                                const CompareOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (!options.by.empty()) {
    return absl::InvalidArgumentError(
        "--by matches the cells of two runs; paired arms are matched by the run itself");
  }
  AnalysisOptions analysis_options;
  analysis_options.metric = options.metric;
  analysis_options.confidence = options.confidence;
  analysis_options.threshold = options.threshold;
  analysis_options.bootstrap_draws = 0;
  ASSIGN_OR_RETURN(RunAnalysis analysis, AnalyzeRun(*run.db, run.run_id, analysis_options));
  const RunInfo& info = analysis.info;
  const auto& pairs = info.pair_axes;
  if (std::find(pairs.begin(), pairs.end(), arms.axis) == pairs.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--arms: '", arms.axis, "' is not a paired axis of ", run.label,
        pairs.empty() ? " (it has none: put the variants on an axis listed under `pair:`)"
                      : " (its paired axes: " + absl::StrJoin(pairs, ", ") + ")"));
  }
  const auto axis_at = std::find(info.axes.begin(), info.axes.end(), arms.axis);
  const auto& levels = info.axis_values[axis_at - info.axes.begin()];
  for (const std::string* value : {&arms.baseline, &arms.treatment}) {
    if (std::find(levels.begin(), levels.end(), *value) == levels.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--arms: ", arms.axis, " has no value '", *value, "' in ", run.label,
                       "; its values: ", absl::StrJoin(levels, ", ")));
    }
  }
  if (arms.baseline == arms.treatment) {
    return absl::InvalidArgumentError("--arms: name two different values (BASE,NEW)");
  }
  RunComparison out;
  out.design = "paired arms";
  out.label_a = absl::StrCat(arms.axis, "=", arms.baseline);
  out.label_b = absl::StrCat(arms.axis, "=", arms.treatment);
  out.run_a = out.run_b = run.run_id;
  out.metric = info.metric;
  out.unit = info.unit;
  out.threshold = options.threshold;
  out.confidence = options.confidence;
  out.band = options.threshold;
  for (const auto& axis : info.axes) {
    if (axis != arms.axis) out.by.push_back(axis);
  }
  out.direction = options.direction;
  out.direction_source = "given";
  if (out.direction == Direction::kUnknown) {
    out.direction = info.direction;
    out.direction_source = DirectionOfUnit(out.unit) == out.direction ? "unit" : "matrix";
    if (out.direction == Direction::kUnknown) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot tell whether higher or lower ", out.metric, " (unit '", out.unit,
                       "') is better: pass --higher-is-better or --lower-is-better"));
    }
  }
  for (const Comparison& c : analysis.comparisons) {
    if (c.pair_axis != arms.axis) continue;
    // The run pairs each arm with the axis's first value; the other order is the reciprocal
    // (the log-t interval is symmetric on the log scale, so its bounds swap exactly).
    const bool forward = c.baseline_value == arms.baseline && c.treatment_value == arms.treatment;
    const bool reverse = c.baseline_value == arms.treatment && c.treatment_value == arms.baseline;
    if (!forward && !reverse) continue;
    CompareRow row;
    row.key = c.context_key.empty() ? "(every cell)" : c.context_key;
    row.sessions_a = row.sessions_b = c.sessions;
    row.n_a = forward ? c.n_a : c.n_b;
    row.n_b = forward ? c.n_b : c.n_a;
    row.mean_a = forward ? c.mean_a : c.mean_b;
    row.mean_b = forward ? c.mean_b : c.mean_a;
    row.spread_a = row.spread_b = row.p_band = row.p_holm = kNaN;
    const bool between_sessions =
        c.t.interval && c.t.interval->scope == stats::IntervalScope::kBetweenSessions;
    if (between_sessions) {
      row.ratio = *c.t.interval;
      if (reverse) {
        row.ratio->estimate = 1 / c.t.interval->estimate;
        row.ratio->lower = 1 / c.t.interval->upper;
        row.ratio->upper = 1 / c.t.interval->lower;
      }
      row.change = stats::ClassifyChange(*row.ratio, options.threshold);
      row.p_band = stats::BandExceedancePValue(*row.ratio, options.threshold);
    } else {
      row.error =
          c.t.interval ? "one session: the interval says nothing about another session" : c.t.error;
    }
    row.verdict = row.ratio ? VerdictText(row.change, out.direction) : "n/a";
    std::set<std::string> claims;
    for (const Flag& f : c.flags) {
      if (IsClaimFlag(f.kind)) claims.insert(f.kind);
    }
    row.claim_flags.assign(claims.begin(), claims.end());
    WithholdForClaims(row);
    ++out.verdicts[row.verdict];
    out.rows.push_back(std::move(row));
  }
  if (out.rows.empty()) {
    const std::string& first = levels.front();
    if (arms.baseline != first && arms.treatment != first) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--arms: ", run.label, " pairs each value of ", arms.axis, " with its first, '", first,
          "'; judge '", first, "' against another value (either order)"));
    }
    return absl::FailedPreconditionError(absl::StrCat(run.label, ": no cell has both ", out.label_a,
                                                      " and ", out.label_b, " measured"));
  }
  JudgeOverTheMatrix(options, out);
  out.notes.push_back(absl::StrCat(
      "paired arms of one run (", run.label,
      "): every session measured both, interleaved, so what the host did between runs (load, "
      "clocks, temperature) cancels in each session's ratio; no drift allowance or A/A history "
      "is needed"));
  return out;
}

std::string ComparisonMethodText(const RunComparison& c) {
  const std::string band = FormatDf(100 * c.threshold);
  if (c.design == "paired arms") {
    return absl::StrCat(
        "Paired ratio B/A of ", c.metric,
        c.unit.empty() ? "" : " (" + c.unit + ", " + DirectionText(c.direction) + ")",
        ", B = ", c.label_b, ", A = ", c.label_a, ", both arms of run ", c.run_a,
        ": the geometric mean over sessions of each session's ratio of means, with a ",
        FormatDf(100 * c.confidence),
        " % log-t interval on the sessions' ratios (sessions − 1 df, shown). Verdict against ±",
        band,
        " %: slower or faster only when the whole interval lies beyond the band, no change only "
        "when it lies within it, inconclusive otherwise (more sessions would tell). ",
        MatrixGuaranteeText(c));
  }
  return absl::StrCat(
      "Ratio B/A of ", c.metric,
      c.unit.empty() ? "" : " (" + c.unit + ", " + DirectionText(c.direction) + ")",
      ", B = ", c.label_b, ", A = ", c.label_a,
      ": the ratio of the runs' geometric means of session means, with a ",
      FormatDf(100 * c.confidence),
      " % interval from Welch's t on the log session means "
      "(sessions are the unit of replication across runs; df shown). Verdict against ±",
      band,
      " %: slower or faster only when the whole interval lies beyond the band, no change only "
      "when it lies within it, inconclusive otherwise (more sessions would tell). ",
      MatrixGuaranteeText(c));
}

std::string MatrixGuaranteeText(const RunComparison& c) {
  const std::string alpha = FormatDf(100 * (1 - c.confidence));
  return absl::StrCat(
      "The matrix verdict judges the ", c.cells_judged,
      " cells as one family (Holm's step-down on each cell's band test): the chance of any "
      "false slower or faster among them is at most ",
      alpha, " %, where the per-cell verdict holds ", alpha,
      " % for each cell alone; a per-cell slower or faster that does not survive it is "
      "inconclusive over the matrix. No change needs no adjustment (every cell within the band "
      "at once is an intersection-union test).");
}

std::string RenderComparisonMarkdown(const RunComparison& c) {
  std::string out = absl::StrCat("## ", c.label_b, " vs ", c.label_a, ": ", c.metric, "\n\n",
                                 ComparisonMethodText(c), "\n\n");
  const std::string unit = c.unit.empty() ? "" : " " + c.unit;
  out += absl::StrCat("| cell | sessions A/B | A", unit, " | B", unit,
                      " | ratio B/A | change | 95 % interval (df) | verdict | matrix verdict | "
                      "flags | detects (80 % power) |\n");
  out += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const auto& r : c.rows) {
    std::string interval = "-";
    if (r.ratio) {
      interval = absl::StrCat(FormatInterval(*r.ratio), " (df ", FormatDf(r.ratio->df), ")");
    }
    std::string flags = SpreadFlag(r, c.label_a, c.label_b);
    if (!r.error.empty()) flags = r.error;
    if (!r.claim_flags.empty()) {
      flags =
          absl::StrCat("⚠ ", absl::StrJoin(r.claim_flags, ", "), flags.empty() ? "" : "; ", flags);
    }
    out += absl::StrCat("| ", r.key, " | ", r.sessions_a, "/", r.sessions_b, " | ",
                        FormatNumber(r.mean_a), " | ", FormatNumber(r.mean_b), " | ",
                        r.ratio ? FormatNumber(r.ratio->estimate) : "-", " | ",
                        r.ratio ? FormatChange(r.ratio->estimate) : "-", " | ", interval, " | ",
                        r.verdict, " | ", r.matrix_verdict, " | ", flags.empty() ? " " : flags,
                        " | ", DetectableText(r.detectable), " |\n");
  }
  const auto counts = [](const std::map<std::string, int64_t>& verdicts) {
    std::vector<std::string> out;
    for (const char* v :
         {"slower", "faster", "higher", "lower", "no change", "inconclusive", "n/a"}) {
      auto it = verdicts.find(v);
      if (it != verdicts.end()) out.push_back(absl::StrCat(it->second, " ", v));
    }
    int64_t withheld = 0;
    for (const auto& [v, n] : verdicts) withheld += absl::StartsWith(v, "withheld") ? n : 0;
    if (withheld > 0) out.push_back(absl::StrCat(withheld, " withheld (claim flags)"));
    return absl::StrJoin(out, ", ");
  };
  out += absl::StrCat("\n", c.rows.size(), " cells compared. Per cell: ", counts(c.verdicts),
                      ". Over the matrix (Holm, any false slower or faster among the ",
                      c.cells_judged, " cells judged ≤ ", FormatDf(100 * (1 - c.confidence)),
                      " %): ", counts(c.matrix_verdicts), ".\n");
  for (const auto& n : c.notes) out += "Note: " + n + ".\n";
  return out;
}

nlohmann::json ToJson(const RunComparison& c) {
  auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); };
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : c.rows) {
    nlohmann::json row = {{"cell", r.key},
                          {"sessions_a", r.sessions_a},
                          {"sessions_b", r.sessions_b},
                          {"n_a", r.n_a},
                          {"n_b", r.n_b},
                          {"mean_a", num(r.mean_a)},
                          {"mean_b", num(r.mean_b)},
                          {"spread_a", num(r.spread_a)},
                          {"spread_b", num(r.spread_b)},
                          {"verdict", r.verdict},
                          {"matrix_verdict", r.matrix_verdict},
                          {"p_band", num(r.p_band)},
                          {"p_holm", num(r.p_holm)},
                          {"band", std::string(stats::ChangeClassName(r.change))},
                          {"spread_exceeds_difference", r.spread_exceeds_difference}};
    if (r.ratio) {
      row["ratio"] = {{"estimate", num(r.ratio->estimate)}, {"lower", num(r.ratio->lower)},
                      {"upper", num(r.ratio->upper)},       {"df", num(r.ratio->df)},
                      {"confidence", r.ratio->confidence},  {"estimand", r.ratio->estimand}};
    }
    if (!r.error.empty()) row["error"] = r.error;
    row["claim_flags"] = r.claim_flags;
    if (std::isfinite(r.drift_sd)) row["drift"] = {{"sd", r.drift_sd}, {"df", r.drift_df}};
    if (r.detectable) {
      row["detectable"] = {{"up", num(r.detectable->up)},
                           {"down", num(r.detectable->down)},
                           {"power", 0.8},
                           {"family", c.cells_judged},
                           {"band", c.band}};
    }
    rows.push_back(std::move(row));
  }
  return {
      {"design", c.design},
      {"a", {{"label", c.label_a}, {"run_id", c.run_a}}},
      {"b", {{"label", c.label_b}, {"run_id", c.run_b}}},
      {"metric", c.metric},
      {"unit", c.unit},
      {"direction", DirectionText(c.direction)},
      {"direction_source", c.direction_source},
      {"threshold", c.threshold},
      {"confidence", c.confidence},
      {"by", c.by},
      {"method", ComparisonMethodText(c)},
      {"rows", rows},
      {"only_a", c.only_a},
      {"only_b", c.only_b},
      {"verdicts", c.verdicts},
      {"matrix",
       {{"method", "holm"},
        {"family_error_rate", 1 - c.confidence},
        {"cells_judged", c.cells_judged},
        {"verdicts", c.matrix_verdicts},
        {"guarantee", MatrixGuaranteeText(c)}}},
      {"band", c.band},
      {"host_drift", c.drift_source == "given" ? nlohmann::json(c.host_drift) : nlohmann::json()},
      {"drift",
       {{"source", c.drift_source.empty() ? nlohmann::json() : nlohmann::json(c.drift_source)},
        {"runs", c.drift_runs},
        {"groups", c.drift_groups}}},
      {"notes", c.notes},
      {"one_host", c.one_host.empty() ? nlohmann::json() : nlohmann::json(c.one_host)}};
}

}  // namespace ladder::report
