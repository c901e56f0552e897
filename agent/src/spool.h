// The agent's spool: results and attempt endings kept on disk until the coordinator has them.
// Private to agent/.
//
// Thread safety: safe to call from any thread; each method holds an internal mutex while it uses
// the spool's one SQLite connection.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "ladder/db/sqlite.h"

namespace ladder::agent {

struct SpooledResult {
  std::string uuid;
  std::string session_id;
  int64_t attempt_id = 0;
  bool is_evidence = false;
  std::string payload;  // serialized MeasurementRecord or EvidenceRecord
};

struct SpooledFinish {
  std::string session_id;
  int64_t attempt_id = 0;
  bool ok = false;
  std::string reason;
  int64_t measurement_count = 0;
  int64_t evidence_count = 0;
};

class Spool {
 public:
  // Opens (creating when absent) the spool file at `path`; what an earlier process of this agent
  // wrote and the coordinator did not acknowledge is still pending. A file that is not a spool
  // (not SQLite) or a path that cannot be written gives an error whose message names `path`.
  static absl::StatusOr<std::unique_ptr<Spool>> Open(const std::string& path);

  absl::Status AddResult(const SpooledResult& result);
  // Oldest first, at most `limit`, of one session.
  absl::StatusOr<std::vector<SpooledResult>> PendingResults(int limit,
                                                            const std::string& session_id);
  // Sessions with results or finishes waiting, oldest first.
  absl::StatusOr<std::vector<std::string>> PendingSessions();
  // Per session: results and finishes waiting (what `ladder agent --spool-status` prints).
  struct SessionBacklog {
    std::string session_id;
    int64_t results = 0;
    int64_t finishes = 0;
  };
  absl::StatusOr<std::vector<SessionBacklog>> Backlog();
  // The acknowledgement: the results are stored by the coordinator and leave the spool.
  absl::Status Remove(const std::vector<std::string>& uuids);
  absl::StatusOr<int64_t> PendingCount(int64_t attempt_id);
  absl::StatusOr<int64_t> TotalPending();

  absl::Status AddFinish(const SpooledFinish& finish);
  absl::StatusOr<std::vector<SpooledFinish>> PendingFinishes();
  absl::Status RemoveFinish(int64_t attempt_id);

  // The credential each session was issued, so results of an earlier session of this agent
  // (before a restart) can still be reported under it.
  absl::Status SaveCredential(const std::string& session_id, const std::string& credential);
  absl::StatusOr<std::string> Credential(const std::string& session_id);

 private:
  explicit Spool(std::unique_ptr<db::Database> db) : db_(std::move(db)) {}
  absl::Mutex mu_;
  // The connection is used by one thread at a time (db::Database's contract): the runner's
  // thread writes results while the reporting thread reads and removes them.
  const std::unique_ptr<db::Database> db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace ladder::agent
