#include "auth.h"

#include "absl/strings/str_cat.h"
#include "ladder/db/store.h"
#include "ladder/status_macros.h"

namespace ladder::coordinator {
namespace {

// How long a token's revocation state is trusted before the database is asked again: the
// bound on "revocation bites on the next call" for live sessions.
constexpr auto kRevocationRecheck = std::chrono::seconds(1);

}  // namespace

std::string BearerToken(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  std::string value(it->second.data(), it->second.size());
  constexpr std::string_view kBearer = "Bearer ";
  if (value.compare(0, kBearer.size(), kBearer) != 0) return "";
  return value.substr(kBearer.size());
}

Authenticator::Authenticator(std::unique_ptr<db::Database> db, const Clock* clock,
                             TokenPolicy tokens, double calls_per_second, double burst)
    : db_(std::move(db)),
      clock_(clock),
      require_tokens_(tokens == TokenPolicy::kRequired),
      calls_per_second_(calls_per_second),
      burst_(burst) {}

absl::Status Authenticator::CheckAdmin(const grpc::ServerContextBase& context) {
  if (!require_tokens_) return absl::OkStatus();
  return CheckAdminToken(BearerToken(context), true);
}

absl::Status Authenticator::CheckAdminToken(const std::string& token, bool required) {
  if (!require_tokens_ && !required) return absl::OkStatus();
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires an admin token: pass --token-file FILE or set LADDER_TOKEN");
  }
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::TokenInfo info, db::VerifyToken(*db_, token, clock_->NowMs()));
  if (info.role != db::Role::kAdmin) {
    return absl::PermissionDeniedError(
        absl::StrCat("token ", info.id, " is an agent token; this call needs an admin token"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<db::SessionCredential>> Authenticator::CredentialLocked(
    const std::string& session_id) {
  if (auto it = credentials_.find(session_id); it != credentials_.end()) {
    return std::optional<db::SessionCredential>(it->second);
  }
  // After a coordinator restart the credentials come back from the sessions table.
  ASSIGN_OR_RETURN(auto stored, db::LoadSessionCredential(*db_, session_id));
  if (stored.has_value()) credentials_[session_id] = *stored;
  return stored;
}

absl::StatusOr<bool> Authenticator::RevokedLocked(const std::string& token_id) {
  const auto now = std::chrono::steady_clock::now();
  auto it = revocations_.find(token_id);
  if (it != revocations_.end() &&
      (it->second.revoked || now - it->second.checked < kRevocationRecheck)) {
    return it->second.revoked;
  }
  ASSIGN_OR_RETURN(bool revoked, db::TokenRevoked(*db_, token_id));
  revocations_[token_id] = RevocationCheck{revoked, now};
  return revoked;
}

absl::StatusOr<std::string> Authenticator::AdmitRegister(const grpc::ServerContextBase& context,
                                                         const std::string& join_token,
                                                         const std::string& session_id,
                                                         const std::string& registration_nonce) {
  if (!require_tokens_) return std::string();
  if (join_token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a join token: start the agent with --token-file FILE");
  }
  MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(db::TokenInfo info, db::VerifyToken(*db_, join_token, clock_->NowMs()));
  ASSIGN_OR_RETURN(auto existing, CredentialLocked(session_id));
  if (existing.has_value()) {
    const std::string presented = BearerToken(context);
    const bool holds_credential =
        !presented.empty() && db::ConstantTimeEquals(db::Sha256Hex(presented), existing->hash);
    const bool first_registration_retried =
        !existing->called_in && !existing->nonce_hash.empty() && !registration_nonce.empty() &&
        db::ConstantTimeEquals(db::Sha256Hex(registration_nonce), existing->nonce_hash);
    if (!holds_credential && !first_registration_retried) {
      return absl::AlreadyExistsError(absl::StrCat(
          "session ", session_id.substr(0, 8),
          " already belongs to another credential; an agent registers under a fresh session "
          "id"));
    }
    // Revocation is final: a credential (or nonce) issued under a revoked token proves
    // nothing, whichever live join token comes with it.
    ASSIGN_OR_RETURN(bool revoked, RevokedLocked(existing->token_id));
    if (revoked) {
      if (metrics_ != nullptr) metrics_->Add(Metrics::Counter::kSessionsRevoked);
      return absl::UnauthenticatedError(absl::StrCat(
          "session ", session_id.substr(0, 8), " was admitted under token ", existing->token_id,
          ", which was revoked; an agent registers under a fresh session id"));
    }
  }
  return info.id;
}

absl::StatusOr<std::string> Authenticator::IssueCredential(const std::string& session_id,
                                                           const std::string& token_id,
                                                           const std::string& registration_nonce) {
  if (!require_tokens_) return std::string();
  const std::string credential = db::RandomHex(32);
  db::SessionCredential stored{
      db::Sha256Hex(credential), token_id,
      registration_nonce.empty() ? std::string() : db::Sha256Hex(registration_nonce), false};
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(db::SetSessionCredential(*db_, session_id, stored));
  credentials_[session_id] = std::move(stored);
  return credential;
}

absl::Status Authenticator::CheckSession(const grpc::ServerContextBase& context,
                                         const std::string& session_id) {
  if (require_tokens_) {
    const std::string credential = BearerToken(context);
    if (credential.empty()) {
      return absl::UnauthenticatedError("missing session credential; register first");
    }
    MutexLock lock(&mu_);
    ASSIGN_OR_RETURN(auto stored, CredentialLocked(session_id));
    const std::string hash = db::Sha256Hex(credential);
    if (!stored.has_value()) {
      // A session's valid credential naming a session id it does not hold oversteps
      // (agent.proto: PERMISSION_DENIED); anything else authenticates nobody.
      ASSIGN_OR_RETURN(auto holder, db::SessionWithCredentialHash(*db_, hash));
      if (holder.has_value()) {
        return absl::PermissionDeniedError(
            absl::StrCat("the credential presented belongs to another session, not to session ",
                         session_id.substr(0, 8)));
      }
      return absl::UnauthenticatedError("unknown session or no credential issued");
    }
    if (!db::ConstantTimeEquals(hash, stored->hash)) {
      // Another session's credential is a session overstepping; anything else (garbage, a
      // join token sent as a credential) authenticates nobody.
      ASSIGN_OR_RETURN(auto holder, db::SessionWithCredentialHash(*db_, hash));
      if (holder.has_value()) {
        return absl::PermissionDeniedError("the credential presented belongs to another session");
      }
      return absl::UnauthenticatedError(
          "the credential presented is not one this coordinator issued; register first");
    }
    ASSIGN_OR_RETURN(bool revoked, RevokedLocked(stored->token_id));
    if (revoked) {
      if (metrics_ != nullptr) metrics_->Add(Metrics::Counter::kSessionsRevoked);
      return absl::UnauthenticatedError(absl::StrCat(
          "token ", stored->token_id, ", which this session joined with, was revoked"));
    }
    if (!stored->called_in) {
      // From now on only this credential reopens the session.
      RETURN_IF_ERROR(db::MarkSessionCalledIn(*db_, session_id));
      credentials_[session_id].called_in = true;
    }
  }
  return RateLimit(session_id);
}

absl::StatusOr<db::NewToken> Authenticator::CreateToken(db::Role role,
                                                        const std::string& description,
                                                        int64_t expires_in_ms) {
  MutexLock lock(&mu_);
  return db::CreateToken(*db_, role, description, expires_in_ms, clock_->NowMs());
}

absl::StatusOr<std::vector<db::TokenInfo>> Authenticator::ListTokens() {
  MutexLock lock(&mu_);
  return db::ListTokens(*db_);
}

absl::StatusOr<std::set<std::string>> Authenticator::RevokeToken(const std::string& id) {
  MutexLock lock(&mu_);
  RETURN_IF_ERROR(db::RevokeToken(*db_, id, clock_->NowMs()));
  revocations_[id] = RevocationCheck{true, std::chrono::steady_clock::now()};
  std::set<std::string> sessions;
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db_->Prepare("SELECT id FROM sessions WHERE token_id = ?1 AND "
                                "credential_hash <> ''"));
  stmt.Bind(1, id);
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    sessions.insert(stmt.Text(0));
  }
  return sessions;
}

bool Authenticator::SessionRevoked(const std::string& session_id) {
  if (!require_tokens_) return false;
  MutexLock lock(&mu_);
  auto credential = credentials_.find(session_id);
  if (credential == credentials_.end()) return false;  // CheckSession loaded it if it called
  auto revocation = revocations_.find(credential->second.token_id);
  return revocation != revocations_.end() && revocation->second.revoked;
}

absl::Status Authenticator::RateLimit(const std::string& session_id) {
  if (calls_per_second_ <= 0) return absl::OkStatus();
  MutexLock lock(&mu_);
  const auto now = std::chrono::steady_clock::now();
  auto [it, inserted] = buckets_.try_emplace(session_id);
  Bucket& bucket = it->second;
  if (inserted) {
    bucket.tokens = burst_;
    bucket.last = now;
  }
  const double elapsed = std::chrono::duration<double>(now - bucket.last).count();
  bucket.tokens = std::min(burst_, bucket.tokens + elapsed * calls_per_second_);
  bucket.last = now;
  if (bucket.tokens < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("session ", session_id.substr(0, 8),
                                                     " exceeds ", calls_per_second_, " calls/s"));
  }
  bucket.tokens -= 1;
  return absl::OkStatus();
}

}  // namespace ladder::coordinator
