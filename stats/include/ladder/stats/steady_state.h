// Warm-up detection and clock throttling flags.
#pragma once

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ladder::stats {

// Steady once the coefficient of variation (sd / mean, n − 1 denominator) of `window`
// consecutive values is <= max_cv.
struct SteadyStateRule {
  std::size_t window = 5;  // >= 2
  double max_cv = 0.02;    // a fraction: 0.02 = 2 %
  absl::Status Validate() const;
};

enum class SteadyVerdict { kSteady, kNeverSteady };

struct SteadyState {
  SteadyVerdict verdict = SteadyVerdict::kNeverSteady;
  // Index of the first value of the first window that meets the rule: values [0, first_steady)
  // are warm-up and are discarded. Equals the series length when kNeverSteady.
  std::size_t first_steady = 0;
};

// `series` is one process's per-iteration values in time order (any positive unit).
// Errors: invalid rule; InvalidArgument when a value is not finite.
absl::StatusOr<SteadyState> FindSteadyState(std::span<const double> series,
                                            const SteadyStateRule& rule = {});

enum class ClockState { kNominal, kThrottled, kUnknown };

// kThrottled when the recorded clock is below min_fraction · default clock (same unit, e.g. MHz);
// kUnknown when either clock is missing (NaN or <= 0).
ClockState ClassifyClock(double clock, double default_clock, double min_fraction = 0.75);

}  // namespace ladder::stats
