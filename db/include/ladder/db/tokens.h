// Access tokens: join tokens for agents, admin tokens for the CLI.
//
// A token reads `ladder_<id>_<secret>`. The database keeps the id, the role and the SHA-256 of
// the secret; the secret itself is shown once, at creation, and never stored or logged.
// Verification compares hashes in constant time and re-reads the row on every call, so a
// revocation takes effect on the next call.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ladder/db/sqlite.h"

namespace ladder::db {

enum class Role { kAgent, kAdmin };
const char* RoleName(Role role);
absl::StatusOr<Role> ParseRole(const std::string& name);

struct TokenInfo {
  std::string id;
  Role role = Role::kAgent;
  std::string description;
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;  // 0: never
  int64_t revoked_at_ms = 0;  // 0: live
};

struct NewToken {
  TokenInfo info;
  std::string plaintext;  // show once
};

// `expires_in_ms` 0: never expires; negative: InvalidArgument.
absl::StatusOr<NewToken> CreateToken(db::Database& db, Role role, const std::string& description,
                                     int64_t expires_in_ms, int64_t now_ms);
absl::StatusOr<std::vector<TokenInfo>> ListTokens(db::Database& db);
absl::Status RevokeToken(db::Database& db, const std::string& id, int64_t now_ms);
// Unauthenticated (never naming the secret) unless the token is known, live and unexpired.
absl::StatusOr<TokenInfo> VerifyToken(db::Database& db, const std::string& plaintext,
                                      int64_t now_ms);

// The credential a session was issued at Register: the SHA-256 of its secret, and the id of
// the join token it was issued under (revoking that token ends the credential).
struct SessionCredential {
  std::string hash;
  std::string token_id;
  std::string nonce_hash;  // SHA-256 of the registration nonce; "" when none was given
  bool called_in = false;  // the session has made a call with this credential
};
// NotFound when the session is not in the sessions table.
absl::Status SetSessionCredential(db::Database& db, const std::string& session_id,
                                  const SessionCredential& credential);
// nullopt when the session is unknown or was never issued a credential.
absl::StatusOr<std::optional<SessionCredential>> LoadSessionCredential(
    db::Database& db, const std::string& session_id);
// Marks the session as having called in with its credential (the nonce no longer reopens it).
absl::Status MarkSessionCalledIn(db::Database& db, const std::string& session_id);
// The session whose credential has this hash, or nullopt.
absl::StatusOr<std::optional<std::string>> SessionWithCredentialHash(db::Database& db,
                                                                     const std::string& hash);
// True when the token is revoked or unknown.
absl::StatusOr<bool> TokenRevoked(db::Database& db, const std::string& token_id);

// Random secrets and their hashes, shared with session credentials.
std::string RandomHex(size_t bytes);
bool ConstantTimeEquals(const std::string& a, const std::string& b);

// "7d", "12h", "30m", "90s" -> milliseconds; 0 for "" or "never".
absl::StatusOr<int64_t> ParseDurationMs(const std::string& text);

}  // namespace ladder::db
