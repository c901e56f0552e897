// The load view of a run (ladder/report/load.h): the engine runner's per-round load summary
// (`load_*` metrics) averaged per cell, grouped into throughput–latency curves per arm, and the
// run's paired ratios regrouped along the load axis.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/matrices/matrix.h"
#include "ladder/report/analysis.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

// The metrics the engine runner records per load round (engines/src/engine_runner.cc) and the
// field each one fills.
struct MetricField {
  const char* metric;
  double LoadCell::*field;
};
constexpr MetricField kFields[] = {
    {"load_output_tok_s", &LoadCell::output_tok_s},
    {"load_req_s", &LoadCell::req_s},
    {"load_goodput_req_s", &LoadCell::goodput_req_s},
    {"load_ttft_ms_p50", &LoadCell::ttft_ms_p50},
    {"load_ttft_ms_p99", &LoadCell::ttft_ms_p99},
    {"load_itl_ms_p50", &LoadCell::itl_ms_p50},
    {"load_itl_ms_p99", &LoadCell::itl_ms_p99},
    {"load_e2e_ms_p50", &LoadCell::e2e_ms_p50},
    {"load_e2e_ms_p99", &LoadCell::e2e_ms_p99},
    {"load_requests", &LoadCell::requests},
    {"load_failed_requests", &LoadCell::failed_requests},
    {"load_drain_share", &LoadCell::drain_share},
};

// Sum and count of one metric's values in one session.
struct Accumulator {
  double sum = 0.0;
  int64_t n = 0;
};
// cell id -> metric -> session id -> values.
using LoadValues = std::map<int64_t, std::map<std::string, std::map<std::string, Accumulator>>>;

// The mean over sessions of each session's mean.
double MeanOfSessionMeans(const std::map<std::string, Accumulator>& sessions) {
  double sum = 0.0;
  int64_t n = 0;
  for (const auto& [session, acc] : sessions) {
    if (acc.n == 0) continue;
    sum += acc.sum / static_cast<double>(acc.n);
    ++n;
  }
  return n > 0 ? sum / static_cast<double>(n) : LoadCell::kNaN;
}

absl::StatusOr<LoadValues> ReadLoadValues(db::Database& db, int64_t run_id) {
  std::vector<std::string> quoted;
  for (const auto& f : kFields) quoted.push_back(absl::StrCat("'", f.metric, "'"));
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db.Prepare(absl::StrCat("SELECT cell_id, session_id, metric, value FROM "
                                           "valid_measurements WHERE run_id = ?1 AND metric IN (",
                                           absl::StrJoin(quoted, ", "), ")")));
  stmt.Bind(1, run_id);
  LoadValues values;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    Accumulator& acc = values[stmt.Int(0)][stmt.Text(2)][stmt.Text(1)];
    acc.sum += stmt.Double(3);
    ++acc.n;
  }
  return values;
}

// The locate options a load line's bracket is computed with: the matrix's when its `locate`
// searched along this axis, else the reader's resolution with probes at whole requests in flight
// (concurrency) or at a thousandth of a request per second (request_rate).
stats::LocateOptions LoadLocateOptions(const RunAnalysis& a, const AnalysisOptions& options,
                                       const std::string& axis) {
  stats::LocateOptions locate = options.locate;
  if (a.info.locate && a.info.locate->axis == axis) {
    locate.resolution_octaves = a.info.locate->resolution_octaves;
    locate.min_step = static_cast<double>(a.info.locate->min_step);
  } else {
    locate.min_step = axis == "concurrency" ? 1.0 : 0.001;
  }
  return locate;
}

void AddRatioLines(const AnalysisOptions& options, RunAnalysis& a, LoadAnalysis& load) {
  std::map<std::string, size_t> line_index;
  for (size_t i = 0; i < a.comparisons.size(); ++i) {
    const Comparison& cmp = a.comparisons[i];
    const nlohmann::json x = cmp.context.value(load.axis, nlohmann::json());
    if (!x.is_number()) continue;
    std::vector<std::string> parts;
    for (const auto& [k, v] : SplitKey(cmp.context_key)) {
      if (k != load.axis) parts.push_back(k + "=" + v);
    }
    std::string label = absl::StrJoin(parts, " ");
    label += std::string(label.empty() ? "" : " · ") + cmp.pair_axis + " " + cmp.treatment_value +
             " vs " + cmp.baseline_value;
    auto [it, inserted] = line_index.try_emplace(label, load.ratio_lines.size());
    if (inserted) {
      LoadRatioLine line;
      line.label = label;
      line.key = absl::StrJoin(parts, ",");
      line.aa = cmp.aa;
      load.ratio_lines.push_back(std::move(line));
    }
    load.ratio_lines[it->second].points.push_back(i);
    load.ratio_lines[it->second].loads.push_back(x.get<double>());
  }
  const stats::LocateOptions locate = LoadLocateOptions(a, options, load.axis);
  for (auto& line : load.ratio_lines) {
    std::vector<size_t> order(line.points.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(),
              [&](size_t x, size_t y) { return line.loads[x] < line.loads[y]; });
    std::vector<size_t> points;
    std::vector<double> loads;
    for (size_t k : order) {
      points.push_back(line.points[k]);
      loads.push_back(line.loads[k]);
    }
    line.points = std::move(points);
    line.loads = std::move(loads);
    CrossingFit found = FitCrossing(a, line.points, line.loads, locate, options.confidence,
                                    load.axis == "concurrency" ? "concurrency levels" : "rates");
    line.crossing = std::move(found.crossing);
    line.crossover_fit = std::move(found.fit);
    line.crossover_error = std::move(found.error);
    line.too_few_ratios = found.too_few_ratios;
    // The ladder along the same axis is the same grouping: its line holds what `locate` did.
    if (a.depth_axis == load.axis) {
      for (size_t l = 0; l < a.lines.size(); ++l) {
        if (a.lines[l].label == line.label) line.ladder_line = l;
      }
    }
  }
}

}  // namespace

bool LoadCell::DrainsTooLong() const {
  return std::isfinite(drain_share) && drain_share > kLoadDrainShareLimit;
}

absl::Status AddLoad(db::Database& db, const AnalysisOptions& options, RunAnalysis& a) {
  ASSIGN_OR_RETURN(const LoadValues values, ReadLoadValues(db, a.info.run_id));
  if (values.empty()) return absl::OkStatus();
  LoadAnalysis load;
  for (const char* axis : kLoadAxes) {
    if (std::find(a.info.axes.begin(), a.info.axes.end(), axis) != a.info.axes.end()) {
      load.axis = axis;
      break;
    }
  }
  std::map<std::string, size_t> curve_index;
  for (const CellStats& cell : a.cells) {
    auto found = values.find(cell.cell_id);
    if (found == values.end()) continue;
    LoadCell lc;
    lc.key = cell.key;
    lc.arm = load.axis.empty() ? cell.key : matrices::CellKeyWithout(cell.key, {load.axis});
    if (!load.axis.empty()) {
      const nlohmann::json x = cell.axes.value(load.axis, nlohmann::json());
      if (x.is_number()) lc.load = x.get<double>();
    }
    for (const auto& f : kFields) {
      auto metric = found->second.find(f.metric);
      if (metric == found->second.end()) continue;
      lc.*f.field = MeanOfSessionMeans(metric->second);
    }
    if (auto tok = found->second.find("load_output_tok_s"); tok != found->second.end()) {
      lc.sessions = static_cast<int64_t>(tok->second.size());
      for (const auto& [session, acc] : tok->second) lc.rounds += acc.n;
    }
    auto [it, inserted] = curve_index.try_emplace(lc.arm, load.curves.size());
    if (inserted) load.curves.push_back(LoadCurve{lc.arm, {}});
    load.curves[it->second].cells.push_back(load.cells.size());
    load.cells.push_back(std::move(lc));
  }
  for (auto& curve : load.curves) {
    std::stable_sort(curve.cells.begin(), curve.cells.end(),
                     [&](size_t x, size_t y) { return load.cells[x].load < load.cells[y].load; });
  }
  if (!load.axis.empty()) AddRatioLines(options, a, load);
  a.load = std::move(load);
  return absl::OkStatus();
}

}  // namespace ladder::report
