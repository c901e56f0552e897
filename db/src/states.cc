#include "ladder/db/states.h"

#include <array>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ladder::db {
namespace {

// Each kind's states with their stored text, in enum order; the text is the schema's.
constexpr std::array<std::pair<RunState, std::string_view>, 4> kRunStates = {{
    {RunState::kQueued, "queued"},
    {RunState::kRunning, "running"},
    {RunState::kDone, "done"},
    {RunState::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<UnitState, std::string_view>, 5> kUnitStates = {{
    {UnitState::kQueued, "queued"},
    {UnitState::kLeased, "leased"},
    {UnitState::kDone, "done"},
    {UnitState::kFailed, "failed"},
    {UnitState::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<AttemptState, std::string_view>, 5> kAttemptStates = {{
    {AttemptState::kLeased, "leased"},
    {AttemptState::kDone, "done"},
    {AttemptState::kFailed, "failed"},
    {AttemptState::kExpired, "expired"},
    {AttemptState::kCancelled, "cancelled"},
}};
constexpr std::array<std::pair<SessionState, std::string_view>, 3> kSessionStates = {{
    {SessionState::kActive, "active"},
    {SessionState::kLost, "lost"},
    {SessionState::kGone, "gone"},
}};

template <typename State, size_t N>
std::string_view Text(const std::array<std::pair<State, std::string_view>, N>& table, State state) {
  for (const auto& [s, text] : table) {
    if (s == state) return text;
  }
  return "unknown";  // unreachable for a valid enumerator
}

template <typename State, size_t N>
absl::StatusOr<State> Parse(const std::array<std::pair<State, std::string_view>, N>& table,
                            std::string_view kind, std::string_view text) {
  for (const auto& [s, t] : table) {
    if (t == text) return s;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", std::string(kind), " state \"", std::string(text), "\""));
}

}  // namespace

std::string_view ToString(RunState state) { return Text(kRunStates, state); }
std::string_view ToString(UnitState state) { return Text(kUnitStates, state); }
std::string_view ToString(AttemptState state) { return Text(kAttemptStates, state); }
std::string_view ToString(SessionState state) { return Text(kSessionStates, state); }

absl::StatusOr<RunState> ParseRunState(std::string_view text) {
  return Parse(kRunStates, "run", text);
}
absl::StatusOr<UnitState> ParseUnitState(std::string_view text) {
  return Parse(kUnitStates, "unit", text);
}
absl::StatusOr<AttemptState> ParseAttemptState(std::string_view text) {
  return Parse(kAttemptStates, "attempt", text);
}
absl::StatusOr<SessionState> ParseSessionState(std::string_view text) {
  return Parse(kSessionStates, "session", text);
}

}  // namespace ladder::db
