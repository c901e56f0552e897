// The between-runs comparison behind `ladder compare`: Welch on log session means, and the
// verdict band.
#include "ladder/stats/compare.h"

#include <cmath>
#include <limits>
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

}  // namespace
}  // namespace ladder::stats
