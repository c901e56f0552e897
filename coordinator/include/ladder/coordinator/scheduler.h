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
//   - a record is stored only inside its attempt's design (db::Store::Report); a finished
//   attempt
//     is accepted as done only when every (cell, process, round, required metric) slot of its
//     design is filled, whatever count the agent announces.
//
// Thread safety: every method is safe to call concurrently (one internal mutex; long polls wait
// on a separate signal without holding it).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/db/store.h"
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
  int lease_ms = 30000;         // a lease expires this long after its last heartbeat
  int session_lost_ms = 90000;  // a session silent this long is shown as lost
  int64_t max_cells = 100000;   // default cell cap for submissions
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
  std::string runner_config;  // runner: command: the program and metrics (JSON); else ""
  std::vector<db::CellRow> cells;
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

// How the agent says an attempt ended.
enum class AttemptOutcome {
  kSucceeded,  // done: accepted only once every slot of its design is filled
  kFailed,     // the runner failed; counts toward the run's max_attempts
};

// One attempt's end, as the agent announces it.
struct FinishIn {
  std::string session_id;
  int64_t attempt_id = 0;
  AttemptOutcome outcome = AttemptOutcome::kSucceeded;
  std::string failure_reason;  // kFailed: why (at most 4096 bytes)
  int64_t measurement_count = 0;
  int64_t evidence_count = 0;
};

// Built by Create; SchedulerImpl (coordinator/src/scheduler_impl.h) is the one implementation.
class Scheduler {
 public:
  // Loads the scheduling state from the store. Leases that were live when the previous
  // coordinator stopped stay live, with a fresh deadline, so their agents can finish them.
  // `store` and `clock` must outlive the scheduler.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(db::Store* store, const Clock* clock,
                                                           SchedulerOptions options);
  virtual ~Scheduler() = default;

  // Parses and expands a matrix; stores it, or stores nothing and returns InvalidArgument.
  // `max_cells` 0 means the default.
  virtual absl::StatusOr<SubmitResult> Validate(const std::string& yaml,
                                                const std::string& filename,
                                                int64_t max_cells) const = 0;
  // `tags` are stored with the run (db/series.h); InvalidArgument for tags it refuses.
  virtual absl::StatusOr<SubmitResult> Submit(const std::string& yaml, const std::string& filename,
                                              int64_t max_cells, const db::RunTags& tags = {}) = 0;

  virtual absl::Status RegisterSession(const db::SessionRow& session) = 0;
  virtual bool KnowsSession(const std::string& session_id) const = 0;
  // Live attempts the session holds now.
  virtual int LiveAttemptsOf(const std::string& session_id) const = 0;
  // For a run that sits queued: why no connected session can take it ("" when one can, or the
  // run is not waiting). E.g. "waiting for an agent with gpu_vendor=nvidia; 2 agents
  // connected, none match".
  virtual std::string WhyWaiting(int64_t run_id) const = 0;
  // Why `requirements` of a `runner` matrix cannot be met by any connected session ("" when
  // one matches): Submit's warning.
  virtual std::string UnmetRequirements(const std::string& runner,
                                        const matrices::Requirements& requirements) const = 0;

  // Hands the session a unit, waiting up to `wait_ms` for one. nullopt when none came.
  virtual absl::StatusOr<std::optional<Lease>> LeaseFor(const std::string& session_id,
                                                        int wait_ms) = 0;
  // Long polls without a thread each (the coordinator's lease dispatcher): TryLease never
  // waits; work_generation() changes whenever work may have become available, and
  // WaitForWork(seen, deadline) blocks until it differs from `seen` (or shutdown, or the
  // deadline) and returns it. Reading the generation before a pass over the waiting sessions
  // means no change made during the pass is missed.
  virtual absl::StatusOr<std::optional<Lease>> TryLease(const std::string& session_id) = 0;
  // TryLease for several sessions at once, all leases written in one transaction (the
  // dispatcher's group commit). One result per session, in order.
  virtual std::vector<absl::StatusOr<std::optional<Lease>>> TryLeaseBatch(
      const std::vector<std::string>& session_ids) = 0;
  // Called (on the thread that made the change, with no scheduler lock held) whenever
  // work_generation() changes; the lease dispatcher wakes on it. Set once, before serving.
  virtual void SetWorkListener(std::function<void()> listener) = 0;
  virtual uint64_t work_generation() const = 0;
  virtual uint64_t WaitForWork(uint64_t seen, std::chrono::steady_clock::time_point deadline) = 0;
  virtual bool shutting_down() const = 0;

  // Extends the session's leases named in `attempt_ids`; returns those it must stop.
  virtual absl::StatusOr<std::vector<int64_t>> Heartbeat(
      const std::string& session_id, const std::vector<int64_t>& attempt_ids) = 0;

  virtual absl::StatusOr<db::ReportOutcome> Report(
      const std::string& session_id, const std::vector<db::MeasurementIn>& measurements,
      const std::vector<db::EvidenceIn>& evidence) = 0;
  // Several sessions' reports in one store transaction (group commit); one result per report,
  // in order. Liveness is snapshotted per report as in Report.
  virtual std::vector<absl::StatusOr<db::ReportOutcome>> ReportBatch(
      std::vector<db::ReportIn> reports) = 0;

  // Ends an attempt. FailedPrecondition while fewer results than announced are stored.
  virtual absl::StatusOr<FinishResult> Finish(const FinishIn& finish) = 0;
  // Several ends at once: the successful ones in one store transaction (group commit). One
  // result per entry, in order, each as Finish would return it.
  virtual std::vector<absl::StatusOr<FinishResult>> FinishBatch(
      const std::vector<FinishIn>& finishes) = 0;

  // The session is leaving: its live attempts are re-queued without counting as failures.
  virtual absl::Status Release(const std::string& session_id, const std::string& reason) = 0;

  virtual absl::Status Cancel(int64_t run_id) = 0;

  // Expires overdue leases and marks silent sessions lost. Called by the reaper thread.
  virtual absl::Status Tick() = 0;

  // Wakes every long poll (used at shutdown).
  virtual void WakeAll() = 0;
  // Refuses leases from now on and wakes every long poll. Idempotent.
  virtual void Shutdown() = 0;

  virtual int64_t live_attempts() const = 0;
};

}  // namespace ladder::coordinator
