// Simulated measurements that are not clean log-normal, for the robustness measurements of issue
// 50 (tests/stats/robustness_test.cc and bench/coverage_bench.cc): contaminated rounds, a linear
// drift within a session in the order ladder's runners measure the two arms, and the
// Clopper–Pearson interval every coverage figure is reported with.
//
// The order of the arms inside one session (one unit of a paired cell group):
//   kInterleaved   process-major; in each round the unit's cells are visited in a seeded random
//                  order (runner::InterleavedOrder, runner/src/order.cc): the kernel runner
//                  (agent/src/kernel_runner.cc) and the engine runner with arm_residency
//                  `together` (engines/src/engine_runner.cc, RunProcessTogether; the default for
//                  the synthetic and external engines).
//   kArmBlocks     process-major; in each process the arms run one after the other, all rounds of
//                  one arm, then all rounds of the other, the arm order drawn per process
//                  (InterleavedOrder(arms, seed, p, -1)): the engine runner with arm_residency
//                  `one_at_a_time` (RunProcessOneAtATime), the default for vllm, sglang and
//                  llama.cpp.
//   kFixedAThenB   as kArmBlocks with A always first: no runner does this; it is the deliberately
//                  bad design the drift measurement is checked against.
// The permutations are drawn from the simulation's generator: InterleavedOrder is a uniform
// Fisher–Yates shuffle per (unit seed, process, round), and every session has its own unit seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/stats/compare.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/ratio.h"
#include "ladder/stats/sample.h"
#include "simulate.h"

namespace ladder::stats::testing {

enum class ArmOrder { kInterleaved, kArmBlocks, kFixedAThenB };

struct Disturbance {
  double contamination = 0.0;  // fraction of rounds multiplied by `factor`, independently
  double factor = 1.0;
  double drift = 0.0;  // g: a round's value × (1 + g·t), t = position / (N − 1) in the session
  ArmOrder order = ArmOrder::kInterleaved;
};

// Like SimulatePaired (simulate.h): log(value) = log(mean) + u_s + w_as + v_asp + e_aspr, then
// the disturbance: each round × `factor` with probability `contamination`, and × (1 + g·t) where
// t ∈ [0, 1] is the round's position among the session's 2·processes·rounds measurements in the
// order `order`. Arm A has process ids 0.., arm B 100..; round ids 0.. within each process.
inline PairedSample SimulatePairedDisturbed(std::mt19937_64& rng, double mean_a, double ratio,
                                            LevelSds sd, double interaction, Design design,
                                            const Disturbance& d) {
  std::normal_distribution<double> z(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  PairedSample out;
  struct Slot {
    int arm, process, round;
  };
  std::vector<Slot> sequence;
  std::vector<double> value;
  sequence.reserve(static_cast<std::size_t>(2 * design.processes * design.rounds));
  for (int s = 0; s < design.sessions; ++s) {
    const double u = sd.session * z(rng);
    // [arm][process][round] before the disturbance.
    const auto at = [&](int arm, int p, int r) {
      return static_cast<std::size_t>((arm * design.processes + p) * design.rounds + r);
    };
    value.assign(static_cast<std::size_t>(2 * design.processes * design.rounds), 0.0);
    for (int arm = 0; arm < 2; ++arm) {
      const double w = interaction * z(rng);
      const double mean = arm == 0 ? mean_a : mean_a * ratio;
      for (int p = 0; p < design.processes; ++p) {
        const double v = sd.process * z(rng);
        for (int r = 0; r < design.rounds; ++r) {
          value[at(arm, p, r)] = mean * std::exp(u + w + v + sd.round * z(rng));
        }
      }
    }
    // The session's time order.
    sequence.clear();
    for (int p = 0; p < design.processes; ++p) {
      if (d.order == ArmOrder::kInterleaved) {
        for (int r = 0; r < design.rounds; ++r) {
          const int first = unif(rng) < 0.5 ? 0 : 1;
          sequence.push_back({first, p, r});
          sequence.push_back({1 - first, p, r});
        }
      } else {
        const int first = d.order == ArmOrder::kFixedAThenB ? 0 : (unif(rng) < 0.5 ? 0 : 1);
        for (int arm : {first, 1 - first}) {
          for (int r = 0; r < design.rounds; ++r) sequence.push_back({arm, p, r});
        }
      }
    }
    const double last = static_cast<double>(sequence.size() - 1);
    for (std::size_t k = 0; k < sequence.size(); ++k) {
      const Slot& slot = sequence[k];
      double x = value[at(slot.arm, slot.process, slot.round)];
      if (d.contamination > 0 && unif(rng) < d.contamination) x *= d.factor;
      x *= 1.0 + d.drift * static_cast<double>(k) / last;
      (slot.arm == 0 ? out.a : out.b).push_back({s, slot.arm * 100 + slot.process, slot.round, x});
    }
  }
  return out;
}

// The session means of one run of one cell (the units of `ladder compare`), with the same
// disturbance on the cell's processes × rounds in their time order (process-major; a drift over
// the cell's own rounds, which every run of the cell shares).
inline std::vector<double> SimulateRunSessionMeans(std::mt19937_64& rng, double mean, LevelSds sd,
                                                   Design design, const Disturbance& d) {
  std::normal_distribution<double> z(0.0, 1.0);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::vector<double> out;
  const double last = static_cast<double>(design.processes * design.rounds - 1);
  for (int s = 0; s < design.sessions; ++s) {
    const double u = sd.session * z(rng);
    double session_sum = 0.0;
    int k = 0;
    for (int p = 0; p < design.processes; ++p) {
      const double v = sd.process * z(rng);
      double process_sum = 0.0;
      for (int r = 0; r < design.rounds; ++r, ++k) {
        double x = mean * std::exp(u + v + sd.round * z(rng));
        if (d.contamination > 0 && unif(rng) < d.contamination) x *= d.factor;
        x *= 1.0 + d.drift * static_cast<double>(k) / last;
        process_sum += x;
      }
      session_sum += process_sum / design.rounds;
    }
    out.push_back(session_sum / design.processes);
  }
  return out;
}

// The p-quantile of Beta(a, b), by bisection on the regularized incomplete beta function.
inline double BetaQuantile(double p, double a, double b) {
  double lo = 0.0, hi = 1.0;
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = 0.5 * (lo + hi);
    (RegularizedIncompleteBeta(a, b, mid) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// The Clopper–Pearson (exact) interval for a binomial proportion: `successes` of `trials`.
struct Proportion {
  double estimate = 0.0;
  double lower = 0.0;
  double upper = 1.0;
};

inline Proportion ClopperPearson(int successes, int trials, double confidence = 0.95) {
  const double alpha = 1.0 - confidence;
  const double k = successes;
  const double n = trials;
  Proportion out;
  out.estimate = trials > 0 ? k / n : 0.0;
  out.lower = successes == 0 ? 0.0 : BetaQuantile(alpha / 2, k, n - k + 1);
  out.upper = successes == trials ? 1.0 : BetaQuantile(1 - alpha / 2, k + 1, n - k);
  return out;
}

// One row of the robustness tables: coverage of the true ratio 0.7 and the A/A false-positive
// rate (the interval excludes 1 when both arms are the same), with the median relative
// half-width of the intervals at 0.7.
struct RobustnessRow {
  int covered = 0;          // of `experiments`, at ratio 0.7
  int false_positives = 0;  // of `experiments`, A/A
  int experiments = 0;
  int failed = 0;  // intervals that could not be computed (never expected)
  double median_half_width = 0.0;
};

inline double Median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The scenario of coverage_test.cc: session sd 3 %, process 1 %, round 0.5 %, 3 processes × 10
// rounds per arm and session, a 1 % arm × session interaction.
inline constexpr LevelSds kCoverageSds{.session = 0.03, .process = 0.01, .round = 0.005};
inline constexpr double kCoverageInteraction = 0.01;

// stats::PairedRatioInterval (log-t on per-session log ratios of session means) under `d`.
inline RobustnessRow PairedRobustnessRow(const Disturbance& d, int sessions, int experiments,
                                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  RobustnessRow row;
  row.experiments = experiments;
  std::vector<double> widths;
  const Design design{.sessions = sessions, .processes = 3, .rounds = 10};
  for (int e = 0; e < experiments; ++e) {
    for (double truth : {0.7, 1.0}) {
      const PairedSample sample =
          SimulatePairedDisturbed(rng, 50.0, truth, kCoverageSds, kCoverageInteraction, design, d);
      absl::StatusOr<Interval> ci = PairedRatioInterval(sample);
      if (!ci.ok()) {
        ++row.failed;
        continue;
      }
      if (truth == 1.0) {
        row.false_positives += !ci->Contains(1.0);
      } else {
        row.covered += ci->Contains(truth);
        widths.push_back(ci->RelativeHalfWidth());
      }
    }
  }
  row.median_half_width = Median(widths);
  return row;
}

// stats::UnpairedLogRatioInterval (Welch on log session means, `ladder compare`) between two
// independent runs of `sessions` sessions each, under `d` in both runs.
inline RobustnessRow UnpairedRobustnessRow(const Disturbance& d, int sessions, int experiments,
                                           std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  RobustnessRow row;
  row.experiments = experiments;
  std::vector<double> widths;
  const Design design{.sessions = sessions, .processes = 3, .rounds = 10};
  for (int e = 0; e < experiments; ++e) {
    for (double truth : {0.7, 1.0}) {
      const std::vector<double> a = SimulateRunSessionMeans(rng, 100.0, kCoverageSds, design, d);
      const std::vector<double> b =
          SimulateRunSessionMeans(rng, 100.0 * truth, kCoverageSds, design, d);
      absl::StatusOr<Interval> ci = UnpairedLogRatioInterval(a, b);
      if (!ci.ok()) {
        ++row.failed;
        continue;
      }
      if (truth == 1.0) {
        row.false_positives += !ci->Contains(1.0);
      } else {
        row.covered += ci->Contains(truth);
        widths.push_back(ci->RelativeHalfWidth());
      }
    }
  }
  row.median_half_width = Median(widths);
  return row;
}

// "95.1 % [94.1, 96.0]": a proportion in percent with its Clopper–Pearson 95 % interval.
inline std::string PercentWithInterval(int successes, int trials) {
  const Proportion p = ClopperPearson(successes, trials);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f %% [%.1f, %.1f]", 100 * p.estimate, 100 * p.lower,
                100 * p.upper);
  return buf;
}

struct NamedDisturbance {
  const char* name;
  Disturbance d;
  bool bad = false;  // a design no runner uses, expected to fail
};

// The rows of the robustness table: clean, four contaminations, drifts in the runners' two
// orders, and the fixed order as the deliberately bad design.
inline std::vector<NamedDisturbance> RobustnessScenarios() {
  return {
      {"clean", {}},
      {"1 % of rounds × 1.5", {.contamination = 0.01, .factor = 1.5}},
      {"5 % of rounds × 1.5", {.contamination = 0.05, .factor = 1.5}},
      {"1 % of rounds × 3", {.contamination = 0.01, .factor = 3.0}},
      {"5 % of rounds × 3", {.contamination = 0.05, .factor = 3.0}},
      {"drift 2 %, interleaved per round", {.drift = 0.02, .order = ArmOrder::kInterleaved}},
      {"drift 5 %, interleaved per round", {.drift = 0.05, .order = ArmOrder::kInterleaved}},
      {"drift 2 %, arm blocks per process", {.drift = 0.02, .order = ArmOrder::kArmBlocks}},
      {"drift 5 %, arm blocks per process", {.drift = 0.05, .order = ArmOrder::kArmBlocks}},
      {"drift 5 % + 5 % × 3, arm blocks",
       {.contamination = 0.05, .factor = 3.0, .drift = 0.05, .order = ArmOrder::kArmBlocks}},
      {"(bad) drift 5 %, A always first", {.drift = 0.05, .order = ArmOrder::kFixedAThenB}, true},
  };
}

}  // namespace ladder::stats::testing
