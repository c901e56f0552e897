// Leasing: which unit goes to which session, for how long, and what happens when an attempt
// ends. Adaptive replication and crossover location, which add units as attempts end, are in
// precision.cc and crossover.cc.
#include "ladder/coordinator/scheduler.h"

#include <fnmatch.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ladder/runner/schema.h"
#include "ladder/runner/validate.h"
#include "ladder/status_macros.h"
#include "scheduler_impl.h"

namespace ladder::coordinator {
namespace {

class RealClock final : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

bool HasFeature(const nlohmann::json& features, const std::string& name) {
  if (!features.is_array()) return false;
  return std::any_of(features.begin(), features.end(),
                     [&](const nlohmann::json& f) { return f.is_string() && f == name; });
}

// A kernel cell's `backend` names the feature it needs: an agent advertises "cuda" or "hip"
// only when that backend is built in and a device answers (agent/src/inventory.cc). Adds the
// feature of every GPU backend among the matrix's `backend` values (fixed or axis) to its
// requirements, so a CPU-only agent is never leased such a cell even when the matrix omits
// `requires: features`. Matching is per run: a run whose axis mixes cpu and cuda runs all its
// cells on CUDA agents (which have the CPU backend too); one mixing cuda and hip waits for an
// agent with both, which no build has (WhyWaiting says so): submit one matrix per GPU backend.
void AddBackendFeatures(matrices::Matrix& matrix) {
  if (matrix.runner != "kernel") return;  // the engine runner's `backend` is an engine's own
  std::vector<matrices::Value> values;
  if (auto it = matrix.fixed.find("backend"); it != matrix.fixed.end())
    values.push_back(it->second);
  for (const auto& axis : matrix.axes) {
    if (axis.name == "backend") values.insert(values.end(), axis.values.begin(), axis.values.end());
  }
  auto& features = matrix.requirements.features;
  for (const auto& v : values) {
    if (!v.is_string()) continue;
    const std::string backend = absl::AsciiStrToLower(v.get<std::string>());
    if (backend != "cuda" && backend != "hip") continue;
    if (std::find(features.begin(), features.end(), backend) == features.end()) {
      features.push_back(backend);
    }
  }
}

// A command cell runs a program its agent registered: the agent advertises "bench:NAME" for
// each (`ladder agent --bench NAME=PATH`), so a unit goes only to an agent that has the program,
// whether or not the matrix lists the feature.
// With a template (`bench: "{build}"`) every program it names: the arms of a paired axis are
// measured in one session, so its agent needs all of them.
void AddBenchFeature(matrices::Matrix& matrix) {
  if (!matrix.command) return;
  auto names = matrices::BenchNames(matrix);
  if (!names.ok()) return;  // the parser refused such a matrix; nothing to add
  auto& features = matrix.requirements.features;
  for (const std::string& name : *names) {
    const std::string feature = "bench:" + name;
    if (std::find(features.begin(), features.end(), feature) == features.end()) {
      features.push_back(feature);
    }
  }
}

// An engine cell with `tensor_parallel_size: N` needs N GPUs on one host: the engine shards the
// model over N devices of the agent that runs it. Raises the matrix's `requires.gpu_count` to
// the largest N among its `fixed` and axis values, so such a cell is never leased to an agent
// holding fewer (a 2-GPU cell to an agent pinned to one GPU would fail at the engine's start,
// after its model download), whether or not the matrix says `requires: {gpu_count: N}`.
void AddTensorParallelGpus(matrices::Matrix& matrix) {
  if (matrix.runner != "engine") return;
  std::vector<matrices::Value> values;
  if (auto it = matrix.fixed.find("tensor_parallel_size"); it != matrix.fixed.end())
    values.push_back(it->second);
  for (const auto& axis : matrix.axes) {
    if (axis.name == "tensor_parallel_size")
      values.insert(values.end(), axis.values.begin(), axis.values.end());
  }
  for (const auto& v : values) {
    if (!v.is_number_integer()) continue;  // the recipe's parameter check refuses it
    const int64_t n = v.get<int64_t>();
    if (n > matrix.requirements.gpu_count && n <= 1024) {
      matrix.requirements.gpu_count = static_cast<int>(n);
    }
  }
}

// Why `session` cannot take units of a `runner` matrix with `req` ("" when it can).
std::string Unmet(const std::string& runner, const matrices::Requirements& req,
                  const db::SessionRow& session) {
  const auto& features = session.features;
  if (!HasFeature(features, runner)) return absl::StrCat("no ", runner, " runner");
  for (const auto& f : req.features) {
    if (!HasFeature(features, f)) return absl::StrCat("no feature ", f);
  }
  const std::string vendor = absl::AsciiStrToLower(req.gpu_vendor);
  const bool needs_gpu = (!vendor.empty() && vendor != "any") || !req.gpu_name_glob.empty() ||
                         req.gpu_count > 0 || req.min_gpu_memory_mib > 0;
  if (!needs_gpu) return "";
  int matching = 0;
  for (const auto& gpu : session.gpus) {
    if (!vendor.empty() && vendor != "any" && absl::AsciiStrToLower(gpu.vendor) != vendor) continue;
    if (!req.gpu_name_glob.empty() &&
        fnmatch(req.gpu_name_glob.c_str(), gpu.name.c_str(), FNM_CASEFOLD) != 0) {
      continue;
    }
    if (gpu.memory_mib < req.min_gpu_memory_mib) continue;
    ++matching;
  }
  const int needed = std::max(1, req.gpu_count);
  if (matching >= needed) return "";
  if (session.gpus.empty()) return "no GPU";
  return absl::StrCat(matching, matching == 1 ? " matching GPU" : " matching GPUs", ", ", needed,
                      " needed");
}

}  // namespace

Clock& SystemClock() {
  static RealClock clock;
  return clock;
}

SchedulerImpl::SchedulerImpl(db::Store* store, const Clock* clock, SchedulerOptions options)
    : store_(store), clock_(clock), options_(options) {}

std::map<int64_t, std::vector<stats::Observation>> ObservationsByCell(
    const std::vector<db::Observation>& observations) {
  std::map<std::string, int64_t> session_index;
  std::map<int64_t, std::vector<stats::Observation>> by_cell;
  for (const auto& o : observations) {
    const int64_t session =
        session_index.emplace(o.session_id, static_cast<int64_t>(session_index.size()))
            .first->second;
    by_cell[o.cell_id].push_back(stats::Observation{session, o.process, o.round, o.value});
  }
  return by_cell;
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(db::Store* store, const Clock* clock,
                                                             SchedulerOptions options) {
  auto scheduler = std::make_unique<SchedulerImpl>(store, clock, options);
  RETURN_IF_ERROR(scheduler->Load());
  return scheduler;
}

void SchedulerImpl::AddRunLocked(const db::RunRow& run) {
  OpenRun state;
  state.row = run;
  // Written by this coordinator's store from a parsed matrix; a row that does not read back
  // (edited by hand) matches no session rather than every one.
  auto requirements = matrices::RequirementsFromJson(run.requirements);
  if (requirements.ok()) {
    state.requirements = std::move(*requirements);
  } else {
    state.requirements.features.push_back("unreadable requires: " +
                                          std::string(requirements.status().message()));
  }
  runs_[run.id] = std::move(state);
}

absl::Status SchedulerImpl::Load() {
  ASSIGN_OR_RETURN(db::SchedulingSnapshot snapshot, store_->LoadSchedulingState());
  MutexLock lock(&mu_);
  const int64_t now = clock_->NowMs();
  for (const auto& run : snapshot.open_runs) AddRunLocked(run);
  for (auto& unit : snapshot.units) {
    auto run = runs_.find(unit.run_id);
    if (run == runs_.end()) continue;
    if (unit.state == db::UnitState::kQueued) run->second.queued.insert(unit.id);
    if (db::IsOpen(unit.state)) run->second.open_units++;
    units_[unit.id] = UnitEntry{std::move(unit)};
  }
  for (auto& session : snapshot.sessions) {
    SessionEntry state;
    state.last_seen_ms = session.last_seen_at;
    state.lost = session.state == db::SessionState::kLost;
    state.row = std::move(session);
    sessions_[state.row.id] = std::move(state);
  }
  for (const auto& attempt : snapshot.attempts) {
    auto unit = units_.find(attempt.unit_id);
    if (unit == units_.end()) continue;
    const GroupKey group{unit->second.row.run_id, unit->second.row.group_key};
    group_sessions_[group].insert(attempt.session_id);
    if (auto s = sessions_.find(attempt.session_id); s != sessions_.end()) {
      group_hosts_[group].insert(s->second.row.machine_id);
    }
    if (attempt.state == db::AttemptState::kLeased) {
      // The agent may still be working: give it a full lease from now to check in.
      AddLiveLocked(attempt.id,
                    LiveAttempt{attempt.unit_id, attempt.session_id, now + options_.lease_ms});
    }
  }
  // A unit of a locate run may have ended just before the previous coordinator stopped, before
  // its line was stepped; stepping is idempotent, so every line is stepped again.
  std::vector<int64_t> locating;
  for (const auto& [id, run] : runs_) {
    if (!run.row.locate.empty()) locating.push_back(id);
  }
  for (int64_t id : locating) RETURN_IF_ERROR(LocateAllLinesLocked(id));
  // Likewise for `precision`: a group whose last unit ended just before the stop, with no
  // decision recorded at its session count, is decided now.
  RETURN_IF_ERROR(DecideUndecidedGroupsLocked());
  // A run whose units are all terminal but which was not marked done (killed in between).
  std::vector<int64_t> finished;
  for (const auto& [id, run] : runs_) {
    if (run.open_units == 0) finished.push_back(id);
  }
  for (int64_t id : finished) RETURN_IF_ERROR(CompleteRunLocked(id));
  return absl::OkStatus();
}

absl::StatusOr<SubmitResult> SchedulerImpl::Validate(const std::string& yaml,
                                                     const std::string& filename,
                                                     int64_t max_cells) const {
  matrices::ParseOptions parse_options;
  parse_options.max_cells = max_cells > 0 ? max_cells : options_.max_cells;
  ASSIGN_OR_RETURN(
      matrices::Matrix matrix,
      matrices::ParseMatrix(yaml, filename.empty() ? "<matrix>" : filename, parse_options));
  ASSIGN_OR_RETURN(matrices::Expansion expansion, matrices::Expand(matrix, parse_options));
  RETURN_IF_ERROR(runner::ValidateMatrix(matrix, expansion, runners()));
  AddBackendFeatures(matrix);
  AddBenchFeature(matrix);
  AddTensorParallelGpus(matrix);
  SubmitResult result{0, static_cast<int64_t>(expansion.cells.size()),
                      static_cast<int64_t>(expansion.units.size()), matrix.name, ""};
  result.warning = SubmitWarning(matrix);
  return result;
}

absl::StatusOr<SubmitResult> SchedulerImpl::Submit(const std::string& yaml,
                                                   const std::string& filename, int64_t max_cells,
                                                   const db::RunTags& tags) {
  RETURN_IF_ERROR(db::ValidateRunTags(tags));
  matrices::ParseOptions parse_options;
  parse_options.max_cells = max_cells > 0 ? max_cells : options_.max_cells;
  ASSIGN_OR_RETURN(
      matrices::Matrix matrix,
      matrices::ParseMatrix(yaml, filename.empty() ? "<matrix>" : filename, parse_options));
  ASSIGN_OR_RETURN(matrices::Expansion expansion, matrices::Expand(matrix, parse_options));
  RETURN_IF_ERROR(runner::ValidateMatrix(matrix, expansion, runners()));
  if (matrix.metric.empty()) matrix.metric = runner::DefaultMetric(matrix);
  AddBackendFeatures(matrix);
  AddBenchFeature(matrix);
  AddTensorParallelGpus(matrix);
  ASSIGN_OR_RETURN(int64_t run_id,
                   store_->CreateRun(yaml, matrix, expansion, clock_->NowMs(), tags));
  // Pick the new run's rows back up from the store so memory and disk agree on ids.
  ASSIGN_OR_RETURN(db::SchedulingSnapshot snapshot, store_->LoadSchedulingState());
  {
    MutexLock lock(&mu_);
    for (const auto& run : snapshot.open_runs) {
      if (run.id == run_id) AddRunLocked(run);
    }
    OpenRun& run = runs_[run_id];
    for (auto& unit : snapshot.units) {
      if (unit.run_id != run_id) continue;
      run.queued.insert(unit.id);
      run.open_units++;
      units_[unit.id] = UnitEntry{std::move(unit)};
    }
  }
  work_available_.NotifyAll();
  return SubmitResult{run_id, static_cast<int64_t>(expansion.cells.size()),
                      static_cast<int64_t>(expansion.units.size()), matrix.name,
                      SubmitWarning(matrix)};
}

absl::Status SchedulerImpl::RegisterSession(const db::SessionRow& session) {
  if (session.id.empty()) return absl::InvalidArgumentError("session_id is empty");
  db::SessionRow row = session;
  row.started_at = clock_->NowMs();
  row.last_seen_at = row.started_at;
  row.state = db::SessionState::kActive;
  RETURN_IF_ERROR(store_->UpsertSession(row));
  {
    MutexLock lock(&mu_);
    SessionEntry state;
    state.row = std::move(row);
    state.last_seen_ms = state.row.last_seen_at;
    sessions_[state.row.id] = std::move(state);
  }
  work_available_.NotifyAll();
  return absl::OkStatus();
}

bool SchedulerImpl::KnowsSession(const std::string& session_id) const {
  MutexLock lock(&mu_);
  return sessions_.count(session_id) > 0;
}

void SchedulerImpl::TouchLocked(const std::string& session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return;
  it->second.last_seen_ms = clock_->NowMs();
  it->second.lost = false;
  touched_.insert(session_id);
}

bool SchedulerImpl::Matches(const OpenRun& run, const SessionEntry& session) const {
  return Unmet(run.row.runner, run.requirements, session.row).empty();
}

const runner::RunnerSchema* CommandSchemaCache::Find(int64_t run_id,
                                                     const std::string& runner_config) {
  MutexLock lock(&mu_);
  auto it = schemas_.find(run_id);
  if (it != schemas_.end()) return it->second.get();
  auto config = matrices::RunnerConfigFromJson(
      nlohmann::json::parse(runner_config, nullptr, /*allow_exceptions=*/false));
  // A run row whose config does not read back (edited by hand) accepts no records.
  std::unique_ptr<runner::RunnerSchema> schema;
  if (config.ok())
    schema = std::make_unique<runner::RunnerSchema>(runner::CommandSchema(config->metrics));
  return (schemas_[run_id] = std::move(schema)).get();
}

const runner::RunnerSchema* SchedulerImpl::SchemaOf(int64_t run_id, const std::string& runner,
                                                    const std::string& runner_config) const {
  if (runner == "command") return command_schemas_->Find(run_id, runner_config);
  return runners().Find(runner);
}

db::MetricCheck SchedulerImpl::MetricCheck() const {
  return [this](const db::AttemptDesign& design, const std::string& metric, const std::string& unit,
                double value) -> std::string {
    const std::string& runner = design.runner;
    const runner::RunnerSchema* schema = SchemaOf(design.run_id, runner, design.runner_config);
    if (schema == nullptr) {
      return runner == "command" ? "the run's command configuration does not read back"
                                 : absl::StrCat("no runner named ", runner);
    }
    const runner::MetricSpec* spec = schema->FindMetric(metric);
    if (spec == nullptr) {
      return absl::StrCat("the ", runner, " runner reports no metric named \"",
                          runner::IsValidMetricName(metric) ? metric : "(invalid name)", "\"");
    }
    if (spec->unit != unit) {
      return absl::StrCat("metric ", metric, " is reported in ", spec->unit,
                          "; this record names another unit");
    }
    return spec->range.Check(metric, value, unit);
  };
}

const runner::RunnerSchemas& SchedulerImpl::runners() const {
  return options_.runners != nullptr ? *options_.runners : runner::BuiltinMetricSchemas();
}

std::string SchedulerImpl::UnmetLocked(const std::string& runner,
                                       const matrices::Requirements& requirements) const {
  int connected = 0;
  std::map<std::string, int> reasons;  // reason -> sessions failing for it
  for (const auto& [id, session] : sessions_) {
    if (session.lost || session.row.state != db::SessionState::kActive) continue;
    ++connected;
    const std::string why = Unmet(runner, requirements, session.row);
    if (why.empty()) return "";
    ++reasons[why];
  }
  std::vector<std::string> wanted;
  if (!requirements.gpu_vendor.empty() && requirements.gpu_vendor != "any") {
    wanted.push_back(absl::StrCat("gpu_vendor=", requirements.gpu_vendor));
  }
  if (!requirements.gpu_name_glob.empty()) {
    wanted.push_back(absl::StrCat("gpu_name=", requirements.gpu_name_glob));
  }
  if (requirements.gpu_count > 0)
    wanted.push_back(absl::StrCat("gpu_count>=", requirements.gpu_count));
  if (requirements.min_gpu_memory_mib > 0) {
    wanted.push_back(absl::StrCat("gpu memory>=", requirements.min_gpu_memory_mib, " MiB"));
  }
  for (const auto& f : requirements.features) wanted.push_back(absl::StrCat("feature ", f));
  wanted.push_back(absl::StrCat("the ", runner, " runner"));
  std::string most_common;
  int most = 0;
  for (const auto& [why, n] : reasons) {
    if (n > most) most = n, most_common = why;
  }
  return absl::StrCat("waiting for an agent with ", absl::StrJoin(wanted, ", "), "; ", connected,
                      connected == 1 ? " agent" : " agents", " connected, none match",
                      most_common.empty() ? "" : absl::StrCat(" (", most_common, ")"));
}

std::string SchedulerImpl::UnmetRequirements(const std::string& runner,
                                             const matrices::Requirements& requirements) const {
  MutexLock lock(&mu_);
  return UnmetLocked(runner, requirements);
}

std::string SchedulerImpl::SubmitWarning(const matrices::Matrix& matrix) const {
  MutexLock lock(&mu_);
  if (std::string unmet = UnmetLocked(matrix.runner, matrix.requirements); !unmet.empty()) {
    return unmet;
  }
  // Each cell needs `sessions` distinct sessions: fewer connected agents than that leave the
  // last replicates waiting until more join.
  int matching = 0;
  for (const auto& [id, session] : sessions_) {
    if (session.lost || session.row.state != db::SessionState::kActive) continue;
    if (Unmet(matrix.runner, matrix.requirements, session.row).empty()) ++matching;
  }
  const int sessions = matrix.replicates.sessions;
  if (matching >= sessions) return "";
  return absl::StrCat("the design asks for ", sessions, " distinct sessions per cell and ",
                      matching,
                      matching == 1 ? " connected agent matches" : " connected agents match",
                      ": the last replicates wait until ", sessions - matching,
                      sessions - matching == 1 ? " more agent joins" : " more agents join");
}

std::string SchedulerImpl::WhyWaiting(int64_t run_id) const {
  MutexLock lock(&mu_);
  auto it = runs_.find(run_id);
  if (it == runs_.end() || it->second.queued.empty()) return "";
  const OpenRun& run = it->second;
  if (std::string unmet = UnmetLocked(run.row.runner, run.requirements); !unmet.empty()) {
    return unmet;
  }
  // Some connected agent matches the run. Each replicate of a unit group needs a session that
  // has not measured it (distinct sessions per cell): can any of them take a queued unit?
  std::vector<const std::string*> candidates;
  for (const auto& [id, session] : sessions_) {
    if (session.lost || session.row.state != db::SessionState::kActive) continue;
    if (Matches(run, session)) candidates.push_back(&id);
  }
  std::map<GroupKey, int> queued_per_group;
  for (int64_t unit_id : run.queued) {
    const UnitEntry& unit = units_.at(unit_id);
    const GroupKey group{unit.row.run_id, unit.row.group_key};
    auto measured = group_sessions_.find(group);
    for (const std::string* id : candidates) {
      if (measured == group_sessions_.end() || !measured->second.count(*id)) return "";
    }
    ++queued_per_group[group];
  }
  int more = 0;
  for (const auto& [group, n] : queued_per_group) more = std::max(more, n);
  const size_t matching = candidates.size();
  return absl::StrCat(
      "waiting for ", more, more == 1 ? " more session" : " more sessions", ": ", run.queued.size(),
      run.queued.size() == 1 ? " queued unit needs" : " queued units need",
      " a session that has not measured its cells yet (each replicate is measured by a distinct "
      "session), and ",
      matching == 1 ? "the 1 connected agent that matches has" : "all ",
      matching == 1 ? "" : absl::StrCat(matching, " connected agents that match have"), "; start ",
      more, more == 1 ? " more agent" : " more agents");
}

int SchedulerImpl::LiveAttemptsOf(const std::string& session_id) const {
  MutexLock lock(&mu_);
  auto it = live_by_session_.find(session_id);
  return it == live_by_session_.end() ? 0 : static_cast<int>(it->second.size());
}

absl::StatusOr<std::optional<Lease>> SchedulerImpl::TryLeaseLocked(const std::string& session_id) {
  return std::move(LeaseBatchLocked({session_id})[0]);
}

int64_t SchedulerImpl::ChooseUnitLocked(const std::string& session_id,
                                        const std::set<int64_t>& taken) const {
  const SessionEntry& session = sessions_.at(session_id);
  // Runs the session can take, in creation order: Matches is a property of (run, session), so
  // it is evaluated once per run here, not once per queued unit.
  std::vector<const OpenRun*> eligible;
  for (const auto& [run_id, run] : runs_) {
    if (!run.queued.empty() && Matches(run, session)) eligible.push_back(&run);
  }
  // Two passes: first a unit whose group has not run on this host, then any eligible unit.
  for (int pass = 0; pass < 2; ++pass) {
    for (const OpenRun* run : eligible) {
      for (int64_t unit_id : run->queued) {
        if (taken.count(unit_id)) continue;
        const UnitEntry& unit = units_.at(unit_id);
        const GroupKey group{unit.row.run_id, unit.row.group_key};
        if (auto g = group_sessions_.find(group);
            g != group_sessions_.end() && g->second.count(session_id)) {
          continue;
        }
        if (pass == 0) {
          if (auto h = group_hosts_.find(group);
              h != group_hosts_.end() && h->second.count(session.row.machine_id)) {
            continue;
          }
        }
        return unit_id;
      }
    }
  }
  return 0;
}

std::vector<absl::StatusOr<std::optional<Lease>>> SchedulerImpl::LeaseBatchLocked(
    const std::vector<std::string>& session_ids) {
  std::vector<absl::StatusOr<std::optional<Lease>>> results(session_ids.size());
  // Choose a unit for each session, then write every lease in one transaction, then update
  // memory: nothing changes in memory unless the store took it.
  std::set<int64_t> taken;
  std::set<std::string> served;
  std::vector<std::pair<int64_t, std::string>> chosen;
  std::vector<size_t> chosen_index;
  for (size_t i = 0; i < session_ids.size(); ++i) {
    const std::string& session_id = session_ids[i];
    if (!sessions_.count(session_id)) {
      results[i] =
          absl::NotFoundError(absl::StrCat("unknown session ", session_id, "; register first"));
      continue;
    }
    results[i] = std::optional<Lease>();
    // One lease per session per batch: a second one would skip the group rule for it.
    if (!served.insert(session_id).second) continue;
    if (const int64_t unit_id = ChooseUnitLocked(session_id, taken); unit_id != 0) {
      taken.insert(unit_id);
      chosen.emplace_back(unit_id, session_id);
      chosen_index.push_back(i);
    }
  }
  if (chosen.empty()) return results;
  const int64_t now = clock_->NowMs();
  auto attempt_ids = store_->LeaseUnits(chosen, now);
  if (!attempt_ids.ok()) {
    for (size_t i : chosen_index) results[i] = attempt_ids.status();
    return results;
  }
  for (size_t k = 0; k < chosen.size(); ++k) {
    const auto& [unit_id, session_id] = chosen[k];
    UnitEntry& unit = units_.at(unit_id);
    OpenRun& run = runs_.at(unit.row.run_id);
    auto cells = store_->LoadCells(unit.row.cell_ids);
    const int64_t attempt_id = (*attempt_ids)[k];
    run.queued.erase(unit_id);
    unit.row.state = db::UnitState::kLeased;
    const GroupKey group{unit.row.run_id, unit.row.group_key};
    group_sessions_[group].insert(session_id);
    group_hosts_[group].insert(sessions_.at(session_id).row.machine_id);
    AddLiveLocked(attempt_id, LiveAttempt{unit_id, session_id, now + options_.lease_ms});
    if (!cells.ok()) {
      // The lease is stored and live; without its cells the agent cannot run it, so it expires
      // and is re-queued like any lost lease.
      results[chosen_index[k]] = cells.status();
      continue;
    }
    Lease lease;
    lease.attempt_id = attempt_id;
    lease.unit_id = unit_id;
    lease.run_id = unit.row.run_id;
    lease.runner = run.row.runner;
    if (!run.row.runner_config.empty()) lease.runner_config = run.row.runner_config.dump();
    lease.cells = std::move(*cells);
    lease.processes = run.row.processes;
    lease.rounds = run.row.rounds;
    lease.seed = unit.row.seed;
    lease.lease_ms = options_.lease_ms;
    results[chosen_index[k]] = std::optional<Lease>(std::move(lease));
  }
  return results;
}

std::vector<absl::StatusOr<std::optional<Lease>>> SchedulerImpl::TryLeaseBatch(
    const std::vector<std::string>& session_ids) {
  MutexLock lock(&mu_);
  if (shutdown_) {
    return std::vector<absl::StatusOr<std::optional<Lease>>>(
        session_ids.size(), absl::UnavailableError("coordinator is shutting down"));
  }
  for (const auto& id : session_ids) TouchLocked(id);
  return LeaseBatchLocked(session_ids);
}

absl::StatusOr<std::optional<Lease>> SchedulerImpl::LeaseFor(const std::string& session_id,
                                                             int wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  while (true) {
    uint64_t seen = 0;
    {
      MutexLock lock(&mu_);
      if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
      TouchLocked(session_id);
      ASSIGN_OR_RETURN(std::optional<Lease> lease, TryLeaseLocked(session_id));
      if (lease.has_value() || std::chrono::steady_clock::now() >= deadline) return lease;
      seen = work_available_.generation();
    }
    work_available_.WaitUntil(seen, deadline);
  }
}

absl::StatusOr<std::optional<Lease>> SchedulerImpl::TryLease(const std::string& session_id) {
  MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("coordinator is shutting down");
  TouchLocked(session_id);
  return TryLeaseLocked(session_id);
}

bool SchedulerImpl::shutting_down() const {
  MutexLock lock(&mu_);
  return shutdown_;
}

absl::StatusOr<std::vector<int64_t>> SchedulerImpl::Heartbeat(
    const std::string& session_id, const std::vector<int64_t>& attempt_ids) {
  MutexLock lock(&mu_);
  if (!sessions_.count(session_id)) {
    return absl::NotFoundError(absl::StrCat("unknown session ", session_id));
  }
  TouchLocked(session_id);
  std::vector<int64_t> stop;
  const int64_t deadline = clock_->NowMs() + options_.lease_ms;
  for (int64_t id : attempt_ids) {
    auto it = live_.find(id);
    if (it != live_.end() && it->second.session_id != session_id) {
      // Another session holds this attempt now: naming it is not this session's to do.
      return absl::PermissionDeniedError(absl::StrCat(
          "attempt ", id, " is leased to another session; a session heartbeats only its own"));
    }
  }
  for (int64_t id : attempt_ids) {
    auto it = live_.find(id);
    if (it == live_.end()) {
      stop.push_back(id);  // expired, cancelled, or never leased
      continue;
    }
    it->second.deadline_ms = deadline;
  }
  return stop;
}

absl::StatusOr<db::ReportOutcome> SchedulerImpl::Report(
    const std::string& session_id, const std::vector<db::MeasurementIn>& measurements,
    const std::vector<db::EvidenceIn>& evidence) {
  std::vector<int64_t> live;
  {
    MutexLock lock(&mu_);
    if (!sessions_.count(session_id)) {
      return absl::NotFoundError(absl::StrCat("unknown session ", session_id));
    }
    TouchLocked(session_id);
    if (auto it = live_by_session_.find(session_id); it != live_by_session_.end()) {
      live.assign(it->second.begin(), it->second.end());
    }
  }
  // The store call happens outside the lock: it is the slow part, and liveness only matters
  // at the instant of the snapshot (a lease that expires meanwhile was live when measured).
  return store_->Report(session_id, measurements, evidence, live, MetricCheck(), clock_->NowMs());
}

std::vector<absl::StatusOr<db::ReportOutcome>> SchedulerImpl::ReportBatch(
    std::vector<db::ReportIn> reports) {
  std::vector<absl::StatusOr<db::ReportOutcome>> results(reports.size());
  std::vector<db::ReportIn> known;
  std::vector<size_t> known_index;
  {
    MutexLock lock(&mu_);
    for (size_t i = 0; i < reports.size(); ++i) {
      db::ReportIn& report = reports[i];
      if (!sessions_.count(report.session_id)) {
        results[i] = absl::NotFoundError(absl::StrCat("unknown session ", report.session_id));
        continue;
      }
      TouchLocked(report.session_id);
      report.live_attempts.clear();
      if (auto it = live_by_session_.find(report.session_id); it != live_by_session_.end()) {
        report.live_attempts.assign(it->second.begin(), it->second.end());
      }
      known.push_back(std::move(report));
      known_index.push_back(i);
    }
  }
  auto stored = store_->ReportBatch(known, MetricCheck(), clock_->NowMs());
  for (size_t k = 0; k < known.size(); ++k) results[known_index[k]] = std::move(stored[k]);
  return results;
}

absl::StatusOr<FinishResult> SchedulerImpl::Finish(const FinishIn& finish) {
  return std::move(FinishBatch({finish})[0]);
}

std::vector<absl::StatusOr<FinishResult>> SchedulerImpl::FinishBatch(
    const std::vector<FinishIn>& finishes) {
  std::vector<absl::StatusOr<FinishResult>> results(finishes.size());
  bool requeued = false;
  {
    MutexLock lock(&mu_);
    // Successful ends are written together; their effects on memory follow the commit.
    std::vector<db::Store::AttemptDone> done;
    std::vector<size_t> done_index;
    std::set<int64_t> seen;
    for (size_t i = 0; i < finishes.size(); ++i) {
      const FinishIn& f = finishes[i];
      if (!sessions_.count(f.session_id)) {
        results[i] = absl::NotFoundError(absl::StrCat("unknown session ", f.session_id));
        continue;
      }
      TouchLocked(f.session_id);
      if (f.measurement_count < 0 || f.evidence_count < 0) {
        results[i] =
            absl::InvalidArgumentError("measurement_count and evidence_count must not be negative");
        continue;
      }
      if (f.failure_reason.size() > 4096) {
        results[i] = absl::InvalidArgumentError("failure_reason: at most 4096 bytes");
        continue;
      }
      auto it = live_.find(f.attempt_id);
      if (it != live_.end() && it->second.session_id != f.session_id) {
        results[i] = absl::PermissionDeniedError(
            absl::StrCat("attempt ", f.attempt_id, " was leased to another session"));
        continue;
      }
      if (it == live_.end()) {
        auto design = store_->LoadAttemptDesign(f.attempt_id);
        if (!design.ok()) {
          results[i] = design.status();
          continue;
        }
        if (design->session_id != f.session_id) {
          results[i] = absl::PermissionDeniedError(
              absl::StrCat("attempt ", f.attempt_id, " was leased to another session"));
          continue;
        }
      }
      if (it == live_.end() || !seen.insert(f.attempt_id).second) {
        results[i] = FinishResult{
            false, absl::StrCat("attempt ", f.attempt_id,
                                " is not a live lease of this session (expired, cancelled or "
                                "re-leased); its results are stale")};
        continue;
      }
      if (f.outcome == AttemptOutcome::kFailed) {
        absl::Status s = EndUnsuccessfulLocked(
            f.attempt_id, db::AttemptState::kFailed,
            f.failure_reason.empty() ? "runner failed" : f.failure_reason, FailureCount::kCounts);
        if (s.ok()) {
          results[i] = FinishResult{true, "failure recorded"};
          requeued = true;
        } else {
          results[i] = s;
        }
        continue;
      }
      const int64_t unit_id = it->second.unit_id;
      // The design decides completeness: every (cell, process, round) of the unit holds each
      // metric its runner requires. The agent's announced counts only say "not yet".
      const UnitEntry& unit = units_.at(unit_id);
      const OpenRun& run = runs_.at(unit.row.run_id);
      std::vector<std::string> required;
      if (const runner::RunnerSchema* schema =
              SchemaOf(run.row.id, run.row.runner, run.row.runner_config.dump())) {
        for (const auto& m : schema->metrics) {
          if (m.required) required.push_back(m.name);
        }
      }
      auto fill = store_->CountResults(f.attempt_id, required);
      if (!fill.ok()) {
        results[i] = fill.status();
        continue;
      }
      if (fill->measurements < f.measurement_count || fill->evidence < f.evidence_count) {
        results[i] = absl::FailedPreconditionError(
            absl::StrCat("attempt ", f.attempt_id, ": ", fill->measurements, " of ",
                         f.measurement_count, " measurements and ", fill->evidence, " of ",
                         f.evidence_count, " evidence records stored; report the rest first"));
        continue;
      }
      const int64_t expected = static_cast<int64_t>(unit.row.cell_ids.size()) * run.row.processes *
                               run.row.rounds * static_cast<int64_t>(required.size());
      if (fill->required_filled < expected) {
        results[i] = absl::FailedPreconditionError(absl::StrCat(
            "attempt ", f.attempt_id, ": ", fill->required_filled, " of ", expected,
            " slots of the design filled (", unit.row.cell_ids.size(), " cells x ",
            run.row.processes, " processes x ", run.row.rounds, " rounds x ", required.size(),
            " required metrics); report the rest, or finish it as failed"));
        continue;
      }
      done.push_back(
          db::Store::AttemptDone{f.attempt_id, unit_id, units_.at(unit_id).row.attempts});
      done_index.push_back(i);
    }
    if (!done.empty()) {
      if (absl::Status s = store_->EndAttemptsDone(done, clock_->NowMs()); !s.ok()) {
        for (size_t i : done_index) results[i] = s;
        done.clear();
      }
    }
    for (size_t k = 0; k < done.size(); ++k) {
      auto it = live_.find(done[k].attempt_id);
      UnitEntry& unit = units_.at(done[k].unit_id);
      EraseLiveLocked(it);
      unit.row.state = db::UnitState::kDone;
      absl::Status s = MaybeExtendGroupLocked(unit.row.run_id, unit.row.group_key);
      if (s.ok()) s = LocateAfterUnitLocked(unit.row.run_id, unit.row.cell_ids);
      if (s.ok()) s = UnitTerminalLocked(unit.row.run_id);
      if (s.ok()) {
        results[done_index[k]] = FinishResult{true, "done"};
      } else {
        results[done_index[k]] = s;
      }
    }
  }
  if (requeued) work_available_.NotifyAll();
  return results;
}

absl::Status SchedulerImpl::EndUnsuccessfulLocked(int64_t attempt_id,
                                                  db::AttemptState attempt_state,
                                                  const std::string& reason,
                                                  FailureCount failure_count) {
  auto it = live_.find(attempt_id);
  if (it == live_.end()) return absl::OkStatus();
  const LiveAttempt attempt = it->second;
  UnitEntry& unit = units_.at(attempt.unit_id);
  OpenRun& run = runs_.at(unit.row.run_id);
  const int failures = unit.row.attempts + (failure_count == FailureCount::kCounts ? 1 : 0);
  const bool give_up = failures >= run.row.max_attempts;
  const db::UnitState unit_state = give_up ? db::UnitState::kFailed : db::UnitState::kQueued;
  const std::string unit_reason =
      give_up ? absl::StrCat(reason, " (after ", failures, " attempts)") : reason;
  RETURN_IF_ERROR(store_->EndAttempt(attempt_id, attempt_state, unit_reason, attempt.unit_id,
                                     unit_state, failures, clock_->NowMs()));
  EraseLiveLocked(it);
  unit.row.attempts = failures;
  unit.row.state = unit_state;
  // The session did not complete this replicate: it no longer blocks the group.
  const GroupKey group{unit.row.run_id, unit.row.group_key};
  group_sessions_[group].erase(attempt.session_id);
  if (auto s = sessions_.find(attempt.session_id); s != sessions_.end()) {
    // Keep the host mark only if another live/done session on that host holds the group.
    bool host_still_used = false;
    for (const auto& other : group_sessions_[group]) {
      auto o = sessions_.find(other);
      if (o != sessions_.end() && o->second.row.machine_id == s->second.row.machine_id) {
        host_still_used = true;
      }
    }
    if (!host_still_used) group_hosts_[group].erase(s->second.row.machine_id);
  }
  if (give_up) {
    RETURN_IF_ERROR(LocateAfterUnitLocked(unit.row.run_id, unit.row.cell_ids));
    RETURN_IF_ERROR(UnitTerminalLocked(unit.row.run_id));
  } else {
    run.queued.insert(attempt.unit_id);
  }
  return absl::OkStatus();
}

void SchedulerImpl::QueueNewUnitLocked(int64_t unit_id, int64_t run_id,
                                       const std::string& group_key, int replicate, uint64_t seed,
                                       const std::vector<int64_t>& cell_ids) {
  db::UnitRow row;
  row.id = unit_id;
  row.run_id = run_id;
  row.replicate = replicate;
  row.group_key = group_key;
  row.seed = seed;
  row.state = db::UnitState::kQueued;
  row.cell_ids = cell_ids;
  OpenRun& run = runs_.at(run_id);
  run.queued.insert(unit_id);
  run.open_units++;
  units_[unit_id] = UnitEntry{std::move(row)};
  work_available_.NotifyAll();
}

void SchedulerImpl::AddLiveLocked(int64_t attempt_id, LiveAttempt attempt) {
  live_by_session_[attempt.session_id].insert(attempt_id);
  live_[attempt_id] = std::move(attempt);
}

void SchedulerImpl::EraseLiveLocked(std::map<int64_t, LiveAttempt>::iterator it) {
  if (auto s = live_by_session_.find(it->second.session_id); s != live_by_session_.end()) {
    s->second.erase(it->first);
    if (s->second.empty()) live_by_session_.erase(s);
  }
  live_.erase(it);
}

absl::Status SchedulerImpl::UnitTerminalLocked(int64_t run_id) {
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return absl::OkStatus();
  // Counted, not recounted: a scan of every unit here made each Finish O(units in memory).
  if (--run->second.open_units > 0) return absl::OkStatus();
  return CompleteRunLocked(run_id);
}

absl::Status SchedulerImpl::CompleteRunLocked(int64_t run_id) {
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return absl::OkStatus();
  RETURN_IF_ERROR(store_->SetRunState(run_id, db::RunState::kDone, clock_->NowMs()));
  // The run is finished: drop its units from memory.
  for (auto it = units_.begin(); it != units_.end();) {
    it = it->second.row.run_id == run_id ? units_.erase(it) : std::next(it);
  }
  for (auto it = group_sessions_.begin(); it != group_sessions_.end();) {
    it = it->first.first == run_id ? group_sessions_.erase(it) : std::next(it);
  }
  for (auto it = group_hosts_.begin(); it != group_hosts_.end();) {
    it = it->first.first == run_id ? group_hosts_.erase(it) : std::next(it);
  }
  runs_.erase(run);
  return absl::OkStatus();
}

absl::Status SchedulerImpl::Release(const std::string& session_id, const std::string& reason) {
  {
    MutexLock lock(&mu_);
    std::vector<int64_t> mine;
    if (auto it = live_by_session_.find(session_id); it != live_by_session_.end()) {
      mine.assign(it->second.begin(), it->second.end());
    }
    for (int64_t id : mine) {
      RETURN_IF_ERROR(EndUnsuccessfulLocked(
          id, db::AttemptState::kFailed,
          absl::StrCat("released by agent: ", reason.empty() ? "stopping" : reason),
          FailureCount::kDoesNotCount));
    }
    if (auto s = sessions_.find(session_id); s != sessions_.end()) {
      // A touch queued before the release must not mark the session active again.
      touched_.erase(session_id);
      RETURN_IF_ERROR(store_->SetSessionState(session_id, db::SessionState::kGone));
      sessions_.erase(s);
    }
  }
  work_available_.NotifyAll();
  return absl::OkStatus();
}

absl::Status SchedulerImpl::Cancel(int64_t run_id) {
  MutexLock lock(&mu_);
  auto run = runs_.find(run_id);
  if (run == runs_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("run ", run_id, " is not queued or running (unknown, done or cancelled)"));
  }
  RETURN_IF_ERROR(store_->CancelRun(run_id, clock_->NowMs()));
  for (auto it = live_.begin(); it != live_.end();) {
    auto next = std::next(it);
    if (units_.at(it->second.unit_id).row.run_id == run_id) EraseLiveLocked(it);
    it = next;
  }
  for (auto it = units_.begin(); it != units_.end();) {
    it = it->second.row.run_id == run_id ? units_.erase(it) : std::next(it);
  }
  runs_.erase(run);
  return absl::OkStatus();
}

absl::Status SchedulerImpl::Tick() {
  std::vector<std::string> touched;
  bool requeued = false;
  {
    MutexLock lock(&mu_);
    const int64_t now = clock_->NowMs();
    std::vector<std::pair<int64_t, std::string>> expired;
    for (const auto& [id, attempt] : live_) {
      if (attempt.deadline_ms <= now) expired.emplace_back(id, attempt.session_id);
    }
    for (const auto& [id, session] : expired) {
      RETURN_IF_ERROR(
          EndUnsuccessfulLocked(id, db::AttemptState::kExpired,
                                absl::StrCat("lease expired: session ", session.substr(0, 8),
                                             " silent for ", options_.lease_ms / 1000.0, " s"),
                                FailureCount::kCounts));
      requeued = true;
    }
    for (auto& [id, session] : sessions_) {
      if (!session.lost && now - session.last_seen_ms > options_.session_lost_ms) {
        session.lost = true;
        RETURN_IF_ERROR(store_->SetSessionState(id, db::SessionState::kLost));
      }
    }
    touched.assign(touched_.begin(), touched_.end());
    touched_.clear();
  }
  if (requeued) work_available_.NotifyAll();
  return store_->TouchSessions(touched, clock_->NowMs());
}

void SchedulerImpl::WakeAll() { work_available_.NotifyAll(); }

void SchedulerImpl::Shutdown() {
  {
    MutexLock lock(&mu_);
    shutdown_ = true;
  }
  work_available_.NotifyAll();
}

int64_t SchedulerImpl::live_attempts() const {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(live_.size());
}

}  // namespace ladder::coordinator
