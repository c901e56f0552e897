#include "ladder/stats/power.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "ladder/stats/distributions.h"

namespace ladder::stats {
namespace {

using internal::kInf;
using internal::kNaN;

// The critical values of the slower verdict with their probability weights: one for the paired
// t test; for two runs, one per point of the Beta quadrature over Welch's df.
struct CriticalValues {
  double statistic_df = 0;  // df of the noncentral t the statistic follows
  std::vector<double> c, weight;
};

absl::Status CheckSessions(PowerDesign design, int sessions) {
  if (sessions < 2) {
    return absl::FailedPreconditionError(absl::StrCat(
        design == PowerDesign::kPaired ? "a paired verdict needs at least 2 sessions"
                                       : "a comparison of two runs needs at least 2 sessions each",
        "; ", sessions, " planned"));
  }
  return absl::OkStatus();
}

CriticalValues Critical(PowerDesign design, int sessions, const PowerOptions& o) {
  // Holm's bar for the one changed cell, two-sided: p = 2·P(T ≥ ·) < α / family.
  const double tail = (1.0 - o.confidence) / (2.0 * static_cast<double>(o.family));
  const double k = sessions - 1.0;
  CriticalValues out;
  if (design == PowerDesign::kPaired) {
    out.statistic_df = k;
    out.c.push_back(StudentTQuantile(1.0 - tail, k));
    out.weight.push_back(1.0);
    return out;
  }
  // F = sin²θ ~ Beta(k/2, k/2) has density ∝ (sin θ cos θ)^(k − 1) in θ, symmetric about π/4,
  // and Welch's df depends on F only through F² + (1 − F)²: the midpoint rule on (0, π/4).
  out.statistic_df = 2.0 * k;
  constexpr int kPoints = 128;
  double total = 0;
  for (int i = 0; i < kPoints; ++i) {
    const double theta = (i + 0.5) * (M_PI / 4.0) / kPoints;
    const double f = std::sin(theta) * std::sin(theta);
    const double w = std::exp((k - 1.0) * std::log(std::sin(2.0 * theta) / 2.0));
    const double nu = k / (f * f + (1.0 - f) * (1.0 - f));
    out.c.push_back(StudentTQuantile(1.0 - tail, nu));
    out.weight.push_back(w);
    total += w;
  }
  for (double& w : out.weight) w /= total;
  return out;
}

double Power(const CriticalValues& cv, double lambda) {
  double p = 0;
  for (std::size_t i = 0; i < cv.c.size(); ++i) {
    p += cv.weight[i] * NoncentralTUpperTail(cv.c[i], cv.statistic_df, lambda);
  }
  return p;
}

double SolveLambda(const CriticalValues& cv, double power) {
  double lo = 0, hi = 1;
  while (Power(cv, hi) < power) {
    lo = hi;
    hi *= 2;
    if (hi > 1e6) return kInf;
  }
  while (hi - lo > 1e-9 * std::max(1.0, hi)) {
    const double mid = 0.5 * (lo + hi);
    (Power(cv, mid) < power ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

DetectableChange ChangeFrom(double lambda, double se, double threshold) {
  DetectableChange d;
  d.lambda = lambda;
  d.log_se = se;
  d.up = (1.0 + threshold) * std::exp(lambda * se) - 1.0;
  d.down = 1.0 - (1.0 - threshold) * std::exp(-lambda * se);
  return d;
}

}  // namespace

absl::Status PowerOptions::Validate() const {
  if (!(threshold >= 0 && threshold < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("threshold must be in [0, 1), got ", threshold));
  }
  if (!(confidence > 0 && confidence < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("confidence must be in (0, 1), got ", confidence));
  }
  if (!(power > 0.5 && power < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("power must be in (0.5, 1), got ", power));
  }
  if (family < 1) return absl::InvalidArgumentError("family must be >= 1");
  return absl::OkStatus();
}

double NoncentralTUpperTail(double c, double df, double lambda) {
  if (std::isnan(c) || std::isnan(lambda) || !(df > 0)) return kNaN;
  if (std::isinf(df)) return NormalCdf(lambda - c);
  // x = log V: the density of x is exp((df/2)·x − eˣ/2) up to a constant, peaked at log df with
  // sd ≈ √(2/df); its left tail falls like exp(df·x/2), its right tail doubly exponentially.
  const double x0 = std::log(df);
  const double sd = std::sqrt(2.0 / df);
  const double lo = x0 - std::max(12.0 * sd, 80.0 / df);
  const double hi = x0 + std::min(5.0, 12.0 * sd);
  constexpr int kSteps = 800;
  const double h = (hi - lo) / kSteps;
  double num = 0, den = 0;
  for (int i = 0; i <= kSteps; ++i) {
    const double x = lo + i * h;
    const double log_w = 0.5 * df * (x - x0) - 0.5 * (std::exp(x) - df);
    const double w = std::exp(log_w) * (i == 0 || i == kSteps ? 0.5 : 1.0);
    num += w * NormalCdf(lambda - c * std::exp(0.5 * x) / std::sqrt(df));
    den += w;
  }
  return num / den;
}

absl::StatusOr<double> PowerAtNoncentrality(PowerDesign design, int sessions, double lambda,
                                            const PowerOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  if (absl::Status st = CheckSessions(design, sessions); !st.ok()) return st;
  if (!std::isfinite(lambda)) return absl::InvalidArgumentError("noncentrality not finite");
  return Power(Critical(design, sessions, options), lambda);
}

absl::StatusOr<double> RequiredNoncentrality(PowerDesign design, int sessions,
                                             const PowerOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  if (absl::Status st = CheckSessions(design, sessions); !st.ok()) return st;
  return SolveLambda(Critical(design, sessions, options), options.power);
}

double LogRatioStandardError(PowerDesign design, int sessions, double per_session_log_sd) {
  const double n = sessions;
  return design == PowerDesign::kPaired ? per_session_log_sd / std::sqrt(n)
                                        : per_session_log_sd * std::sqrt(2.0 / n);
}

DetectableChangeTable::DetectableChangeTable(PowerDesign design, const PowerOptions& options)
    : design_(design), options_(options) {}

absl::StatusOr<DetectableChange> DetectableChangeTable::At(double per_session_log_sd,
                                                           int sessions) {
  if (absl::Status st = options_.Validate(); !st.ok()) return st;
  if (!(per_session_log_sd >= 0) || !std::isfinite(per_session_log_sd)) {
    return absl::InvalidArgumentError(
        absl::StrCat("per-session sd must be finite and >= 0, got ", per_session_log_sd));
  }
  if (absl::Status st = CheckSessions(design_, sessions); !st.ok()) return st;
  auto it = lambda_.find(sessions);
  if (it == lambda_.end()) {
    it = lambda_
             .emplace(sessions, SolveLambda(Critical(design_, sessions, options_), options_.power))
             .first;
  }
  DetectableChange d = ChangeFrom(
      it->second, LogRatioStandardError(design_, sessions, per_session_log_sd), options_.threshold);
  d.sessions = sessions;
  d.df = design_ == PowerDesign::kPaired ? sessions - 1.0 : 2.0 * (sessions - 1.0);
  return d;
}

absl::StatusOr<SessionsNeeded> DetectableChangeTable::SessionsFor(double per_session_log_sd,
                                                                  double target_change,
                                                                  int max_sessions) {
  if (absl::Status st = options_.Validate(); !st.ok()) return st;
  if (!(target_change > 0) || !std::isfinite(target_change)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target change must be > 0, got ", target_change));
  }
  if (max_sessions < 2) return absl::InvalidArgumentError("max_sessions < 2");
  if (target_change <= options_.threshold) {
    return SessionsNeeded{max_sessions, SessionsVerdict::kExceedsMax};
  }
  const auto meets = [&](int n) -> absl::StatusOr<bool> {
    absl::StatusOr<DetectableChange> d = At(per_session_log_sd, n);
    if (!d.ok()) return d.status();
    return std::max(d->up, d->down) <= target_change;
  };
  absl::StatusOr<bool> at_max = meets(max_sessions);
  if (!at_max.ok()) return at_max.status();
  if (!*at_max) return SessionsNeeded{max_sessions, SessionsVerdict::kExceedsMax};
  // The MDC falls with n: bisect for the first n that meets the target.
  int lo = 1, hi = max_sessions;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    absl::StatusOr<bool> ok = meets(mid);
    if (!ok.ok()) return ok.status();
    (*ok ? hi : lo) = mid;
  }
  return SessionsNeeded{hi, SessionsVerdict::kReachable};
}

absl::StatusOr<DetectableChange> MinimumDetectableChange(PowerDesign design,
                                                         double per_session_log_sd, int sessions,
                                                         const PowerOptions& options) {
  return DetectableChangeTable(design, options).At(per_session_log_sd, sessions);
}

absl::StatusOr<SessionsNeeded> SessionsForChange(PowerDesign design, double per_session_log_sd,
                                                 double target_change, const PowerOptions& options,
                                                 int max_sessions) {
  return DetectableChangeTable(design, options)
      .SessionsFor(per_session_log_sd, target_change, max_sessions);
}

absl::StatusOr<DetectableChange> AchievedDetectableChange(const Interval& ratio,
                                                          const PowerOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  if (ratio.bounds == Boundedness::kUnbounded || !(ratio.lower > 0) ||
      !std::isfinite(ratio.upper) || !(ratio.df > 0) || std::isnan(ratio.df)) {
    return absl::FailedPreconditionError(
        "a detectable change needs a bounded log-t interval with degrees of freedom");
  }
  const double t = TwoSidedT(ratio.confidence, ratio.df);
  const double se = (std::log(ratio.upper) - std::log(ratio.lower)) / (2.0 * t);
  const double tail = (1.0 - options.confidence) / (2.0 * static_cast<double>(options.family));
  CriticalValues cv;
  cv.statistic_df = ratio.df;
  cv.c.push_back(std::isinf(ratio.df) ? NormalQuantile(1.0 - tail)
                                      : StudentTQuantile(1.0 - tail, ratio.df));
  cv.weight.push_back(1.0);
  DetectableChange d = ChangeFrom(SolveLambda(cv, options.power), se, options.threshold);
  d.sessions = static_cast<int>(ratio.n_units);
  d.df = ratio.df;
  return d;
}

}  // namespace ladder::stats
