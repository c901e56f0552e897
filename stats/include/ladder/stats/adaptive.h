// The math behind adaptive matrices: when to stop adding sessions, and where a ratio crosses 1.
// Pure functions; the coordinator owns scheduling and records why each cell stopped.
#pragma once

#include <cstddef>
#include <span>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/sample.h"

namespace ladder::stats {

// The precision rule: true while the ratio interval is wider than asked, i.e. while
// ratio.RelativeHalfWidth() > target_relative_half_width (0.02 = ±2 %); always true for an
// unbounded interval.
bool NeedsMoreSessions(const Interval& ratio, double target_relative_half_width);

// The widest relative half-width among the PairedRatioInterval of each of `comparisons`: what a
// cell group's report shows. An interval that cannot be computed, that rests on one session
// (scope kWithinSessionOnly: it says nothing about the spread between sessions), or on fewer than
// kMinSessionsForInterval (3) sessions, counts as infinitely wide. 0 for no comparisons. The
// precision rule stopped on it until issue 59 (WidestProjectedHalfWidth now); the scheduler
// records it beside the rule's measure.
double WidestRatioHalfWidth(std::span<const PairedSample> comparisons);

// Stopping after a look at the data leaves the interval that triggered the stop too narrow:
// conditional on stopping at n, the rule picked a small spread of the per-session log ratios, and
// their mean is independent of that spread (docs/statistics.md, "Coverage after stopping"). So
// `precision` and `locate` decide to stop at n sessions from the first n − kCommittedSessions only,
// projected to n, and report PairedRatioInterval over all n: the last kCommittedSessions sessions
// are measured after the decision and their spread enters the reported interval unselected.
// ladder-bench-coverage chose 4: per stopping session the reported interval then covers >= 93 %
// wherever a stop before the budget is common. A decision reads at least kMinDecisionSessions.
inline constexpr int kCommittedSessions = 4;
inline constexpr int kMinDecisionSessions = 2;

// The interval PairedRatioInterval would report over the n sessions of `sample` if the first
// n − committed of them (session ids ascending) told the truth: exp(m ± t(n − 1)·s/√n), where m
// and s are the mean and standard deviation of those sessions' log ratios (SessionRatios).
// df = n − 1; n_units = n − committed, the sessions it rests on. The stopping rules read it; it is
// not an interval to report.
// Errors: as SessionRatios; FailedPrecondition when n − committed < kMinDecisionSessions.
absl::StatusOr<Interval> ProjectedRatioInterval(const PairedSample& sample,
                                                int committed = kCommittedSessions,
                                                double confidence = 0.95);

// The precision rule's stopping measure: the widest, over `comparisons`, relative half-width of
// ProjectedRatioInterval. A comparison whose projection cannot be computed counts as infinitely
// wide. 0 for no comparisons. A group stops at n sessions when this is <= the target, whatever
// the interval over all n then says.
double WidestProjectedHalfWidth(std::span<const PairedSample> comparisons,
                                int committed = kCommittedSessions);

// `sample` without the observations of sessions that measured one arm only (a session whose other
// arm failed cannot be paired).
PairedSample OnlyPairedSessions(const PairedSample& sample);

// The verdict on one probe of a crossover search: decided once its interval excludes 1, or once
// it lies within 1 ± tolerance (the ratio is 1 to within what matters).
enum class ProbeVerdict { kExcludesOne, kWithinTolerance, kUndecided };
ProbeVerdict ClassifyProbe(const Interval& ratio, double tolerance = 0.01);

// One measured rung: `depth` > 0 (tokens) and its ratio interval (estimate > 0).
struct LadderPoint {
  double depth = 0.0;
  Interval ratio;
};

struct LocateOptions {
  double resolution_octaves = 0.25;  // stop when the bracket spans fewer octaves than this
  double min_step = 256;             // probes are multiples of this (tokens)
  absl::Status Validate() const;
};

enum class LocateStatus {
  kNoCrossing,   // log-ratio estimates have one sign at every depth
  kProbe,        // measure next_probe
  kResolved,     // bracket narrower than resolution (or a rung is exactly at ratio 1)
  kStepLimited,  // no multiple of min_step lies strictly inside the bracket
};

struct LocatePlan {
  LocateStatus status = LocateStatus::kNoCrossing;
  double bracket_lower = 0.0;  // depths of the rungs on either side of the first sign change
  double bracket_upper = 0.0;
  double width_octaves = 0.0;  // log2(bracket_upper / bracket_lower)
  double next_probe = 0.0;     // kProbe only: log2-midpoint rounded to a multiple of min_step
  int sign_changes = 0;        // > 1 warns of a non-monotone ladder; the lowest is bracketed
};

// Brackets the first (shallowest) sign change of log(ratio estimate) over `points` (any order;
// depths must be distinct) and proposes the next probe.
// Errors: InvalidArgument for bad options, depths <= 0 or repeated, estimates <= 0 or NaN.
absl::StatusOr<LocatePlan> PlanCrossoverProbe(std::span<const LadderPoint> points,
                                              const LocateOptions& options = {});

// Ordinary least squares y = intercept + slope·x with its residual standard deviation.
struct LinearFit {
  double intercept = 0.0;
  double slope = 0.0;
  double x_mean = 0.0;
  double y_mean = 0.0;
  double sxx = 0.0;          // Σ (x − x̄)²
  double residual_sd = 0.0;  // √(RSS / (n − 2))
  std::size_t n = 0;
};

// Errors: InvalidArgument when sizes differ, n < 3, values not finite, or all x equal.
absl::StatusOr<LinearFit> FitLine(std::span<const double> x, std::span<const double> y);

// The depth where a linear fit of the per-token latency difference (B − A, e.g. µs/token) against
// depth (tokens) crosses zero, root = −intercept/slope, with Fieller's interval on df n − 2
// (computed in the centred form root = x̄ − ȳ/slope, where ȳ and slope are uncorrelated).
// kUnbounded when the slope is not significantly non-zero.
absl::StatusOr<Interval> CrossoverFromLinearFit(std::span<const double> depth,
                                                std::span<const double> latency_difference,
                                                double confidence = 0.95);

}  // namespace ladder::stats
