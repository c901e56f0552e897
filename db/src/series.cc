#include "ladder/db/series.h"

#include "absl/strings/str_cat.h"
#include "ladder/status_macros.h"

namespace ladder::db {
namespace {

bool IsKeyByte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

absl::Status CheckKey(const char* what, const std::string& key) {
  if (key.empty() || key.size() > kMaxTagKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " '", key, "' must be 1 to ", kMaxTagKeyBytes, " bytes"));
  }
  for (char c : key) {
    if (!IsKeyByte(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " '", key, "' may hold only letters, digits, '_', '.' and '-'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRunTags(const RunTags& tags) {
  if (tags.size() > kMaxRunTags) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tag: ", tags.size(), " tags; at most ", kMaxRunTags));
  }
  for (const auto& [key, value] : tags) {
    RETURN_IF_ERROR(CheckKey("--tag: key", key));
    if (value.size() > kMaxTagValueBytes) {
      return absl::InvalidArgumentError(absl::StrCat("--tag ", key, ": the value is ", value.size(),
                                                     " bytes; at most ", kMaxTagValueBytes));
    }
    for (unsigned char c : value) {
      if (c < 0x20 || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("--tag ", key, ": the value holds a control character"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status AddTagFlag(const std::string& flag, RunTags* tags) {
  const auto eq = flag.find('=');
  if (eq == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tag: expected KEY=VALUE (e.g. build=abc123), got '", flag, "'"));
  }
  const std::string key = flag.substr(0, eq);
  RETURN_IF_ERROR(CheckKey("--tag: key", key));
  if (!tags->emplace(key, flag.substr(eq + 1)).second) {
    return absl::InvalidArgumentError(absl::StrCat("--tag: key '", key, "' given twice"));
  }
  return absl::OkStatus();
}

absl::Status ValidateBaselineName(const std::string& name) {
  return CheckKey("baseline name", name);
}

absl::Status InsertRunTags(Database& db, int64_t run_id, const RunTags& tags) {
  RETURN_IF_ERROR(ValidateRunTags(tags));
  if (tags.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Statement * insert,
                   db.Cached("INSERT INTO run_tags(run_id, key, value) VALUES (?1, ?2, ?3)"));
  for (const auto& [key, value] : tags) {
    insert->Reset();
    RETURN_IF_ERROR(insert->Bind(1, run_id).Bind(2, key).Bind(3, value).Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> HasSeriesTables(Database& db) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name "
                              "IN ('run_tags', 'baselines')"));
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row && stmt.Int(0) == 2;
}

absl::StatusOr<RunTags> GetRunTags(Database& db, int64_t run_id) {
  RunTags tags;
  ASSIGN_OR_RETURN(bool has, HasSeriesTables(db));
  if (!has) return tags;
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("SELECT key, value FROM run_tags WHERE run_id = ?1 ORDER BY key"));
  stmt.Bind(1, run_id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    tags.emplace(stmt.Text(0), stmt.Text(1));
  }
  return tags;
}

absl::StatusOr<std::string> MatrixNameOfRun(Database& db, int64_t run_id) {
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("SELECT m.name FROM runs r JOIN matrices m ON m.id = r.matrix_id "
                              "WHERE r.id = ?1"));
  stmt.Bind(1, run_id);
  ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) {
    return absl::NotFoundError(absl::StrCat("run ", run_id, ": no such run in ", db.path()));
  }
  return stmt.Text(0);
}

absl::StatusOr<Baseline> SetBaseline(Database& db, int64_t run_id, const std::string& name,
                                     int64_t now_ms) {
  RETURN_IF_ERROR(ValidateBaselineName(name));
  ASSIGN_OR_RETURN(bool has, HasSeriesTables(db));
  if (!has) {
    return absl::FailedPreconditionError(
        absl::StrCat(db.path(),
                     " predates baselines (schema v11): open it with this ladder's "
                     "coordinator once, or any writing command, to migrate it"));
  }
  ASSIGN_OR_RETURN(std::string matrix, MatrixNameOfRun(db, run_id));
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("INSERT INTO baselines(matrix_name, name, run_id, set_at) VALUES "
                              "(?1, ?2, ?3, ?4) ON CONFLICT(matrix_name, name) DO UPDATE SET "
                              "run_id = excluded.run_id, set_at = excluded.set_at"));
  RETURN_IF_ERROR(stmt.Bind(1, matrix).Bind(2, name).Bind(3, run_id).Bind(4, now_ms).Run());
  return Baseline{matrix, name, run_id, now_ms};
}

absl::StatusOr<std::vector<Baseline>> ListBaselines(Database& db, const std::string& matrix_name) {
  std::vector<Baseline> out;
  ASSIGN_OR_RETURN(bool has, HasSeriesTables(db));
  if (!has) return out;
  ASSIGN_OR_RETURN(Statement stmt,
                   db.Prepare("SELECT matrix_name, name, run_id, set_at FROM baselines WHERE "
                              "?1 = '' OR matrix_name = ?1 ORDER BY matrix_name, name"));
  stmt.Bind(1, matrix_name);
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    out.push_back({stmt.Text(0), stmt.Text(1), stmt.Int(2), stmt.Int(3)});
  }
  return out;
}

absl::StatusOr<std::optional<Baseline>> FindBaseline(Database& db, const std::string& matrix_name,
                                                     const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<Baseline> all, ListBaselines(db, matrix_name));
  for (auto& b : all) {
    if (b.name == name) return std::optional<Baseline>(std::move(b));
  }
  return std::optional<Baseline>();
}

}  // namespace ladder::db
