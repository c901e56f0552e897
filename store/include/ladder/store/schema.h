// Schema versioning: migrations are applied in order, tracked by PRAGMA user_version.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/sqlite/sqlite.h"

namespace ladder::store {

// The version Migrate brings a database to.
int LatestSchemaVersion();
absl::StatusOr<int> SchemaVersion(sqlite::Database& db);
// Applies every missing migration, each in its own transaction. Refuses a database whose
// version is newer than this binary knows.
absl::Status Migrate(sqlite::Database& db);

}  // namespace ladder::store
