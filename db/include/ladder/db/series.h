// A matrix's runs as a series: the tags each run was submitted with, and the named baselines of a
// matrix (schema v11, docs/history.md).
//
// Runs whose matrices share a name form one series (report/history.h reads it); a baseline is a
// run of that series chosen by name ('default' unless named), so `ladder compare --against
// baseline latest` needs no run id typed. Tags are what the submitter says distinguishes a run
// (`--tag build=abc123`); what the sessions recorded (builds, drivers, GPUs, engine versions) is
// read from the sessions, not copied here.
//
// Functions over an open database; the caller owns the connection and its thread. On a database
// older than v11 (opened read-only, not migrated) the readers answer as for no tags and no
// baselines; the writers need v11 (FailedPrecondition otherwise).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"

namespace ladder::db {

// KEY -> VALUE, ordered by key.
using RunTags = std::map<std::string, std::string>;

inline constexpr std::size_t kMaxRunTags = 32;
inline constexpr std::size_t kMaxTagKeyBytes = 64;
inline constexpr std::size_t kMaxTagValueBytes = 256;
// The name a baseline has when none is given.
inline constexpr const char* kDefaultBaseline = "default";

// A key is 1..64 bytes of [A-Za-z0-9_.-]; a value at most 256 bytes with no control character
// (bytes below 0x20 and 0x7F; the coordinator applies its full text rule at the wire); at most
// 32 tags. InvalidArgument naming the tag otherwise.
absl::Status ValidateRunTags(const RunTags& tags);

// "KEY=VALUE" -> (KEY, VALUE), appended to `tags`; InvalidArgument for text without '=', an
// invalid key or a key given twice.
absl::Status AddTagFlag(const std::string& flag, RunTags* tags);

// A baseline name follows the tag key rule.
absl::Status ValidateBaselineName(const std::string& name);

// Stores `tags` for `run_id` (within the caller's transaction, if any).
absl::Status InsertRunTags(Database& db, int64_t run_id, const RunTags& tags);

// The tags of a run (empty for none, or on a database older than v11).
absl::StatusOr<RunTags> GetRunTags(Database& db, int64_t run_id);

// Whether the database has schema v11's tables (it may be an older file opened read-only).
absl::StatusOr<bool> HasSeriesTables(Database& db);

struct Baseline {
  std::string matrix_name;
  std::string name;
  int64_t run_id = 0;
  int64_t set_at_ms = 0;
};

// Makes `run_id` the baseline `name` of its matrix's series (replacing that name's previous run).
// NotFound for an unknown run; InvalidArgument for a bad name; FailedPrecondition before v11.
absl::StatusOr<Baseline> SetBaseline(Database& db, int64_t run_id, const std::string& name,
                                     int64_t now_ms);

// The baselines of one matrix name (all matrices when empty), by matrix name then name.
absl::StatusOr<std::vector<Baseline>> ListBaselines(Database& db,
                                                    const std::string& matrix_name = "");

// The baseline `name` of `matrix_name`, or nullopt when none is set.
absl::StatusOr<std::optional<Baseline>> FindBaseline(Database& db, const std::string& matrix_name,
                                                     const std::string& name);

// The matrix name of a run; NotFound for an unknown run.
absl::StatusOr<std::string> MatrixNameOfRun(Database& db, int64_t run_id);

}  // namespace ladder::db
