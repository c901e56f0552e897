// Adaptive replication (`precision`): a cell group gets one more paired session while its widest
// ratio interval, projected from all but its last stats::kCommittedSessions sessions, is wider
// than the matrix asks and its session budget allows. The rule itself is
// ladder::stats's (WidestRatioHalfWidth); this file gathers the group's measurements and records
// each decision with its reason.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "ladder/stats/adaptive.h"
#include "ladder/status_macros.h"
#include "scheduler_impl.h"

namespace ladder::coordinator {
namespace {

// The group's comparisons: its cells grouped by everything but the pair axes, the first of each
// (in unit order) the baseline A that the others are compared with.
std::vector<std::vector<int64_t>> Comparisons(const std::vector<db::CellRow>& cells,
                                              const nlohmann::json& pair_axes_json) {
  std::vector<std::string> pair_axes;
  for (const auto& axis : pair_axes_json) pair_axes.push_back(axis.get<std::string>());
  std::map<std::string, std::vector<int64_t>> by_context;
  for (const auto& cell : cells) {
    by_context[matrices::CellKeyWithout(cell.key, pair_axes)].push_back(cell.id);
  }
  std::vector<std::vector<int64_t>> comparisons;
  for (auto& [context, members] : by_context) comparisons.push_back(std::move(members));
  return comparisons;
}

}  // namespace

absl::Status SchedulerImpl::MaybeExtendGroupLocked(int64_t run_id, const std::string& group_key) {
  auto run_it = runs_.find(run_id);
  if (run_it == runs_.end()) return absl::OkStatus();
  OpenRun& run = run_it->second;
  const nlohmann::json& precision = run.row.precision;
  if (!precision.is_object() || !precision.contains("ratio_half_width")) return absl::OkStatus();
  if (IsLocateProbeGroupLocked(run, group_key)) return absl::OkStatus();
  const double target = precision["ratio_half_width"].get<double>();
  const int max_sessions = precision.value("max_sessions", run.row.sessions);

  // Decide once every replicate of the group has ended.
  std::vector<const UnitEntry*> group;
  for (const auto& [id, unit] : units_) {
    if (unit.row.run_id != run_id || unit.row.group_key != group_key) continue;
    if (db::IsOpen(unit.row.state)) return absl::OkStatus();
    group.push_back(&unit);
  }
  if (group.empty()) return absl::OkStatus();
  int sessions = 0;
  for (const UnitEntry* unit : group) sessions += unit->row.state == db::UnitState::kDone ? 1 : 0;
  const std::vector<int64_t> cells = group.front()->row.cell_ids;

  ASSIGN_OR_RETURN(std::vector<db::CellRow> cell_rows, store_->LoadCells(cells));
  ASSIGN_OR_RETURN(std::vector<db::Observation> observations,
                   store_->ValidObservations(cells, run.row.metric));
  std::map<int64_t, std::vector<stats::Observation>> by_cell = ObservationsByCell(observations);
  std::vector<stats::PairedSample> samples;
  for (const auto& members : Comparisons(cell_rows, run.row.pair_axes)) {
    for (size_t i = 1; i < members.size(); ++i) {
      samples.push_back(stats::PairedSample{by_cell[members[0]], by_cell[members[i]]});
    }
  }
  // The rule reads the first sessions - kCommittedSessions, projected to all of them; the
  // report shows the interval over all (docs/statistics.md, "Coverage after stopping").
  const double projected = stats::WidestProjectedHalfWidth(samples);
  const double widest = stats::WidestRatioHalfWidth(samples);

  const int64_t now = clock_->NowMs();
  const auto percent = [](double w) {
    return std::isfinite(w) ? absl::StrFormat("%.2f%%", 100 * w) : std::string("unbounded");
  };
  if (projected <= target) {
    return store_->RecordDecision(
        run_id, group_key, sessions, projected, target, "stop",
        absl::StrFormat(
            "precision reached: widest ratio half-width projected from the first %d sessions %s "
            "<= target %.2f%%; over all %d sessions %s",
            sessions - stats::kCommittedSessions, percent(projected), 100 * target, sessions,
            percent(widest)),
        now);
  }
  if (sessions >= max_sessions) {
    return store_->RecordDecision(
        run_id, group_key, sessions, projected, target, "stop",
        absl::StrFormat("budget spent: %d of max_sessions %d; widest half-width still %s "
                        "(projected), %s over all sessions",
                        sessions, max_sessions, percent(projected), percent(widest)),
        now);
  }
  const int replicate = static_cast<int>(group.size());
  const uint64_t seed = group.front()->row.seed ^ (0x9e3779b97f4a7c15ULL * (replicate + 1));
  ASSIGN_OR_RETURN(int64_t unit_id, store_->AddUnit(run_id, group_key, replicate, seed, cells));
  QueueNewUnitLocked(unit_id, run_id, group_key, replicate, seed, cells);
  constexpr int kFirstDecision = stats::kMinDecisionSessions + stats::kCommittedSessions;
  return store_->RecordDecision(
      run_id, group_key, sessions, projected, target, "add_session",
      sessions < kFirstDecision
          ? absl::StrFormat("no decision before %d sessions (it reads the first n - %d): session "
                            "%d of at most %d",
                            kFirstDecision, stats::kCommittedSessions, sessions + 1, max_sessions)
          : absl::StrFormat("widest ratio half-width projected from the first %d sessions %s > "
                            "target %.2f%%: session %d of at most %d",
                            sessions - stats::kCommittedSessions, percent(projected), 100 * target,
                            sessions + 1, max_sessions),
      now);
}

absl::Status SchedulerImpl::DecideUndecidedGroupsLocked() {
  struct GroupProgress {
    int done_units = 0;
    bool any_open = false;
  };
  std::map<GroupKey, GroupProgress> groups;
  for (const auto& [id, unit] : units_) {
    auto run = runs_.find(unit.row.run_id);
    if (run == runs_.end() || !run->second.row.precision.contains("ratio_half_width")) continue;
    GroupProgress& progress = groups[GroupKey{unit.row.run_id, unit.row.group_key}];
    progress.done_units += unit.row.state == db::UnitState::kDone ? 1 : 0;
    progress.any_open = progress.any_open || db::IsOpen(unit.row.state);
  }
  for (const auto& [group, progress] : groups) {
    if (progress.any_open) continue;
    ASSIGN_OR_RETURN(bool decided,
                     store_->PrecisionDecided(group.first, group.second, progress.done_units));
    if (!decided) RETURN_IF_ERROR(MaybeExtendGroupLocked(group.first, group.second));
  }
  return absl::OkStatus();
}

}  // namespace ladder::coordinator
