// Power before running: the noncentral t, the minimum detectable change under the band verdict
// and Holm, checked against simulation through the functions `ladder compare` judges with.
#include "ladder/stats/power.h"

#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/stats/compare.h"
#include "ladder/stats/distributions.h"

namespace ladder::stats {
namespace {

TEST(NoncentralTUpperTail, CentralCaseIsStudentT) {
  for (double df : {1.0, 2.0, 4.0, 8.0, 30.0, 1000.0}) {
    for (double c : {-1.0, 0.0, 1.5, 2.776, 6.0}) {
      EXPECT_NEAR(NoncentralTUpperTail(c, df, 0.0), 1.0 - StudentTCdf(c, df), 1e-9)
          << "df " << df << " c " << c;
    }
  }
  EXPECT_NEAR(NoncentralTUpperTail(1.0, INFINITY, 2.0), NormalCdf(1.0), 1e-15);
  EXPECT_TRUE(std::isnan(NoncentralTUpperTail(1.0, 0.0, 1.0)));
}

TEST(NoncentralTUpperTail, AgreesWithSimulation) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> z;
  for (double df : {2.0, 8.0}) {
    std::chi_squared_distribution<double> chi(df);
    const double c = 2.5, lambda = 2.0;
    const int n = 200000;
    int hits = 0;
    for (int i = 0; i < n; ++i) hits += (z(rng) + lambda) / std::sqrt(chi(rng) / df) > c;
    const double p = NoncentralTUpperTail(c, df, lambda);
    EXPECT_NEAR(static_cast<double>(hits) / n, p, 4 * std::sqrt(p * (1 - p) / n)) << "df " << df;
  }
}

// The fraction of simulated comparisons whose per-cell band test survives the bar a changed cell
// must beat under Holm over `family` cells, at the planned MDC: should be the wanted power.
double SimulatedPower(PowerDesign design, int sessions, double sd, double log_change,
                      const PowerOptions& o, int experiments, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sd);
  const double alpha = (1 - o.confidence) / static_cast<double>(o.family);
  int hits = 0;
  for (int e = 0; e < experiments; ++e) {
    Interval ratio;
    if (design == PowerDesign::kTwoRuns) {
      std::vector<double> a, b;
      for (int s = 0; s < sessions; ++s) {
        a.push_back(100 * std::exp(noise(rng)));
        b.push_back(100 * std::exp(log_change + noise(rng)));
      }
      ratio = *UnpairedLogRatioInterval(a, b, o.confidence);
    } else {
      // PairedRatioInterval's form over per-session log-ratios.
      std::vector<double> l;
      double mean = 0;
      for (int s = 0; s < sessions; ++s) mean += (l.emplace_back(log_change + noise(rng)));
      mean /= sessions;
      double ss = 0;
      for (double x : l) ss += (x - mean) * (x - mean);
      const double se = std::sqrt(ss / (sessions - 1) / sessions);
      const double t = TwoSidedT(o.confidence, sessions - 1.0);
      ratio.estimate = std::exp(mean);
      ratio.lower = std::exp(mean - t * se);
      ratio.upper = std::exp(mean + t * se);
      ratio.df = sessions - 1.0;
      ratio.confidence = o.confidence;
    }
    hits += ratio.lower > 1 + o.threshold && BandExceedancePValue(ratio, o.threshold) < alpha;
  }
  return static_cast<double>(hits) / experiments;
}

TEST(MinimumDetectableChange, SimulationConfirmsEightyPercent) {
  struct Case {
    PowerDesign design;
    int sessions;
    double sd;
    std::size_t family;
  };
  const int experiments = 4000;
  const double mc = 4 * std::sqrt(0.8 * 0.2 / experiments);  // 4 Monte-Carlo sd: ±2.5 points
  uint64_t seed = 1;
  for (const Case& c :
       {Case{PowerDesign::kTwoRuns, 3, 0.03, 1}, Case{PowerDesign::kTwoRuns, 5, 0.03, 12},
        Case{PowerDesign::kTwoRuns, 10, 0.01, 200}, Case{PowerDesign::kPaired, 3, 0.02, 1},
        Case{PowerDesign::kPaired, 5, 0.02, 6}}) {
    PowerOptions o;
    o.family = c.family;
    absl::StatusOr<DetectableChange> d = MinimumDetectableChange(c.design, c.sd, c.sessions, o);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_GT(d->up, o.threshold);
    EXPECT_GT(d->down, o.threshold);
    const double p =
        SimulatedPower(c.design, c.sessions, c.sd, std::log1p(d->up), o, experiments, seed++);
    EXPECT_NEAR(p, 0.80, mc) << "sessions " << c.sessions << " family " << c.family << " MDC "
                             << d->up;
  }
}

TEST(MinimumDetectableChange, FallsWithSessionsAndRisesWithTheFamily) {
  PowerOptions o;
  const double mdc3 = MinimumDetectableChange(PowerDesign::kTwoRuns, 0.03, 3, o)->up;
  const double mdc10 = MinimumDetectableChange(PowerDesign::kTwoRuns, 0.03, 10, o)->up;
  EXPECT_LT(mdc10, mdc3);
  o.family = 200;
  EXPECT_GT(MinimumDetectableChange(PowerDesign::kTwoRuns, 0.03, 10, o)->up, mdc10);
  // No noise: the band alone.
  EXPECT_NEAR(MinimumDetectableChange(PowerDesign::kPaired, 0.0, 5, o)->up, 0.02, 1e-12);
  EXPECT_EQ(MinimumDetectableChange(PowerDesign::kPaired, 0.01, 1, o).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MinimumDetectableChange(PowerDesign::kPaired, -1, 5, o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.power = 1.2;
  EXPECT_EQ(MinimumDetectableChange(PowerDesign::kPaired, 0.01, 5, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SessionsForChange, TheFirstSessionCountWhoseMdcMeetsTheTarget) {
  PowerOptions o;
  o.family = 12;
  absl::StatusOr<SessionsNeeded> n = SessionsForChange(PowerDesign::kTwoRuns, 0.03, 0.05, o);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_EQ(n->verdict, SessionsVerdict::kReachable);
  EXPECT_LE(MinimumDetectableChange(PowerDesign::kTwoRuns, 0.03, n->sessions, o)->up, 0.05);
  EXPECT_GT(MinimumDetectableChange(PowerDesign::kTwoRuns, 0.03, n->sessions - 1, o)->up, 0.05);
  // Inside the band is never a change.
  EXPECT_EQ(SessionsForChange(PowerDesign::kPaired, 0.01, 0.02, o)->verdict,
            SessionsVerdict::kExceedsMax);
  EXPECT_EQ(SessionsForChange(PowerDesign::kPaired, 0.5, 0.03, o, 20)->verdict,
            SessionsVerdict::kExceedsMax);
}

TEST(AchievedDetectableChange, ReadsTheStandardErrorBackFromTheInterval) {
  // A paired interval over 6 sessions with se 0.01 on the log scale.
  const double t = TwoSidedT(0.95, 5);
  Interval r;
  r.estimate = 1.0;
  r.lower = std::exp(-t * 0.01);
  r.upper = std::exp(t * 0.01);
  r.df = 5;
  r.n_units = 6;
  PowerOptions o;
  absl::StatusOr<DetectableChange> d = AchievedDetectableChange(r, o);
  ASSERT_TRUE(d.ok()) << d.status();
  absl::StatusOr<DetectableChange> planned =
      MinimumDetectableChange(PowerDesign::kPaired, 0.01 * std::sqrt(6.0), 6, o);
  EXPECT_NEAR(d->up, planned->up, 1e-9);
  EXPECT_NEAR(d->log_se, 0.01, 1e-12);
  r.bounds = Boundedness::kUnbounded;
  EXPECT_EQ(AchievedDetectableChange(r, o).status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace ladder::stats
