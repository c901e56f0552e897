#include "ladder/stats/ratio.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "ladder/stats/distributions.h"
#include "simulate.h"

namespace ladder::stats {
namespace {

constexpr double kTrueRatio = 0.7;
const testing::LevelSds kRatioSds{.session = 0.03, .process = 0.01, .round = 0.005};
constexpr double kInteraction = 0.01;

TEST(PairedRatioInterval, RecoversKnownRatio) {
  std::mt19937_64 rng(10);
  const PairedSample sample =
      testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                              {.sessions = 40, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> ci = PairedRatioInterval(sample);
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_NEAR(ci->estimate, kTrueRatio, 0.01 * kTrueRatio);
  EXPECT_TRUE(ci->Contains(kTrueRatio));
  EXPECT_EQ(ci->df, 39.0);
  EXPECT_EQ(ci->scope, IntervalScope::kBetweenSessions);
  // The session effect (3 %) cancels: the half-width reflects the ~1.6 % per-session sd of ℓ.
  EXPECT_LT(ci->RelativeHalfWidth(), 0.01);
}

TEST(PairedRatioInterval, SessionRatiosAreLogsOfArmMeans) {
  const PairedSample sample{
      .a = {{1, 1, 0, 10.0}, {1, 1, 1, 12.0}, {2, 1, 0, 20.0}},
      .b = {{1, 2, 0, 5.0}, {1, 3, 0, 7.0}, {2, 2, 0, 30.0}},
  };
  absl::StatusOr<std::vector<SessionRatio>> r = SessionRatios(sample);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_DOUBLE_EQ((*r)[0].mean_a, 11.0);
  EXPECT_DOUBLE_EQ((*r)[0].mean_b, 6.0);
  EXPECT_NEAR((*r)[0].log_ratio, std::log(6.0 / 11.0), 1e-15);
  EXPECT_NEAR((*r)[1].log_ratio, std::log(1.5), 1e-15);
  // exp(mean ℓ ± t(1)·sd(ℓ)/√2).
  absl::StatusOr<Interval> ci = PairedRatioInterval(sample);
  ASSERT_TRUE(ci.ok());
  const double l1 = std::log(6.0 / 11.0);
  const double l2 = std::log(1.5);
  const double m = 0.5 * (l1 + l2);
  const double se = std::fabs(l1 - l2) / std::sqrt(2.0) / std::sqrt(2.0);
  EXPECT_NEAR(ci->estimate, std::exp(m), 1e-12);
  EXPECT_NEAR(ci->upper, std::exp(m + 12.7062047 * se), 1e-6 * ci->upper);
}

TEST(PairedRatioInterval, OneSessionCoversOnlyWithinSessionNoise) {
  std::mt19937_64 rng(11);
  const PairedSample sample =
      testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                              {.sessions = 1, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> ci = PairedRatioInterval(sample);
  ASSERT_TRUE(ci.ok()) << ci.status();
  EXPECT_EQ(ci->scope, IntervalScope::kWithinSessionOnly);
  EXPECT_EQ(ci->note, kWithinSessionNote);
  EXPECT_GT(ci->df, 2.0);  // Welch over 3 + 3 process means
  EXPECT_LE(ci->df, 4.0);
  absl::StatusOr<Interval> boot =
      BootstrapRatioInterval(sample, {.draws = 500, .levels = BootstrapLevels::kAllLevels});
  ASSERT_TRUE(boot.ok()) << boot.status();
  EXPECT_EQ(boot->note, kWithinSessionNote);
  EXPECT_TRUE(std::isnan(boot->df));
  // The default resamples sessions: one session has nothing to resample.
  EXPECT_EQ(BootstrapRatioInterval(sample, {.draws = 500}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<Interval> fieller = FiellerRatioInterval(sample);
  ASSERT_TRUE(fieller.ok());
  EXPECT_EQ(fieller->scope, IntervalScope::kWithinSessionOnly);
}

TEST(PairedRatioInterval, RejectsUnpairedSessionsAndNonPositiveValues) {
  const PairedSample unpaired{.a = {{1, 1, 0, 1.0}, {2, 1, 0, 1.0}}, .b = {{1, 2, 0, 1.0}}};
  absl::StatusOr<Interval> ci = PairedRatioInterval(unpaired);
  EXPECT_EQ(ci.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ci.status().message().find("session 2"), std::string::npos) << ci.status();
  const PairedSample zero{.a = {{1, 1, 0, 0.0}}, .b = {{1, 2, 0, 1.0}}};
  EXPECT_EQ(PairedRatioInterval(zero).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PairedRatioInterval({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// The heart of the matter: over 1000 simulated experiments of 5 sessions the paired t interval
// covers the true ratio at about its nominal 95 %; the same data pooled as independent
// iterations covers far less.
TEST(PairedRatioInterval, CoverageIsNominalAndPoolingUnderCovers) {
  std::mt19937_64 rng(12);
  constexpr int kExperiments = 1000;
  int covered = 0;
  int fieller_covered = 0;
  int naive_covered = 0;
  for (int e = 0; e < kExperiments; ++e) {
    const PairedSample sample =
        testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                                {.sessions = 5, .processes = 3, .rounds = 10});
    absl::StatusOr<Interval> ci = PairedRatioInterval(sample);
    ASSERT_TRUE(ci.ok());
    covered += ci->Contains(kTrueRatio);
    absl::StatusOr<Interval> f = FiellerRatioInterval(sample);
    ASSERT_TRUE(f.ok());
    fieller_covered += f->Contains(kTrueRatio);
    const testing::Bounds naive = testing::NaivePooledRatioInterval(sample);
    naive_covered += naive.lower <= kTrueRatio && kTrueRatio <= naive.upper;
  }
  const double coverage = static_cast<double>(covered) / kExperiments;
  const double fieller = static_cast<double>(fieller_covered) / kExperiments;
  const double naive = static_cast<double>(naive_covered) / kExperiments;
  std::printf("[coverage] paired ratio, 5 sessions: log-t %.3f, Fieller %.3f, pooled %.3f\n",
              coverage, fieller, naive);
  EXPECT_NEAR(coverage, 0.95, 0.03);
  EXPECT_NEAR(fieller, 0.95, 0.03);
  EXPECT_LT(naive, 0.85);
}

TEST(BootstrapRatioInterval, SaneAndDeterministic) {
  std::mt19937_64 rng(13);
  const PairedSample sample =
      testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                              {.sessions = 20, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> t = PairedRatioInterval(sample);
  absl::StatusOr<Interval> boot = BootstrapRatioInterval(sample, {.draws = 2000});
  absl::StatusOr<Interval> again = BootstrapRatioInterval(sample, {.draws = 2000});
  absl::StatusOr<Interval> all =
      BootstrapRatioInterval(sample, {.draws = 2000, .levels = BootstrapLevels::kAllLevels});
  ASSERT_TRUE(t.ok() && boot.ok() && again.ok() && all.ok());
  EXPECT_EQ(boot->lower, again->lower);
  EXPECT_EQ(boot->upper, again->upper);
  EXPECT_DOUBLE_EQ(boot->estimate, t->estimate);
  EXPECT_EQ(boot->df, 19.0);  // t-calibrated over 20 sessions
  EXPECT_EQ(boot->estimand, t->estimand);
  for (const Interval* ci : {&*boot, &*all}) {
    EXPECT_LT(ci->lower, ci->estimate);
    EXPECT_GT(ci->upper, ci->estimate);
    EXPECT_TRUE(ci->Contains(kTrueRatio));
    const double width_ratio = (ci->upper - ci->lower) / (t->upper - t->lower);
    EXPECT_GT(width_ratio, 0.8);
    EXPECT_LT(width_ratio, 2.0);
  }
  // Calibrated over sessions, the bootstrap is the t interval up to the resampling noise.
  EXPECT_NEAR(std::log(boot->upper / boot->lower), std::log(t->upper / t->lower),
              0.1 * std::log(t->upper / t->lower));
  std::printf(
      "[bootstrap] 20 sessions: t [%.4f, %.4f], t-calibrated [%.4f, %.4f], all levels "
      "[%.4f, %.4f]\n",
      t->lower, t->upper, boot->lower, boot->upper, all->lower, all->upper);
  EXPECT_EQ(BootstrapRatioInterval(sample, {.draws = 10}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// With two sessions the plain percentile interval is about ten times narrower than t(1)'s; the
// t-calibrated one is not.
TEST(BootstrapRatioInterval, TwoSessionsAreNotNarrowerThanTheyDeserve) {
  std::mt19937_64 rng(16);
  const PairedSample sample =
      testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                              {.sessions = 2, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> t = PairedRatioInterval(sample);
  absl::StatusOr<Interval> boot = BootstrapRatioInterval(sample, {.draws = 2000});
  absl::StatusOr<Interval> percentile = BootstrapRatioInterval(
      sample, {.draws = 2000, .calibration = BootstrapCalibration::kPercentile});
  ASSERT_TRUE(t.ok() && boot.ok() && percentile.ok());
  const double t_width = std::log(t->upper / t->lower);
  EXPECT_GT(std::log(boot->upper / boot->lower), 0.5 * t_width);
  EXPECT_LT(std::log(percentile->upper / percentile->lower), 0.2 * t_width);
  EXPECT_EQ(boot->df, 1.0);
  EXPECT_TRUE(std::isnan(percentile->df));
}

TEST(RatioIntervals, EachNamesItsEstimand) {
  std::mt19937_64 rng(17);
  const PairedSample sample =
      testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                              {.sessions = 5, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> t = PairedRatioInterval(sample);
  absl::StatusOr<Interval> f = FiellerRatioInterval(sample);
  ASSERT_TRUE(t.ok() && f.ok());
  EXPECT_EQ(t->estimand, "B/A: geometric mean of per-session ratios");
  EXPECT_EQ(f->estimand, "B/A: ratio of means of session means");
  // Different estimands, different estimates: Fieller's own is the ratio of the arms' means.
  absl::StatusOr<std::vector<SessionRatio>> r = SessionRatios(sample);
  ASSERT_TRUE(r.ok());
  double sa = 0, sb = 0;
  for (const SessionRatio& x : *r) sa += x.mean_a, sb += x.mean_b;
  EXPECT_NEAR(f->estimate, sb / sa, 1e-12);
  EXPECT_NE(f->estimate, t->estimate);
}

TEST(Fieller, AgreesWithDeltaMethodForPreciseDenominator) {
  std::mt19937_64 rng(15);
  const PairedSample sample =
      testing::SimulatePaired(rng, 50.0, kTrueRatio, kRatioSds, kInteraction,
                              {.sessions = 20, .processes = 3, .rounds = 10});
  absl::StatusOr<Interval> f = FiellerRatioInterval(sample);
  absl::StatusOr<Interval> d = DeltaRatioInterval(sample);
  ASSERT_TRUE(f.ok() && d.ok());
  EXPECT_EQ(f->bounds, Boundedness::kBounded);
  EXPECT_DOUBLE_EQ(f->estimate, d->estimate);
  EXPECT_NEAR(f->lower, d->lower, 2e-3 * d->estimate);
  EXPECT_NEAR(f->upper, d->upper, 2e-3 * d->estimate);
  EXPECT_TRUE(f->Contains(kTrueRatio));
}

TEST(Fieller, HandComputedAndUnbounded) {
  // N = 2, D = 4, var_N = var_D = 0.01, cov 0, t = 2:
  // ρ²(16 − 0.04) − 2ρ·8 + (4 − 0.04) = 0.
  const Interval f = FiellerQuotient({2.0, 4.0, 0.01, 0.01, 0.0}, 2.0);
  const double a = 15.96, b = 8.0, c = 3.96;
  EXPECT_NEAR(f.lower, (b - std::sqrt(b * b - a * c)) / a, 1e-14);
  EXPECT_NEAR(f.upper, (b + std::sqrt(b * b - a * c)) / a, 1e-14);
  EXPECT_DOUBLE_EQ(f.estimate, 0.5);
  // Denominator 0.1 ± 0.1: not significantly non-zero at t = 2.
  const Interval u = FiellerQuotient({2.0, 0.1, 0.01, 0.01, 0.0}, 2.0);
  EXPECT_EQ(u.bounds, Boundedness::kUnbounded);
  EXPECT_EQ(u.upper, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isinf(u.RelativeHalfWidth()));
}

TEST(Fieller, UnboundedRatioIntervalSaysWhy) {
  // Arm A's session means vary so much across three sessions that their mean is not
  // significantly different from zero: t(2)·se ≈ 14 > mean ≈ 3.3.
  const PairedSample sample{
      .a = {{1, 1, 0, 0.01}, {2, 1, 0, 10.0}, {3, 1, 0, 0.02}},
      .b = {{1, 2, 0, 1.0}, {2, 2, 0, 1.1}, {3, 2, 0, 0.9}},
  };
  absl::StatusOr<Interval> f = FiellerRatioInterval(sample);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->bounds, Boundedness::kUnbounded);
  EXPECT_NE(f->note.find("unbounded"), std::string::npos);
}

}  // namespace
}  // namespace ladder::stats
