// Power before running, and the power a run achieved: the smallest change a design detects with a
// given probability under ladder's verdict, and the sessions a target change needs.
//
// The verdict (compare.h): a ratio B / A is "slower" (or "faster") when its whole interval lies
// beyond the band 1 ± threshold; over a matrix, a cell's band test p-value must survive Holm's
// adjustment over the `family` cells judged. The planning case is the hardest one for Holm: one
// cell changed, the others not, so the changed cell's p must beat α / family (a cell within the
// band has p near 1 and does not lower the bar). With d̂ the log ratio, se its standard error and
// b = log(1 + threshold), the slower verdict needs (d̂ − b) / ŝe > t_{1 − α/(2·family)}(df).
//
//   kPaired   both arms in the same sessions (a `pair:` axis): d̂ is the mean of n per-session
//             log-ratios ℓ_s with sd σ; (d̂ − b)/ŝe is noncentral t on n − 1 df with
//             λ = (δ − b)·√n/σ. Exact.
//   kTwoRuns  two runs (`ladder compare`), n sessions each, a session's log mean with sd σ in
//             both: Welch's t on the log session means. With equal n and σ the statistic is
//             noncentral t on 2(n − 1) df with λ = (δ − b)/(σ·√(2/n)) and the Welch df is
//             ν = (n − 1)/(F² + (1 − F)²), F ~ Beta((n−1)/2, (n−1)/2) independent of it; the
//             power is integrated over F. Exact under normality of the log session means.
//
// The minimum detectable change (MDC) is the δ with power equal to `power`: δ = b + λ*·se, where
// λ* depends only on the design, n, family, confidence and power, so one λ* serves every cell of
// a matrix. Reported both ways: up = (1 + h)·e^{λ*·se} − 1, down = 1 − (1 − h)·e^{−λ*·se}.
//
// Pure functions, thread-safe. Errors: InvalidArgument for options out of range or a negative or
// non-finite sd; FailedPrecondition for fewer sessions than the design can judge (paired: 2,
// two runs: 2 per run).
#pragma once

#include <cstddef>
#include <map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/variance.h"

namespace ladder::stats {

enum class PowerDesign { kPaired, kTwoRuns };

struct PowerOptions {
  double threshold = 0.02;   // the band ±h, in [0, 1)
  double confidence = 0.95;  // of the verdict, in (0, 1): α = 1 − confidence
  double power = 0.80;       // wanted probability of the verdict, in (0.5, 1)
  std::size_t family = 1;    // cells judged together by Holm (1: the per-cell verdict), >= 1
  absl::Status Validate() const;
};

// P(T > c) for T noncentral t with `df` > 0 degrees of freedom and noncentrality `lambda`:
// E[Φ(λ − c·√(V/df))], V ~ χ²_df, integrated on log V by the trapezoid rule (absolute error
// below 1e-9 over df in [1, 1e4]; df = +infinity gives Φ(λ − c)). NaN for bad arguments.
double NoncentralTUpperTail(double c, double df, double lambda);

// The probability of a "slower" verdict (up; the same for "faster" by symmetry of the log scale)
// when the true log ratio beyond the band edge is `lambda` standard errors, i.e.
// λ = (δ − log(1 + h)) / se_true, at `sessions` sessions (per run for kTwoRuns).
absl::StatusOr<double> PowerAtNoncentrality(PowerDesign design, int sessions, double lambda,
                                            const PowerOptions& options = {});

// λ*: the noncentrality at which PowerAtNoncentrality equals options.power (bisection to 1e-9).
absl::StatusOr<double> RequiredNoncentrality(PowerDesign design, int sessions,
                                             const PowerOptions& options = {});

// The standard error of the log ratio: kPaired σ/√n, kTwoRuns σ·√(2/n).
double LogRatioStandardError(PowerDesign design, int sessions, double per_session_log_sd);

struct DetectableChange {
  double up = 0;      // smallest ratio − 1 > 0 detected with the wanted power (0.07 = +7 %)
  double down = 0;    // smallest 1 − ratio detected with the wanted power, the other way
  double lambda = 0;  // λ*
  double log_se = 0;  // the standard error of the log ratio it assumed
  int sessions = 0;   // per run (kTwoRuns) or paired sessions (kPaired)
  double df = 0;      // of the t test (kTwoRuns: the largest, 2(n − 1))
};

// The MDC of `design` at `sessions` with a session's log sd `per_session_log_sd` (kTwoRuns: of a
// run's log session mean, V = T_3² + T_2²/r_2 + T_1²/(r_1·r_2); kPaired: of ℓ_s).
absl::StatusOr<DetectableChange> MinimumDetectableChange(PowerDesign design,
                                                         double per_session_log_sd, int sessions,
                                                         const PowerOptions& options = {});

// The smallest sessions (>= 2 paired, >= 2 per run) whose MDC (the larger of up and down) is at
// most `target_change` (0.05 = 5 %); kExceedsMax with max_sessions when none up to it is.
// A target at or below the threshold is never reachable (a change inside the band is no change).
absl::StatusOr<SessionsNeeded> SessionsForChange(PowerDesign design, double per_session_log_sd,
                                                 double target_change,
                                                 const PowerOptions& options = {},
                                                 int max_sessions = 1000);

// λ* memoised by session count for one design and one set of options, so that the cells of a
// matrix (each with its own sd) share the expensive part. Not thread-safe (the memo is mutable);
// one per thread.
class DetectableChangeTable {
 public:
  DetectableChangeTable(PowerDesign design, const PowerOptions& options);
  // MinimumDetectableChange(design, sd, sessions, options), from the memo.
  absl::StatusOr<DetectableChange> At(double per_session_log_sd, int sessions);
  // SessionsForChange(design, sd, target, options, max_sessions), from the memo.
  absl::StatusOr<SessionsNeeded> SessionsFor(double per_session_log_sd, double target_change,
                                             int max_sessions = 1000);

 private:
  PowerDesign design_;
  PowerOptions options_;
  std::map<int, double> lambda_;
};

// What a computed ratio interval of the log-t form exp(d ± t(df)·se) (UnpairedLogRatioInterval,
// PairedRatioInterval) could have detected: its se read back from its width, its own df, and the
// noncentral t at that df (the measured spread taken as the truth; for Welch's interval an
// approximation, since its df is itself estimated). `interval.confidence` is the verdict's.
// FailedPrecondition for an unbounded interval or one without finite df.
absl::StatusOr<DetectableChange> AchievedDetectableChange(const Interval& ratio,
                                                          const PowerOptions& options = {});

}  // namespace ladder::stats
