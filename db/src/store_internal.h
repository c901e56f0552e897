// Statements shared by the Store's source files. Not part of the public API.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"

namespace ladder::db::internal {

// Inserts a queued unit (idx after the run's last unit) holding `cell_ids` in order, inside the
// caller's transaction. Returns its id.
absl::StatusOr<int64_t> InsertQueuedUnit(db::Database& db, int64_t run_id,
                                         const std::string& group_key, int replicate, uint64_t seed,
                                         const std::vector<int64_t>& cell_ids);

}  // namespace ladder::db::internal
