// The coordinator's persistence: every scheduling fact and every measurement, in results.db.
//
// The Store is the database's only writer. Each method is one transaction: it either happens
// completely or not at all, so a coordinator killed at any instant restarts from a consistent
// state (LoadSchedulingState). Times are unix milliseconds supplied by the caller (so tests can
// inject a clock).
//
// Thread safety: all methods are serialized by an internal mutex; safe to call from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/common/mutex.h"
#include "ladder/db/series.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/states.h"
#include "ladder/matrices/matrix.h"

namespace ladder::db {

struct GpuRow {
  std::string vendor, name, arch, uuid, driver;
  int64_t memory_mib = 0;
};

// How GPUs `a` and `b` (indices into SessionRow::gpus, a < b) are connected: "NV18", "SYS",
// "XGMI", ... as the vendor's tool names it.
struct GpuLinkRow {
  int a = 0, b = 0;
  std::string kind;
};

struct SessionRow {
  std::string id;
  std::string hostname, machine_id, boot_id, cloud_instance_id, cpu_model, agent_version;
  int cpu_cores = 0;
  int64_t memory_mib = 0;
  nlohmann::json software = nlohmann::json::object();
  nlohmann::json features = nlohmann::json::array();
  nlohmann::json labels = nlohmann::json::object();
  std::vector<GpuRow> gpus;
  std::vector<GpuLinkRow> gpu_links;
  int64_t started_at = 0;
  int64_t last_seen_at = 0;
  SessionState state = SessionState::kActive;
};

struct RunRow {
  int64_t id = 0;
  RunState state = RunState::kQueued;
  std::string runner;
  std::string metric;
  int max_attempts = 3;
  int processes = 1, rounds = 1, sessions = 1;
  nlohmann::json requirements;  // matrices::Requirements as JSON
  nlohmann::json pair_axes = nlohmann::json::array();
  nlohmann::json precision = nlohmann::json::object();  // {} or {ratio_half_width, max_sessions}
  nlohmann::json locate = nlohmann::json::object();     // matrices::LocateToJson's object
  // runner: command: matrices::RunnerConfigToJson's object (the program, the declared metrics);
  // {} for the built-in runners.
  nlohmann::json runner_config = nlohmann::json::object();
};

struct Observation {
  int64_t cell_id = 0;
  std::string session_id;
  int process = 0, round = 0;
  double value = 0;
};

struct UnitRow {
  int64_t id = 0;
  int64_t run_id = 0;
  int idx = 0;
  int replicate = 0;
  std::string group_key;
  uint64_t seed = 0;
  UnitState state = UnitState::kQueued;
  int attempts = 0;               // attempts that ended without success
  std::vector<int64_t> cell_ids;  // in unit order
};

struct AttemptRow {
  int64_t id = 0;
  int64_t unit_id = 0;
  std::string session_id;
  AttemptState state = AttemptState::kLeased;
  int64_t leased_at = 0;
};

// Everything the scheduler needs to resume after a restart.
struct SchedulingSnapshot {
  std::vector<RunRow> open_runs;     // queued or running
  std::vector<UnitRow> units;        // all units of open runs
  std::vector<AttemptRow> attempts;  // all non-failed attempts of those units
  std::vector<SessionRow> sessions;  // sessions not marked gone
};

struct CellRow {
  int64_t id = 0;
  std::string key;
  std::string params_json;
};

struct MeasurementIn {
  std::string uuid;
  int64_t attempt_id = 0;
  int64_t cell_id = 0;
  int process = 0, round = 0;
  std::string metric;
  double value = 0;
  std::string unit;
  int64_t measured_at = 0;
};

struct EvidenceIn {
  std::string uuid;
  int64_t attempt_id = 0;
  int64_t cell_id = 0;
  int process = 0;
  std::string kind;
  std::string value_json;
  int64_t recorded_at = 0;
};

// A record the store would not take, and why (a sentence for the agent's log).
struct RefusedRecord {
  std::string uuid;
  std::string reason;
};

struct ReportOutcome {
  std::vector<std::string> stored;     // stored now or before: safe to drop from the spool
  std::vector<std::string> stale;      // subset of stored: kept but marked stale
  std::vector<RefusedRecord> refused;  // not stored, and never will be: outside the design
  // Rows this call added (a retried report's records are stored before, not again): what the
  // coordinator counts as ingested.
  int64_t measurements_inserted = 0, evidence_inserted = 0;
};

// The design an attempt was leased under: all that its records may name.
struct AttemptDesign {
  int64_t attempt_id = 0;
  std::string session_id;
  int64_t run_id = 0;
  int64_t unit_id = 0;
  std::string runner;
  std::string runner_config;  // runs.runner_config as stored (JSON text; "{}" for built-ins)
  int processes = 1;
  int rounds = 1;
  std::vector<int64_t> cell_ids;  // sorted
  bool HasCell(int64_t cell_id) const;
};

// Why a measurement's metric, unit or value is not one its runner declares ("" when it is): an
// unknown metric, another unit, a value outside the metric's range. The coordinator supplies it
// from the runner schemas and, for runner: command, the run's declared metrics (`design`'s
// runner_config); db does not know the runners. Called under the store's lock: it must not call
// back into the store.
using MetricCheck = std::function<std::string(
    const AttemptDesign& design, const std::string& metric, const std::string& unit, double value)>;

// Caps on what one evidence record may carry.
inline constexpr size_t kMaxEvidenceJsonBytes = 64 * 1024;

// One session's report, for Store::ReportBatch.
struct ReportIn {
  std::string session_id;
  std::vector<MeasurementIn> measurements;
  std::vector<EvidenceIn> evidence;
  std::vector<int64_t> live_attempts;  // the session's live attempts when it reported
};

// How far an attempt's results fill its design, for Finish.
struct AttemptFill {
  int64_t measurements = 0;  // stored, not stale
  int64_t evidence = 0;
  int64_t required_filled = 0;  // (cell, process, round, metric) slots of required metrics
};

// ---- Crossover location (`locate`): rows the scheduler reads and writes ----

// A cell with its axis values, as the scheduler needs it to build probe cells.
struct CellRecord {
  int64_t id = 0;
  int idx = 0;
  std::string key;
  nlohmann::json axes;    // axis -> value
  nlohmann::json params;  // fixed + axes
};

// A cell to add (idx is assigned by the store: after the run's last cell).
struct NewCell {
  std::string key;
  nlohmann::json axes;
  nlohmann::json params;
};

// One row of adaptive_decisions taken by `locate`. `line_key` is the line's key: the cell key
// without the pair axis and the located axis. NaN doubles are stored as NULL.
struct LocateDecisionRow {
  std::string line_key;
  std::string decision;  // probe | add_session | stop
  std::string outcome;  // stop only: resolved | step_limited | budget_spent | no_crossing | no_data
  int sessions = 0;     // paired sessions (units) at the probe, or at the deepest rung
  double half_width = std::numeric_limits<double>::quiet_NaN();  // of the probe's ratio
  double target = 0;                                             // the resolution in octaves
  double depth = std::numeric_limits<double>::quiet_NaN();       // the probe concerned
  double bracket_lower = std::numeric_limits<double>::quiet_NaN();
  double bracket_upper = std::numeric_limits<double>::quiet_NaN();
  std::string reason;
  int64_t decided_at = 0;
};

class Store {
 public:
  // Opens or creates the database and migrates it to the latest schema.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  // Fault injection for tests: the database may grow by at most `pages` more pages, after which
  // writes fail with ResourceExhausted, as on a full disk.
  absl::Status LimitGrowthForTesting(int64_t pages);

  // Stores the matrix (deduplicated by sha256), a run, its tags (db/series.h: InvalidArgument
  // for tags ValidateRunTags refuses), its cells, units and unit_cells, all in one transaction.
  // Returns the run id.
  absl::StatusOr<int64_t> CreateRun(const std::string& yaml, const matrices::Matrix& matrix,
                                    const matrices::Expansion& expansion, int64_t now_ms,
                                    const RunTags& tags = {});

  absl::StatusOr<SchedulingSnapshot> LoadSchedulingState();
  absl::StatusOr<std::vector<CellRow>> LoadCells(const std::vector<int64_t>& cell_ids);

  absl::Status UpsertSession(const SessionRow& session);
  absl::Status TouchSessions(const std::vector<std::string>& session_ids, int64_t now_ms);
  absl::Status SetSessionState(const std::string& session_id, SessionState state);

  // Creates an attempt, marks the unit leased and the run running. Returns the attempt id.
  absl::StatusOr<int64_t> LeaseUnit(int64_t unit_id, const std::string& session_id, int64_t now_ms);
  // Group commit of leases: each (unit, session) as LeaseUnit, all in one transaction, all or
  // nothing. The attempt ids, in order.
  absl::StatusOr<std::vector<int64_t>> LeaseUnits(
      const std::vector<std::pair<int64_t, std::string>>& leases, int64_t now_ms);

  // Ends a live attempt: `attempt_state` is not kLeased. The unit moves to `unit_state` with
  // `unit_attempts` failed attempts; `reason` is kept when it is not empty.
  absl::Status EndAttempt(int64_t attempt_id, AttemptState attempt_state, const std::string& reason,
                          int64_t unit_id, UnitState unit_state, int unit_attempts, int64_t now_ms);
  // Group commit of successful ends: each attempt and its unit become `done`, all in one
  // transaction, all or nothing.
  struct AttemptDone {
    int64_t attempt_id = 0;
    int64_t unit_id = 0;
    int unit_attempts = 0;
  };
  absl::Status EndAttemptsDone(const std::vector<AttemptDone>& done, int64_t now_ms);

  // Stores measurements and evidence in one transaction. Only what the attempt's design asks
  // for is stored: a record must name a cell of the leased unit, a process and round inside
  // the run's replication, a finite value, a metric and unit `check` accepts, and a
  // (attempt, cell, process, round, metric) slot not already filled by another record; any
  // other record is refused with its reason. `live_attempts` are the session's current leases;
  // results for the session's other attempts are stored as stale. A record naming another
  // session's attempt makes the whole report PermissionDenied (nothing of it is stored).
  absl::StatusOr<ReportOutcome> Report(const std::string& session_id,
                                       const std::vector<MeasurementIn>& measurements,
                                       const std::vector<EvidenceIn>& evidence,
                                       const std::vector<int64_t>& live_attempts,
                                       const MetricCheck& check, int64_t now_ms);

  // Group commit: the reports in one transaction, each inside its own savepoint, so one that
  // fails is rolled back alone. Results are in order; when the transaction cannot commit (a full
  // disk), every report gets that error and nothing of any of them is stored.
  std::vector<absl::StatusOr<ReportOutcome>> ReportBatch(const std::vector<ReportIn>& reports,
                                                         const MetricCheck& check, int64_t now_ms);

  // The design of an attempt; NotFound for an unknown attempt.
  absl::StatusOr<AttemptDesign> LoadAttemptDesign(int64_t attempt_id);
  // How many results the attempt has stored, and how many of the slots of `required_metrics`
  // they fill.
  absl::StatusOr<AttemptFill> CountResults(int64_t attempt_id,
                                           const std::vector<std::string>& required_metrics);

  absl::Status SetRunState(int64_t run_id, RunState state, int64_t now_ms);

  // Adaptive replication: one more replicate unit of a cell group (queued); its id.
  absl::StatusOr<int64_t> AddUnit(int64_t run_id, const std::string& group_key, int replicate,
                                  uint64_t seed, const std::vector<int64_t>& cell_ids);
  // Valid measurements of `metric` for the given cells, cell by cell in the order given, each
  // cell's in the order they were stored: a session's first measurement comes before those of
  // the sessions that reported after it (the stopping rules read "the first sessions" so).
  absl::StatusOr<std::vector<Observation>> ValidObservations(const std::vector<int64_t>& cell_ids,
                                                             const std::string& metric);
  // Whether a `precision` decision was recorded for the group at this many sessions (a
  // restarted coordinator decides again only where its predecessor did not get to).
  absl::StatusOr<bool> PrecisionDecided(int64_t run_id, const std::string& group_key, int sessions);
  absl::Status RecordDecision(int64_t run_id, const std::string& group_key, int sessions,
                              double half_width, double target, const std::string& decision,
                              const std::string& reason, int64_t now_ms);
  // ---- Crossover location (`locate`) ----
  // Every cell of the run, in idx order.
  absl::StatusOr<std::vector<CellRecord>> RunCells(int64_t run_id);
  // The locate decisions of one line of the run, oldest first.
  absl::StatusOr<std::vector<LocateDecisionRow>> LocateDecisions(int64_t run_id,
                                                                 const std::string& line_key);
  // A probe, in one transaction: `cells` (appended to the run), `seeds.size()` queued units of
  // group `group_key` holding them all in order (replicates 0, 1, ...), and the decision.
  // Returns the new cell ids and unit ids.
  struct ProbeIds {
    std::vector<int64_t> cell_ids;
    std::vector<int64_t> unit_ids;
  };
  absl::StatusOr<ProbeIds> AddLocateProbe(int64_t run_id, const std::vector<NewCell>& cells,
                                          const std::string& group_key,
                                          const std::vector<uint64_t>& seeds,
                                          const LocateDecisionRow& decision);
  // One more replicate unit of a probe, with its decision, in one transaction; the unit id.
  absl::StatusOr<int64_t> AddLocateReplicate(int64_t run_id, const std::string& group_key,
                                             int replicate, uint64_t seed,
                                             const std::vector<int64_t>& cell_ids,
                                             const LocateDecisionRow& decision);
  absl::Status RecordLocateDecision(int64_t run_id, const LocateDecisionRow& decision);

  // Cancels the run's queued and leased units and its live attempts.
  absl::Status CancelRun(int64_t run_id, int64_t now_ms);

  const std::string& path() const { return path_; }

 private:
  Store(std::unique_ptr<db::Database> db, std::string path);
  absl::StatusOr<int64_t> LeaseUnitLocked(int64_t unit_id, const std::string& session_id,
                                          int64_t now_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status EndAttemptLocked(int64_t attempt_id, AttemptState attempt_state,
                                const std::string& reason, int64_t unit_id, UnitState unit_state,
                                int unit_attempts, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Report's statements, inside the caller's transaction.
  absl::StatusOr<ReportOutcome> ReportLocked(const std::string& session_id,
                                             const std::vector<MeasurementIn>& measurements,
                                             const std::vector<EvidenceIn>& evidence,
                                             const std::vector<int64_t>& live_attempts,
                                             const MetricCheck& check, int64_t now_ms)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<AttemptDesign> LoadAttemptDesignLocked(int64_t attempt_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ladder::Mutex (common/mutex.h): clang checks the annotations, TSan sees the lock.
  Mutex mu_;
  std::unique_ptr<db::Database> db_ ABSL_GUARDED_BY(mu_);
  std::string path_;
};

std::string Sha256Hex(std::string_view data);

}  // namespace ladder::db
