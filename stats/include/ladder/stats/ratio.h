// Paired ratios B / A between two arms measured in the same sessions, with three intervals:
//   PairedRatioInterval    the primary one: a t interval on per-session log-ratios;
//   BootstrapRatioInterval a t-calibrated bootstrap over sessions, of the same estimand;
//   FiellerRatioInterval   Fieller's exact interval for a different estimand: the ratio of the
//                          means of session means (not the geometric mean of per-session ratios).
// Each result's `estimand` names what it estimates; print it with the estimate.
// All take values > 0 (rates or times); all are pure and thread-safe.
//
// Why per-session: both arms in one VM share that VM's speed (clock bins, neighbours, driver), so
// taking the ratio within the session cancels it; what remains between sessions is the arm ×
// session interaction, which is what limits the ratio's precision. The degrees of freedom are
// n_sessions − 1. Pooling all iterations of both arms as if independent ignores that rounds of a
// session share its offset and under-covers (see docs/statistics.md).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/stats/interval.h"
#include "ladder/stats/sample.h"

namespace ladder::stats {

// Identifies the method and code version behind a stored analysis output.
inline constexpr std::string_view kStatsMethodVersion = "ladder-stats/2";

struct RatioOptions {
  double confidence = 0.95;  // in (0, 1)
  absl::Status Validate() const;
};

// Per-session summary of a paired sample. mean_a / mean_b are SessionMean of each arm (arithmetic
// means of process means, in the value's unit); log_ratio = log(mean_b) − log(mean_a).
struct SessionRatio {
  std::int64_t session = 0;
  double mean_a = 0.0;
  double mean_b = 0.0;
  double log_ratio = 0.0;
};

// Errors: InvalidArgument when an arm is empty, a value is <= 0 or not finite, an index is
// duplicated, or a session appears in only one arm (a paired design needs both arms in every
// session; filter unpaired sessions out before calling).
absl::StatusOr<std::vector<SessionRatio>> SessionRatios(const PairedSample& sample);

// estimate = exp(mean ℓ), interval exp(mean ℓ ± t(n−1)·sd(ℓ)/√n) over the n sessions' ℓ_s.
// With one session: ℓ's standard error comes from the spread of each arm's process means (or
// rounds, with one process), by the delta method on the log scale, with Welch-Satterthwaite df;
// scope kWithinSessionOnly and kWithinSessionNote.
// Errors: as SessionRatios; FailedPrecondition when a lone session has a single observation in
// an arm.
absl::StatusOr<Interval> PairedRatioInterval(const PairedSample& sample,
                                             const RatioOptions& options = {});

// Which levels the bootstrap resamples. kSessionsOnly (the default) resamples whole sessions:
// the sessions are the independent units, and a session's ℓ_s already carries its processes'
// and rounds' noise once. kAllLevels also resamples processes within each drawn session and rounds
// within each drawn process; that counts the lower levels' noise again at every level, so its
// interval is wider than the data warrant (it over-covers; docs/statistics.md has the numbers).
enum class BootstrapLevels { kAllLevels, kSessionsOnly };

// How the bootstrap distribution becomes an interval.
//   kTCalibrated (default): the percentiles of mean ℓ* − mean ℓ, scaled by
//     √(n/(n−1)) · t(n−1) / z: the first factor undoes the plug-in variance's (n−1)/n, the
//     second widens the normal-theory quantile to the t quantile with n − 1 df. The interval keeps
//     the bootstrap's shape (asymmetry) and gets the t interval's small-sample width; df = n − 1.
//   kPercentile: the plain percentile interval. With few sessions it is far too narrow (with 2
//     sessions ~10 times narrower than t: it has no small-sample correction); kept for study.
enum class BootstrapCalibration { kTCalibrated, kPercentile };

struct BootstrapOptions {
  double confidence = 0.95;             // in (0, 1)
  int draws = 10000;                    // 2000 is enough for interactive use
  std::uint64_t seed = 0x6c6164646572;  // fixed: equal inputs and options give equal intervals
  BootstrapLevels levels = BootstrapLevels::kSessionsOnly;
  BootstrapCalibration calibration = BootstrapCalibration::kTCalibrated;
  absl::Status Validate() const;
};

// A bootstrap interval for exp(mean ℓ) (the estimand of PairedRatioInterval: the geometric mean of
// per-session ratios), from `draws` resamples; estimate is the point estimate exp(mean ℓ) of the
// original data. Both arms of a drawn session are taken together. With kAllLevels, processes
// within a drawn session are drawn jointly for the two arms when both arms have the same process
// ids (shared processes), independently otherwise; rounds are drawn independently per arm and
// process. df is n − 1 with kTCalibrated, NaN with kPercentile.
// Deterministic: the generator is mt19937_64 with an unbiased bounded draw of our own, so results
// do not depend on the standard library's distributions.
// With one session: kSessionsOnly is FailedPrecondition; kAllLevels gives a within-session
// percentile interval (scope kWithinSessionOnly, df NaN).
absl::StatusOr<Interval> BootstrapRatioInterval(const PairedSample& sample,
                                                const BootstrapOptions& options = {});

// A quotient N / D of two estimates with their (co)variances — the variances of the estimates
// themselves (e.g. s²/n), not of single observations.
struct QuotientMoments {
  double numerator = 0.0;
  double denominator = 0.0;
  double var_numerator = 0.0;
  double var_denominator = 0.0;
  double covariance = 0.0;
};

// Fieller's interval for N / D at multiplier `t` (e.g. TwoSidedT(0.95, df)): the set of ρ with
// (N − ρD)² <= t²(var_N − 2ρ·cov + ρ²·var_D). When D² <= t²·var_D the denominator is not
// significantly non-zero, the set is unbounded, and the result is kUnbounded with
// lower = -inf, upper = +inf. confidence, df and n_units are left for the caller to fill.
Interval FiellerQuotient(const QuotientMoments& moments, double t);

// The delta-method (first-order) interval for N / D at multiplier `t`; agrees with Fieller when
// D is precise (t²·var_D / D² small).
Interval DeltaQuotient(const QuotientMoments& moments, double t);

// Fieller's interval for mean_B / mean_A where mean_X is the mean over sessions of arm X's
// session means, with the variances and covariance of the session means across sessions (df
// n − 1). Note the estimand differs slightly from PairedRatioInterval's (ratio of means vs
// geometric mean of ratios). One session: arms' process means (or rounds) as independent
// samples, Welch-Satterthwaite df, kWithinSessionOnly.
absl::StatusOr<Interval> FiellerRatioInterval(const PairedSample& sample,
                                              const RatioOptions& options = {});

// The same quotient with the delta-method interval, for comparison with Fieller.
absl::StatusOr<Interval> DeltaRatioInterval(const PairedSample& sample,
                                            const RatioOptions& options = {});

}  // namespace ladder::stats
