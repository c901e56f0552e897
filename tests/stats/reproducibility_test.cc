#include "ladder/stats/reproducibility.h"

#include <vector>

#include <gtest/gtest.h>

namespace ladder::stats {
namespace {

TEST(CompareRuns, PercentDifferencePerCell) {
  const std::vector<double> a = {100.0, 32.42, 8.85};
  const std::vector<double> b = {101.0, 32.27, 8.85};
  absl::StatusOr<Reproducibility> r = CompareRuns(a, b);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->percent_difference.size(), 3u);
  EXPECT_NEAR(r->percent_difference[0], 100.0 * 1.0 / 100.5, 1e-12);
  EXPECT_NEAR(r->percent_difference[1], 100.0 * 0.15 / 32.345, 1e-9);
  EXPECT_DOUBLE_EQ(r->percent_difference[2], 0.0);
  EXPECT_NEAR(r->summary.max, 100.0 / 100.5, 1e-12);
  EXPECT_NEAR(r->summary.median, 100.0 * 0.15 / 32.345, 1e-9);
}

TEST(CompareRuns, RejectsMismatchedOrBadInput) {
  const std::vector<double> a = {1.0, 2.0};
  const std::vector<double> b = {1.0};
  EXPECT_EQ(CompareRuns(a, b).status().code(), absl::StatusCode::kInvalidArgument);
  const std::vector<double> z = {1.0, 0.0};
  EXPECT_EQ(CompareRuns(a, z).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CompareRuns({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ladder::stats
