// Crossover location (`locate`): what the coordinator does next for one line of a run once every
// unit holding the line's cells has ended. A line is the cells that differ only in the located
// axis (e.g. depth) and the pair axis; its rungs are the depths measured so far, declared or
// probed.
//
// The rule (docs/statistics.md, "Locating the crossover"):
//   1. while the latest probe's ratio interval projected from all but its last
//      stats::kCommittedSessions sessions (stats::ProjectedRatioInterval, LocateRung::decision)
//      neither excludes 1 nor lies within 1 ± 1 % (stats::ClassifyProbe), add a paired session at
//      the probe, up to `max_sessions`, then stop with "budget_spent";
//   2. otherwise bracket the first sign change of log(ratio) over the rungs
//      (stats::PlanCrossoverProbe) and probe its log2-midpoint, or stop: "resolved" (bracket
//      narrower than the resolution), "step_limited" (no multiple of min_step inside),
//      "no_crossing", or "no_data" (fewer than two rungs with a ratio).
// Pure and thread-safe; the scheduler gathers the inputs and records each step.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/matrices/matrix.h"
#include "ladder/stats/interval.h"

namespace ladder::coordinator {

// The run's `locate` options, as stored in runs.locate: matrices owns them and their JSON
// (matrices::LocateToJson / LocateFromJson).
using matrices::LocateConfig;

// One depth of a line as measured so far.
struct LocateRung {
  double depth = 0.0;
  std::optional<stats::Interval> ratio;  // PairedRatioInterval of B / A; nullopt: see error
  std::string error;
  // What a probe is decided on: stats::ProjectedRatioInterval of the same sessions (the first
  // n − kCommittedSessions of them, projected to n); nullopt: see decision_error (e.g. too few
  // sessions yet).
  std::optional<stats::Interval> decision;
  std::string decision_error;
  int units = 0;  // replicate units at this depth (any terminal state)
};

enum class LocateAction { kProbe, kAddSession, kStop };

struct LocateStep {
  static constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  LocateAction action = LocateAction::kStop;
  double depth = kNaN;  // kProbe: the new depth; kAddSession: the probe being replicated
  std::string outcome;  // kStop: resolved | step_limited | budget_spent | no_crossing | no_data
  std::string reason;   // for people: why, with the figures
  double bracket_lower = kNaN, bracket_upper = kNaN;
  int sessions = 0;          // units at the probe (or 0)
  double half_width = kNaN;  // the probe's relative ratio half-width, when known
};

// `current_probe`: the depth of the latest probe decision, if any. `rungs` in any order.
LocateStep DecideLocateStep(const LocateConfig& config, const std::vector<LocateRung>& rungs,
                            std::optional<double> current_probe);

}  // namespace ladder::coordinator
