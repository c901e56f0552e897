// Authentication and per-session limits for the coordinator's services. Private.
//
// Admin calls need an admin token; Register needs a join token (agent or admin role); every
// other agent call needs the credential issued to that session at Register. Tokens are checked
// against the database on every Register and admin call; session credentials are kept hashed in
// memory and in the sessions table (so they survive a coordinator restart), and end at their
// next call once the token they were issued under is revoked (at once when revoked through
// this coordinator, within a second when another process revoked it). A credential issued
// under a revoked token never reopens its session either.
//
// A session id belongs to its credential: Register for an id that already holds one succeeds
// only for the holder of that credential while its token is live, or with the registration
// nonce before the session's first call (a lost answer); anyone else gets AlreadyExists.
//
// Thread safety: all methods are safe to call concurrently.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "ladder/common/mutex.h"
#include "ladder/coordinator/scheduler.h"
#include "ladder/db/sqlite.h"
#include "ladder/db/tokens.h"
#include "metrics.h"

namespace ladder::coordinator {

class Authenticator {
 public:
  // `db` is a connection of the authenticator's own; `clock` outlives it.
  enum class TokenPolicy {
    kOff,       // loopback without --require-tokens: every caller is admitted
    kRequired,  // every call carries a valid token
  };
  Authenticator(std::unique_ptr<db::Database> db, const Clock* clock, TokenPolicy tokens,
                double calls_per_second, double burst);

  bool required() const { return require_tokens_; }
  // Counts calls refused for a revoked token (ladder_sessions_revoked_total). Set before serving.
  void set_metrics(Metrics* metrics) { metrics_ = metrics; }

  // An admin token given outside gRPC (the web pages' bearer token or cookie). OK without one
  // only when neither this coordinator nor the caller (`required`: a listener beyond loopback)
  // asks for tokens.
  absl::Status CheckAdminToken(const std::string& token, bool required);

  // For admin RPCs.
  absl::Status CheckAdmin(const grpc::ServerContextBase& context);

  // For Register, before anything about the caller is stored: verifies the join token and
  // that the session id is free or the caller's own: a registered session id is the caller's
  // only when it presents the session's credential, or the registration nonce the session was
  // first registered with while the session has not yet called in with its credential (a
  // Register whose answer was lost). The join token alone never reopens a session
  // (ALREADY_EXISTS). Returns the join token's id ("" when tokens are off).
  absl::StatusOr<std::string> AdmitRegister(const grpc::ServerContextBase& context,
                                            const std::string& join_token,
                                            const std::string& session_id,
                                            const std::string& registration_nonce);
  // After the session row is stored: issues its credential under `token_id` and keeps the
  // nonce's hash ("" and nothing stored when tokens are off).
  absl::StatusOr<std::string> IssueCredential(const std::string& session_id,
                                              const std::string& token_id,
                                              const std::string& registration_nonce);
  // For the other agent RPCs: the caller must hold `session_id`'s credential, its token must
  // not be revoked, and it must stay within its rate. UNAUTHENTICATED for no credential or one
  // no session holds; PERMISSION_DENIED for another session's credential. The first call that
  // passes marks the session as called in.
  absl::Status CheckSession(const grpc::ServerContextBase& context, const std::string& session_id);

  // Token management over the same connection (the admin service's token RPCs).
  absl::StatusOr<db::NewToken> CreateToken(db::Role role, const std::string& description,
                                           int64_t expires_in_ms);
  absl::StatusOr<std::vector<db::TokenInfo>> ListTokens();
  // Revokes the token; the credentials it issued end at once: every later call and Register
  // with them is refused. Returns the sessions admitted under it (the caller re-queues their
  // attempts and ends their long polls).
  absl::StatusOr<std::set<std::string>> RevokeToken(const std::string& id);
  // Whether this coordinator has seen `session_id`'s token revoked (memory only, no database
  // read: for the lease dispatcher's every pass).
  bool SessionRevoked(const std::string& session_id);

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point last;
  };
  struct RevocationCheck {
    bool revoked = false;
    std::chrono::steady_clock::time_point checked;
  };
  absl::Status RateLimit(const std::string& session_id) ABSL_LOCKS_EXCLUDED(mu_);
  // The session's credential, from memory or the sessions table.
  absl::StatusOr<std::optional<db::SessionCredential>> CredentialLocked(
      const std::string& session_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> RevokedLocked(const std::string& token_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Mutex mu_;
  std::unique_ptr<db::Database> db_ ABSL_GUARDED_BY(mu_);
  const Clock* const clock_;
  const bool require_tokens_;
  const double calls_per_second_;
  const double burst_;
  std::map<std::string, db::SessionCredential> credentials_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, RevocationCheck> revocations_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  Metrics* metrics_ = nullptr;
};

// The bearer token of a call's `authorization` metadata, or "".
std::string BearerToken(const grpc::ServerContextBase& context);

}  // namespace ladder::coordinator
