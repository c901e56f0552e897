// The lifecycle states of runs, units, attempts and sessions. The store owns them: it writes and
// reads them as the text the schema's CHECK constraints name (ToString / Parse*, at the SQL
// boundary only), so the database and the wire keep that text; everything above compares enums.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ladder::db {

// queued -> running (first lease) -> done | cancelled.
enum class RunState { kQueued, kRunning, kDone, kCancelled };
// queued -> leased -> done | queued (retry) | failed (max_attempts reached); or cancelled.
enum class UnitState { kQueued, kLeased, kDone, kFailed, kCancelled };
// One lease: leased -> done | failed | expired | cancelled.
enum class AttemptState { kLeased, kDone, kFailed, kExpired, kCancelled };
// active <-> lost (silent past session_lost_ms); gone once released.
enum class SessionState { kActive, kLost, kGone };

std::string_view ToString(RunState state);
std::string_view ToString(UnitState state);
std::string_view ToString(AttemptState state);
std::string_view ToString(SessionState state);

// InvalidArgument naming the text when it is not a state of that kind (a row edited by hand, or
// a state the wire does not know).
absl::StatusOr<RunState> ParseRunState(std::string_view text);
absl::StatusOr<UnitState> ParseUnitState(std::string_view text);
absl::StatusOr<AttemptState> ParseAttemptState(std::string_view text);
absl::StatusOr<SessionState> ParseSessionState(std::string_view text);

// Whether a unit still waits for or holds a lease (its run is not finished while one does).
inline bool IsOpen(UnitState state) {
  return state == UnitState::kQueued || state == UnitState::kLeased;
}
// Whether a run is finished (done or cancelled): nothing of it will change again.
inline bool IsFinished(RunState state) {
  return state == RunState::kDone || state == RunState::kCancelled;
}

}  // namespace ladder::db
