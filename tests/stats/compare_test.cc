// The between-runs comparison behind `ladder compare`: Welch on log session means, and the
// verdict band.
#include "ladder/stats/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "ladder/stats/distributions.h"

namespace ladder::stats {
namespace {

TEST(UnpairedLogRatioInterval, WelchOnLogSessionMeans) {
  const std::vector<double> a = {100, 102, 98};
  const std::vector<double> b = {110, 108, 113, 111};
  absl::StatusOr<Interval> r = UnpairedLogRatioInterval(a, b);
  ASSERT_TRUE(r.ok()) << r.status();
  // By hand: y = log values; diff of means; se² = s²_a/3 + s²_b/4; Welch df.
  auto moments = [](const std::vector<double>& v, double& m, double& var) {
    m = 0;
    for (double x : v) m += std::log(x);
    m /= static_cast<double>(v.size());
    var = 0;
    for (double x : v) var += (std::log(x) - m) * (std::log(x) - m);
    var /= static_cast<double>(v.size() - 1);
  };
  double ma, va, mb, vb;
  moments(a, ma, va);
  moments(b, mb, vb);
  const double sa = va / 3, sb = vb / 4;
  const double df = (sa + sb) * (sa + sb) / (sa * sa / 2 + sb * sb / 3);
  EXPECT_NEAR(r->df, df, 1e-12);
  EXPECT_NEAR(r->estimate, std::exp(mb - ma), 1e-12);
  const double t = TwoSidedT(0.95, df);
  EXPECT_NEAR(r->lower, std::exp(mb - ma - t * std::sqrt(sa + sb)), 1e-12);
  EXPECT_NEAR(r->upper, std::exp(mb - ma + t * std::sqrt(sa + sb)), 1e-12);
  EXPECT_EQ(r->n_units, 7u);
  EXPECT_EQ(r->estimand, "B/A: ratio of the runs' geometric means of session means");
  EXPECT_GT(r->lower, 0.0);
}

TEST(UnpairedLogRatioInterval, NeedsTwoSessionsAndPositiveValues) {
  const std::vector<double> one = {1.0};
  const std::vector<double> two = {1.0, 1.1};
  const std::vector<double> bad = {1.0, -1.0};
  EXPECT_EQ(UnpairedLogRatioInterval(one, two).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(UnpairedLogRatioInterval(two, bad).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(UnpairedLogRatioInterval(two, two, 1.5).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClassifyChange, TheWholeIntervalDecides) {
  auto ratio = [](double lo, double hi) {
    Interval i;
    i.estimate = std::sqrt(lo * hi);
    i.lower = lo;
    i.upper = hi;
    return i;
  };
  EXPECT_EQ(ClassifyChange(ratio(1.03, 1.07), 0.02), ChangeClass::kAbove);
  EXPECT_EQ(ClassifyChange(ratio(0.90, 0.97), 0.02), ChangeClass::kBelow);
  EXPECT_EQ(ClassifyChange(ratio(0.99, 1.015), 0.02), ChangeClass::kWithin);
  EXPECT_EQ(ClassifyChange(ratio(1.01, 1.06), 0.02), ChangeClass::kStraddles);  // 5 % ± 2.5 %
  EXPECT_EQ(ClassifyChange(ratio(0.97, 1.03), 0.02), ChangeClass::kStraddles);
  Interval unbounded = ratio(0.5, 2.0);
  unbounded.bounds = Boundedness::kUnbounded;
  EXPECT_EQ(ClassifyChange(unbounded, 0.02), ChangeClass::kStraddles);
  EXPECT_EQ(ChangeClassName(ChangeClass::kWithin), "within");
}

// The band test's p-value agrees with ClassifyChange at every confidence: p < 1 − c exactly when
// the c-level interval lies beyond the band (the same data, intervals at 80 % … 99.9 %).
TEST(BandExceedancePValue, AgreesWithTheIntervalAtEveryConfidence) {
  const std::vector<double> a = {100, 101, 99.5, 100.4};
  for (const std::vector<double>& b :
       {std::vector<double>{104, 105.5, 103.8}, std::vector<double>{96, 95.1, 96.6, 95.9},
        std::vector<double>{100.5, 101.2, 99.9}, std::vector<double>{103, 99, 106}}) {
    const double p = BandExceedancePValue(*UnpairedLogRatioInterval(a, b, 0.95), 0.02);
    for (double c : {0.8, 0.9, 0.95, 0.99, 0.999}) {
      const Interval r = *UnpairedLogRatioInterval(a, b, c);
      EXPECT_NEAR(BandExceedancePValue(r, 0.02), p, 1e-9) << c;  // one test, any confidence
      const ChangeClass k = ClassifyChange(r, 0.02);
      EXPECT_EQ(p < 1 - c, k == ChangeClass::kAbove || k == ChangeClass::kBelow)
          << "p " << p << " at " << c << " " << r.lower << ".." << r.upper;
    }
  }
  // By hand for one case: d = log(1.05), se = 0.01, df 4 → p = 2·P(T_4 ≥ (d − log 1.02)/0.01).
  Interval r;
  const double t = TwoSidedT(0.95, 4);
  r.estimate = 1.05;
  r.lower = std::exp(std::log(1.05) - t * 0.01);
  r.upper = std::exp(std::log(1.05) + t * 0.01);
  r.df = 4;
  const double z = (std::log(1.05) - std::log(1.02)) / 0.01;
  EXPECT_NEAR(BandExceedancePValue(r, 0.02), 2 * StudentTCdf(-z, 4), 1e-12);
  // A point beyond the band is certain; inside it, or unbounded, there is no evidence.
  Interval point;
  point.estimate = point.lower = point.upper = 1.1;
  point.df = std::numeric_limits<double>::infinity();
  EXPECT_EQ(BandExceedancePValue(point, 0.02), 0.0);
  point.estimate = point.lower = point.upper = 1.01;
  EXPECT_EQ(BandExceedancePValue(point, 0.02), 1.0);
  r.bounds = Boundedness::kUnbounded;
  EXPECT_EQ(BandExceedancePValue(r, 0.02), 1.0);
}

TEST(HolmAdjust, StepDownInTheInputsOrder) {
  // m = 4 tests (the NaN is not one): sorted 0.01, 0.02, 0.03, 0.2 → 0.04, 0.06, 0.06, 0.2.
  const std::vector<double> p = {0.03, 0.2, std::nan(""), 0.01, 0.02};
  const std::vector<double> adj = HolmAdjust(p);
  ASSERT_EQ(adj.size(), 5u);
  EXPECT_DOUBLE_EQ(adj[0], 0.06);  // 2 × 0.03 = 0.06, and not below the 0.06 before it
  EXPECT_DOUBLE_EQ(adj[1], 0.2);
  EXPECT_TRUE(std::isnan(adj[2]));
  EXPECT_DOUBLE_EQ(adj[3], 0.04);
  EXPECT_DOUBLE_EQ(adj[4], 0.06);
  EXPECT_DOUBLE_EQ(HolmAdjust(std::vector<double>{0.5, 0.9})[1], 1.0);  // capped at 1
  EXPECT_TRUE(HolmAdjust(std::vector<double>{}).empty());
  // One test is its own family: unchanged.
  EXPECT_DOUBLE_EQ(HolmAdjust(std::vector<double>{0.03})[0], 0.03);
}

// The family-wise guarantee, simulated: 200 cells of an A/A pair of runs (5 sessions each),
// judged at ±2 %, with the session effect (3 %) either its own in every cell (the cells are
// independent) or shared by every cell of a session (one machine is faster at everything), and
// a 1 % cell × session interaction. Per cell a false slower/faster is rare; over 200 independent
// cells it is not, and Holm keeps the probability of any false verdict under 5 % either way
// (ladder-bench-gate measures the same over more matrices, and the power; docs/statistics.md).
TEST(HolmAdjust, KeepsAnAaGateOverTwoHundredCellsHonest) {
  std::mt19937_64 rng(2026);
  std::normal_distribution<double> z(0.0, 1.0);
  constexpr int kMatrices = 300, kCells = 200, kSessions = 5;
  struct Gate {
    int per_cell = 0, holm = 0;
  };
  const auto simulate = [&](double shared_sd, double own_sd) {
    Gate out;
    for (int e = 0; e < kMatrices; ++e) {
      std::vector<double> shift_a(kSessions), shift_b(kSessions);
      for (double& u : shift_a) u = shared_sd * z(rng);
      for (double& u : shift_b) u = shared_sd * z(rng);
      std::vector<double> p;
      bool per_cell = false;
      for (int c = 0; c < kCells; ++c) {
        std::vector<double> a, b;
        for (double u : shift_a) a.push_back(100 * std::exp(u + own_sd * z(rng)));
        for (double u : shift_b) b.push_back(100 * std::exp(u + own_sd * z(rng)));
        const Interval r = *UnpairedLogRatioInterval(a, b);
        const ChangeClass k = ClassifyChange(r, 0.02);
        per_cell |= k == ChangeClass::kAbove || k == ChangeClass::kBelow;
        p.push_back(BandExceedancePValue(r, 0.02));
      }
      out.per_cell += per_cell;
      const std::vector<double> adj = HolmAdjust(p);
      out.holm += std::any_of(adj.begin(), adj.end(), [](double x) { return x < 0.05; });
    }
    return out;
  };
  const Gate independent = simulate(0.0, std::hypot(0.03, 0.01));
  const Gate shared = simulate(0.03, 0.01);
  std::printf(
      "[gate] A/A, 200 cells, 5 sessions, of %d matrices failed: independent cells %d per cell, "
      "%d Holm; shared session effect %d per cell, %d Holm\n",
      kMatrices, independent.per_cell, independent.holm, shared.per_cell, shared.holm);
  EXPECT_GT(independent.per_cell, kMatrices / 5);  // the problem is real: ≥ 20 % of gates fail
  EXPECT_LT(independent.holm, kMatrices * 5 / 100 + 10);  // ≤ 5 %, room for Monte-Carlo error
  EXPECT_LT(shared.holm, kMatrices * 5 / 100 + 10);
}

}  // namespace
}  // namespace ladder::stats
