// Descriptive summary of a sample, and the per-cell confidence interval for the mean.
#pragma once

#include <cstddef>
#include <span>
#include <string>

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

// The scale a cell's central value and its interval are computed on.
enum class MeanScale {
  // kLog when every value is > 0 (times, rates: the usual case), else kArithmetic.
  kAuto,
  // Geometric mean of the session means, exp(mean log m_s), with the t interval of mean log m_s
  // back-transformed: exp(mean ± t·sd/√n). Both bounds are > 0 by construction, and the
  // interval is symmetric in ratio (a time and its rate get reciprocal intervals). Needs values
  // > 0.
  kLog,
  // Arithmetic mean of the session means with a t interval; for quantities that may be <= 0
  // (differences). Its lower bound can be negative for a positive quantity with few sessions,
  // which is why kAuto does not choose it for positive data.
  kArithmetic,
};

// Below this many sessions a between-session interval is not given (see CellMeanInterval).
inline constexpr std::size_t kMinSessionsForInterval = 3;

struct IntervalOptions {
  double confidence = 0.95;  // in (0, 1)
  MeanScale scale = MeanScale::kAuto;
  // Fewest sessions for a between-session interval (>= 2). With 2 sessions t(1) = 12.7: an
  // interval that wide says only that more sessions are needed, so by default none is given.
  std::size_t min_sessions = kMinSessionsForInterval;
  absl::Status Validate() const;
};

// 95 % (by default) interval for the cell's central value whose degrees of freedom come from the
// top replicated level: over the session means m_s (SessionMean),
//   kLog:        exp(ȳ ± t(n_s − 1) · sd(y_s) / √n_s),  y_s = log m_s   (estimate exp(ȳ))
//   kArithmetic: m̄ ± t(n_s − 1) · sd(m_s) / √n_s                        (estimate m̄)
// `estimand` says which ("geometric mean of session means" / "mean of session means").
// Iterations are NOT treated as independent: rounds of one process and processes of one VM share
// that VM's offset, so their count overstates the evidence.
// With 2 <= n_s < min_sessions: FailedPrecondition whose message says how many sessions an
// interval needs ("an interval needs at least 3 sessions; 2 measured").
// With one session the interval falls back to the process means (or, with one process, the
// rounds), on the same scale, and carries scope kWithinSessionOnly and kWithinSessionNote.
// Errors: as BuildHierarchy (kAnyFinite; kPositive for kLog); FailedPrecondition with a single
// observation.
absl::StatusOr<Interval> CellMeanInterval(std::span<const Observation> observations,
                                          const IntervalOptions& options = {});

// The message CellMeanInterval gives below `min_sessions` (for callers that print it).
std::string SessionsNeededNote(std::size_t min_sessions, std::size_t measured);

}  // namespace ladder::stats
