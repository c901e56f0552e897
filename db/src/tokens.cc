#include "ladder/db/tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "absl/strings/str_cat.h"
#include "ladder/db/store.h"
#include "ladder/status_macros.h"

namespace ladder::db {

const char* RoleName(Role role) { return role == Role::kAdmin ? "admin" : "agent"; }

absl::StatusOr<Role> ParseRole(const std::string& name) {
  if (name == "agent") return Role::kAgent;
  if (name == "admin") return Role::kAdmin;
  return absl::InvalidArgumentError(
      absl::StrCat("--role: expected agent or admin, got '", name, "'"));
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    // RAND_bytes only fails when the OS entropy source is broken; refuse to continue.
    std::abort();
  }
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 0xf]);
  }
  return out;
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

absl::StatusOr<int64_t> ParseDurationMs(const std::string& text) {
  if (text.empty() || text == "never") return 0;
  char unit = text.back();
  std::string number = text.substr(0, text.size() - 1);
  int64_t per = 0;
  switch (unit) {
    case 'd':
      per = 86400000;
      break;
    case 'h':
      per = 3600000;
      break;
    case 'm':
      per = 60000;
      break;
    case 's':
      per = 1000;
      break;
    default:
      break;
  }
  char* end = nullptr;
  long long value = std::strtoll(number.c_str(), &end, 10);
  if (per == 0 || number.empty() || *end != '\0' || value <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expires: expected a duration like 7d, 12h, 30m or never, got '", text, "'"));
  }
  return value * per;
}

absl::StatusOr<NewToken> CreateToken(db::Database& db, Role role, const std::string& description,
                                     int64_t expires_in_ms, int64_t now_ms) {
  if (expires_in_ms < 0) {
    return absl::InvalidArgumentError(
        "a token's lifetime must be positive (or 0 for a token that never expires)");
  }
  if (description.size() > 1024) {
    return absl::InvalidArgumentError("a token's description is at most 1024 bytes");
  }
  NewToken token;
  token.info.id = RandomHex(4);
  token.info.role = role;
  token.info.description = description;
  token.info.created_at_ms = now_ms;
  token.info.expires_at_ms = expires_in_ms > 0 ? now_ms + expires_in_ms : 0;
  const std::string secret = RandomHex(24);
  token.plaintext = absl::StrCat("ladder_", token.info.id, "_", secret);
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db.Prepare("INSERT INTO tokens(id, role, secret_hash, description, created_at, expires_at) "
                 "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
  stmt.Bind(1, token.info.id)
      .Bind(2, RoleName(role))
      .Bind(3, Sha256Hex(secret))
      .Bind(4, description)
      .Bind(5, now_ms);
  if (token.info.expires_at_ms > 0) {
    stmt.Bind(6, token.info.expires_at_ms);
  } else {
    stmt.BindNull(6);
  }
  RETURN_IF_ERROR(stmt.Run());
  return token;
}

absl::StatusOr<std::vector<TokenInfo>> ListTokens(db::Database& db) {
  ASSIGN_OR_RETURN(db::Statement stmt,
                   db.Prepare("SELECT id, role, description, created_at, COALESCE(expires_at, 0), "
                              "COALESCE(revoked_at, 0) FROM tokens ORDER BY created_at"));
  std::vector<TokenInfo> out;
  while (true) {
    ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    TokenInfo t;
    t.id = stmt.Text(0);
    t.role = stmt.Text(1) == "admin" ? Role::kAdmin : Role::kAgent;
    t.description = stmt.Text(2);
    t.created_at_ms = stmt.Int(3);
    t.expires_at_ms = stmt.Int(4);
    t.revoked_at_ms = stmt.Int(5);
    out.push_back(std::move(t));
  }
  return out;
}

absl::Status RevokeToken(db::Database& db, const std::string& id, int64_t now_ms) {
  ASSIGN_OR_RETURN(
      db::Statement stmt,
      db.Prepare("UPDATE tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL"));
  RETURN_IF_ERROR(stmt.Bind(1, id).Bind(2, now_ms).Run());
  if (db.Changes() != 1) {
    return absl::NotFoundError(absl::StrCat("no live token with id '", id, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenInfo> VerifyToken(db::Database& db, const std::string& plaintext,
                                      int64_t now_ms) {
  // ladder_<8 hex id>_<48 hex secret>
  const auto refused = absl::UnauthenticatedError("token refused (unknown, revoked or expired)");
  if (plaintext.size() != 7 + 8 + 1 + 48 || plaintext.compare(0, 7, "ladder_") != 0 ||
      plaintext[15] != '_') {
    return absl::UnauthenticatedError("malformed token (expected ladder_<id>_<secret>)");
  }
  const std::string id = plaintext.substr(7, 8);
  const std::string secret = plaintext.substr(16);
  ASSIGN_OR_RETURN(
      db::Statement * stmt,
      db.Cached("SELECT role, secret_hash, description, created_at, COALESCE(expires_at, 0), "
                "COALESCE(revoked_at, 0) FROM tokens WHERE id = ?1"));
  stmt->Bind(1, id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  // Hash even when the id is unknown, so timing does not reveal which ids exist.
  const std::string hash = Sha256Hex(secret);
  if (!row) return refused;
  TokenInfo info;
  info.id = id;
  info.role = stmt->Text(0) == "admin" ? Role::kAdmin : Role::kAgent;
  info.description = stmt->Text(2);
  info.created_at_ms = stmt->Int(3);
  info.expires_at_ms = stmt->Int(4);
  info.revoked_at_ms = stmt->Int(5);
  const std::string stored_hash = stmt->Text(1);
  stmt->Reset();
  if (!ConstantTimeEquals(hash, stored_hash)) return refused;
  if (info.revoked_at_ms != 0) return refused;
  if (info.expires_at_ms != 0 && info.expires_at_ms <= now_ms) return refused;
  return info;
}

absl::Status SetSessionCredential(db::Database& db, const std::string& session_id,
                                  const SessionCredential& credential) {
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db.Cached("UPDATE sessions SET credential_hash = ?2, token_id = ?3, "
                             "registration_nonce_hash = ?4, called_in = ?5 WHERE id = ?1"));
  RETURN_IF_ERROR(stmt->Bind(1, session_id)
                      .Bind(2, credential.hash)
                      .Bind(3, credential.token_id)
                      .Bind(4, credential.nonce_hash)
                      .Bind(5, credential.called_in ? 1 : 0)
                      .Run());
  if (db.Changes() != 1) {
    return absl::NotFoundError(absl::StrCat("unknown session ", session_id));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SessionCredential>> LoadSessionCredential(
    db::Database& db, const std::string& session_id) {
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db.Cached("SELECT credential_hash, token_id, registration_nonce_hash, "
                             "called_in FROM sessions WHERE id = ?1"));
  stmt->Bind(1, session_id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  if (!row || stmt->Text(0).empty()) {
    stmt->Reset();
    return std::optional<SessionCredential>();
  }
  SessionCredential credential{stmt->Text(0), stmt->Text(1), stmt->Text(2), stmt->Int(3) != 0};
  stmt->Reset();
  return std::optional<SessionCredential>(std::move(credential));
}

absl::Status MarkSessionCalledIn(db::Database& db, const std::string& session_id) {
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db.Cached("UPDATE sessions SET called_in = 1 WHERE id = ?1"));
  return stmt->Bind(1, session_id).Run();
}

absl::StatusOr<std::optional<std::string>> SessionWithCredentialHash(db::Database& db,
                                                                     const std::string& hash) {
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db.Cached("SELECT id FROM sessions WHERE credential_hash = ?1 AND "
                             "credential_hash <> '' LIMIT 1"));
  stmt->Bind(1, hash);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  std::optional<std::string> id;
  if (row) id = stmt->Text(0);
  stmt->Reset();
  return id;
}

absl::StatusOr<bool> TokenRevoked(db::Database& db, const std::string& token_id) {
  ASSIGN_OR_RETURN(db::Statement * stmt,
                   db.Cached("SELECT COALESCE(revoked_at, 0) FROM tokens WHERE id = ?1"));
  stmt->Bind(1, token_id);
  ASSIGN_OR_RETURN(bool row, stmt->Step());
  const bool revoked = !row || stmt->Int(0) != 0;
  stmt->Reset();
  return revoked;
}

}  // namespace ladder::db
