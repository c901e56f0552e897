// Reproducibility between two runs of the same matrix (e.g. a replicate weeks later).
#pragma once

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/stats/summary.h"

namespace ladder::stats {

struct Reproducibility {
  // Per cell, in %: 100 · |a − b| / ((a + b) / 2), in the order given.
  std::vector<double> percent_difference;
  Summary summary;  // of percent_difference (median, mean, max, ...)
};

// `run_a[i]` and `run_b[i]` are the same cell's estimate (e.g. its mean rate) in the two runs;
// the caller aligns cells. Errors: InvalidArgument when sizes differ, when empty, or a value is
// not finite or <= 0.
absl::StatusOr<Reproducibility> CompareRuns(std::span<const double> run_a,
                                            std::span<const double> run_b);

}  // namespace ladder::stats
