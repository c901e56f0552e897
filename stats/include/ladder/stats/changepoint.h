// Where a series of runs moved: one change-point in a series of per-run estimates that each come
// with their own standard error, with the run-to-run drift estimated from the series itself.
//
// Model, on the log scale (y_i = log of run i's central value, s_i its standard error from the
// run's own interval): y_i = μ₁ + e_i before the change, μ₂ + e_i from it on, with
// e_i ~ N(0, s_i² + τ²). τ is the drift between runs that no run's interval sees (the host, the
// night, the build of everything around the benchmark): it is estimated by maximum likelihood
// from the scatter of the runs around their segment's level (the A/A stretches of the series),
// never fixed, so a step smaller than a fixed allowance is not hidden behind it, and a series
// that drifts more than its intervals say does not raise alarms at every run.
//
// The statistic is the likelihood ratio of one change at the best index against none, both
// profiled over τ; it is calibrated by a parametric bootstrap under the fitted no-change model
// (the same s_i, the fitted τ), so its false-alarm rate holds for the series' own length and
// errors (measured: bench/changepoint_bench.cc, docs/statistics.md). Where the change is, is
// given as the best index and the indexes whose profile likelihood is within the χ²₁ quantile of
// it: more than one means the data cannot tell which of those runs moved first.
//
// Pure and thread-safe; deterministic for a given seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ladder::stats {

struct SeriesPoint {
  double log_value = 0.0;  // log of the run's central value
  double se = 0.0;         // its standard error on the log scale (>= 0)
};

struct ChangePointOptions {
  double alpha = 0.05;         // false-alarm rate of the test, in (0, 1)
  int draws = 199;             // bootstrap draws (>= 19)
  uint64_t seed = 1;           // the bootstrap's seed
  std::size_t min_before = 2;  // fewest runs before the change (>= 1): its level needs them
  absl::Status Validate() const;
};

struct ChangePoint {
  bool detected = false;  // p_value < alpha
  // The first index of the new level (best by likelihood), in [min_before, n).
  std::size_t index = 0;
  // Indexes as plausible as `index` (profile likelihood within χ²₁(1 − alpha) of the best),
  // ascending; `index` is among them. Size 1: the change is located at one run.
  std::vector<std::size_t> plausible;
  double statistic = 0.0;      // 2 (ℓ₁ − ℓ₀)
  double p_value = 1.0;        // bootstrap, (1 + #{T* >= T}) / (draws + 1)
  double step = 0.0;           // μ₂ − μ₁ on the log scale at `index`
  double drift_sd = 0.0;       // τ fitted with the change at `index` (the A/A stretches)
  double drift_sd_null = 0.0;  // τ fitted without a change
};

// Errors: InvalidArgument for a non-finite value or a negative or non-finite se, or bad options;
// FailedPrecondition with fewer than min_before + 1 points (the message says how many).
absl::StatusOr<ChangePoint> FindChangePoint(std::span<const SeriesPoint> series,
                                            const ChangePointOptions& options = {});

}  // namespace ladder::stats
