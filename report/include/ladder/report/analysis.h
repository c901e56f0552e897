// ladder::analysis — the statistics of ladder::stats put to work over a results database.
//
// AnalyzeRun reads one run (read-only; the coordinator's live WAL database or a copied file) and
// computes, on the fly, from the valid measurements only:
//   * per cell: n, median, mean, sd, CV and a 95 % interval whose df come from sessions;
//   * paired ratios B / A between the arms of the matrix's `pair` axes: cells that differ only in
//     one pair axis form a comparison against that axis's first (baseline) value; per-session
//     log-ratio then t across sessions, a hierarchical bootstrap and Fieller's interval;
//   * the A/A ratio when the matrix declared `aa_control` (the false-positive check);
//   * variance by level (round ⊂ process ⊂ session) per cell, and arm × session per comparison;
//   * the ladder: ratio against the depth axis per line, with the crossover bracket and a fit;
//   * under load (engine cells with `concurrency` or `request_rate`): throughput, latency
//     percentiles and goodput per cell, and the paired ratio against the load axis (load.h);
//   * flags where evidence contradicts the request (backend_mismatch, probe_silent, throttled
//     clocks, failed cells, speculation_not_engaged: a speculation cell whose engine drafted
//     nothing, speculation_not_verifiable: one whose engine cannot say) and warm-up handling by a
//     stated rule when asked.
// Nothing is written: every figure is recomputed from raw measurements each time.
//
// Thread safety: the functions are pure over their Database argument, which the caller must not
// use from another thread during the call. Errors: absl::Status (NotFound for an unknown run,
// InvalidArgument for an unknown metric); statistics that cannot be computed for one cell or
// comparison (too few sessions, one round) do not fail the run: their `error` field says why.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/load.h"
#include "ladder/stats/adaptive.h"
#include "ladder/stats/compare.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/power.h"
#include "ladder/stats/reproducibility.h"
#include "ladder/stats/steady_state.h"
#include "ladder/stats/summary.h"
#include "ladder/stats/variance.h"

namespace ladder::report {

// Version of this analysis layer; reported with every output together with
// stats::kStatsMethodVersion, so a figure can be traced to the code that produced it.
inline constexpr const char* kAnalysisVersion = "ladder-analysis/1";

// What to do with warm-up rounds. kKeepAll uses every valid measurement (the default: the
// kernel runner already discards its own warm-up iterations). kDiscardWarmup applies
// stats::FindSteadyState to each (cell, session, process) series in round order and drops the
// rounds before the steady state; a series that never meets the rule is kept whole and flagged
// "never steady".
enum class WarmupPolicy { kKeepAll, kDiscardWarmup };

// Which way a metric is better, judged from its unit: times (us, ms, s, ns) are better lower,
// rates (anything per second, "/s") higher; kUnknown otherwise.
enum class Direction { kHigherIsBetter, kLowerIsBetter, kUnknown };
Direction DirectionOfUnit(const std::string& unit);
std::string DirectionText(Direction direction);  // "higher is better", ...

// The verdict on a ratio B / A against the band 1 ± threshold, in the metric's terms:
//   "slower" / "faster"   the whole interval lies beyond the band on the worse / better side
//                         (for a time, B/A above 1 + threshold is slower; for a rate, below);
//   "no change"           the whole interval lies inside the band;
//   "inconclusive"        the interval reaches across a band edge: more sessions are needed to
//                         tell a change larger than the threshold from a smaller one.
// With an unknown direction "higher" / "lower" replace "slower" / "faster".
std::string VerdictText(stats::ChangeClass change, Direction direction);
// Whether a flag says a cell is not what it claims (backend_mismatch, probe_silent,
// speculation_not_engaged, speculation_while_off, speculation_not_verifiable): a comparison
// with such an arm keeps its ratio and flag on screen and gets no verdict ("withheld (KIND)").
bool IsClaimFlag(const std::string& kind);

struct AnalysisOptions {
  std::string metric;          // empty: the run's metric
  double confidence = 0.95;    // in (0, 1)
  int bootstrap_draws = 2000;  // 10 000 for a final figure; 0 skips the bootstrap
  WarmupPolicy warmup = WarmupPolicy::kKeepAll;
  stats::SteadyStateRule steady_rule;  // used with kDiscardWarmup
  stats::LocateOptions locate;         // crossover bracket resolution / step
  // Per-level costs (seconds) for the optimal-repeats plan; unset: measured from the run's time
  // stamps (MeasureLevelCosts), and no plan when they cannot be.
  std::optional<stats::LevelCosts> costs;
  // The band for verdicts on ratios (paired and between runs): ±2 % by default.
  double threshold = 0.02;
  absl::Status Validate() const;
};

struct AAControlInfo {
  std::string axis, of, as;
};

// The matrix's `locate` option (the coordinator searched for the crossover along `axis`).
struct LocateInfo {
  std::string axis;
  double resolution_octaves = 0.25;
  int64_t min_step = 1;
  int max_sessions = 0;
};

struct RunInfo {
  int64_t run_id = 0;
  std::string matrix_name, matrix_sha256, state, runner, metric, unit;
  std::vector<std::string> axes;            // in declaration order
  std::vector<std::string> pair_axes;       // from runs.pair_axes
  std::optional<AAControlInfo> aa_control;  // from the stored matrix YAML
  std::optional<LocateInfo> locate;         // from the stored matrix YAML
  // Axis values in cell order (rendered as in cell keys), per axis.
  std::vector<std::vector<std::string>> axis_values;
  int64_t sessions = 0, processes = 0, rounds = 0;  // the planned replicates
  Direction direction = Direction::kUnknown;
};

// A flag where evidence contradicts the request, or a figure should not be trusted as is.
struct Flag {
  std::string kind;    // failed, no data, backend_mismatch, probe_silent, throttled, never steady,
                       // speculation_not_engaged, speculation_not_verifiable
  std::string detail;  // e.g. the failure reason, "3 of 6 measurements"
};

// What the starts of a cell said about themselves, from attempts that finished: every runner's
// probe counts (`probe_patterns` counted on an engine's or a program's output), a command
// program's own `{"evidence": {...}}` lines and what an engine reported of itself (engine_config,
// engine_version, engine_backend), flattened to scalar leaves ("path.taken" -> "3d",
// "engine_config.reported.n_ctx" -> "34816").
struct StartsSaid {
  int64_t starts = 0;                           // processes or program starts that recorded probes
  std::map<std::string, int64_t> probe_lines;   // pattern -> lines counted over the starts
  std::map<std::string, int64_t> probe_starts;  // pattern -> starts that printed it at least once
  // leaf -> its value when every start that printed the leaf agreed, else kVaries.
  std::map<std::string, std::string> program;
  static constexpr const char* kVaries = "(varies)";
};

struct CellStats {
  int64_t cell_id = 0;
  std::string key;                  // "depth=256,query_rows=1,path=2d"
  nlohmann::json axes;              // axis -> value
  std::vector<std::string> values;  // the cell's axis values rendered, in axis order
  int64_t n = 0;                    // measurements used
  int64_t sessions = 0;             // distinct sessions
  int64_t discarded_warmup = 0;     // measurements dropped by kDiscardWarmup
  std::optional<stats::Summary> summary;
  // CellMeanInterval with MeanScale::kAuto: for a time or rate (values > 0), the geometric mean
  // of session means with a log-t interval (never a bound <= 0); none below 3 sessions, when
  // interval_error says how many an interval needs.
  std::optional<stats::Interval> interval;
  std::string interval_error;
  std::optional<double> acceptance_rate;         // mean of metric acceptance_rate, if recorded
  std::optional<double> mean_acceptance_length;  // mean of metric mean_acceptance_length
  std::optional<StartsSaid> said;  // when its starts recorded probe counts or program evidence
  std::vector<Flag> flags;
};

// A ratio interval, or why it could not be computed.
struct RatioResult {
  std::optional<stats::Interval> interval;
  std::string error;
};

// One paired comparison: `treatment` against `baseline`, the same cell but for one pair axis.
struct Comparison {
  std::string pair_axis;
  std::string baseline_value, treatment_value;  // values of the pair axis
  std::string baseline_key, treatment_key;      // cell keys
  // The other axes' values ("depth=256,query_rows=1"), the comparison's context.
  std::string context_key;
  nlohmann::json context;
  bool aa = false;       // the A/A control: treatment is the aa_control copy of baseline
  int64_t sessions = 0;  // sessions that measured both arms
  double mean_a = 0.0, mean_b = 0.0;  // means of session means
  int64_t n_a = 0, n_b = 0;
  RatioResult t;          // PairedRatioInterval: the primary figure
  RatioResult bootstrap;  // BootstrapRatioInterval (t-calibrated, over sessions)
  RatioResult fieller;    // FiellerRatioInterval: a different estimand (ratio of means)
  // The t interval against 1 ± AnalysisOptions::threshold, and its verdict (VerdictText).
  stats::ChangeClass change = stats::ChangeClass::kStraddles;
  std::string verdict;
  // With a "no change" or "inconclusive" verdict from sessions: the change this comparison would
  // have called slower (or faster) with 80 % power under its own verdict, its measured spread
  // taken as the truth (stats::AchievedDetectableChange).
  std::optional<stats::DetectableChange> detectable;
  std::optional<stats::ArmSessionVariance> arm_session;
  std::string arm_session_error;
  std::vector<Flag> flags;  // union of both cells' flags
  // What the two arms' programs said differently: leaves that each arm's starts agreed on and
  // whose values differ between the arms (absent in one arm: "-"), and probe patterns whose
  // share of starts differs. "path.taken: 2d -> 3d", "PROBE_3D_SPEC_ACTIVE: 0/3 -> 3/3 starts".
  std::vector<std::string> said_differs;

  // The primary estimate B / A, or NaN when it could not be computed.
  double Ratio() const;
};

struct CellVariance {
  std::string key;
  std::optional<stats::VarianceComponents> components;
  std::string error;
};

// Per-level summary over cells: the median over cells of each level's T (as a relative sd) and
// share, with the sessions needed for a ±2 % and ±5 % interval of a cell mean at the run's
// design (rounds, processes).
struct LevelSummary {
  int64_t cells = 0;                                 // cells whose components could be estimated
  std::array<double, stats::kNumLevels> median_t{};  // sqrt(T²), NaN when unidentified
  std::array<double, stats::kNumLevels> median_share{};
  std::optional<stats::SessionsNeeded> sessions_for_2pct, sessions_for_5pct;
  std::optional<stats::RepeatPlan> optimal;  // for `costs`
  std::optional<stats::LevelCosts> costs;    // given (AnalysisOptions::costs) or measured
  std::string costs_source;                  // given | measured
  std::string costs_note;                    // where measured costs came from, at what resolution
  std::string note;
  // Degrees of freedom behind each level's component (VarianceComponents::df of the cells).
  std::array<double, stats::kNumLevels> df{};
  // The same verdicts the text prints, computed once so the JSON carries them word for word:
  // "12", "≥ 1000 (the cap)", "1 (no variance at this level)".
  std::string sessions_for_2pct_text, sessions_for_5pct_text;
  std::string rounds_text, processes_text;
  // Caveats on the plan: a component resting on few df, a cost below its clock's resolution.
  std::vector<std::string> warnings;
};

// A repeat count with how it came about: "7", "≥ 1000 (the cap)", "1 (no variance at this level)".
std::string RepeatText(int repeats, stats::RepeatBound bound);
// Sessions needed: "12" or "≥ 1000 (the cap)".
std::string SessionsNeededText(const stats::SessionsNeeded& needed);

// One line of the ladder chart: comparisons sharing every axis but the depth axis (and the pair
// axis), for one treatment arm.
struct LadderLine {
  std::string label;  // "query_rows=1 · 3d vs 2d"
  std::string pair_axis, treatment_value, baseline_value;
  bool aa = false;
  std::vector<size_t> points;  // indices into RunAnalysis::comparisons, by ascending depth
  std::vector<double> depths;
  std::optional<stats::LocatePlan> crossing;     // sign change bracket (when one exists)
  std::optional<stats::Interval> crossover_fit;  // Fieller on the linear fit (≥ 3 points)
  std::string crossover_error;
  // The line's context without the depth axis, as a cell key ("" when nothing else varies);
  // for a `locate` run it is the line's key in adaptive_decisions.
  std::string key;
  // What the coordinator's `locate` did on this line, when the run has `locate`.
  struct Located {
    std::string outcome;         // the stop's outcome (resolved, step_limited, budget_spent,
                                 // no_crossing, no_data), or "in progress"
    std::string reason;          // the latest decision's reason
    std::vector<double> probes;  // depths probed, in the order decided
    int64_t decisions = 0;
    int64_t added_sessions = 0;  // sessions added at probes beyond the planned ones
    // What the probes cost: cells added, units (paired sessions) run, valid measurements.
    int64_t cells = 0, units = 0, measurements = 0;
    // The coordinator's final (or latest) bracket; NaN when none.
    double bracket_lower = std::numeric_limits<double>::quiet_NaN();
    double bracket_upper = std::numeric_limits<double>::quiet_NaN();
  };
  std::optional<Located> located;
};

struct SessionInfo {
  std::string session_id, hostname, state, cpu_model;
  std::vector<std::string> gpus;  // "NVIDIA H100 80GB (sm_90, driver 550.54)"
  int64_t measurements = 0;       // valid measurements of this run's metric
  int64_t cells = 0;
};

struct RunAnalysis {
  RunInfo info;
  std::string depth_axis;        // "depth", else the first numeric non-pair axis; empty when none
  std::vector<CellStats> cells;  // in cell order
  std::vector<Comparison> comparisons;  // in treatment cell order
  std::vector<CellVariance> variance;   // per cell
  LevelSummary levels;
  std::vector<LadderLine> lines;
  std::vector<SessionInfo> sessions;
  std::vector<std::string> notes;  // caveats that apply to the whole run
  bool clock_recorded = false;     // gpu_clock_mhz / gpu_clock_default_mhz were recorded
  double threshold = 0.02;         // AnalysisOptions::threshold, the band of the verdicts
  // When cells carry the engine runner's load metrics (load_output_tok_s, ...): the per-cell
  // load summary, each arm's throughput–latency curve and the paired ratio against the load axis.
  std::optional<LoadAnalysis> load;

  const CellStats* FindCell(const std::string& key) const;
};

absl::StatusOr<RunAnalysis> AnalyzeRun(db::Database& db, int64_t run_id,
                                       const AnalysisOptions& options = {});

// The per-level costs of a run, in seconds, from its time stamps (medians over the run):
//   round:   the engine runner's steady-clock time of each cell measurement (`engine_process`
//            evidence `measure_us`, µs) when recorded, else the time between the ends of
//            consecutive rounds of one process (result time stamps, 1 ms);
//   process: the `engine_process` evidence's start time (steady clock, `start_us` or
//            `start_ms`) when the engine runner recorded one, else the gap between one
//            process's last round and the next one's first, less a round (1 ms stamps);
//   session: from the session's registration to its first result, less a process start and a
//            round (what an agent spends before measuring: its start, downloads, warm-up; the
//            VM's own provisioning is not seen, so pass costs to include it).
// FailedPrecondition when no process has two rounds. Agents' and coordinator's clocks are
// assumed to agree to well under a round.
// Costs come with where they were measured: `note` names each cost's source and resolution
// ("round: engine runner, steady clock (µs)"), and process_below_resolution is true when the
// process start was taken from millisecond stamps and came out below 1 ms (a start that cannot
// be told from zero: the plan then says "≥" for processes per session).
struct MeasuredCosts : stats::LevelCosts {
  std::string note;
  bool process_below_resolution = false;
};
absl::StatusOr<MeasuredCosts> MeasureLevelCosts(db::Database& db, int64_t run_id);

// Reproducibility of two runs: cells matched by key (runs of the same matrix sha256 match
// exactly; otherwise cells with equal keys), compared on their mean.
struct ReproRow {
  std::string key;
  double a = 0.0, b = 0.0, percent = 0.0;
};
struct RunReproducibility {
  int64_t run_a = 0, run_b = 0;
  bool same_matrix = false;  // equal matrix sha256
  std::vector<ReproRow> rows;
  std::optional<stats::Summary> summary;  // of percent
  std::string note;
};
absl::StatusOr<RunReproducibility> CompareRunAnalyses(const RunAnalysis& a, const RunAnalysis& b);

// Machine-readable forms (stable keys; NaN/inf become null).
nlohmann::json ToJson(const RunAnalysis& analysis);
nlohmann::json ToJson(const RunReproducibility& repro);

}  // namespace ladder::report
