// Schema versioning: migrations are applied in order, tracked by PRAGMA user_version.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"

namespace ladder::db {

// The version Migrate brings a database to.
int LatestSchemaVersion();
absl::StatusOr<int> SchemaVersion(db::Database& db);
// Applies every missing migration, each in its own transaction. Refuses a database whose
// version is newer than this binary knows.
absl::Status Migrate(db::Database& db);

}  // namespace ladder::db
