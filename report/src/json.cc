#include <cmath>

#include "ladder/report/analysis.h"
#include "ladder/stats/compare.h"
#include "ladder/stats/ratio.h"

namespace ladder::report {
namespace {

using nlohmann::json;

json Num(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

json IntervalJson(const stats::Interval& i) {
  return {{"estimate", Num(i.estimate)},
          {"lower", Num(i.lower)},
          {"upper", Num(i.upper)},
          {"confidence", i.confidence},
          {"df", Num(i.df)},
          {"n_units", i.n_units},
          {"scope", i.scope == stats::IntervalScope::kBetweenSessions ? "between_sessions"
                                                                      : "within_session_only"},
          {"bounded", i.bounds == stats::Boundedness::kBounded},
          {"note", i.note},
          {"estimand", i.estimand}};
}

json RatioJson(const RatioResult& r) {
  if (r.interval) return IntervalJson(*r.interval);
  return {{"error", r.error}};
}

json FlagsJson(const std::vector<Flag>& flags) {
  json out = json::array();
  for (const auto& f : flags) out.push_back({{"kind", f.kind}, {"detail", f.detail}});
  return out;
}

json SummaryJson(const stats::Summary& s) {
  return {{"n", s.n},        {"median", Num(s.median)}, {"mean", Num(s.mean)}, {"sd", Num(s.sd)},
          {"cv", Num(s.cv)}, {"min", Num(s.min)},       {"max", Num(s.max)}};
}

json LevelsArray(const std::array<double, stats::kNumLevels>& a) {
  return {{"round", Num(a[stats::kRound])},
          {"process", Num(a[stats::kProcess])},
          {"session", Num(a[stats::kSession])}};
}

json LoadJson(const RunAnalysis& analysis) {
  const LoadAnalysis& load = *analysis.load;
  json cells = json::array();
  for (const LoadCell& c : load.cells) {
    cells.push_back({{"cell", c.key},
                     {"arm", c.arm},
                     {"load", Num(c.load)},
                     {"sessions", c.sessions},
                     {"rounds", c.rounds},
                     {"output_tok_s", Num(c.output_tok_s)},
                     {"req_s", Num(c.req_s)},
                     {"goodput_req_s", Num(c.goodput_req_s)},
                     {"ttft_ms_p50", Num(c.ttft_ms_p50)},
                     {"ttft_ms_p99", Num(c.ttft_ms_p99)},
                     {"itl_ms_p50", Num(c.itl_ms_p50)},
                     {"itl_ms_p99", Num(c.itl_ms_p99)},
                     {"e2e_ms_p50", Num(c.e2e_ms_p50)},
                     {"e2e_ms_p99", Num(c.e2e_ms_p99)},
                     {"requests", Num(c.requests)},
                     {"failed_requests", Num(c.failed_requests)},
                     {"drain_share", Num(c.drain_share)},
                     {"drains_too_long", c.DrainsTooLong()}});
  }
  // The throughput–latency chart's series: per arm, (load, latency, throughput) by load.
  json curves = json::array();
  for (const LoadCurve& curve : load.curves) {
    json points = json::array();
    for (size_t i : curve.cells) {
      const LoadCell& c = load.cells[i];
      points.push_back({{"cell", c.key},
                        {"load", Num(c.load)},
                        {"latency_ms", Num(c.e2e_ms_p99)},
                        {"output_tok_s", Num(c.output_tok_s)}});
    }
    curves.push_back({{"arm", curve.arm}, {"points", points}});
  }
  // The ratio chart's series: per line, the paired ratio at each load with its interval and df.
  json lines = json::array();
  for (const LoadRatioLine& line : load.ratio_lines) {
    json points = json::array();
    for (size_t k = 0; k < line.points.size(); ++k) {
      const Comparison& cmp = analysis.comparisons[line.points[k]];
      json p = {{"cell", cmp.treatment_key}, {"baseline_cell", cmp.baseline_key},
                {"load", line.loads[k]},     {"sessions", cmp.sessions},
                {"ratio", Num(cmp.Ratio())}, {"t", RatioJson(cmp.t)},
                {"verdict", cmp.verdict}};
      points.push_back(std::move(p));
    }
    json l = {
        {"label", line.label}, {"key", line.key}, {"aa_control", line.aa}, {"points", points}};
    if (line.crossing) {
      l["crossing"] = {{"bracket", {line.crossing->bracket_lower, line.crossing->bracket_upper}},
                       {"width_octaves", line.crossing->width_octaves},
                       {"sign_changes", line.crossing->sign_changes}};
    }
    if (line.crossover_fit) l["crossover_fit"] = IntervalJson(*line.crossover_fit);
    if (!line.crossover_error.empty()) l["crossover_error"] = line.crossover_error;
    l["crossing_judged"] = !line.too_few_ratios;
    if (line.ladder_line) {
      l["ladder_line"] = *line.ladder_line;
      const auto& located = analysis.lines[*line.ladder_line].located;
      if (located) {
        l["located"] = {{"outcome", located->outcome},
                        {"probes", located->probes},
                        {"bracket", {Num(located->bracket_lower), Num(located->bracket_upper)}}};
      }
    }
    lines.push_back(std::move(l));
  }
  return {{"axis", load.axis},
          {"latency_metric", kLoadLatencyMetric},
          {"cells", cells},
          {"curves", curves},
          {"ratio_lines", lines}};
}

}  // namespace

json ToJson(const RunAnalysis& analysis) {
  const RunInfo& info = analysis.info;
  json run = {
      {"run_id", info.run_id},
      {"matrix", info.matrix_name},
      {"matrix_sha256", info.matrix_sha256},
      {"state", info.state},
      {"runner", info.runner},
      {"metric", info.metric},
      {"unit", info.unit},
      {"direction", DirectionText(info.direction)},
      {"axes", info.axes},
      {"pair_axes", info.pair_axes},
      {"replicates",
       {{"sessions", info.sessions}, {"processes", info.processes}, {"rounds", info.rounds}}}};
  if (info.aa_control) {
    run["aa_control"] = {
        {"axis", info.aa_control->axis}, {"of", info.aa_control->of}, {"as", info.aa_control->as}};
  }
  json cells = json::array();
  for (const auto& c : analysis.cells) {
    json cell = {{"cell", c.key},
                 {"axes", c.axes},
                 {"n", c.n},
                 {"sessions", c.sessions},
                 {"flags", FlagsJson(c.flags)}};
    if (c.summary) cell["summary"] = SummaryJson(*c.summary);
    if (c.interval) {
      cell["interval"] = IntervalJson(*c.interval);
    } else if (!c.interval_error.empty()) {
      cell["interval"] = {{"error", c.interval_error}};
    }
    if (c.discarded_warmup) cell["discarded_warmup"] = c.discarded_warmup;
    if (c.acceptance_rate) cell["acceptance_rate"] = *c.acceptance_rate;
    if (c.mean_acceptance_length) cell["mean_acceptance_length"] = *c.mean_acceptance_length;
    if (c.said) {
      cell["starts_said"] = {{"starts", c.said->starts},
                             {"probe_lines", c.said->probe_lines},
                             {"probe_starts", c.said->probe_starts},
                             {"program", c.said->program}};
    }
    cells.push_back(std::move(cell));
  }
  json comparisons = json::array();
  for (const auto& cmp : analysis.comparisons) {
    json j = {{"pair_axis", cmp.pair_axis},
              {"baseline", cmp.baseline_value},
              {"arm", cmp.treatment_value},
              {"baseline_cell", cmp.baseline_key},
              {"cell", cmp.treatment_key},
              {"context", cmp.context},
              {"aa_control", cmp.aa},
              {"sessions", cmp.sessions},
              {"mean_a", Num(cmp.mean_a)},
              {"mean_b", Num(cmp.mean_b)},
              {"n_a", cmp.n_a},
              {"n_b", cmp.n_b},
              {"ratio", Num(cmp.Ratio())},
              {"t", RatioJson(cmp.t)},
              {"bootstrap", RatioJson(cmp.bootstrap)},
              {"fieller", RatioJson(cmp.fieller)},
              {"verdict", cmp.verdict},
              {"detectable", cmp.detectable ? json{{"up", Num(cmp.detectable->up)},
                                                   {"down", Num(cmp.detectable->down)},
                                                   {"power", 0.8}}
                                            : json()},
              {"band", std::string(stats::ChangeClassName(cmp.change))},
              {"threshold", analysis.threshold},
              {"flags", FlagsJson(cmp.flags)},
              {"said_differs", cmp.said_differs}};
    if (cmp.arm_session) {
      const auto& v = *cmp.arm_session;
      j["arm_session"] = {{"sessions", v.sessions},
                          {"session_main_sd", Num(std::sqrt(v.session_main))},
                          {"interaction_sd", Num(std::sqrt(v.interaction_ms))},
                          {"within_session_sd", Num(std::sqrt(v.within_session_noise))},
                          {"interaction_net_sd", Num(std::sqrt(v.interaction_net))}};
    } else {
      j["arm_session"] = {{"error", cmp.arm_session_error}};
    }
    comparisons.push_back(std::move(j));
  }
  json variance = json::array();
  for (const auto& v : analysis.variance) {
    if (!v.components) {
      variance.push_back({{"cell", v.key}, {"error", v.error}});
      continue;
    }
    std::array<double, stats::kNumLevels> t{};
    for (size_t l = 0; l < stats::kNumLevels; ++l) t[l] = std::sqrt(v.components->t2[l]);
    variance.push_back({{"cell", v.key},
                        {"t", LevelsArray(t)},
                        {"share", LevelsArray(v.components->share)},
                        {"note", v.components->note}});
  }
  json levels = {{"cells", analysis.levels.cells},
                 {"median_t", LevelsArray(analysis.levels.median_t)},
                 {"median_share", LevelsArray(analysis.levels.median_share)},
                 {"note", analysis.levels.note}};
  const LevelSummary& lv = analysis.levels;
  levels["df"] = LevelsArray(lv.df);
  levels["warnings"] = lv.warnings;
  // Each verdict as a number, how it came about, and the text the report prints.
  auto needed = [](const stats::SessionsNeeded& n, const std::string& text) {
    return json{
        {"sessions", n.sessions},
        {"verdict", n.verdict == stats::SessionsVerdict::kExceedsMax ? "exceeds_cap" : "reachable"},
        {"text", text}};
  };
  if (lv.sessions_for_2pct)
    levels["sessions_for_2pct"] = needed(*lv.sessions_for_2pct, lv.sessions_for_2pct_text);
  if (lv.sessions_for_5pct)
    levels["sessions_for_5pct"] = needed(*lv.sessions_for_5pct, lv.sessions_for_5pct_text);
  auto bound = [](stats::RepeatBound b) {
    switch (b) {
      case stats::RepeatBound::kAtCap:
        return "at_cap";
      case stats::RepeatBound::kNoVariance:
        return "no_variance";
      case stats::RepeatBound::kOptimum:
        break;
    }
    return "optimum";
  };
  if (lv.optimal) {
    levels["optimal"] = {{"rounds_per_process",
                          {{"repeats", lv.optimal->rounds_per_process},
                           {"bound", bound(lv.optimal->rounds_bound)},
                           {"text", lv.rounds_text}}},
                         {"processes_per_session",
                          {{"repeats", lv.optimal->processes_per_session},
                           {"bound", bound(lv.optimal->processes_bound)},
                           {"text", lv.processes_text}}}};
  }
  if (lv.costs) {
    levels["costs"] = {{"session_s", lv.costs->session},
                       {"process_s", lv.costs->process},
                       {"round_s", lv.costs->round},
                       {"source", lv.costs_source},
                       {"measured_from", lv.costs_note}};
  } else if (!lv.costs_note.empty()) {
    levels["costs"] = {{"error", lv.costs_note}};
  }
  json lines = json::array();
  for (const auto& line : analysis.lines) {
    json points = json::array();
    for (size_t k = 0; k < line.points.size(); ++k) {
      points.push_back({{"depth", line.depths[k]},
                        {"cell", analysis.comparisons[line.points[k]].treatment_key}});
    }
    json l = {{"label", line.label}, {"aa_control", line.aa}, {"points", points}};
    if (line.crossing) {
      l["crossing"] = {{"bracket", {line.crossing->bracket_lower, line.crossing->bracket_upper}},
                       {"width_octaves", line.crossing->width_octaves},
                       {"sign_changes", line.crossing->sign_changes},
                       {"next_probe", line.crossing->next_probe}};
    }
    if (line.crossover_fit) l["crossover_fit"] = IntervalJson(*line.crossover_fit);
    if (!line.crossover_error.empty()) l["crossover_error"] = line.crossover_error;
    l["key"] = line.key;
    if (line.located) {
      const auto& located = *line.located;
      l["located"] = {{"outcome", located.outcome},
                      {"reason", located.reason},
                      {"probes", located.probes},
                      {"decisions", located.decisions},
                      {"added_sessions", located.added_sessions},
                      {"cells", located.cells},
                      {"units", located.units},
                      {"measurements", located.measurements},
                      {"bracket", {Num(located.bracket_lower), Num(located.bracket_upper)}}};
    }
    lines.push_back(std::move(l));
  }
  json sessions = json::array();
  for (const auto& s : analysis.sessions) {
    sessions.push_back({{"session_id", s.session_id},
                        {"hostname", s.hostname},
                        {"state", s.state},
                        {"cpu_model", s.cpu_model},
                        {"gpus", s.gpus},
                        {"measurements", s.measurements},
                        {"cells", s.cells}});
  }
  json out = {
      {"method",
       {{"analysis", kAnalysisVersion}, {"stats", std::string(stats::kStatsMethodVersion)}}},
      {"run", run},
      {"depth_axis", analysis.depth_axis},
      {"cells", cells},
      {"comparisons", comparisons},
      {"variance", variance},
      {"levels", levels},
      {"ladder", lines},
      {"sessions", sessions},
      {"clock_recorded", analysis.clock_recorded},
      {"notes", analysis.notes}};
  if (analysis.load) out["load"] = LoadJson(analysis);
  return out;
}

json ToJson(const RunReproducibility& repro) {
  json rows = json::array();
  for (const auto& r : repro.rows) {
    rows.push_back({{"cell", r.key}, {"a", r.a}, {"b", r.b}, {"percent", r.percent}});
  }
  json out = {{"run_a", repro.run_a},
              {"run_b", repro.run_b},
              {"same_matrix", repro.same_matrix},
              {"rows", rows},
              {"note", repro.note}};
  if (repro.summary) {
    out["summary"] = {{"median", repro.summary->median},
                      {"mean", repro.summary->mean},
                      {"max", repro.summary->max}};
  }
  return out;
}

}  // namespace ladder::report
