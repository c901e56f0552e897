#include "spool.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "ladder/status_macros.h"

namespace ladder::agent {

namespace {

// SQLite's messages ("file is not a database", "unable to open database file") do not say which
// file, and an operator reading the agent's log needs to know it is the spool at `path`.
absl::Status AboutSpool(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("spool ", path, ": ", status.message()));
}

absl::StatusOr<std::unique_ptr<db::Database>> OpenSpoolDatabase(const std::string& path) {
  ASSIGN_OR_RETURN(auto db, db::Database::Open(path, db::OpenMode::kReadWrite));
  RETURN_IF_ERROR(db->Exec(R"sql(
    CREATE TABLE IF NOT EXISTS results (
      seq         INTEGER PRIMARY KEY,
      uuid        TEXT NOT NULL UNIQUE,
      session_id  TEXT NOT NULL,
      attempt_id  INTEGER NOT NULL,
      is_evidence INTEGER NOT NULL,
      payload     BLOB NOT NULL
    ) STRICT;
    CREATE INDEX IF NOT EXISTS results_by_attempt ON results(attempt_id);
    CREATE INDEX IF NOT EXISTS results_by_session ON results(session_id, seq);
    CREATE TABLE IF NOT EXISTS finishes (
      attempt_id        INTEGER PRIMARY KEY,
      session_id        TEXT NOT NULL,
      ok                INTEGER NOT NULL,
      reason            TEXT NOT NULL,
      measurement_count INTEGER NOT NULL,
      evidence_count    INTEGER NOT NULL
    ) STRICT;
    CREATE TABLE IF NOT EXISTS credentials (
      session_id  TEXT PRIMARY KEY,
      credential  TEXT NOT NULL
    ) STRICT;
  )sql"));
  return db;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Spool>> Spool::Open(const std::string& path) {
  auto db = OpenSpoolDatabase(path);
  if (!db.ok()) return AboutSpool(path, db.status());
  // The spool holds session credentials: keep it private to the agent's user.
  chmod(path.c_str(), 0600);
  return std::unique_ptr<Spool>(new Spool(std::move(*db)));
}

absl::Status Spool::AddResult(const SpooledResult& r) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached(
          "INSERT OR IGNORE INTO results(uuid, session_id, attempt_id, is_evidence, payload) "
          "VALUES (?1, ?2, ?3, ?4, ?5)"));
  return stmt->Bind(1, r.uuid)
      .Bind(2, r.session_id)
      .Bind(3, r.attempt_id)
      .Bind(4, r.is_evidence ? 1 : 0)
      .BindBlob(5, r.payload)
      .Run();
}

absl::StatusOr<std::vector<SpooledResult>> Spool::PendingResults(int limit,
                                                                 const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached("SELECT uuid, session_id, attempt_id, is_evidence, payload FROM results "
                  "WHERE session_id = ?2 ORDER BY seq LIMIT ?1"));
  stmt->Bind(1, static_cast<int64_t>(limit)).Bind(2, session_id);
  std::vector<SpooledResult> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    out.push_back(SpooledResult{stmt->Text(0), stmt->Text(1), stmt->Int(2), stmt->Int(3) != 0,
                                stmt->Text(4)});
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> Spool::PendingSessions() {
  ASSIGN_OR_RETURN(std::vector<SessionBacklog> backlog, Backlog());
  std::vector<std::string> out;
  for (auto& b : backlog) out.push_back(std::move(b.session_id));
  return out;
}

absl::StatusOr<std::vector<Spool::SessionBacklog>> Spool::Backlog() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached("SELECT session_id, SUM(results), SUM(finishes), MIN(first) FROM ("
                  "  SELECT session_id, COUNT(*) AS results, 0 AS finishes, MIN(seq) AS first "
                  "  FROM results GROUP BY session_id"
                  "  UNION ALL SELECT session_id, 0, COUNT(*), 9223372036854775807 "
                  "  FROM finishes GROUP BY session_id) GROUP BY session_id ORDER BY MIN(first)"));
  std::vector<SessionBacklog> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    out.push_back(SessionBacklog{stmt->Text(0), stmt->Int(1), stmt->Int(2)});
  }
  return out;
}

absl::Status Spool::Remove(const std::vector<std::string>& uuids) {
  if (uuids.empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Transaction tx, db::Transaction::Begin(*db_));
  ASSIGN_OR_RETURN(db::Statement * stmt, db_->Cached("DELETE FROM results WHERE uuid = ?1"));
  for (const auto& uuid : uuids) {
    stmt->Reset();
    RETURN_IF_ERROR(stmt->Bind(1, uuid).Run());
  }
  return tx.Commit();
}

absl::StatusOr<int64_t> Spool::PendingCount(int64_t attempt_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db_->Cached("SELECT COUNT(*) FROM results WHERE attempt_id = ?1"));
  stmt->Bind(1, attempt_id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  return row ? stmt->Int(0) : 0;
}

absl::StatusOr<int64_t> Spool::TotalPending() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached("SELECT (SELECT COUNT(*) FROM results) + (SELECT COUNT(*) FROM finishes)"));
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  return row ? stmt->Int(0) : 0;
}

absl::Status Spool::AddFinish(const SpooledFinish& f) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached(
          "INSERT OR REPLACE INTO finishes(attempt_id, session_id, ok, reason, measurement_count, "
          "evidence_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  return stmt->Bind(1, f.attempt_id)
      .Bind(2, f.session_id)
      .Bind(3, f.ok ? 1 : 0)
      .Bind(4, f.reason)
      .Bind(5, f.measurement_count)
      .Bind(6, f.evidence_count)
      .Run();
}

absl::StatusOr<std::vector<SpooledFinish>> Spool::PendingFinishes() {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached("SELECT session_id, attempt_id, ok, reason, measurement_count, evidence_count "
                  "FROM finishes ORDER BY attempt_id"));
  std::vector<SpooledFinish> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt->Step());
    if (!row) break;
    out.push_back(SpooledFinish{stmt->Text(0), stmt->Int(1), stmt->Int(2) != 0, stmt->Text(3),
                                stmt->Int(4), stmt->Int(5)});
  }
  return out;
}

absl::Status Spool::RemoveFinish(int64_t attempt_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement * stmt, db_->Cached("DELETE FROM finishes WHERE attempt_id = ?1"));
  return stmt->Bind(1, attempt_id).Run();
}

absl::Status Spool::SaveCredential(const std::string& session_id, const std::string& credential) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db_->Cached("INSERT OR REPLACE INTO credentials(session_id, credential) VALUES (?1, ?2)"));
  return stmt->Bind(1, session_id).Bind(2, credential).Run();
}

absl::StatusOr<std::string> Spool::Credential(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db_->Cached("SELECT credential FROM credentials WHERE session_id = ?1"));
  stmt->Bind(1, session_id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  return row ? stmt->Text(0) : std::string();
}

}  // namespace ladder::agent
