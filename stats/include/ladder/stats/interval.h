// The one result type of every interval method in ladder::stats.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ladder::stats {

// What variation an interval accounts for. kBetweenSessions is the honest one: its width comes
// from how much independent sessions (VMs) disagree. kWithinSessionOnly arises when only one
// session exists: the interval then reflects process/round noise only and says nothing about how
// another VM would measure.
enum class IntervalScope { kBetweenSessions, kWithinSessionOnly };

// Fieller-type intervals are unbounded when the denominator is not significantly non-zero; lower
// and upper are then -inf and +inf.
enum class Boundedness { kBounded, kUnbounded };

inline constexpr std::string_view kWithinSessionNote = "interval covers only within-session noise";

struct Interval {
  double estimate = 0.0;
  double lower = 0.0;
  double upper = 0.0;
  double confidence = 0.95;
  // Degrees of freedom of the t multiplier (n_sessions - 1 in the usual case; fractional for
  // Welch-Satterthwaite; NaN for the bootstrap, which has none).
  double df = 0.0;
  // Independent units the interval rests on: sessions (or processes/rounds when scope is
  // kWithinSessionOnly), or points of a fit.
  std::size_t n_units = 0;
  IntervalScope scope = IntervalScope::kBetweenSessions;
  Boundedness bounds = Boundedness::kBounded;
  std::string note;  // a caveat for readers; empty when there is none
  // What the interval estimates, in words a reader can check the estimate against, e.g.
  // "geometric mean of session means" or "B/A: ratio of means of session means". Every
  // printed interval names it, because methods that look alike estimate different things.
  std::string estimand;

  // max(upper / estimate - 1, 1 - lower / estimate): the interval lies within
  // estimate · (1 ± this). +infinity when unbounded or when estimate <= 0.
  double RelativeHalfWidth() const;
  bool Contains(double x) const { return lower <= x && x <= upper; }
};

}  // namespace ladder::stats
