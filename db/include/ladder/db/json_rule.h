// The one rule for JSON an agent sends (evidence values, inventory labels): stored only if every
// reader of the database can read it back. Readers are SQLite's JSON functions (the views
// `load_requests` and the queries of docs/schema.md), Python's json and pandas, and ladder.
//
// Accepted: UTF-8 text of at most `max_bytes` bytes that SQLite's own json_valid() accepts,
// does not start with a byte-order mark, and nests arrays and objects at most kMaxJsonDepth
// deep. (SQLite's parser refuses more than 1000 or 2000 levels depending on its version, and a
// BOM; nlohmann's parser skips a BOM and has no depth limit: the rule is the strictest of them.)
//
// Thread safety: pure functions, except that StorableJsonRefusal uses the connection it is
// given (the caller's thread owns it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"

namespace ladder::db {

inline constexpr int kMaxJsonDepth = 64;

// Why `text` breaks the rule, without asking SQLite (size, BOM, depth, syntax), or "".
std::string JsonShapeRefusal(std::string_view text, size_t max_bytes);

// JsonShapeRefusal, then SQLite's json_valid() on `db`: why `text` may not be stored, or "".
absl::StatusOr<std::string> StorableJsonRefusal(db::Database& db, std::string_view text,
                                                size_t max_bytes);

}  // namespace ladder::db
