// ladder-bench-coverage: the coverage measurements of issue 50 that take longer than a unit test.
//
//   A. Robustness of the intervals on session means (the tables of tests/stats/robustness_test.cc,
//      with --experiments per row): stats::PairedRatioInterval and stats::UnpairedLogRatioInterval
//      under contaminated rounds and a drift within the session in the runners' arm orders.
//   B. Coverage after adaptive stopping, through the decision code the coordinator runs:
//      precision  stats::WidestProjectedHalfWidth (what SchedulerImpl::MaybeExtendGroupLocked in
//                 coordinator/src/precision.cc calls) with that function's rule around it: stop
//                 when the widest half-width projected from the first n − kCommittedSessions
//                 sessions <= target, else stop when sessions >= max_sessions, else add one
//                 paired session; then PairedRatioInterval over all n, the report's interval.
//                 (MaybeExtendGroupLocked is a member of the scheduler, reading the store: the
//                 rule's three lines are repeated here, the measure is the library's.) Coverage is
//                 also broken down by the session the run stopped at, over targets from ±5 % to
//                 ±1 % (spread / target from 0.33 to 1.6).
//      locate     coordinator::DecideLocateStep (coordinator/include/ladder/coordinator/locate.h)
//                 on rungs built as coordinator/src/crossover.cc's MeasureRungs builds them
//                 (PairedRatioInterval over OnlyPairedSessions, the decision from
//                 ProjectedRatioInterval), probes replicated as LocateLineLocked does
//                 (replicates.sessions units per new probe, one per kAddSession); then the
//                 interval the report shows at each probe (also by the sessions the probe stopped
//                 at), and the crossover as report/src/analysis.cc's FitCrossing computes it
//                 (CrossoverFromLinearFit of mean_B − mean_A, the means of session means).
//      --rule previous runs the rule before issue 59 (stop on the interval over all n sessions,
//      from 3 on; locate's default max_sessions max(3, 2 × sessions)) for comparison.
// Every proportion is printed with its Clopper–Pearson 95 % interval. Fixed seeds: the same
// arguments print the same tables.
//
//   ladder-bench-coverage [--experiments N] [--seed S] [--part all|robustness|precision|locate]
//                         [--rule committed|previous] [--committed K] [--json]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "ladder/coordinator/locate.h"
#include "ladder/stats/adaptive.h"
#include "ladder/stats/ratio.h"
#include "ladder/stats/summary.h"
#include "robustness.h"

namespace ladder::bench {
namespace {

using stats::testing::ClopperPearson;
using stats::testing::PercentWithInterval;

struct Options {
  int experiments = 2000;
  std::uint64_t seed = 1;
  bool json = false;
  std::string part = "all";
  // The stopping rule: "committed" is the coordinator's (decide at n sessions from the first
  // n − committed, projected to n: stats::ProjectedRatioInterval); "previous" is the rule before
  // issue 59 (decide on the interval over all n sessions, from 3 sessions on), for comparison.
  std::string rule = "committed";
  int committed = stats::kCommittedSessions;
};

bool Previous(const Options& o) { return o.rule == "previous"; }

// Locate's default max_sessions under each rule (matrices/src/parse.cc): twice
// replicates.sessions, and at least the sessions a probe can first be decided at.
int LocateDefaultMaxSessions(const Options& o, int sessions) {
  return std::max(Previous(o) ? 3 : stats::kMinDecisionSessions + o.committed, 2 * sessions);
}

nlohmann::json ProportionJson(int k, int n) {
  const stats::testing::Proportion p = ClopperPearson(k, n);
  return {
      {"count", k}, {"of", n}, {"estimate", p.estimate}, {"lower", p.lower}, {"upper", p.upper}};
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// ---------------------------------------------------------------------------------------------
// A. Robustness.

nlohmann::json Robustness(const Options& o) {
  nlohmann::json out = nlohmann::json::object();
  const auto began = std::chrono::steady_clock::now();
  if (!o.json) {
    std::printf(
        "\n### Paired log-t interval (PairedRatioInterval) under contamination and drift\n\n"
        "| disturbance | sessions | coverage of 0.7 [CP 95 %%] | A/A false positives [CP 95 %%] "
        "| median half-width |\n| --- | --- | --- | --- | --- |\n");
  }
  // One table row, to the JSON and (unless --json) as Markdown.
  const auto emit = [&](const char* table, const char* name, int sessions, const auto& row) {
    out[table].push_back(
        {{"disturbance", name},
         {"sessions", sessions},
         {"coverage", ProportionJson(row.covered, o.experiments)},
         {"aa_false_positives", ProportionJson(row.false_positives, o.experiments)},
         {"median_half_width", row.median_half_width},
         {"failed", row.failed}});
    if (!o.json) {
      std::printf("| %s | %d | %s | %s | %.2f %% |\n", name, sessions,
                  PercentWithInterval(row.covered, o.experiments).c_str(),
                  PercentWithInterval(row.false_positives, o.experiments).c_str(),
                  100 * row.median_half_width);
    }
  };
  std::uint64_t seed = o.seed * 1000003 + 5000;
  for (const auto& s : stats::testing::RobustnessScenarios()) {
    for (int sessions : {3, 5, 10}) {
      emit("paired", s.name, sessions,
           stats::testing::PairedRobustnessRow(s.d, sessions, o.experiments, ++seed));
    }
  }
  if (!o.json) {
    std::printf(
        "\n### Unpaired log ratio (UnpairedLogRatioInterval, `ladder compare`) under the same\n\n"
        "| disturbance (both runs) | sessions per run | coverage of 0.7 [CP 95 %%] | A/A false "
        "positives [CP 95 %%] | median half-width |\n| --- | --- | --- | --- | --- |\n");
  }
  seed = o.seed * 1000003 + 6000;
  for (const auto& s : stats::testing::RobustnessScenarios()) {
    if (s.bad || s.d.order == stats::testing::ArmOrder::kArmBlocks) continue;
    for (int sessions : {3, 5, 10}) {
      emit("unpaired", s.name, sessions,
           stats::testing::UnpairedRobustnessRow(s.d, sessions, o.experiments, ++seed));
    }
  }
  out["seconds"] = Seconds(began);
  std::fprintf(stderr, "[coverage] robustness: %.1f s\n", Seconds(began));
  return out;
}

// ---------------------------------------------------------------------------------------------
// B1. precision.

// One more paired session (id `session`) of the coverage scenario: the 1 % interaction, 3
// processes × 10 rounds.
void AddPairedSession(std::mt19937_64& rng, double ratio, std::int64_t session,
                      stats::PairedSample& sample) {
  stats::PairedSample one = stats::testing::SimulatePaired(
      rng, 50.0, ratio, stats::testing::kCoverageSds, stats::testing::kCoverageInteraction,
      {.sessions = 1, .processes = 3, .rounds = 10});
  for (auto& x : one.a) sample.a.push_back({session, x.process, x.round, x.value});
  for (auto& x : one.b) sample.b.push_back({session, x.process, x.round, x.value});
}

struct PrecisionTally {
  int experiments = 0;
  int covered = 0;
  int precise = 0;  // stopped on "precision reached"
  int covered_precise = 0;
  int precise_runs = 0;         // runs (not comparisons) stopped on precision
  int precise_over_target = 0;  // of those, the reported widest interval wider than asked
  std::vector<double> precise_width_ratio;  // of those, reported widest half-width / target
  int budget = 0;                           // stopped on "budget spent"
  int covered_budget = 0;
  double sessions = 0;  // summed over experiments
  std::vector<int> covered_by_n, stopped_by_n;
};

// The precision loop for one cell group of `ratios.size()` comparisons against one baseline
// (each comparison its own PairedSample with its own truth), planned sessions `planned`.
// Coverage is counted per comparison.
PrecisionTally SimulatePrecision(const Options& o, std::mt19937_64& rng,
                                 const std::vector<double>& ratios, int planned, double target,
                                 int max_sessions, int experiments) {
  PrecisionTally t;
  t.covered_by_n.assign(static_cast<std::size_t>(max_sessions + 1), 0);
  t.stopped_by_n.assign(static_cast<std::size_t>(max_sessions + 1), 0);
  for (int e = 0; e < experiments; ++e) {
    std::vector<stats::PairedSample> samples(ratios.size());
    int sessions = 0;
    const auto add = [&] {
      for (std::size_t c = 0; c < ratios.size(); ++c) {
        AddPairedSession(rng, ratios[c], sessions, samples[c]);
      }
      ++sessions;
    };
    for (int r = 0; r < planned; ++r) add();
    bool precise = false;
    while (true) {
      // precision.cc: projected widest <= target: stop; sessions >= max_sessions: stop; else
      // add one.
      const double widest = Previous(o) ? stats::WidestRatioHalfWidth(samples)
                                        : stats::WidestProjectedHalfWidth(samples, o.committed);
      if (widest <= target) {
        precise = true;
        break;
      }
      if (sessions >= max_sessions) break;
      add();
    }
    t.sessions += sessions;
    // The committed rule stops on a projection: the interval over all sessions may be wider.
    t.precise_runs += precise;
    if (precise) {
      const double reported = stats::WidestRatioHalfWidth(samples);
      t.precise_over_target += reported > target;
      t.precise_width_ratio.push_back(reported / target);
    }
    for (std::size_t c = 0; c < ratios.size(); ++c) {
      absl::StatusOr<stats::Interval> ci = stats::PairedRatioInterval(samples[c]);
      const bool covered = ci.ok() && ci->Contains(ratios[c]);
      ++t.experiments;
      t.covered += covered;
      (precise ? t.precise : t.budget) += 1;
      (precise ? t.covered_precise : t.covered_budget) += covered;
      t.stopped_by_n[static_cast<std::size_t>(sessions)] += 1;
      t.covered_by_n[static_cast<std::size_t>(sessions)] += covered;
    }
  }
  return t;
}

// The q-quantile (0..1) of `v` (sorted in place), NaN when empty.
double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(q * static_cast<double>(v.size() - 1) + 0.5)];
}

std::string Fraction(int k, int n) {
  if (n == 0) return "–";
  return PercentWithInterval(k, n) + " (n " + std::to_string(n) + ")";
}

// The targets the precision rows sweep: with the coverage scenario's spread of per-session log
// ratios (~1.6 %), the ratio spread / target runs from 0.33 (±5 %: a precision stop at the first
// chance is the rule) through 0.55 and 0.82 (±3 %, ±2 %: borderline) to 1.1 and 1.6 (±1.5 %,
// ±1 %: a stop before the budget is spent is the exception).
constexpr double kPrecisionTargets[] = {0.05, 0.03, 0.02, 0.015, 0.01};

// "93.1 % [91.8, 94.3] (1520)", or "–" for none.
std::string CoverageCell(int k, int n) {
  if (n == 0) return "–";
  return PercentWithInterval(k, n) + " (" + std::to_string(n) + ")";
}

nlohmann::json Precision(const Options& o) {
  nlohmann::json out = nlohmann::json::array();
  // The per-stopping-session table, printed after the summary: one line per row of one
  // comparison of truth 1.0.
  std::string by_session_table;
  const auto began = std::chrono::steady_clock::now();
  if (!o.json) {
    std::printf(
        "\n### precision: coverage of the reported PairedRatioInterval after the stopping rule\n\n"
        "| planned sessions | target | max_sessions | true ratio | coverage [CP 95 %%] | stopped "
        "on precision | coverage when precise | coverage when budget spent | precision stops whose "
        "interval is wider than the target | reported half-width / target at precision stops: "
        "median, 90th percentile | mean sessions |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  }
  std::uint64_t seed = o.seed * 1000003 + 7000;
  struct Group {
    const char* name;
    std::vector<double> ratios;
  };
  const std::vector<Group> groups = {{"1.0", {1.0}},
                                     {"0.95", {0.95}},
                                     {"0.7", {0.7}},
                                     {"group of 3: 1.0, 0.95, 0.7", {1.0, 0.95, 0.7}}};
  for (int planned : {2, 3}) {
    for (double target : kPrecisionTargets) {
      for (int max_sessions : {6, 10}) {
        for (const Group& g : groups) {
          std::mt19937_64 rng(++seed);
          const int experiments =
              g.ratios.size() > 1 ? std::max(1, o.experiments / static_cast<int>(g.ratios.size()))
                                  : o.experiments;
          PrecisionTally t =
              SimulatePrecision(o, rng, g.ratios, planned, target, max_sessions, experiments);
          const double width_median = Quantile(t.precise_width_ratio, 0.5);
          const double width_p90 = Quantile(t.precise_width_ratio, 0.9);
          const double mean_sessions = t.sessions / experiments;
          nlohmann::json by_n = nlohmann::json::array();
          for (int n = 0; n <= max_sessions; ++n) {
            if (t.stopped_by_n[n] == 0) continue;
            by_n.push_back({{"sessions", n},
                            {"coverage", ProportionJson(t.covered_by_n[n], t.stopped_by_n[n])}});
          }
          out.push_back(
              {{"planned_sessions", planned},
               {"target", target},
               {"max_sessions", max_sessions},
               {"true_ratios", g.ratios},
               {"experiments", experiments},
               {"coverage", ProportionJson(t.covered, t.experiments)},
               {"stopped_precise", ProportionJson(t.precise, t.experiments)},
               {"precise_wider_than_target", ProportionJson(t.precise_over_target, t.precise_runs)},
               {"coverage_precise", ProportionJson(t.covered_precise, t.precise)},
               {"coverage_budget_spent", ProportionJson(t.covered_budget, t.budget)},
               {"mean_sessions", mean_sessions},
               {"by_sessions", by_n}});
          if (!o.json && g.ratios.size() == 1 && g.ratios[0] == 1.0) {
            char head[64];
            std::snprintf(head, sizeof head, "| %d | ±%.1f %% | %d | %.2f |", planned, 100 * target,
                          max_sessions, mean_sessions);
            by_session_table += head;
            for (int n = 3; n <= 10; ++n) {
              by_session_table +=
                  " " +
                  (n <= max_sessions ? CoverageCell(t.covered_by_n[static_cast<std::size_t>(n)],
                                                    t.stopped_by_n[static_cast<std::size_t>(n)])
                                     : std::string("–")) +
                  " |";
            }
            by_session_table += "\n";
          }
          if (!o.json) {
            std::printf(
                "| %d | ±%.1f %% | %d | %s | %s | %.1f %% | %s | %s | %s | %.2f, %.2f | %.2f |\n",
                planned, 100 * target, max_sessions, g.name,
                PercentWithInterval(t.covered, t.experiments).c_str(),
                100.0 * t.precise / t.experiments, Fraction(t.covered_precise, t.precise).c_str(),
                Fraction(t.covered_budget, t.budget).c_str(),
                Fraction(t.precise_over_target, t.precise_runs).c_str(), width_median, width_p90,
                mean_sessions);
          }
        }
      }
    }
  }
  if (!o.json) {
    std::printf(
        "\n### precision: coverage by the session the run stopped at (one comparison, truth 1.0)"
        "\n\nEach cell: coverage of the reported PairedRatioInterval [CP 95 %%] (runs that "
        "stopped there).\n\n| planned | target | max_sessions | mean sessions | n = 3 | 4 | 5 | 6 "
        "| 7 | 8 | 9 | 10 |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | "
        "--- "
        "|\n%s",
        by_session_table.c_str());
  }
  std::fprintf(stderr, "[coverage] precision: %.1f s\n", Seconds(began));
  return out;
}

// ---------------------------------------------------------------------------------------------
// B2. locate.

// tests/integration/locate_test.cc's model: arm A ("2d") takes 50 + 0.01·depth µs, arm B ("3d")
// a flat 80 µs; B / A crosses 1 at 3000 tokens.
constexpr double kTrueCrossover = 3000;
double ModelTimeUs(int arm, double depth) { return arm == 0 ? 50.0 + 0.01 * depth : 80.0; }
double TrueRatio(double depth) { return ModelTimeUs(1, depth) / ModelTimeUs(0, depth); }

struct LocateScenario {
  const char* name;
  std::vector<double> ladder;  // the declared depths
  int sessions;                // replicates.sessions: the ladder's units, and each new probe's
  int processes;
  int rounds;
  double session_sd;      // log-normal speed of a session, common to every cell and arm
  double interaction_sd;  // arm × session, per cell
  double process_sd;      // per arm and process (one engine per arm serves every depth)
  double round_sd;
};

// One session (a unit) measuring both arms at `depths`; appends to data[depth].
void AddLocateSession(std::mt19937_64& rng, const LocateScenario& sc,
                      const std::vector<double>& depths, std::int64_t session,
                      std::map<double, stats::PairedSample>& data) {
  std::normal_distribution<double> z(0.0, 1.0);
  const double speed = sc.session_sd * z(rng);
  std::vector<double> process(static_cast<std::size_t>(2 * sc.processes));
  for (double& v : process) v = sc.process_sd * z(rng);
  for (double depth : depths) {
    stats::PairedSample& sample = data[depth];
    for (int arm = 0; arm < 2; ++arm) {
      const double w = sc.interaction_sd * z(rng);
      for (int p = 0; p < sc.processes; ++p) {
        for (int r = 0; r < sc.rounds; ++r) {
          const double value =
              ModelTimeUs(arm, depth) *
              std::exp(speed + w + process[static_cast<std::size_t>(arm * sc.processes + p)] +
                       sc.round_sd * z(rng));
          (arm == 0 ? sample.a : sample.b).push_back({session, p, r, value});
        }
      }
    }
  }
}

struct LocateTally {
  int searches = 0;
  std::map<std::string, int> outcomes;
  int probes = 0;
  double probe_sessions = 0;
  // Coverage of the true ratio by the reported interval, by kind of rung.
  int ladder_n = 0, ladder_covered = 0;
  int excludes_n = 0, excludes_covered = 0;  // probes decided: interval excludes 1
  int within_n = 0, within_covered = 0;      // probes decided: within 1 ± 1 %
  int spent_n = 0, spent_covered = 0;        // the probe left undecided (budget_spent)
  int bracket_n = 0, bracket_covered = 0;    // resolved: bracket contains 3000
  int fit_n = 0, fit_covered = 0, fit_unbounded = 0, fit_missing = 0;
  double fit_abs_error = 0;
  int fixed_fit_n = 0, fixed_fit_covered = 0;  // the same depths in a fixed design
  // Every probe's coverage by the sessions it stopped at: {covered, probes}.
  std::map<int, std::pair<int, int>> probe_by_n;
};

// The rungs of a line as crossover.cc's MeasureRungs builds them.
std::vector<coordinator::LocateRung> MeasureRungs(const Options& o,
                                                  const std::map<double, stats::PairedSample>& data,
                                                  const std::map<double, int>& units) {
  std::vector<coordinator::LocateRung> rungs;
  for (const auto& [depth, sample] : data) {
    coordinator::LocateRung r;
    r.depth = depth;
    r.units = units.at(depth);
    const stats::PairedSample paired = stats::OnlyPairedSessions(sample);
    if (paired.a.empty() || paired.b.empty()) {
      r.error = "no session measured both arms";
    } else if (auto ci = stats::PairedRatioInterval(paired); ci.ok()) {
      r.ratio = *ci;
    } else {
      r.error = std::string(ci.status().message());
    }
    if (r.ratio && Previous(o)) {
      // Before issue 59: the interval over all sessions, once it rests on three.
      if (r.ratio->n_units >= stats::kMinSessionsForInterval) {
        r.decision = r.ratio;
      } else {
        r.decision_error = "fewer than 3 sessions";
      }
    } else if (r.ratio) {
      if (auto d = stats::ProjectedRatioInterval(paired, o.committed); d.ok()) {
        r.decision = *d;
      } else {
        r.decision_error = std::string(d.status().message());
      }
    }
    rungs.push_back(std::move(r));
  }
  return rungs;
}

// The crossover as report/src/analysis.cc's FitCrossing computes it: rungs with an interval and
// estimate > 0; the per-token difference B − A of the means of session means (a time: lower is
// better); a crossing from PlanCrossoverProbe; the fit with >= 3 depths. nullopt: no fit.
std::optional<stats::Interval> ReportedCrossover(
    const std::vector<coordinator::LocateRung>& rungs,
    const std::map<double, stats::PairedSample>& data) {
  std::vector<stats::LadderPoint> points;
  std::vector<double> x, diff;
  for (const auto& r : rungs) {
    if (!r.ratio || !(r.ratio->estimate > 0)) continue;
    absl::StatusOr<std::vector<stats::SessionRatio>> per_session =
        stats::SessionRatios(stats::OnlyPairedSessions(data.at(r.depth)));
    if (!per_session.ok()) continue;
    double ma = 0, mb = 0;
    for (const auto& s : *per_session) {
      ma += s.mean_a;
      mb += s.mean_b;
    }
    ma /= static_cast<double>(per_session->size());
    mb /= static_cast<double>(per_session->size());
    points.push_back({r.depth, *r.ratio});
    x.push_back(r.depth);
    diff.push_back(mb - ma);
  }
  const auto plan =
      stats::PlanCrossoverProbe(points, {.resolution_octaves = 0.25, .min_step = 256});
  if (!plan.ok() || plan->status == stats::LocateStatus::kNoCrossing || x.size() < 3) {
    return std::nullopt;
  }
  absl::StatusOr<stats::Interval> fit = stats::CrossoverFromLinearFit(x, diff, 0.95);
  if (!fit.ok()) return std::nullopt;
  return *fit;
}

void SimulateSearch(const Options& o, std::mt19937_64& rng, const LocateScenario& sc,
                    LocateTally& t) {
  const std::vector<double>& ladder = sc.ladder;
  coordinator::LocateConfig config;
  config.axis = "depth";
  config.pair_axis = "path";
  config.arm_a = "2d";
  config.arm_b = "3d";
  for (double d : ladder) config.declared.push_back(static_cast<int64_t>(d));
  config.resolution_octaves = 0.25;
  config.min_step = 256;
  config.max_sessions = LocateDefaultMaxSessions(o, sc.sessions);
  config.integer_axis = true;

  std::map<double, stats::PairedSample> data;
  std::map<double, int> units;
  std::int64_t next_session = 0;
  for (int r = 0; r < sc.sessions; ++r) AddLocateSession(rng, sc, ladder, next_session++, data);
  for (double d : ladder) units[d] = sc.sessions;
  std::optional<double> current_probe;
  std::vector<double> probes;
  coordinator::LocateStep step;
  for (int guard = 0; guard < 200; ++guard) {
    step = coordinator::DecideLocateStep(config, MeasureRungs(o, data, units), current_probe);
    if (step.action == coordinator::LocateAction::kStop) break;
    if (step.action == coordinator::LocateAction::kProbe) {
      current_probe = step.depth;
      probes.push_back(step.depth);
      for (int r = 0; r < sc.sessions; ++r) {
        AddLocateSession(rng, sc, {step.depth}, next_session++, data);
      }
      units[step.depth] = sc.sessions;
    } else {  // kAddSession
      AddLocateSession(rng, sc, {step.depth}, next_session++, data);
      units[step.depth] += 1;
    }
  }
  ++t.searches;
  ++t.outcomes[step.outcome.empty() ? "loop guard" : step.outcome];
  if (step.outcome == "resolved") {
    ++t.bracket_n;
    t.bracket_covered +=
        step.bracket_lower <= kTrueCrossover && kTrueCrossover <= step.bracket_upper;
  }

  // The report: each rung's PairedRatioInterval over all its sessions.
  const std::vector<coordinator::LocateRung> rungs = MeasureRungs(o, data, units);
  for (const auto& r : rungs) {
    const bool is_probe = std::find(probes.begin(), probes.end(), r.depth) != probes.end();
    if (is_probe) {
      ++t.probes;
      t.probe_sessions += r.units;
    }
    if (!r.ratio) continue;
    const bool covered = r.ratio->Contains(TrueRatio(r.depth));
    if (is_probe) {
      t.probe_by_n[r.units].first += covered;
      t.probe_by_n[r.units].second += 1;
    }
    if (!is_probe) {
      ++t.ladder_n;
      t.ladder_covered += covered;
      continue;
    }
    const bool last_spent = step.outcome == "budget_spent" && r.depth == probes.back();
    const stats::ProbeVerdict v = stats::ClassifyProbe(*r.ratio);
    if (last_spent || r.ratio->scope != stats::IntervalScope::kBetweenSessions ||
        v == stats::ProbeVerdict::kUndecided) {
      ++t.spent_n;
      t.spent_covered += covered;
    } else if (v == stats::ProbeVerdict::kExcludesOne) {
      ++t.excludes_n;
      t.excludes_covered += covered;
    } else {
      ++t.within_n;
      t.within_covered += covered;
    }
  }

  const std::optional<stats::Interval> fit = ReportedCrossover(rungs, data);
  if (!fit) {
    ++t.fit_missing;
  } else {
    ++t.fit_n;
    t.fit_covered += fit->Contains(kTrueCrossover);
    t.fit_unbounded += fit->bounds == stats::Boundedness::kUnbounded;
    t.fit_abs_error += std::fabs(fit->estimate - kTrueCrossover);
  }

  // The reference: the same depths measured in a fixed design (replicates.sessions units at the
  // ladder and at each probe, no session added), fitted the same way.
  std::map<double, stats::PairedSample> fixed;
  std::map<double, int> fixed_units;
  for (int r = 0; r < sc.sessions; ++r) AddLocateSession(rng, sc, ladder, next_session++, fixed);
  for (double d : ladder) fixed_units[d] = sc.sessions;
  for (double probe : probes) {
    for (int r = 0; r < sc.sessions; ++r) {
      AddLocateSession(rng, sc, {probe}, next_session++, fixed);
    }
    fixed_units[probe] = sc.sessions;
  }
  const std::optional<stats::Interval> reference =
      ReportedCrossover(MeasureRungs(o, fixed, fixed_units), fixed);
  if (reference) {
    ++t.fixed_fit_n;
    t.fixed_fit_covered += reference->Contains(kTrueCrossover);
  }
}

nlohmann::json Locate(const Options& o) {
  nlohmann::json out = nlohmann::json::array();
  const auto began = std::chrono::steady_clock::now();
  const std::vector<double> doubling = {1024, 2048, 4096, 8192};
  // Two rungs whose first probe, 3072, lies 0.9 % from the crossing (true ratio 0.991).
  const std::vector<double> near = {1536, 6144};
  // max_sessions: the matrix default under the rule (LocateDefaultMaxSessions).
  const std::vector<LocateScenario> scenarios = {
      {"ladder 1K-8K, locate_test noise (2 sessions × 1 process × 3 rounds; 5 % session speed, "
       "0.4 % rounds)",
       doubling, 2, 1, 3, 0.05, 0.0, 0.0, 0.004},
      {"ladder 1K-8K, coverage noise (3 sessions × 3 × 10; 3 % session, 1 % interaction, 1 % "
       "process, 0.5 % round)",
       doubling, 3, 3, 10, 0.03, 0.01, 0.01, 0.005},
      {"ladder 1K-8K, coverage noise, 2 sessions planned (2 × 3 × 10)", doubling, 2, 3, 10, 0.03,
       0.01, 0.01, 0.005},
      {"ladder 1536, 6144 (first probe 3072, ratio 0.991), locate_test noise", near, 2, 1, 3, 0.05,
       0.0, 0.0, 0.004},
      {"ladder 1536, 6144 (first probe 3072, ratio 0.991), coverage noise, 3 sessions", near, 3, 3,
       10, 0.03, 0.01, 0.01, 0.005},
  };
  std::uint64_t seed = o.seed * 1000003 + 8000;
  for (const LocateScenario& sc : scenarios) {
    std::mt19937_64 rng(++seed);
    LocateTally t;
    for (int e = 0; e < o.experiments; ++e) SimulateSearch(o, rng, sc, t);
    nlohmann::json outcomes = t.outcomes;
    nlohmann::json probe_by_n = nlohmann::json::array();
    for (const auto& [n, kn] : t.probe_by_n) {
      probe_by_n.push_back({{"sessions", n}, {"coverage", ProportionJson(kn.first, kn.second)}});
    }
    out.push_back(
        {{"scenario", sc.name},
         {"max_sessions", LocateDefaultMaxSessions(o, sc.sessions)},
         {"searches", t.searches},
         {"outcomes", outcomes},
         {"mean_probes", static_cast<double>(t.probes) / t.searches},
         {"mean_sessions_per_probe", t.probe_sessions / std::max(1, t.probes)},
         {"ladder_rungs", ProportionJson(t.ladder_covered, t.ladder_n)},
         {"probes_excluding_one", ProportionJson(t.excludes_covered, t.excludes_n)},
         {"probes_within_tolerance", ProportionJson(t.within_covered, t.within_n)},
         {"probes_undecided", ProportionJson(t.spent_covered, t.spent_n)},
         {"probes_by_sessions", probe_by_n},
         {"probes_all", ProportionJson(t.excludes_covered + t.within_covered + t.spent_covered,
                                       t.excludes_n + t.within_n + t.spent_n)},
         {"resolved_bracket_contains_3000", ProportionJson(t.bracket_covered, t.bracket_n)},
         {"crossover_fit", ProportionJson(t.fit_covered, t.fit_n)},
         {"crossover_fit_unbounded", t.fit_unbounded},
         {"crossover_fit_fixed_design", ProportionJson(t.fixed_fit_covered, t.fixed_fit_n)},
         {"crossover_fit_missing", t.fit_missing},
         {"crossover_mean_abs_error", t.fit_abs_error / std::max(1, t.fit_n)}});
    if (o.json) continue;
    std::printf("\n### locate: %s, max_sessions %d, %d searches\n\n", sc.name,
                LocateDefaultMaxSessions(o, sc.sessions), t.searches);
    std::printf("outcomes:");
    for (const auto& [k, v] : t.outcomes) std::printf(" %s %d;", k.c_str(), v);
    std::printf(" probes per search %.2f, sessions per probe %.2f\n\n",
                static_cast<double>(t.probes) / t.searches,
                t.probe_sessions / std::max(1, t.probes));
    std::printf("| interval | n | covers the truth [CP 95 %%] |\n| --- | --- | --- |\n");
    std::printf("| ladder rungs (fixed sessions, reference) | %d | %s |\n", t.ladder_n,
                PercentWithInterval(t.ladder_covered, t.ladder_n).c_str());
    std::printf("| probes decided: excludes 1 | %d | %s |\n", t.excludes_n,
                t.excludes_n ? PercentWithInterval(t.excludes_covered, t.excludes_n).c_str() : "–");
    std::printf("| probes decided: within 1 ± 1 %% | %d | %s |\n", t.within_n,
                t.within_n ? PercentWithInterval(t.within_covered, t.within_n).c_str() : "–");
    std::printf("| probes left undecided (budget spent) | %d | %s |\n", t.spent_n,
                t.spent_n ? PercentWithInterval(t.spent_covered, t.spent_n).c_str() : "–");
    const int all_n = t.excludes_n + t.within_n + t.spent_n;
    std::printf("| all probes | %d | %s |\n", all_n,
                PercentWithInterval(t.excludes_covered + t.within_covered + t.spent_covered, all_n)
                    .c_str());
    for (const auto& [n, kn] : t.probe_by_n) {
      std::printf("| probes stopped at %d sessions | %d | %s |\n", n, kn.second,
                  PercentWithInterval(kn.first, kn.second).c_str());
    }
    std::printf("| resolved bracket contains 3000 | %d | %s |\n", t.bracket_n,
                t.bracket_n ? PercentWithInterval(t.bracket_covered, t.bracket_n).c_str() : "–");
    std::printf(
        "| crossover: Fieller interval of the linear fit contains 3000 | %d | %s (unbounded %d; "
        "no fit %d; mean |error| %.1f tokens) |\n",
        t.fit_n, t.fit_n ? PercentWithInterval(t.fit_covered, t.fit_n).c_str() : "–",
        t.fit_unbounded, t.fit_missing, t.fit_abs_error / std::max(1, t.fit_n));
    std::printf(
        "| reference: the same depths in a fixed design, linear fit contains 3000 | %d | %s |\n",
        t.fixed_fit_n,
        t.fixed_fit_n ? PercentWithInterval(t.fixed_fit_covered, t.fixed_fit_n).c_str() : "–");
  }
  std::fprintf(stderr, "[coverage] locate: %.1f s\n", Seconds(began));
  return out;
}

}  // namespace
}  // namespace ladder::bench

int main(int argc, char** argv) {
  ladder::bench::Options o;
  CLI::App app{
      "ladder-bench-coverage: coverage of ladder's intervals under contamination, drift "
      "and adaptive stopping (issue 50)"};
  app.add_option("--experiments", o.experiments, "simulated experiments (searches) per row")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of every row's generator");
  app.add_option("--part", o.part, "all, robustness, precision or locate")
      ->check(CLI::IsMember({"all", "robustness", "precision", "locate"}));
  app.add_flag("--json", o.json, "print one JSON object instead of Markdown tables");
  app.add_option("--rule", o.rule,
                 "stopping rule of precision and locate: committed (the coordinator's) or "
                 "previous (before issue 59, for comparison)")
      ->check(CLI::IsMember({"committed", "previous"}));
  app.add_option("--committed", o.committed,
                 "with --rule committed: the sessions measured after the decision")
      ->check(CLI::NonNegativeNumber);
  CLI11_PARSE(app, argc, argv);
  nlohmann::json out = {{"experiments", o.experiments},
                        {"seed", o.seed},
                        {"rule", o.rule},
                        {"committed", o.rule == "committed" ? o.committed : 0}};
  if (o.part == "all" || o.part == "robustness") out["robustness"] = ladder::bench::Robustness(o);
  if (o.part == "all" || o.part == "precision") out["precision"] = ladder::bench::Precision(o);
  if (o.part == "all" || o.part == "locate") out["locate"] = ladder::bench::Locate(o);
  if (o.json) std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
