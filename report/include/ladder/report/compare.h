// `ladder compare A B`: a verdict between two runs, per cell present in both.
//
// Runs may be in one database or in two (each file is a complete record, so a baseline database
// kept from last week compares against tonight's). Cells are matched by the values of their axes
// (all axes by default, or a chosen subset: cells that agree on it are pooled, their processes
// counted as distinct processes of the session). For each matched cell the ratio B / A of the
// runs' geometric means of session means comes with Welch's interval on the log session means
// (stats::UnpairedLogRatioInterval: sessions are the unit of replication across runs), and a
// verdict against the band 1 ± threshold (VerdictText): "slower" / "faster" only when the whole
// interval lies beyond the band, "no change" only when it lies within, else "inconclusive".
//
// Over the matrix: each judged cell's band test gives a p-value (stats::BandExceedancePValue) and
// Holm's adjustment over the cells judged gives `matrix_verdict`: a faster/slower verdict that
// survives it keeps the probability of ANY false faster/slower verdict among those cells at or
// below 1 − confidence, where the per-cell verdict keeps it per cell. "no change" is the same in
// both: claiming every cell is within the band at once is an intersection-union test, which needs
// no adjustment. `ladder compare --fail-on` acts on the matrix verdict unless told --per-cell.
//
// On one host (every session of both runs on one machine) the interval does not see the host's
// drift between the runs; the verdicts then judge against the band widened by `host_drift`.
//
// Read-only over the databases; thread safety as AnalyzeRun. Errors: NotFound for an unknown run,
// InvalidArgument for an unknown metric or axis, runs with different metrics or units, or a
// direction that cannot be told from the unit; statistics that cannot be computed for one cell
// (fewer than 2 sessions in a run) do not fail the comparison: the row's `error` says why.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/analysis.h"
#include "ladder/stats/compare.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/power.h"

namespace ladder::report {

// The drift allowance on one host when none is given: the largest change of one cell between two
// A/A runs of the CPU demo on one busy 2-core machine (6 runs, 15 pairs, 2026-12-06: 18.9 %;
// docs/statistics.md, "Two runs on one host"), rounded up. A quiet GPU host drifts less: measure
// yours with an A/A pair and pass it (`--host-drift`).
inline constexpr double kDefaultHostDrift = 0.20;

struct CompareOptions {
  std::string metric;           // empty: run A's metric (run B must have it too)
  std::vector<std::string> by;  // axes to match on; empty: every axis (both runs must share them)
  double threshold = 0.02;      // the band: ±2 %
  double confidence = 0.95;     // in (0, 1)
  // kUnknown: from the metric's unit (DirectionOfUnit); a unit that says nothing is an error
  // unless a direction is given here.
  Direction direction = Direction::kUnknown;
  // On one host. Given: a constant allowance — slower/faster only beyond ±(threshold +
  // host_drift), no change only within ±(threshold − host_drift) (never, when host_drift ≥
  // threshold); 0 trusts the interval as is. Not given (the default): the drift is estimated
  // per cell from A/A history on that host — earlier runs of the same matrix name whose every
  // session ran on that host, grouped by equal tags (the same build): the spread of their log
  // cell means beyond what their own intervals explain, τ̂² = max(0, Σ_g (k_g − 1)·(var_g(y) −
  // mean_g(se²)) / Σ_g (k_g − 1)), with df Σ (k_g − 1); untagged runs are no evidence. The
  // interval then carries it: exp(d ± t(ν)·√(s²_A/n_A + s²_B/n_B + 2τ̂²)), ν by
  // Welch–Satterthwaite over the three terms. Without such history the verdict is inconclusive
  // and says so (drift_source "unknown") rather than invent a band.
  std::optional<double> host_drift;
  // Each "no change" or inconclusive row's achieved detectable change (a noncentral-t inversion
  // per row, ~4 ms): a history judging every run of a series against its baseline, which shows
  // none of them, turns it off (100 runs of 200 cells took 90 s with it, under 1 s without).
  bool detectable = true;
  absl::Status Validate() const;
};

// Where a run is: a database and its id. `label` names it in the output ("run 3", or
// "base.db run 3" when the runs are in different files).
struct RunRef {
  db::Database* db = nullptr;
  int64_t run_id = 0;
  std::string label;
};

struct CompareRow {
  std::string key;  // the matched axes' values: "depth=256,path=2d"
  int64_t sessions_a = 0, sessions_b = 0;
  int64_t n_a = 0, n_b = 0;  // measurements
  // Geometric means of session means, in the metric's unit (NaN when there is no data).
  double mean_a = 0, mean_b = 0;
  // Session-to-session spread of each run: sd of log session means (≈ a relative sd; NaN with
  // fewer than 2 sessions).
  double spread_a = 0, spread_b = 0;
  std::optional<stats::Interval> ratio;  // B / A
  std::string error;                     // why there is no ratio
  stats::ChangeClass change = stats::ChangeClass::kStraddles;
  std::string verdict;  // VerdictText; "n/a" without a ratio
  // The band test's p-value (NaN without a ratio), and Holm's adjustment of it over the cells
  // judged; matrix_verdict is `verdict`, except that a faster/slower whose adjusted p is not below
  // 1 − confidence becomes "inconclusive".
  double p_band = 0, p_holm = 0;
  std::string matrix_verdict;
  // True when a run's session-to-session spread exceeds the difference between the runs
  // (|log ratio|): the difference is smaller than what separates two sessions of one run.
  bool spread_exceeds_difference = false;
  // With a "no change" or "inconclusive" matrix verdict: the change this comparison would have
  // called slower (or faster) with 80 % power under the matrix verdict (Holm over cells_judged,
  // against `band`), its measured spread taken as the truth (stats::AchievedDetectableChange):
  // what "no change" rules out, and how far from a verdict an inconclusive cell is.
  std::optional<stats::DetectableChange> detectable;
  // drift_source "estimated": the run-to-run drift τ̂ of this cell on that host (log scale) and
  // its df; NaN when the history has none for this cell.
  double drift_sd = std::numeric_limits<double>::quiet_NaN();
  double drift_df = 0;
  // Evidence, in either run (or either arm), that the cell is not what it claims (IsClaimFlag:
  // speculation_not_engaged, backend_mismatch, ...). The ratio stays; the verdict and the matrix
  // verdict are "withheld (KIND, ...)" and the row cannot fire a change in Holm's family.
  std::vector<std::string> claim_flags;
};

struct RunComparison {
  // "two runs" (CompareTwoRuns: Welch's interval between runs) or "paired arms" (ComparePairedArms:
  // two arms of one run's paired axis, measured in the same sessions).
  std::string design = "two runs";
  std::string label_a, label_b;
  int64_t run_a = 0, run_b = 0;
  std::string metric, unit;
  Direction direction = Direction::kUnknown;
  std::string direction_source;  // "unit", "matrix" (its declared `better`) or "given"
  double threshold = 0.02, confidence = 0.95;
  std::vector<std::string> by;
  std::vector<CompareRow> rows;                    // cells in both runs, in run A's cell order
  std::vector<std::string> only_a, only_b;         // keys measured in one run only
  std::map<std::string, int64_t> verdicts;         // verdict -> rows
  std::map<std::string, int64_t> matrix_verdicts;  // matrix_verdict -> rows
  int64_t cells_judged = 0;                        // rows with a ratio: Holm's family
  // The band the verdicts judged against: threshold, or threshold + host_drift on one host.
  double band = 0.02;
  double host_drift = 0;  // applied (0 unless one_host)
  std::vector<std::string> notes;
  // The hostname when every session of both runs ran on one host (empty otherwise): a note says
  // that the interval then does not cover that host's drift between the runs.
  std::string one_host;
  // On one host, what the verdicts did about its drift: "given" (the --host-drift allowance),
  // "estimated" (from A/A history: drift_runs, per row drift_sd), "unknown" (no A/A history:
  // every verdict inconclusive); "" when the runs are not on one host.
  std::string drift_source;
  std::vector<int64_t> drift_runs;  // the A/A runs the estimate came from
  std::size_t drift_groups = 0;     // groups of equal tags among them
};

absl::StatusOr<RunComparison> CompareTwoRuns(const RunRef& a, const RunRef& b,
                                             const CompareOptions& options = {});

// Two arms of a paired axis in ONE run: `treatment` against `baseline` (values of `axis`), per
// context of the other axes — the one-host design, where every session measured both arms
// interleaved, so the host's drift between runs cancels in the ratio. Each row is report's paired
// comparison (stats::PairedRatioInterval: geometric mean of the per-session ratios, log-t interval
// on sessions − 1 df), judged against the band and adjusted over the rows by Holm exactly as
// CompareTwoRuns does; a claim flag on either arm withholds the verdict. `design` is "paired
// arms", run_a = run_b. InvalidArgument when `axis` is not one of the run's pair axes or a value
// is not among its levels (the message lists them); FailedPrecondition when no context has both
// arms measured.
struct PairedArms {
  std::string axis, baseline, treatment;
};
absl::StatusOr<RunComparison> ComparePairedArms(const RunRef& run, const PairedArms& arms,
                                                const CompareOptions& options = {});

// A short paragraph saying what the table shows and how verdicts are decided.
std::string ComparisonMethodText(const RunComparison& comparison);

// What the matrix verdict guarantees, over how many cells (part of the method text).
std::string MatrixGuaranteeText(const RunComparison& comparison);

// Markdown: a heading, the method, a table (cell, sessions A/B, mean A/B, ratio B/A, change,
// interval with df, verdict, flags) and a summary line of verdict counts.
std::string RenderComparisonMarkdown(const RunComparison& comparison);

// Stable keys; NaN/inf become null.
nlohmann::json ToJson(const RunComparison& comparison);

// "+12.3 % / -10.9 %": a detectable change up / down; "" for none.
std::string DetectableText(const std::optional<stats::DetectableChange>& detectable);

}  // namespace ladder::report
