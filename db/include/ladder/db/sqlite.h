// Thin RAII over the SQLite C API: a connection, prepared statements, transactions.
//
// Every SQL error becomes an absl::Status naming the statement's purpose and SQLite's message.
// Thread safety: a Database is used by one thread at a time (callers hold their own lock);
// SQLite is opened in multi-thread mode, so separate connections may be used concurrently.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ladder::db {

enum class OpenMode { kReadWrite, kReadOnly };

// Every error from SQLite carries this payload (the SQLite result text), so a server can tell
// its own database's failures, whose messages name SQL, from the caller's mistakes.
inline constexpr char kSqliteErrorPayload[] = "type.ladder.dev/sqlite";
inline bool IsDatabaseError(const absl::Status& status) {
  return status.GetPayload(kSqliteErrorPayload).has_value();
}

class Statement;

class Database {
 public:
  // Opens (creating when kReadWrite) the file, turns on WAL, foreign keys and a busy timeout.
  static absl::StatusOr<std::unique_ptr<Database>> Open(const std::string& path, OpenMode mode);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs one or more statements that return no rows.
  absl::Status Exec(std::string_view sql);
  // Compiles one statement. The Database must outlive it.
  absl::StatusOr<Statement> Prepare(std::string_view sql);
  // A cached prepared statement, reset and with bindings cleared, for hot paths.
  // Every Exec, Prepare and Cached call first resets all cached statements, so a statement
  // left mid-result by an earlier operation never holds a snapshot or lock into the next one;
  // fetch every cached statement an operation needs before stepping any of them.
  absl::StatusOr<Statement*> Cached(std::string_view sql);
  void ResetCached();

  int64_t LastInsertRowId() const;
  int Changes() const;
  const std::string& path() const { return path_; }
  sqlite3* handle() const { return db_; }

 private:
  Database(sqlite3* db, std::string path);
  sqlite3* db_;
  std::string path_;
  struct Cache;
  std::unique_ptr<Cache> cache_;
};

// A prepared statement. Bind parameters are 1-based, as in SQLite.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(Statement&& other) noexcept;
  Statement& operator=(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view value);
  Statement& Bind(int index, const char* value) { return Bind(index, std::string_view(value)); }
  Statement& Bind(int index, const std::string& value) {
    return Bind(index, std::string_view(value));
  }
  Statement& BindBlob(int index, std::string_view bytes);
  Statement& BindNull(int index);

  // Advances: true when a row is available, false when done; error statuses otherwise.
  absl::StatusOr<bool> Step();
  // Steps a statement that returns no rows.
  absl::Status Run();
  void Reset();

  int64_t Int(int column) const;
  double Double(int column) const;
  std::string Text(int column) const;
  bool IsNull(int column) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless Commit() succeeded.
class Transaction {
 public:
  static absl::StatusOr<Transaction> Begin(Database& db);
  Transaction(Transaction&& other) noexcept : db_(other.db_) { other.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  absl::Status Commit();

 private:
  explicit Transaction(Database* db) : db_(db) {}
  Database* db_;
};

}  // namespace ladder::db
