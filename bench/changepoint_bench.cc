// ladder-bench-changepoint: how often `ladder history`'s change-point (stats::FindChangePoint)
// raises a false alarm on a series of A/A runs, and how many runs it needs to see, and to place,
// a planted step. Simulated through the functions `ladder history` calls: each run's value and
// interval from stats::CellMeanInterval over its session means, the standard error read back from
// that interval, then FindChangePoint over the series (docs/statistics.md, "Where a regression
// began").
//
// A run of one cell: n sessions (VMs) whose log session means are μ_run + N(0, session²); μ_run
// = step · [run ≥ at] + N(0, drift²), the run-to-run drift no run's interval sees (the night, the
// host, what surrounds the benchmark). The detector is given the runs' intervals only; it must
// estimate the drift from the series.
//
// Printed: (1) A/A: the fraction of series of each length in which a change is detected (the
// false-alarm rate, nominal alpha = 5 %), with Clopper–Pearson 95 % intervals; (2) steps of 5, 10
// and 20 % planted at run `at`, the runs arriving one at a time (a nightly job testing after
// each): the fraction detected within 10 runs of the step, the median number of runs from the
// step to the first detection (1: the step's own run), and the fraction whose first detection
// names exactly the step's run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "robustness.h"

#include "ladder/stats/changepoint.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/sample.h"
#include "ladder/stats/summary.h"

namespace {

using ladder::stats::SeriesPoint;

// A share with its Clopper–Pearson 95 % interval (tests/stats/robustness.h, as the coverage
// bench prints it), and the counts.
std::string ProportionText(int k, int n) {
  const auto p = ladder::stats::testing::ClopperPearson(k, n);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f %% [%.1f, %.1f] (%d/%d)", 100 * p.estimate, 100 * p.lower,
                100 * p.upper, k, n);
  return buf;
}

struct Design {
  int sessions = 3;
  double session_sd = 0.02, drift_sd = 0.01;
};

// One run's point as `ladder history` computes it.
SeriesPoint SimulateRun(std::mt19937_64& rng, const Design& d, double level) {
  std::normal_distribution<double> normal(0.0, 1.0);
  const double mu = level + normal(rng) * d.drift_sd;
  std::vector<ladder::stats::Observation> obs;
  for (int s = 0; s < d.sessions; ++s) {
    obs.push_back({s, 0, 0, 1000.0 * std::exp(mu + normal(rng) * d.session_sd)});
  }
  auto interval = ladder::stats::CellMeanInterval(obs);
  if (!interval.ok()) return {mu, 0.0};
  const double t = ladder::stats::TwoSidedT(interval->confidence, interval->df);
  return {std::log(interval->estimate),
          (std::log(interval->upper) - std::log(interval->lower)) / (2 * t)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"False-alarm rate and detection delay of ladder history's change-point"};
  Design design;
  int aa_series = 1000, step_series = 300, at = 10, draws = 199;
  uint64_t seed = 1;
  bool json = false;
  app.add_option("--sessions", design.sessions, "sessions per run (default 3)");
  app.add_option("--session-sd", design.session_sd, "sd of log session means (default 0.02)");
  app.add_option("--drift-sd", design.drift_sd, "run-to-run drift, log sd (default 0.01)");
  app.add_option("--aa-series", aa_series, "A/A series per length (default 1000)");
  app.add_option("--step-series", step_series, "series per planted step (default 300)");
  app.add_option("--at", at, "the step's run, 1-based (default 10)");
  app.add_option("--draws", draws, "bootstrap draws of the test (default 199, as history)");
  app.add_option("--seed", seed, "seed");
  app.add_flag("--json", json, "JSON output");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json out = {{"design",
                         {{"sessions", design.sessions},
                          {"session_sd", design.session_sd},
                          {"drift_sd", design.drift_sd},
                          {"alpha", 0.05},
                          {"draws", draws}}}};
  std::mt19937_64 rng(seed);
  ladder::stats::ChangePointOptions options;
  options.draws = draws;
  if (!json) {
    std::printf(
        "Design: %d sessions per run, session sd %.1f %%, run-to-run drift %.1f %%, "
        "alpha 5 %%, %d bootstrap draws\n\n",
        design.sessions, 100 * design.session_sd, 100 * design.drift_sd, draws);
    std::printf("1. A/A series: false-alarm rate (a change detected where none is)\n");
  }
  for (int length : {5, 10, 20, 50}) {
    int alarms = 0;
    for (int i = 0; i < aa_series; ++i) {
      std::vector<SeriesPoint> series;
      for (int r = 0; r < length; ++r) series.push_back(SimulateRun(rng, design, 0.0));
      options.seed = rng();
      auto cp = ladder::stats::FindChangePoint(series, options);
      alarms += cp.ok() && cp->detected;
    }
    out["aa"].push_back({{"runs", length}, {"series", aa_series}, {"alarms", alarms}});
    if (!json) std::printf("   %2d runs: %s\n", length, ProportionText(alarms, aa_series).c_str());
  }
  if (!json) {
    std::printf(
        "\n2. A step at run %d, runs arriving one at a time (tested after each, up to "
        "10 runs from the step)\n",
        at);
  }
  for (double step : {0.05, 0.10, 0.20}) {
    int detected = 0, exact = 0;
    std::vector<int> delays;
    for (int i = 0; i < step_series; ++i) {
      std::vector<SeriesPoint> series;
      for (int r = 1; r < at; ++r) series.push_back(SimulateRun(rng, design, 0.0));
      for (int r = at; r < at + 10; ++r) {
        series.push_back(SimulateRun(rng, design, std::log(1 + step)));
        options.seed = rng();
        auto cp = ladder::stats::FindChangePoint(series, options);
        if (cp.ok() && cp->detected) {
          ++detected;
          delays.push_back(r - at + 1);
          exact += cp->plausible.size() == 1 && cp->index == static_cast<std::size_t>(at - 1);
          break;
        }
      }
    }
    std::sort(delays.begin(), delays.end());
    const double median = delays.empty() ? NAN : delays[delays.size() / 2];
    out["steps"].push_back(
        {{"step", step},
         {"series", step_series},
         {"detected_within_10", detected},
         {"median_delay_runs", delays.empty() ? nlohmann::json() : nlohmann::json(median)},
         {"located_exactly", exact}});
    if (!json) {
      std::printf(
          "   +%2.0f %%: detected within 10 runs %s; median delay %s runs; first "
          "detection names the step's run alone in %s\n",
          100 * step, ProportionText(detected, step_series).c_str(),
          delays.empty() ? "-" : std::to_string(static_cast<int>(median)).c_str(),
          ProportionText(exact, step_series).c_str());
    }
  }
  if (json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
