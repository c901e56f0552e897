// `ladder report`: one or more runs rendered as a self-contained HTML page (inline SVG chart and
// script, no network) or as Markdown. Both formats render the same sections, built once
// (BuildSections), so a figure in the Markdown is the figure in the page.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/report/analysis.h"
#include "ladder/report/compare.h"
#include "ladder/report/history.h"

namespace ladder::report {

// Text for HTML text and attribute values: & < > " ' escaped, newlines as &#10;. The report's
// pages and the coordinator's web pages escape everything from the database with it.
std::string HtmlEscape(const std::string& text);

struct Report {
  std::vector<RunAnalysis> runs;                    // in the order asked
  std::vector<RunReproducibility> reproducibility;  // for each pair of runs that share cells
  std::vector<std::string> notes;                   // e.g. pairs that could not be compared
  // For each pair of runs (i < j) that share cells: `ladder compare` of run j (B) against run i
  // (A), the same rows and verdicts, with a flag where a run's session-to-session spread exceeds
  // the difference between the runs.
  std::vector<RunComparison> comparisons;
  // `ladder report --history`: the series of each reported run's matrix (AddHistories), drawn
  // as the coordinator's matrix page draws it.
  std::vector<MatrixHistory> histories;
};

// Analyses each run and compares every pair (i < j) of runs that share measured cell keys
// (reproducibility of the cell means, and CompareTwoRuns with options.threshold).
// Errors: those of AnalyzeRun (unknown run, unknown metric); at least one run is required.
absl::StatusOr<Report> BuildReport(db::Database& db, const std::vector<int64_t>& run_ids,
                                   const AnalysisOptions& options = {});

// Adds the history (ReadHistory) of each distinct matrix of the report's runs, of the metric the
// report analysed, with `options` otherwise (their `metric` is ignored). Errors: ReadHistory's.
absl::Status AddHistories(db::Database& db, Report& report, const HistoryOptions& options = {});

// A table of text cells. `row_cells` optionally names, per row, the cell key the row is about
// (HTML puts it in a data-row-cell attribute); `row_flagged` marks rows with a flag.
struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row_cells;
  std::vector<bool> row_flagged;
};

// A chart the HTML page draws in a section; Markdown and text say where to find it.
enum class ChartKind {
  kNone,
  kLadder,             // ratio B/A against the depth axis (RunAnalysis::lines)
  kThroughputLatency,  // output tok/s against p99 e2e latency, one curve per arm (load.h)
  kLoadRatio,          // ratio B/A against the load axis, with df and the crossover (load.h)
  kHistory,            // one cell's series over a matrix's runs (RenderHistoryChart)
};

struct Section {
  int level = 2;  // heading level (1 = the run's title)
  std::string title;
  std::string anchor;                   // id for HTML
  std::vector<std::string> paragraphs;  // plain text (escaped by the renderer)
  Table table;                          // may be empty
  ChartKind chart = ChartKind::kNone;   // the chart of run `chart_run` drawn here (HTML)
  int64_t chart_run = 0;
  // kHistory: the series `chart_series` of the history `chart_history` (Report::histories).
  size_t chart_history = 0, chart_series = 0;
};

std::vector<Section> BuildSections(const Report& report);

// The sections of one matrix's history (`history` is its index in Report::histories, carried in
// each section's chart_history): a summary with the runs and what distinguishes each, then per
// cell its chart and its table (run, date, value with its interval, sessions, change from the
// baseline, verdicts, the baseline and the moved runs marked, tags) and where it began.
std::vector<Section> HistorySections(const MatrixHistory& history, size_t index = 0);

// The same sections as HTML, charts included, without <html>/<head>: the body of the
// coordinator's matrix page (web/), which adds HistoryChartStyle() to its own stylesheet.
std::string RenderHistoryFragment(const MatrixHistory& history);

// Markdown: headings, paragraphs, pipe tables.
std::string RenderMarkdown(const Report& report);

// One HTML document, no external resources. Each point of the ladder chart is an SVG <circle
// class="point"> with data-cell="<treatment cell key>" and data-tip (the tooltip text: both
// arms' values, n, sessions, the interval, acceptance when recorded, flags); hovering or focusing
// a point shows data-tip in #tooltip. The load charts' points are <circle class="load-point">
// (never class "point", so a ladder point is still one per compared cell), in
// <svg class="load-curve"> (data-cell, data-arm, data-load, data-tok-s, data-latency-ms) and
// <svg class="load-ratio"> (data-cell of arm B, data-load, data-ratio, data-lower, data-upper,
// data-df), with the same tooltips. History charts are described at RenderHistoryChart.
std::string RenderHtml(const Report& report);

}  // namespace ladder::report
