// SchedulerImpl: the scheduler's state and the three units that change it, each in its own file:
//   scheduler.cc  leasing: sessions, leases, heartbeats, reports, finishes, expiry, cancel;
//   precision.cc  adaptive replication (`precision`): one more paired session per cell group
//                 while its ratio interval is wider than asked;
//   crossover.cc  crossover location (`locate`): probes and their sessions, line by line.
// Private to coordinator/: the public contract is ladder/coordinator/scheduler.h.
//
// Threads: every member below `mu_` is guarded by it; the public methods take it, the *Locked
// methods require it. The store is called under it (its calls are serialized anyway), except
// Report's, which is the slow part and only needs a snapshot of liveness.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "ladder/common/mutex.h"
#include "ladder/coordinator/scheduler.h"
#include "ladder/runner/schema.h"
#include "ladder/stats/sample.h"
#include "work_signal.h"

namespace ladder::coordinator {

// The store's observations as ladder::stats takes them, by cell: sessions numbered in order of
// first appearance (ValidObservations returns them as stored, so session 0 reported first: the
// "first sessions" the stopping rules decide from).
std::map<int64_t, std::vector<stats::Observation>> ObservationsByCell(
    const std::vector<db::Observation>& observations);

// The schemas of `runner: command` runs, built once per run from its stored configuration (the
// declared metrics). Its lock is a leaf: taken under the store's lock by the record check.
class CommandSchemaCache {
 public:
  // nullptr when the configuration does not read back.
  const runner::RunnerSchema* Find(int64_t run_id, const std::string& runner_config)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  std::map<int64_t, std::unique_ptr<runner::RunnerSchema>> schemas_ ABSL_GUARDED_BY(mu_);
};

class SchedulerImpl final : public Scheduler {
 public:
  SchedulerImpl(db::Store* store, const Clock* clock, SchedulerOptions options);
  // Loads the scheduling state from the store (Create's second half).
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);

  absl::StatusOr<SubmitResult> Validate(const std::string& yaml, const std::string& filename,
                                        int64_t max_cells) const override;
  absl::StatusOr<SubmitResult> Submit(const std::string& yaml, const std::string& filename,
                                      int64_t max_cells, const db::RunTags& tags = {}) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status RegisterSession(const db::SessionRow& session) override ABSL_LOCKS_EXCLUDED(mu_);
  bool KnowsSession(const std::string& session_id) const override ABSL_LOCKS_EXCLUDED(mu_);
  int LiveAttemptsOf(const std::string& session_id) const override ABSL_LOCKS_EXCLUDED(mu_);
  std::string WhyWaiting(int64_t run_id) const override ABSL_LOCKS_EXCLUDED(mu_);
  std::string UnmetRequirements(const std::string& runner,
                                const matrices::Requirements& requirements) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<Lease>> LeaseFor(const std::string& session_id, int wait_ms) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::optional<Lease>> TryLease(const std::string& session_id) override
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::StatusOr<std::optional<Lease>>> TryLeaseBatch(
      const std::vector<std::string>& session_ids) override ABSL_LOCKS_EXCLUDED(mu_);
  void SetWorkListener(std::function<void()> listener) override {
    work_available_.SetListener(std::move(listener));
  }
  uint64_t work_generation() const override { return work_available_.generation(); }
  uint64_t WaitForWork(uint64_t seen, std::chrono::steady_clock::time_point deadline) override {
    return work_available_.WaitUntil(seen, deadline);
  }
  bool shutting_down() const override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::vector<int64_t>> Heartbeat(const std::string& session_id,
                                                 const std::vector<int64_t>& attempt_ids) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<db::ReportOutcome> Report(const std::string& session_id,
                                           const std::vector<db::MeasurementIn>& measurements,
                                           const std::vector<db::EvidenceIn>& evidence) override
      ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::StatusOr<db::ReportOutcome>> ReportBatch(
      std::vector<db::ReportIn> reports) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<FinishResult> Finish(const FinishIn& finish) override ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<absl::StatusOr<FinishResult>> FinishBatch(
      const std::vector<FinishIn>& finishes) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Release(const std::string& session_id, const std::string& reason) override
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Cancel(int64_t run_id) override ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status Tick() override ABSL_LOCKS_EXCLUDED(mu_);
  void WakeAll() override;
  void Shutdown() override ABSL_LOCKS_EXCLUDED(mu_);
  int64_t live_attempts() const override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A run still open (queued or running), with what leasing needs of it.
  struct OpenRun {
    db::RunRow row;
    matrices::Requirements requirements;
    int64_t open_units = 0;    // queued or leased
    std::set<int64_t> queued;  // unit ids, in creation order
  };
  struct UnitEntry {
    db::UnitRow row;
  };
  struct LiveAttempt {
    int64_t unit_id = 0;
    std::string session_id;
    int64_t deadline_ms = 0;
  };
  struct SessionEntry {
    db::SessionRow row;
    int64_t last_seen_ms = 0;
    bool lost = false;
  };
  using GroupKey = std::pair<int64_t, std::string>;  // run id, unit group key

  // ---- Leasing (scheduler.cc) ----
  void AddRunLocked(const db::RunRow& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Matches(const OpenRun& run, const SessionEntry& session) const;
  const runner::RunnerSchemas& runners() const;
  // The schema a run's records are checked against: the built-in runner's, or the one a command
  // run's declared metrics make. nullptr for an unknown runner or an unreadable configuration.
  const runner::RunnerSchema* SchemaOf(int64_t run_id, const std::string& runner,
                                       const std::string& runner_config) const;
  // Whether a metric and unit are what the runner declares (the store's record check).
  db::MetricCheck MetricCheck() const;
  // Submit's warning: unmet requirements, else fewer matching agents than the design's sessions.
  std::string SubmitWarning(const matrices::Matrix& matrix) const ABSL_LOCKS_EXCLUDED(mu_);
  std::string UnmetLocked(const std::string& runner,
                          const matrices::Requirements& requirements) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<Lease>> TryLeaseLocked(const std::string& session_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A queued unit the session may take (not in `taken`), or 0.
  int64_t ChooseUnitLocked(const std::string& session_id, const std::set<int64_t>& taken) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<absl::StatusOr<std::optional<Lease>>> LeaseBatchLocked(
      const std::vector<std::string>& session_ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an unsuccessful end counts toward the run's max_attempts.
  enum class FailureCount {
    kCounts,        // the runner failed or the lease expired
    kDoesNotCount,  // the agent released it (stopping): not the unit's fault
  };
  // Ends a live attempt that did not succeed; re-queues or fails its unit.
  absl::Status EndUnsuccessfulLocked(int64_t attempt_id, db::AttemptState attempt_state,
                                     const std::string& reason, FailureCount failure_count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A unit of the run became done or failed; completes the run when it was the last open one.
  absl::Status UnitTerminalLocked(int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queues a unit just added to the store (adaptive replication, locate probes).
  void QueueNewUnitLocked(int64_t unit_id, int64_t run_id, const std::string& group_key,
                          int replicate, uint64_t seed, const std::vector<int64_t>& cell_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the run done and drops its units and group marks from memory.
  absl::Status CompleteRunLocked(int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddLiveLocked(int64_t attempt_id, LiveAttempt attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLiveLocked(std::map<int64_t, LiveAttempt>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TouchLocked(const std::string& session_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Adaptive replication (precision.cc) ----
  // Once every replicate of a cell group has ended, adds a paired session while the group's
  // widest ratio interval is wider than asked and the budget allows; records each decision and
  // its reason.
  absl::Status MaybeExtendGroupLocked(int64_t run_id, const std::string& group_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After a restart: decides each group whose last unit ended just before the stop and has no
  // decision recorded at its session count.
  absl::Status DecideUndecidedGroupsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ---- Crossover location (crossover.cc; the rule is ladder/coordinator/locate.h) ----
  // A unit holding `cell_ids` of a locate run ended (done or failed for good): steps each line
  // those cells belong to.
  absl::Status LocateAfterUnitLocked(int64_t run_id, const std::vector<int64_t>& cell_ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Steps every line of the run (after a restart: a unit may have ended just before the stop).
  absl::Status LocateAllLinesLocked(int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Once every unit holding the line's cells has ended, and unless the line has stopped: adds a
  // probe or a session at the probe (cells, units and the decision in one transaction) or
  // records why it stopped. Idempotent: with nothing new measured it changes nothing.
  absl::Status LocateLineLocked(int64_t run_id, const std::string& line_key,
                                const std::vector<db::CellRecord>& run_cells)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the unit group is a locate probe's (its replicates are locate's to add, not
  // precision's).
  bool IsLocateProbeGroupLocked(const OpenRun& run, const std::string& group_key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every unit of the run holding a cell of `depth_of_cell` has ended; when so, the
  // units at each depth are in `units_at_depth`.
  bool LineUnitsEndedLocked(int64_t run_id, const std::map<int64_t, double>& depth_of_cell,
                            std::map<double, std::set<int64_t>>* units_at_depth) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One more paired session (replicate unit) at a probe, with its decision.
  absl::Status AddProbeSessionLocked(int64_t run_id, const std::string& group_key, int replicate,
                                     const std::vector<int64_t>& cell_ids,
                                     const db::LocateDecisionRow& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A probe: its cells and `sessions` replicate units of them, with its decision.
  absl::Status AddProbeLocked(int64_t run_id, const std::string& group_key,
                              const std::vector<db::NewCell>& cells, int sessions,
                              const db::LocateDecisionRow& decision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  db::Store* const store_;
  const Clock* const clock_;
  const SchedulerOptions options_;
  // Shared with the record checks the store runs (MetricCheck), which outlive no scheduler.
  const std::unique_ptr<CommandSchemaCache> command_schemas_ =
      std::make_unique<CommandSchemaCache>();

  WorkSignal work_available_;
  // Taken before work_available_'s own mutex when both are held.
  mutable Mutex mu_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Open runs in id order; each keeps its queued units, so a lease scans only the runs whose
  // requirements the session meets (unit ids grow with run ids: run order is creation order).
  std::map<int64_t, OpenRun> runs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, UnitEntry> units_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, LiveAttempt> live_ ABSL_GUARDED_BY(mu_);
  // live_ indexed by session, so Report does not scan every live attempt.
  std::map<std::string, std::set<int64_t>> live_by_session_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, SessionEntry> sessions_ ABSL_GUARDED_BY(mu_);
  // Sessions and hosts holding a live or done attempt of a cell group.
  std::map<GroupKey, std::set<std::string>> group_sessions_ ABSL_GUARDED_BY(mu_);
  std::map<GroupKey, std::set<std::string>> group_hosts_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> touched_ ABSL_GUARDED_BY(mu_);  // sessions seen since the last Tick
};

}  // namespace ladder::coordinator
