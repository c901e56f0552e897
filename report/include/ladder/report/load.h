// The load view of a run whose cells were measured under load (the engine runner's
// `concurrency` closed loop or `request_rate` open loop): per cell the load summary the runner
// recorded (`load_*` metrics), the throughput–latency curve of each arm, and the paired ratio
// against the load axis with the crossover where it crosses 1. Part of RunAnalysis (`load`),
// filled by AnalyzeRun; rendered by the report (HTML charts, text/Markdown tables, JSON).
#pragma once

#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "ladder/stats/adaptive.h"
#include "ladder/stats/interval.h"

namespace ladder::report {

// The axes that carry load, in the order preferred when a matrix has both.
inline constexpr const char* kLoadAxes[] = {"concurrency", "request_rate"};

// The latency the throughput–latency chart plots. End-to-end rather than inter-token: a
// speculative arm streams several tokens per step, so its gaps between streamed chunks are not
// comparable with a plain arm's, while the time to a whole request of fixed length is.
inline constexpr const char* kLoadLatencyMetric = "load_e2e_ms_p99";

// One cell's load summary. Each figure is the mean over sessions of the per-session mean over
// processes and rounds of what the runner recorded per round (a percentile is the round's
// percentile over its measured requests); NaN when the runner did not record it (goodput needs
// an SLO; rates need a measured window).
struct LoadCell {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  std::string key;  // the cell key
  std::string arm;  // the cell key without the load axis ("spec=off"; "" when nothing else varies)
  double load = kNaN;  // the load axis value (requests in flight, or requests/s); NaN: no axis
  int64_t sessions = 0;
  int64_t rounds = 0;  // (session, process, round) measurements of load_output_tok_s
  double output_tok_s = kNaN, req_s = kNaN, goodput_req_s = kNaN;
  double ttft_ms_p50 = kNaN, ttft_ms_p99 = kNaN;
  double itl_ms_p50 = kNaN, itl_ms_p99 = kNaN;
  double e2e_ms_p50 = kNaN, e2e_ms_p99 = kNaN;
  double requests = kNaN, failed_requests = kNaN;  // per round
  // The share of the measuring window run below the set load (load_drain_share); above
  // kLoadDrainShareLimit the cell's throughput is undercounted.
  double drain_share = kNaN;
  bool DrainsTooLong() const;
};

// A closed loop runs below its level while the warm-up hands over and in the drain after the
// last send: with requests long against the window that is a large part of it and tok/s reads
// low (the load study's 64-request cells). Above this share the report flags a cell.
inline constexpr double kLoadDrainShareLimit = 0.2;

// One arm's throughput–latency curve: its cells by ascending load.
struct LoadCurve {
  std::string arm;            // as in LoadCell::arm
  std::vector<size_t> cells;  // indices into LoadAnalysis::cells
};

// The paired ratio B / A of the run's metric (RunAnalysis::comparisons, the same intervals and
// df) against the load axis: one line per combination of the other axes and arm.
struct LoadRatioLine {
  std::string label;  // "depth=1024 · spec mtp:1 vs off"
  std::string key;    // the context without the load axis, as a cell key
  bool aa = false;
  std::vector<size_t> points;  // indices into RunAnalysis::comparisons, by ascending load
  std::vector<double> loads;
  // The first sign change of the ratio's log (stats::PlanCrossoverProbe) and, from three loads,
  // the crossover of a linear fit of the per-token difference with Fieller's interval.
  std::optional<stats::LocatePlan> crossing;
  std::optional<stats::Interval> crossover_fit;
  std::string crossover_error;
  // Fewer than two loads have a ratio with an interval (one session of one round gives none):
  // whether the ratio crosses 1 is not judged.
  bool too_few_ratios = false;
  // The ladder line (RunAnalysis::lines) that is this line, when the ladder runs along the load
  // axis; its `located` holds what the coordinator's `locate` did on this line.
  std::optional<size_t> ladder_line;
};

struct LoadAnalysis {
  std::string axis;             // "concurrency" or "request_rate"; empty when neither is an axis
  std::vector<LoadCell> cells;  // cells with load metrics, in cell order
  std::vector<LoadCurve> curves;
  std::vector<LoadRatioLine> ratio_lines;  // empty without a load axis or a pair axis
};

}  // namespace ladder::report
