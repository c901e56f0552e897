#include "ladder/db/json_rule.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "ladder/common/json_depth.h"
#include "ladder/status_macros.h"

namespace ladder::db {

std::string JsonShapeRefusal(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return absl::StrCat("JSON is ", text.size(), " bytes; at most ", max_bytes);
  }
  if (text.size() >= 3 && static_cast<unsigned char>(text[0]) == 0xEF &&
      static_cast<unsigned char>(text[1]) == 0xBB && static_cast<unsigned char>(text[2]) == 0xBF) {
    return "JSON starts with a byte-order mark";
  }
  // Depth before parsing, so a deep document costs one pass and no recursion.
  if (JsonNestsDeeperThan(text, kMaxJsonDepth)) {
    return absl::StrCat("JSON nests deeper than ", kMaxJsonDepth, " levels");
  }
  if (!nlohmann::json::accept(text)) return "not valid JSON";
  return "";
}

absl::StatusOr<std::string> StorableJsonRefusal(db::Database& db, std::string_view text,
                                                size_t max_bytes) {
  if (std::string why = JsonShapeRefusal(text, max_bytes); !why.empty()) return why;
  ASSIGN_OR_RETURN(db::Statement * stmt, db.Cached("SELECT json_valid(?1)"));
  stmt->Reset();
  stmt->Bind(1, std::string(text));
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  const bool valid = row && stmt->Int(0) == 1;
  stmt->Reset();
  return valid ? std::string() : std::string("not JSON that SQLite's json_valid() accepts");
}

}  // namespace ladder::db
