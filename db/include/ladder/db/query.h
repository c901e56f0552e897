// Read-only analysis over a results database: run progress, sessions, per-cell statistics and
// raw export. Works on the coordinator's live database (WAL readers do not block the writer)
// and on a copied file, offline.
//
// Only measurements from completed attempts that were not stale count (the view
// valid_measurements), so a unit that was retried never contributes twice.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/states.h"

namespace ladder::db {

struct RunSummary {
  int64_t run_id = 0;
  std::string matrix_name, matrix_sha256, runner, metric;
  RunState state = RunState::kQueued;
  int64_t cells_total = 0, cells_done = 0, cells_failed = 0;
  int64_t units_total = 0, units_done = 0, units_leased = 0, units_queued = 0, units_failed = 0,
          units_cancelled = 0;
  int64_t measurements = 0;
  int64_t created_at_ms = 0, started_at_ms = 0, finished_at_ms = 0;
  double mean_unit_seconds = 0;              // mean duration of done attempts; 0 when none yet
  std::vector<std::string> failure_reasons;  // distinct, at most 10
};

absl::StatusOr<RunSummary> GetRunSummary(db::Database& db, int64_t run_id);
absl::StatusOr<std::vector<RunSummary>> ListRuns(db::Database& db, int limit);

struct SessionSummary {
  std::string session_id, hostname;
  SessionState state = SessionState::kActive;
  int64_t started_at_ms = 0, last_seen_ms = 0;
  int64_t attempts_done = 0, attempts_live = 0, attempts_failed = 0;
  nlohmann::json inventory;  // host, cpu, gpus, software
};
absl::StatusOr<std::vector<SessionSummary>> ListSessions(db::Database& db);

// A session's attempts, newest first (at most `limit`): the unit each ran and how it ended.
struct SessionAttempt {
  int64_t attempt_id = 0, run_id = 0, unit_index = 0;
  std::string group_key, state;               // leased | done | failed | expired | cancelled
  int64_t leased_at_ms = 0, ended_at_ms = 0;  // 0: not ended
  std::string reason;
};
absl::StatusOr<std::vector<SessionAttempt>> ListSessionAttempts(db::Database& db,
                                                                const std::string& session_id,
                                                                int limit);

// How many rows are in each state: sessions, runs, and the units of runs not yet finished
// (queued, leased, done, failed, cancelled), for the coordinator's /metrics.
struct StateCounts {
  std::vector<std::pair<std::string, int64_t>> sessions, runs, units_of_open_runs;
};
absl::StatusOr<StateCounts> CountByState(db::Database& db);

struct QueryOptions {
  int64_t run_id = 0;
  std::vector<std::string> by;  // axes to group by; empty: every axis of the run
  std::string metric;           // empty: the run's metric
};

struct QueryRow {
  nlohmann::json group;  // object: axis -> value
  int64_t n = 0;         // measurements
  int64_t sessions = 0;  // distinct sessions that contributed
  double median = 0, mean = 0, sd = 0, cv = 0, min = 0, max = 0;
  std::vector<std::string> flags;  // e.g. "failed", "no data", "backend_mismatch"
  // 95 % interval of the group's mean with degrees of freedom from sessions
  // (ladder::stats::CellMeanInterval over session means; processes of different cells of a group
  // count as distinct processes). NaN when it cannot be computed (fewer than 2 values).
  // ci_within_session: only one session contributed, so the interval covers only
  // within-session noise and says nothing about another machine.
  double ci_lower = std::numeric_limits<double>::quiet_NaN();
  double ci_upper = std::numeric_limits<double>::quiet_NaN();
  double ci_df = std::numeric_limits<double>::quiet_NaN();
  bool ci_within_session = false;
};

struct QueryResult {
  int64_t run_id = 0;
  std::string metric, unit;
  std::vector<std::string> by;
  std::vector<QueryRow> rows;
  std::vector<std::string> notes;
};

// Groups valid measurements of `metric` by the chosen axes. Errors name the unknown axis or
// metric and list the ones that exist.
absl::StatusOr<QueryResult> QueryRun(db::Database& db, const QueryOptions& options);
nlohmann::json ToJson(const QueryResult& result);
std::string ToCsv(const QueryResult& result);

// Every measurement of a run with its cell parameters, session and indices, valid or not
// (with `valid` 0/1), for pandas or a spreadsheet.
absl::StatusOr<nlohmann::json> ExportRunJson(db::Database& db, int64_t run_id);
absl::StatusOr<std::string> ExportRunCsv(db::Database& db, int64_t run_id);

}  // namespace ladder::db
