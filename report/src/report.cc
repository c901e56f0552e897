#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/report/compare.h"
#include "ladder/report/report.h"
#include "ladder/stats/ratio.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

std::string FlagsText(const std::vector<Flag>& flags) {
  std::vector<std::string> parts;
  for (const auto& f : flags) {
    parts.push_back(f.detail.empty() ? f.kind : absl::StrCat(f.kind, ": ", f.detail));
  }
  return parts.empty() ? "" : "⚠ " + absl::StrJoin(parts, "; ");
}

std::string Percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return FormatNumber(100.0 * fraction);
}

std::string ShortSession(const std::string& id) { return id.substr(0, 8); }

// "[0.281, 0.303] (df 4)", or why there is none.
std::string IntervalWithDf(const RatioResult& r) {
  if (!r.interval) return r.error.empty() ? "-" : r.error;
  std::string out = FormatInterval(*r.interval);
  if (std::isfinite(r.interval->df)) out += " (df " + FormatDf(r.interval->df) + ")";
  return out;
}

// "0.837 [0.80, 0.87] (df 4)": the method's own estimate beside its interval.
std::string EstimateWithInterval(const RatioResult& r) {
  if (!r.interval) return r.error.empty() ? "-" : r.error;
  return FormatNumber(r.interval->estimate) + " " + IntervalWithDf(r);
}

// Depths, df and counts in their shortest form (1024, 1, 2.5).
std::string Short(double v) {
  if (!std::isfinite(v)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

// The load view: what each arm delivered at each load (the table under the throughput–latency
// chart), then the paired ratio against the load axis with where it crosses 1.
void LoadSections(const RunAnalysis& a, std::vector<Section>& out) {
  const LoadAnalysis& load = *a.load;
  const RunInfo& info = a.info;
  const bool has_axis = !load.axis.empty();
  {
    Section s;
    s.title = "Load: throughput and latency";
    s.anchor = absl::StrCat("load-", info.run_id);
    s.chart = ChartKind::kThroughputLatency;
    s.chart_run = info.run_id;
    s.paragraphs.push_back(absl::StrCat(
        "Per cell measured under load", has_axis ? " (" + load.axis + ")" : "",
        ": output tokens/s, requests/s and goodput (requests/s within the SLO), and the "
        "percentiles of time to first token (TTFT), inter-token latency (ITL) and end-to-end "
        "latency (e2e) over each round's measured requests. Each figure is the engine runner's "
        "per-round value averaged over rounds and processes within a session, then over "
        "sessions. The chart plots output throughput against p99 end-to-end latency, one curve "
        "per arm (the cell without ",
        has_axis ? load.axis : "a load axis", "), its points ordered by ",
        has_axis ? load.axis : "cell",
        " and labelled with it. End-to-end, not inter-token: a "
        "speculative arm streams several tokens per step, so its gaps between streamed chunks "
        "do not compare with a plain arm's, while the time to a whole request does."));
    s.paragraphs.push_back(
        "drain %: the share of the measuring window (first measured send to last measured end) "
        "run below the set load: with fewer requests in flight than the concurrency (closed "
        "loop), or after the last arrival (open loop).");
    std::vector<std::string> drained;  // keys of the cells that drained too long
    s.table.header = {"arm"};
    if (has_axis) s.table.header.push_back(load.axis);
    for (const char* h :
         {"sessions", "rounds", "output tok/s", "req/s", "TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms",
          "ITL p99 ms", "e2e p50 ms", "e2e p99 ms", "goodput req/s", "drain %"}) {
      s.table.header.push_back(h);
    }
    for (const LoadCurve& curve : load.curves) {
      for (size_t i : curve.cells) {
        const LoadCell& c = load.cells[i];
        std::vector<std::string> row = {c.arm.empty() ? "(all)" : c.arm};
        if (has_axis) row.push_back(Short(c.load));
        row.push_back(std::to_string(c.sessions));
        row.push_back(std::to_string(c.rounds));
        for (double v : {c.output_tok_s, c.req_s, c.ttft_ms_p50, c.ttft_ms_p99, c.itl_ms_p50,
                         c.itl_ms_p99, c.e2e_ms_p50, c.e2e_ms_p99, c.goodput_req_s}) {
          row.push_back(FormatNumber(v));
        }
        row.push_back(std::isfinite(c.drain_share)
                          ? FormatNumber(100.0 * c.drain_share) + (c.DrainsTooLong() ? " ⚠" : "")
                          : "-");
        s.table.rows.push_back(std::move(row));
        s.table.row_cells.push_back(c.key);
        s.table.row_flagged.push_back(c.DrainsTooLong());
        if (c.DrainsTooLong()) drained.push_back(c.key);
      }
    }
    if (!drained.empty()) {
      s.paragraphs.push_back(absl::StrCat(
          "⚠ ", drained.size(), " cell", drained.size() == 1 ? "" : "s", " spent more than ",
          std::lround(100.0 * kLoadDrainShareLimit),
          " % of the measuring window below their load (", absl::StrJoin(drained, "; "),
          "): their tokens/s and requests/s read low. Lengthen duration_s (or num_requests) to "
          "several times the end-to-end latency."));
    }
    out.push_back(std::move(s));
  }
  if (load.ratio_lines.empty()) return;
  Section s;
  s.title = absl::StrCat("Load: paired ratio against ", load.axis);
  s.anchor = absl::StrCat("load-ratio-", info.run_id);
  s.chart = ChartKind::kLoadRatio;
  s.chart_run = info.run_id;
  s.paragraphs.push_back(absl::StrCat(
      "The paired ratio B/A of ", info.metric, " (the rows of Paired ratios: t across sessions, ",
      "df = sessions − 1; with one session, within it, which says nothing about another machine) "
      "against ",
      load.axis,
      " (log axis), one line per combination of the other axes; whiskers are the 95 % t "
      "intervals, each labelled with its df; the dashed line is ratio 1. Where a line's ratio "
      "crosses 1, the sign change is shaded and the crossover of a linear fit of the per-token "
      "difference (B − A; 1/rate for rates) is marked with Fieller's 95 % interval."));
  for (const LoadRatioLine& line : load.ratio_lines) {
    std::string text = line.label + ": ";
    if (!line.crossing && line.too_few_ratios) {
      text += "whether the ratio crosses 1 cannot be judged: " + line.crossover_error;
    } else if (!line.crossing) {
      text += absl::StrCat("no sign change over ", line.points.size(), " ", load.axis, " levels",
                           line.crossover_error.empty() ? "" : " (" + line.crossover_error + ")");
    } else {
      text += absl::StrCat("the ratio crosses 1 between ", load.axis, " ",
                           Short(line.crossing->bracket_lower), " and ",
                           Short(line.crossing->bracket_upper));
      if (line.crossover_fit) {
        text += line.crossover_fit->bounds == stats::Boundedness::kUnbounded
                    ? absl::StrCat("; linear fit: unbounded (point ",
                                   Short(line.crossover_fit->estimate),
                                   "; the slope is not significant)")
                    : absl::StrCat("; crossover (linear fit) ", Short(line.crossover_fit->estimate),
                                   ", 95 % ", FormatInterval(*line.crossover_fit), " (df ",
                                   FormatDf(line.crossover_fit->df), ")");
      } else if (!line.crossover_error.empty()) {
        text += "; " + line.crossover_error;
      }
    }
    if (line.ladder_line && a.lines[*line.ladder_line].located) {
      const auto& located = *a.lines[*line.ladder_line].located;
      text += absl::StrCat("; located by the coordinator: ", located.outcome);
      if (std::isfinite(located.bracket_lower)) {
        text += absl::StrCat(", bracket [", Short(located.bracket_lower), ", ",
                             Short(located.bracket_upper), "]");
      }
      if (!located.probes.empty()) {
        std::vector<std::string> probes;
        for (double p : located.probes) probes.push_back(Short(p));
        text += ", probes " + absl::StrJoin(probes, ", ");
      }
    }
    s.paragraphs.push_back(text + ".");
  }
  s.table.header = {"line",
                    load.axis,
                    "sessions",
                    "ratio B/A",
                    "change",
                    "95 % t interval (df)",
                    "verdict (±" + FormatDf(100 * a.threshold) + " %)"};
  for (const LoadRatioLine& line : load.ratio_lines) {
    for (size_t k = 0; k < line.points.size(); ++k) {
      const Comparison& cmp = a.comparisons[line.points[k]];
      s.table.rows.push_back({line.label, Short(line.loads[k]), std::to_string(cmp.sessions),
                              FormatNumber(cmp.Ratio()), FormatChange(cmp.Ratio()),
                              IntervalWithDf(cmp.t), cmp.verdict.empty() ? "-" : cmp.verdict});
      s.table.row_cells.push_back(cmp.treatment_key);
      s.table.row_flagged.push_back(!cmp.flags.empty());
    }
  }
  out.push_back(std::move(s));
}

// What the starts said: per paired comparison, what the two arms' programs and probes said
// differently (the evidence that each arm ran what it claims); per cell when nothing is paired.
void StartsSaidSection(const RunAnalysis& a, std::vector<Section>& out) {
  // At most kShown items per comparison, one per row, each cut to fit a terminal's column;
  // --json has them all, whole.
  static constexpr size_t kShown = 3;
  static constexpr size_t kItemChars = 48;
  auto shown = [](const std::vector<std::string>& items) {
    std::vector<std::string> lines;
    if (items.empty()) lines.push_back("nothing differs");
    for (size_t i = 0; i < std::min(items.size(), kShown); ++i) {
      lines.push_back(items[i].size() > kItemChars ? items[i].substr(0, kItemChars - 3) + "..."
                                                   : items[i]);
    }
    if (items.size() > kShown) {
      lines.back() += absl::StrCat(" (+", items.size() - kShown, " more in --json)");
    }
    return lines;
  };
  Section s;
  s.title = "What the starts said";
  s.anchor = absl::StrCat("said-", a.info.run_id);
  s.paragraphs.push_back(
      "From the starts that finished: the probe patterns counted on each engine's or program's "
      "output, a command program's own evidence lines and what an engine reported of itself "
      "(its /props or server info, version, backend), flattened to leaves (path.taken, "
      "engine_config.reported.n_ctx). A leaf counts for a cell when all its starts printed the "
      "same value.");
  if (!a.comparisons.empty()) {
    s.paragraphs.push_back(
        "Per paired comparison, what arm B said differently from arm A (\"leaf: A -> B\"; - where "
        "an arm printed no such leaf). \"nothing differs\" means the evidence cannot tell the arms "
        "apart.");
    s.table.header = {"context", "B vs A", "starts A / B", "what differs"};
    for (const auto& cmp : a.comparisons) {
      const CellStats* base = a.FindCell(cmp.baseline_key);
      const CellStats* treated = a.FindCell(cmp.treatment_key);
      auto starts = [](const CellStats* c) {
        return c && c->said ? std::to_string(c->said->starts) : std::string("-");
      };
      const std::vector<std::string> lines =
          base && treated && base->said && treated->said
              ? shown(cmp.said_differs)
              : std::vector<std::string>{"an arm recorded nothing"};
      for (size_t i = 0; i < lines.size(); ++i) {
        s.table.rows.push_back(
            {i ? "" : cmp.context_key,
             i ? ""
               : absl::StrCat(cmp.pair_axis, " ", cmp.treatment_value, " vs ", cmp.baseline_value),
             i ? "" : starts(base) + " / " + starts(treated), lines[i]});
        s.table.row_cells.push_back(cmp.treatment_key);
        s.table.row_flagged.push_back(false);
      }
    }
  } else {
    s.table.header = {"cell", "starts", "probes (starts that printed it)"};
    for (const auto& c : a.cells) {
      if (!c.said) continue;
      std::vector<std::string> probes;
      for (const auto& [pattern, n] : c.said->probe_starts) {
        probes.push_back(absl::StrCat(pattern, " ", n, "/", c.said->starts));
      }
      s.table.rows.push_back({c.key, std::to_string(c.said->starts),
                              probes.empty() ? "-" : absl::StrJoin(probes, "; ")});
      s.table.row_cells.push_back(c.key);
      s.table.row_flagged.push_back(false);
    }
  }
  out.push_back(std::move(s));
}

void RunSections(const RunAnalysis& a, std::vector<Section>& out) {
  const RunInfo& info = a.info;
  const std::string unit = info.unit.empty() ? "" : " " + info.unit;
  {
    Section s;
    s.level = 1;
    s.title = absl::StrCat("Run ", info.run_id, ": ", info.matrix_name);
    s.anchor = absl::StrCat("run-", info.run_id);
    s.paragraphs.push_back(absl::StrCat(
        "Matrix ", info.matrix_name, " (sha256 ", info.matrix_sha256.substr(0, 12), "), ",
        info.runner, " runner, state ", info.state, ". Metric ", info.metric,
        info.unit.empty() ? "" : " (" + info.unit + ", " + DirectionText(info.direction) + ")",
        ". Planned replicates: ", info.sessions, " sessions × ", info.processes, " processes × ",
        info.rounds, " rounds. Only measurements of completed attempts count."));
    s.paragraphs.push_back(absl::StrCat(
        "Method: ", kAnalysisVersion, ", ", std::string(stats::kStatsMethodVersion),
        ". Intervals are 95 % with degrees of freedom from sessions (the top replicated level), "
        "never from the iteration count, and each shows its df. A cell's central value is the "
        "geometric mean of its session means with a log-t interval (never below zero for a time "
        "or a rate); below 3 sessions no interval is given. Ratios are B / A of the metric: the "
        "t interval estimates the geometric mean of per-session ratios (per-session log-ratio, t "
        "across sessions), as does the bootstrap (sessions resampled, t-calibrated); Fieller's "
        "interval estimates a different quantity, the ratio of the arms' means, shown with its "
        "own estimate. Verdicts are against ±",
        FormatDf(100 * a.threshold),
        " %: slower or faster only when the whole t interval lies beyond the band, no change "
        "only when it lies within it, else inconclusive."));
    for (const auto& note : a.notes) s.paragraphs.push_back("Note: " + note);
    out.push_back(std::move(s));
  }
  if (!a.comparisons.empty()) {
    Section s;
    s.title = "Paired ratios";
    s.anchor = absl::StrCat("ratios-", info.run_id);
    s.paragraphs.push_back(absl::StrCat(
        "Each row compares a cell (arm B) with the cell that differs only in the pair axis, at "
        "its first value (arm A), within the sessions that measured both. ",
        DirectionText(info.direction), " for ", info.metric, "."));
    s.table.header = {"context",
                      "B vs A",
                      "sessions",
                      "A mean" + unit,
                      "B mean" + unit,
                      "ratio B/A",
                      "change",
                      "95 % t interval (df)",
                      "verdict (±" + FormatDf(100 * a.threshold) + " %)",
                      "detects (80 % power)",
                      "flags"};
    for (const auto& cmp : a.comparisons) {
      std::string arms =
          absl::StrCat(cmp.pair_axis, " ", cmp.treatment_value, " vs ", cmp.baseline_value);
      if (cmp.aa) arms += " (A/A)";
      std::string flags = FlagsText(cmp.flags);
      if (cmp.t.interval && cmp.t.interval->scope == stats::IntervalScope::kWithinSessionOnly) {
        flags = absl::StrCat(flags.empty() ? "" : flags + "; ",
                             "1 session: ", std::string(stats::kWithinSessionNote));
      }
      if (!cmp.t.interval && !cmp.t.error.empty()) {
        flags = absl::StrCat(flags.empty() ? "" : flags + "; ", cmp.t.error);
      }
      s.table.rows.push_back({cmp.context_key, arms, std::to_string(cmp.sessions),
                              FormatNumber(cmp.mean_a), FormatNumber(cmp.mean_b),
                              FormatNumber(cmp.Ratio()), FormatChange(cmp.Ratio()),
                              IntervalWithDf(cmp.t), cmp.verdict.empty() ? "-" : cmp.verdict,
                              DetectableText(cmp.detectable), flags});
      s.table.row_cells.push_back(cmp.treatment_key);
      s.table.row_flagged.push_back(!cmp.flags.empty());
    }
    out.push_back(std::move(s));
  }
  if (std::any_of(a.cells.begin(), a.cells.end(), [](const CellStats& c) {
        return c.said && (!c.said->probe_lines.empty() || !c.said->program.empty());
      })) {
    StartsSaidSection(a, out);
  }
  if (!a.comparisons.empty()) {
    // The other two methods, each with the quantity it estimates and its own point estimate.
    Section s;
    s.level = 3;
    s.title = "Paired ratios: bootstrap and Fieller";
    s.anchor = absl::StrCat("ratios-other-", info.run_id);
    s.paragraphs.push_back(
        "The bootstrap resamples sessions and is t-calibrated (its shape, the t interval's "
        "small-sample width); it estimates the same quantity as the t interval. Fieller's "
        "interval is for the ratio of the arms' means of session means, a different quantity: "
        "its own estimate is shown beside it.");
    s.table.header = {"context", "B vs A", "sessions",
                      "bootstrap: geo. mean of session ratios [95 %] (df)",
                      "Fieller: ratio of means [95 %] (df)"};
    for (const auto& cmp : a.comparisons) {
      std::string arms =
          absl::StrCat(cmp.pair_axis, " ", cmp.treatment_value, " vs ", cmp.baseline_value);
      if (cmp.aa) arms += " (A/A)";
      s.table.rows.push_back({cmp.context_key, arms, std::to_string(cmp.sessions),
                              EstimateWithInterval(cmp.bootstrap),
                              EstimateWithInterval(cmp.fieller)});
      s.table.row_cells.push_back(cmp.treatment_key);
      s.table.row_flagged.push_back(false);
    }
    out.push_back(std::move(s));
  }
  for (const auto& cmp : a.comparisons) {
    if (!cmp.aa) continue;
    Section s;
    s.level = 3;
    s.title = "A/A control";
    s.anchor = absl::StrCat("aa-", info.run_id);
    s.paragraphs.push_back(absl::StrCat(
        cmp.treatment_key, " runs exactly the configuration of ", cmp.baseline_key,
        ": its ratio is the false-positive check. Ratio ", FormatNumber(cmp.Ratio()),
        cmp.t.interval ? absl::StrCat(", 95 % ", IntervalWithDf(cmp.t)) : "",
        cmp.t.interval ? (cmp.t.interval->Contains(1.0)
                              ? ": contains 1, as it should."
                              : ": EXCLUDES 1 — the pipeline finds a difference between "
                                "identical arms.")
                       : "."));
    out.push_back(std::move(s));
  }
  if (!a.lines.empty()) {
    Section s;
    s.title = "Ladder";
    s.anchor = absl::StrCat("ladder-", info.run_id);
    s.chart = ChartKind::kLadder;
    s.chart_run = info.run_id;
    if (a.depth_axis.empty()) {
      s.paragraphs.push_back("No numeric axis besides the pair axes: points are in cell order.");
    } else {
      s.paragraphs.push_back(absl::StrCat(
          "Ratio B/A against ", a.depth_axis,
          " (log axis), one line per combination of the "
          "other axes; whiskers are the 95 % t intervals; the dashed line is ratio 1 (no "
          "gain)."));
    }
    s.table.header = {"line", "points", "sign change", "crossover (linear fit, 95 %)"};
    for (const auto& line : a.lines) {
      std::string bracket = "none";
      std::string fit = "-";
      if (line.crossing) {
        bracket = absl::StrCat(a.depth_axis, " between ", Short(line.crossing->bracket_lower),
                               " and ", Short(line.crossing->bracket_upper), " (",
                               FormatNumber(line.crossing->width_octaves), " octaves)");
        // The bracket is drawn from point estimates; say when the ends are not distinct from 1.
        bool undecided = false;
        for (size_t k = 0; k < line.points.size(); ++k) {
          if (line.depths[k] != line.crossing->bracket_lower &&
              line.depths[k] != line.crossing->bracket_upper) {
            continue;
          }
          const auto& t = a.comparisons[line.points[k]].t.interval;
          if (!t || t->Contains(1.0)) undecided = true;
        }
        if (undecided) bracket += "; an end's interval contains 1, so the sign is not settled";
        if (line.crossing->sign_changes > 1) {
          bracket += absl::StrCat("; ", line.crossing->sign_changes, " sign changes: not monotone");
        }
        if (line.crossover_fit) {
          fit = line.crossover_fit->bounds == stats::Boundedness::kUnbounded
                    ? absl::StrCat("unbounded (point ", Short(line.crossover_fit->estimate),
                                   "; the slope is not significant)")
                    : absl::StrCat(Short(line.crossover_fit->estimate), " ",
                                   FormatInterval(*line.crossover_fit));
        } else if (!line.crossover_error.empty()) {
          fit = line.crossover_error;
        }
      }
      s.table.rows.push_back({line.label, std::to_string(line.points.size()), bracket, fit});
      s.table.row_cells.push_back("");
      s.table.row_flagged.push_back(false);
    }
    out.push_back(std::move(s));
  }
  if (info.locate) {
    // What the coordinator's search did: the figure to quote, its two intervals, and its cost.
    Section s;
    s.title = "Located crossover";
    s.anchor = absl::StrCat("locate-", info.run_id);
    s.paragraphs.push_back(absl::StrCat(
        "The coordinator searched along ", info.locate->axis, " for ratio = 1 to ",
        FormatNumber(info.locate->resolution_octaves), " octave (probes at multiples of ",
        info.locate->min_step, ", at most ", info.locate->max_sessions,
        " paired sessions per probe). The crossover is the root of a linear fit of the "
        "per-token latency difference (B − A) against ",
        info.locate->axis,
        ", with Fieller's 95 % interval; the bracket is the pair of measured depths whose ratios "
        "straddle 1."));
    s.table.header = {"line", "outcome", "crossover (fit, 95 %)", "bracket", "probes",
                      "cost", "why"};
    for (const auto& line : a.lines) {
      if (!line.located) continue;
      const auto& l = *line.located;
      std::string fit =
          line.crossover_fit
              ? (line.crossover_fit->bounds == stats::Boundedness::kUnbounded
                     ? absl::StrCat("unbounded (point ", Short(line.crossover_fit->estimate), ")")
                     : absl::StrCat(Short(line.crossover_fit->estimate), " ",
                                    FormatInterval(*line.crossover_fit)))
              : (line.crossover_error.empty() ? "-" : line.crossover_error);
      const std::string bracket =
          std::isfinite(l.bracket_lower)
              ? absl::StrCat("[", Short(l.bracket_lower), ", ", Short(l.bracket_upper), "] (",
                             FormatNumber(std::log2(l.bracket_upper / l.bracket_lower)), " octave)")
              : "none";
      std::vector<std::string> probes;
      for (double p : l.probes) probes.push_back(Short(p));
      s.table.rows.push_back(
          {line.label, l.outcome, fit, bracket,
           probes.empty() ? "none" : absl::StrJoin(probes, ", "),
           absl::StrCat(l.cells, " cells, ", l.units, " units (", l.added_sessions,
                        " added sessions), ", l.measurements, " measurements"),
           l.reason});
      s.table.row_cells.push_back("");
      s.table.row_flagged.push_back(l.outcome != "resolved" && l.outcome != "step_limited");
    }
    if (s.table.rows.empty()) {
      s.paragraphs.push_back("No line has a locate decision yet: the planned ladder is not done.");
    }
    out.push_back(std::move(s));
  }
  if (a.load) LoadSections(a, out);
  {
    Section s;
    s.title = "Cells";
    s.anchor = absl::StrCat("cells-", info.run_id);
    s.paragraphs.push_back(absl::StrCat(
        "Per cell: n measurements, distinct sessions, median, mean, sd and CV of the "
        "measurements, and the geometric mean of the session means with its 95 % log-t interval "
        "(df = sessions − 1; both bounds positive). Below ",
        stats::kMinSessionsForInterval,
        " sessions there is no interval: t with 1 df multiplies the spread by 12.7."));
    s.table.header = {"cell",        "n",          "sessions", "median" + unit,
                      "mean" + unit, "sd",         "cv %",     "geo. mean [95 %]",
                      "df",          "acceptance", "flags"};
    for (const auto& c : a.cells) {
      std::vector<std::string> row = {c.key, std::to_string(c.n), std::to_string(c.sessions)};
      if (c.summary) {
        row.push_back(FormatNumber(c.summary->median));
        row.push_back(FormatNumber(c.summary->mean));
        row.push_back(FormatNumber(c.summary->sd));
        row.push_back(Percent(c.summary->cv));
      } else {
        row.insert(row.end(), {"-", "-", "-", "-"});
      }
      if (c.interval) {
        row.push_back(FormatNumber(c.interval->estimate) + " " + FormatInterval(*c.interval) +
                      (c.interval->scope == stats::IntervalScope::kWithinSessionOnly
                           ? " (within session)"
                           : ""));
        row.push_back(Short(c.interval->df));
      } else {
        row.push_back(c.interval_error.empty() ? "-" : c.interval_error);
        row.push_back("-");
      }
      std::string acceptance = "-";
      if (c.acceptance_rate) acceptance = "rate " + FormatNumber(*c.acceptance_rate);
      if (c.mean_acceptance_length) {
        acceptance = (acceptance == "-" ? "" : acceptance + ", ") + "length " +
                     FormatNumber(*c.mean_acceptance_length);
      }
      row.push_back(acceptance);
      row.push_back(FlagsText(c.flags));
      s.table.rows.push_back(std::move(row));
      s.table.row_cells.push_back(c.key);
      s.table.row_flagged.push_back(!c.flags.empty());
    }
    out.push_back(std::move(s));
  }
  {
    Section s;
    s.title = "Variance by level";
    s.anchor = absl::StrCat("variance-", info.run_id);
    const LevelSummary& l = a.levels;
    s.paragraphs.push_back(
        "Kalibera & Jones components on log(value): T is the relative sd each level adds "
        "(round ⊂ process ⊂ session), share is T² / ΣT².");
    if (l.cells > 0) {
      std::string p = absl::StrCat("Median over ", l.cells, " cells: round ",
                                   Percent(l.median_t[stats::kRound]), " % (share ",
                                   Percent(l.median_share[stats::kRound]), " %), process ",
                                   Percent(l.median_t[stats::kProcess]), " % (share ",
                                   Percent(l.median_share[stats::kProcess]), " %), session ",
                                   Percent(l.median_t[stats::kSession]), " % (share ",
                                   Percent(l.median_share[stats::kSession]), " %).");
      if (l.sessions_for_2pct && l.sessions_for_5pct) {
        p += absl::StrCat(" Sessions needed for a ±2 % interval of a cell mean at this design: ",
                          l.sessions_for_2pct_text, "; for ±5 %: ", l.sessions_for_5pct_text, ".");
      }
      if (l.optimal && l.costs) {
        p += absl::StrCat(" Optimal repeats for the ", l.costs_source, " costs (session set-up ",
                          absl::StrFormat("%.3g", l.costs->session), " s, process start ",
                          absl::StrFormat("%.3g", l.costs->process), " s, round ",
                          absl::StrFormat("%.3g", l.costs->round), " s): ", l.rounds_text,
                          " rounds per process, ", l.processes_text, " processes per session.");
        if (!l.costs_note.empty()) p += " Costs measured from: " + l.costs_note + ".";
      } else if (!l.costs_note.empty()) {
        p += " No repeat plan: " + l.costs_note + ".";
      }
      for (const auto& w : l.warnings) p += " ⚠ " + w + ".";
      if (!l.note.empty()) p += " " + l.note;
      s.paragraphs.push_back(p);
    }
    s.table.header = {
        "cell",        "round T %",       "round share %", "process T %", "process share %",
        "session T %", "session share %", "note"};
    for (const auto& v : a.variance) {
      if (!v.components) {
        s.table.rows.push_back({v.key, "-", "-", "-", "-", "-", "-", v.error});
      } else {
        const auto& c = *v.components;
        auto t = [&](size_t level) { return Percent(std::sqrt(c.t2[level])); };
        s.table.rows.push_back({v.key, t(stats::kRound), Percent(c.share[stats::kRound]),
                                t(stats::kProcess), Percent(c.share[stats::kProcess]),
                                t(stats::kSession), Percent(c.share[stats::kSession]),
                                c.note == l.note ? "" : c.note});
      }
      s.table.row_cells.push_back(v.key);
      s.table.row_flagged.push_back(false);
    }
    out.push_back(std::move(s));
  }
  if (!a.comparisons.empty()) {
    Section s;
    s.title = "Arm × session";
    s.anchor = absl::StrCat("arm-session-", info.run_id);
    s.paragraphs.push_back(
        "The session main effect cancels in a paired ratio; the arm × session interaction "
        "(how much the benefit varies from session to session) is what limits its precision. "
        "Relative sds on the log scale, in %.");
    s.table.header = {"cell",          "sessions",         "session main %",
                      "interaction %", "within-session %", "interaction net %"};
    for (const auto& cmp : a.comparisons) {
      if (cmp.arm_session) {
        const auto& v = *cmp.arm_session;
        s.table.rows.push_back(
            {cmp.treatment_key, std::to_string(v.sessions), Percent(std::sqrt(v.session_main)),
             Percent(std::sqrt(v.interaction_ms)), Percent(std::sqrt(v.within_session_noise)),
             Percent(std::sqrt(v.interaction_net))});
      } else {
        s.table.rows.push_back({cmp.treatment_key, std::to_string(cmp.sessions), "-", "-", "-",
                                cmp.arm_session_error.empty() ? "-" : cmp.arm_session_error});
      }
      s.table.row_cells.push_back(cmp.treatment_key);
      s.table.row_flagged.push_back(false);
    }
    out.push_back(std::move(s));
  }
  {
    Section s;
    s.title = "Sessions and hosts";
    s.anchor = absl::StrCat("sessions-", info.run_id);
    s.table.header = {"session", "host", "GPUs", "CPU", "state", "measurements", "cells"};
    for (const auto& si : a.sessions) {
      s.table.rows.push_back({ShortSession(si.session_id), si.hostname,
                              si.gpus.empty() ? "cpu only" : absl::StrJoin(si.gpus, ", "),
                              si.cpu_model, si.state, std::to_string(si.measurements),
                              std::to_string(si.cells)});
      s.table.row_cells.push_back("");
      s.table.row_flagged.push_back(false);
    }
    if (a.sessions.empty()) s.paragraphs.push_back("No session has reported a valid measurement.");
    out.push_back(std::move(s));
  }
  {
    std::vector<std::string> lines;
    for (const auto& c : a.cells) {
      if (!c.flags.empty()) lines.push_back(c.key + ": " + FlagsText(c.flags));
    }
    Section s;
    s.title = "Flags";
    s.anchor = absl::StrCat("flags-", info.run_id);
    if (lines.empty()) {
      s.paragraphs.push_back(
          "No evidence contradicts the request (no failed cells, backend mismatches, silent "
          "probes or throttled clocks recorded).");
    } else {
      s.table.header = {"cell", "flags"};
      for (const auto& c : a.cells) {
        if (c.flags.empty()) continue;
        s.table.rows.push_back({c.key, FlagsText(c.flags)});
        s.table.row_cells.push_back(c.key);
        s.table.row_flagged.push_back(true);
      }
    }
    out.push_back(std::move(s));
  }
}

}  // namespace

absl::StatusOr<Report> BuildReport(db::Database& db, const std::vector<int64_t>& run_ids,
                                   const AnalysisOptions& options) {
  if (run_ids.empty()) return absl::InvalidArgumentError("report: name at least one run");
  Report report;
  for (int64_t id : run_ids) {
    ASSIGN_OR_RETURN(RunAnalysis a, AnalyzeRun(db, id, options));
    report.runs.push_back(std::move(a));
  }
  for (size_t i = 0; i < report.runs.size(); ++i) {
    for (size_t j = i + 1; j < report.runs.size(); ++j) {
      auto repro = CompareRunAnalyses(report.runs[i], report.runs[j]);
      if (repro.ok()) {
        report.reproducibility.push_back(std::move(*repro));
      } else {
        report.notes.push_back(
            absl::StrCat("runs ", report.runs[i].info.run_id, " and ", report.runs[j].info.run_id,
                         " not compared: ", std::string(repro.status().message())));
        continue;
      }
      CompareOptions compare;
      compare.metric = report.runs[i].info.metric;
      compare.threshold = options.threshold;
      compare.confidence = options.confidence;
      const int64_t a = report.runs[i].info.run_id, b = report.runs[j].info.run_id;
      auto cmp = CompareTwoRuns({&db, a, absl::StrCat("run ", a)},
                                {&db, b, absl::StrCat("run ", b)}, compare);
      if (cmp.ok()) {
        report.comparisons.push_back(std::move(*cmp));
      } else {
        report.notes.push_back(absl::StrCat(
            "run ", b, " vs run ", a, ": no verdicts: ", std::string(cmp.status().message())));
      }
    }
  }
  return report;
}

std::vector<Section> BuildSections(const Report& report) {
  std::vector<Section> out;
  for (const auto& run : report.runs) RunSections(run, out);
  for (const auto& repro : report.reproducibility) {
    Section s;
    s.level = 1;
    s.title = absl::StrCat("Reproducibility: run ", repro.run_a, " vs run ", repro.run_b);
    s.anchor = absl::StrCat("repro-", repro.run_a, "-", repro.run_b);
    std::string p = "Per cell: 100 · |a − b| / ((a + b) / 2) of the cell means. " + repro.note;
    if (repro.summary) {
      p += absl::StrCat(". Median ", FormatNumber(repro.summary->median), " %, mean ",
                        FormatNumber(repro.summary->mean), " %, max ",
                        FormatNumber(repro.summary->max), " %.");
    }
    s.paragraphs.push_back(p);
    s.table.header = {"cell", absl::StrCat("run ", repro.run_a), absl::StrCat("run ", repro.run_b),
                      "difference %"};
    for (const auto& r : repro.rows) {
      s.table.rows.push_back(
          {r.key, FormatNumber(r.a), FormatNumber(r.b), FormatNumber(r.percent)});
      s.table.row_cells.push_back(r.key);
      s.table.row_flagged.push_back(false);
    }
    out.push_back(std::move(s));
  }
  for (const auto& c : report.comparisons) {
    Section s;
    s.level = 1;
    s.title = absl::StrCat("Comparison: ", c.label_b, " vs ", c.label_a);
    s.anchor = absl::StrCat("compare-", c.run_a, "-", c.run_b);
    s.paragraphs.push_back(ComparisonMethodText(c));
    const std::string unit = c.unit.empty() ? "" : " " + c.unit;
    s.table.header = {"cell",   "sessions A/B",       "A" + unit, "B" + unit,       "ratio B/A",
                      "change", "95 % interval (df)", "verdict",  "matrix verdict", "flags"};
    int64_t flagged = 0;
    for (const auto& r : c.rows) {
      std::string interval = "-";
      if (r.ratio) {
        interval = absl::StrCat(FormatInterval(*r.ratio), " (df ", FormatDf(r.ratio->df), ")");
      }
      std::string flags;
      if (r.spread_exceeds_difference && r.ratio) {
        const double diff = std::fabs(std::log(r.ratio->estimate));
        const bool in_a = r.spread_a > diff;
        flags = absl::StrCat("⚠ session-to-session spread in ", in_a ? c.label_a : c.label_b, " (",
                             Percent(in_a ? r.spread_a : r.spread_b),
                             " %) is larger than the difference between the runs (", Percent(diff),
                             " %)");
        ++flagged;
      }
      if (!r.error.empty()) flags = r.error;
      s.table.rows.push_back({r.key, absl::StrCat(r.sessions_a, "/", r.sessions_b),
                              FormatNumber(r.mean_a), FormatNumber(r.mean_b),
                              r.ratio ? FormatNumber(r.ratio->estimate) : "-",
                              r.ratio ? FormatChange(r.ratio->estimate) : "-", interval, r.verdict,
                              r.matrix_verdict, flags});
      s.table.row_cells.push_back(r.key);
      s.table.row_flagged.push_back(!flags.empty());
    }
    std::vector<std::string> counts, matrix_counts;
    for (const auto& [verdict, n] : c.verdicts) counts.push_back(absl::StrCat(n, " ", verdict));
    for (const auto& [verdict, n] : c.matrix_verdicts) {
      matrix_counts.push_back(absl::StrCat(n, " ", verdict));
    }
    s.paragraphs.push_back(
        absl::StrCat(c.rows.size(), " cells compared. Per cell: ", absl::StrJoin(counts, ", "),
                     ". Over the matrix (Holm over ", c.cells_judged,
                     " cells): ", absl::StrJoin(matrix_counts, ", "), ". ", flagged,
                     " flagged where a run's sessions differ more than the runs do."));
    for (const auto& n : c.notes) s.paragraphs.push_back("Note: " + n + ".");
    out.push_back(std::move(s));
  }
  for (size_t i = 0; i < report.histories.size(); ++i) {
    for (auto& s : HistorySections(report.histories[i], i)) out.push_back(std::move(s));
  }
  if (!report.notes.empty()) {
    Section s;
    s.title = "Notes";
    s.anchor = "notes";
    s.paragraphs = report.notes;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace ladder::report
