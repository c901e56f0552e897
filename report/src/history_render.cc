// A matrix's history as the report and the coordinator's matrix page show it: one cell's series
// as an inline SVG chart (history.h, RenderHistoryChart), and the report's sections of a history
// (report.h, HistorySections) that place those charts beside their tables.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/report/history.h"
#include "ladder/report/report.h"
#include "ladder/status_macros.h"

namespace ladder::report {
namespace {

std::string HistoryPx(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

// A round step for about `want` ticks over `span`: 1, 2 or 5 times a power of ten.
double HistoryTickStep(double span, double want) {
  const double raw = span / want;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

bool Drawable(const std::optional<stats::Interval>& i) {
  return i && i->bounds == stats::Boundedness::kBounded && std::isfinite(i->lower) &&
         std::isfinite(i->upper);
}

// The hover text of one point.
std::string HistoryPointTitle(const MatrixHistory& h, const HistorySeries& s, const HistoryPoint& p,
                              const HistoryRun* run) {
  const std::string unit = h.unit.empty() ? "" : " " + h.unit;
  std::vector<std::string> lines;
  std::string head = absl::StrCat("run ", p.run_id);
  if (run) absl::StrAppend(&head, " · ", DateText(run->created_at_ms));
  if (run && run->state != "done") absl::StrAppend(&head, " (", run->state, ")");
  if (p.run_id == h.baseline_run) absl::StrAppend(&head, " · the baseline");
  lines.push_back(head);
  std::string value = absl::StrCat(h.metric, " ", FormatNumber(p.value), unit);
  if (p.interval) {
    absl::StrAppend(&value, ", ", FormatDf(100 * h.confidence), " % ", FormatInterval(*p.interval));
  } else if (!p.interval_error.empty()) {
    absl::StrAppend(&value, " (no interval: ", p.interval_error, ")");
  }
  absl::StrAppend(&value, ", ", p.sessions, p.sessions == 1 ? " session" : " sessions");
  lines.push_back(value);
  if (p.ratio) {
    lines.push_back(absl::StrCat(FormatChange(p.ratio->estimate), " vs the baseline (run ",
                                 h.baseline_run, "): ", p.verdict,
                                 p.matrix_verdict.empty() || p.matrix_verdict == p.verdict
                                     ? ""
                                     : "; over the matrix: " + p.matrix_verdict));
  }
  if (run) {
    const std::string tags = TagsText(run->tags);
    lines.push_back(tags.empty() ? "no tags" : "tags: " + tags);
  }
  if (s.change.located && p.run_id == s.change.first_run) {
    lines.push_back("where it began: " + s.change.text);
    if (!s.change.changes.empty()) {
      lines.push_back("changed here: " + absl::StrJoin(s.change.changes, "; "));
    }
  } else if (p.moved) {
    lines.push_back(absl::StrCat("moved (from run ", s.change.first_run, " on)"));
  }
  return absl::StrJoin(lines, "\n");
}

}  // namespace

std::string HistoryChartStyle() {
  return R"css(
svg.history { background: #fff; max-width: 100%; height: auto; display: block; margin: .4em 0; }
svg.history .frame { fill: none; stroke: #999; }
svg.history .grid { stroke: #eee; }
svg.history .tick { font-size: 11px; fill: #444; }
svg.history .label { font-size: 12px; fill: #222; }
svg.history .history-line { fill: none; stroke: #1f77b4; stroke-width: 1.5; }
svg.history .history-interval { fill: none; stroke: #1f77b4; stroke-width: 1.2; }
svg.history .history-interval.moved { stroke: #cf222e; }
svg.history .history-point { fill: #1f77b4; stroke: #fff; stroke-width: 1.5; cursor: pointer; }
svg.history .history-point.no-interval { fill: #fff; stroke: #1f77b4; stroke-width: 2; }
svg.history .history-point.moved { fill: #cf222e; }
svg.history .history-point.began { stroke: #1b1f24; stroke-width: 2.5; }
svg.history .history-point.plausible { stroke: #bf8700; stroke-width: 2.5; }
svg.history .history-point.baseline { fill: #2da44e; }
svg.history .history-point:hover, svg.history .history-point:focus { r: 7; outline: none; }
svg.history .history-baseline { stroke: #2da44e; stroke-width: 1.2; stroke-dasharray: 6 4; }
svg.history .history-baseline-band { fill: #2da44e; opacity: .10; }
svg.history .history-moved { fill: #cf222e; opacity: .07; }
svg.history .marker { font-size: 11px; }
svg.history .marker.baseline { fill: #1a7f37; }
svg.history .marker.began { fill: #cf222e; }
)css";
}

std::string RenderHistoryChart(const MatrixHistory& h, size_t series) {
  if (series >= h.series.size() || h.runs.empty()) return "";
  const HistorySeries& s = h.series[series];
  std::map<int64_t, size_t> place;  // run id -> its place on the x axis
  std::map<int64_t, const HistoryRun*> runs;
  for (size_t i = 0; i < h.runs.size(); ++i) {
    place[h.runs[i].run_id] = i;
    runs[h.runs[i].run_id] = &h.runs[i];
  }
  const HistoryPoint* base = nullptr;
  double ymin = INFINITY, ymax = -INFINITY;
  for (const auto& p : s.points) {
    if (p.run_id == h.baseline_run) base = &p;
    if (!std::isfinite(p.value)) continue;
    ymin = std::min(ymin, p.value);
    ymax = std::max(ymax, p.value);
    if (Drawable(p.interval)) {
      ymin = std::min(ymin, p.interval->lower);
      ymax = std::max(ymax, p.interval->upper);
    }
  }
  const std::string cell = HtmlEscape(s.key);
  if (!std::isfinite(ymin)) {
    return absl::StrCat("<p class=\"history-empty\" data-cell=\"", cell,
                        "\">No run measured this cell with a value to draw.</p>\n");
  }
  if (ymax - ymin < 1e-12 * std::max(1.0, std::fabs(ymax))) {
    const double d = std::max(std::fabs(ymax) * 0.05, 1e-9);
    ymin -= d;
    ymax += d;
  }
  const double pad = (ymax - ymin) * 0.08;
  double y0 = ymin - pad, y1 = ymax + pad;
  if (ymin >= 0 && y0 < 0) y0 = 0;  // no negative times or rates on the axis
  const double width = 820, height = 300, left = 76, right = 24, top = 22, bottom = 48;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  const double n = static_cast<double>(h.runs.size());
  auto X = [&](size_t i) { return left + (static_cast<double>(i) + 0.5) / n * plot_w; };
  auto Y = [&](double v) { return top + (1.0 - (v - y0) / (y1 - y0)) * plot_h; };
  const double slot = plot_w / n;

  const std::string unit = h.unit.empty() ? "" : " " + h.unit;
  std::string svg = absl::StrCat("<svg class=\"history\" id=\"history-", series, "\" data-cell=\"",
                                 cell, "\" viewBox=\"0 0 ", HistoryPx(width), " ",
                                 HistoryPx(height), "\" width=\"", HistoryPx(width), "\" height=\"",
                                 HistoryPx(height), "\" role=\"img\" aria-label=\"",
                                 HtmlEscape(h.metric), " of cell ", cell, " by run\">\n");
  // The runs from where it began, shaded, under everything else.
  if (s.change.located && place.count(s.change.first_run)) {
    const double x = X(place[s.change.first_run]) - slot / 2;
    svg += absl::StrCat("<rect class=\"history-moved\" data-run=\"", s.change.first_run, "\" x=\"",
                        HistoryPx(x), "\" y=\"", HistoryPx(top), "\" width=\"",
                        HistoryPx(left + plot_w - x), "\" height=\"", HistoryPx(plot_h),
                        "\"><title>", HtmlEscape(s.change.text), "</title></rect>\n");
  }
  svg +=
      absl::StrCat("<rect class=\"frame\" x=\"", HistoryPx(left), "\" y=\"", HistoryPx(top),
                   "\" width=\"", HistoryPx(plot_w), "\" height=\"", HistoryPx(plot_h), "\"/>\n");
  // The value axis: round ticks.
  const double step = HistoryTickStep(y1 - y0, 5);
  for (double t = std::ceil(y0 / step) * step; t <= y1 + step * 1e-9; t += step) {
    const double y = Y(t);
    svg += absl::StrCat("<line class=\"grid\" x1=\"", HistoryPx(left), "\" x2=\"",
                        HistoryPx(left + plot_w), "\" y1=\"", HistoryPx(y), "\" y2=\"",
                        HistoryPx(y), "\"/><text class=\"tick\" x=\"", HistoryPx(left - 6),
                        "\" y=\"", HistoryPx(y + 4), "\" text-anchor=\"end\">",
                        FormatNumber(std::fabs(t) < step * 1e-9 ? 0.0 : t), "</text>\n");
  }
  // The run axis: every run when they fit, else every k-th, the baseline and where it began.
  const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(n / 16)));
  for (size_t i = 0; i < h.runs.size(); ++i) {
    const int64_t id = h.runs[i].run_id;
    const bool special = id == h.baseline_run || (s.change.located && id == s.change.first_run);
    if (i % every != 0 && !special && i + 1 != h.runs.size()) continue;
    svg +=
        absl::StrCat("<text class=\"tick\" x=\"", HistoryPx(X(i)), "\" y=\"",
                     HistoryPx(top + plot_h + 15), "\" text-anchor=\"middle\">", id, "</text>\n");
  }
  svg += absl::StrCat("<text class=\"label\" x=\"", HistoryPx(left + plot_w / 2), "\" y=\"",
                      HistoryPx(height - 10), "\" text-anchor=\"middle\">run (in order)</text>\n",
                      "<text class=\"label\" transform=\"rotate(-90)\" x=\"",
                      HistoryPx(-(top + plot_h / 2)), "\" y=\"16\" text-anchor=\"middle\">",
                      HtmlEscape(h.metric + unit), "</text>\n");
  // The baseline: its value across the chart, its interval shaded.
  if (base && std::isfinite(base->value)) {
    if (Drawable(base->interval)) {
      const double ya = Y(std::min(base->interval->upper, y1)),
                   yb = Y(std::max(base->interval->lower, y0));
      svg += absl::StrCat("<rect class=\"history-baseline-band\" x=\"", HistoryPx(left), "\" y=\"",
                          HistoryPx(ya), "\" width=\"", HistoryPx(plot_w), "\" height=\"",
                          HistoryPx(std::max(0.0, yb - ya)), "\"/>\n");
    }
    const double y = Y(base->value);
    svg += absl::StrCat("<line class=\"history-baseline\" data-run=\"", h.baseline_run, "\" x1=\"",
                        HistoryPx(left), "\" x2=\"", HistoryPx(left + plot_w), "\" y1=\"",
                        HistoryPx(y), "\" y2=\"", HistoryPx(y), "\"><title>",
                        HtmlEscape(absl::StrCat("the baseline: ", h.baseline_source, ", ",
                                                FormatNumber(base->value), unit)),
                        "</title></line>\n<text class=\"marker baseline\" x=\"",
                        HistoryPx(left + plot_w - 4), "\" y=\"", HistoryPx(y - 4),
                        "\" text-anchor=\"end\">baseline (run ", h.baseline_run, ")</text>\n");
  }
  // The series: a line through the values, each run's interval as an error bar, its point.
  std::string path, marks;
  for (const auto& p : s.points) {
    if (!std::isfinite(p.value) || !place.count(p.run_id)) continue;
    const double x = X(place[p.run_id]), y = Y(p.value);
    path += absl::StrCat(path.empty() ? "M" : " L", HistoryPx(x), " ", HistoryPx(y));
    const bool began = s.change.located && p.run_id == s.change.first_run;
    const bool plausible = !s.change.located &&
                           std::find(s.change.plausible_runs.begin(), s.change.plausible_runs.end(),
                                     p.run_id) != s.change.plausible_runs.end();
    const bool drawable = Drawable(p.interval);
    if (drawable) {
      const double ylo = Y(std::max(p.interval->lower, y0)),
                   yhi = Y(std::min(p.interval->upper, y1));
      const double cap = std::min(5.0, slot / 4);
      marks +=
          absl::StrCat("<path class=\"history-interval", p.moved ? " moved" : "", "\" data-run=\"",
                       p.run_id, "\" d=\"M", HistoryPx(x), " ", HistoryPx(ylo), " L", HistoryPx(x),
                       " ", HistoryPx(yhi), " M", HistoryPx(x - cap), " ", HistoryPx(ylo), " L",
                       HistoryPx(x + cap), " ", HistoryPx(ylo), " M", HistoryPx(x - cap), " ",
                       HistoryPx(yhi), " L", HistoryPx(x + cap), " ", HistoryPx(yhi), "\"/>\n");
    }
    const HistoryRun* run = runs.count(p.run_id) ? runs[p.run_id] : nullptr;
    marks += absl::StrCat(
        "<circle class=\"history-point", p.run_id == h.baseline_run ? " baseline" : "",
        p.moved ? " moved" : "", began ? " began" : "", plausible ? " plausible" : "",
        drawable ? "" : " no-interval", "\" tabindex=\"0\" data-run=\"", p.run_id,
        "\" data-cell=\"", cell, "\" data-value=\"", FormatNumber(p.value), "\" data-lower=\"",
        drawable ? FormatNumber(p.interval->lower) : "-", "\" data-upper=\"",
        drawable ? FormatNumber(p.interval->upper) : "-", "\" data-verdict=\"",
        HtmlEscape(p.matrix_verdict), "\" data-tags=\"", HtmlEscape(run ? TagsText(run->tags) : ""),
        "\" cx=\"", HistoryPx(x), "\" cy=\"", HistoryPx(y), "\" r=\"5\"><title>",
        HtmlEscape(HistoryPointTitle(h, s, p, run)), "</title></circle>\n");
    if (began) {
      marks += absl::StrCat("<text class=\"marker began\" x=\"", HistoryPx(x + 8), "\" y=\"",
                            HistoryPx(std::max(top + 11, y - 10)), "\">began here</text>\n");
    }
  }
  svg += absl::StrCat("<path class=\"history-line\" d=\"", path, "\"/>\n", marks, "</svg>\n");
  return svg;
}

std::vector<Section> HistorySections(const MatrixHistory& h, size_t index) {
  std::vector<Section> out;
  std::map<int64_t, const HistoryRun*> runs;
  for (const auto& r : h.runs) runs[r.run_id] = &r;
  const std::string unit = h.unit.empty() ? "" : " " + h.unit;
  {
    Section s;
    s.level = 1;
    s.title = absl::StrCat("History of ", h.matrix_name, ": ", h.metric);
    s.anchor = absl::StrCat("history-", index);
    s.paragraphs.push_back(
        absl::StrCat(h.runs.size(), " runs of matrix ", h.matrix_name,
                     " (every run of a matrix of this name), ", h.series.size(), " cells; ",
                     h.metric, unit.empty() ? "" : " in" + unit, ", ", DirectionText(h.direction),
                     ". Baseline: ", h.baseline_source, ". Latest: run ", h.latest_run, "."));
    s.paragraphs.push_back(absl::StrCat(
        "Each point is a run's geometric mean of session means with its ",
        FormatDf(100 * h.confidence),
        " % interval (the error bar); the change and verdict against the baseline are `ladder "
        "compare`'s (band ±",
        FormatDf(100 * h.threshold),
        " %, matrix verdict by Holm over the cells two runs share). When the latest run is "
        "slower, a change-point over the series names the run where it began: it and the runs "
        "after it are shaded. `ladder history ",
        h.matrix_name, "` prints the same series."));
    s.table.header = {"run",
                      "date",
                      "state",
                      "sessions",
                      "tags",
                      "matrix verdicts vs baseline",
                      "what changed from the run before"};
    const HistoryRun* previous = nullptr;
    for (const auto& r : h.runs) {
      std::vector<std::string> verdicts;
      for (const auto& [v, count] : r.matrix_verdicts)
        verdicts.push_back(absl::StrCat(count, " ", v));
      std::string verdict_text =
          r.run_id == h.baseline_run ? "the baseline" : absl::StrJoin(verdicts, ", ");
      if (verdict_text.empty()) verdict_text = r.note;
      std::vector<std::string> changed;
      if (previous) {
        for (const auto& [k, v] : r.tags) {
          auto it = previous->tags.find(k);
          if (it == previous->tags.end() || it->second != v)
            changed.push_back("tag " + k + "=" + v);
        }
        for (const auto& [k, v] : previous->tags) {
          if (!r.tags.count(k)) changed.push_back("tag " + k + " removed");
        }
        for (const auto& [k, v] : r.recorded) {
          auto it = previous->recorded.find(k);
          if (it == previous->recorded.end() || it->second != v) changed.push_back(k + "=" + v);
        }
        if (previous->matrix_sha256 != r.matrix_sha256) changed.push_back("the matrix file");
      }
      s.table.rows.push_back({std::to_string(r.run_id), DateText(r.created_at_ms), r.state,
                              std::to_string(r.sessions), TagsText(r.tags), verdict_text,
                              absl::StrJoin(changed, " ")});
      s.table.row_cells.push_back("");
      s.table.row_flagged.push_back(false);
      previous = &r;
    }
    for (const auto& n : h.notes) s.paragraphs.push_back("Note: " + n + ".");
    out.push_back(std::move(s));
  }
  for (size_t k = 0; k < h.series.size(); ++k) {
    const HistorySeries& series = h.series[k];
    Section s;
    s.level = 2;
    s.title = series.key + (series.fixed_params.empty() ? "" : "  " + series.fixed_params);
    s.anchor = absl::StrCat("history-", index, "-", k);
    s.chart = ChartKind::kHistory;
    s.chart_history = index;
    s.chart_series = k;
    if (series.change.searched) {
      s.paragraphs.push_back("Where it began: " + series.change.text + ".");
      if (!series.change.changes.empty()) {
        s.paragraphs.push_back(absl::StrCat("Changed at run ", series.change.first_run, ": ",
                                            absl::StrJoin(series.change.changes, "; "), "."));
      }
    }
    s.table.header = {"run",
                      "date",
                      "value" + unit,
                      absl::StrCat(FormatDf(100 * h.confidence), " % interval"),
                      "sessions",
                      "vs base",
                      "verdict",
                      "matrix verdict",
                      "",
                      "tags"};
    for (const auto& p : series.points) {
      const HistoryRun* r = runs.count(p.run_id) ? runs[p.run_id] : nullptr;
      std::string mark;
      if (p.run_id == h.baseline_run) mark = "◀ baseline";
      if (series.change.located && p.run_id == series.change.first_run) {
        mark = "◀ began here";
      } else if (p.moved) {
        mark = "moved";
      }
      const bool own = p.matrix_verdict == "baseline";
      s.table.rows.push_back({std::to_string(p.run_id), r ? DateText(r->created_at_ms) : "-",
                              FormatNumber(p.value), p.interval ? FormatInterval(*p.interval) : "-",
                              std::to_string(p.sessions),
                              p.ratio ? FormatChange(p.ratio->estimate) : "", own ? "" : p.verdict,
                              own ? "" : p.matrix_verdict, mark, r ? TagsText(r->tags) : ""});
      s.table.row_cells.push_back(series.key);
      s.table.row_flagged.push_back(p.moved);
    }
    out.push_back(std::move(s));
  }
  return out;
}

absl::Status AddHistories(db::Database& db, Report& report, const HistoryOptions& options) {
  std::set<std::string> done;
  for (const auto& run : report.runs) {
    if (!done.insert(run.info.matrix_name).second) continue;
    HistoryOptions o = options;
    o.metric = run.info.metric;
    ASSIGN_OR_RETURN(MatrixHistory h, ReadHistory(db, run.info.matrix_name, o));
    report.histories.push_back(std::move(h));
  }
  return absl::OkStatus();
}

}  // namespace ladder::report
