#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "internal.h"
#include "ladder/report/report.h"

namespace ladder::report {
namespace {

std::string Esc(const std::string& text) { return HtmlEscape(text); }

std::string Px(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", v);
  return buffer;
}

// Axis labels: shortest form (0.5, 1, 4096).
std::string TickText(double v) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                    "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};

// Gridlines of a log ratio axis: dense near 1, where ratios usually are.
constexpr double kRatioTicks[] = {0.01, 0.02, 0.05, 0.1,  0.2,  0.25, 0.3,  0.4,  0.5,  0.6,
                                  0.7,  0.8,  0.9,  0.95, 1.0,  1.05, 1.1,  1.2,  1.25, 1.5,
                                  2.0,  3.0,  4.0,  5.0,  10.0, 20.0, 50.0, 100.0};

std::string Tooltip(const RunAnalysis& a, const Comparison& cmp) {
  const std::string unit = a.info.unit.empty() ? "" : " " + a.info.unit;
  const CellStats* b = a.FindCell(cmp.treatment_key);
  const CellStats* base = a.FindCell(cmp.baseline_key);
  std::vector<std::string> lines;
  lines.push_back(cmp.treatment_key);
  lines.push_back(absl::StrCat("B ", cmp.pair_axis, "=", cmp.treatment_value, ": ",
                               FormatNumber(cmp.mean_b), unit, " (n ", cmp.n_b, ")"));
  lines.push_back(absl::StrCat("A ", cmp.pair_axis, "=", cmp.baseline_value, ": ",
                               FormatNumber(cmp.mean_a), unit, " (n ", cmp.n_a, ")"));
  std::string ratio =
      absl::StrCat("ratio B/A ", FormatNumber(cmp.Ratio()), " (", FormatChange(cmp.Ratio()), ")");
  if (cmp.t.interval) ratio += absl::StrCat(", 95 % ", FormatInterval(*cmp.t.interval));
  lines.push_back(ratio);
  lines.push_back(absl::StrCat(
      "sessions ", cmp.sessions,
      cmp.sessions == 1 ? std::string(" — ") + std::string(stats::kWithinSessionNote) : ""));
  for (const CellStats* c : {b, base}) {
    if (!c) continue;
    std::vector<std::string> acc;
    if (c->acceptance_rate) acc.push_back("rate " + FormatNumber(*c->acceptance_rate));
    if (c->mean_acceptance_length) {
      acc.push_back("mean length " + FormatNumber(*c->mean_acceptance_length));
    }
    if (!acc.empty()) {
      lines.push_back(
          absl::StrCat("acceptance (", c == b ? "B" : "A", "): ", absl::StrJoin(acc, ", ")));
    }
  }
  if (!cmp.flags.empty()) {
    std::vector<std::string> parts;
    for (const auto& f : cmp.flags) {
      parts.push_back(f.detail.empty() ? f.kind : f.kind + ": " + f.detail);
    }
    lines.push_back("⚠ " + absl::StrJoin(parts, "; "));
  }
  return absl::StrJoin(lines, "\n");
}

// A comparison's ratio as the charts draw it: the t interval's estimate, else the ratio of the
// arms' means (a point without an interval).
double ChartRatio(const Comparison& cmp) {
  if (cmp.t.interval) return cmp.t.interval->estimate;
  return cmp.mean_a > 0 ? cmp.mean_b / cmp.mean_a : NAN;
}

// Widens [ymin, ymax] to hold a comparison's ratio and its bounded interval.
void GrowRatioRange(const Comparison& cmp, double& ymin, double& ymax) {
  const double e = ChartRatio(cmp);
  if (std::isfinite(e) && e > 0) {
    ymin = std::min(ymin, e);
    ymax = std::max(ymax, e);
  }
  if (cmp.t.interval && cmp.t.interval->bounds == stats::Boundedness::kBounded) {
    if (cmp.t.interval->lower > 0) ymin = std::min(ymin, cmp.t.interval->lower);
    if (std::isfinite(cmp.t.interval->upper)) ymax = std::max(ymax, cmp.t.interval->upper);
  }
}

std::string Chart(const RunAnalysis& a) {
  const double width = 820, height = 420, left = 70, right = 20, top = 20, bottom = 56;
  const bool log_x = !a.depth_axis.empty();
  double xmin = INFINITY, xmax = -INFINITY, ymin = 1.0, ymax = 1.0;
  const auto estimate = ChartRatio;
  for (const auto& line : a.lines) {
    for (size_t k = 0; k < line.points.size(); ++k) {
      xmin = std::min(xmin, line.depths[k]);
      xmax = std::max(xmax, line.depths[k]);
      GrowRatioRange(a.comparisons[line.points[k]], ymin, ymax);
    }
  }
  if (!std::isfinite(xmin)) return "";
  auto xt = [&](double x) { return log_x ? std::log2(x) : x; };
  double x0 = xt(xmin), x1 = xt(xmax);
  if (x1 - x0 < 1e-9) {
    x0 -= 1;
    x1 += 1;
  }
  const double xpad = (x1 - x0) * 0.06;
  x0 -= xpad;
  x1 += xpad;
  double y0 = std::log(ymin), y1 = std::log(ymax);
  if (y1 - y0 < 0.02) {
    y0 -= 0.01;
    y1 += 0.01;
  }
  const double ypad = (y1 - y0) * 0.08;
  y0 -= ypad;
  y1 += ypad;
  auto X = [&](double x) { return left + (xt(x) - x0) / (x1 - x0) * (width - left - right); };
  auto Y = [&](double y) {
    return top + (1.0 - (std::log(y) - y0) / (y1 - y0)) * (height - top - bottom);
  };
  std::string svg =
      absl::StrCat("<svg class=\"ladder\" id=\"chart-", a.info.run_id, "\" viewBox=\"0 0 ",
                   Px(width), " ", Px(height), "\" width=\"", Px(width), "\" height=\"", Px(height),
                   "\" role=\"img\" aria-label=\"ratio against ", Esc(a.depth_axis), "\">\n");
  // Axes and gridlines.
  svg += absl::StrCat("<rect x=\"", Px(left), "\" y=\"", Px(top), "\" width=\"",
                      Px(width - left - right), "\" height=\"", Px(height - top - bottom),
                      "\" class=\"frame\"/>\n");
  std::vector<double> ticks;
  for (double t : kRatioTicks) {
    if (std::log(t) >= y0 && std::log(t) <= y1) ticks.push_back(t);
  }
  double last_y = -1e9;
  for (double t : ticks) {
    const double y = Y(t);
    if (std::fabs(y - last_y) < 14 && t != 1.0) continue;
    last_y = y;
    svg += absl::StrCat("<line class=\"grid\" x1=\"", Px(left), "\" x2=\"", Px(width - right),
                        "\" y1=\"", Px(y), "\" y2=\"", Px(y), "\"/><text class=\"tick\" x=\"",
                        Px(left - 6), "\" y=\"", Px(y + 4), "\" text-anchor=\"end\">", TickText(t),
                        "</text>\n");
  }
  std::vector<double> xs;
  for (const auto& line : a.lines) xs.insert(xs.end(), line.depths.begin(), line.depths.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  if (log_x) {
    for (double x : xs) {
      svg +=
          absl::StrCat("<text class=\"tick\" x=\"", Px(X(x)), "\" y=\"", Px(height - bottom + 16),
                       "\" text-anchor=\"middle\">", TickText(x), "</text>\n");
    }
    svg += absl::StrCat("<text class=\"label\" x=\"", Px(left + (width - left - right) / 2),
                        "\" y=\"", Px(height - 14), "\" text-anchor=\"middle\">", Esc(a.depth_axis),
                        " (log scale)</text>\n");
  }
  svg += absl::StrCat("<text class=\"label\" transform=\"rotate(-90)\" x=\"",
                      Px(-(top + (height - top - bottom) / 2)),
                      "\" y=\"16\" "
                      "text-anchor=\"middle\">ratio B/A of ",
                      Esc(a.info.metric), " (log scale)</text>\n");
  // The zero-gain line.
  svg += absl::StrCat("<line class=\"unity\" x1=\"", Px(left), "\" x2=\"", Px(width - right),
                      "\" y1=\"", Px(Y(1.0)), "\" y2=\"", Px(Y(1.0)), "\"/>\n");
  // Crossovers.
  for (size_t l = 0; l < a.lines.size(); ++l) {
    const LadderLine& line = a.lines[l];
    if (!line.crossing || !log_x) continue;
    const std::string color = kPalette[l % 8];
    const double bx0 = X(line.crossing->bracket_lower), bx1 = X(line.crossing->bracket_upper);
    svg +=
        absl::StrCat("<rect class=\"bracket\" data-line=\"", l, "\" x=\"", Px(bx0), "\" y=\"",
                     Px(top), "\" width=\"", Px(bx1 - bx0), "\" height=\"",
                     Px(height - top - bottom), "\" fill=\"", color, "\"><title>", Esc(line.label),
                     ": sign change between ", FormatNumber(line.crossing->bracket_lower), " and ",
                     FormatNumber(line.crossing->bracket_upper), "</title></rect>\n");
    if (line.crossover_fit && line.crossover_fit->bounds == stats::Boundedness::kBounded &&
        line.crossover_fit->estimate >= xmin && line.crossover_fit->estimate <= xmax) {
      const double cx = X(line.crossover_fit->estimate);
      svg +=
          absl::StrCat("<line class=\"crossover\" data-line=\"", l, "\" x1=\"", Px(cx), "\" x2=\"",
                       Px(cx), "\" y1=\"", Px(top), "\" y2=\"", Px(height - bottom), "\" stroke=\"",
                       color, "\"/><text class=\"tick\" x=\"", Px(cx + 3), "\" y=\"",
                       Px(top + 12 + 12 * static_cast<double>(l)), "\" fill=\"", color,
                       "\">crossover ≈ ", FormatNumber(line.crossover_fit->estimate), "</text>\n");
    }
  }
  // Lines, whiskers and points.
  const double nlines = static_cast<double>(a.lines.size());
  for (size_t l = 0; l < a.lines.size(); ++l) {
    const LadderLine& line = a.lines[l];
    const std::string color = kPalette[l % 8];
    // Lines sharing a depth are spread apart so that no point hides another (r = 5).
    const double spread = std::min(11.0, 60.0 / std::max(1.0, nlines));
    const double offset = (static_cast<double>(l) - (nlines - 1) / 2) * spread;
    std::string path;
    std::string marks;
    for (size_t k = 0; k < line.points.size(); ++k) {
      const Comparison& cmp = a.comparisons[line.points[k]];
      const double e = estimate(cmp);
      const double x = X(line.depths[k]) + offset;
      const bool placed = std::isfinite(e) && e > 0;
      const double y = placed ? Y(e) : top + 6;
      if (placed) path += absl::StrCat(path.empty() ? "M" : " L", Px(x), " ", Px(y));
      if (cmp.t.interval && cmp.t.interval->bounds == stats::Boundedness::kBounded &&
          cmp.t.interval->lower > 0) {
        const double ylo = Y(cmp.t.interval->lower), yhi = Y(cmp.t.interval->upper);
        marks += absl::StrCat("<path class=\"whisker\" stroke=\"", color, "\" d=\"M", Px(x), " ",
                              Px(ylo), " L", Px(x), " ", Px(yhi), " M", Px(x - 4), " ", Px(ylo),
                              " L", Px(x + 4), " ", Px(ylo), " M", Px(x - 4), " ", Px(yhi), " L",
                              Px(x + 4), " ", Px(yhi), "\"/>\n");
      }
      const bool flagged = !cmp.flags.empty();
      // A depth the coordinator's `locate` probed is drawn hollow (class "probe").
      const bool probe =
          line.located && std::find(line.located->probes.begin(), line.located->probes.end(),
                                    line.depths[k]) != line.located->probes.end();
      marks += absl::StrCat(
          "<circle class=\"point", flagged ? " flagged" : "", probe ? " probe" : "",
          "\" tabindex=\"0\" data-cell=\"", Esc(cmp.treatment_key), "\" data-line=\"", l,
          "\" data-ratio=\"", FormatNumber(e), "\" data-tip=\"", Esc(Tooltip(a, cmp)), "\" cx=\"",
          Px(x), "\" cy=\"", Px(y), "\" r=\"5\" fill=\"", color, "\" stroke=\"", color, "\"/>\n");
      if (flagged) {
        marks += absl::StrCat("<text class=\"flagmark\" x=\"", Px(x + 7), "\" y=\"", Px(y - 6),
                              "\">⚠</text>\n");
      }
    }
    svg += absl::StrCat("<path class=\"series", line.aa ? " aa" : "", "\" stroke=\"", color,
                        "\" d=\"", path, "\"/>\n", marks);
  }
  svg += "</svg>\n<ul class=\"legend\">\n";
  for (size_t l = 0; l < a.lines.size(); ++l) {
    svg += absl::StrCat("<li><span class=\"swatch\" style=\"background:", kPalette[l % 8],
                        "\"></span>", Esc(a.lines[l].label),
                        a.lines[l].aa ? " — A/A control (should sit on 1)" : "", "</li>\n");
  }
  svg += "</ul>\n";
  return svg;
}

// ---- The load charts (ladder/report/load.h) ----

// A log-scaled axis from `lo` to `hi` (> 0) over the pixels [p0, p1], padded by 6 % of its span.
struct LogScale {
  double l0 = 0, l1 = 1, p0 = 0, p1 = 1;
  LogScale(double lo, double hi, double from, double to) : p0(from), p1(to) {
    l0 = std::log10(lo);
    l1 = std::log10(hi);
    if (l1 - l0 < 0.02) {
      l0 -= 0.05;
      l1 += 0.05;
    }
    const double pad = (l1 - l0) * 0.06;
    l0 -= pad;
    l1 += pad;
  }
  double operator()(double v) const { return p0 + (std::log10(v) - l0) / (l1 - l0) * (p1 - p0); }
  double Lo() const { return std::pow(10.0, l0); }
  double Hi() const { return std::pow(10.0, l1); }
};

// Ticks of a log axis: 1, 2, 5 times powers of ten inside [lo, hi]; finer mantissas when fewer
// than two of those fall inside (a narrow range), and the range's ends as a last resort.
std::vector<double> LogTicks(double lo, double hi) {
  auto ticks_of = [&](std::initializer_list<double> mantissas) {
    std::vector<double> ticks;
    for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= std::ceil(std::log10(hi));
         ++e) {
      for (double m : mantissas) {
        const double t = m * std::pow(10.0, e);
        if (t >= lo && t <= hi) ticks.push_back(t);
      }
    }
    return ticks;
  };
  std::vector<double> ticks = ticks_of({1.0, 2.0, 5.0});
  if (ticks.size() < 2) ticks = ticks_of({1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0});
  if (ticks.size() < 2) {
    const double span = std::log10(hi / lo);
    ticks = {std::pow(10.0, std::log10(lo) + span * 0.1),
             std::pow(10.0, std::log10(lo) + span * 0.9)};
  }
  return ticks;
}

// Tick text for a value of any magnitude: 3 significant digits, never an exponent for the
// latencies and throughputs a load chart shows (1000, not 1e+03).
std::string Sig3(double v) {
  char buffer[32];
  if (std::fabs(v) >= 1000 && std::fabs(v) < 1e9) {
    std::snprintf(buffer, sizeof buffer, "%.0f", v);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.3g", v);
  }
  return buffer;
}

constexpr double kChartWidth = 820, kChartHeight = 420, kLeft = 70, kRight = 20, kTop = 20,
                 kBottom = 56;

std::string Frame() {
  return absl::StrCat("<rect x=\"", Px(kLeft), "\" y=\"", Px(kTop), "\" width=\"",
                      Px(kChartWidth - kLeft - kRight), "\" height=\"",
                      Px(kChartHeight - kTop - kBottom), "\" class=\"frame\"/>\n");
}

std::string AxisLabels(const std::string& x_label, const std::string& y_label) {
  return absl::StrCat("<text class=\"label\" x=\"", Px(kLeft + (kChartWidth - kLeft - kRight) / 2),
                      "\" y=\"", Px(kChartHeight - 14), "\" text-anchor=\"middle\">", Esc(x_label),
                      "</text>\n<text class=\"label\" transform=\"rotate(-90)\" x=\"",
                      Px(-(kTop + (kChartHeight - kTop - kBottom) / 2)),
                      "\" y=\"16\" text-anchor=\"middle\">", Esc(y_label), "</text>\n");
}

std::string LoadTooltip(const LoadAnalysis& load, const LoadCell& c) {
  std::vector<std::string> lines = {c.key};
  if (!load.axis.empty()) lines.push_back(absl::StrCat(load.axis, " ", TickText(c.load)));
  lines.push_back(absl::StrCat("output ", FormatNumber(c.output_tok_s), " tok/s, ",
                               FormatNumber(c.req_s), " req/s"));
  lines.push_back(absl::StrCat("TTFT p50 ", FormatNumber(c.ttft_ms_p50), " ms, p99 ",
                               FormatNumber(c.ttft_ms_p99), " ms"));
  lines.push_back(absl::StrCat("ITL p50 ", FormatNumber(c.itl_ms_p50), " ms, p99 ",
                               FormatNumber(c.itl_ms_p99), " ms"));
  lines.push_back(absl::StrCat("e2e p50 ", FormatNumber(c.e2e_ms_p50), " ms, p99 ",
                               FormatNumber(c.e2e_ms_p99), " ms"));
  if (std::isfinite(c.goodput_req_s)) {
    lines.push_back(absl::StrCat("goodput ", FormatNumber(c.goodput_req_s), " req/s"));
  }
  if (std::isfinite(c.drain_share)) {
    lines.push_back(absl::StrCat("below its load ", FormatNumber(100.0 * c.drain_share),
                                 " % of the window",
                                 c.DrainsTooLong() ? ": throughput reads low" : ""));
  }
  lines.push_back(absl::StrCat("sessions ", c.sessions, ", rounds ", c.rounds));
  return absl::StrJoin(lines, "\n");
}

std::string ArmLabel(const std::string& arm) {
  if (arm.empty()) return "all cells";
  std::string out = arm;
  std::replace(out.begin(), out.end(), ',', ' ');
  return out;
}

// Output throughput against p99 end-to-end latency, one curve per arm, by load.
std::string ThroughputLatencyChart(const RunAnalysis& a) {
  const LoadAnalysis& load = *a.load;
  auto drawable = [](const LoadCell& c) {
    return std::isfinite(c.e2e_ms_p99) && c.e2e_ms_p99 > 0 && std::isfinite(c.output_tok_s) &&
           c.output_tok_s > 0;
  };
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (const LoadCell& c : load.cells) {
    if (!drawable(c)) continue;
    xmin = std::min(xmin, c.e2e_ms_p99);
    xmax = std::max(xmax, c.e2e_ms_p99);
    ymin = std::min(ymin, c.output_tok_s);
    ymax = std::max(ymax, c.output_tok_s);
  }
  if (!std::isfinite(xmin)) {
    return "<p>No cell recorded both output throughput and p99 end-to-end latency: nothing to "
           "draw.</p>\n";
  }
  const LogScale X(xmin, xmax, kLeft, kChartWidth - kRight);
  const LogScale Y(ymin, ymax, kChartHeight - kBottom, kTop);
  std::string svg = absl::StrCat(
      "<svg class=\"load-curve\" id=\"load-curve-", a.info.run_id, "\" viewBox=\"0 0 ",
      Px(kChartWidth), " ", Px(kChartHeight), "\" width=\"", Px(kChartWidth), "\" height=\"",
      Px(kChartHeight),
      "\" role=\"img\" aria-label=\"output throughput against p99 end-to-end latency\">\n");
  svg += Frame();
  for (double t : LogTicks(Y.Lo(), Y.Hi())) {
    svg += absl::StrCat("<line class=\"grid\" x1=\"", Px(kLeft), "\" x2=\"",
                        Px(kChartWidth - kRight), "\" y1=\"", Px(Y(t)), "\" y2=\"", Px(Y(t)),
                        "\"/><text class=\"tick\" x=\"", Px(kLeft - 6), "\" y=\"", Px(Y(t) + 4),
                        "\" text-anchor=\"end\">", Sig3(t), "</text>\n");
  }
  for (double t : LogTicks(X.Lo(), X.Hi())) {
    svg += absl::StrCat("<line class=\"grid\" x1=\"", Px(X(t)), "\" x2=\"", Px(X(t)), "\" y1=\"",
                        Px(kTop), "\" y2=\"", Px(kChartHeight - kBottom),
                        "\"/><text class=\"tick\" x=\"", Px(X(t)), "\" y=\"",
                        Px(kChartHeight - kBottom + 16), "\" text-anchor=\"middle\">", Sig3(t),
                        "</text>\n");
  }
  svg +=
      AxisLabels("p99 end-to-end latency, ms (log scale)", "output throughput, tok/s (log scale)");
  for (size_t k = 0; k < load.curves.size(); ++k) {
    const LoadCurve& curve = load.curves[k];
    const std::string color = kPalette[k % 8];
    std::string path, marks;
    for (size_t i : curve.cells) {
      const LoadCell& c = load.cells[i];
      if (!drawable(c)) continue;
      const double x = X(c.e2e_ms_p99), y = Y(c.output_tok_s);
      path += absl::StrCat(path.empty() ? "M" : " L", Px(x), " ", Px(y));
      marks += absl::StrCat("<circle class=\"load-point\" tabindex=\"0\" data-cell=\"", Esc(c.key),
                            "\" data-arm=\"", Esc(curve.arm), "\" data-curve=\"", k,
                            "\" data-load=\"", TickText(c.load), "\" data-tok-s=\"",
                            FormatNumber(c.output_tok_s), "\" data-latency-ms=\"",
                            FormatNumber(c.e2e_ms_p99), "\" data-tip=\"", Esc(LoadTooltip(load, c)),
                            "\" cx=\"", Px(x), "\" cy=\"", Px(y), "\" r=\"5\" fill=\"",
                            c.DrainsTooLong() ? "none" : color, "\" stroke=\"", color, "\"/>\n");
      if (!load.axis.empty()) {
        marks += absl::StrCat("<text class=\"pointlabel\" x=\"", Px(x + 7), "\" y=\"", Px(y - 7),
                              "\" fill=\"", color, "\">", TickText(c.load), "</text>\n");
      }
    }
    svg +=
        absl::StrCat("<path class=\"series\" stroke=\"", color, "\" d=\"", path, "\"/>\n", marks);
  }
  svg += "</svg>\n<ul class=\"legend\">\n";
  for (size_t k = 0; k < load.curves.size(); ++k) {
    svg += absl::StrCat("<li><span class=\"swatch\" style=\"background:", kPalette[k % 8],
                        "\"></span>", Esc(ArmLabel(load.curves[k].arm)), "</li>\n");
  }
  if (!load.axis.empty()) {
    svg += absl::StrCat("<li>point labels: ", Esc(load.axis), "</li>\n");
  }
  svg += "</ul>\n";
  return svg;
}

// The paired ratio against the load axis: whiskers with their df, ratio 1, and where each line
// crosses it (the sign change shaded, the fitted crossover with its interval; the coordinator's
// final bracket when `locate` searched this axis).
std::string LoadRatioChart(const RunAnalysis& a) {
  const LoadAnalysis& load = *a.load;
  const auto estimate = ChartRatio;
  double xmin = INFINITY, xmax = -INFINITY, ymin = 1.0, ymax = 1.0;
  for (const LoadRatioLine& line : load.ratio_lines) {
    for (size_t k = 0; k < line.points.size(); ++k) {
      if (!(line.loads[k] > 0)) continue;
      xmin = std::min(xmin, line.loads[k]);
      xmax = std::max(xmax, line.loads[k]);
      GrowRatioRange(a.comparisons[line.points[k]], ymin, ymax);
    }
  }
  if (!std::isfinite(xmin)) return "";
  const LogScale X(xmin, xmax, kLeft, kChartWidth - kRight);
  const LogScale Y(ymin, ymax, kChartHeight - kBottom, kTop);
  std::string svg = absl::StrCat(
      "<svg class=\"load-ratio\" id=\"load-ratio-", a.info.run_id, "\" viewBox=\"0 0 ",
      Px(kChartWidth), " ", Px(kChartHeight), "\" width=\"", Px(kChartWidth), "\" height=\"",
      Px(kChartHeight), "\" role=\"img\" aria-label=\"ratio against ", Esc(load.axis), "\">\n");
  svg += Frame();
  double last_y = -1e9;
  for (double t : kRatioTicks) {
    if (t < Y.Lo() || t > Y.Hi()) continue;
    const double y = Y(t);
    if (std::fabs(y - last_y) < 14 && t != 1.0) continue;
    last_y = y;
    svg += absl::StrCat("<line class=\"grid\" x1=\"", Px(kLeft), "\" x2=\"",
                        Px(kChartWidth - kRight), "\" y1=\"", Px(y), "\" y2=\"", Px(y),
                        "\"/><text class=\"tick\" x=\"", Px(kLeft - 6), "\" y=\"", Px(y + 4),
                        "\" text-anchor=\"end\">", TickText(t), "</text>\n");
  }
  std::vector<double> xs;
  for (const auto& line : load.ratio_lines)
    xs.insert(xs.end(), line.loads.begin(), line.loads.end());
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs) {
    if (!(x > 0)) continue;
    svg += absl::StrCat("<text class=\"tick\" x=\"", Px(X(x)), "\" y=\"",
                        Px(kChartHeight - kBottom + 16), "\" text-anchor=\"middle\">", TickText(x),
                        "</text>\n");
  }
  svg += AxisLabels(load.axis + " (log scale)",
                    absl::StrCat("ratio B/A of ", a.info.metric, " (log scale)"));
  svg +=
      absl::StrCat("<line class=\"unity\" x1=\"", Px(kLeft), "\" x2=\"", Px(kChartWidth - kRight),
                   "\" y1=\"", Px(Y(1.0)), "\" y2=\"", Px(Y(1.0)), "\"/>\n");
  // Crossings: the bracket (the coordinator's when it located this line), the fitted crossover
  // and its interval, clipped to the frame.
  auto clip = [&](double px) { return std::clamp(px, kLeft, kChartWidth - kRight); };
  for (size_t l = 0; l < load.ratio_lines.size(); ++l) {
    const LoadRatioLine& line = load.ratio_lines[l];
    const std::string color = kPalette[l % 8];
    const LadderLine::Located* located = line.ladder_line && a.lines[*line.ladder_line].located
                                             ? &*a.lines[*line.ladder_line].located
                                             : nullptr;
    double lo = NAN, hi = NAN;
    std::string what;
    if (located && std::isfinite(located->bracket_lower) && located->bracket_lower > 0) {
      lo = located->bracket_lower, hi = located->bracket_upper;
      what = absl::StrCat("located by the coordinator (", located->outcome, ")");
    } else if (line.crossing) {
      lo = line.crossing->bracket_lower, hi = line.crossing->bracket_upper;
      what = "sign change";
    }
    if (std::isfinite(lo) && lo > 0) {
      const double bx0 = clip(X(lo)), bx1 = clip(X(hi));
      svg += absl::StrCat("<rect class=\"bracket", located ? " located" : "", "\" data-line=\"", l,
                          "\" x=\"", Px(bx0), "\" y=\"", Px(kTop), "\" width=\"", Px(bx1 - bx0),
                          "\" height=\"", Px(kChartHeight - kTop - kBottom), "\" fill=\"", color,
                          "\"><title>", Esc(line.label), ": ", what, " between ", TickText(lo),
                          " and ", TickText(hi), "</title></rect>\n");
    }
    const auto& fit = line.crossover_fit;
    if (fit && fit->bounds == stats::Boundedness::kBounded && fit->estimate > 0 &&
        fit->estimate >= X.Lo() && fit->estimate <= X.Hi()) {
      const double cx = X(fit->estimate);
      const double ix0 = fit->lower > 0 ? clip(X(fit->lower)) : kLeft;
      const double ix1 = std::isfinite(fit->upper) ? clip(X(fit->upper)) : kChartWidth - kRight;
      const std::string text =
          absl::StrCat("crossover ≈ ", FormatNumber(fit->estimate), " ", FormatInterval(*fit));
      svg += absl::StrCat(
          "<rect class=\"crossover-interval\" data-line=\"", l, "\" x=\"", Px(ix0), "\" y=\"",
          Px(kChartHeight - kBottom - 8), "\" width=\"", Px(ix1 - ix0), "\" height=\"8\" fill=\"",
          color, "\"><title>", Esc(line.label), ": ", Esc(text),
          " (Fieller, 95 %)</title></rect>\n<line class=\"crossover\" data-line=\"", l,
          "\" data-crossover=\"", FormatNumber(fit->estimate), "\" x1=\"", Px(cx), "\" x2=\"",
          Px(cx), "\" y1=\"", Px(kTop), "\" y2=\"", Px(kChartHeight - kBottom), "\" stroke=\"",
          color, "\"/><text class=\"tick\" x=\"", Px(cx + 3), "\" y=\"",
          Px(kTop + 12 + 12 * static_cast<double>(l)), "\" fill=\"", color, "\">", Esc(text),
          "</text>\n");
    }
  }
  const double nlines = static_cast<double>(load.ratio_lines.size());
  for (size_t l = 0; l < load.ratio_lines.size(); ++l) {
    const LoadRatioLine& line = load.ratio_lines[l];
    const std::string color = kPalette[l % 8];
    const double spread = std::min(11.0, 60.0 / std::max(1.0, nlines));
    const double offset = (static_cast<double>(l) - (nlines - 1) / 2) * spread;
    std::string path, marks;
    for (size_t k = 0; k < line.points.size(); ++k) {
      if (!(line.loads[k] > 0)) continue;
      const Comparison& cmp = a.comparisons[line.points[k]];
      const double e = estimate(cmp);
      const double x = X(line.loads[k]) + offset;
      const bool placed = std::isfinite(e) && e > 0;
      const double y = placed ? Y(e) : kTop + 6;
      if (placed) path += absl::StrCat(path.empty() ? "M" : " L", Px(x), " ", Px(y));
      const auto& t = cmp.t.interval;
      std::string df = "-", lower = "-", upper = "-";
      if (t && t->bounds == stats::Boundedness::kBounded && t->lower > 0) {
        const double ylo = Y(t->lower), yhi = Y(t->upper);
        marks += absl::StrCat("<path class=\"whisker\" stroke=\"", color, "\" d=\"M", Px(x), " ",
                              Px(ylo), " L", Px(x), " ", Px(yhi), " M", Px(x - 4), " ", Px(ylo),
                              " L", Px(x + 4), " ", Px(ylo), " M", Px(x - 4), " ", Px(yhi), " L",
                              Px(x + 4), " ", Px(yhi), "\"/>\n");
        df = FormatDf(t->df);
        lower = FormatNumber(t->lower);
        upper = FormatNumber(t->upper);
        // Beside the whisker's lower end, on the side with room, inside the frame.
        const bool right_edge = x > kChartWidth - kRight - 120;
        marks +=
            absl::StrCat("<text class=\"df\" x=\"", Px(right_edge ? x - 6 : x + 6), "\" y=\"",
                         Px(std::min(ylo + 11, kChartHeight - kBottom - 3)), "\" text-anchor=\"",
                         right_edge ? "end" : "start", "\" fill=\"", color, "\">df ", df,
                         t->scope == stats::IntervalScope::kWithinSessionOnly ? " (1 session)" : "",
                         "</text>\n");
      }
      std::string tip = Tooltip(a, cmp);
      if (t) tip += absl::StrCat("\ndf ", FormatDf(t->df), " (", t->n_units, " units)");
      marks += absl::StrCat("<circle class=\"load-point ratio", cmp.flags.empty() ? "" : " flagged",
                            "\" tabindex=\"0\" data-cell=\"", Esc(cmp.treatment_key),
                            "\" data-line=\"", l, "\" data-load=\"", TickText(line.loads[k]),
                            "\" data-ratio=\"", FormatNumber(e), "\" data-lower=\"", lower,
                            "\" data-upper=\"", upper, "\" data-df=\"", df, "\" data-tip=\"",
                            Esc(tip), "\" cx=\"", Px(x), "\" cy=\"", Px(y), "\" r=\"5\" fill=\"",
                            color, "\" stroke=\"", color, "\"/>\n");
    }
    svg += absl::StrCat("<path class=\"series", line.aa ? " aa" : "", "\" stroke=\"", color,
                        "\" d=\"", path, "\"/>\n", marks);
  }
  svg += "</svg>\n<ul class=\"legend\">\n";
  for (size_t l = 0; l < load.ratio_lines.size(); ++l) {
    svg +=
        absl::StrCat("<li><span class=\"swatch\" style=\"background:", kPalette[l % 8],
                     "\"></span>", Esc(load.ratio_lines[l].label),
                     load.ratio_lines[l].aa ? " — A/A control (should sit on 1)" : "", "</li>\n");
  }
  svg += "</ul>\n";
  return svg;
}

constexpr const char* kStyle = R"css(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
h1 { border-bottom: 2px solid #ccc; padding-bottom: .2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0 1.4em; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.flagged td { background: #fff3f0; }
.flag { color: #b00020; }
svg.ladder, svg.load-curve, svg.load-ratio { background: #fff; max-width: 100%; height: auto; }
svg .frame { fill: none; stroke: #999; }
svg .grid { stroke: #eee; }
svg .unity { stroke: #555; stroke-dasharray: 6 4; }
svg .tick { font-size: 11px; fill: #444; }
svg .label { font-size: 12px; fill: #222; }
svg .series { fill: none; stroke-width: 1.8; }
svg .series.aa { stroke-dasharray: 3 3; }
svg .whisker { fill: none; stroke-width: 1.2; }
svg .point, svg .load-point { stroke: #fff; stroke-width: 1.5; cursor: pointer; }
svg .load-point.flagged { stroke: #b00020; stroke-width: 2.5; }
svg .load-point.active, svg .load-point:focus { r: 7; outline: none; }
svg .pointlabel, svg .df { font-size: 10px; }
svg .crossover-interval { opacity: .35; }
svg .point.flagged { stroke: #b00020; stroke-width: 2.5; }
svg .point.probe { fill: #fff; stroke-width: 2.5; }
svg .point.active, svg .point:focus { r: 7; outline: none; }
svg .bracket { opacity: .08; }
svg .crossover { stroke-dasharray: 2 3; stroke-width: 1.5; }
svg .flagmark { font-size: 12px; fill: #b00020; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: .3em 1.4em; }
.swatch { display: inline-block; width: 14px; height: 4px; margin-right: 6px; vertical-align: middle; }
#tooltip { position: absolute; display: none; background: #222; color: #fff; padding: 6px 9px; border-radius: 4px; font-size: 12px; white-space: pre-line; pointer-events: none; max-width: 460px; z-index: 10; }
)css";

constexpr const char* kScript = R"js(
(function () {
  'use strict';
  var tip = document.getElementById('tooltip');
  function show(event) {
    var el = event.currentTarget;
    tip.textContent = el.getAttribute('data-tip');
    tip.style.display = 'block';
    var box = el.getBoundingClientRect();
    tip.style.left = (window.scrollX + box.right + 10) + 'px';
    tip.style.top = (window.scrollY + box.top - 10) + 'px';
    el.classList.add('active');
  }
  function hide(event) {
    tip.style.display = 'none';
    event.currentTarget.classList.remove('active');
  }
  var points = document.querySelectorAll('circle.point, circle.load-point');
  for (var i = 0; i < points.length; i++) {
    points[i].addEventListener('mouseenter', show);
    points[i].addEventListener('mouseleave', hide);
    points[i].addEventListener('focus', show);
    points[i].addEventListener('blur', hide);
  }
})();
)js";

bool LooksNumeric(const std::string& text) {
  if (text.empty() || text == "-") return text == "-";
  char* end = nullptr;
  std::strtod(text.c_str(), &end);
  return end == text.c_str() + text.size();
}

// One section: its heading, paragraphs, chart (already drawn) and table.
std::string SectionHtml(const Section& s, const std::string& chart) {
  const std::string tag = absl::StrCat("h", s.level);
  std::string html = absl::StrCat("<section id=\"", Esc(s.anchor), "\">\n<", tag, ">", Esc(s.title),
                                  "</", tag, ">\n");
  for (const auto& p : s.paragraphs) html += "<p>" + Esc(p) + "</p>\n";
  html += chart;
  if (!s.table.header.empty()) {
    html += "<table>\n<thead><tr>";
    for (const auto& h : s.table.header) html += "<th>" + Esc(h) + "</th>";
    html += "</tr></thead>\n<tbody>\n";
    for (size_t r = 0; r < s.table.rows.size(); ++r) {
      const bool flagged = r < s.table.row_flagged.size() && s.table.row_flagged[r];
      const std::string cell = r < s.table.row_cells.size() ? s.table.row_cells[r] : "";
      html += "<tr";
      if (flagged) html += " class=\"flagged\"";
      if (!cell.empty()) html += " data-row-cell=\"" + Esc(cell) + "\"";
      html += ">";
      for (const auto& text : s.table.rows[r]) {
        const bool warn = text.rfind("⚠", 0) == 0;
        html += absl::StrCat("<td", LooksNumeric(text) ? " class=\"num\"" : "",
                             warn ? " class=\"flag\"" : "", ">", Esc(text), "</td>");
      }
      html += "</tr>\n";
    }
    html += "</tbody>\n</table>\n";
  }
  return html + "</section>\n";
}

}  // namespace

std::string RenderHistoryFragment(const MatrixHistory& history) {
  std::string html;
  for (const auto& s : HistorySections(history, 0)) {
    html +=
        SectionHtml(s, s.chart == ChartKind::kHistory ? RenderHistoryChart(history, s.chart_series)
                                                      : std::string());
  }
  return html;
}

std::string RenderHtml(const Report& report) {
  std::vector<std::string> titles;
  for (const auto& run : report.runs) {
    titles.push_back(absl::StrCat("run ", run.info.run_id, " ", run.info.matrix_name));
  }
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"generator\" content=\"",
      kAnalysisVersion, "\">\n<title>ladder report — ", Esc(absl::StrJoin(titles, ", ")),
      "</title>\n<style>", kStyle, HistoryChartStyle(), "</style>\n</head>\n<body>\n",
      "<div id=\"tooltip\" role=\"tooltip\"></div>\n");
  for (const auto& s : BuildSections(report)) {
    std::string chart;
    if (s.chart == ChartKind::kHistory) {
      if (s.chart_history < report.histories.size()) {
        chart = RenderHistoryChart(report.histories[s.chart_history], s.chart_series);
      }
    } else {
      for (const auto& run : report.runs) {
        if (run.info.run_id != s.chart_run) continue;
        switch (s.chart) {
          case ChartKind::kLadder:
            chart += Chart(run);
            break;
          case ChartKind::kThroughputLatency:
            if (run.load) chart += ThroughputLatencyChart(run);
            break;
          case ChartKind::kLoadRatio:
            if (run.load) chart += LoadRatioChart(run);
            break;
          case ChartKind::kNone:
          case ChartKind::kHistory:
            break;
        }
      }
    }
    html += SectionHtml(s, chart);
  }
  html += absl::StrCat("<script>", kScript, "</script>\n</body>\n</html>\n");
  return html;
}

}  // namespace ladder::report
