#include "ladder/stats/steady_state.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

namespace ladder::stats {
namespace {

TEST(FindSteadyState, DiscardsWarmUp) {
  // Warm-up climbing to ~100, then ±0.5 % jitter.
  const std::vector<double> series = {40, 70, 88, 95, 98, 100.2, 99.7, 100.4, 99.9, 100.1, 100.3};
  absl::StatusOr<SteadyState> s = FindSteadyState(series);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->verdict, SteadyVerdict::kSteady);
  // Window [95, 98, 100.2, 99.7, 100.4] has CV ~2.1 %; [98 .. 100.4] ~1 %.
  EXPECT_EQ(s->first_steady, 4u);
}

TEST(FindSteadyState, NeverSteadyAndRuleKnobs) {
  const std::vector<double> noisy = {1, 2, 1, 2, 1, 2, 1, 2};
  absl::StatusOr<SteadyState> s = FindSteadyState(noisy);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->verdict, SteadyVerdict::kNeverSteady);
  EXPECT_EQ(s->first_steady, noisy.size());
  EXPECT_EQ(FindSteadyState(noisy, {.window = 2, .max_cv = 0.5})->first_steady, 0u);
  EXPECT_EQ(FindSteadyState(noisy, {.window = 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<double> short_series = {1, 1};
  EXPECT_EQ(FindSteadyState(short_series)->verdict, SteadyVerdict::kNeverSteady);
}

TEST(ClassifyClock, ThrottledBelowThreeQuarters) {
  EXPECT_EQ(ClassifyClock(1980, 1980), ClockState::kNominal);
  EXPECT_EQ(ClassifyClock(1500, 1980), ClockState::kNominal);  // 75.8 %
  EXPECT_EQ(ClassifyClock(1480, 1980), ClockState::kThrottled);
  EXPECT_EQ(ClassifyClock(NAN, 1980), ClockState::kUnknown);
  EXPECT_EQ(ClassifyClock(1500, 0), ClockState::kUnknown);
  EXPECT_EQ(ClassifyClock(1500, 1980, 0.8), ClockState::kThrottled);
}

}  // namespace
}  // namespace ladder::stats
