#include "ladder/stats/distributions.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace ladder::stats {
namespace {

TEST(StudentT, QuantilesMatchTables) {
  // Two-sided 95 % critical values (the 0.975 quantile), to the tables' full precision.
  EXPECT_NEAR(StudentTQuantile(0.975, 1), 12.7062047, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 2), 4.3026527, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 4), 2.7764451, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 10), 2.2281389, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 30), 2.0422725, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.975, 100), 1.9839715, 1e-6);
  // The short forms in the spec.
  EXPECT_NEAR(TwoSidedT(0.95, 1), 12.706, 5e-4);
  EXPECT_NEAR(TwoSidedT(0.95, 2), 4.303, 5e-4);
  EXPECT_NEAR(TwoSidedT(0.95, 4), 2.776, 5e-4);
  EXPECT_NEAR(TwoSidedT(0.95, 10), 2.228, 5e-4);
  EXPECT_NEAR(TwoSidedT(0.95, 30), 2.042, 5e-4);
  EXPECT_NEAR(TwoSidedT(0.95, 100), 1.984, 5e-4);
}

TEST(StudentT, TailsAndOtherLevels) {
  EXPECT_NEAR(StudentTQuantile(0.9995, 1), 636.6192, 1e-3);
  EXPECT_NEAR(StudentTQuantile(0.995, 5), 4.0321430, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.95, 3), 2.3533634, 1e-6);
  EXPECT_NEAR(StudentTQuantile(0.025, 10), -2.2281389, 1e-6);
  EXPECT_EQ(StudentTQuantile(0.5, 7), 0.0);
}

TEST(StudentT, CdfInvertsQuantile) {
  for (double df : {0.7, 1.0, 2.5, 4.0, 13.3, 60.0, 1000.0, 1e6}) {
    for (double p : {1e-6, 0.01, 0.2, 0.5, 0.8, 0.975, 0.999999}) {
      const double t = StudentTQuantile(p, df);
      EXPECT_NEAR(StudentTCdf(t, df), p, 1e-10 * std::max(1.0, 1.0 / p)) << df << " " << p;
    }
  }
}

TEST(StudentT, LargeDfIsNormal) {
  EXPECT_NEAR(StudentTQuantile(0.975, std::numeric_limits<double>::infinity()), 1.959963985, 1e-8);
  EXPECT_NEAR(StudentTQuantile(0.975, 1e7), 1.959963985, 1e-6);
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963985, 1e-8);
  EXPECT_NEAR(NormalQuantile(1e-10), -6.361340902, 1e-7);
}

TEST(StudentT, BadArgumentsGiveNaN) {
  EXPECT_TRUE(std::isnan(StudentTQuantile(0.0, 3)));
  EXPECT_TRUE(std::isnan(StudentTQuantile(1.0, 3)));
  EXPECT_TRUE(std::isnan(StudentTQuantile(0.9, 0)));
  EXPECT_TRUE(std::isnan(TwoSidedT(1.5, 3)));
}

TEST(IncompleteBeta, KnownValues) {
  EXPECT_NEAR(RegularizedIncompleteBeta(1, 1, 0.3), 0.3, 1e-14);
  EXPECT_NEAR(RegularizedIncompleteBeta(2, 3, 0.4), 0.5248, 1e-12);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.5, 0.5, 0.5), 0.5, 1e-12);
}

}  // namespace
}  // namespace ladder::stats
