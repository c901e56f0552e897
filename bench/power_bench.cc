// ladder-bench-power: does `ladder plan`'s minimum detectable change have the power it claims?
//
// For a matrix file and a stated spread (the sds `ladder plan` takes), it asks report::PlanMatrix
// for the plan (the code `ladder plan` runs), then simulates runs at the planned design —
// sessions x processes x rounds, each level's noise drawn on the log scale — with one cell (one
// comparison, for a paired matrix) changed by the printed MDC and every other unchanged, and
// judges them as `ladder compare` (two runs: Welch on the log session means,
// UnpairedLogRatioInterval) or `ladder report` (paired: PairedRatioInterval) does, with the band
// test's p-value and Holm over the matrix (BandExceedancePValue, HolmAdjust). It prints the
// fraction of matrices whose matrix verdict calls the changed cell slower, with its
// Clopper–Pearson 95 % interval, against the plan's 80 %; and the A/A false-gate rate.
//
//   ladder-bench-power --matrix matrices/examples/demo-cpu.yaml --session-sd 3 --process-sd 1
//     --round-sd 0.5 --interaction-sd 1   (one command)
//   ladder-bench-power --matrix matrices/examples/gate-200-cpu.yaml --session-sd 1
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ladder/matrices/matrix.h"
#include "ladder/report/plan.h"
#include "ladder/stats/compare.h"
#include "ladder/stats/ratio.h"
#include "ladder/stats/sample.h"
#include "robustness.h"

namespace {

using ladder::stats::Observation;

// A share with its Clopper–Pearson 95 % interval (tests/stats/robustness.h, as the coverage
// bench prints it).
std::string ProportionText(int k, int n) {
  const auto p = ladder::stats::testing::ClopperPearson(k, n);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f %% [%.1f, %.1f]", 100 * p.estimate, 100 * p.lower,
                100 * p.upper);
  return buf;
}

struct Spread {
  double session = 0, process = 0, round = 0, interaction = 0;
};

class Simulator {
 public:
  Simulator(uint64_t seed, Spread spread, int sessions, int processes, int rounds)
      : rng_(seed), s_(spread), sessions_(sessions), processes_(processes), rounds_(rounds) {}

  // One arm's observations in session s with the session's effect `u` and log shift `shift`.
  void Arm(std::vector<Observation>& out, int64_t session, double u, double shift) {
    const double arm = s_.interaction * z_(rng_);
    for (int p = 0; p < processes_; ++p) {
      const double proc = s_.process * z_(rng_);
      for (int r = 0; r < rounds_; ++r) {
        out.push_back(
            {session, p, r, 100.0 * std::exp(shift + u + arm + proc + s_.round * z_(rng_))});
      }
    }
  }

  // Two runs of one cell: Welch's interval on their log session means.
  ladder::stats::Interval TwoRuns(double shift) {
    std::vector<double> means[2];
    for (int run = 0; run < 2; ++run) {
      for (int s = 0; s < sessions_; ++s) {
        std::vector<Observation> obs;
        const double u = s_.session * z_(rng_);
        // A cell of one run: no arm × session term (that is the session's effect on the cell).
        const double keep = s_.interaction;
        s_.interaction = 0;
        Arm(obs, s, u, run == 1 ? shift : 0.0);
        s_.interaction = keep;
        auto h = ladder::stats::BuildHierarchy(obs, ladder::stats::ValueDomain::kPositive);
        means[run].push_back(ladder::stats::SessionMean(h->sessions[0]));
      }
    }
    return *ladder::stats::UnpairedLogRatioInterval(means[0], means[1]);
  }

  // One paired comparison: both arms in every session.
  ladder::stats::Interval Paired(double shift) {
    ladder::stats::PairedSample sample;
    for (int s = 0; s < sessions_; ++s) {
      const double u = s_.session * z_(rng_);
      Arm(sample.a, s, u, 0.0);
      Arm(sample.b, s, u, shift);
    }
    return *ladder::stats::PairedRatioInterval(sample);
  }

 private:
  std::mt19937_64 rng_;
  std::normal_distribution<double> z_;
  Spread s_;
  int sessions_, processes_, rounds_;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Confirms by simulation the power of ladder plan's minimum detectable change."};
  std::string path = "matrices/examples/demo-cpu.yaml";
  Spread pct{3.0, 1.0, 0.5, 1.0};
  int experiments = 2000;
  uint64_t seed = 59;
  app.add_option("--matrix", path, "the matrix file");
  app.add_option("--session-sd", pct.session, "%, as ladder plan");
  app.add_option("--process-sd", pct.process, "%");
  app.add_option("--round-sd", pct.round, "%");
  app.add_option("--interaction-sd", pct.interaction, "% (paired matrices)");
  app.add_option("--experiments", experiments, "simulated matrices per row");
  app.add_option("--seed", seed);
  CLI11_PARSE(app, argc, argv);

  auto matrix = ladder::matrices::ParseMatrixFile(path);
  if (!matrix.ok()) {
    std::fprintf(stderr, "%s\n", std::string(matrix.status().message()).c_str());
    return 2;
  }
  ladder::report::PlanOptions options;
  options.session_sd = pct.session / 100;
  options.process_sd = pct.process / 100;
  options.round_sd = pct.round / 100;
  options.interaction_sd = pct.interaction / 100;
  auto plan = ladder::report::PlanMatrix(*matrix, nullptr, options);
  if (!plan.ok()) {
    std::fprintf(stderr, "%s\n", std::string(plan.status().message()).c_str());
    return 2;
  }
  const bool paired = plan->design == ladder::stats::PowerDesign::kPaired;
  const double mdc = plan->rows.front().matrix->up;
  const std::size_t m = plan->family;
  std::printf("%s: %s, %zu %s, %d sessions x %d processes x %d rounds; spread %s\n",
              plan->matrix_name.c_str(), paired ? "paired" : "two runs", m,
              paired ? "comparisons" : "cells", plan->sessions, plan->processes, plan->rounds,
              plan->source.c_str());
  std::printf(
      "ladder plan: MDC under the matrix verdict (Holm over %zu) +%.2f %%, per cell +%.2f %%\n", m,
      100 * mdc, 100 * plan->rows.front().per_cell->up);

  Simulator sim(seed,
                {pct.session / 100, pct.process / 100, pct.round / 100, pct.interaction / 100},
                plan->sessions, plan->processes, plan->rounds);
  const double h = options.threshold;
  // One matrix: cell 0 changed by `shift` (log), the rest not. Returns {cell 0 slower under the
  // matrix verdict, any cell slower or faster under it}.
  auto one_matrix = [&](double shift) {
    std::vector<ladder::stats::Interval> ratios;
    std::vector<double> p;
    for (std::size_t c = 0; c < m; ++c) {
      ratios.push_back(paired ? sim.Paired(c == 0 ? shift : 0.0)
                              : sim.TwoRuns(c == 0 ? shift : 0.0));
      p.push_back(ladder::stats::BandExceedancePValue(ratios.back(), h));
    }
    const std::vector<double> holm = ladder::stats::HolmAdjust(p);
    bool any = false;
    for (std::size_t c = 0; c < m; ++c) {
      const auto cls = ladder::stats::ClassifyChange(ratios[c], h);
      any |= holm[c] < 0.05 && (cls == ladder::stats::ChangeClass::kAbove ||
                                cls == ladder::stats::ChangeClass::kBelow);
    }
    const bool hit = holm[0] < 0.05 && ladder::stats::ClassifyChange(ratios[0], h) ==
                                           ladder::stats::ChangeClass::kAbove;
    return std::make_pair(hit, any);
  };
  int hits = 0, false_gates = 0;
  for (int e = 0; e < experiments; ++e) hits += one_matrix(std::log1p(mdc)).first;
  for (int e = 0; e < experiments; ++e) false_gates += one_matrix(0.0).second;
  const double mc = 2 * std::sqrt(0.8 * 0.2 / experiments);
  std::printf(
      "simulated (%d matrices each): power at the MDC %s (plan: %.0f %%, Monte-Carlo 2 sd "
      "±%.1f points); A/A matrices with any slower/faster %s\n",
      experiments, ProportionText(hits, experiments).c_str(), 100 * options.power, 100 * mc,
      ProportionText(false_gates, experiments).c_str());
  return 0;
}
