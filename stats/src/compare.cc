#include "ladder/stats/compare.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "ladder/stats/distributions.h"

namespace ladder::stats {
namespace {

absl::StatusOr<std::vector<double>> Logs(std::span<const double> values, const char* run) {
  std::vector<double> out;
  for (double v : values) {
    if (!std::isfinite(v) || !(v > 0.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("run ", run, ": session mean ", v, " is not a finite value > 0"));
    }
    out.push_back(std::log(v));
  }
  if (out.size() < 2) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run, " has ", out.size(),
                     " session(s): comparing runs needs at least 2 sessions in each"));
  }
  return out;
}

}  // namespace

absl::StatusOr<Interval> UnpairedLogRatioInterval(std::span<const double> session_means_a,
                                                  std::span<const double> session_means_b,
                                                  double confidence) {
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("confidence ", confidence, " not in (0, 1)"));
  }
  absl::StatusOr<std::vector<double>> ya = Logs(session_means_a, "A");
  if (!ya.ok()) return ya.status();
  absl::StatusOr<std::vector<double>> yb = Logs(session_means_b, "B");
  if (!yb.ok()) return yb.status();
  const double na = static_cast<double>(ya->size());
  const double nb = static_cast<double>(yb->size());
  const double va = internal::Variance(*ya) / na;
  const double vb = internal::Variance(*yb) / nb;
  const double v[] = {va, vb};
  const double d[] = {na - 1.0, nb - 1.0};
  Interval out;
  out.confidence = confidence;
  out.df = internal::WelchDf(v, d);
  out.n_units = ya->size() + yb->size();
  const double diff = internal::Mean(*yb) - internal::Mean(*ya);
  const double se = std::sqrt(va + vb);
  const double t = se > 0.0 ? TwoSidedT(confidence, out.df) : 0.0;
  out.estimate = std::exp(diff);
  out.lower = std::exp(diff - t * se);
  out.upper = std::exp(diff + t * se);
  out.estimand = "B/A: ratio of the runs' geometric means of session means";
  return out;
}

ChangeClass ClassifyChange(const Interval& ratio, double threshold) {
  if (ratio.bounds == Boundedness::kUnbounded || !std::isfinite(ratio.lower) ||
      !std::isfinite(ratio.upper)) {
    return ChangeClass::kStraddles;
  }
  if (ratio.lower > 1.0 + threshold) return ChangeClass::kAbove;
  if (ratio.upper < 1.0 - threshold) return ChangeClass::kBelow;
  if (ratio.lower >= 1.0 - threshold && ratio.upper <= 1.0 + threshold) return ChangeClass::kWithin;
  return ChangeClass::kStraddles;
}

std::string_view ChangeClassName(ChangeClass c) {
  switch (c) {
    case ChangeClass::kAbove:
      return "above";
    case ChangeClass::kBelow:
      return "below";
    case ChangeClass::kWithin:
      return "within";
    case ChangeClass::kStraddles:
      break;
  }
  return "straddles";
}

double BandExceedancePValue(const Interval& ratio, double threshold) {
  if (ratio.bounds == Boundedness::kUnbounded || !(ratio.lower > 0.0) ||
      !std::isfinite(ratio.upper) || !(threshold >= 0.0 && threshold < 1.0)) {
    return 1.0;
  }
  const double lo = std::log(ratio.lower);
  const double hi = std::log(ratio.upper);
  const double d = 0.5 * (lo + hi);
  const double up = std::log1p(threshold);
  const double down = std::log1p(-threshold);
  const double t = TwoSidedT(ratio.confidence, ratio.df);
  const double se = std::isfinite(t) && t > 0.0 ? (hi - lo) / (2.0 * t) : 0.0;
  if (!(se > 0.0)) return d > up || d < down ? 0.0 : 1.0;
  const double p_above = StudentTCdf((up - d) / se, ratio.df);  // by symmetry: no cancellation
  const double p_below = StudentTCdf((d - down) / se, ratio.df);
  return std::min(1.0, 2.0 * std::min(p_above, p_below));
}

std::vector<double> HolmAdjust(std::span<const double> p_values) {
  std::vector<double> out(p_values.size(), std::nan(""));
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < p_values.size(); ++i) {
    if (!std::isnan(p_values[i])) order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return p_values[a] < p_values[b]; });
  const double m = static_cast<double>(order.size());
  double running = 0.0;
  for (std::size_t j = 0; j < order.size(); ++j) {
    const double scaled = std::min(1.0, (m - static_cast<double>(j)) * p_values[order[j]]);
    running = std::max(running, scaled);
    out[order[j]] = running;
  }
  return out;
}

}  // namespace ladder::stats
