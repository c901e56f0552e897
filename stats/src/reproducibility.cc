#include "ladder/stats/reproducibility.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace ladder::stats {

absl::StatusOr<Reproducibility> CompareRuns(std::span<const double> run_a,
                                            std::span<const double> run_b) {
  if (run_a.size() != run_b.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("runs have ", run_a.size(), " and ", run_b.size(), " cells"));
  }
  if (run_a.empty()) return absl::InvalidArgumentError("no cells to compare");
  Reproducibility out;
  for (std::size_t i = 0; i < run_a.size(); ++i) {
    const double a = run_a[i];
    const double b = run_b[i];
    if (!std::isfinite(a) || !std::isfinite(b) || !(a > 0.0) || !(b > 0.0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("cell ", i, ": values ", a, " and ", b, " must be finite and > 0"));
    }
    out.percent_difference.push_back(100.0 * std::fabs(a - b) / (0.5 * (a + b)));
  }
  absl::StatusOr<Summary> s = Summarize(out.percent_difference);
  if (!s.ok()) return s.status();
  out.summary = *s;
  return out;
}

}  // namespace ladder::stats
