#include "ladder/db/store.h"

#include "ladder/db/json_rule.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ladder/db/schema.h"
#include "ladder/status_macros.h"
#include "store_internal.h"

namespace ladder::db {

std::string Sha256Hex(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}

namespace {

// Whether `table` (measurements or evidence) holds a row under `uuid`.
absl::StatusOr<bool> UuidUsedIn(db::Database& db, const char* table, const std::string& uuid) {
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db.Cached(absl::StrCat("SELECT 1 FROM ", table, " WHERE uuid = ?1")));
  stmt->Reset();
  stmt->Bind(1, uuid);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  stmt->Reset();
  return row;
}

nlohmann::json ParseJsonOr(const std::string& text, nlohmann::json fallback) {
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? fallback : parsed;
}

}  // namespace

Store::Store(std::unique_ptr<db::Database> db, std::string path)
    : db_(std::move(db)), path_(std::move(path)) {}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) {
  ASSIGN_OR_RETURN(auto db, db::Database::Open(path, db::OpenMode::kReadWrite));
  RETURN_IF_ERROR(Migrate(*db));
  // The writer's connection only (see docs/scaling.md): a 64 MiB page cache keeps the
  // measurement indexes' hot pages in memory as the file grows, and a checkpoint every ~40 MiB
  // of WAL instead of every 4 MiB makes the fsync that each checkpoint costs (paid by whichever
  // write call triggers it, under the store's mutex) ten times rarer.
  RETURN_IF_ERROR(db->Exec("PRAGMA cache_size = -65536; PRAGMA wal_autocheckpoint = 10000;"));
  return std::unique_ptr<Store>(new Store(std::move(db), path));
}

absl::Status Store::LimitGrowthForTesting(int64_t pages) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement count, db_->Prepare("PRAGMA page_count"));
  ASSIGN_OR_RETURN(bool row, count.Step());
  const int64_t now = row ? count.Int(0) : 0;
  return db_->Exec(absl::StrCat("PRAGMA max_page_count = ", now + pages));
}

absl::StatusOr<int64_t> Store::CreateRun(const std::string& yaml, const matrices::Matrix& matrix,
                                         const matrices::Expansion& expansion, int64_t now_ms,
                                         const RunTags& tags) {
  RETURN_IF_ERROR(ValidateRunTags(tags));
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(db));

  const std::string sha = Sha256Hex(yaml);
  {
    ASSIGN_OR_RETURN(
        db::Statement * insert,
        db.Cached("INSERT INTO matrices(sha256, name, yaml, created_at) VALUES (?1, ?2, ?3, ?4) "
                  "ON CONFLICT(sha256) DO NOTHING"));
    RETURN_IF_ERROR(insert->Bind(1, sha).Bind(2, matrix.name).Bind(3, yaml).Bind(4, now_ms).Run());
  }
  int64_t matrix_id = 0;
  {
    ASSIGN_OR_RETURN(db::Statement * select,
                     db.Cached("SELECT id FROM matrices WHERE sha256 = ?1"));
    select->Bind(1, sha);
    ASSIGN_OR_RETURN(bool found, select->Step());
    if (!found) return absl::InternalError("matrix row vanished");
    matrix_id = select->Int(0);
  }

  nlohmann::json axis_names = nlohmann::json::array();
  for (const auto& axis : matrix.axes) axis_names.push_back(axis.name);
  {
    ASSIGN_OR_RETURN(
        db::Statement * insert,
        db.Cached(
            "INSERT INTO runs(matrix_id, state, runner, metric, max_attempts, processes, rounds, "
            "sessions, requires, axes, pair_axes, created_at, precision, locate, runner_config) "
            "VALUES (?1, 'queued', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)"));
    insert->Bind(1, matrix_id)
        .Bind(2, matrix.runner)
        .Bind(3, matrix.metric)
        .Bind(4, matrix.max_attempts)
        .Bind(5, matrix.replicates.processes)
        .Bind(6, matrix.replicates.rounds)
        .Bind(7, matrix.replicates.sessions)
        .Bind(8, matrices::RequirementsToJson(matrix.requirements).dump())
        .Bind(9, axis_names.dump())
        .Bind(10, nlohmann::json(matrix.pair).dump())
        .Bind(11, now_ms)
        .Bind(12, matrix.precision
                      ? nlohmann::json{{"ratio_half_width", matrix.precision->ratio_half_width},
                                       {"max_sessions", matrix.precision->max_sessions}}
                            .dump()
                      : std::string("{}"))
        .Bind(13, matrices::LocateToJson(matrix).dump())
        .Bind(14, matrices::RunnerConfigToJson(matrix).dump());
    RETURN_IF_ERROR(insert->Run());
  }
  const int64_t run_id = db.LastInsertRowId();
  RETURN_IF_ERROR(InsertRunTags(db, run_id, tags));

  std::vector<int64_t> cell_ids(expansion.cells.size());
  {
    ASSIGN_OR_RETURN(
        db::Statement * insert,
        db.Cached("INSERT INTO cells(run_id, idx, key, axes, params) VALUES (?1, ?2, ?3, ?4, ?5)"));
    for (const auto& cell : expansion.cells) {
      insert->Reset();
      insert->Bind(1, run_id)
          .Bind(2, cell.index)
          .Bind(3, cell.key)
          .Bind(4, cell.axes.dump())
          .Bind(5, cell.params.dump());
      RETURN_IF_ERROR(insert->Run());
      cell_ids.at(static_cast<size_t>(cell.index)) = db.LastInsertRowId();
    }
  }
  {
    ASSIGN_OR_RETURN(db::Statement * insert_unit,
                     db.Cached("INSERT INTO units(run_id, idx, replicate, group_key, seed, state) "
                               "VALUES (?1, ?2, ?3, ?4, ?5, 'queued')"));
    ASSIGN_OR_RETURN(
        db::Statement * insert_member,
        db.Cached("INSERT INTO unit_cells(unit_id, cell_id, position) VALUES (?1, ?2, ?3)"));
    for (const auto& unit : expansion.units) {
      insert_unit->Reset();
      // SQLite integers are signed 64-bit; the seed's bits are kept as they are.
      insert_unit->Bind(1, run_id)
          .Bind(2, unit.index)
          .Bind(3, unit.replicate)
          .Bind(4, unit.group_key)
          .Bind(5, static_cast<int64_t>(unit.seed));
      RETURN_IF_ERROR(insert_unit->Run());
      const int64_t unit_id = db.LastInsertRowId();
      int position = 0;
      for (int cell_index : unit.cell_indices) {
        insert_member->Reset();
        insert_member->Bind(1, unit_id)
            .Bind(2, cell_ids.at(static_cast<size_t>(cell_index)))
            .Bind(3, position++);
        RETURN_IF_ERROR(insert_member->Run());
      }
    }
  }
  RETURN_IF_ERROR(tx.Commit());
  return run_id;
}

absl::StatusOr<SchedulingSnapshot> Store::LoadSchedulingState() {
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  SchedulingSnapshot snapshot;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT id, state, runner, metric, max_attempts, processes, rounds, sessions, "
                   "requires, "
                   "pair_axes, precision, locate, runner_config FROM runs "
                   "WHERE state IN ('queued','running') "
                   "ORDER BY id"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      RunRow run;
      run.id = stmt.Int(0);
      ASSIGN_OR_RETURN(run.state, ParseRunState(stmt.Text(1)));
      run.runner = stmt.Text(2);
      run.metric = stmt.Text(3);
      run.max_attempts = static_cast<int>(stmt.Int(4));
      run.processes = static_cast<int>(stmt.Int(5));
      run.rounds = static_cast<int>(stmt.Int(6));
      run.sessions = static_cast<int>(stmt.Int(7));
      run.requirements = ParseJsonOr(stmt.Text(8), nlohmann::json::object());
      run.pair_axes = ParseJsonOr(stmt.Text(9), nlohmann::json::array());
      run.precision = ParseJsonOr(stmt.Text(10), nlohmann::json::object());
      run.locate = ParseJsonOr(stmt.Text(11), nlohmann::json::object());
      run.runner_config = ParseJsonOr(stmt.Text(12), nlohmann::json::object());
      snapshot.open_runs.push_back(std::move(run));
    }
  }
  std::map<int64_t, size_t> unit_index;
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT u.id, u.run_id, u.idx, u.replicate, u.group_key, u.seed, u.state, u.attempts "
            "FROM units u JOIN runs r ON r.id = u.run_id "
            "WHERE r.state IN ('queued','running') ORDER BY u.run_id, u.idx"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      UnitRow unit;
      unit.id = stmt.Int(0);
      unit.run_id = stmt.Int(1);
      unit.idx = static_cast<int>(stmt.Int(2));
      unit.replicate = static_cast<int>(stmt.Int(3));
      unit.group_key = stmt.Text(4);
      unit.seed = static_cast<uint64_t>(stmt.Int(5));
      ASSIGN_OR_RETURN(unit.state, ParseUnitState(stmt.Text(6)));
      unit.attempts = static_cast<int>(stmt.Int(7));
      unit_index[unit.id] = snapshot.units.size();
      snapshot.units.push_back(std::move(unit));
    }
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT uc.unit_id, uc.cell_id FROM unit_cells uc JOIN units u ON u.id = uc.unit_id "
            "JOIN runs r ON r.id = u.run_id WHERE r.state IN ('queued','running') "
            "ORDER BY uc.unit_id, uc.position"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      auto it = unit_index.find(stmt.Int(0));
      if (it != unit_index.end()) snapshot.units[it->second].cell_ids.push_back(stmt.Int(1));
    }
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare("SELECT a.id, a.unit_id, a.session_id, a.state, a.leased_at FROM attempts a "
                   "JOIN units u ON u.id = a.unit_id JOIN runs r ON r.id = u.run_id "
                   "WHERE r.state IN ('queued','running') AND a.state IN ('leased','done') ORDER "
                   "BY a.id"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      ASSIGN_OR_RETURN(const AttemptState state, ParseAttemptState(stmt.Text(3)));
      snapshot.attempts.push_back(
          AttemptRow{stmt.Int(0), stmt.Int(1), stmt.Text(2), state, stmt.Int(4)});
    }
  }
  {
    ASSIGN_OR_RETURN(
        db::Statement stmt,
        db.Prepare(
            "SELECT id, hostname, machine_id, boot_id, cloud_instance_id, cpu_model, cpu_cores, "
            "memory_mib, software, features, labels, agent_version, started_at, last_seen_at, "
            "state "
            "FROM sessions WHERE state != 'gone'"));
    ASSIGN_OR_RETURN(
        db::Statement gpus,
        db.Prepare("SELECT vendor, name, arch, uuid, memory_mib, driver FROM session_gpus "
                   "WHERE session_id = ?1 ORDER BY idx"));
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      SessionRow s;
      s.id = stmt.Text(0);
      s.hostname = stmt.Text(1);
      s.machine_id = stmt.Text(2);
      s.boot_id = stmt.Text(3);
      s.cloud_instance_id = stmt.Text(4);
      s.cpu_model = stmt.Text(5);
      s.cpu_cores = static_cast<int>(stmt.Int(6));
      s.memory_mib = stmt.Int(7);
      s.software = ParseJsonOr(stmt.Text(8), nlohmann::json::object());
      s.features = ParseJsonOr(stmt.Text(9), nlohmann::json::array());
      s.labels = ParseJsonOr(stmt.Text(10), nlohmann::json::object());
      s.agent_version = stmt.Text(11);
      s.started_at = stmt.Int(12);
      s.last_seen_at = stmt.Int(13);
      ASSIGN_OR_RETURN(s.state, ParseSessionState(stmt.Text(14)));
      gpus.Reset();
      gpus.Bind(1, s.id);
      while (true) {
        ASSIGN_OR_RETURN(bool gpu_row, gpus.Step());
        if (!gpu_row) break;
        s.gpus.push_back(GpuRow{gpus.Text(0), gpus.Text(1), gpus.Text(2), gpus.Text(3),
                                gpus.Text(5), gpus.Int(4)});
      }
      snapshot.sessions.push_back(std::move(s));
    }
  }
  return snapshot;
}

absl::StatusOr<std::vector<CellRow>> Store::LoadCells(const std::vector<int64_t>& cell_ids) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db_->Cached("SELECT id, key, params FROM cells WHERE id = ?1"));
  std::vector<CellRow> cells;
  cells.reserve(cell_ids.size());
  for (int64_t id : cell_ids) {
    stmt->Reset();
    stmt->Bind(1, id);
    ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) return absl::NotFoundError(absl::StrCat("cell ", id, " not found"));
    cells.push_back(CellRow{stmt->Int(0), stmt->Text(1), stmt->Text(2)});
  }
  return cells;
}

absl::Status Store::UpsertSession(const SessionRow& s) {
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(db));
  ASSIGN_OR_RETURN(
      db::Statement * upsert,
      db.Cached(
          "INSERT INTO sessions(id, hostname, machine_id, boot_id, cloud_instance_id, cpu_model, "
          "cpu_cores, memory_mib, software, features, labels, agent_version, started_at, "
          "last_seen_at, state) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15) "
          "ON CONFLICT(id) DO UPDATE SET last_seen_at = excluded.last_seen_at, state = 'active'"));
  upsert->Bind(1, s.id)
      .Bind(2, s.hostname)
      .Bind(3, s.machine_id)
      .Bind(4, s.boot_id)
      .Bind(5, s.cloud_instance_id)
      .Bind(6, s.cpu_model)
      .Bind(7, s.cpu_cores)
      .Bind(8, s.memory_mib)
      .Bind(9, s.software.dump())
      .Bind(10, s.features.dump())
      .Bind(11, s.labels.dump())
      .Bind(12, s.agent_version)
      .Bind(13, s.started_at)
      .Bind(14, s.last_seen_at)
      .Bind(15, ToString(s.state));
  RETURN_IF_ERROR(upsert->Run());
  ASSIGN_OR_RETURN(db::Statement * gpu,
                   db.Cached("INSERT OR IGNORE INTO session_gpus(session_id, idx, vendor, name, "
                             "arch, uuid, memory_mib, "
                             "driver) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"));
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const GpuRow& g = s.gpus[i];
    gpu->Reset();
    gpu->Bind(1, s.id)
        .Bind(2, static_cast<int64_t>(i))
        .Bind(3, g.vendor)
        .Bind(4, g.name)
        .Bind(5, g.arch)
        .Bind(6, g.uuid)
        .Bind(7, g.memory_mib)
        .Bind(8, g.driver);
    RETURN_IF_ERROR(gpu->Run());
  }
  ASSIGN_OR_RETURN(db::Statement * link,
                   db.Cached("INSERT OR IGNORE INTO session_gpu_links(session_id, a, b, kind) "
                             "VALUES (?1,?2,?3,?4)"));
  for (const GpuLinkRow& l : s.gpu_links) {
    link->Reset();
    link->Bind(1, s.id).Bind(2, int64_t{l.a}).Bind(3, int64_t{l.b}).Bind(4, l.kind);
    RETURN_IF_ERROR(link->Run());
  }
  return tx.Commit();
}

absl::Status Store::TouchSessions(const std::vector<std::string>& session_ids, int64_t now_ms) {
  if (session_ids.empty()) return absl::OkStatus();
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  ASSIGN_OR_RETURN(
      db::Statement * touch,
      db_->Cached("UPDATE sessions SET last_seen_at = ?2, "
                  "state = CASE WHEN state = 'gone' THEN 'gone' ELSE 'active' END WHERE id = ?1"));
  for (const auto& id : session_ids) {
    touch->Reset();
    RETURN_IF_ERROR(touch->Bind(1, id).Bind(2, now_ms).Run());
  }
  return tx.Commit();
}

absl::Status Store::SetSessionState(const std::string& session_id, SessionState state) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db_->Cached("UPDATE sessions SET state = ?2 WHERE id = ?1"));
  return stmt->Bind(1, session_id).Bind(2, ToString(state)).Run();
}

absl::StatusOr<int64_t> Store::LeaseUnit(int64_t unit_id, const std::string& session_id,
                                         int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  ASSIGN_OR_RETURN(int64_t attempt_id, LeaseUnitLocked(unit_id, session_id, now_ms));
  RETURN_IF_ERROR(tx.Commit());
  return attempt_id;
}

absl::StatusOr<std::vector<int64_t>> Store::LeaseUnits(
    const std::vector<std::pair<int64_t, std::string>>& leases, int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  std::vector<int64_t> attempt_ids;
  attempt_ids.reserve(leases.size());
  for (const auto& [unit_id, session_id] : leases) {
    ASSIGN_OR_RETURN(int64_t attempt_id, LeaseUnitLocked(unit_id, session_id, now_ms));
    attempt_ids.push_back(attempt_id);
  }
  RETURN_IF_ERROR(tx.Commit());
  return attempt_ids;
}

absl::StatusOr<int64_t> Store::LeaseUnitLocked(int64_t unit_id, const std::string& session_id,
                                               int64_t now_ms) {
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(
      db::Statement * unit,
      db.Cached("UPDATE units SET state = 'leased' WHERE id = ?1 AND state = 'queued'"));
  RETURN_IF_ERROR(unit->Bind(1, unit_id).Run());
  if (db.Changes() != 1) {
    return absl::FailedPreconditionError(absl::StrCat("unit ", unit_id, " is not queued"));
  }
  ASSIGN_OR_RETURN(db::Statement * attempt,
                   db.Cached("INSERT INTO attempts(unit_id, session_id, state, leased_at) VALUES "
                             "(?1, ?2, 'leased', ?3)"));
  RETURN_IF_ERROR(attempt->Bind(1, unit_id).Bind(2, session_id).Bind(3, now_ms).Run());
  const int64_t attempt_id = db.LastInsertRowId();
  ASSIGN_OR_RETURN(
      db::Statement * run,
      db.Cached("UPDATE runs SET state = 'running', started_at = ?2 "
                "WHERE id = (SELECT run_id FROM units WHERE id = ?1) AND state = 'queued'"));
  RETURN_IF_ERROR(run->Bind(1, unit_id).Bind(2, now_ms).Run());
  return attempt_id;
}

absl::Status Store::EndAttempt(int64_t attempt_id, AttemptState attempt_state,
                               const std::string& reason, int64_t unit_id, UnitState unit_state,
                               int unit_attempts, int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  RETURN_IF_ERROR(EndAttemptLocked(attempt_id, attempt_state, reason, unit_id, unit_state,
                                   unit_attempts, now_ms));
  return tx.Commit();
}

absl::Status Store::EndAttemptsDone(const std::vector<AttemptDone>& done, int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  for (const AttemptDone& d : done) {
    RETURN_IF_ERROR(EndAttemptLocked(d.attempt_id, AttemptState::kDone, "", d.unit_id,
                                     UnitState::kDone, d.unit_attempts, now_ms));
  }
  return tx.Commit();
}

absl::Status Store::EndAttemptLocked(int64_t attempt_id, AttemptState attempt_state,
                                     const std::string& reason, int64_t unit_id,
                                     UnitState unit_state, int unit_attempts, int64_t now_ms) {
  if (attempt_state == AttemptState::kLeased) {
    return absl::InvalidArgumentError(
        absl::StrCat("attempt ", attempt_id, ": an end is not leased"));
  }
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(db::Statement * attempt,
                   db.Cached("UPDATE attempts SET state = ?2, reason = ?3, ended_at = ?4 "
                             "WHERE id = ?1 AND state = 'leased'"));
  attempt->Bind(1, attempt_id).Bind(2, ToString(attempt_state)).Bind(4, now_ms);
  if (reason.empty()) {
    attempt->BindNull(3);
  } else {
    attempt->Bind(3, reason);
  }
  RETURN_IF_ERROR(attempt->Run());
  if (db.Changes() != 1) {
    return absl::FailedPreconditionError(absl::StrCat("attempt ", attempt_id, " is not live"));
  }
  ASSIGN_OR_RETURN(
      db::Statement * unit,
      db.Cached("UPDATE units SET state = ?2, attempts = ?3, "
                "fail_reason = CASE WHEN ?4 = '' THEN fail_reason ELSE ?4 END WHERE id = ?1"));
  return unit->Bind(1, unit_id)
      .Bind(2, ToString(unit_state))
      .Bind(3, unit_attempts)
      .Bind(4, reason)
      .Run();
}

absl::StatusOr<ReportOutcome> Store::Report(const std::string& session_id,
                                            const std::vector<MeasurementIn>& measurements,
                                            const std::vector<EvidenceIn>& evidence,
                                            const std::vector<int64_t>& live_attempts,
                                            const MetricCheck& check, int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  ASSIGN_OR_RETURN(ReportOutcome outcome,
                   ReportLocked(session_id, measurements, evidence, live_attempts, check, now_ms));
  RETURN_IF_ERROR(tx.Commit());
  return outcome;
}

std::vector<absl::StatusOr<ReportOutcome>> Store::ReportBatch(const std::vector<ReportIn>& reports,
                                                              const MetricCheck& check,
                                                              int64_t now_ms) {
  std::vector<absl::StatusOr<ReportOutcome>> results;
  results.reserve(reports.size());
  auto fail_all = [&](const absl::Status& status) {
    results.assign(reports.size(), absl::StatusOr<ReportOutcome>(status));
    return results;
  };
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  auto tx = db::Transaction::Begin(db);
  if (!tx.ok()) return fail_all(tx.status());
  for (const ReportIn& report : reports) {
    if (auto s = db.Exec("SAVEPOINT report"); !s.ok()) return fail_all(s);
    auto outcome = ReportLocked(report.session_id, report.measurements, report.evidence,
                                report.live_attempts, check, now_ms);
    if (!outcome.ok()) {
      // After some errors (a full disk, I/O) SQLite has already rolled back the whole
      // transaction: then every report of the batch shares this one's fate.
      if (!db.Exec("ROLLBACK TO report").ok()) return fail_all(outcome.status());
    }
    if (auto s = db.Exec("RELEASE report"); !s.ok()) return fail_all(s);
    results.push_back(std::move(outcome));
  }
  if (auto s = tx->Commit(); !s.ok()) return fail_all(s);
  return results;
}

bool AttemptDesign::HasCell(int64_t cell_id) const {
  return std::binary_search(cell_ids.begin(), cell_ids.end(), cell_id);
}

absl::StatusOr<AttemptDesign> Store::LoadAttemptDesign(int64_t attempt_id) {
  MutexLock lock(&mu_);
  return LoadAttemptDesignLocked(attempt_id);
}

absl::StatusOr<AttemptDesign> Store::LoadAttemptDesignLocked(int64_t attempt_id) {
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(
      db::Statement * lookup,
      db.Cached("SELECT a.session_id, u.run_id, u.id, r.runner, r.processes, r.rounds, "
                "r.runner_config FROM attempts a JOIN units u ON u.id = a.unit_id JOIN runs r ON "
                "r.id = u.run_id "
                "WHERE a.id = ?1"));
  lookup->Reset();
  lookup->Bind(1, attempt_id);
  ASSIGN_OR_RETURN(bool row, lookup->Step());
  if (!row) return absl::NotFoundError(absl::StrCat("unknown attempt ", attempt_id));
  AttemptDesign design;
  design.attempt_id = attempt_id;
  design.session_id = lookup->Text(0);
  design.run_id = lookup->Int(1);
  design.unit_id = lookup->Int(2);
  design.runner = lookup->Text(3);
  design.processes = static_cast<int>(lookup->Int(4));
  design.rounds = static_cast<int>(lookup->Int(5));
  design.runner_config = lookup->Text(6);
  lookup->Reset();
  ASSIGN_OR_RETURN(db::Statement * cells,
                   db.Cached("SELECT cell_id FROM unit_cells WHERE unit_id = ?1"));
  cells->Reset();
  cells->Bind(1, design.unit_id);
  while (true) {
    ASSIGN_OR_RETURN(bool more, cells->Step());
    if (!more) break;
    design.cell_ids.push_back(cells->Int(0));
  }
  cells->Reset();
  std::sort(design.cell_ids.begin(), design.cell_ids.end());
  return design;
}

namespace {

// Why a record's coordinates fall outside its attempt's design ("" when they do not).
std::string OutsideDesign(const AttemptDesign& design, int64_t cell_id, int process,
                          std::optional<int> round) {
  if (!design.HasCell(cell_id)) {
    return absl::StrCat("cell ", cell_id, " is not a cell of attempt ", design.attempt_id,
                        "'s unit");
  }
  if (process < 0 || process >= design.processes) {
    return absl::StrCat("process ", process, " is outside the design (0..", design.processes - 1,
                        ")");
  }
  if (round.has_value() && (*round < 0 || *round >= design.rounds)) {
    return absl::StrCat("round ", *round, " is outside the design (0..", design.rounds - 1, ")");
  }
  return "";
}

}  // namespace

absl::StatusOr<ReportOutcome> Store::ReportLocked(const std::string& session_id,
                                                  const std::vector<MeasurementIn>& measurements,
                                                  const std::vector<EvidenceIn>& evidence,
                                                  const std::vector<int64_t>& live_attempts,
                                                  const MetricCheck& check, int64_t now_ms) {
  db::Database& db = *db_;
  ReportOutcome outcome;

  // Resolve each named attempt once: its design, and whether it is live for the session.
  struct AttemptInfo {
    bool known = false;
    bool live = false;
    AttemptDesign design;
  };
  std::map<int64_t, AttemptInfo> attempts;
  const std::set<int64_t> live(live_attempts.begin(), live_attempts.end());
  // Runs inside ReportLocked, under mu_; the annotation lets clang check the call below.
  auto resolve = [&](int64_t attempt_id)
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) -> absl::StatusOr<const AttemptInfo*> {
    auto it = attempts.find(attempt_id);
    if (it != attempts.end()) return &it->second;
    AttemptInfo info;
    auto design = LoadAttemptDesignLocked(attempt_id);
    if (design.ok()) {
      if (design->session_id != session_id) {
        return absl::PermissionDeniedError(
            absl::StrCat("attempt ", attempt_id,
                         " was leased to another session; a session reports only "
                         "its own attempts"));
      }
      info.known = true;
      info.live = live.count(attempt_id) > 0;
      info.design = std::move(*design);
    } else if (design.status().code() != absl::StatusCode::kNotFound) {
      return design.status();
    }
    return &attempts.emplace(attempt_id, std::move(info)).first->second;
  };
  auto refuse = [&](const std::string& uuid, std::string reason) {
    outcome.refused.push_back(RefusedRecord{uuid, std::move(reason)});
  };
  // One uuid, one record: a uuid twice in this report is taken once if both copies are the same
  // record, and refused (once, storing neither) if they differ, so that each uuid is answered in
  // exactly one of acknowledged and refused.
  std::map<std::string, int> copies;  // uuid -> how many records of this report carry it
  std::set<std::string> conflicting;
  {
    std::map<std::string, std::string> first;  // uuid -> the record's identity and value
    auto identity = [](const auto& r) -> std::string {
      if constexpr (std::is_same_v<std::decay_t<decltype(r)>, MeasurementIn>) {
        return absl::StrCat("m|", r.attempt_id, "|", r.cell_id, "|", r.process, "|", r.round, "|",
                            r.metric, "|", r.unit, "|", absl::StrFormat("%a", r.value));
      } else {
        return absl::StrCat("e|", r.attempt_id, "|", r.cell_id, "|", r.process, "|", r.kind, "|",
                            r.value_json);
      }
    };
    auto note = [&](const std::string& uuid, std::string id) {
      auto [it, inserted] = first.emplace(uuid, id);
      if (!inserted && it->second != id) conflicting.insert(uuid);
    };
    for (const auto& m : measurements) note(m.uuid, identity(m));
    for (const auto& e : evidence) note(e.uuid, identity(e));
  }
  for (const std::string& uuid : conflicting) {
    refuse(uuid, "uuid sent twice in this report with different records; neither is stored");
  }
  // Whether this is the first time this report carries `uuid` (later copies are skipped).
  auto first_copy = [&](const std::string& uuid) {
    if (conflicting.count(uuid)) return false;
    return ++copies[uuid] == 1;
  };

  ASSIGN_OR_RETURN(
      db::Statement * insert,
      db.Cached(
          "INSERT INTO measurements(uuid, run_id, cell_id, attempt_id, session_id, process, round, "
          "metric, value, unit, measured_at, received_at, stale) "
          "VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13) ON CONFLICT DO NOTHING"));
  // After an insert that did nothing: the same record again (acknowledged), or another record
  // in a filled slot or under a used uuid (refused).
  ASSIGN_OR_RETURN(
      db::Statement * by_uuid,
      db.Cached("SELECT attempt_id, cell_id, process, round, metric, unit, value FROM measurements "
                "WHERE uuid = ?1"));
  for (const auto& m : measurements) {
    if (!first_copy(m.uuid)) continue;
    ASSIGN_OR_RETURN(const AttemptInfo* info, resolve(m.attempt_id));
    if (!info->known) {
      refuse(m.uuid, absl::StrCat("unknown attempt ", m.attempt_id));
      continue;
    }
    if (std::string why = OutsideDesign(info->design, m.cell_id, m.process, m.round);
        !why.empty()) {
      refuse(m.uuid, std::move(why));
      continue;
    }
    if (!std::isfinite(m.value)) {
      refuse(m.uuid, absl::StrCat("value of ", m.metric, " is not finite"));
      continue;
    }
    if (check) {
      if (std::string why = check(info->design, m.metric, m.unit, m.value); !why.empty()) {
        refuse(m.uuid, std::move(why));
        continue;
      }
    }
    ASSIGN_OR_RETURN(bool evidence_uuid, UuidUsedIn(db, "evidence", m.uuid));
    if (evidence_uuid) {
      refuse(m.uuid, "uuid already used by an evidence record");
      continue;
    }
    insert->Reset();
    insert->Bind(1, m.uuid)
        .Bind(2, info->design.run_id)
        .Bind(3, m.cell_id)
        .Bind(4, m.attempt_id)
        .Bind(5, session_id)
        .Bind(6, m.process)
        .Bind(7, m.round)
        .Bind(8, m.metric)
        .Bind(9, m.value)
        .Bind(10, m.unit)
        .Bind(11, m.measured_at)
        .Bind(12, now_ms)
        .Bind(13, info->live ? 0 : 1);
    RETURN_IF_ERROR(insert->Run());
    const bool new_row = db.Changes() > 0;
    if (!new_row) {
      by_uuid->Reset();
      by_uuid->Bind(1, m.uuid);
      ASSIGN_OR_RETURN(bool found, by_uuid->Step());
      const bool same_slot = found && by_uuid->Int(0) == m.attempt_id &&
                             by_uuid->Int(1) == m.cell_id && by_uuid->Int(2) == m.process &&
                             by_uuid->Int(3) == m.round && by_uuid->Text(4) == m.metric;
      // The same record again (a retried report) is acknowledged again; the same uuid with
      // another unit or value is not that record.
      const bool same = same_slot && by_uuid->Text(5) == m.unit && by_uuid->Double(6) == m.value;
      by_uuid->Reset();
      if (!same) {
        refuse(m.uuid, found ? (same_slot ? "uuid already used by this slot with another value; "
                                            "the first value stays"
                                          : "uuid already used by another record")
                             : absl::StrCat("slot already filled: attempt ", m.attempt_id, " cell ",
                                            m.cell_id, " process ", m.process, " round ", m.round,
                                            " ", m.metric, " has a value under another uuid"));
        continue;
      }
    }
    outcome.stored.push_back(m.uuid);
    if (new_row) ++outcome.measurements_inserted;
    if (!info->live) outcome.stale.push_back(m.uuid);
  }
  ASSIGN_OR_RETURN(db::Statement * insert_evidence,
                   db.Cached("INSERT INTO evidence(uuid, run_id, cell_id, attempt_id, session_id, "
                             "process, kind, value, "
                             "recorded_at, stale) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) ON "
                             "CONFLICT(uuid) DO NOTHING"));
  ASSIGN_OR_RETURN(db::Statement * evidence_by_uuid,
                   db.Cached("SELECT attempt_id, cell_id, process, kind, value FROM evidence "
                             "WHERE uuid = ?1"));
  for (const auto& e : evidence) {
    if (!first_copy(e.uuid)) continue;
    ASSIGN_OR_RETURN(const AttemptInfo* info, resolve(e.attempt_id));
    if (!info->known) {
      refuse(e.uuid, absl::StrCat("unknown attempt ", e.attempt_id));
      continue;
    }
    if (std::string why = OutsideDesign(info->design, e.cell_id, e.process, std::nullopt);
        !why.empty()) {
      refuse(e.uuid, std::move(why));
      continue;
    }
    // The one JSON rule (json_rule.h): what is stored, every reader of the views can read.
    ASSIGN_OR_RETURN(std::string json_refusal,
                     StorableJsonRefusal(db, e.value_json, kMaxEvidenceJsonBytes));
    if (!json_refusal.empty()) {
      refuse(e.uuid, absl::StrCat("evidence value_json: ", json_refusal));
      continue;
    }
    // One uuid names one record, measurement or evidence, across reports too.
    ASSIGN_OR_RETURN(bool measurement_uuid, UuidUsedIn(db, "measurements", e.uuid));
    if (measurement_uuid) {
      refuse(e.uuid, "uuid already used by a measurement");
      continue;
    }
    insert_evidence->Reset();
    insert_evidence->Bind(1, e.uuid)
        .Bind(2, info->design.run_id)
        .Bind(3, e.cell_id)
        .Bind(4, e.attempt_id)
        .Bind(5, session_id)
        .Bind(6, e.process)
        .Bind(7, e.kind)
        .Bind(8, e.value_json)
        .Bind(9, e.recorded_at)
        .Bind(10, info->live ? 0 : 1);
    RETURN_IF_ERROR(insert_evidence->Run());
    const bool new_row = db.Changes() > 0;
    if (!new_row) {
      evidence_by_uuid->Reset();
      evidence_by_uuid->Bind(1, e.uuid);
      ASSIGN_OR_RETURN(bool found, evidence_by_uuid->Step());
      const bool same =
          found && evidence_by_uuid->Int(0) == e.attempt_id &&
          evidence_by_uuid->Int(1) == e.cell_id && evidence_by_uuid->Int(2) == e.process &&
          evidence_by_uuid->Text(3) == e.kind && evidence_by_uuid->Text(4) == e.value_json;
      evidence_by_uuid->Reset();
      if (!same) {
        refuse(e.uuid, "uuid already used by another record");
        continue;
      }
    }
    outcome.stored.push_back(e.uuid);
    if (new_row) ++outcome.evidence_inserted;
    if (!info->live) outcome.stale.push_back(e.uuid);
  }
  return outcome;
}

absl::StatusOr<AttemptFill> Store::CountResults(int64_t attempt_id,
                                                const std::vector<std::string>& required_metrics) {
  MutexLock lock(&mu_);
  // One statement per finish (this runs once per unit): the attempt's rows through the slot
  // index, counted in all and for the required metrics. Slots are unique and every stored
  // record is inside the design, so the second count is the number of filled required slots.
  std::string in = "''";
  for (size_t i = 0; i < required_metrics.size(); ++i) {
    in += absl::StrCat(i == 0 ? "" : ",", "?", i + 2);
  }
  if (!required_metrics.empty()) in = in.substr(2);
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db_->Cached(absl::StrCat(
                       "SELECT COUNT(*), COALESCE(SUM(metric IN (", in,
                       ")), 0), "
                       "(SELECT COUNT(*) FROM evidence WHERE attempt_id = ?1 AND stale = 0) "
                       "FROM measurements WHERE attempt_id = ?1 AND stale = 0")));
  stmt->Reset();
  stmt->Bind(1, attempt_id);
  for (size_t i = 0; i < required_metrics.size(); ++i) {
    stmt->Bind(static_cast<int>(i) + 2, required_metrics[i]);
  }
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  AttemptFill fill;
  if (row) {
    fill.measurements = stmt->Int(0);
    fill.required_filled = stmt->Int(1);
    fill.evidence = stmt->Int(2);
  }
  stmt->Reset();
  return fill;
}

absl::Status Store::SetRunState(int64_t run_id, RunState state, int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached(
          "UPDATE runs SET state = ?2, finished_at = CASE WHEN ?2 IN ('done','cancelled') THEN ?3 "
          "ELSE finished_at END WHERE id = ?1"));
  return stmt->Bind(1, run_id).Bind(2, ToString(state)).Bind(3, now_ms).Run();
}

absl::StatusOr<int64_t> Store::AddUnit(int64_t run_id, const std::string& group_key, int replicate,
                                       uint64_t seed, const std::vector<int64_t>& cell_ids) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  ASSIGN_OR_RETURN(int64_t unit_id,
                   internal::InsertQueuedUnit(*db_, run_id, group_key, replicate, seed, cell_ids));
  RETURN_IF_ERROR(tx.Commit());
  return unit_id;
}

absl::StatusOr<std::vector<Observation>> Store::ValidObservations(
    const std::vector<int64_t>& cell_ids, const std::string& metric) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db_->Prepare("SELECT cell_id, session_id, process, round, value FROM valid_measurements "
                   "WHERE cell_id = ?1 AND metric = ?2 ORDER BY id"));
  std::vector<Observation> out;
  for (int64_t cell : cell_ids) {
    stmt.Reset();
    stmt.Bind(1, cell).Bind(2, metric);
    while (true) {
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      out.push_back(Observation{stmt.Int(0), stmt.Text(1), static_cast<int>(stmt.Int(2)),
                                static_cast<int>(stmt.Int(3)), stmt.Double(4)});
    }
  }
  return out;
}

absl::StatusOr<bool> Store::PrecisionDecided(int64_t run_id, const std::string& group_key,
                                             int sessions) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db_->Prepare(
          "SELECT 1 FROM adaptive_decisions WHERE run_id = ?1 AND option = 'precision' AND "
          "group_key = ?2 AND sessions = ?3 LIMIT 1"));
  stmt.Bind(1, run_id).Bind(2, group_key).Bind(3, sessions);
  return stmt.Step();
}

absl::Status Store::RecordDecision(int64_t run_id, const std::string& group_key, int sessions,
                                   double half_width, double target, const std::string& decision,
                                   const std::string& reason, int64_t now_ms) {
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db_->Prepare("INSERT INTO adaptive_decisions(run_id, group_key, sessions, "
                                "half_width, target, decision, "
                                "reason, decided_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"));
  stmt.Bind(1, run_id)
      .Bind(2, group_key)
      .Bind(3, sessions)
      .Bind(5, target)
      .Bind(6, decision)
      .Bind(7, reason)
      .Bind(8, now_ms);
  if (std::isfinite(half_width)) {
    stmt.Bind(4, half_width);
  } else {
    stmt.BindNull(4);
  }
  return stmt.Run();
}

absl::Status Store::CancelRun(int64_t run_id, int64_t now_ms) {
  MutexLock lock(&mu_);
  db::Database& db = *db_;
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(db));
  ASSIGN_OR_RETURN(
      db::Statement * attempts,
      db.Cached("UPDATE attempts SET state = 'cancelled', ended_at = ?2, reason = 'run cancelled' "
                "WHERE state = 'leased' AND unit_id IN (SELECT id FROM units WHERE run_id = ?1)"));
  RETURN_IF_ERROR(attempts->Bind(1, run_id).Bind(2, now_ms).Run());
  ASSIGN_OR_RETURN(db::Statement * units,
                   db.Cached("UPDATE units SET state = 'cancelled' WHERE run_id = ?1 AND state IN "
                             "('queued','leased')"));
  RETURN_IF_ERROR(units->Bind(1, run_id).Run());
  ASSIGN_OR_RETURN(db::Statement * run,
                   db.Cached("UPDATE runs SET state = 'cancelled', finished_at = ?2 "
                             "WHERE id = ?1 AND state IN ('queued','running')"));
  RETURN_IF_ERROR(run->Bind(1, run_id).Bind(2, now_ms).Run());
  return tx.Commit();
}

}  // namespace ladder::db
