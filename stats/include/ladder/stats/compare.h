// Two runs of one cell compared: the ratio B / A of their central values with an interval whose
// degrees of freedom come from sessions, and a verdict against a threshold that accounts for it.
//
// Across runs there is no pairing: run A's sessions and run B's are different machines (or the
// same machine at different times), so the session effect does not cancel as it does within a
// paired comparison. The sessions of each run are its independent units; the comparison is
// Welch's unequal-variance t on the log session means. Pure and thread-safe.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/stats/interval.h"

namespace ladder::stats {

// y = log(session mean) per session of each run (session means in the metric's unit, > 0):
//   estimate = exp(ȳ_B − ȳ_A)  (the ratio of the runs' geometric means of session means),
//   interval = exp(ȳ_B − ȳ_A ± t(ν) · √(s²_A/n_A + s²_B/n_B)),
//   ν = Welch–Satterthwaite df from n_A − 1 and n_B − 1.
// Errors: InvalidArgument for a value <= 0 or not finite or a confidence outside (0, 1);
// FailedPrecondition when a run has fewer than 2 sessions (no between-session spread to compare
// against). When both runs' session means have no spread at all the interval is a point (df inf).
absl::StatusOr<Interval> UnpairedLogRatioInterval(std::span<const double> session_means_a,
                                                  std::span<const double> session_means_b,
                                                  double confidence = 0.95);

// Where a ratio interval lies against the band [1 − threshold, 1 + threshold]:
//   kAbove      the whole interval is above 1 + threshold (a change larger than the threshold, up)
//   kBelow      the whole interval is below 1 − threshold
//   kWithin     the whole interval is inside the band (equivalent to within the threshold)
//   kStraddles  anything else: the interval reaches across a band edge, so the data cannot tell
//               a change larger than the threshold from one smaller than it (more sessions help)
// An unbounded interval straddles. Which of kAbove/kBelow is "slower" depends on the metric
// (time or rate): the caller decides.
enum class ChangeClass { kAbove, kBelow, kWithin, kStraddles };
ChangeClass ClassifyChange(const Interval& ratio, double threshold);
std::string_view ChangeClassName(ChangeClass c);  // "above", "below", "within", "straddles"

// The test behind kAbove / kBelow as a p-value, so that many cells can be judged as one family.
// For an interval of the log-t form exp(d ± t(ν)·se) (UnpairedLogRatioInterval,
// PairedRatioInterval; d is the midpoint of the log bounds):
//   p = min(1, 2 · min(P(T_ν ≥ (d − log(1 + h)) / se), P(T_ν ≤ (d − log(1 − h)) / se))),
// so p < 1 − confidence exactly when ClassifyChange(ratio, h) is kAbove or kBelow. The factor 2
// makes one test per cell cover both directions: under a true ratio inside the band, a verdict
// either way has probability ≤ 1 − confidence. A point interval (se = 0) gives 0 beyond the band
// and 1 inside it; an unbounded interval, or h ≥ 1, gives 1.
double BandExceedancePValue(const Interval& ratio, double threshold);

// Holm's step-down adjustment of m p-values (Holm 1979): with p_(1) ≤ … ≤ p_(m),
//   adjusted_(i) = max over j ≤ i of min(1, (m − j + 1) · p_(j)),
// returned in the input's order. Rejecting every test whose adjusted p is below α keeps the
// probability of any false rejection in the family at or below α whatever the dependence
// between the tests (cells measured in the same sessions are correlated). NaN p-values are
// not tests: they stay NaN and do not count in m.
std::vector<double> HolmAdjust(std::span<const double> p_values);

}  // namespace ladder::stats
