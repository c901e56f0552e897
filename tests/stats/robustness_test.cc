// Issue 50: the intervals on session means when the rounds are not clean log-normal.
//
// Contamination (1 % or 5 % of rounds × 1.5 or × 3, independently per round, in both arms) and a
// linear drift within the session (× (1 + g·t) over the session's measurements in the order the
// runners take them: interleaved per round, or one arm's rounds after the other's per process;
// robustness.h says which runner does which). Base scenario as coverage_test.cc: session sd 3 %,
// process 1 %, round 0.5 %, 3 processes × 10 rounds, 1 % arm × session interaction; true ratio 0.7
// and A/A; 3, 5 and 10 sessions; 2000 experiments per row, fixed seeds. Each figure is printed
// with its Clopper–Pearson 95 % interval (Monte-Carlo error at 95 %: about ±1 point).
//
// The assertions: no disturbance a runner can produce costs the log-t interval more than 2 points
// of coverage (≥ 93 %) or lifts A/A false positives above 7 %; the clean rows are within 2 points
// of 95 %; and the design no runner uses (A always first under a 5 % drift) fails at 10 sessions,
// so the drift is large enough to be seen. bench/coverage_bench.cc prints the same tables (and
// the adaptive-stopping ones) with any number of experiments.
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "robustness.h"

namespace ladder::stats {
namespace {

constexpr int kExperiments = 2000;

TEST(Robustness, PairedLogTOnSessionMeansUnderContaminationAndDrift) {
  std::printf(
      "\n| disturbance | sessions | coverage of 0.7 [CP 95 %%] | A/A false positives [CP 95 %%] "
      "| median half-width |\n| --- | --- | --- | --- | --- |\n");
  std::uint64_t seed = 5000;
  for (const testing::NamedDisturbance& s : testing::RobustnessScenarios()) {
    for (int sessions : {3, 5, 10}) {
      const testing::RobustnessRow row =
          testing::PairedRobustnessRow(s.d, sessions, kExperiments, ++seed);
      std::printf("| %s | %d | %s | %s | %.2f %% |\n", s.name, sessions,
                  testing::PercentWithInterval(row.covered, kExperiments).c_str(),
                  testing::PercentWithInterval(row.false_positives, kExperiments).c_str(),
                  100 * row.median_half_width);
      EXPECT_EQ(row.failed, 0) << s.name << ", " << sessions;
      const double coverage = static_cast<double>(row.covered) / kExperiments;
      const double fp = static_cast<double>(row.false_positives) / kExperiments;
      if (s.bad) {
        if (sessions == 10) {
          EXPECT_LT(coverage, 0.90) << s.name;
        }
        continue;
      }
      EXPECT_GE(coverage, 0.93) << s.name << ", " << sessions;
      EXPECT_LE(fp, 0.07) << s.name << ", " << sessions;
      if (std::string(s.name) == "clean") {
        EXPECT_NEAR(coverage, 0.95, 0.02) << sessions;
        EXPECT_NEAR(fp, 0.05, 0.02) << sessions;
      }
    }
  }
}

TEST(Robustness, UnpairedComparisonUnderContaminationAndDrift) {
  std::printf(
      "\n| disturbance (both runs) | sessions per run | coverage of 0.7 [CP 95 %%] | A/A false "
      "positives [CP 95 %%] | median half-width |\n| --- | --- | --- | --- | --- |\n");
  std::uint64_t seed = 6000;
  for (const testing::NamedDisturbance& s : testing::RobustnessScenarios()) {
    if (s.bad || s.d.order == testing::ArmOrder::kArmBlocks) continue;  // one cell: no arm order
    for (int sessions : {3, 5, 10}) {
      const testing::RobustnessRow row =
          testing::UnpairedRobustnessRow(s.d, sessions, kExperiments, ++seed);
      std::printf("| %s | %d | %s | %s | %.2f %% |\n", s.name, sessions,
                  testing::PercentWithInterval(row.covered, kExperiments).c_str(),
                  testing::PercentWithInterval(row.false_positives, kExperiments).c_str(),
                  100 * row.median_half_width);
      EXPECT_EQ(row.failed, 0) << s.name << ", " << sessions;
      EXPECT_GE(static_cast<double>(row.covered) / kExperiments, 0.93) << s.name << sessions;
      EXPECT_LE(static_cast<double>(row.false_positives) / kExperiments, 0.07)
          << s.name << ", " << sessions;
    }
  }
}

TEST(Robustness, ClopperPearsonMatchesKnownValues) {
  // Beta quantiles from mpmath (30 digits), as R's binom.test(95, 100)$conf.int and
  // binom.test(0, 10)$conf.int give them: 0.8871651 0.9835681; 0 0.3084971.
  const testing::Proportion p = testing::ClopperPearson(95, 100);
  EXPECT_NEAR(p.lower, 0.8871651, 1e-6);
  EXPECT_NEAR(p.upper, 0.9835681, 1e-6);
  const testing::Proportion z = testing::ClopperPearson(0, 10);
  EXPECT_EQ(z.lower, 0.0);
  EXPECT_NEAR(z.upper, 0.3084971, 1e-6);
  const testing::Proportion all = testing::ClopperPearson(10, 10);
  EXPECT_NEAR(all.lower, 1 - 0.3084971, 1e-6);
  EXPECT_EQ(all.upper, 1.0);
}

}  // namespace
}  // namespace ladder::stats
