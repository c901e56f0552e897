// `ladder history MATRIX`: the runs of one matrix as a series, per cell, against a baseline; and
// where a regression began.
//
// Runs whose matrices have the same name form the series, in run order. A changed matrix shares
// only the cells that ran with the same parameters: cells are matched by their axis values (or
// --by a subset, pooled as `ladder compare` pools them) and by the parameters beyond the axes,
// so a cell whose fixed parameters changed starts a series of its own.
//
// For each run and cell: the run's central value with its interval (stats::CellMeanInterval, the
// report's estimator: geometric mean of session means, log-t over sessions) and the change from
// the baseline with its verdict and matrix verdict (CompareTwoRuns' method: Welch on log session
// means, Holm over the cells the two runs share, the one-host drift allowance where it applies).
// Nothing here is a new interval.
//
// The baseline is the run named `baseline` for the matrix (db/series.h; `ladder baseline set`),
// an explicit run of the series, or, when no baseline named "default" is set, the series' first
// run (said so in `baseline_source`).
//
// Where it began: for each cell whose latest run is slower than the baseline under the matrix
// verdict, stats::FindChangePoint over the runs from the baseline to the latest (their log
// values and standard errors from their intervals; the run-to-run drift estimated from the
// series), naming the first run that moved and what changed there (tags, and what its sessions
// recorded: ladder build, driver, GPU, engine version, host, labels), or saying why it cannot.
//
// Read-only over the database; errors: NotFound for an unknown matrix or baseline name,
// InvalidArgument for a baseline run of another matrix, an unknown metric, axis or --cells.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/db/series.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/analysis.h"
#include "ladder/report/compare.h"
#include "ladder/stats/interval.h"

namespace ladder::report {

struct HistoryOptions {
  std::string metric;           // empty: the latest run's metric
  std::vector<std::string> by;  // axes to match cells on (pooled); empty: every axis
  // Keep only cells whose key holds every one of these "axis=value" items; empty: all.
  std::vector<std::string> cells;
  std::string baseline = db::kDefaultBaseline;  // the baseline's name
  std::optional<int64_t> baseline_run;          // a run of the series instead of a name
  double threshold = 0.02;                      // as CompareOptions
  double confidence = 0.95;
  // As CompareOptions::host_drift: unset (the default), a one-host comparison's drift is
  // estimated once from the series' runs on that host with equal tags; set, a constant allowance.
  std::optional<double> host_drift;
  Direction direction = Direction::kUnknown;
  int change_point_draws = 199;  // stats::ChangePointOptions::draws
  absl::Status Validate() const;
};

// One run of the series.
struct HistoryRun {
  int64_t run_id = 0;
  int64_t created_at_ms = 0;
  std::string state;
  std::string matrix_sha256;
  db::RunTags tags;
  // What its sessions recorded, each attribute's distinct values joined by ", ": "ladder"
  // (version and commit), "driver", "gpu", "engine" (engine_version evidence), "host", "label.K".
  std::map<std::string, std::string> recorded;
  int64_t sessions = 0;
  // Its comparison with the baseline over the cells they share: the matrix verdict's counts
  // ("slower" -> 3); empty for the baseline itself or without a comparison (`note` says why).
  std::map<std::string, int64_t> matrix_verdicts;
  std::string note;
};

// One run of one cell.
struct HistoryPoint {
  int64_t run_id = 0;
  int64_t sessions = 0;
  double value = 0;                         // geometric mean of session means (NaN without data)
  std::optional<stats::Interval> interval;  // CellMeanInterval; none below 3 sessions
  std::string interval_error;
  std::optional<stats::Interval> ratio;  // vs the baseline (none for the baseline itself)
  std::string verdict, matrix_verdict;   // "baseline" for the baseline's own point
  bool moved = false;                    // at or after the located change-point of this cell
};

struct ChangeLocation {
  bool searched = false;  // the latest run is slower than the baseline under the matrix verdict
  bool located = false;   // one run named
  int64_t first_run = 0;  // the best candidate (also when not located to one run)
  std::vector<int64_t> plausible_runs;         // runs as likely as first_run to be where it began
  double p_value = 1, step = 0, drift_sd = 0;  // stats::ChangePoint (step, drift: log scale)
  // What differs between first_run and the run before it: "build: abc → def".
  std::vector<std::string> changes;
  std::string text;  // one sentence: where it began, or "cannot locate: <why>"
};

struct HistorySeries {
  std::string key;           // the matched axes' values: "depth=256,path=2d"
  std::string fixed_params;  // JSON of parameters beyond the axes when runs differ in them ("")
  std::vector<HistoryPoint> points;  // in run order; only runs that measured the cell
  ChangeLocation change;
};

struct MatrixHistory {
  std::string matrix_name, metric, unit;
  Direction direction = Direction::kUnknown;
  double threshold = 0.02, confidence = 0.95;
  int64_t baseline_run = 0;
  std::string baseline_name;    // "" when the first run stands in
  std::string baseline_source;  // "baseline 'default'", "run 3 (given)", "the first run (...)"
  int64_t latest_run = 0;
  std::vector<HistoryRun> runs;  // the series, run order
  std::vector<HistorySeries> series;
  std::vector<std::string> notes;
};

absl::StatusOr<MatrixHistory> ReadHistory(db::Database& db, const std::string& matrix_name,
                                          const HistoryOptions& options = {});

// The run `text` names within the series of `matrix_name`: an id, `latest`, or a baseline name
// (`baseline` for "default", or any set name). NotFound naming the known baselines otherwise;
// InvalidArgument for a run id of another matrix.
absl::StatusOr<int64_t> ResolveSeriesRun(db::Database& db, const std::string& matrix_name,
                                         const std::string& text);

// The run of baseline `name` of `matrix_name`: NotFound for an unknown matrix, or for a name
// not set (naming the baselines that are).
absl::StatusOr<int64_t> ResolveBaseline(db::Database& db, const std::string& matrix_name,
                                        const std::string& name);

// A table per cell that fits 100 columns: run, date, value [interval], sessions, change vs the
// baseline, verdict, tags; the baseline and the moved runs marked; where it began below.
std::string RenderHistoryText(const MatrixHistory& history);
std::string RenderHistoryCsv(const MatrixHistory& history);  // one row per run and cell
nlohmann::json ToJson(const MatrixHistory& history);         // stable keys; NaN -> null

// One cell's series (history.series[series]) as an inline SVG chart, the same in `ladder report
// --history` and the coordinator's matrix page: one point per run at the run's place in the
// series (x: the runs in order, all cells on the same axis), its value with its interval as an
// error bar, the baseline's value as a dashed line with its interval shaded, and, when a
// regression's start was located, the runs from there on shaded and their points marked. Every
// text from the database is escaped. Hooks for tests and scripts:
//   <svg class="history" data-cell="KEY">
//   <circle class="history-point[ baseline][ moved][ began][ plausible][ no-interval]"
//           data-run data-cell data-value data-lower data-upper data-verdict data-tags>
//     with a <title> (the hover text: run, date, value and interval, change and verdict, tags,
//     and at the run where it began what changed there)
//   <path class="history-interval" data-run>   the error bar
//   <line class="history-baseline" data-run>   the baseline's value
//   <rect class="history-moved" data-run>       the runs from where it began (data-run: that run)
std::string RenderHistoryChart(const MatrixHistory& history, size_t series);
// The CSS those charts need (selectors under svg.history), for a page's <style>.
std::string HistoryChartStyle();

}  // namespace ladder::report
