// Variance components by level (Kalibera & Jones, "Rigorous benchmarking in reasonable time",
// 2013, with the estimator as corrected in their libkalibera), on log(value) so that each
// component reads as a squared relative spread (T = 0.03 ≈ 3 %).
//
// Levels, innermost first: i = 1 round, i = 2 process, i = 3 session; r_1 = rounds per process,
// r_2 = processes per session, n = sessions.
//   S_1² = pooled variance of rounds within processes,
//   S_2² = pooled variance of process means within sessions,
//   S_3² = variance of session means,
//   T_1² = S_1²,  T_i² = max(0, S_i² − S_{i−1}² / r_{i−1}),
// T_i² estimating the variance added at level i (S_i² also carries the noise of the levels below,
// averaged over r_{i−1} units).
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/stats/sample.h"

namespace ladder::stats {

enum Level : std::size_t { kRound = 0, kProcess = 1, kSession = 2 };
inline constexpr std::size_t kNumLevels = 3;

struct VarianceComponents {
  // Replication per level: [kRound] = rounds per process, [kProcess] = processes per session,
  // [kSession] = sessions.
  std::array<std::size_t, kNumLevels> replicates{};
  // S_i² and T_i² on the natural-log scale, indexed by Level. A level with a single replicate
  // cannot be separated from the level above it: its S² and T² are NaN, and the T² of the next
  // replicated level above holds both (see `note`).
  std::array<double, kNumLevels> s2{};
  std::array<double, kNumLevels> t2{};
  // T_i² / Σ T², NaN for unidentified levels.
  std::array<double, kNumLevels> share{};
  // Degrees of freedom behind each S_i²: rounds n·r_2·(r_1 − 1), processes n·(r_2 − 1),
  // sessions n − 1 (0 for an unreplicated level). A component resting on few df (a handful of
  // sessions) is itself uncertain by a large factor: with 2 df its 95 % range spans ~40×.
  std::array<double, kNumLevels> df{};
  double mean_log = 0.0;  // grand mean of log(value)
  std::string note;       // e.g. which levels are confounded
};

// Requires a balanced design (CheckBalanced) with values > 0 and at least two rounds per process.
// Errors: as BuildHierarchy (kPositive); FailedPrecondition when unbalanced or with one round per
// process.
absl::StatusOr<VarianceComponents> EstimateVarianceComponents(
    std::span<const Observation> observations);

// Cost of one unit at each level, in any one time unit (seconds): one round; starting a process
// (excluding its rounds); setting up a session (excluding its processes).
struct LevelCosts {
  double round = 1.0;
  double process = 0.0;
  double session = 0.0;
  absl::Status Validate() const;  // all finite, >= 0, round > 0
};

// How a recommended repeat count came about. kAtCap: the formula reached max_repeats (the level
// above adds no measurable variance, or repeating this level costs nothing measurable): the
// optimum is at least the cap — print "≥ cap", never the cap as if it were the answer.
// kNoVariance: this level adds no measurable variance, so 1 is enough.
enum class RepeatBound { kOptimum, kAtCap, kNoVariance };

struct RepeatPlan {
  int rounds_per_process = 1;
  int processes_per_session = 1;
  RepeatBound rounds_bound = RepeatBound::kOptimum;
  RepeatBound processes_bound = RepeatBound::kOptimum;
};

// The repeats at the lower levels that minimise the variance of the grand mean for a given cost:
// r_i = ceil(sqrt(c_{i+1}·T_i² / (c_i·T_{i+1}²))) for i = round, process, clamped to
// [1, max_repeats] (T_{i+1}² == 0 means the level above adds nothing, so repeat at level i up to
// the cap). Errors: invalid costs; FailedPrecondition when a needed T² is NaN.
absl::StatusOr<RepeatPlan> OptimalRepeats(const VarianceComponents& components,
                                          const LevelCosts& costs, int max_repeats = 1000);

struct SessionsNeededOptions {
  // Target half-width of the top-level interval relative to the estimate (0.02 = ±2 %); compared
  // on the log scale as log1p(target).
  double target_relative_half_width = 0.02;
  double confidence = 0.95;
  int max_sessions = 1000;
  absl::Status Validate() const;
};

enum class SessionsVerdict { kReachable, kExceedsMax };

struct SessionsNeeded {
  int sessions = 0;  // the smallest n >= 2 meeting the target, or max_sessions when kExceedsMax
  SessionsVerdict verdict = SessionsVerdict::kReachable;
};

// Smallest n >= 2 with t(n−1)·sd/√n <= log1p(target), where sd is the standard deviation of one
// session's log-estimate (a session mean, or a session's log-ratio ℓ_s).
absl::StatusOr<SessionsNeeded> SessionsNeededForSd(double per_session_log_sd,
                                                   const SessionsNeededOptions& options = {});

// The same for a cell measured with `design`: the per-session variance is
// T_3² + T_2²/r_2 + T_1²/(r_1·r_2).
absl::StatusOr<SessionsNeeded> SessionsNeededFor(const VarianceComponents& components,
                                                 const RepeatPlan& design,
                                                 const SessionsNeededOptions& options = {});

// Two-way (arm × session) decomposition of a paired sample on the session-level log means
// y_as = log(SessionMean of arm a in session s). With 2 arms and n sessions:
//   MS_session     = 2·Σ_s (ȳ_·s − ȳ)² / (n−1)
//   MS_interaction = Σ_as (y_as − ȳ_a· − ȳ_·s + ȳ)² / (n−1) = var(ℓ_s) / 2
//   session_main   = max(0, (MS_session − MS_interaction) / 2)   (cancels in the ratio)
// The interaction mean square also carries the within-session noise of each y_as; when every
// session-arm has >= 2 processes that noise is estimated (mean over session-arms of
// var(log process means)/n_processes) and subtracted to give interaction_net.
struct ArmSessionVariance {
  std::size_t sessions = 0;
  double log_ratio_mean = 0.0;        // mean ℓ_s
  double session_main = 0.0;          // σ²_session
  double interaction_ms = 0.0;        // MS_interaction (σ²_arm×session + within noise)
  double within_session_noise = 0.0;  // NaN when not estimable
  double interaction_net = 0.0;       // max(0, interaction_ms − within); NaN if within is NaN
};

// Errors: as SessionRatios; FailedPrecondition with fewer than 2 sessions.
absl::StatusOr<ArmSessionVariance> DecomposeArmBySession(const PairedSample& sample);

}  // namespace ladder::stats
