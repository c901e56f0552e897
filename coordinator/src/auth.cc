#include "auth.h"

#include "absl/strings/str_cat.h"
#include "ladder/db/store.h"
#include "ladder/status_macros.h"

namespace ladder::coordinator {
namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

Authenticator::Authenticator(std::unique_ptr<db::Database> db, bool require_tokens,
                             double calls_per_second, double burst)
    : db_(std::move(db)),
      require_tokens_(require_tokens),
      calls_per_second_(calls_per_second),
      burst_(burst) {}

absl::Status Authenticator::CheckAdmin(const grpc::ServerContextBase& context) {
  if (!require_tokens_) return absl::OkStatus();
  const std::string token = BearerToken(context);
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires an admin token: pass --token-file FILE or set LADDER_TOKEN");
  }
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(db::TokenInfo info, db::VerifyToken(*db_, token, NowMs()));
  if (info.role != db::Role::kAdmin) {
    return absl::PermissionDeniedError(
        absl::StrCat("token ", info.id, " is an agent token; this call needs an admin token"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Authenticator::Join(const std::string& join_token,
                                                const std::string& session_id) {
  if (!require_tokens_) return std::string();
  if (join_token.empty()) {
    return absl::UnauthenticatedError(
        "this coordinator requires a join token: start the agent with --token-file FILE");
  }
  std::lock_guard lock(mu_);
  ASSIGN_OR_RETURN(db::TokenInfo info, db::VerifyToken(*db_, join_token, NowMs()));
  const std::string credential = db::RandomHex(32);
  const std::string hash = db::Sha256Hex(credential);
  ASSIGN_OR_RETURN(db::Statement stmt, db_->Prepare(
      "UPDATE sessions SET credential_hash = ?2, token_id = ?3 WHERE id = ?1"));
  RETURN_IF_ERROR(stmt.Bind(1, session_id).Bind(2, hash).Bind(3, info.id).Run());
  credential_hashes_[session_id] = hash;
  return credential;
}

absl::Status Authenticator::CheckSession(const grpc::ServerContextBase& context,
                                         const std::string& session_id) {
  if (require_tokens_) {
    const std::string credential = BearerToken(context);
    if (credential.empty()) {
      return absl::UnauthenticatedError("missing session credential; register first");
    }
    std::lock_guard lock(mu_);
    auto it = credential_hashes_.find(session_id);
    if (it == credential_hashes_.end()) {
      // After a coordinator restart the hashes come back from the sessions table.
      ASSIGN_OR_RETURN(db::Statement stmt,
                       db_->Prepare("SELECT credential_hash FROM sessions WHERE id = ?1"));
      stmt.Bind(1, session_id);
      ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row || stmt.Text(0).empty()) {
        return absl::UnauthenticatedError("unknown session or no credential issued");
      }
      it = credential_hashes_.emplace(session_id, stmt.Text(0)).first;
    }
    if (!db::ConstantTimeEquals(db::Sha256Hex(credential), it->second)) {
      return absl::PermissionDeniedError(
          "the credential presented does not belong to this session");
    }
  }
  return RateLimit(session_id);
}

absl::Status Authenticator::RateLimit(const std::string& session_id) {
  if (calls_per_second_ <= 0) return absl::OkStatus();
  std::lock_guard lock(mu_);
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
    return absl::ResourceExhaustedError(absl::StrCat(
        "session ", session_id.substr(0, 8), " exceeds ", calls_per_second_, " calls/s"));
  }
  bucket.tokens -= 1;
  return absl::OkStatus();
}

}  // namespace ladder::coordinator
