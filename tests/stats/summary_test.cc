#include "ladder/stats/summary.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "simulate.h"

namespace ladder::stats {
namespace {

TEST(Summarize, KnownSample) {
  const std::vector<double> v = {4, 1, 3, 2, 10};
  absl::StatusOr<Summary> s = Summarize(v);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->n, 5u);
  EXPECT_DOUBLE_EQ(s->median, 3);
  EXPECT_DOUBLE_EQ(s->mean, 4);
  EXPECT_NEAR(s->sd, std::sqrt(12.5), 1e-12);
  EXPECT_NEAR(s->cv, std::sqrt(12.5) / 4, 1e-12);
  EXPECT_DOUBLE_EQ(s->min, 1);
  EXPECT_DOUBLE_EQ(s->max, 10);
}

TEST(Summarize, EvenCountMedianAndSingleValue) {
  const std::vector<double> even = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Summarize(even)->median, 2.5);
  const std::vector<double> one = {7};
  absl::StatusOr<Summary> s = Summarize(one);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(std::isnan(s->sd));
  EXPECT_TRUE(std::isnan(s->cv));
}

TEST(Summarize, RejectsEmptyAndNonFinite) {
  EXPECT_EQ(Summarize({}).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<double> bad = {1, NAN};
  EXPECT_EQ(Summarize(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CellMeanInterval, DegreesOfFreedomComeFromSessions) {
  std::mt19937_64 rng(1);
  const auto obs =
      testing::SimulateCell(rng, 100.0, {}, {.sessions = 5, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> ci = CellMeanInterval(obs);
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->df, 4.0);
  EXPECT_EQ(ci->n_units, 5u);
  EXPECT_EQ(ci->scope, IntervalScope::kBetweenSessions);
  EXPECT_TRUE(ci->note.empty());
  EXPECT_LT(ci->lower, ci->estimate);
  EXPECT_GT(ci->upper, ci->estimate);
}

TEST(CellMeanInterval, OneSessionSaysSo) {
  std::mt19937_64 rng(2);
  const auto obs =
      testing::SimulateCell(rng, 100.0, {}, {.sessions = 1, .processes = 4, .rounds = 10});
  absl::StatusOr<Interval> ci = CellMeanInterval(obs);
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->scope, IntervalScope::kWithinSessionOnly);
  EXPECT_EQ(ci->note, kWithinSessionNote);
  EXPECT_EQ(ci->df, 3.0);  // four process means
  EXPECT_EQ(ci->estimand, "geometric mean of process means");
  const std::vector<Observation> single = {{1, 1, 1, 5.0}};
  EXPECT_EQ(CellMeanInterval(single).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CellMeanInterval, RejectsDuplicatesAndBadConfidence) {
  const std::vector<Observation> dup = {{1, 1, 1, 5.0}, {1, 1, 1, 6.0}, {2, 1, 1, 5.0}};
  EXPECT_EQ(CellMeanInterval(dup).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<Observation> ok = {{1, 1, 1, 5.0}, {2, 1, 1, 6.0}};
  EXPECT_EQ(CellMeanInterval(ok, {.confidence = 1.0}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The first screen: two sessions of a time, 80 and 9000 µs apart, gave
// "95% CI [-14464, 17728]". Below three sessions there is now no interval but a note; from three
// on the interval is on the log scale, so no bound of a positive quantity is ever <= 0.
TEST(CellMeanInterval, PositiveQuantitiesGetPositiveIntervals) {
  const std::vector<Observation> two = {
      {1, 1, 0, 80.0}, {1, 1, 1, 82.0}, {2, 1, 0, 3000.0}, {2, 1, 1, 3100.0}};
  absl::StatusOr<Interval> none = CellMeanInterval(two);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().message(), "an interval needs at least 3 sessions; 2 measured");
  std::vector<Observation> three = two;
  three.push_back({3, 1, 0, 500.0});
  three.push_back({3, 1, 1, 520.0});
  absl::StatusOr<Interval> log_ci = CellMeanInterval(three);
  ASSERT_TRUE(log_ci.ok()) << log_ci.status();
  EXPECT_EQ(log_ci->estimand, "geometric mean of session means");
  EXPECT_EQ(log_ci->df, 2.0);
  EXPECT_GT(log_ci->lower, 0.0);
  const double geo = std::cbrt(81.0 * 3050.0 * 510.0);
  EXPECT_NEAR(log_ci->estimate, geo, 1e-9 * geo);
  // Symmetric on the log scale around the geometric mean.
  EXPECT_NEAR(log_ci->upper / log_ci->estimate, log_ci->estimate / log_ci->lower, 1e-9);
  // The arithmetic interval of the same data goes below zero: why it is not the default.
  absl::StatusOr<Interval> arith = CellMeanInterval(three, {.scale = MeanScale::kArithmetic});
  ASSERT_TRUE(arith.ok());
  EXPECT_LT(arith->lower, 0.0);
  EXPECT_EQ(arith->estimand, "mean of session means");
  // Asking for an interval from two sessions is possible, and then honest about df.
  absl::StatusOr<Interval> forced = CellMeanInterval(two, {.min_sessions = 2});
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ(forced->df, 1.0);
  EXPECT_GT(forced->lower, 0.0);
  // Values <= 0 fall back to the arithmetic scale under kAuto, and are refused under kLog.
  std::vector<Observation> signed_values = three;
  signed_values[0].value = -1.0;
  absl::StatusOr<Interval> fallback = CellMeanInterval(signed_values);
  ASSERT_TRUE(fallback.ok());
  EXPECT_EQ(fallback->estimand, "mean of session means");
  EXPECT_EQ(CellMeanInterval(signed_values, {.scale = MeanScale::kLog}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The per-cell interval covers the true mean at its nominal rate across 1000 simulated
// experiments of 5 sessions, while treating the 150 iterations as independent covers far less.
TEST(CellMeanInterval, CoverageIsNominalAndPoolingUnderCovers) {
  std::mt19937_64 rng(3);
  const testing::LevelSds sd{.session = 0.03, .process = 0.01, .round = 0.005};
  // E[value] for log-normal effects: the true mean of a session mean.
  const double truth =
      100.0 *
      std::exp(0.5 * (sd.session * sd.session + sd.process * sd.process + sd.round * sd.round));
  int covered = 0;
  int naive_covered = 0;
  constexpr int kExperiments = 1000;
  for (int e = 0; e < kExperiments; ++e) {
    const auto obs =
        testing::SimulateCell(rng, 100.0, sd, {.sessions = 5, .processes = 3, .rounds = 10});
    absl::StatusOr<Interval> ci = CellMeanInterval(obs);
    ASSERT_TRUE(ci.ok());
    covered += ci->Contains(truth);
    const testing::Bounds naive = testing::NaivePooledMeanInterval(obs);
    naive_covered += naive.lower <= truth && truth <= naive.upper;
  }
  const double coverage = static_cast<double>(covered) / kExperiments;
  const double naive = static_cast<double>(naive_covered) / kExperiments;
  std::printf("[coverage] cell mean, 5 sessions: session-level t %.3f, pooled iterations %.3f\n",
              coverage, naive);
  EXPECT_NEAR(coverage, 0.95, 0.03);
  EXPECT_LT(naive, 0.60);
}

}  // namespace
}  // namespace ladder::stats
