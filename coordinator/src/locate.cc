#include "ladder/coordinator/locate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_format.h"
#include "ladder/stats/adaptive.h"

namespace ladder::coordinator {
namespace {

static_assert(matrices::kLocateMinSessions ==
                  stats::kMinDecisionSessions + stats::kCommittedSessions,
              "locate.max_sessions' minimum is the first session a probe can be decided at");

std::string Depth(double depth) { return absl::StrFormat("%.6g", depth); }

// The rungs with a usable ratio estimate, but for the depth `except` (NaN: none).
std::vector<stats::LadderPoint> Points(const std::vector<LocateRung>& rungs, double except) {
  std::vector<stats::LadderPoint> points;
  for (const LocateRung& r : rungs) {
    if (r.depth == except) continue;
    if (r.ratio && r.ratio->estimate > 0 && std::isfinite(r.ratio->estimate)) {
      points.push_back({r.depth, *r.ratio});
    }
  }
  return points;
}

std::string Ratio(const stats::Interval& r) {
  if (r.bounds == stats::Boundedness::kUnbounded) {
    return absl::StrFormat("%.4f (unbounded interval)", r.estimate);
  }
  return absl::StrFormat("%.4f [%.4f, %.4f]", r.estimate, r.lower, r.upper);
}

}  // namespace

LocateStep DecideLocateStep(const LocateConfig& config, const std::vector<LocateRung>& rungs,
                            std::optional<double> current_probe) {
  LocateStep step;
  stats::LocateOptions options;
  options.resolution_octaves = config.resolution_octaves;
  options.min_step = static_cast<double>(config.min_step);
  // 1. The latest probe must be decided before it counts as a rung of the bracket.
  if (current_probe) {
    const auto probe = std::find_if(rungs.begin(), rungs.end(),
                                    [&](const LocateRung& r) { return r.depth == *current_probe; });
    const int units = probe == rungs.end() ? 0 : probe->units;
    step.sessions = units;
    std::string why;
    if (probe == rungs.end() || !probe->ratio) {
      why = absl::StrFormat("probe at %s has no ratio (%s)", Depth(*current_probe),
                            probe == rungs.end() ? "no cells" : probe->error);
    } else {
      const stats::Interval& r = *probe->ratio;
      step.half_width = r.RelativeHalfWidth();
      if (r.scope == stats::IntervalScope::kWithinSessionOnly) {
        why = absl::StrFormat(
            "probe at %s: ratio %s from one session covers only "
            "within-session noise",
            Depth(*current_probe), Ratio(r));
      } else if (!probe->decision) {
        // The verdict is read from the first n − kCommittedSessions sessions, projected to n:
        // the last ones enter the reported interval unselected (docs/statistics.md, "Coverage
        // after stopping").
        why = absl::StrFormat("probe at %s: ratio %s from %d sessions; no decision yet (%s)",
                              Depth(*current_probe), Ratio(r), static_cast<int>(r.n_units),
                              probe->decision_error);
      } else if (const stats::ProbeVerdict verdict = stats::ClassifyProbe(*probe->decision);
                 verdict == stats::ProbeVerdict::kUndecided) {
        why = absl::StrFormat(
            "probe at %s: ratio %s projected from the first %d of %d sessions neither excludes 1 "
            "nor lies within 1 ± 1 %%",
            Depth(*current_probe), Ratio(*probe->decision),
            static_cast<int>(probe->decision->n_units), static_cast<int>(r.n_units));
      } else if (verdict == stats::ProbeVerdict::kExcludesOne &&
                 (probe->decision->estimate < 1.0) != (r.estimate < 1.0)) {
        // The bracket takes the sign of the estimate over all sessions: a verdict it contradicts
        // decides nothing.
        why = absl::StrFormat(
            "probe at %s: ratio %s projected from the first %d sessions excludes 1, but over "
            "all %d it is %s, across 1",
            Depth(*current_probe), Ratio(*probe->decision),
            static_cast<int>(probe->decision->n_units), static_cast<int>(r.n_units), Ratio(r));
      }
    }
    if (!why.empty()) {
      step.depth = *current_probe;
      // The bracket the probe was placed in: the crossing of the other rungs.
      const auto others = Points(rungs, *current_probe);
      if (others.size() >= 2) {
        const auto plan = stats::PlanCrossoverProbe(others, options);
        if (plan.ok() && plan->status != stats::LocateStatus::kNoCrossing) {
          step.bracket_lower = plan->bracket_lower;
          step.bracket_upper = plan->bracket_upper;
        }
      }
      if (units < config.max_sessions) {
        step.action = LocateAction::kAddSession;
        step.reason =
            absl::StrFormat("%s: session %d of at most %d", why, units + 1, config.max_sessions);
      } else {
        step.action = LocateAction::kStop;
        step.outcome = "budget_spent";
        step.reason = absl::StrFormat(
            "budget spent: %s after %d of max_sessions %d; the "
            "crossover is near %s",
            why, units, config.max_sessions, Depth(*current_probe));
      }
      return step;
    }
  }

  // 2. Bracket the first sign change over every rung with a ratio.
  const std::vector<stats::LadderPoint> points =
      Points(rungs, std::numeric_limits<double>::quiet_NaN());
  step.action = LocateAction::kStop;
  if (points.size() < 2) {
    step.outcome = "no_data";
    step.reason = absl::StrFormat("%d rung(s) with a ratio; a crossing is bracketed between two",
                                  points.size());
    return step;
  }
  const auto plan = stats::PlanCrossoverProbe(points, options);
  if (!plan.ok()) {
    step.outcome = "no_data";
    step.reason = std::string(plan.status().message());
    return step;
  }
  if (plan->status != stats::LocateStatus::kNoCrossing) {
    step.bracket_lower = plan->bracket_lower;
    step.bracket_upper = plan->bracket_upper;
  }
  const std::string bracket = absl::StrFormat("[%s, %s] (%.3f octave)", Depth(plan->bracket_lower),
                                              Depth(plan->bracket_upper), plan->width_octaves);
  const std::string warning =
      plan->sign_changes > 1
          ? absl::StrFormat("; %d sign changes: the ladder is not monotone", plan->sign_changes)
          : "";
  switch (plan->status) {
    case stats::LocateStatus::kNoCrossing:
      step.outcome = "no_crossing";
      step.reason = absl::StrFormat("no crossing: the ratio stays on one side of 1 over %d rungs",
                                    points.size());
      return step;
    case stats::LocateStatus::kResolved:
      step.outcome = "resolved";
      step.reason = absl::StrFormat("resolved: bracket %s is narrower than %.3g octave%s", bracket,
                                    config.resolution_octaves, warning);
      return step;
    case stats::LocateStatus::kStepLimited:
      step.outcome = "step_limited";
      step.reason = absl::StrFormat(
          "step-limited: no multiple of min_step %d lies inside "
          "bracket %s%s",
          config.min_step, bracket, warning);
      return step;
    case stats::LocateStatus::kProbe:
      break;
  }
  const auto existing = std::find_if(
      rungs.begin(), rungs.end(), [&](const LocateRung& r) { return r.depth == plan->next_probe; });
  if (existing != rungs.end()) {
    // Only a rung without a ratio can sit strictly inside the bracket: it was measured and
    // failed. Probing it again would repeat a failure.
    step.outcome = "no_data";
    step.reason = absl::StrFormat(
        "the midpoint %s of bracket %s was measured without a ratio "
        "(%s)",
        Depth(plan->next_probe), bracket, existing->error);
    return step;
  }
  step.action = LocateAction::kProbe;
  step.depth = plan->next_probe;
  step.reason = absl::StrFormat(
      "sign change in bracket %s, not narrower than %.3g octave: "
      "probe its log2-midpoint %s%s",
      bracket, config.resolution_octaves, Depth(plan->next_probe), warning);
  return step;
}

}  // namespace ladder::coordinator
