#include "ladder/stats/steady_state.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "internal.h"

namespace ladder::stats {

absl::Status SteadyStateRule::Validate() const {
  if (window < 2) return absl::InvalidArgumentError("steady-state window must be >= 2");
  if (!(max_cv >= 0.0) || !std::isfinite(max_cv)) {
    return absl::InvalidArgumentError(absl::StrCat("max_cv ", max_cv, " must be >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SteadyState> FindSteadyState(std::span<const double> series,
                                            const SteadyStateRule& rule) {
  if (absl::Status st = rule.Validate(); !st.ok()) return st;
  for (double v : series) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("series has a non-finite value");
  }
  for (std::size_t start = 0; start + rule.window <= series.size(); ++start) {
    const std::span<const double> w = series.subspan(start, rule.window);
    const double mean = internal::Mean(w);
    if (!(mean > 0.0)) continue;  // CV is meaningless for a non-positive mean
    if (std::sqrt(internal::Variance(w)) / mean <= rule.max_cv) {
      return SteadyState{SteadyVerdict::kSteady, start};
    }
  }
  return SteadyState{SteadyVerdict::kNeverSteady, series.size()};
}

ClockState ClassifyClock(double clock, double default_clock, double min_fraction) {
  if (!(clock > 0.0) || !(default_clock > 0.0) || !std::isfinite(clock) ||
      !std::isfinite(default_clock)) {
    return ClockState::kUnknown;
  }
  return clock < min_fraction * default_clock ? ClockState::kThrottled : ClockState::kNominal;
}

}  // namespace ladder::stats
