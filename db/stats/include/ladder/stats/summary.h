// Descriptive summary of a sample, and the per-cell confidence interval for the mean.
#pragma once

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/sample.h"

namespace ladder::stats {

// Summary of values in their own unit. sd uses the n - 1 denominator; cv = sd / mean (a fraction,
// not %). sd and cv are NaN when n < 2; cv is NaN when mean == 0.
struct Summary {
  std::size_t n = 0;
  double median = 0.0;
  double mean = 0.0;
  double sd = 0.0;
  double cv = 0.0;
  double min = 0.0;
  double max = 0.0;
};

// Errors: InvalidArgument when empty or any value is not finite.
absl::StatusOr<Summary> Summarize(std::span<const double> values);

struct IntervalOptions {
  double confidence = 0.95;  // in (0, 1)
  absl::Status Validate() const;
};

// 95 % (by default) interval for the cell mean whose degrees of freedom come from the top
// replicated level:  m̄ ± t(n_s − 1) · sd(m_s) / √n_s, where m_s are the session means
// (SessionMean) and m̄ their mean. Iterations are NOT treated as independent: rounds of one
// process and processes of one VM share that VM's offset, so their count overstates the evidence.
// With one session the interval falls back to the process means (or, with one process, the
// rounds) and carries scope kWithinSessionOnly and kWithinSessionNote.
// Errors: as BuildHierarchy (kAnyFinite); FailedPrecondition with a single observation.
absl::StatusOr<Interval> CellMeanInterval(std::span<const Observation> observations,
                                          const IntervalOptions& options = {});

}  // namespace ladder::stats
