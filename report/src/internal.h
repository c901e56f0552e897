// Helpers shared by the analysis, report and verify sources. Not part of the public API.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ladder/db/series.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/analysis.h"
#include "ladder/report/compare.h"
#include "ladder/stats/adaptive.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/sample.h"

namespace ladder::report {

// Which way `metric` of run `run_id` is better: as its matrix declares it (`runner: command`'s
// `metrics: {NAME: {better: ...}}`), else guessed from `unit` (DirectionOfUnit).
Direction DirectionOfMetric(db::Database& db, int64_t run_id, const std::string& metric,
                            const std::string& unit);

// Not a number: a statistic that does not exist (no interval, no sessions).
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// "depth=256,path=2d" -> {{"depth","256"},{"path","2d"}}.
std::vector<std::pair<std::string, std::string>> SplitKey(const std::string& key);

// 4 significant digits, no exponent for ordinary magnitudes; "-" for NaN, "∞" for infinities.
std::string FormatNumber(double value);
// A ratio as a signed percent change: 0.292 -> "−70.8 %"; uses U+2212 for minus.
std::string FormatChange(double ratio);
// Degrees of freedom and small counts: "2", "7.31", "inf".
std::string FormatDf(double df);
// "[0.281, 0.303]" or "unbounded".
std::string FormatInterval(const stats::Interval& interval);
// A time in local time, "2026-12-07 07:38" (history.cc).
std::string DateText(int64_t unix_ms);
// A run's tags as "k=v k=v" (history.cc).
std::string TagsText(const db::RunTags& tags);

// Where a line of paired ratios crosses 1: the first sign change of the ratio estimates
// (stats::PlanCrossoverProbe; none when every estimate is on one side) and, from three points,
// the root of a linear fit of the per-token difference B − A (the time for times, 1/rate for
// rates) with Fieller's interval. `points` index a.comparisons, `xs` are their axis values;
// `axis_plural` names them in the error ("depths"). Shared by the ladder and the load view.
struct CrossingFit {
  std::optional<stats::LocatePlan> crossing;
  std::optional<stats::Interval> fit;
  std::string error;
  // Fewer than two points carry a ratio with an interval: whether the ratio crosses 1 cannot be
  // judged (not "no sign change"); `error` says how many do.
  bool too_few_ratios = false;
};
CrossingFit FitCrossing(const RunAnalysis& a, const std::vector<size_t>& points,
                        const std::vector<double>& xs, const stats::LocateOptions& locate,
                        double confidence, const std::string& axis_plural);

// Fills a.load (load.cc) when the run's cells carry the engine runner's load metrics; needs
// a.cells, a.comparisons and a.lines.
absl::Status AddLoad(db::Database& db, const AnalysisOptions& options, RunAnalysis& a);

// Fills each cell's `said` and each comparison's `said_differs` (starts_said.cc) from the run's
// probe_counts and program_evidence; needs a.cells and a.comparisons.
absl::Status AddStartsSaid(db::Database& db, int64_t run_id, RunAnalysis& a);

// One run's valid measurements of a metric grouped as `ladder compare` matches cells (compare.cc),
// read once so that many comparisons (a history's runs against its baseline) share the reading.
struct CompareGroup {
  std::vector<stats::Observation> observations;  // session: an index within the run
  std::set<std::string> sessions;
  // Evidence that a cell of the group is not what it claims (IsClaimFlag kinds: speculation
  // that never drafted, another backend, ...): no verdict is drawn from such a group.
  std::set<std::string> claim_flags;
};
struct CompareRunData {
  std::string metric, unit;
  // The hosts (sessions.machine_id, with a hostname to show) of the sessions that measured it.
  std::map<std::string, std::string> hosts;
  std::vector<std::string> axes;
  std::vector<std::string> order;  // group keys in cell order
  std::map<std::string, CompareGroup> groups;
};

// How cells of two runs are matched: by the values of the matched axes (compare), or by those and
// the cell's other parameters too (history: a changed matrix shares only the cells that ran with
// the same parameters). With the latter a key is "axes" + kFixedSeparator + the JSON of the
// parameters beyond the axes.
enum class CellMatch { kAxes, kAxesAndFixedParameters };
inline constexpr std::string_view kFixedSeparator = "\x1f";

// Reads `ref`'s measurements of `metric` (empty: the run's), grouped on `*by` (empty: filled
// with the run's axes). Errors as CompareTwoRuns.
absl::StatusOr<CompareRunData> ReadCompareRun(const RunRef& ref, const std::string& metric,
                                              std::vector<std::string>* by, CellMatch match);

// Whether two runs must have the same axes when no `by` is given (compare), or may differ and
// share what they share (history).
enum class AxesMustAgree { kUnlessByGiven, kNo };

// The A/A evidence on one host (CompareOptions::host_drift): per cell key, τ̂² and its df, from
// the runs whose every session ran on that machine, grouped by equal tags.
struct DriftEstimate {
  std::map<std::string, std::pair<double, double>> by_key;  // key -> (τ̂², df)
  std::vector<int64_t> runs;
  std::size_t groups = 0;
};
struct DriftCandidate {
  int64_t run_id = 0;
  std::string tags;  // RunTagsKey: "" for an untagged run (no evidence)
  const CompareRunData* data = nullptr;
};
DriftEstimate EstimateDriftFromRuns(const std::string& machine,
                                    const std::vector<DriftCandidate>& candidates);
// A run's tags as one comparable string ("k=v\n" each, in key order); "" when it has none.
std::string RunTagsKey(db::Database& db, int64_t run_id);

// CompareTwoRuns over runs already read with the same `by`. With `drift_by_machine`, a one-host
// comparison takes that machine's estimate from it (a history estimates once for its series)
// instead of reading the matrix's runs again; a machine absent from it has no estimate.
absl::StatusOr<RunComparison> CompareReadRuns(
    const RunRef& a, const CompareRunData& da, const RunRef& b, const CompareRunData& rb,
    const CompareOptions& options, const std::vector<std::string>& by,
    AxesMustAgree axes_must_agree,
    const std::map<std::string, DriftEstimate>* drift_by_machine = nullptr);

}  // namespace ladder::report
