#include "ladder/stats/compare.h"

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

}  // namespace ladder::stats
