// The data every statistic works on: measurements of one cell, indexed by the levels at which
// ladder replicates — session (a VM), engine process within the session, round within the process.
//
// Levels, outermost first:
//   session  the top replicated level: a VM (or host boot) with its own hardware, driver state and
//            neighbours. Sessions are the independent units; degrees of freedom come from them.
//   process  an engine/benchmark process started within a session.
//   round    one timed repetition within a process.
// A process id need only be unique within its session; a round id within its process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace ladder::stats {

// One raw measurement of one cell. `value` is the cell's metric in its stored unit (a rate such
// as tokens/s, or a time such as µs); the functions that take logs require it to be > 0.
struct Observation {
  std::int64_t session = 0;
  std::int64_t process = 0;
  std::int64_t round = 0;
  double value = 0.0;
};

// A paired comparison: arm A (the reference, e.g. no speculation) and arm B (the treatment),
// measured in the same sessions. Ratios are B / A. Process ids may be shared between the arms
// (both arms measured by one process) or distinct (one process per arm); both are supported.
struct PairedSample {
  std::vector<Observation> a;
  std::vector<Observation> b;
};

// One cell's observations grouped by level, ids ascending at every level.
struct ProcessGroup {
  std::int64_t id = 0;
  std::vector<double> values;  // ordered by round id
};
struct SessionGroup {
  std::int64_t id = 0;
  std::vector<ProcessGroup> processes;
};
struct Hierarchy {
  std::vector<SessionGroup> sessions;

  std::size_t NumObservations() const;
};

// Whether values must be strictly positive (required by everything done on a log scale).
enum class ValueDomain { kAnyFinite, kPositive };

// Groups `observations` by session, process and round.
// Errors: InvalidArgument when empty, when a value is NaN/infinite (or <= 0 under kPositive), or
// when two observations share (session, process, round) — a duplicate means the query that
// produced them is wrong, and silently averaging would hide it.
absl::StatusOr<Hierarchy> BuildHierarchy(std::span<const Observation> observations,
                                         ValueDomain domain);

// The shape of a balanced design: every session has the same number of processes and every
// process the same number of rounds.
struct BalancedShape {
  std::size_t sessions = 0;
  std::size_t processes_per_session = 0;
  std::size_t rounds_per_process = 0;
};

// Returns the shape, or FailedPrecondition naming the first unit that breaks the balance.
absl::StatusOr<BalancedShape> CheckBalanced(const Hierarchy& hierarchy);

// Mean of a process = mean of its rounds; mean of a session = mean of its process means (equal to
// the plain mean of the session's observations when the design is balanced). These are the
// arithmetic means every interval below is built from.
double ProcessMean(const ProcessGroup& process);
double SessionMean(const SessionGroup& session);

}  // namespace ladder::stats
