// Every interval method earns its place by measured coverage: simulated paired experiments of
// known truth, for 2, 3, 5 and 10 sessions, in three scenarios (no arm × session interaction,
// a 1 % interaction, and A/A: two identical arms with the 1 % interaction's noise), and the
// unpaired comparison of two runs that `ladder compare` uses. The printed table is the one in
// docs/statistics.md ("Measured coverage").
//
// Fixed seeds make every figure reproducible; the assertions leave room for ±1–1.5 points of
// Monte-Carlo error (2000 experiments: the binomial sd at 95 % is 0.49 points) and for a change of
// seed, so they cannot flake, yet they fail if a method is off by a few points.
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/stats/compare.h"
#include "ladder/stats/ratio.h"
#include "simulate.h"

namespace ladder::stats {
namespace {

const testing::LevelSds kSds{.session = 0.03, .process = 0.01, .round = 0.005};
constexpr int kExperiments = 2000;
constexpr int kDraws = 1000;

enum class Scenario { kNoInteraction, kInteraction, kAA };

struct Coverage {
  double t = 0, bootstrap = 0, fieller = 0;
};

Coverage Simulate(Scenario scenario, int sessions, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const double truth = scenario == Scenario::kAA ? 1.0 : 0.7;
  const double interaction = scenario == Scenario::kNoInteraction ? 0.0 : 0.01;
  int t = 0, boot = 0, fieller = 0;
  for (int e = 0; e < kExperiments; ++e) {
    const PairedSample sample = testing::SimulatePaired(
        rng, 50.0, truth, kSds, interaction, {.sessions = sessions, .processes = 3, .rounds = 10});
    absl::StatusOr<Interval> ti = PairedRatioInterval(sample);
    absl::StatusOr<Interval> bi = BootstrapRatioInterval(
        sample, {.draws = kDraws, .seed = static_cast<std::uint64_t>(e) + 1});
    absl::StatusOr<Interval> fi = FiellerRatioInterval(sample);
    EXPECT_TRUE(ti.ok() && bi.ok() && fi.ok());
    if (!ti.ok() || !bi.ok() || !fi.ok()) return {};
    t += ti->Contains(truth);
    boot += bi->Contains(truth);
    fieller += fi->Contains(truth);
  }
  const double n = kExperiments;
  return {t / n, boot / n, fieller / n};
}

const char* Name(Scenario s) {
  switch (s) {
    case Scenario::kNoInteraction:
      return "no interaction";
    case Scenario::kInteraction:
      return "1 % interaction";
    case Scenario::kAA:
      return "A/A (1 % interaction)";
  }
  return "";
}

TEST(Coverage, PairedRatioMethodsAcrossSessionsAndScenarios) {
  std::printf(
      "\n| scenario | sessions | log-t | bootstrap (t-calibrated) | Fieller |\n"
      "| --- | --- | --- | --- | --- |\n");
  std::uint64_t seed = 100;
  for (Scenario scenario : {Scenario::kNoInteraction, Scenario::kInteraction, Scenario::kAA}) {
    for (int sessions : {2, 3, 5, 10}) {
      const Coverage c = Simulate(scenario, sessions, ++seed);
      const bool aa = scenario == Scenario::kAA;
      // For A/A the figure is the false-positive rate: 1 − coverage of ratio 1.
      std::printf("| %s | %d | %.1f %% | %.1f %% | %.1f %% |\n", Name(scenario), sessions,
                  100 * (aa ? 1 - c.t : c.t), 100 * (aa ? 1 - c.bootstrap : c.bootstrap),
                  100 * (aa ? 1 - c.fieller : c.fieller));
      // The t interval is exact for normal ℓ at every n; Fieller nearly so.
      EXPECT_NEAR(c.t, 0.95, 0.02) << Name(scenario) << ", " << sessions;
      EXPECT_NEAR(c.fieller, 0.95, 0.025) << Name(scenario) << ", " << sessions;
      // The bar for the bootstrap: within 2 points of 95 % with 5 sessions and the
      // interaction (it was 89 %, and 9.5 % false positives in A/A); we hold it to that from 3
      // sessions on, and to "not below 90 %" at 2, where 4 resamples are all there are.
      if (sessions >= 3) {
        EXPECT_NEAR(c.bootstrap, 0.95, 0.02) << Name(scenario) << ", " << sessions;
      } else {
        EXPECT_GT(c.bootstrap, 0.90) << Name(scenario) << ", " << sessions;
      }
    }
  }
}

// What the fix replaced: the percentile interval over all levels, at 5 sessions with the
// interaction (the issue measured ~89 %).
TEST(Coverage, UncalibratedPercentileBootstrapUnderCovers) {
  std::mt19937_64 rng(7);
  constexpr int kRuns = 1000;
  int all_levels = 0, sessions_only = 0;
  for (int e = 0; e < kRuns; ++e) {
    const PairedSample sample = testing::SimulatePaired(
        rng, 50.0, 0.7, kSds, 0.01, {.sessions = 5, .processes = 3, .rounds = 10});
    const auto seed = static_cast<std::uint64_t>(e) + 1;
    all_levels += BootstrapRatioInterval(sample, {.draws = 500,
                                                  .seed = seed,
                                                  .levels = BootstrapLevels::kAllLevels,
                                                  .calibration = BootstrapCalibration::kPercentile})
                      ->Contains(0.7);
    sessions_only +=
        BootstrapRatioInterval(
            sample, {.draws = 500, .seed = seed, .calibration = BootstrapCalibration::kPercentile})
            ->Contains(0.7);
  }
  const double a = static_cast<double>(all_levels) / kRuns;
  const double s = static_cast<double>(sessions_only) / kRuns;
  std::printf(
      "[coverage] uncalibrated percentile bootstrap, 5 sessions, 1 %% interaction: all "
      "levels %.1f %%, sessions only %.1f %%\n",
      100 * a, 100 * s);
  EXPECT_LT(a, 0.93);
  EXPECT_LT(s, 0.90);
}

// `ladder compare`: two independent runs of the same cell (different machines: the 3 % session
// effect does not cancel), Welch on the log session means. Coverage of the true ratio, and the
// verdict rates of an A/A pair and of planted changes against the ±2 % band.
TEST(Coverage, UnpairedComparisonOfTwoRuns) {
  std::printf(
      "\n| sessions per run | coverage | A/A: no change | A/A: slower or faster | "
      "+5 %%: slower | +20 %%: slower |\n| --- | --- | --- | --- | --- | --- |\n");
  std::mt19937_64 rng(300);
  std::normal_distribution<double> z(0.0, 1.0);
  // One run's session means of a cell: 3 % between sessions, and the within-session noise of a
  // mean over 3 processes × 10 rounds.
  const double within = std::sqrt(kSds.process * kSds.process / 3 + kSds.round * kSds.round / 30);
  const auto run = [&](int sessions, double mean, double session_sd) {
    std::vector<double> out;
    for (int s = 0; s < sessions; ++s) {
      out.push_back(mean * std::exp(session_sd * z(rng) + within * z(rng)));
    }
    return out;
  };
  for (int sessions : {3, 5, 10}) {
    int covered = 0, aa_same = 0, aa_false = 0, five = 0, twenty = 0;
    for (int e = 0; e < kExperiments; ++e) {
      const auto a = run(sessions, 100.0, kSds.session);
      const auto b = run(sessions, 100.0, kSds.session);
      absl::StatusOr<Interval> r = UnpairedLogRatioInterval(a, b);
      ASSERT_TRUE(r.ok()) << r.status();
      covered += r->Contains(1.0);
      const ChangeClass c = ClassifyChange(*r, 0.02);
      aa_same += c == ChangeClass::kWithin;
      aa_false += c == ChangeClass::kAbove || c == ChangeClass::kBelow;
      // Planted slowdowns, with a fleet quiet enough to see them (0.5 % between sessions).
      const auto base = run(sessions, 100.0, 0.005);
      five += ClassifyChange(*UnpairedLogRatioInterval(base, run(sessions, 105.0, 0.005)), 0.02) ==
              ChangeClass::kAbove;
      twenty += ClassifyChange(*UnpairedLogRatioInterval(base, run(sessions, 120.0, 0.005)),
                               0.02) == ChangeClass::kAbove;
    }
    const double n = kExperiments;
    std::printf("| %d | %.1f %% | %.1f %% | %.1f %% | %.1f %% | %.1f %% |\n", sessions,
                100 * covered / n, 100 * aa_same / n, 100 * aa_false / n, 100 * five / n,
                100 * twenty / n);
    EXPECT_NEAR(covered / n, 0.95, 0.02) << sessions;
    // A verdict of slower or faster needs the whole interval beyond ±2 %: rarer than 2.5 %.
    EXPECT_LT(aa_false / n, 0.025) << sessions;
    if (sessions >= 5) {
      EXPECT_GT(twenty / n, 0.99) << sessions;
    }
  }
}

}  // namespace
}  // namespace ladder::stats
