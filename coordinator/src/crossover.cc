// Crossover location (`locate`): once every unit holding a line's cells has ended, the line
// takes its next step (DecideLocateStep, ladder/coordinator/locate.h): a probe at a new depth, one
// more paired session at the probe, or a stop with its outcome. Each step's cells, units and
// decision are written in one store transaction, then queued in memory.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ladder/coordinator/locate.h"
#include "ladder/stats/adaptive.h"
#include "ladder/stats/ratio.h"
#include "ladder/status_macros.h"
#include "scheduler_impl.h"

namespace ladder::coordinator {
namespace {

// A line: the cells that differ only in the located axis and the pair axis.
std::string LineKey(const std::string& cell_key, const LocateConfig& config) {
  return matrices::CellKeyWithout(cell_key, {config.axis, config.pair_axis});
}

// The unit group of a probe: one (line, depth), so each probe's replicates go to distinct
// sessions while a session that measured the ladder may still measure the probe.
std::string ProbeGroupKey(const std::string& cell_key, const LocateConfig& config) {
  return matrices::CellKeyWithout(cell_key, {config.pair_axis});
}

uint64_t ProbeSeed(const std::string& group_key, int replicate) {
  return matrices::UnitSeed(matrices::DefaultSeed(group_key), 0, replicate);
}

// A depth of a line: its two arms' cells (either may be missing) and the units that held them.
struct Rung {
  const db::CellRecord* a = nullptr;
  const db::CellRecord* b = nullptr;
  std::set<int64_t> units;
  bool paired() const { return a != nullptr && b != nullptr; }
};
using Rungs = std::map<double, Rung>;  // by depth, shallowest first

// The line's rungs among `run_cells` (which must outlive them), and the depth of each cell.
Rungs LineRungs(const LocateConfig& config, const std::string& line_key,
                const std::vector<db::CellRecord>& run_cells,
                std::map<int64_t, double>* depth_of_cell) {
  Rungs rungs;
  for (const auto& cell : run_cells) {
    if (LineKey(cell.key, config) != line_key) continue;
    const nlohmann::json value = cell.axes.value(config.axis, nlohmann::json());
    if (!value.is_number()) continue;
    const double depth = value.get<double>();
    const std::string arm =
        matrices::ValueToString(cell.axes.value(config.pair_axis, nlohmann::json()));
    if (arm == config.arm_a) rungs[depth].a = &cell;
    if (arm == config.arm_b) rungs[depth].b = &cell;
    (*depth_of_cell)[cell.id] = depth;
  }
  return rungs;
}

// What the line's earlier decisions say: whether it stopped, and the depth of its latest probe.
struct LineHistory {
  bool stopped = false;
  std::optional<double> current_probe;
};
LineHistory ReadHistory(const std::vector<db::LocateDecisionRow>& decisions) {
  LineHistory history;
  for (const auto& d : decisions) {
    if (d.decision == "stop") history.stopped = true;
    if (d.decision == "probe") history.current_probe = d.depth;
  }
  return history;
}

// The cells of the paired rungs, both arms, for one query of their observations.
std::vector<int64_t> PairedCellIds(const Rungs& rungs) {
  std::vector<int64_t> ids;
  for (const auto& [depth, rung] : rungs) {
    if (!rung.paired()) continue;
    ids.push_back(rung.a->id);
    ids.push_back(rung.b->id);
  }
  return ids;
}

// The paired ratio B / A at each paired rung, over the sessions that measured both arms.
std::vector<LocateRung> MeasureRungs(const Rungs& rungs,
                                     const std::vector<db::Observation>& observations) {
  std::map<int64_t, std::vector<stats::Observation>> by_cell = ObservationsByCell(observations);
  std::vector<LocateRung> measured;
  for (const auto& [depth, rung] : rungs) {
    if (!rung.paired()) continue;
    LocateRung r;
    r.depth = depth;
    r.units = static_cast<int>(rung.units.size());
    const stats::PairedSample sample =
        stats::OnlyPairedSessions(stats::PairedSample{by_cell[rung.a->id], by_cell[rung.b->id]});
    if (sample.a.empty() || sample.b.empty()) {
      r.error = "no session measured both arms";
    } else if (auto interval = stats::PairedRatioInterval(sample); interval.ok()) {
      r.ratio = *interval;
    } else {
      r.error = std::string(interval.status().message());
    }
    if (r.ratio) {
      if (auto decision = stats::ProjectedRatioInterval(sample); decision.ok()) {
        r.decision = *decision;
      } else {
        r.decision_error = std::string(decision.status().message());
      }
    }
    measured.push_back(std::move(r));
  }
  return measured;
}

// The decision row of `step`; its `decision` text is the caller's.
db::LocateDecisionRow DecisionRow(const LocateStep& step, const LocateConfig& config,
                                  const std::string& line_key, int64_t now_ms) {
  db::LocateDecisionRow decision;
  decision.line_key = line_key;
  decision.sessions = step.sessions;
  decision.half_width = step.half_width;
  decision.target = config.resolution_octaves;
  decision.depth = step.depth;
  decision.bracket_lower = step.bracket_lower;
  decision.bracket_upper = step.bracket_upper;
  decision.reason = step.reason;
  decision.decided_at = now_ms;
  return decision;
}

// A probe's cells: both arms at `depth`, every other parameter as on the line's shallowest
// paired rung, keys in the same axis order.
absl::StatusOr<std::vector<db::NewCell>> ProbeCells(const Rungs& rungs, const LocateConfig& config,
                                                    double depth) {
  auto model = std::find_if(rungs.begin(), rungs.end(),
                            [](const auto& entry) { return entry.second.paired(); });
  if (model == rungs.end()) return absl::InternalError("locate: a probe on a line without rungs");
  const nlohmann::json value = config.ValueOf(depth);
  std::vector<db::NewCell> cells;
  for (const db::CellRecord* arm : {model->second.a, model->second.b}) {
    std::vector<std::string> order;
    for (const auto& part : matrices::ParseCellKey(arm->key)) order.push_back(part.axis);
    db::NewCell cell;
    cell.axes = arm->axes;
    cell.axes[config.axis] = value;
    cell.params = arm->params;
    cell.params[config.axis] = value;
    cell.key = matrices::CellKey(order, cell.axes);
    cells.push_back(std::move(cell));
  }
  return cells;
}

}  // namespace

bool SchedulerImpl::IsLocateProbeGroupLocked(const OpenRun& run,
                                             const std::string& group_key) const {
  if (run.row.locate.empty()) return false;
  auto config = matrices::LocateFromJson(run.row.locate);
  if (!config.ok()) return false;
  for (const auto& part : matrices::ParseCellKey(group_key)) {
    if (part.axis != config->axis) continue;
    const std::string& value = part.value;
    return std::none_of(
        config->declared.begin(), config->declared.end(),
        [&](const nlohmann::json& v) { return matrices::ValueToString(v) == value; });
  }
  return false;
}

absl::Status SchedulerImpl::LocateAfterUnitLocked(int64_t run_id,
                                                  const std::vector<int64_t>& cell_ids) {
  auto run = runs_.find(run_id);
  if (run == runs_.end() || run->second.row.locate.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const LocateConfig config, matrices::LocateFromJson(run->second.row.locate));
  ASSIGN_OR_RETURN(const std::vector<db::CellRecord> cells, store_->RunCells(run_id));
  const std::set<int64_t> ended(cell_ids.begin(), cell_ids.end());
  std::set<std::string> lines;
  for (const auto& cell : cells) {
    if (ended.count(cell.id)) lines.insert(LineKey(cell.key, config));
  }
  for (const auto& line : lines) RETURN_IF_ERROR(LocateLineLocked(run_id, line, cells));
  return absl::OkStatus();
}

absl::Status SchedulerImpl::LocateAllLinesLocked(int64_t run_id) {
  auto run = runs_.find(run_id);
  if (run == runs_.end() || run->second.row.locate.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const LocateConfig config, matrices::LocateFromJson(run->second.row.locate));
  ASSIGN_OR_RETURN(const std::vector<db::CellRecord> cells, store_->RunCells(run_id));
  std::set<std::string> lines;
  for (const auto& cell : cells) lines.insert(LineKey(cell.key, config));
  for (const auto& line : lines) RETURN_IF_ERROR(LocateLineLocked(run_id, line, cells));
  return absl::OkStatus();
}

bool SchedulerImpl::LineUnitsEndedLocked(
    int64_t run_id, const std::map<int64_t, double>& depth_of_cell,
    std::map<double, std::set<int64_t>>* units_at_depth) const {
  for (const auto& [id, unit] : units_) {
    if (unit.row.run_id != run_id) continue;
    for (int64_t cell : unit.row.cell_ids) {
      auto depth = depth_of_cell.find(cell);
      if (depth == depth_of_cell.end()) continue;
      if (db::IsOpen(unit.row.state)) return false;
      (*units_at_depth)[depth->second].insert(id);
    }
  }
  return true;
}

absl::Status SchedulerImpl::LocateLineLocked(int64_t run_id, const std::string& line_key,
                                             const std::vector<db::CellRecord>& run_cells) {
  auto run_it = runs_.find(run_id);
  if (run_it == runs_.end()) return absl::OkStatus();
  const OpenRun& run = run_it->second;
  ASSIGN_OR_RETURN(const LocateConfig config, matrices::LocateFromJson(run.row.locate));

  std::map<int64_t, double> depth_of_cell;
  Rungs rungs = LineRungs(config, line_key, run_cells, &depth_of_cell);
  std::map<double, std::set<int64_t>> units_at_depth;
  if (!LineUnitsEndedLocked(run_id, depth_of_cell, &units_at_depth)) return absl::OkStatus();
  for (auto& [depth, units] : units_at_depth) rungs[depth].units = std::move(units);

  ASSIGN_OR_RETURN(const std::vector<db::LocateDecisionRow> decisions,
                   store_->LocateDecisions(run_id, line_key));
  const LineHistory history = ReadHistory(decisions);
  if (history.stopped) return absl::OkStatus();

  ASSIGN_OR_RETURN(const std::vector<db::Observation> observations,
                   store_->ValidObservations(PairedCellIds(rungs), run.row.metric));
  const LocateStep step =
      DecideLocateStep(config, MeasureRungs(rungs, observations), history.current_probe);
  db::LocateDecisionRow decision = DecisionRow(step, config, line_key, clock_->NowMs());
  switch (step.action) {
    case LocateAction::kStop:
      decision.decision = "stop";
      decision.outcome = step.outcome;
      return store_->RecordLocateDecision(run_id, decision);
    case LocateAction::kAddSession: {
      const Rung& rung = rungs.at(step.depth);
      decision.decision = "add_session";
      return AddProbeSessionLocked(run_id, ProbeGroupKey(rung.a->key, config), step.sessions,
                                   {rung.a->id, rung.b->id}, decision);
    }
    case LocateAction::kProbe: {
      ASSIGN_OR_RETURN(std::vector<db::NewCell> cells, ProbeCells(rungs, config, step.depth));
      decision.decision = "probe";
      decision.sessions = run.row.sessions;
      return AddProbeLocked(run_id, ProbeGroupKey(cells.front().key, config), cells,
                            run.row.sessions, decision);
    }
  }
  return absl::InternalError("locate: unknown step");
}

absl::Status SchedulerImpl::AddProbeSessionLocked(int64_t run_id, const std::string& group_key,
                                                  int replicate,
                                                  const std::vector<int64_t>& cell_ids,
                                                  const db::LocateDecisionRow& decision) {
  const uint64_t seed = ProbeSeed(group_key, replicate);
  ASSIGN_OR_RETURN(const int64_t unit_id, store_->AddLocateReplicate(run_id, group_key, replicate,
                                                                     seed, cell_ids, decision));
  QueueNewUnitLocked(unit_id, run_id, group_key, replicate, seed, cell_ids);
  return absl::OkStatus();
}

absl::Status SchedulerImpl::AddProbeLocked(int64_t run_id, const std::string& group_key,
                                           const std::vector<db::NewCell>& cells, int sessions,
                                           const db::LocateDecisionRow& decision) {
  std::vector<uint64_t> seeds;
  for (int r = 0; r < sessions; ++r) seeds.push_back(ProbeSeed(group_key, r));
  ASSIGN_OR_RETURN(const db::Store::ProbeIds ids,
                   store_->AddLocateProbe(run_id, cells, group_key, seeds, decision));
  for (size_t r = 0; r < ids.unit_ids.size(); ++r) {
    QueueNewUnitLocked(ids.unit_ids[r], run_id, group_key, static_cast<int>(r), seeds[r],
                       ids.cell_ids);
  }
  return absl::OkStatus();
}

}  // namespace ladder::coordinator
