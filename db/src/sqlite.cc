#include "ladder/db/sqlite.h"

#include <string>
#include <unordered_map>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace ladder::db {
namespace {

absl::Status SqliteErrorStatus(std::string message, int rc) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_FULL:
    case SQLITE_IOERR:
      return absl::ResourceExhaustedError(message);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CANTOPEN:
      return absl::PermissionDeniedError(message);
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

absl::Status SqliteError(sqlite3* db, std::string_view what, int rc) {
  absl::Status status = SqliteErrorStatus(
      absl::StrCat(std::string(what), ": ", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)), rc);
  status.SetPayload(kSqliteErrorPayload, absl::Cord(std::string(sqlite3_errstr(rc))));
  return status;
}

}  // namespace

struct Database::Cache {
  std::unordered_map<std::string, Statement> statements;
};

Database::Database(sqlite3* db, std::string path)
    : db_(db), path_(std::move(path)), cache_(std::make_unique<Cache>()) {}

Database::~Database() {
  cache_.reset();  // statements must be finalized before the connection closes
  sqlite3_close_v2(db_);
}

absl::StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path, OpenMode mode) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_NOMUTEX |
              (mode == OpenMode::kReadOnly ? SQLITE_OPEN_READONLY
                                           : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE));
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    absl::Status status = SqliteError(raw, absl::StrCat("opening ", path), rc);
    sqlite3_close_v2(raw);
    return status;
  }
  std::unique_ptr<Database> db(new Database(raw, path));
  sqlite3_busy_timeout(raw, 10000);
  sqlite3_extended_result_codes(raw, 1);
  if (mode == OpenMode::kReadWrite) {
    // WAL lets readers (the CLI, a notebook) query while the coordinator writes. NORMAL sync in
    // WAL mode is durable against process crashes, which is what acknowledgement promises.
    if (auto s = db->Exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"); !s.ok()) {
      return s;
    }
  }
  if (auto s = db->Exec("PRAGMA foreign_keys=ON;"); !s.ok()) return s;
  return db;
}

void Database::ResetCached() {
  for (auto& [sql, statement] : cache_->statements) statement.Reset();
}

absl::Status Database::Exec(std::string_view sql) {
  ResetCached();
  char* err = nullptr;
  std::string owned(sql);
  int rc = sqlite3_exec(db_, owned.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string message = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return SqliteError(nullptr, absl::StrCat(message, " [", owned.substr(0, 80), "]"), rc);
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> Database::Prepare(std::string_view sql) {
  ResetCached();
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteError(db_, absl::StrCat("preparing [", std::string(sql.substr(0, 80)), "]"), rc);
  }
  return Statement(db_, stmt);
}

absl::StatusOr<Statement*> Database::Cached(std::string_view sql) {
  ResetCached();
  std::string key(sql);
  auto it = cache_->statements.find(key);
  if (it == cache_->statements.end()) {
    auto prepared = Prepare(sql);
    if (!prepared.ok()) return prepared.status();
    it = cache_->statements.emplace(std::move(key), std::move(*prepared)).first;
  }
  it->second.Reset();
  return &it->second;
}

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int Database::Changes() const { return sqlite3_changes(db_); }

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement::Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
  other.stmt_ = nullptr;
}

Statement& Statement::operator=(Statement&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = other.db_;
    stmt_ = other.stmt_;
    other.stmt_ = nullptr;
  }
  return *this;
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, double value) {
  sqlite3_bind_double(stmt_, index, value);
  return *this;
}
Statement& Statement::Bind(int index, std::string_view value) {
  sqlite3_bind_text(stmt_, index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindBlob(int index, std::string_view bytes) {
  sqlite3_bind_blob(stmt_, index, bytes.data(), static_cast<int>(bytes.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::BindNull(int index) {
  sqlite3_bind_null(stmt_, index);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) {
    // A finished statement must not keep its read snapshot (or write lock) open.
    sqlite3_reset(stmt_);
    return false;
  }
  const char* sql = sqlite3_sql(stmt_);
  return SqliteError(db_, absl::StrCat("running [", std::string(sql ? sql : "").substr(0, 80), "]"),
                     rc);
}

absl::Status Statement::Run() {
  auto stepped = Step();
  if (!stepped.ok()) return stepped.status();
  return absl::OkStatus();
}

void Statement::Reset() {
  if (!stmt_) return;
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }
std::string Statement::Text(int column) const {
  if (sqlite3_column_type(stmt_, column) == SQLITE_BLOB) {
    const void* blob = sqlite3_column_blob(stmt_, column);
    return blob ? std::string(static_cast<const char*>(blob),
                              static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
                : std::string();
  }
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  return text ? std::string(reinterpret_cast<const char*>(text),
                            static_cast<size_t>(sqlite3_column_bytes(stmt_, column)))
              : std::string();
}
bool Statement::IsNull(int column) const {
  return sqlite3_column_type(stmt_, column) == SQLITE_NULL;
}

absl::StatusOr<Transaction> Transaction::Begin(Database& db) {
  if (auto s = db.Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->Exec("ROLLBACK");
}

absl::Status Transaction::Commit() {
  absl::Status s = db_->Exec("COMMIT");
  if (s.ok()) db_ = nullptr;
  return s;
}

}  // namespace ladder::db
