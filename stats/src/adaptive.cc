#include "ladder/stats/adaptive.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/ratio.h"
#include "ladder/stats/summary.h"

namespace ladder::stats {

bool NeedsMoreSessions(const Interval& ratio, double target_relative_half_width) {
  if (ratio.bounds == Boundedness::kUnbounded) return true;
  const double hw = ratio.RelativeHalfWidth();
  return !(hw <= target_relative_half_width);  // NaN counts as "needs more"
}

double WidestRatioHalfWidth(std::span<const PairedSample> comparisons) {
  double widest = 0;
  for (const PairedSample& sample : comparisons) {
    auto interval = PairedRatioInterval(sample, RatioOptions{});
    const double width = !interval.ok() || interval->scope != IntervalScope::kBetweenSessions ||
                                 interval->n_units < kMinSessionsForInterval
                             ? std::numeric_limits<double>::infinity()
                             : interval->RelativeHalfWidth();
    widest = std::max(widest, width);
  }
  return widest;
}

absl::StatusOr<Interval> ProjectedRatioInterval(const PairedSample& sample, int committed,
                                                double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError("confidence must be in (0, 1)");
  }
  if (committed < 0) return absl::InvalidArgumentError("committed sessions must be >= 0");
  absl::StatusOr<std::vector<SessionRatio>> per_session = SessionRatios(sample);
  if (!per_session.ok()) return per_session.status();
  const std::size_t n = per_session->size();
  const std::size_t decided = n > static_cast<std::size_t>(committed) ? n - committed : 0;
  if (decided < static_cast<std::size_t>(kMinDecisionSessions)) {
    return absl::FailedPreconditionError(
        absl::StrCat(n, " sessions: a stop is decided from the first n - ", committed,
                     " and needs ", kMinDecisionSessions, " of them"));
  }
  std::sort(per_session->begin(), per_session->end(),
            [](const SessionRatio& x, const SessionRatio& y) { return x.session < y.session; });
  std::vector<double> l;
  for (std::size_t s = 0; s < decided; ++s) l.push_back((*per_session)[s].log_ratio);
  const double mean_l = internal::Mean(l);
  const double se = std::sqrt(internal::Variance(l) / static_cast<double>(n));
  Interval out;
  out.confidence = confidence;
  out.df = static_cast<double>(n - 1);
  out.n_units = decided;
  const double t = TwoSidedT(confidence, out.df);
  out.estimate = std::exp(mean_l);
  out.lower = std::exp(mean_l - t * se);
  out.upper = std::exp(mean_l + t * se);
  out.estimand = "B/A: geometric mean of per-session ratios, projected from the first sessions";
  out.note = absl::StrCat("projected to ", n, " sessions from the first ", decided);
  return out;
}

double WidestProjectedHalfWidth(std::span<const PairedSample> comparisons, int committed) {
  double widest = 0;
  for (const PairedSample& sample : comparisons) {
    auto interval = ProjectedRatioInterval(sample, committed);
    widest = std::max(widest, interval.ok() ? interval->RelativeHalfWidth()
                                            : std::numeric_limits<double>::infinity());
  }
  return widest;
}

PairedSample OnlyPairedSessions(const PairedSample& sample) {
  std::set<std::int64_t> in_a, in_b;
  for (const Observation& o : sample.a) in_a.insert(o.session);
  for (const Observation& o : sample.b) in_b.insert(o.session);
  PairedSample paired;
  for (const Observation& o : sample.a) {
    if (in_b.count(o.session)) paired.a.push_back(o);
  }
  for (const Observation& o : sample.b) {
    if (in_a.count(o.session)) paired.b.push_back(o);
  }
  return paired;
}

ProbeVerdict ClassifyProbe(const Interval& ratio, double tolerance) {
  if (ratio.bounds == Boundedness::kUnbounded) return ProbeVerdict::kUndecided;
  if (ratio.lower > 1.0 || ratio.upper < 1.0) return ProbeVerdict::kExcludesOne;
  if (ratio.lower >= 1.0 - tolerance && ratio.upper <= 1.0 + tolerance) {
    return ProbeVerdict::kWithinTolerance;
  }
  return ProbeVerdict::kUndecided;
}

absl::Status LocateOptions::Validate() const {
  if (!(resolution_octaves > 0.0) || !std::isfinite(resolution_octaves)) {
    return absl::InvalidArgumentError("resolution_octaves must be > 0");
  }
  if (!(min_step > 0.0) || !std::isfinite(min_step)) {
    return absl::InvalidArgumentError("min_step must be > 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<LocatePlan> PlanCrossoverProbe(std::span<const LadderPoint> points,
                                              const LocateOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  if (points.size() < 2) return absl::InvalidArgumentError("need at least two rungs");
  std::vector<LadderPoint> sorted(points.begin(), points.end());
  for (const LadderPoint& p : sorted) {
    if (!(p.depth > 0.0) || !std::isfinite(p.depth) || !(p.ratio.estimate > 0.0) ||
        !std::isfinite(p.ratio.estimate)) {
      return absl::InvalidArgumentError(absl::StrCat("rung at depth ", p.depth, " with ratio ",
                                                     p.ratio.estimate, ": both must be > 0"));
    }
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const LadderPoint& x, const LadderPoint& y) { return x.depth < y.depth; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i].depth == sorted[i - 1].depth) {
      return absl::InvalidArgumentError(absl::StrCat("depth ", sorted[i].depth, " repeated"));
    }
  }

  LocatePlan plan;
  const auto sign = [](const LadderPoint& p) {
    const double l = std::log(p.ratio.estimate);
    return l > 0.0 ? 1 : (l < 0.0 ? -1 : 0);
  };
  int first = -1;  // index i of the first bracket [i, i+1]
  for (std::size_t i = 0; i + 1 < sorted.size(); ++i) {
    const int s0 = sign(sorted[i]);
    const int s1 = sign(sorted[i + 1]);
    if (s0 == 0 || s0 * s1 < 0) {
      ++plan.sign_changes;
      if (first < 0) first = static_cast<int>(i);
    }
  }
  if (sign(sorted.back()) == 0) {  // the loop above never looks at the last rung as s0
    ++plan.sign_changes;
    if (first < 0) first = static_cast<int>(sorted.size()) - 1;
  }
  if (first < 0) {
    plan.status = LocateStatus::kNoCrossing;
    return plan;
  }
  const LadderPoint& lo = sorted[static_cast<std::size_t>(first)];
  if (sign(lo) == 0) {  // a rung sits exactly on ratio 1
    plan.status = LocateStatus::kResolved;
    plan.bracket_lower = plan.bracket_upper = lo.depth;
    plan.width_octaves = 0.0;
    return plan;
  }
  const LadderPoint& hi = sorted[static_cast<std::size_t>(first) + 1];
  plan.bracket_lower = lo.depth;
  plan.bracket_upper = hi.depth;
  plan.width_octaves = std::log2(hi.depth / lo.depth);
  if (plan.width_octaves < options.resolution_octaves) {
    plan.status = LocateStatus::kResolved;
    return plan;
  }
  // The log2-midpoint, moved to the multiple of min_step closest to it (in log2) that lies
  // strictly inside the bracket.
  const double mid = std::exp2(0.5 * (std::log2(lo.depth) + std::log2(hi.depth)));
  const double step = options.min_step;
  const double below = std::floor(mid / step) * step;
  double best = 0.0;
  double best_distance = internal::kInf;
  for (double c : {below, below + step}) {
    if (!(c > lo.depth && c < hi.depth)) continue;
    const double distance = std::fabs(std::log2(c / mid));
    if (distance < best_distance) {
      best = c;
      best_distance = distance;
    }
  }
  if (!std::isfinite(best_distance)) {
    plan.status = LocateStatus::kStepLimited;
    return plan;
  }
  plan.status = LocateStatus::kProbe;
  plan.next_probe = best;
  return plan;
}

absl::StatusOr<LinearFit> FitLine(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size()) return absl::InvalidArgumentError("x and y differ in length");
  if (x.size() < 3) return absl::InvalidArgumentError("a line with an interval needs >= 3 points");
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) {
      return absl::InvalidArgumentError(absl::StrCat("point ", i, " is not finite"));
    }
  }
  LinearFit fit;
  fit.n = x.size();
  fit.x_mean = internal::Mean(x);
  fit.y_mean = internal::Mean(y);
  double sxy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    fit.sxx += (x[i] - fit.x_mean) * (x[i] - fit.x_mean);
    sxy += (x[i] - fit.x_mean) * (y[i] - fit.y_mean);
  }
  if (!(fit.sxx > 0.0)) return absl::InvalidArgumentError("all x are equal");
  fit.slope = sxy / fit.sxx;
  fit.intercept = fit.y_mean - fit.slope * fit.x_mean;
  double rss = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - fit.intercept - fit.slope * x[i];
    rss += r * r;
  }
  fit.residual_sd = std::sqrt(rss / static_cast<double>(fit.n - 2));
  return fit;
}

absl::StatusOr<Interval> CrossoverFromLinearFit(std::span<const double> depth,
                                                std::span<const double> latency_difference,
                                                double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError("confidence not in (0, 1)");
  }
  absl::StatusOr<LinearFit> fit = FitLine(depth, latency_difference);
  if (!fit.ok()) return fit.status();
  // root = x̄ + ρ with ρ = (−ȳ) / slope; ȳ and slope are uncorrelated in the centred fit.
  const double s2 = fit->residual_sd * fit->residual_sd;
  const QuotientMoments m{-fit->y_mean, fit->slope, s2 / static_cast<double>(fit->n), s2 / fit->sxx,
                          0.0};
  const double df = static_cast<double>(fit->n - 2);
  Interval out = FiellerQuotient(m, TwoSidedT(confidence, df));
  out.estimate += fit->x_mean;
  out.lower += fit->x_mean;
  out.upper += fit->x_mean;
  out.confidence = confidence;
  out.df = df;
  out.n_units = fit->n;
  if (out.bounds == Boundedness::kUnbounded) {
    out.note = "unbounded: the slope is not significantly different from zero";
  }
  return out;
}

}  // namespace ladder::stats
