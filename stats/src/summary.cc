#include "ladder/stats/summary.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "ladder/stats/distributions.h"

namespace ladder::stats {

absl::StatusOr<Summary> Summarize(std::span<const double> values) {
  if (values.empty()) return absl::InvalidArgumentError("cannot summarise an empty sample");
  for (double v : values) {
    if (!std::isfinite(v))
      return absl::InvalidArgumentError(absl::StrCat("value ", v, " is not finite"));
  }
  std::vector<double> sorted(values.begin(), values.end());
  std::sort(sorted.begin(), sorted.end());
  Summary s;
  s.n = sorted.size();
  s.median = internal::QuantileSorted(sorted, 0.5);
  s.mean = internal::Mean(sorted);
  s.sd = std::sqrt(internal::Variance(sorted));
  s.cv = s.mean != 0.0 ? s.sd / s.mean : internal::kNaN;
  s.min = sorted.front();
  s.max = sorted.back();
  return s;
}

absl::Status IntervalOptions::Validate() const {
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("confidence ", confidence, " not in (0, 1)"));
  }
  if (min_sessions < 2) {
    return absl::InvalidArgumentError(absl::StrCat("min_sessions ", min_sessions, " < 2"));
  }
  return absl::OkStatus();
}

std::string SessionsNeededNote(std::size_t min_sessions, std::size_t measured) {
  return absl::StrCat("an interval needs at least ", min_sessions, " sessions; ", measured,
                      " measured");
}

absl::StatusOr<Interval> CellMeanInterval(std::span<const Observation> observations,
                                          const IntervalOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  bool log_scale = options.scale == MeanScale::kLog;
  if (options.scale == MeanScale::kAuto) {
    log_scale = !observations.empty();
    for (const Observation& o : observations) log_scale = log_scale && o.value > 0.0;
  }
  absl::StatusOr<Hierarchy> h =
      BuildHierarchy(observations, log_scale ? ValueDomain::kPositive : ValueDomain::kAnyFinite);
  if (!h.ok()) return h.status();

  // The units whose spread gives the interval: session means normally; with one session, the
  // process means, or with one process, the rounds.
  std::vector<double> units;
  Interval out;
  out.confidence = options.confidence;
  if (h->sessions.size() >= 2) {
    if (h->sessions.size() < options.min_sessions) {
      return absl::FailedPreconditionError(
          SessionsNeededNote(options.min_sessions, h->sessions.size()));
    }
    for (const SessionGroup& s : h->sessions) units.push_back(SessionMean(s));
    out.scope = IntervalScope::kBetweenSessions;
  } else {
    const SessionGroup& only = h->sessions.front();
    if (only.processes.size() >= 2) {
      for (const ProcessGroup& p : only.processes) units.push_back(ProcessMean(p));
    } else {
      units = only.processes.front().values;
    }
    out.scope = IntervalScope::kWithinSessionOnly;
    out.note = std::string(kWithinSessionNote);
  }
  if (units.size() < 2) {
    return absl::FailedPreconditionError("a single observation has no interval");
  }
  const std::string of =
      out.scope == IntervalScope::kBetweenSessions
          ? "session means"
          : (h->sessions.front().processes.size() >= 2 ? "process means" : "rounds");
  if (log_scale) {
    for (double& u : units) u = std::log(u);
  }
  const double n = static_cast<double>(units.size());
  const double mean = internal::Mean(units);
  const double se = std::sqrt(internal::Variance(units) / n);
  out.df = n - 1.0;
  out.n_units = units.size();
  const double t = TwoSidedT(options.confidence, out.df);
  if (log_scale) {
    out.estimate = std::exp(mean);
    out.lower = std::exp(mean - t * se);
    out.upper = std::exp(mean + t * se);
    out.estimand = "geometric mean of " + of;
  } else {
    out.estimate = mean;
    out.lower = mean - t * se;
    out.upper = mean + t * se;
    out.estimand = "mean of " + of;
  }
  return out;
}

}  // namespace ladder::stats
