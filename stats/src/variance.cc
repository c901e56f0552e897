#include "ladder/stats/variance.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "internal.h"
#include "ladder/stats/distributions.h"
#include "ladder/stats/ratio.h"

namespace ladder::stats {
namespace {

using internal::kNaN;

int ClampRepeats(double r, int max_repeats) {
  if (!(r >= 1.0)) return 1;  // also maps 0 / 0 (NaN) to 1
  if (r >= static_cast<double>(max_repeats)) return max_repeats;
  return static_cast<int>(std::ceil(r));
}

// r_i = ceil(sqrt(c_{i+1}·T_i² / (c_i·T_{i+1}²))) with the degenerate cases made explicit.
int OptimalRepeat(double t2_lower, double t2_upper, double cost_lower, double cost_upper,
                  int max_repeats, RepeatBound* bound) {
  *bound = RepeatBound::kOptimum;
  if (t2_lower <= 0.0) {  // nothing to average away at this level
    *bound = RepeatBound::kNoVariance;
    return 1;
  }
  if (t2_upper <= 0.0 || cost_lower <= 0.0) {
    *bound = RepeatBound::kAtCap;
    return max_repeats;
  }
  const int r = ClampRepeats(std::ceil(std::sqrt(cost_upper * t2_lower / (cost_lower * t2_upper))),
                             max_repeats);
  if (r >= max_repeats) *bound = RepeatBound::kAtCap;
  return r;
}

}  // namespace

absl::StatusOr<VarianceComponents> EstimateVarianceComponents(
    std::span<const Observation> observations) {
  absl::StatusOr<Hierarchy> h = BuildHierarchy(observations, ValueDomain::kPositive);
  if (!h.ok()) return h.status();
  absl::StatusOr<BalancedShape> shape = CheckBalanced(*h);
  if (!shape.ok()) return shape.status();
  const std::size_t n = shape->sessions;
  const std::size_t r2 = shape->processes_per_session;
  const std::size_t r1 = shape->rounds_per_process;
  if (r1 < 2) {
    return absl::FailedPreconditionError(
        "variance components need at least two rounds per process");
  }

  // Means of log(value) at each level.
  double ss1 = 0.0;  // rounds around their process mean
  double ss2 = 0.0;  // process means around their session mean
  std::vector<double> session_means;
  for (const SessionGroup& s : h->sessions) {
    std::vector<double> process_means;
    for (const ProcessGroup& p : s.processes) {
      std::vector<double> logs;
      for (double v : p.values) logs.push_back(std::log(v));
      const double m = internal::Mean(logs);
      for (double y : logs) ss1 += (y - m) * (y - m);
      process_means.push_back(m);
    }
    const double ms = internal::Mean(process_means);
    for (double m : process_means) ss2 += (m - ms) * (m - ms);
    session_means.push_back(ms);
  }

  VarianceComponents vc;
  vc.replicates = {r1, r2, n};
  vc.mean_log = internal::Mean(session_means);
  const double dn = static_cast<double>(n);
  const double d2 = static_cast<double>(r2);
  const double d1 = static_cast<double>(r1);
  vc.s2[kRound] = ss1 / (dn * d2 * (d1 - 1.0));
  vc.s2[kProcess] = r2 >= 2 ? ss2 / (dn * (d2 - 1.0)) : kNaN;
  vc.s2[kSession] = n >= 2 ? internal::Variance(session_means) : kNaN;
  vc.df = {dn * d2 * (d1 - 1.0), dn * (d2 - 1.0), dn - 1.0};

  // T_i² = S_i² − S_j² / (r_j ··· r_{i−1}) where j is the nearest replicated level below i (an
  // unreplicated level has r = 1 and contributes nothing to the divisor).
  vc.t2[kRound] = vc.s2[kRound];
  for (std::size_t i = 1; i < kNumLevels; ++i) {
    if (std::isnan(vc.s2[i])) {
      vc.t2[i] = kNaN;
      continue;
    }
    std::size_t j = i - 1;
    while (std::isnan(vc.s2[j])) --j;  // level 0 (rounds) is always replicated here
    double divisor = 1.0;
    for (std::size_t k = j; k < i; ++k) divisor *= static_cast<double>(vc.replicates[k]);
    vc.t2[i] = std::max(0.0, vc.s2[i] - vc.s2[j] / divisor);
  }
  double total = 0.0;
  for (double t : vc.t2) {
    if (!std::isnan(t)) total += t;
  }
  for (std::size_t i = 0; i < kNumLevels; ++i) {
    vc.share[i] = std::isnan(vc.t2[i]) ? kNaN : (total > 0.0 ? vc.t2[i] / total : 0.0);
  }
  if (r2 < 2) {
    vc.note =
        "one process per session: process and session variance are not separable; the "
        "session component holds both";
  }
  if (n < 2) {
    if (!vc.note.empty()) vc.note += "; ";
    vc.note += "one session: between-session variance is unknown";
  }
  return vc;
}

absl::Status LevelCosts::Validate() const {
  const bool ok = std::isfinite(round) && std::isfinite(process) && std::isfinite(session) &&
                  round > 0.0 && process >= 0.0 && session >= 0.0;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("costs must be finite, >= 0, round > 0; got ",
                                                   round, ", ", process, ", ", session));
  }
  return absl::OkStatus();
}

absl::StatusOr<RepeatPlan> OptimalRepeats(const VarianceComponents& components,
                                          const LevelCosts& costs, int max_repeats) {
  if (absl::Status st = costs.Validate(); !st.ok()) return st;
  if (max_repeats < 1) return absl::InvalidArgumentError("max_repeats < 1");
  for (double t : components.t2) {
    if (std::isnan(t)) {
      return absl::FailedPreconditionError(
          "optimal repeats need every level's variance; some level was not replicated");
    }
  }
  RepeatPlan plan;
  plan.rounds_per_process =
      OptimalRepeat(components.t2[kRound], components.t2[kProcess], costs.round, costs.process,
                    max_repeats, &plan.rounds_bound);
  plan.processes_per_session =
      OptimalRepeat(components.t2[kProcess], components.t2[kSession], costs.process, costs.session,
                    max_repeats, &plan.processes_bound);
  return plan;
}

absl::Status SessionsNeededOptions::Validate() const {
  if (!(target_relative_half_width > 0.0) || !std::isfinite(target_relative_half_width)) {
    return absl::InvalidArgumentError("target_relative_half_width must be > 0");
  }
  if (!(confidence > 0.0 && confidence < 1.0)) {
    return absl::InvalidArgumentError("confidence not in (0, 1)");
  }
  if (max_sessions < 2) return absl::InvalidArgumentError("max_sessions < 2");
  return absl::OkStatus();
}

absl::StatusOr<SessionsNeeded> SessionsNeededForSd(double per_session_log_sd,
                                                   const SessionsNeededOptions& options) {
  if (absl::Status st = options.Validate(); !st.ok()) return st;
  if (!(per_session_log_sd >= 0.0) || !std::isfinite(per_session_log_sd)) {
    return absl::InvalidArgumentError(absl::StrCat("sd ", per_session_log_sd, " is not >= 0"));
  }
  const double target = std::log1p(options.target_relative_half_width);
  const auto meets = [&](int n) {
    return TwoSidedT(options.confidence, n - 1.0) * per_session_log_sd /
               std::sqrt(static_cast<double>(n)) <=
           target;
  };
  if (!meets(options.max_sessions)) {
    return SessionsNeeded{options.max_sessions, SessionsVerdict::kExceedsMax};
  }
  // t(n−1)/√n decreases in n, so bisect for the first n that meets the target.
  int lo = 1;  // does not meet (n = 1 has no interval)
  int hi = options.max_sessions;
  while (hi - lo > 1) {
    const int mid = lo + (hi - lo) / 2;
    if (meets(mid)) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return SessionsNeeded{hi, SessionsVerdict::kReachable};
}

absl::StatusOr<SessionsNeeded> SessionsNeededFor(const VarianceComponents& components,
                                                 const RepeatPlan& design,
                                                 const SessionsNeededOptions& options) {
  if (design.rounds_per_process < 1 || design.processes_per_session < 1) {
    return absl::InvalidArgumentError("design repeats must be >= 1");
  }
  if (std::isnan(components.t2[kSession])) {
    return absl::FailedPreconditionError("between-session variance unknown (one session)");
  }
  // An unidentified process level is already inside the session component.
  const double t2_process = std::isnan(components.t2[kProcess]) ? 0.0 : components.t2[kProcess];
  const double r1 = design.rounds_per_process;
  const double r2 = design.processes_per_session;
  const double var = components.t2[kSession] + t2_process / r2 + components.t2[kRound] / (r1 * r2);
  return SessionsNeededForSd(std::sqrt(var), options);
}

absl::StatusOr<ArmSessionVariance> DecomposeArmBySession(const PairedSample& sample) {
  absl::StatusOr<std::vector<SessionRatio>> ratios = SessionRatios(sample);
  if (!ratios.ok()) return ratios.status();
  const std::size_t n = ratios->size();
  if (n < 2) return absl::FailedPreconditionError("the decomposition needs at least two sessions");
  std::vector<double> l;
  std::vector<double> session_level;  // ȳ_·s, the mean of the two arms' log means
  for (const SessionRatio& r : *ratios) {
    l.push_back(r.log_ratio);
    session_level.push_back(0.5 * (std::log(r.mean_a) + std::log(r.mean_b)));
  }
  ArmSessionVariance out;
  out.sessions = n;
  out.log_ratio_mean = internal::Mean(l);
  const double ms_session = 2.0 * internal::Variance(session_level);
  out.interaction_ms = 0.5 * internal::Variance(l);
  out.session_main = std::max(0.0, 0.5 * (ms_session - out.interaction_ms));

  // Within-session noise of one y_as: var(log process means) / n_processes, averaged.
  double sum = 0.0;
  std::size_t count = 0;
  bool estimable = true;
  for (const std::vector<Observation>* arm : {&sample.a, &sample.b}) {
    absl::StatusOr<Hierarchy> h = BuildHierarchy(*arm, ValueDomain::kPositive);
    if (!h.ok()) return h.status();
    for (const SessionGroup& s : h->sessions) {
      if (s.processes.size() < 2) {
        estimable = false;
        break;
      }
      std::vector<double> logs;
      for (const ProcessGroup& p : s.processes) logs.push_back(std::log(ProcessMean(p)));
      sum += internal::Variance(logs) / static_cast<double>(logs.size());
      ++count;
    }
  }
  out.within_session_noise = estimable && count > 0 ? sum / static_cast<double>(count) : kNaN;
  out.interaction_net = std::isnan(out.within_session_noise)
                            ? kNaN
                            : std::max(0.0, out.interaction_ms - out.within_session_noise);
  return out;
}

}  // namespace ladder::stats
