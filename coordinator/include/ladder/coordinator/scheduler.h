// The scheduler: which unit goes to which session, for how long, and what happens when an
// attempt ends. All of its state is written through to the Store before a call returns, so a
// coordinator killed at any moment restarts (Scheduler::Create) where it was.
//
// Rules:
//   - a unit is leased only to a session whose inventory satisfies the run's `requires` and
//     whose features include the run's runner;
//   - replicate k of a cell goes to a session that has not run (and is not running) another
//     replicate of the same cell group; among eligible units, one whose group has not yet run on
//     the session's host is preferred, so replicates spread over hosts where the fleet allows;
//   - a lease lasts `lease_ms` past the last heartbeat; an expired or failed attempt re-queues
//     its unit until `max_attempts` attempts have failed, then the unit's cells fail;
//   - a record is stored only inside its attempt's design (store::Store::Report); a finished attempt
//     is accepted as done only when every (cell, process, round, required metric) slot of its
//     design is filled, whatever count the agent announces.
//
// Thread safety: every public method is safe to call concurrently (one internal mutex; long
// polls wait on a condition variable without holding it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "ladder/store/store.h"
#include "ladder/matrices/matrix.h"
#include "ladder/runner/schema.h"

namespace ladder::coordinator {

// Time source, injectable so tests can drive lease expiry.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t NowMs() const = 0;  // unix milliseconds
};
Clock& SystemClock();

struct SchedulerOptions {
  int lease_ms = 30000;          // a lease expires this long after its last heartbeat
  int session_lost_ms = 90000;   // a session silent this long is shown as lost
  int64_t max_cells = 100000;    // default cell cap for submissions
  // What each runner reports and accepts. nullptr: runner::BuiltinMetricSchemas() (metrics
  // only, no parameter checks); `ladder coordinator` passes the agent's schemas with checks, so
  // Submit refuses exactly what `ladder validate` refuses. Must outlive the scheduler.
  const runner::RunnerSchemas* runners = nullptr;
};

struct Lease {
  int64_t attempt_id = 0;
  int64_t unit_id = 0;
  int64_t run_id = 0;
  std::string runner;
  std::vector<store::CellRow> cells;
  int processes = 1;
  int rounds = 1;
  uint64_t seed = 0;
  int lease_ms = 0;
};

struct SubmitResult {
  int64_t run_id = 0;
  int64_t cells = 0;
  int64_t units = 0;
  std::string name;
  std::string warning;  // e.g. no connected agent meets the matrix's `requires`
};

struct FinishResult {
  bool accepted = false;  // false: the attempt was no longer this session's live lease
  std::string detail;
};

struct FinishIn {
  std::string session_id;
  int64_t attempt_id = 0;
  bool ok = true;
  std::string failure_reason;
  int64_t measurement_count = 0;
  int64_t evidence_count = 0;
};

class Scheduler {
 public:
  // Loads the scheduling state from the store. Leases that were live when the previous
  // coordinator stopped stay live, with a fresh deadline, so their agents can finish them.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(store::Store* store, const Clock* clock,
                                                          SchedulerOptions options);

  // Parses and expands a matrix; stores it, or stores nothing and returns InvalidArgument.
  // `max_cells` 0 means the default.
  absl::StatusOr<SubmitResult> Validate(const std::string& yaml, const std::string& filename,
                                        int64_t max_cells) const;
  absl::StatusOr<SubmitResult> Submit(const std::string& yaml, const std::string& filename,
                                      int64_t max_cells);

  absl::Status RegisterSession(const store::SessionRow& session);
  bool KnowsSession(const std::string& session_id) const;
  // Live attempts the session holds now.
  int LiveAttemptsOf(const std::string& session_id) const;
  // For a run that sits queued: why no connected session can take it ("" when one can, or the
  // run is not waiting). E.g. "waiting for an agent with gpu_vendor=nvidia; 2 agents
  // connected, none match".
  std::string WhyWaiting(int64_t run_id) const;
  // Why `requirements` of a `runner` matrix cannot be met by any connected session ("" when
  // one matches): Submit's warning.
  std::string UnmetRequirements(const std::string& runner,
                                const matrices::Requirements& requirements) const;

  // Hands the session a unit, waiting up to `wait_ms` for one. nullopt when none came.
  absl::StatusOr<std::optional<Lease>> LeaseFor(const std::string& session_id, int wait_ms);
  // Long polls without a thread each (the coordinator's lease dispatcher): TryLease never
  // waits; work_generation() changes whenever work may have become available, and
  // WaitForWork(seen, deadline) blocks until it differs from `seen` (or shutdown, or the
  // deadline) and returns it. Reading the generation before a pass over the waiting sessions
  // means no change made during the pass is missed.
  absl::StatusOr<std::optional<Lease>> TryLease(const std::string& session_id);
  // TryLease for several sessions at once, all leases written in one transaction (the
  // dispatcher's group commit). One result per session, in order.
  std::vector<absl::StatusOr<std::optional<Lease>>> TryLeaseBatch(
      const std::vector<std::string>& session_ids);
  // Called (without locks held by the caller's thread beyond the scheduler's own) whenever
  // work_generation() changes; the lease dispatcher wakes on it. Set once, before serving.
  void SetWorkListener(std::function<void()> listener) {
    work_available_.SetListener(std::move(listener));
  }
  uint64_t work_generation() const { return work_available_.generation(); }
  uint64_t WaitForWork(uint64_t seen, std::chrono::steady_clock::time_point deadline) {
    return work_available_.WaitUntil(seen, deadline);
  }
  bool shutting_down() const;

  // Extends the session's leases named in `attempt_ids`; returns those it must stop.
  absl::StatusOr<std::vector<int64_t>> Heartbeat(const std::string& session_id,
                                                 const std::vector<int64_t>& attempt_ids);

  absl::StatusOr<store::ReportOutcome> Report(const std::string& session_id,
                                           const std::vector<store::MeasurementIn>& measurements,
                                           const std::vector<store::EvidenceIn>& evidence);
  // Several sessions' reports in one store transaction (group commit); one result per report,
  // in order. Liveness is snapshotted per report as in Report.
  std::vector<absl::StatusOr<store::ReportOutcome>> ReportBatch(std::vector<store::ReportIn> reports);

  // Ends an attempt. FailedPrecondition while fewer results than announced are stored.
  absl::StatusOr<FinishResult> Finish(const std::string& session_id, int64_t attempt_id, bool ok,
                                      const std::string& failure_reason,
                                      int64_t measurement_count, int64_t evidence_count);
  // Several ends at once: the successful ones in one store transaction (group commit). One
  // result per entry, in order, each as Finish would return it.
  std::vector<absl::StatusOr<FinishResult>> FinishBatch(const std::vector<FinishIn>& finishes);

  // The session is leaving: its live attempts are re-queued without counting as failures.
  absl::Status Release(const std::string& session_id, const std::string& reason);

  absl::Status Cancel(int64_t run_id);

  // Expires overdue leases and marks silent sessions lost. Called by the reaper thread.
  absl::Status Tick();

  // Wakes every long poll (used at shutdown).
  void WakeAll();
  void Shutdown();

  int64_t live_attempts() const;

 private:
  struct RunState {
    store::RunRow row;
    matrices::Requirements requirements;
    int64_t open_units = 0;       // queued or leased
    std::set<int64_t> queued;     // unit ids, in creation order
  };
  struct UnitState {
    store::UnitRow row;
  };
  struct LiveAttempt {
    int64_t unit_id = 0;
    std::string session_id;
    int64_t deadline_ms = 0;
  };
  struct SessionState {
    store::SessionRow row;
    int64_t last_seen_ms = 0;
    bool lost = false;
  };
  using GroupKey = std::pair<int64_t, std::string>;  // run id, unit group key

  Scheduler(store::Store* store, const Clock* clock, SchedulerOptions options);
  absl::Status Load() ABSL_LOCKS_EXCLUDED(mu_);
  void AddRunLocked(const store::RunRow& run) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Matches(const RunState& run, const SessionState& session) const;
  const runner::RunnerSchemas& runners() const;
  // Whether a metric and unit are what the runner declares (the store's record check).
  store::MetricCheck MetricCheck() const;
  std::string UnmetLocked(const std::string& runner, const matrices::Requirements& requirements)
      const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::optional<Lease>> TryLeaseLocked(const std::string& session_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A queued unit the session may take (not in `taken`), or 0.
  int64_t ChooseUnitLocked(const std::string& session_id, const std::set<int64_t>& taken) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<absl::StatusOr<std::optional<Lease>>> LeaseBatchLocked(
      const std::vector<std::string>& session_ids) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a live attempt that did not succeed; re-queues or fails its unit.
  absl::Status EndUnsuccessfulLocked(int64_t attempt_id, const std::string& attempt_state,
                                     const std::string& reason, bool counts_as_failure)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A unit of the run became done or failed; completes the run when it was the last open one.
  absl::Status UnitTerminalLocked(int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adaptive replication (`precision`): once every replicate of a cell group has ended, adds a
  // paired session while the group's widest ratio interval is wider than asked and the budget
  // allows; records each decision and its reason.
  absl::Status MaybeExtendGroupLocked(int64_t run_id, const std::string& group_key)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ---- Crossover location (`locate`, ladder/coordinator/locate.h) ----
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
                                const std::vector<store::CellRecord>& run_cells)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the unit group is a locate probe's (its replicates are locate's to add, not
  // precision's).
  bool IsLocateProbeGroupLocked(const RunState& run, const std::string& group_key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void QueueUnitLocked(store::UnitRow row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks the run done and drops its units and group marks from memory.
  absl::Status CompleteRunLocked(int64_t run_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AddLiveLocked(int64_t attempt_id, LiveAttempt attempt) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLiveLocked(std::map<int64_t, LiveAttempt>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TouchLocked(const std::string& session_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  const Clock* const clock_;
  const SchedulerOptions options_;

  // Signalled by every change that may let a session lease (new units, re-queued units, new
  // sessions, shutdown). Its own mutex, taken after mu_ when both are held, so long polls can
  // wait on it without mu_; the generation makes a signal between two waits impossible to miss.
  class WorkSignal {
   public:
    void notify_all() {
      std::function<void()> listener;
      {
        std::lock_guard lock(mu_);
        ++generation_;
        listener = listener_;
      }
      cv_.notify_all();
      if (listener) listener();
    }
    void SetListener(std::function<void()> listener) {
      std::lock_guard lock(mu_);
      listener_ = std::move(listener);
    }
    uint64_t generation() const {
      std::lock_guard lock(mu_);
      return generation_;
    }
    uint64_t WaitUntil(uint64_t seen, std::chrono::steady_clock::time_point deadline) {
      std::unique_lock lock(mu_);
      cv_.wait_until(lock, deadline, [&] { return generation_ != seen; });
      return generation_;
    }

   private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    uint64_t generation_ = 0;
    std::function<void()> listener_;
  };

  mutable std::mutex mu_;
  WorkSignal work_available_;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // Open runs in id order; each keeps its queued units, so a lease scans only the runs whose
  // requirements the session meets (unit ids grow with run ids: run order is creation order).
  std::map<int64_t, RunState> runs_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, UnitState> units_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, LiveAttempt> live_ ABSL_GUARDED_BY(mu_);
  // live_ indexed by session, so Report does not scan every live attempt.
  std::map<std::string, std::set<int64_t>> live_by_session_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, SessionState> sessions_ ABSL_GUARDED_BY(mu_);
  // Sessions and hosts holding a live or done attempt of a cell group.
  std::map<GroupKey, std::set<std::string>> group_sessions_ ABSL_GUARDED_BY(mu_);
  std::map<GroupKey, std::set<std::string>> group_hosts_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> touched_ ABSL_GUARDED_BY(mu_);  // sessions seen since the last Tick
};

}  // namespace ladder::coordinator
