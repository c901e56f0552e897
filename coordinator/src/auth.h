// Authentication and per-session limits for the coordinator's services. Private.
//
// Admin calls need an admin token; Register needs a join token (agent or admin role); every
// other agent call needs the credential issued to that session at Register. Tokens are checked
// against the database on every call (revocation is immediate); session credentials are kept
// hashed in memory and in the sessions table (so they survive a coordinator restart).
//
// Thread safety: all methods are safe to call concurrently.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/tokens.h"

namespace ladder::coordinator {

class Authenticator {
 public:
  // `db` is a connection of the authenticator's own.
  Authenticator(std::unique_ptr<db::Database> db, bool require_tokens, double calls_per_second,
                double burst);

  bool required() const { return require_tokens_; }

  // For admin RPCs.
  absl::Status CheckAdmin(const grpc::ServerContextBase& context);
  // For Register: verifies the join token and issues a credential for the session.
  // Returns the credential to hand the agent ("" when tokens are not required).
  absl::StatusOr<std::string> Join(const std::string& join_token, const std::string& session_id);
  // For the other agent RPCs: the caller must hold `session_id`'s credential, within its rate.
  absl::Status CheckSession(const grpc::ServerContextBase& context, const std::string& session_id);

  // Token management over the same connection (the admin service's token RPCs).
  template <typename F>
  auto WithDb(F&& f) {
    std::lock_guard lock(mu_);
    return f(*db_);
  }

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };
  absl::Status RateLimit(const std::string& session_id) ABSL_LOCKS_EXCLUDED(mu_);

  std::mutex mu_;
  std::unique_ptr<db::Database> db_ ABSL_GUARDED_BY(mu_);
  const bool require_tokens_;
  const double calls_per_second_;
  const double burst_;
  std::map<std::string, std::string> credential_hashes_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
};

// The bearer token of a call's `authorization` metadata, or "".
std::string BearerToken(const grpc::ServerContextBase& context);

}  // namespace ladder::coordinator
