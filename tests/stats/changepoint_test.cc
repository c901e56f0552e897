#include "ladder/stats/changepoint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ladder::stats {
namespace {

// A series of `n` runs at level 0 on the log scale with a step of `step` from index `at`
// (n: none), each run's error N(0, se² + drift²), its reported se = `se`.
std::vector<SeriesPoint> Series(int n, int at, double step, double se, double drift,
                                uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<SeriesPoint> out;
  for (int i = 0; i < n; ++i) {
    const double e = normal(rng) * std::sqrt(se * se + drift * drift);
    out.push_back({(i >= at ? step : 0.0) + e, se});
  }
  return out;
}

TEST(ChangePoint, APlantedStepIsFoundAtItsRun) {
  auto series = Series(10, 6, std::log(1.20), 0.01, 0.0, 1);
  auto cp = FindChangePoint(series);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE(cp->detected);
  EXPECT_EQ(cp->index, 6u);
  EXPECT_EQ(cp->plausible, std::vector<std::size_t>{6});
  EXPECT_NEAR(cp->step, std::log(1.20), 0.03);
  EXPECT_LT(cp->p_value, 0.05);
}

TEST(ChangePoint, DriftTheIntervalsDoNotSeeIsEstimatedNotAlarmedOn) {
  // Each run claims ±1 % but runs scatter by 5 %: a test that trusted the intervals would
  // alarm; the drift is estimated from the series instead.
  int alarms = 0;
  double drift_sum = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    auto cp = FindChangePoint(Series(12, 12, 0.0, 0.01, 0.05, seed), {.seed = seed});
    ASSERT_TRUE(cp.ok());
    alarms += cp->detected;
    drift_sum += cp->drift_sd_null;
  }
  EXPECT_LE(alarms, 6);  // nominal 5 % of 40 = 2; a binomial 99.9 % bound is 7
  EXPECT_NEAR(drift_sum / 40, 0.05, 0.015);
}

TEST(ChangePoint, AStepWithinTheDriftIsNotLocated) {
  auto series = Series(6, 3, std::log(1.01), 0.02, 0.03, 7);
  auto cp = FindChangePoint(series);
  ASSERT_TRUE(cp.ok());
  EXPECT_FALSE(cp->detected);
}

TEST(ChangePoint, OverlappingRunsLeaveSeveralPlausibleIndexes) {
  // A step whose size is near each run's error: where it began cannot be told to one run.
  std::vector<SeriesPoint> series = {{0.00, 0.02}, {0.01, 0.02}, {0.00, 0.02},
                                     {0.02, 0.02}, {0.04, 0.02}, {0.05, 0.02}};
  auto cp = FindChangePoint(series);
  ASSERT_TRUE(cp.ok());
  EXPECT_GT(cp->plausible.size(), 1u);
}

TEST(ChangePoint, TooFewRunsOrBadInputAreRefusedWithTheReason) {
  std::vector<SeriesPoint> two = {{0, 0.01}, {0.5, 0.01}};
  auto cp = FindChangePoint(two);
  EXPECT_EQ(cp.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(std::string(cp.status().message()).find("at least 3 runs"), std::string::npos);
  std::vector<SeriesPoint> bad = {{0, 0.01}, {NAN, 0.01}, {0, 0.01}};
  EXPECT_EQ(FindChangePoint(bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FindChangePoint(two, {.alpha = 0}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChangePoint, TheSameSeedGivesTheSameAnswer) {
  auto series = Series(8, 5, 0.1, 0.02, 0.01, 3);
  auto a = FindChangePoint(series, {.seed = 9});
  auto b = FindChangePoint(series, {.seed = 9});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->p_value, b->p_value);
  EXPECT_EQ(a->index, b->index);
}

}  // namespace
}  // namespace ladder::stats
